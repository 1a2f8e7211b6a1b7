/** Reads of the task projection (written by activities/bookkeeping.ts). */
import type { Pool } from 'pg';
import type { TaskState, WireTask } from '../../../task/wire';
import { taskError } from '../../../task/errors';
import { stateLabel, viewTask } from '../../../task/rules';
import { z } from 'zod';
import { PageTokenError, cursorText, cursorTimestamp, decodePageToken, encodePageToken } from './page-token';

export interface StoredTask {
  task: WireTask;
  agentId: string;
  /** Multi-agent jobs: hops from the root task, and the task this one was started for. */
  depth: number;
  parentTaskId?: string;
}

export async function findTask(pool: Pool, tenant: string, taskId: string): Promise<StoredTask | undefined> {
  const { rows } = await pool.query<{ task: WireTask; agent_id: string; depth: number; parent_task_id: string | null }>(
    'SELECT task, agent_id, depth, parent_task_id FROM tasks WHERE tenant = $1 AND task_id = $2',
    [tenant, taskId],
  );
  const r = rows[0];
  return r && { task: r.task, agentId: r.agent_id, depth: r.depth, parentTaskId: r.parent_task_id ?? undefined };
}

/**
 * A task claimed (its first message taken, message_tasks) that the projection has not recorded yet (migration 020's
 * `recorded`): its first turn writes its first row while it calls its agent.
 */
export async function claimedUnrecorded(pool: Pool, tenant: string, taskId: string): Promise<boolean> {
  const { rows } = await pool.query('SELECT 1 FROM message_tasks WHERE tenant = $1 AND task_id = $2 AND NOT recorded LIMIT 1', [tenant, taskId]);
  return rows.length > 0;
}

/** Links a child task to its parent (migration 021); a resent message links it again, a no-op. */
export async function linkChildTask(pool: Pool, tenant: string, parentTaskId: string, childTaskId: string): Promise<void> {
  await pool.query('INSERT INTO task_children (tenant, parent_task_id, child_task_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING', [tenant, parentTaskId, childTaskId]);
}

/** How many child tasks are linked to a task (linkChildTask). */
export async function childTasksLinked(pool: Pool, tenant: string, parentTaskId: string): Promise<number> {
  const { rows } = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM task_children WHERE tenant = $1 AND parent_task_id = $2', [tenant, parentTaskId]);
  return rows[0]?.n ?? 0;
}

export interface TaskPage {
  tasks: WireTask[];
  nextPageToken: string;
  pageSize: number;
  totalSize: number;
}

interface Cursor {
  t: string; // status timestamp (ISO, microsecond precision as PostgreSQL keeps it)
  id: string;
}

/**
 * ListTasks (§1.11): newest status first, cursor pagination, optional filters. The page token is an
 * opaque cursor on (status_timestamp, task_id); a token that does not decode is InvalidParams.
 */
/** ListTasks' filters and paging, as the protocol layer has checked them. */
export interface ListTasksQuery {
  contextId?: string;
  status?: TaskState;
  pageSize?: number;
  pageToken?: string;
  historyLength?: number;
  statusTimestampAfter?: string;
  includeArtifacts?: boolean;
}

export async function listTasks(pool: Pool, tenant: string, agentId: string | undefined, q: ListTasksQuery): Promise<TaskPage> {
  const pageSize = q.pageSize ?? 50;
  const where = ['tenant = $1'];
  const args: unknown[] = [tenant];
  const add = (clause: string, value: unknown) => {
    args.push(value);
    where.push(clause.replace('?', `$${args.length}`));
  };
  if (agentId) add('agent_id = ?', agentId);
  if (q.contextId) add('context_id = ?', q.contextId);
  if (q.status) add('state = ?', q.status);
  if (q.statusTimestampAfter) add('status_timestamp > ?', q.statusTimestampAfter);
  const filter = where.join(' AND ');
  const filterArgs = [...args];
  if (q.pageToken) {
    const c = decodeCursor(q.pageToken);
    args.push(c.t, c.id);
    where.push(`(status_timestamp, task_id) < ($${args.length - 1}::timestamptz, $${args.length})`);
  }
  args.push(pageSize + 1);
  const [page, count] = await Promise.all([
    pool.query<{ task: WireTask; cursor_t: string; task_id: string }>(
      `SELECT task, to_char(status_timestamp AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS cursor_t, task_id
         FROM tasks WHERE ${where.join(' AND ')}
        ORDER BY status_timestamp DESC, task_id DESC LIMIT $${args.length}`,
      args,
    ),
    pool.query<{ n: string }>(`SELECT count(*) AS n FROM tasks WHERE ${filter}`, filterArgs),
  ]);
  const rows = page.rows.slice(0, pageSize);
  const last = rows[rows.length - 1];
  return {
    tasks: rows.map((r) => viewTask(r.task, q.historyLength, q.includeArtifacts ?? false)),
    nextPageToken: page.rows.length > pageSize && last ? encodeCursor({ t: last.cursor_t, id: last.task_id }) : '',
    pageSize,
    totalSize: Number(count.rows[0].n),
  };
}

const CursorShape = z.object({ t: cursorTimestamp, id: cursorText });
const encodeCursor = (c: Cursor): string => encodePageToken(c);

function decodeCursor(token: string): Cursor {
  const c = decodePageToken(token, CursorShape);
  if (!c) throw taskError('InvalidParams', 'pageToken is not a token this server issued');
  return c;
}

/**
 * The task a client's first message belongs to: `candidate` when the messageId is new, else the task an
 * earlier send of the same message started (a resend after a lost answer, or a stream reconnect).
 */
export async function claimMessage(pool: Pool, tenant: string, messageId: string, candidate: string, agentId?: string): Promise<{ taskId: string; resent: boolean }> {
  const { rows } = await pool.query<{ task_id: string }>(
    `WITH ins AS (
       INSERT INTO message_tasks (tenant, message_id, task_id, agent_id) VALUES ($1, $2, $3, $4)
       ON CONFLICT (tenant, message_id) DO NOTHING RETURNING task_id)
     SELECT task_id FROM ins UNION ALL SELECT task_id FROM message_tasks WHERE tenant = $1 AND message_id = $2`,
    [tenant, messageId, candidate, agentId ?? null],
  );
  const taskId = rows[0].task_id;
  return { taskId, resent: taskId !== candidate };
}

/**
 * The agent a task of the tenant runs on: the projection's, else the one its first message was claimed for
 * (before the workflow has recorded anything). Undefined for a task this tenant does not have.
 */
export async function agentOfTask(pool: Pool, tenant: string, taskId: string): Promise<string | undefined> {
  const { rows } = await pool.query<{ agent_id: string | null }>(
    `SELECT agent_id FROM tasks WHERE tenant = $1 AND task_id = $2
     UNION ALL SELECT agent_id FROM message_tasks WHERE tenant = $1 AND task_id = $2 AND agent_id IS NOT NULL
     LIMIT 1`,
    [tenant, taskId],
  );
  return rows[0]?.agent_id ?? undefined;
}

/** A first message's claim whose task the projection has not recorded (migration 020's `recorded`). */
export interface UnrecordedClaim {
  tenant: string;
  messageId: string;
  taskId: string;
  agentId?: string;
  claimedAt: Date;
}

/**
 * Claims older than `olderThanMs` whose task the projection has not recorded, oldest first: tasks whose workflow has
 * not written its first row yet (queued behind busy workers), or never started (the orphan sweep's to start). Read
 * from the partial index of unrecorded claims (020), which holds only these.
 */
export async function unrecordedClaims(pool: Pool, olderThanMs: number, limit: number): Promise<UnrecordedClaim[]> {
  const { rows } = await pool.query<{ tenant: string; message_id: string; task_id: string; agent_id: string | null; created_at: Date }>(
    `SELECT tenant, message_id, task_id, agent_id, created_at FROM message_tasks
     WHERE NOT recorded AND created_at < now() - $1 * interval '1 millisecond' ORDER BY created_at LIMIT $2`,
    [olderThanMs, limit],
  );
  return rows.map((r) => ({ tenant: r.tenant, messageId: r.message_id, taskId: r.task_id, agentId: r.agent_id ?? undefined, claimedAt: r.created_at }));
}

/**
 * Releases a claim whose task was never started nor recorded: the same messageId sent again makes its task anew. Only
 * while it is still unrecorded (a start that raced the release has recorded it, and keeps it). The task's log (its
 * submitted event) goes with it when no other claim names the task: nobody was told of it.
 * @returns whether a claim was released.
 */
export async function releaseClaim(pool: Pool, tenant: string, messageId: string): Promise<boolean> {
  const { rows } = await pool.query<{ released: boolean }>(
    `WITH claim AS (
       DELETE FROM message_tasks WHERE tenant = $1 AND message_id = $2 AND NOT recorded RETURNING task_id),
     unclaimed AS (
       SELECT c.task_id FROM claim c
       WHERE NOT EXISTS (SELECT 1 FROM message_tasks m WHERE m.tenant = $1 AND m.task_id = c.task_id AND m.message_id <> $2)
         AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.tenant = $1 AND t.task_id = c.task_id)),
     events AS (DELETE FROM task_events e USING unclaimed u WHERE e.tenant = $1 AND e.task_id = u.task_id),
     heads AS (DELETE FROM task_event_heads h USING unclaimed u WHERE h.tenant = $1 AND h.task_id = u.task_id)
     SELECT EXISTS (SELECT 1 FROM claim) AS released`,
    [tenant, messageId],
  );
  return rows[0]?.released ?? false;
}

/** The task a child task was started for (linkChildTask), if any. */
export async function parentOfTask(pool: Pool, tenant: string, childTaskId: string): Promise<string | undefined> {
  const { rows } = await pool.query<{ parent_task_id: string }>('SELECT parent_task_id FROM task_children WHERE tenant = $1 AND child_task_id = $2 LIMIT 1', [tenant, childTaskId]);
  return rows[0]?.parent_task_id;
}

/** The task an earlier first message started, if any (no claim is made). */
export async function taskOfMessage(pool: Pool, tenant: string, messageId: string): Promise<string | undefined> {
  const { rows } = await pool.query<{ task_id: string }>('SELECT task_id FROM message_tasks WHERE tenant = $1 AND message_id = $2', [tenant, messageId]);
  return rows[0]?.task_id;
}

/** One row of an operator's task list: what a person looks for first, without the task's history or artifacts. */
export interface TaskSummary {
  id: string;
  contextId: string;
  agentId: string;
  /** `completed`, `input-required`, …: the spelling of Temporal UI's A2ATaskState. */
  state: string;
  /** The text of the status message, when the task has one (why it failed, what it asks). */
  statusMessage?: string;
  createdAt: string;
  /** When the task last changed state (the status timestamp). */
  updatedAt: string;
  /** What the task's settlement charged; null until the task is terminal and settled. */
  costMinor: number | null;
  parentTaskId?: string;
}

export interface TaskSummaryPage {
  tasks: TaskSummary[];
  nextPageToken: string;
}

/**
 * The tenant's tasks, newest status first, with their agent and settled cost: the operator's list (GET /tasks).
 * Keyset pages on (status_timestamp, task_id), the cursor ListTasks uses.
 * @throws PageTokenError when `pageToken` is not one this endpoint handed out (the route answers 400).
 */
export async function listTaskSummaries(
  pool: Pool,
  tenant: string,
  q: { state?: TaskState; agentId?: string; taskId?: string; pageSize: number; pageToken?: string },
): Promise<TaskSummaryPage> {
  const args: unknown[] = [tenant];
  const where = ['t.tenant = $1'];
  const add = (clause: string, ...values: unknown[]) => {
    where.push(clause.replace(/\?/g, () => `$${args.push(values.shift())}`));
  };
  if (q.state) add('t.state = ?', q.state);
  if (q.agentId) add('t.agent_id = ?', q.agentId);
  if (q.taskId) add('t.task_id = ?', q.taskId);
  if (q.pageToken) {
    const c = decodePageToken(q.pageToken, CursorShape);
    if (!c) throw new PageTokenError('pageToken is not one this endpoint handed out');
    add('(t.status_timestamp, t.task_id) < (?::timestamptz, ?)', c.t, c.id);
  }
  args.push(q.pageSize + 1);
  // Only the task's status is read from its JSON: the artifacts may be large and the list does not show them.
  const { rows } = await pool.query<{
    task_id: string;
    context_id: string;
    agent_id: string;
    state: TaskState;
    status: WireTask['status'];
    created_at: Date;
    status_timestamp: Date;
    cursor_t: string;
    parent_task_id: string | null;
    cost_minor: string | null;
  }>(
    `SELECT t.task_id, t.context_id, t.agent_id, t.state, t.task->'status' AS status, t.created_at, t.status_timestamp,
            to_char(t.status_timestamp AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS cursor_t,
            t.parent_task_id, s.amount_minor AS cost_minor
       FROM tasks t LEFT JOIN settlements s ON s.tenant = t.tenant AND s.task_id = t.task_id
      WHERE ${where.join(' AND ')}
      ORDER BY t.status_timestamp DESC, t.task_id DESC LIMIT $${args.length}`,
    args,
  );
  const page = rows.slice(0, q.pageSize);
  const last = page[page.length - 1];
  return {
    tasks: page.map((r) => {
      const text = (r.status?.message?.parts ?? []).map((p) => p.text ?? '').join('');
      return {
        id: r.task_id,
        contextId: r.context_id,
        agentId: r.agent_id,
        state: stateLabel(r.state),
        ...(text ? { statusMessage: text } : {}),
        createdAt: r.created_at.toISOString(),
        updatedAt: r.status_timestamp.toISOString(),
        costMinor: r.cost_minor === null ? null : Number(r.cost_minor),
        ...(r.parent_task_id ? { parentTaskId: r.parent_task_id } : {}),
      };
    }),
    nextPageToken: rows.length > q.pageSize && last ? encodeCursor({ t: last.cursor_t, id: last.task_id }) : '',
  };
}

/**
 * The tasks of a context that are not over (coding-agent resume by contextId), newest first, with the state the
 * projection has; at a per-agent endpoint only that agent's.
 */
export async function openTasksOfContext(pool: Pool, tenant: string, contextId: string, agentId?: string): Promise<{ taskId: string; state: string }[]> {
  const { rows } = await pool.query<{ task_id: string; state: string }>(
    `SELECT task_id, state FROM tasks
      WHERE tenant = $1 AND context_id = $2 AND state <> ALL ($3::text[]) AND ($4::text IS NULL OR agent_id = $4)
      ORDER BY status_timestamp DESC LIMIT 20`,
    [tenant, contextId, ['TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED'], agentId ?? null],
  );
  return rows.map((r) => ({ taskId: r.task_id, state: r.state }));
}
