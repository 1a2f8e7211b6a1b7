/**
 * Sorting a failed exchange with an agent into "retrying may help" and "it cannot succeed" (the forwarding activity's
 * retries and the workflow's NON_RETRYABLE_FORWARD_ERRORS follow it), and the failures the turn makes of its own.
 */
import { A2AError, isJsonRpcError } from '@a2a-js/sdk/errors';
import { ApplicationFailure } from '@temporalio/activity';
import { DatabaseError } from 'pg';
import * as grpc from '@grpc/grpc-js';
import { OutboundError } from '../../src/core/http/outbound';
import type { HttpTrace } from '../../src/core/agents/agent-client';
import type { AgentRpcError } from '../../task/contracts';

/** The longest Retry-After an agent's answer may impose on the next attempt. */
const MAX_RETRY_AFTER_MS = 5 * 60_000;

/**
 * A write of a task's log or projection that PostgreSQL refused, as the turn reports it: retryable (the next attempt
 * re-attaches to the agent's task, or sends the message again with its messageId), and never the agent's fault.
 */
export function writeFailed(what: string, err: unknown): ApplicationFailure {
  if (err instanceof ApplicationFailure) return err;
  return ApplicationFailure.retryable(`${what}: ${err instanceof Error ? err.message : String(err)}`, 'DatabaseUnavailable');
}

/** An exchange with the agent that ran out of time: retried like network trouble, reported as a timeout. */
export function timedOut(what: string, ms: number): ApplicationFailure {
  return ApplicationFailure.retryable(`the agent call timed out: no answer to ${what} within ${ms} ms (retry.attemptTimeoutMs)`, 'AgentTimeout');
}

/** The last failure of a task followed until the retry policy ran out: final, whatever its kind. */
export function gaveUp(failure: ApplicationFailure, agentTaskId: string, failures: number): ApplicationFailure {
  const why = failure.nonRetryable ? '' : ` (${failures} exchanges in a row failed)`;
  return ApplicationFailure.create({
    message: `${failure.message}; gave up following the agent's task ${agentTaskId}${why}`,
    type: failure.type ?? undefined,
    nonRetryable: true,
    details: failure.details ?? undefined,
  });
}

/**
 * Sorts a failure into "retrying may help" (network trouble, 5xx, 408/429; gRPC UNAVAILABLE and the like) and
 * "it cannot succeed" (a JSON-RPC error, another 4xx, an unreadable answer, a refused address; gRPC
 * INVALID_ARGUMENT and the like). The non-retryable types are listed in NON_RETRYABLE_FORWARD_ERRORS in the workflow.
 */
export function classify(err: unknown, trace: HttpTrace): ApplicationFailure {
  if (err instanceof ApplicationFailure) return err; // already classified here (e.g. a stream that ended without a task)
  // A PostgreSQL error met while the agent's answer was being handled is the gateway's, never the agent's.
  if (databaseError(err)) return writeFailed('PostgreSQL failed while the turn was handled', err);
  const outbound = findOutboundError(err);
  if (outbound) {
    const transient = outbound.code === 'TIMEOUT' || outbound.code === 'NETWORK';
    return ApplicationFailure.create({ message: outbound.message, type: transient ? 'AgentUnavailable' : 'AgentUnreachable', nonRetryable: !transient });
  }
  const message = err instanceof Error ? err.message : String(err);
  // OK: the call itself succeeded, and what failed was reading its answer (as after an HTTP 200, below).
  if (trace.grpcCode !== undefined && trace.grpcCode !== grpc.status.OK) return classifyGrpc(trace.grpcCode, trace.grpcDetails ?? message);
  // A connection cut mid-answer (often mid-stream, after a 200) is network trouble, not a bad answer.
  if (connectionLost(err)) return ApplicationFailure.retryable(`the connection to the agent was lost: ${message}`, 'AgentUnavailable');
  if (trace.grpcCode === grpc.status.OK) return ApplicationFailure.nonRetryable(`the agent's answer is not a valid A2A response: ${message}`, 'InvalidAgentResponse');
  if (trace.lastStatus !== undefined && trace.lastStatus < 300 && (err instanceof A2AError || jsonRpcErrorOf(err))) {
    // The agent's own JSON-RPC error (in a stream, wrapped by the SDK), kept whole: the workflow passes it to
    // the client of a new task as is.
    const rpc = jsonRpcErrorOf(err);
    return ApplicationFailure.create({
      message: `the agent answered with an error: ${rpc ? `${rpc.message} (JSON-RPC ${rpc.code})` : message}`,
      type: 'AgentRejected',
      nonRetryable: true,
      ...(rpc ? { details: [{ agentError: rpc }] } : {}),
    });
  }
  const status = trace.lastStatus;
  if (status === undefined) return ApplicationFailure.retryable(`the agent could not be reached: ${message}`, 'AgentUnavailable');
  if (status >= 500 || status === 408 || status === 429) {
    // The agent says when to come back (429, 503): the next attempt waits that long instead of the backoff's
    // interval, within reason (an agent cannot park a task for a day with one header).
    const wait = trace.retryAfterMs;
    return ApplicationFailure.create({
      message: `the agent answered HTTP ${status}${wait !== undefined ? ` (Retry-After ${Math.round(wait / 1000)} s)` : ''}`,
      type: 'AgentUnavailable',
      ...(wait !== undefined ? { nextRetryDelay: Math.min(wait, MAX_RETRY_AFTER_MS) } : {}),
    });
  }
  if (status >= 400) return ApplicationFailure.nonRetryable(`the agent refused the request with HTTP ${status}: ${message}`, 'AgentRejected');
  return ApplicationFailure.nonRetryable(`the agent's answer is not a valid A2A response: ${message}`, 'InvalidAgentResponse');
}

/**
 * gRPC status codes that mean "try again" (the gRPC counterparts of network trouble, 5xx, 408 and 429):
 * the server could not take the call now, did not finish it in time, or failed inside (UNKNOWN is what a
 * handler's uncaught exception becomes, INTERNAL a broken frame). Every other code is an answer about the
 * request itself (INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION, PERMISSION_DENIED, UNAUTHENTICATED,
 * UNIMPLEMENTED…) and is not retried.
 */
const RETRYABLE_GRPC = new Set<number>([
  grpc.status.CANCELLED, grpc.status.UNKNOWN, grpc.status.DEADLINE_EXCEEDED, grpc.status.RESOURCE_EXHAUSTED,
  grpc.status.ABORTED, grpc.status.INTERNAL, grpc.status.UNAVAILABLE,
]);

function classifyGrpc(code: number, details: string): ApplicationFailure {
  const name = grpc.status[code] ?? String(code);
  // grpc-js's own limit on what it reads (the outbound size cap), not the agent's: as an HTTP body over the cap.
  if (code === grpc.status.RESOURCE_EXHAUSTED && /larger than max/i.test(details)) {
    return ApplicationFailure.nonRetryable(`the agent's answer exceeds the size limit: ${details}`, 'AgentUnreachable');
  }
  if (RETRYABLE_GRPC.has(code)) return ApplicationFailure.retryable(`the agent answered gRPC ${name}: ${details}`, 'AgentUnavailable');
  return ApplicationFailure.nonRetryable(`the agent refused the request with gRPC ${name}: ${details}`, 'AgentRejected');
}

const LOST_CONNECTION_CODES = new Set(['UND_ERR_SOCKET', 'UND_ERR_CLOSED', 'ECONNRESET', 'EPIPE', 'ECONNABORTED']);

function connectionLost(err: unknown): boolean {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (LOST_CONNECTION_CODES.has((e as { code?: string }).code ?? '')) return true;
    if (e instanceof TypeError && e.message === 'terminated') return true; // undici's body stream, cut
  }
  return false;
}

/** The agent's JSON-RPC error (code and message) behind a failure, also when a stream wrapped it. */
function jsonRpcErrorOf(err: unknown): AgentRpcError | undefined {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (isJsonRpcError(e)) return { code: e.envelopeCode, message: e.message };
  }
  return undefined;
}

/** pg's connection-level failures (its own words: a server error is a DatabaseError). */
const PG_CLIENT_FAILURE = /^(Connection terminated|Client has encountered a connection error|timeout exceeded when trying to connect|Client was closed and is not queryable)/;

/** Whether `err` (or what it wraps) came from PostgreSQL or the pg client rather than from the agent. */
function databaseError(err: unknown): boolean {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof DatabaseError) return true;
    if (e instanceof Error && PG_CLIENT_FAILURE.test(e.message)) return true;
  }
  return false;
}

function findOutboundError(err: unknown): OutboundError | undefined {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof OutboundError) return e;
  }
  return undefined;
}
