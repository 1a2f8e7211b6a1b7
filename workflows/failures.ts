/** How the task workflow words what went wrong (deterministic helpers, no I/O). */
import { ActivityFailure, ApplicationFailure, TimeoutFailure, patched } from '@temporalio/workflow';
import { RESTARTS_ARE_NOT_THE_AGENTS } from './levels';
import type { AgentRpcError } from '../task/contracts';

/**
 * Why an agent call failed: an activity's failure wraps it (ActivityFailure), a local activity's arrives bare (the
 * turn's first exchange: workflows/task-workflow.ts).
 */
export function causeOf(err: unknown): Error | undefined {
  if (err instanceof ActivityFailure) return err.cause;
  return err instanceof ApplicationFailure || err instanceof TimeoutFailure ? err : undefined;
}

/** The most specific reason Temporal recorded, e.g. the agent's JSON-RPC error or "timed out after 3 attempts". */
export function describeFailure(err: unknown): string {
  const cause = causeOf(err);
  if (cause) {
    if (cause instanceof TimeoutFailure) return `the agent call timed out (${cause.timeoutType})`;
    return cause.message;
  }
  return err instanceof Error ? err.message : String(err);
}

/**
 * The agent call ran out of time: an exchange with the agent on every attempt (`AgentTimeout`, raised by the
 * forwarding activity), the agent's task past `retry.taskTimeoutMs`, or Temporal's own timeouts.
 */
export const isTimeout = (err: unknown): boolean => {
  const cause = causeOf(err);
  return cause instanceof TimeoutFailure || (cause instanceof ApplicationFailure && cause.type === 'AgentTimeout');
};

/** The agent call failed because PostgreSQL refused the turn's writes on its every attempt (src/core/events/event-sink.ts writeFailed). */
export function lostToDatabase(err: unknown): boolean {
  const cause = causeOf(err);
  return cause instanceof ApplicationFailure && cause.type === 'DatabaseUnavailable';
}

/**
 * The agent call ran out of attempts to Switchboard's own restarts: its attempts were handed over by stopping workers
 * (`HandedOver`; `WorkerShutdown` when a release before hand-overs ran out of grace time) or lost with dead ones (a
 * heartbeat timeout). Only an activity scheduled by a release that counted those as attempts (a limited
 * `maximumAttempts`) ends so; today's retries them without a count (workflows/task-options.ts forwardingFor).
 */
export function lostToRestarts(err: unknown): boolean {
  const cause = causeOf(err);
  const restarts = cause instanceof TimeoutFailure ? cause.timeoutType === 'HEARTBEAT' : cause instanceof ApplicationFailure && (cause.type === 'HandedOver' || cause.type === 'WorkerShutdown');
  // (A marker where this happens, so the histories where it did not replay as they ran: workflows/levels.ts.)
  return restarts && patched(RESTARTS_ARE_NOT_THE_AGENTS);
}

export function humanDuration(ms: number): string {
  if (ms % 86_400_000 === 0) return `${ms / 86_400_000} day(s)`;
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000} hour(s)`;
  if (ms % 60_000 === 0) return `${ms / 60_000} minute(s)`;
  return `${ms / 1000} second(s)`;
}

/** The agent's JSON-RPC error behind a failed agent call (activities/forward-message.ts's classify puts it in the details). */
export function agentErrorOf(err: unknown): AgentRpcError | undefined {
  const cause = causeOf(err);
  if (!(cause instanceof ApplicationFailure)) return undefined;
  const found = (cause.details?.[0] as { agentError?: AgentRpcError } | undefined)?.agentError;
  return found && typeof found.code === 'number' && typeof found.message === 'string' ? { code: found.code, message: found.message } : undefined;
}

/**
 * The agent's task a failed forwarding call may have left running there: none when the activity itself failed the
 * turn for good (a non-retryable failure: it cancels a task it gives up on at the agent); else the task the last
 * attempt heartbeated (a timeout: its worker died), or the one the workflow knows (the agent's signal, or an earlier turn).
 */
export function leftRunningAtAgent(err: unknown, known: string | undefined): string | undefined {
  const cause = causeOf(err);
  if (!cause) return undefined;
  if (cause instanceof ApplicationFailure && cause.nonRetryable) return undefined;
  const beat = cause instanceof TimeoutFailure ? (cause.lastHeartbeatDetails as { agentTaskId?: string } | undefined) : undefined;
  return (typeof beat?.agentTaskId === 'string' ? beat.agentTaskId : undefined) ?? known;
}
