/** How the task workflow words what went wrong (deterministic helpers, no I/O). */
import { ActivityFailure, ApplicationFailure, TimeoutFailure } from '@temporalio/workflow';
import type { AgentRpcError } from './types';

/** The most specific reason Temporal recorded, e.g. the agent's JSON-RPC error or "timed out after 3 attempts". */
export function describeFailure(err: unknown): string {
  if (err instanceof ActivityFailure && err.cause) {
    if (err.cause instanceof TimeoutFailure) return `the agent call timed out (${err.cause.timeoutType})`;
    return err.cause.message;
  }
  return err instanceof Error ? err.message : String(err);
}

/**
 * The agent call ran out of time: an exchange with the agent on every attempt (`AgentTimeout`, raised by the
 * forwarding activity), the agent's task past `retry.taskTimeoutMs`, or Temporal's own timeouts.
 */
export const isTimeout = (err: unknown): boolean =>
  err instanceof ActivityFailure &&
  (err.cause instanceof TimeoutFailure || (err.cause instanceof ApplicationFailure && err.cause.type === 'AgentTimeout'));

export function humanDuration(ms: number): string {
  if (ms % 86_400_000 === 0) return `${ms / 86_400_000} day(s)`;
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000} hour(s)`;
  if (ms % 60_000 === 0) return `${ms / 60_000} minute(s)`;
  return `${ms / 1000} second(s)`;
}

/** The agent's JSON-RPC error behind a failed agent call (activities/forward-message.ts's classify puts it in the details). */
export function agentErrorOf(err: unknown): AgentRpcError | undefined {
  if (!(err instanceof ActivityFailure) || !(err.cause instanceof ApplicationFailure)) return undefined;
  const found = (err.cause.details?.[0] as { agentError?: AgentRpcError } | undefined)?.agentError;
  return found && typeof found.code === 'number' && typeof found.message === 'string' ? { code: found.code, message: found.message } : undefined;
}

/**
 * The agent's task a failed forwarding call may have left running there: none when the activity itself failed the
 * turn for good (a non-retryable failure: it cancels a task it gives up on at the agent); else the task the last
 * attempt heartbeated (a timeout: its worker died), or the one the workflow knows (the agent's signal, or an earlier turn).
 */
export function leftRunningAtAgent(err: unknown, known: string | undefined): string | undefined {
  if (!(err instanceof ActivityFailure)) return undefined;
  if (err.cause instanceof ApplicationFailure && err.cause.nonRetryable) return undefined;
  const beat = err.cause instanceof TimeoutFailure ? (err.cause.lastHeartbeatDetails as { agentTaskId?: string } | undefined) : undefined;
  return (typeof beat?.agentTaskId === 'string' ? beat.agentTaskId : undefined) ?? known;
}
