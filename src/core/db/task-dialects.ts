/** The dialect each 0.1/NEXUS task was started in, and the client metadata kept with it (migration 010). */
import type { Pool } from 'pg';
import type { AgentDialect as DialectName } from '../../../task/contracts';

/**
 * The key under which the request that started the task is kept (its JSON-RPC id, hashed: see requestKey in
 * src/api/a2a/dialects/v01.ts): Switchboard's own, never shown as client metadata.
 */
const REQUEST = 'switchboard.request';

/**
 * Records a new task's dialect unless one is recorded already (a resent first message: the first stands), with the
 * client metadata and the key of the request that started it.
 */
export async function recordTaskDialect(pool: Pool, tenant: string, taskId: string, dialect: DialectName, metadata: Record<string, unknown> = {}, request?: string): Promise<void> {
  await pool.query(
    'INSERT INTO task_dialects (tenant, task_id, dialect, metadata) VALUES ($1, $2, $3, $4) ON CONFLICT (tenant, task_id) DO NOTHING',
    [tenant, taskId, dialect, JSON.stringify({ ...metadata, ...(request !== undefined && { [REQUEST]: request }) })],
  );
}

/** The key of the request that started a 0.1/NEXUS task, if one was recorded. */
export async function firstRequestOf(pool: Pool, tenant: string, taskId: string): Promise<string | undefined> {
  const { rows } = await pool.query<{ request: string | null }>('SELECT metadata ->> $3 AS request FROM task_dialects WHERE tenant = $1 AND task_id = $2', [tenant, taskId, REQUEST]);
  return rows[0]?.request ?? undefined;
}

export async function dialectOfTask(pool: Pool, tenant: string, taskId: string): Promise<DialectName | undefined> {
  const { rows } = await pool.query<{ dialect: DialectName }>('SELECT dialect FROM task_dialects WHERE tenant = $1 AND task_id = $2', [tenant, taskId]);
  return rows[0]?.dialect;
}

/** The client metadata recorded with these tasks (tasks without any are absent). */
export async function clientMetadataOf(pool: Pool, tenant: string, taskIds: string[]): Promise<Map<string, Record<string, unknown>>> {
  if (taskIds.length === 0) return new Map();
  const { rows } = await pool.query<{ task_id: string; metadata: Record<string, unknown> }>(
    "SELECT task_id, metadata - $3::text AS metadata FROM task_dialects WHERE tenant = $1 AND task_id = ANY ($2::text[]) AND metadata - $3::text <> '{}'::jsonb",
    [tenant, taskIds, REQUEST],
  );
  return new Map(rows.map((r) => [r.task_id, r.metadata]));
}
