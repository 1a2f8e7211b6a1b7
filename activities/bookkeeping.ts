/** The activities that write PostgreSQL: the task projection and the settlement ledger. */
import type { Pool, PoolClient } from 'pg';
import { appendInTransaction } from '../src/events/event-log';
import type { EventHub } from '../src/events/hub';
import type { SettlementRequest, TaskRecord } from '../workflows/types';

/**
 * Upserts the task's projection row and appends the state change to the task's event log, in one
 * transaction. Versions only grow, so a retried or late write never overwrites a newer state, and the
 * event's key is the version, so a retried write logs it once.
 */
export async function recordTask(pool: Pool, hub: EventHub, rec: TaskRecord): Promise<void> {
  const { task } = rec;
  const client = await pool.connect();
  let logged;
  try {
    await client.query('BEGIN');
    await upsertProjection(client, rec);
    logged = rec.event ? await appendInTransaction(client, rec.tenant, task.id, [rec.event]) : [];
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
  hub.publish(rec.tenant, task.id, logged);
}

async function upsertProjection(client: PoolClient, rec: TaskRecord): Promise<void> {
  const { task } = rec;
  await client.query(
    `INSERT INTO tasks (tenant, task_id, context_id, agent_id, state, status_timestamp, version, task, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     ON CONFLICT (tenant, task_id) DO UPDATE
       SET state = EXCLUDED.state, status_timestamp = EXCLUDED.status_timestamp, version = EXCLUDED.version,
           task = EXCLUDED.task, updated_at = now()
       WHERE tasks.version < EXCLUDED.version`,
    [rec.tenant, task.id, task.contextId, rec.agentId, task.status.state, task.status.timestamp ?? rec.createdAt, rec.version, task, rec.createdAt],
  );
}

export interface SettlementOutcome {
  settlementId: string;
  /** false when an earlier attempt had already settled this task. */
  created: boolean;
}

/**
 * Settles a terminal task exactly once: the settlement row's unique (tenant, task_id) key makes a retried
 * activity a no-op, and its ledger entries (requester debited, agent credited) commit in the same transaction.
 */
export async function settleTask(pool: Pool, req: SettlementRequest): Promise<SettlementOutcome> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const inserted = await client.query<{ id: string }>(
      `INSERT INTO settlements (tenant, task_id, agent_id, requester, final_state, amount_minor)
       VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (tenant, task_id) DO NOTHING RETURNING id`,
      [req.tenant, req.taskId, req.agentId, req.requester, req.finalState, req.amountMinor],
    );
    if (inserted.rows.length === 0) {
      await client.query('ROLLBACK');
      const { rows } = await pool.query<{ id: string }>('SELECT id FROM settlements WHERE tenant = $1 AND task_id = $2', [req.tenant, req.taskId]);
      return { settlementId: rows[0].id, created: false };
    }
    const id = inserted.rows[0].id;
    await client.query(
      `INSERT INTO ledger_entries (settlement_id, tenant, account, amount_minor) VALUES ($1, $2, $3, $4), ($1, $2, $5, $6)`,
      [id, req.tenant, `requester:${req.requester}`, -req.amountMinor, `agent:${req.agentId}`, req.amountMinor],
    );
    await client.query('COMMIT');
    return { settlementId: id, created: true };
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}
