/** The activities that write PostgreSQL: the task projection, holds, and the settlement ledger. */
import type { Pool, PoolClient } from 'pg';
import { appendCall, appendParams, type LoggedEvent, type StoredRow, storedEvents } from '../src/events/event-log';
import type { EventHub } from '../src/events/hub';
import { agentAccount, ensureAccount, post, requesterAccount, type UnfundedPolicy } from '../src/ledger/postings';
import { inTransaction } from '../src/db/tx';
import type { HoldRequest, SettlementRequest, TaskRecord } from '../workflows/types';
import { settledMinor, tasksEnded, tasksStarted } from '../src/metrics';
import { stateLabel } from '../workflows/task-state';
import { degradeIfFailing } from '../src/trust/work-health';

/**
 * Upserts the task's projection row and appends the state change to the task's event log, in one statement
 * (so one transaction). Versions only grow, so a retried or late write never overwrites a newer state, and the
 * event's key is the version, so a retried write logs it once.
 */
export async function recordTask(pool: Pool, hub: EventHub, rec: TaskRecord): Promise<void> {
  recorded(hub, rec, await recordWith(pool, rec));
}

/**
 * A terminal task's last writes, in one transaction: its final state recorded (as recordTask) and its settlement
 * (as settleTask). One local activity instead of two: a workflow activation and a transaction fewer per task.
 */
export async function finishTask(pool: Pool, hub: EventHub, policy: UnfundedPolicy, rec: TaskRecord, req: SettlementRequest): Promise<SettlementOutcome> {
  const { logged, outcome } = await inTransaction(pool, async (client) => ({ logged: await recordWith(client, rec), outcome: await settleWith(client, policy, req) }));
  recorded(hub, rec, logged);
  settled(req, outcome);
  return outcome;
}

/**
 * The projection's upsert and the event's append as one statement: one round trip. The append (a data-modifying
 * CTE runs whether or not it is read) touches only the event log, so neither write depends on the other's.
 */
async function recordWith(db: Pool | PoolClient, rec: TaskRecord): Promise<LoggedEvent[]> {
  const { task } = rec;
  const projection = [rec.tenant, task.id, task.contextId, rec.agentId, task.status.state, task.status.timestamp ?? rec.createdAt, rec.version, task, rec.createdAt, rec.parentTaskId ?? null, rec.depth ?? 0];
  const upsert = `INSERT INTO tasks (tenant, task_id, context_id, agent_id, state, status_timestamp, version, task, created_at, parent_task_id, depth)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
     ON CONFLICT (tenant, task_id) DO UPDATE
       SET state = EXCLUDED.state, status_timestamp = EXCLUDED.status_timestamp, version = EXCLUDED.version,
           task = EXCLUDED.task, updated_at = now()
       WHERE tasks.version < EXCLUDED.version`;
  if (!rec.event) {
    await db.query(upsert, projection);
    return [];
  }
  const events = [rec.event];
  const { rows } = await db.query<StoredRow>(
    `WITH projection AS (${upsert}) SELECT stored_seq, stored_key FROM ${appendCall(projection.length + 1)}`,
    [...projection, ...appendParams(rec.tenant, task.id, events)],
  );
  return storedEvents(events, rows);
}

/** After the commit: readers of this process hear of the events; the first change counts the task started. */
function recorded(hub: EventHub, rec: TaskRecord, logged: LoggedEvent[]): void {
  hub.publish(rec.tenant, rec.task.id, logged);
  // The first change the workflow records (version 1) starts the task's work; a retried write logs nothing new.
  if (rec.version === 1 && logged.length > 0) tasksStarted.inc({ agent: rec.agentId });
}

export interface SettlementOutcome {
  settlementId: string;
  /** false when an earlier attempt had already settled this task. */
  created: boolean;
  /** What was charged: the requested amount for a completed task, capped by its hold; 0 otherwise. */
  chargedMinor: number;
}

/**
 * Settles a terminal task exactly once, in one transaction: the settlement row (its unique (tenant, task_id)
 * key makes a retried activity a no-op), the task's hold closed (captured up to its amount, the rest released),
 * the ledger movement `settle:<task>` (requester debited, agent credited, the hold taken off the held balance)
 * and the task's trust event. The hold is read here, under a row lock, not taken from the workflow: whatever
 * raced or crashed before, the charge is capped by what was actually reserved.
 */
export async function settleTask(pool: Pool, policy: UnfundedPolicy, req: SettlementRequest): Promise<SettlementOutcome> {
  const outcome = await inTransaction(pool, (client) => settleWith(client, policy, req));
  settled(req, outcome);
  return outcome;
}

function settled(req: SettlementRequest, outcome: SettlementOutcome): void {
  if (outcome.created) {
    tasksEnded.inc({ agent: req.agentId, state: stateLabel(req.finalState) });
    settledMinor.inc({ agent: req.agentId }, outcome.chargedMinor);
  }
}

async function settleWith(client: PoolClient, policy: UnfundedPolicy, req: SettlementRequest): Promise<SettlementOutcome> {
  const inserted = await client.query<{ id: string }>(
    `INSERT INTO settlements (tenant, task_id, agent_id, requester, final_state, amount_minor)
     VALUES ($1, $2, $3, $4, $5, 0) ON CONFLICT (tenant, task_id) DO NOTHING RETURNING id`,
    [req.tenant, req.taskId, req.agentId, req.requester, req.finalState],
  );
  if (inserted.rows.length === 0) {
    const { rows } = await client.query<{ id: string; amount_minor: string }>(
      'SELECT id, amount_minor FROM settlements WHERE tenant = $1 AND task_id = $2',
      [req.tenant, req.taskId],
    );
    return { settlementId: rows[0].id, created: false, chargedMinor: Number(rows[0].amount_minor) };
  }
  const id = inserted.rows[0].id;
  const { rows: holds } = await client.query<{ amount_minor: string }>(
    `SELECT amount_minor FROM holds WHERE tenant = $1 AND task_id = $2 AND state = 'held' FOR UPDATE`,
    [req.tenant, req.taskId],
  );
  const held = holds[0] ? Number(holds[0].amount_minor) : 0;
  const charged = req.finalState === 'TASK_STATE_COMPLETED' ? Math.min(req.amountMinor, held) : 0;
  await client.query('UPDATE settlements SET amount_minor = $2 WHERE id = $1', [id, charged]);
  if (holds[0]) {
    await client.query(
      `UPDATE holds SET state = $3, captured_minor = $4, closed_at = now() WHERE tenant = $1 AND task_id = $2`,
      [req.tenant, req.taskId, charged > 0 ? 'captured' : 'released', charged],
    );
  }
  await post(
    client,
    {
      tenant: req.tenant,
      key: `settle:${req.taskId}`,
      kind: charged > 0 ? 'capture' : 'release',
      taskId: req.taskId,
      settlementId: id,
      entries: [
        { account: requesterAccount(req.requester), amountMinor: -charged, heldMinor: -held },
        { account: agentAccount(req.agentId), amountMinor: charged },
      ],
    },
    policy,
  );
  await client.query(
    `INSERT INTO trust_events (tenant, task_id, agent_id, outcome, started_at, ended_at) VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (tenant, task_id) DO NOTHING`,
    [req.tenant, req.taskId, req.agentId, req.outcome, req.startedAt, req.endedAt],
  );
  // Health from real work (issue 12): an agent that answers probes but fails every task is degraded now.
  if (req.finalState !== 'TASK_STATE_COMPLETED') await degradeIfFailing(client, req.tenant, req.agentId);
  return { settlementId: id, created: true, chargedMinor: charged };
}

export type HoldOutcome = { ok: true } | { ok: false; availableMinor: number; reason: string };

/**
 * Reserves the task's hold on the requester's account before the agent is called. Exactly once per task:
 * the hold row's (tenant, task_id) key makes a retried activity return the first decision, declined included.
 * The balance check and the reservation are one conditional UPDATE, so concurrent holds on one account
 * serialise on its row and never reserve more than is available (the table's CHECK is the backstop).
 */
export async function holdFunds(pool: Pool, policy: UnfundedPolicy, req: HoldRequest): Promise<HoldOutcome> {
  const account = requesterAccount(req.requester);
  return inTransaction(pool, async (client) => {
    const { rows: prior } = await client.query<{ state: string }>('SELECT state FROM holds WHERE tenant = $1 AND task_id = $2', [req.tenant, req.taskId]);
    if (prior[0]) {
      if (prior[0].state !== 'declined') return { ok: true };
      return { ok: false, ...(await declined(client, req, account)) };
    }
    await ensureAccount(client, req.tenant, account, policy);
    const reserved = await client.query(
      `UPDATE accounts SET held_minor = held_minor + $3, updated_at = now()
        WHERE tenant = $1 AND account = $2 AND (unlimited OR balance_minor - held_minor >= $3)`,
      [req.tenant, account, req.amountMinor],
    );
    if (reserved.rowCount === 0) {
      await client.query(
        `INSERT INTO holds (tenant, task_id, account, agent_id, amount_minor, state, closed_at) VALUES ($1, $2, $3, $4, $5, 'declined', now())`,
        [req.tenant, req.taskId, account, req.agentId, req.amountMinor],
      );
      return { ok: false, ...(await declined(client, req, account)) };
    }
    await client.query(
      `INSERT INTO holds (tenant, task_id, account, agent_id, amount_minor, state) VALUES ($1, $2, $3, $4, $5, 'held')`,
      [req.tenant, req.taskId, account, req.agentId, req.amountMinor],
    );
    await client.query(
      `INSERT INTO ledger_entries (tenant, account, amount_minor, held_minor, movement_key, kind, task_id) VALUES ($1, $2, 0, $3, $4, 'hold', $5)`,
      [req.tenant, account, req.amountMinor, `hold:${req.taskId}`, req.taskId],
    );
    return { ok: true };
  });
}

async function declined(client: PoolClient, req: HoldRequest, account: string): Promise<{ availableMinor: number; reason: string }> {
  const { rows } = await client.query<{ available: string }>(
    'SELECT balance_minor - held_minor AS available FROM accounts WHERE tenant = $1 AND account = $2',
    [req.tenant, account],
  );
  const availableMinor = Math.max(0, Number(rows[0]?.available ?? 0));
  return {
    availableMinor,
    reason: `Insufficient funds: the task needs a hold of ${req.amountMinor} on ${account}, which has ${availableMinor} available (fund it with POST /accounts/${account}/deposits)`,
  };
}
