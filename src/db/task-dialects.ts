/** The dialect each 0.1/NEXUS task was started in, and the client metadata kept with it (migration 010). */
import type { Pool } from 'pg';
import type { AgentDialect as DialectName } from '../../task/contracts';

/** Records a new task's dialect unless one is recorded already (a resent first message: the first stands). */
export async function recordTaskDialect(pool: Pool, tenant: string, taskId: string, dialect: DialectName, metadata: Record<string, unknown> = {}): Promise<void> {
  await pool.query(
    'INSERT INTO task_dialects (tenant, task_id, dialect, metadata) VALUES ($1, $2, $3, $4) ON CONFLICT (tenant, task_id) DO NOTHING',
    [tenant, taskId, dialect, JSON.stringify(metadata)],
  );
}

export async function dialectOfTask(pool: Pool, tenant: string, taskId: string): Promise<DialectName | undefined> {
  const { rows } = await pool.query<{ dialect: DialectName }>('SELECT dialect FROM task_dialects WHERE tenant = $1 AND task_id = $2', [tenant, taskId]);
  return rows[0]?.dialect;
}

/** The client metadata recorded with these tasks (tasks without any are absent). */
export async function clientMetadataOf(pool: Pool, tenant: string, taskIds: string[]): Promise<Map<string, Record<string, unknown>>> {
  if (taskIds.length === 0) return new Map();
  const { rows } = await pool.query<{ task_id: string; metadata: Record<string, unknown> }>(
    "SELECT task_id, metadata FROM task_dialects WHERE tenant = $1 AND task_id = ANY ($2::text[]) AND metadata <> '{}'::jsonb",
    [tenant, taskIds],
  );
  return new Map(rows.map((r) => [r.task_id, r.metadata]));
}
