/**
 * Telling the agent that its task is canceled, from the task workflow (workflows/task-workflow.ts): a client's cancel,
 * and the agent's task a failed turn left running there.
 */
import { isCancellation } from '@temporalio/workflow';
import { cancelThroughHub, isHubAgent } from './hub';
import { describeFailure } from './failures';
import { agentControl, agentControlAfterFailure } from './task-options';
import type { AgentTarget } from '../task/contracts';

/**
 * A client's cancel passed on to the agent's task (`agentTaskId`, unset when the agent has not named one, or its task
 * has ended): through the hub for a hub agent, else by the cancelAtAgent activity, retried for up to an hour.
 * @returns what the task's canceled status adds when the agent did not confirm (empty when it did, or was not asked).
 */
export async function cancelAtAgent(agent: AgentTarget, tenant: string, taskId: string, agentTaskId: string | undefined): Promise<string> {
  if (isHubAgent(agent)) {
    const untold = await cancelThroughHub(agent, tenant, taskId);
    return untold ? `; ${untold}` : '';
  }
  if (!agentTaskId) return '';
  try {
    await agentControl.cancelAtAgent({ endpoint: agent.endpoint, agentTaskId, tenant, agentId: agent.agentId });
    return '';
  } catch (cancelErr) {
    return `; the agent did not confirm the cancel (${describeFailure(cancelErr)})`;
  }
}

/** Cancels the agent's task of a failed turn, for a minute at most (the settlement waits); the task has failed either way. */
export async function cancelLeftRunning(agent: AgentTarget, tenant: string, agentTaskId: string): Promise<void> {
  try {
    await agentControlAfterFailure.cancelAtAgent({ endpoint: agent.endpoint, agentTaskId, tenant, agentId: agent.agentId });
  } catch (cancelErr) {
    if (isCancellation(cancelErr)) throw cancelErr;
  }
}
