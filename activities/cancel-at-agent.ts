import { A2AError } from '@a2a-js/sdk/errors';
import { Task } from '@a2a-js/sdk';
import type { AgentEndpoint } from '../workflows/types';
import { agentClient, type HttpTrace } from './agent-client';
import { classify } from './forward-message';

export interface CancelAtAgentArgs {
  endpoint: AgentEndpoint;
  agentTaskId: string;
  /** Whose credential the cancel presents (optional: workflows started before credentials existed pass neither). */
  tenant?: string;
  agentId?: string;
}

/**
 * Asks the agent to cancel its task. Any A2A answer ends the activity (including "not cancelable" or
 * "not found": the agent has answered); network trouble and 5xx are retried by Temporal.
 * @returns the agent's answer in a sentence, for the workflow's history.
 */
export async function cancelAtAgent(fetchImpl: typeof fetch, args: CancelAtAgentArgs): Promise<string> {
  const trace: HttpTrace = {};
  try {
    const client = await agentClient(args.endpoint, fetchImpl, trace);
    const task = Task.toJSON(await client.cancelTask({ tenant: '', id: args.agentTaskId, metadata: undefined })) as { status?: { state?: string } };
    return `agent task ${args.agentTaskId} is ${task.status?.state ?? 'unknown'}`;
  } catch (err) {
    if (err instanceof A2AError && (trace.lastStatus ?? 500) < 300) return `the agent answered: ${err.message}`;
    throw classify(err, trace);
  }
}
