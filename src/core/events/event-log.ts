/**
 * The task event log in PostgreSQL: every event a client can receive about a task, numbered per task.
 * Writers (the workflow's bookkeeping, the forwarding activity) append; SSE streams, resubscribes and push
 * deliveries read `seq > cursor`. An event is committed here before anyone is sent it, so a reader that
 * knows its last seq can always get exactly the rest.
 */
import type { Pool } from 'pg';
import { prepared } from '../db/pool';
import { endsTurn } from '../../../task/rules';
import type { StreamEvent, WireArtifact, WireTask } from '../../../task/wire';
import type { NewEvent } from '../../../task/contracts';

export type { NewEvent };

export interface LoggedEvent {
  seq: number;
  event: StreamEvent;
}

/** The NOTIFY channel that tells other Switchboard processes a task has new events (payload: EventNotice, JSON built by switchboard_append_events). */
export const EVENTS_CHANNEL = 'switchboard_task_events';

export interface EventNotice {
  tenant: string;
  taskId: string;
  seq: number;
}

export const kindOf = (e: StreamEvent): 'task' | 'statusUpdate' | 'artifactUpdate' =>
  'task' in e ? 'task' : 'statusUpdate' in e ? 'statusUpdate' : 'artifactUpdate';

/** A status event in a terminal or interrupted state ends a stream (1.0 closes it; 0.3 marks it `final`). */
export function closesStream(e: StreamEvent): boolean {
  if (!('statusUpdate' in e)) return false;
  return endsTurn(e.statusUpdate.status.state);
}

/**
 * Appends events and returns those stored now (a key seen before is skipped), in one statement: the database
 * function `switchboard_append_events` (migration 015) locks the task's head row, so concurrent writers of one
 * task serialise, sequence numbers have no gaps and follow commit order. Alone it is its own transaction.
 */
export async function appendEvents(pool: Pool, tenant: string, taskId: string, events: NewEvent[], opts: AppendOptions = {}): Promise<LoggedEvent[]> {
  if (events.length === 0) return [];
  const { rows } = await pool.query<StoredRow>(prepared(`SELECT stored_seq, stored_key FROM ${appendCall(1)}`, appendParams(tenant, taskId, events, opts)));
  return storedEvents(events, rows);
}

/** How appendEvents treats the keys of a batch. */
export interface AppendOptions {
  /**
   * The keys are new (a writer that never repeats a key, e.g. one attempt of an activity): skip the lookup of
   * keys already stored. A repeated key then fails the append on the unique constraint instead of being skipped.
   */
  freshKeys?: boolean;
}

/** A row of switchboard_append_events: one event stored now. */
export interface StoredRow {
  stored_seq: string;
  stored_key: string;
}

/**
 * The append as a table expression with its parameters numbered from `first` (see appendParams), for a caller
 * that puts it in a statement of its own (one round trip for its other writes and the append).
 */
export function appendCall(first: number): string {
  const p = (i: number) => `$${first + i}`;
  return `switchboard_append_events(${p(0)}, ${p(1)}, ${p(2)}::jsonb, ${p(3)}, ${p(4)})`;
}

/** appendCall's five parameters. */
export function appendParams(tenant: string, taskId: string, events: NewEvent[], opts: AppendOptions = {}): unknown[] {
  // One JSON parameter for the whole batch: much cheaper for pg to send than a jsonb[] array literal.
  const batch = events.map((e) => ({ k: e.key, kd: kindOf(e.event), e: e.event }));
  return [tenant, taskId, JSON.stringify(batch), opts.freshKeys === true, EVENTS_CHANNEL];
}

/** The events appendCall stored, in log order: a key's first occurrence in the batch is the event stored under it. */
export function storedEvents(events: NewEvent[], rows: StoredRow[]): LoggedEvent[] {
  if (rows.length === 0) return [];
  const byKey = new Map<string, StreamEvent>();
  for (const e of events) if (!byKey.has(e.key)) byKey.set(e.key, e.event);
  return rows.map((r) => ({ seq: Number(r.stored_seq), event: byKey.get(r.stored_key)! })).sort((a, b) => a.seq - b.seq);
}

/** Events with seq > afterSeq, oldest first, at most `limit`. */
export async function readEvents(pool: Pool, tenant: string, taskId: string, afterSeq: number, limit = 500): Promise<LoggedEvent[]> {
  const { rows } = await pool.query<{ seq: string; event: StreamEvent }>(
    'SELECT seq, event FROM task_events WHERE tenant = $1 AND task_id = $2 AND seq > $3 ORDER BY seq LIMIT $4',
    [tenant, taskId, afterSeq, limit],
  );
  return rows.map((r) => ({ seq: Number(r.seq), event: r.event }));
}

/** The task's last sequence number (0 when it has no events). */
export async function headSeq(pool: Pool, tenant: string, taskId: string): Promise<number> {
  const { rows } = await pool.query<{ last_seq: string }>('SELECT last_seq FROM task_event_heads WHERE tenant = $1 AND task_id = $2', [tenant, taskId]);
  return rows.length ? Number(rows[0].last_seq) : 0;
}

/** The task's newest event (undefined when it has none). */
export async function lastEvent(pool: Pool, tenant: string, taskId: string): Promise<LoggedEvent | undefined> {
  const { rows } = await pool.query<{ seq: string; event: StreamEvent }>(
    'SELECT seq, event FROM task_events WHERE tenant = $1 AND task_id = $2 ORDER BY seq DESC LIMIT 1',
    [tenant, taskId],
  );
  return rows[0] && { seq: Number(rows[0].seq), event: rows[0].event };
}

/** The first and last seq of events whose key starts with `prefix` (e.g. one attempt of the forwarding activity). */
export async function seqRangeOf(pool: Pool, tenant: string, taskId: string, prefix: string): Promise<{ from: number; to: number } | undefined> {
  const { rows } = await pool.query<{ from: string | null; to: string | null }>(
    `SELECT min(seq) AS from, max(seq) AS to FROM task_events
     WHERE tenant = $1 AND task_id = $2 AND left(event_key, length($3)) = $3`,
    [tenant, taskId, prefix],
  );
  return rows[0]?.from ? { from: Number(rows[0].from), to: Number(rows[0].to) } : undefined;
}

/**
 * The task as of `atSeq`: its newest `task` snapshot at or before atSeq with the later status and artifact
 * events applied. A fresh subscriber gets this first, then every event after atSeq.
 */
export async function snapshotAt(pool: Pool, tenant: string, taskId: string, atSeq: number): Promise<WireTask | undefined> {
  const { rows } = await pool.query<{ event: StreamEvent }>(
    `SELECT event FROM task_events
     WHERE tenant = $1 AND task_id = $2 AND seq <= $3
       AND seq >= (SELECT coalesce(max(seq), 0) FROM task_events WHERE tenant = $1 AND task_id = $2 AND kind = 'task' AND seq <= $3)
     ORDER BY seq`,
    [tenant, taskId, atSeq],
  );
  let task: WireTask | undefined;
  for (const { event } of rows) task = applyEvent(task, event);
  return task;
}

/** Folds one event into a task (a `task` event replaces it). */
export function applyEvent(task: WireTask | undefined, e: StreamEvent): WireTask | undefined {
  if ('task' in e) return structuredClone(e.task);
  if (!task) return undefined;
  if ('statusUpdate' in e) {
    const { status } = e.statusUpdate;
    const settles = status.state !== 'TASK_STATE_WORKING' && status.state !== 'TASK_STATE_SUBMITTED';
    return {
      ...task,
      status,
      history: settles && status.message ? [...(task.history ?? []), status.message] : task.history,
    };
  }
  const { artifact, append } = e.artifactUpdate;
  const artifacts = [...(task.artifacts ?? [])];
  const i = artifacts.findIndex((a) => a.artifactId === artifact.artifactId);
  if (i < 0) artifacts.push(artifact);
  else artifacts[i] = append ? { ...artifacts[i], parts: [...artifacts[i].parts, ...artifact.parts] } : artifact;
  return { ...task, artifacts };
}


/** At most this many of a task's artifact events are read to show what a canceled task streamed. */
const STREAMED_EVENTS_READ = 20_000;

/**
 * The artifacts a task's events streamed, as a client following them assembled them: chunks joined (`append`) or
 * replaced, and the events of an attempt a retry voided left out. A canceled task's record has only the artifacts
 * of its finished turns; GetTask adds these to it (TaskGateway), so what a client saw stream is not lost.
 */
export async function streamedArtifacts(pool: Pool, tenant: string, taskId: string): Promise<WireArtifact[]> {
  const { rows } = await pool.query<{ seq: string; event: StreamEvent }>(
    `SELECT seq, event FROM task_events
     WHERE tenant = $1 AND task_id = $2
       AND (kind = 'artifactUpdate' OR (kind = 'statusUpdate' AND event -> 'statusUpdate' -> 'metadata' -> 'switchboard' ? 'void'))
     ORDER BY seq LIMIT $3`,
    [tenant, taskId, STREAMED_EVENTS_READ],
  );
  const voided: { fromSeq: number; toSeq: number }[] = [];
  for (const { event } of rows) {
    const v = 'statusUpdate' in event ? (event.statusUpdate.metadata?.switchboard as { void?: { fromSeq: number; toSeq: number } } | undefined)?.void : undefined;
    if (v) voided.push(v);
  }
  let task: WireTask = { id: taskId, contextId: '', status: { state: 'TASK_STATE_WORKING' }, artifacts: [] };
  for (const { seq, event } of rows) {
    if (!('artifactUpdate' in event) || voided.some((v) => Number(seq) >= v.fromSeq && Number(seq) <= v.toSeq)) continue;
    task = applyEvent(task, event)!;
  }
  return task.artifacts ?? [];
}
