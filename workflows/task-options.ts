/**
 * How the task workflow calls its activities: every proxy and its timeouts and retries, in one place.
 */
import { ActivityCancellationType, proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { createActivities } from '../activities';
import { DEFAULT_TASK_TIMEOUT_MS, FIRST_EXCHANGE_MS, type AgentTarget } from '../task/contracts';

type Activities = ReturnType<typeof createActivities>;

/** Failures of the forwarding activity that retrying cannot fix (see activities/forwarding/classify.ts). */
export const NON_RETRYABLE_FORWARD_ERRORS = ['AgentRejected', 'InvalidAgentResponse', 'AgentUnreachable'];

/** Bookkeeping writes are short and must eventually succeed: local activities, retried until PostgreSQL answers. */
export const bookkeeping = proxyLocalActivities<Activities>({
  startToCloseTimeout: '10 seconds',
  retry: { initialInterval: '200 milliseconds', backoffCoefficient: 2, maximumInterval: '30 seconds' },
});

/** Canceling at the agent is retried until the agent answers, for at most an hour. */
export const agentControl = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  scheduleToCloseTimeout: '1 hour',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

/** After a lost turn the agent is asked to cancel for a minute at most: the task's settlement waits for it. */
export const agentControlAfterFailure = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  scheduleToCloseTimeout: '1 minute',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '10 seconds' },
});

/**
 * A blocking turn's first exchange with the agent, inside the workflow task that starts the turn (see
 * forwardFirstExchange): one attempt, which ends within FIRST_EXCHANGE_MS (plus a PostgreSQL write in flight) with
 * the agent's answer or a hand-over; the timeout is a backstop. A failure is the turn's first attempt (forward()).
 */
export const firstExchanges = proxyLocalActivities<Activities>({
  startToCloseTimeout: 3 * FIRST_EXCHANGE_MS + 15_000,
  retry: { maximumAttempts: 1 },
  cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
});

/**
 * The forwarding activity, by the agent's retry policy. The policy bounds each exchange with the agent inside the
 * activity, not the agent's work: an attempt follows the agent's task for up to taskTimeoutMs (the activity ends
 * itself then, canceling it at the agent; Temporal's timeouts are the backstop), and a dead worker is noticed by the
 * heartbeat timeout. The policy's maxAttempts counts the agent's failures only, so the activity counts them itself
 * (in its heartbeat details, activities/forwarding/turn.ts TurnProgress) and fails for good at the last: Temporal
 * retries without a count, so an attempt handed over by a stopping worker, or lost with a dead one, is never one of
 * the agent's. `laterAttempts`: the attempts after a first exchange that failed (the agent's first failure, counted
 * by `attemptsBefore`): backoff from the policy's second interval.
 */
export function forwardingFor(agent: AgentTarget): { forwarding: Activities; laterAttempts: Activities } {
  const attemptLimit = (agent.retry.taskTimeoutMs ?? DEFAULT_TASK_TIMEOUT_MS) + 2 * agent.retry.attemptTimeoutMs + 10_000;
  const options = {
    startToCloseTimeout: attemptLimit,
    // The turn's deadline is counted from its first attempt (Turn.checkDeadline): however often it is handed over,
    // the turn ends by then, and this is the backstop for all of its attempts together.
    scheduleToCloseTimeout: attemptLimit + 60_000,
    heartbeatTimeout: Math.min(10_000, agent.retry.attemptTimeoutMs),
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    retry: {
      initialInterval: agent.retry.initialIntervalMs,
      backoffCoefficient: agent.retry.backoffCoefficient,
      nonRetryableErrorTypes: NON_RETRYABLE_FORWARD_ERRORS,
    },
  };
  return {
    forwarding: proxyActivities<Activities>(options),
    laterAttempts: proxyActivities<Activities>({
      ...options,
      retry: {
        ...options.retry,
        initialInterval: agent.retry.initialIntervalMs * agent.retry.backoffCoefficient,
        maximumInterval: 100 * agent.retry.initialIntervalMs, // Temporal's default for the policy itself
      },
    }),
  };
}
