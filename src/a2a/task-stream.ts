/**
 * A task's events for one open stream: read from the task's event log (then its live tail) after a position,
 * until an event ends the stream. The stream's cursor records, for each event yielded, its log position (the SSE
 * `id:`) and whether it closes the stream (0.3 marks it `final`); the RPC core reads both as it writes frames.
 */
import type { Pool } from 'pg';
import { closesStream, lastEvent } from '../events/event-log';
import { followEvents } from '../events/follow';
import type { EventHub } from '../events/hub';
import { isTerminal } from '../../workflows/task-state';
import type { StreamEvent } from './wire';

/**
 * Where a stream ends: at the end of the turn (a terminal or interrupted state: a streaming send, §3.1.2 and §11.7), or
 * at the end of the task (a terminal state only: SubscribeToTask, §3.1.6, so a follow-up sent by anyone shows on it).
 */
export type StreamEnd = 'turn' | 'task';

export interface StreamLimits {
  /** Open streams allowed on one task. */
  maxPerTask: number;
  /** Open streams allowed in this process. */
  maxTotal: number;
}

/**
 * One streaming call's position: what the client resumes from, when it went away, and the log position and
 * kind of the event just yielded.
 */
export interface StreamCursor {
  lastEventId?: number;
  signal: AbortSignal;
  seq: number;
  closing: boolean;
  /**
   * Called once the stream is set up and nothing can refuse it any more, before its first event: the transport may
   * open the response now, so a stream that waits (resumed at the head of a task waiting for input) is kept alive.
   */
  opened?: () => void;
}

/** A cap on open streams was reached (the transport answers HTTP 429). */
export class StreamLimitError extends Error {}

export interface TaskStreamDeps {
  pool: Pool;
  hub: EventHub;
  streamLimits: StreamLimits;
}

/** Refuses another stream on a task that has as many open as SWITCHBOARD_MAX_STREAMS_PER_TASK allows. */
export function checkStreamCap(deps: TaskStreamDeps, tenant: string, taskId: string): void {
  const { maxPerTask } = deps.streamLimits;
  if (deps.hub.readers(tenant, taskId) >= maxPerTask) {
    throw new StreamLimitError(`Task ${taskId} already has ${maxPerTask} open streams (SWITCHBOARD_MAX_STREAMS_PER_TASK); close one or retry later`);
  }
}

/**
 * The task's logged events after `afterSeq` until one ends the stream: a terminal one; with `until: 'turn'`, an
 * interrupted one too, when it is the newest.
 * @param stop ends the stream early (besides the client leaving, cursor.signal).
 */
export async function* followTask(
  deps: TaskStreamDeps,
  cursor: StreamCursor,
  tenant: string,
  taskId: string,
  afterSeq: number,
  until: StreamEnd,
  stop?: AbortSignal,
): AsyncGenerator<StreamEvent, void, undefined> {
  checkStreamCap(deps, tenant, taskId);
  const { pool } = deps;
  const ends = until === 'turn' ? closesStream : endsTask;
  // A reconnect after the stream's last event: if that event closed the stream, nothing more is coming.
  const last = await lastEvent(pool, tenant, taskId);
  if (last && afterSeq >= last.seq && ends(last.event)) return;
  // A replay goes through earlier turns: an input-required the log has already moved past does not end it
  // (Last-Event-ID: n means every event after n); only the newest one, or a terminal one, does.
  const head = last?.seq ?? 0;
  const signal = stop ? AbortSignal.any([cursor.signal, stop]) : cursor.signal;
  cursor.opened?.();
  for await (const e of followEvents({ pool, hub: deps.hub, tenant, taskId, afterSeq, signal })) {
    cursor.seq = e.seq;
    cursor.closing = endsTask(e.event) || (ends(e.event) && e.seq >= head);
    yield e.event;
    if (cursor.closing) return;
  }
}

/** A status update to a terminal state: nothing can follow it in the log. */
function endsTask(e: StreamEvent): boolean {
  return 'statusUpdate' in e && isTerminal(e.statusUpdate.status.state);
}
