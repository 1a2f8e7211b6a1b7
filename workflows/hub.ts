/**
 * Forwarding a turn to an agent connected to the WebSocket hub (endpoint `ws-agent://<agentId>`). Its socket
 * lives in one Switchboard process, and only that process's hub worker polls its task queue; so each attempt
 * first asks which queue holds the agent now (waiting for it to connect), then runs the forwarding there.
 * Retries are this loop's, not Temporal's, because a retry must look for the agent again: after a disconnect or
 * a dead process it is on another queue. The agent's retry policy (attempts, backoff, attempt timeout) applies.
 */
import { ActivityCancellationType, ApplicationFailure, isCancellation, proxyActivities, proxyLocalActivities, sleep } from '@temporalio/workflow';
import { ActivityFailure } from '@temporalio/common';
import type { createActivities, HubActivities } from '../activities';
import type { ForwardArgs } from '../activities/forward-message';
import type { AgentTarget, ForwardResult } from '../task/contracts';
import { describeFailure } from './failures';

export const HUB_URL_SCHEME = 'ws-agent:';

export const isHubAgent = (agent: AgentTarget): boolean => agent.endpoint.url.startsWith(`${HUB_URL_SCHEME}//`);

/** A process that died with the turn: its queue has no poller, so the attempt is moved on after this long. */
const SCHEDULE_TO_START_MS = 10_000;

/**
 * Tells a hub agent that its task was canceled (tasks/cancel), mid-turn or between turns, if it is connected within
 * a few seconds; else the hub tells it when it connects again (the canceled task's turns are marked in PostgreSQL,
 * migration 031). @returns what to add to the task's status when it could not be told now.
 */
export async function cancelThroughHub(agent: AgentTarget, tenant: string, taskId: string): Promise<string | undefined> {
  try {
    const taskQueue = await hubQueue(tenant, agent.agentId, 5_000);
    await proxyActivities<HubActivities>({ taskQueue, scheduleToStartTimeout: SCHEDULE_TO_START_MS, startToCloseTimeout: 10_000, retry: { maximumAttempts: 1 } })
      .hubCancel({ tenant, agentId: agent.agentId, taskId });
    return undefined;
  } catch (err) {
    return `the agent was not told yet (${describeFailure(err)}); it is sent tasks/cancel when it connects again`;
  }
}

type Activities = ReturnType<typeof createActivities>;

/** The queue of the process holding the agent's socket, waiting up to `waitMs` for the agent to connect. */
async function hubQueue(tenant: string, agentId: string, waitMs: number): Promise<string> {
  // Connected now (the usual case): one indexed read in a local activity, no round trip through a task queue.
  const now = await proxyLocalActivities<Activities>({ startToCloseTimeout: 5_000, retry: { maximumAttempts: 1 } })
    .hubQueueOf({ tenant, agentId, waitMs: 0 })
    .catch((err: unknown) => {
      if (isCancellation(err)) throw err;
      return undefined;
    });
  if (now) return now;
  // Not connected: wait for it in a regular activity (heartbeating, so a dead worker's wait is noticed).
  return proxyActivities<Activities>({ startToCloseTimeout: waitMs + 10_000, heartbeatTimeout: 10_000, retry: { maximumAttempts: 1 } }).hubQueueOf({ tenant, agentId, waitMs });
}

export async function forwardThroughHub(agent: AgentTarget, args: ForwardArgs, nonRetryable: readonly string[]): Promise<ForwardResult> {
  const { retry } = agent;
  for (let attempt = 1; ; attempt++) {
    try {
      const taskQueue = await hubQueue(args.tenant, agent.agentId, retry.attemptTimeoutMs);
      const hub = proxyActivities<HubActivities>({
        taskQueue,
        scheduleToStartTimeout: SCHEDULE_TO_START_MS,
        startToCloseTimeout: retry.attemptTimeoutMs,
        heartbeatTimeout: Math.min(10_000, retry.attemptTimeoutMs),
        cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        retry: { maximumAttempts: 1 },
      });
      return await hub.hubForward(args);
    } catch (err) {
      if (isCancellation(err)) throw err;
      const type = err instanceof ActivityFailure && err.cause instanceof ApplicationFailure ? err.cause.type : undefined;
      if (attempt >= retry.maxAttempts || (type && nonRetryable.includes(type))) throw err;
      await sleep(Math.round(retry.initialIntervalMs * retry.backoffCoefficient ** (attempt - 1)));
    }
  }
}
