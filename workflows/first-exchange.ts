/**
 * A blocking turn's first exchange as the task workflow asks for it (workflows/task-workflow.ts): what it is asked to
 * do beside the turn, by level, and how long the workflow waits before its next attempt when it failed.
 */
import { ApplicationFailure, TimeoutFailure } from '@temporalio/workflow';
import { atLevel } from './levels';
import { causeOf } from './failures';
import { NON_RETRYABLE_FORWARD_ERRORS, type firstExchanges } from './task-options';
import type { AgentRetryPolicy, SettleAtAnswer } from '../task/contracts';

export type FirstExchangeArgs = Parameters<typeof firstExchanges.forwardFirstExchange>[0];

/**
 * What the first exchange is asked to do beside the turn. Level 5: leave a terminal answer's children to count and its
 * relayed events to log to finishTask. Level 7: a fresh task's first turn (`settle` given: the turn's start record is
 * in `args`, nothing else is queued, no cancel came) finishes the task itself when the agent ends it at once
 * (ForwardArgs.settle): one workflow task for the task.
 */
export function firstExchangeArgs(args: FirstExchangeArgs, level: number | undefined, settle?: SettleAtAnswer): FirstExchangeArgs {
  if (!atLevel(level, 5)) return args;
  if (!atLevel(level, 7) || !settle || !args.record) return { ...args, atFinish: true };
  return { ...args, atFinish: true, settle };
}

/**
 * A failed first exchange: undefined when retrying cannot help (the turn fails, as the activity's would), else the
 * pause before the activity's next attempt: the agent's Retry-After (a local activity's failure carries it in its
 * details: forwardFirstExchange), or the policy's first interval.
 */
export function firstRetryDelay(err: unknown, retry: AgentRetryPolicy): number | undefined {
  const cause = causeOf(err);
  const retryable =
    cause instanceof TimeoutFailure || (cause instanceof ApplicationFailure && !cause.nonRetryable && !NON_RETRYABLE_FORWARD_ERRORS.includes(cause.type ?? ''));
  if (!retryable || retry.maxAttempts <= 1) return undefined;
  const retryAfter = cause instanceof ApplicationFailure ? (cause.details?.[0] as { retryAfterMs?: number } | undefined)?.retryAfterMs : undefined;
  return typeof retryAfter === 'number' ? retryAfter : retry.initialIntervalMs;
}
