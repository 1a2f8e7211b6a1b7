import { Task } from '@a2a-js/sdk';
import type { AgentEndpoint } from '../task/contracts';
import { agentAnswered, agentClient, type AgentLink, type HttpTrace } from '../src/core/agents/agent-client';
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
export async function cancelAtAgent(link: AgentLink, args: CancelAtAgentArgs, callTimeoutMs?: number): Promise<string> {
  const trace: HttpTrace = {};
  try {
    const client = await agentClient(args.endpoint, link, trace, { callTimeoutMs });
    const task = Task.toJSON(await client.cancelTask({ tenant: '', id: args.agentTaskId, metadata: undefined })) as { status?: { state?: string } };
    return `agent task ${args.agentTaskId} is ${task.status?.state ?? 'unknown'}`;
  } catch (err) {
    if (agentAnswered(err, trace)) return `the agent answered: ${(err as Error).message}`;
    throw classify(err, trace);
  }
}
