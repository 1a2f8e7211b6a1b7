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
