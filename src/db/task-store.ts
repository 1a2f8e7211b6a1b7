/** Reads of the task projection (written by activities/bookkeeping.ts). */
import type { Pool } from 'pg';
import type { ListTasksQuery } from '../a2a/schemas';
import type { WireTask } from '../a2a/wire';
import { a2aError } from '../a2a/errors';
import { viewTask } from '../../workflows/task-state';
import { z } from 'zod';
import { decodePageToken, encodePageToken } from './page-token';

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

const CursorShape = z.object({ t: z.string().refine((t) => !Number.isNaN(Date.parse(t))), id: z.string() });
const encodeCursor = (c: Cursor): string => encodePageToken(c);

function decodeCursor(token: string): Cursor {
  const c = decodePageToken(token, CursorShape);
  if (!c) throw a2aError('InvalidParams', 'pageToken is not a token this server issued');
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

/** The task an earlier first message started, if any (no claim is made). */
export async function taskOfMessage(pool: Pool, tenant: string, messageId: string): Promise<string | undefined> {
  const { rows } = await pool.query<{ task_id: string }>('SELECT task_id FROM message_tasks WHERE tenant = $1 AND message_id = $2', [tenant, messageId]);
  return rows[0]?.task_id;
}
