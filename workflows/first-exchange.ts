/**
 * A blocking turn's first exchange as the task workflow asks for it (workflows/task-workflow.ts): what it is asked to
 * do beside the turn, by level; what its answer leaves the task's end to do (FirstEnd); and how long the workflow waits
 * before its next attempt when it failed.
 */
import { ApplicationFailure, TimeoutFailure } from '@temporalio/workflow';
import { atLevel } from './levels';
import { causeOf } from './failures';
import { NON_RETRYABLE_FORWARD_ERRORS, type firstExchanges } from './task-options';
import type { AgentRetryPolicy, FirstAnswer, ForwardResult, NewEvent, SettleAtAnswer } from '../task/contracts';
import { isTerminal } from '../task/rules';

export type FirstExchangeArgs = Parameters<typeof firstExchanges.forwardFirstExchange>[0];

/**
 * What the first exchange is asked to do beside the turn. Level 5: leave a terminal answer's children to count and its
 * relayed events to log to finishTask. Level 7: a fresh task's first turn (`settle` given only then: the turn's start
 * record is in `args`, nothing else is queued, no cancel came) finishes the task itself when the agent ends it at once
 * (ForwardArgs.settle): one workflow task for the task.
 */
export function firstExchangeArgs(args: FirstExchangeArgs, level: number | undefined, settle?: SettleAtAnswer): FirstExchangeArgs {
  if (!atLevel(level, 5)) return args;
  if (!atLevel(level, 7) || !settle) return { ...args, atFinish: true };
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

/** What a first exchange that answered leaves the task's end to do (TaskMachine.finish), as one value. */
export interface FirstEnd {
  /**
   * The answer came in the workflow task that is still running. A local activity's result is durable only once its
   * workflow task completes, and the server refuses a completion (or a continue-as-new) while a signal arrived
   * meanwhile, running the workflow task, and the agent call, again: so the workflow does not end in it (a 1 ms timer
   * ends it first). False for a task the first exchange finished, whose answer it kept for such a rerun (level 7).
   */
  inWorkflowTask: boolean;
  /** The child tasks the agent started, linked in PostgreSQL: the workflow waits for the links it has not heard of. */
  childrenLinked: number;
  /** Level 5: finishTask counts the children, and logs `relayed` (the events the first exchange held back). */
  countAtFinish: boolean;
  relayed?: NewEvent[];
  /** The first exchange wrote the final record and the settlement (levels 3 and 7). */
  settled: boolean;
}

export function firstEndOf(first: ForwardResult & FirstAnswer, args: FirstExchangeArgs, level: number | undefined): FirstEnd {
  const settled = first.finish?.written === true;
  return {
    inWorkflowTask: !(atLevel(level, 7) && settled),
    childrenLinked: first.childrenLinked ?? 0,
    countAtFinish: args.atFinish === true && isTerminal(first.state),
    ...(first.relayed ? { relayed: first.relayed } : {}),
    settled,
  };
}
