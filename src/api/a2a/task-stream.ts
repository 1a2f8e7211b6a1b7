/**
 * A task's events for one open stream: read from the task's event log (then its live tail) after a position,
 * until an event ends the stream. The stream's cursor records, for each event yielded, its log position (the SSE
 * `id:`) and whether it closes the stream (0.3 marks it `final`); the RPC core reads both as it writes frames.
 */
import type { Pool } from 'pg';
import { closesStream, headSeq, lastEvent, snapshotAt } from '../../core/events/event-log';
import { followEvents } from '../../core/events/follow';
import type { EventHub } from '../../core/events/hub';
import { directAnswerOfEvent, isTerminal, keepsStreamOpen } from '../../../task/rules';
import type { StreamEvent, WireMessage, WireTask } from '../../../task/wire';
import type { TaskGateway } from '../../core/temporal/task-gateway';

/**
 * Where a stream ends: at the end of the turn (a terminal or interrupted state: a streaming send, §3.1.2 and §11.7); for
 * a client whose dialect marks the last event `final` (0.x), at the end of the turn unless the agent kept its own
 * stream open there (`final: false` at input-required: the seeds' coding agent), then at the next such end; or at the
 * end of the task (a terminal state only: SubscribeToTask, §3.1.6, so a follow-up sent by anyone shows on it).
 */
export type StreamEnd = 'turn' | 'final' | 'task';

/** An event of a new exchange's stream: the task's, or the agent's Message answer (followExchange). */
export type ExchangeEvent = StreamEvent | { message: WireMessage };

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

/** What the log-first reads need besides the log: the workflow (or projection) for a task the log has nothing of. */
export type TaskReadDeps = Pick<TaskStreamDeps, 'pool'> & { gateway: Pick<TaskGateway, 'get'> };

/**
 * The task as of its log's head, and that position: the log answers without a workflow query, which can take
 * seconds right after a worker restart.
 */
export async function taskAtHead(deps: TaskReadDeps, tenant: string, taskId: string): Promise<{ head: number; snapshot: WireTask }> {
  const head = await logHead(deps, tenant, taskId);
  const snapshot = (head > 0 ? await snapshotAt(deps.pool, tenant, taskId, head) : undefined) ?? (await deps.gateway.get(tenant, taskId));
  return { head, snapshot };
}

/** The position of the task's newest logged event (0 when none): a stream of what comes next starts after it. */
export function logHead(deps: Pick<TaskStreamDeps, 'pool'>, tenant: string, taskId: string): Promise<number> {
  return headSeq(deps.pool, tenant, taskId);
}

/** TaskNotFound unless the task exists: its event log says so, or else the workflow or projection. */
export async function requireTask(deps: TaskReadDeps, tenant: string, taskId: string): Promise<void> {
  if ((await logHead(deps, tenant, taskId)) > 0) return;
  await deps.gateway.get(tenant, taskId);
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
  const ends = until === 'task' ? endsTask : until === 'turn' ? closesStream : (e: StreamEvent) => closesStream(e) && !keepsStreamOpen(e);
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

/**
 * A new exchange's stream (a streaming send that starts a task), until the turn ends. Its first event, the submitted
 * task the gateway logged, waits for the next, which says how the agent took the message: as a task (its `working`
 * change, which the forwarding activity logs once the agent names its task), and the stream goes on as the task's;
 * or with a Message and no task (the task's final change, marked: directAnswerOfEvent), and the stream is that one
 * Message (§3.1.2 "Message-only stream"), at the log position of that change.
 */
export async function* followExchange(
  deps: TaskStreamDeps,
  cursor: StreamCursor,
  tenant: string,
  taskId: string,
  until: Exclude<StreamEnd, 'task'>,
  stop?: AbortSignal,
): AsyncGenerator<ExchangeEvent, void, undefined> {
  let held: { seq: number; event: StreamEvent } | undefined;
  let first = true;
  for await (const event of followTask(deps, cursor, tenant, taskId, 0, until, stop)) {
    if (first && 'task' in event) {
      first = false;
      held = { seq: cursor.seq, event };
      continue;
    }
    first = false;
    if (held) {
      const reply = directAnswerOfEvent(event);
      if (reply) {
        cursor.closing = true;
        yield { message: reply };
        return;
      }
      // The cursor names each event as it is yielded: the held one's position, then this one's again.
      const now = { seq: cursor.seq, closing: cursor.closing };
      const before = held;
      held = undefined;
      Object.assign(cursor, { seq: before.seq, closing: false });
      yield before.event;
      Object.assign(cursor, now);
    }
    yield event;
  }
}

/** A status update to a terminal state: nothing can follow it in the log. */
function endsTask(e: StreamEvent): boolean {
  return 'statusUpdate' in e && isTerminal(e.statusUpdate.status.state);
}
