/** The activities that write PostgreSQL: the task projection, holds, and the settlement ledger. */
import type { Pool, PoolClient } from 'pg';
import { appendCall, appendParams, type LoggedEvent, type NewEvent, type StoredRow, storedEvents } from '../src/core/events/event-log';
import type { EventHub } from '../src/core/events/hub';
import { ensureAccount, requesterAccount, type UnfundedPolicy } from '../src/core/ledger/postings';
import { prepared } from '../src/core/db/pool';
import { inTransaction } from '../src/core/db/tx';
import type { HoldRequest, SettlementRequest, TaskRecord } from '../task/contracts';
import { settledMinor, tasksEnded, tasksStarted } from '../src/core/metrics';
import { stateLabel } from '../task/rules';
import { degradeIfFailing } from '../src/core/trust/work-health';

/**
 * Upserts the task's projection row and appends the state change to the task's event log, in one statement
 * (so one transaction). Versions only grow, so a retried or late write never overwrites a newer state, and the
 * event's key is the version, so a retried write logs it once.
 */
export async function recordTask(pool: Pool, hub: EventHub, rec: TaskRecord): Promise<void> {
  recorded(hub, rec, await recordWith(pool, rec));
}

/**
 * What the workflow adds to a terminal task's last writes (finishTask), from patch level 5 (workflows/levels.ts).
 */
export interface FinishOptions {
  /**
   * The events the turn's first exchange relayed and held back instead of logging them (its result carried them):
   * logged here, before the final state, in the same statement.
   */
  relayed?: NewEvent[];
  /**
   * The child tasks the workflow knows of, when the agent answered in the workflow task that ran the turn (their links,
   * signals, may still be on their way): the statement counts those linked in PostgreSQL (migration 021) and, when
   * there are more, writes only `relayed`, neither the final record nor the settlement: the workflow waits for their
   * links and finishes again.
   */
  knownChildren?: number;
  /**
   * A first exchange's answer that this statement finishes its task with (patch level 7, ForwardArgs.settle): kept
   * with the task's claim of its first message (`message_tasks.first_answer`, migration 035), in the same
   * transaction, so a rerun of the workflow task that ran it reads the answer (answeredBefore) instead of calling the
   * agent again. Only with knownChildren, and only when the statement settles.
   */
  answer?: { messageId: string; json: string };
}

/** What finishTask did: the settlement, or (with FinishOptions.knownChildren) the children that held it back. */
export interface FinishOutcome extends Partial<SettlementOutcome> {
  /** Set when nothing but the relayed events was written: the child tasks linked, more than the workflow knew. */
  childrenLinked?: number;
}

/**
 * A terminal task's last writes: the events its first exchange held back (FinishOptions.relayed), its final state
 * recorded (as recordTask) and its settlement (as settleTask), in one statement, so one round trip and one
 * transaction: the client's answer leaves only after this. The projection's upsert (a data-modifying CTE), the
 * append and the settlement all run once per statement and none reads what another writes: the record touches the
 * task and its event log, the settlement the ledger's tables. With FinishOptions.knownChildren the statement counts
 * the task's child tasks first, in its own snapshot, and writes the record and the settlement only if the workflow
 * knew them all.
 */
export async function finishTask(
  pool: Pool,
  hub: EventHub,
  policy: UnfundedPolicy,
  rec: TaskRecord,
  req: SettlementRequest,
  opts: FinishOptions = {},
): Promise<FinishOutcome> {
  if (opts.knownChildren !== undefined) return finishCounting(pool, hub, policy, rec, req, opts.relayed ?? [], opts.knownChildren, opts.answer);
  const { upsert, projection } = projectionOf(rec);
  const events = [...(opts.relayed ?? []), ...(rec.event ? [rec.event] : [])];
  // The append as one row whatever it stored (an aggregate always yields one), and the settlement always one row:
  // their cross join is one row, so an event logged before (nothing appended now) cannot drop the settlement.
  const appended = events.length > 0
    ? `SELECT array_agg(stored_seq) AS seqs, array_agg(stored_key) AS keys FROM ${appendCall(projection.length + 1)}`
    : 'SELECT NULL::bigint[] AS seqs, NULL::text[] AS keys';
  const appendArgs = events.length > 0 ? appendParams(rec.tenant, rec.task.id, events) : [];
  const { rows } = await pool.query<SettledRow & AppendedRow>(
    prepared(
      `WITH projection AS (${upsert})
     SELECT a.seqs, a.keys, s.* FROM (${appended}) AS a CROSS JOIN ${settleCall(projection.length + appendArgs.length + 1)} AS s`,
      [...projection, ...appendArgs, ...settleParams(policy, req)],
    ),
  );
  const outcome = outcomeOf(rows[0]);
  recorded(hub, rec, storedEvents(events, storedOf(rows[0])));
  settled(req, outcome);
  await healthAfter(pool, req);
  return outcome;
}

/**
 * finishTask with the child tasks counted in the statement (`known`: those the workflow knows): the relayed events
 * always logged, the final record and the settlement only when no child is missing. One append call takes the
 * batch the count chooses, so the relayed events precede the final state in the log. The settlement's condition
 * reads the count as a subquery, a constant for the planner, which checks it before it runs the function; a join's
 * column (the lateral `k.n`) would be checked on the function's rows, after it ran (test/economics.test.ts checks).
 */
async function finishCounting(
  pool: Pool,
  hub: EventHub,
  policy: UnfundedPolicy,
  rec: TaskRecord,
  req: SettlementRequest,
  relayed: NewEvent[],
  known: number,
  answer?: FinishOptions['answer'],
): Promise<FinishOutcome> {
  const { upsert, projection } = projectionOf(rec, '(SELECT n FROM kids) <= $12');
  const whole = [...relayed, ...(rec.event ? [rec.event] : [])];
  // appendParams: [tenant, taskId, batch, freshKeys, channel]; the batch is chosen by the count.
  const [, , wholeBatch, , channel] = appendParams(rec.tenant, rec.task.id, whole);
  const [, , relayedBatch] = appendParams(rec.tenant, rec.task.id, relayed);
  const settleArgs = settleParams(policy, req);
  const m = 16 + settleArgs.length; // the answer's parameters follow the settlement's
  const memo = answer
    ? `, memo AS (UPDATE message_tasks SET first_answer = $${m + 1}::jsonb
         WHERE tenant = $1 AND message_id = $${m} AND task_id = $2 AND (SELECT n FROM kids) <= $12)`
    : '';
  const { rows } = await pool.query<Partial<SettledRow> & AppendedRow & { n: number }>(
    prepared(
      `WITH kids AS (SELECT count(*)::int AS n FROM task_children WHERE tenant = $1 AND parent_task_id = $2),
     projection AS (${upsert})${memo}
     SELECT k.n, a.seqs, a.keys, s.settlement_id, s.created, s.charged_minor
       FROM kids k
       CROSS JOIN LATERAL (
         SELECT array_agg(stored_seq) AS seqs, array_agg(stored_key) AS keys
           FROM switchboard_append_events($1, $2, (CASE WHEN k.n <= $12 THEN $13 ELSE $14 END)::jsonb, false, $15)) AS a
       LEFT JOIN (SELECT * FROM ${settleCall(16)} WHERE (SELECT n FROM kids) <= $12) AS s ON true`,
      [...projection, known, wholeBatch, relayedBatch, channel, ...settleArgs, ...(answer ? [answer.messageId, answer.json] : [])],
    ),
  );
  const row = rows[0]!;
  if (row.n > known) {
    hub.publish(rec.tenant, rec.task.id, storedEvents(relayed, storedOf(row)));
    return { childrenLinked: row.n };
  }
  const outcome = outcomeOf(row as SettledRow);
  recorded(hub, rec, storedEvents(whole, storedOf(row)));
  settled(req, outcome);
  await healthAfter(pool, req);
  return outcome;
}

/**
 * The answer a first exchange finished its task with (FinishOptions.answer), when the statement that settled the
 * task committed: for a rerun of the workflow task that ran it (SettleAtAnswer.again).
 */
export async function answeredBefore(pool: Pool, tenant: string, taskId: string, messageId: string): Promise<unknown> {
  const { rows } = await pool.query<{ first_answer: unknown }>(
    prepared('SELECT first_answer FROM message_tasks WHERE tenant = $1 AND message_id = $2 AND task_id = $3 AND first_answer IS NOT NULL', [tenant, messageId, taskId]),
  );
  return rows[0]?.first_answer ?? undefined;
}

/** The append's row of finishTask's statements: the events stored, as arrays (null when none was). */
interface AppendedRow {
  seqs: string[] | null;
  keys: string[] | null;
}

const storedOf = (row: AppendedRow): StoredRow[] => (row.seqs ?? []).map((seq, i) => ({ stored_seq: seq, stored_key: row.keys![i]! }));

/**
 * The task's projection row as an upsert: versions only grow, so a retried or late write never overwrites a newer
 * state. With `onlyIf`, a condition in the statement (finishCounting's), the row is written only when it holds.
 */
function projectionOf(rec: TaskRecord, onlyIf?: string): { upsert: string; projection: unknown[] } {
  const { task } = rec;
  // A SELECT's parameters are typed by their casts (a VALUES list takes the columns' types).
  const values = onlyIf
    ? `SELECT $1::text, $2::text, $3::text, $4::text, $5::text, $6::timestamptz, $7::integer, $8::jsonb, $9::timestamptz, $10::text, $11::integer WHERE ${onlyIf}`
    : 'VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)';
  return {
    upsert: `INSERT INTO tasks (tenant, task_id, context_id, agent_id, state, status_timestamp, version, task, created_at, parent_task_id, depth)
     ${values}
     ON CONFLICT (tenant, task_id) DO UPDATE
       SET state = EXCLUDED.state, status_timestamp = EXCLUDED.status_timestamp, version = EXCLUDED.version,
           task = EXCLUDED.task, updated_at = now()
       WHERE tasks.version < EXCLUDED.version`,
    projection: [rec.tenant, task.id, task.contextId, rec.agentId, task.status.state, task.status.timestamp ?? rec.createdAt, rec.version, task, rec.createdAt, rec.parentTaskId ?? null, rec.depth ?? 0],
  };
}

/**
 * The projection's upsert and the event's append as one statement: one round trip. The append (a data-modifying
 * CTE runs whether or not it is read) touches only the event log, so neither write depends on the other's.
 */
async function recordWith(pool: Pool, rec: TaskRecord): Promise<LoggedEvent[]> {
  const { upsert, projection } = projectionOf(rec);
  if (!rec.event) {
    await pool.query(prepared(upsert, projection));
    return [];
  }
  const events = [rec.event];
  const { rows } = await pool.query<StoredRow>(
    prepared(`WITH projection AS (${upsert}) SELECT stored_seq, stored_key FROM ${appendCall(projection.length + 1)}`, [
      ...projection,
      ...appendParams(rec.tenant, rec.task.id, events),
    ]),
  );
  return storedEvents(events, rows);
}

/** After the commit: readers of this process hear of the events; the first change counts the task started. */
function recorded(hub: EventHub, rec: TaskRecord, logged: LoggedEvent[]): void {
  hub.publish(rec.tenant, rec.task.id, logged);
  countStarted(rec, logged.length > 0);
}

/** The first change the workflow records (version 1) starts the task's work; a retried write logs nothing new. */
function countStarted(rec: TaskRecord, logged: boolean): void {
  if (rec.version === 1 && logged) tasksStarted.inc({ agent: rec.agentId });
}

export interface SettlementOutcome {
  settlementId: string;
  /** false when an earlier attempt had already settled this task. */
  created: boolean;
  /** What was charged: the requested amount for a completed task, capped by its hold; 0 otherwise. */
  chargedMinor: number;
}

/**
 * Settles a terminal task exactly once, in one statement: the database function `switchboard_settle_task`
 * (migration 017) writes the settlement row (its unique (tenant, task_id) key makes a retried activity a no-op),
 * closes the task's hold (captured up to its amount, the rest released), posts the ledger movement `settle:<task>`
 * (requester debited, agent credited, the hold taken off the held balance) and the task's trust event. The hold is
 * read there, under a row lock, not taken from the workflow: whatever raced or crashed before, the charge is capped
 * by what was actually reserved.
 */
export async function settleTask(pool: Pool, policy: UnfundedPolicy, req: SettlementRequest): Promise<SettlementOutcome> {
  const { rows } = await pool.query<SettledRow>(prepared(`SELECT * FROM ${settleCall(1)}`, settleParams(policy, req)));
  const outcome = outcomeOf(rows[0]);
  settled(req, outcome);
  await healthAfter(pool, req);
  return outcome;
}

/** A row of switchboard_settle_task. */
interface SettledRow {
  settlement_id: string;
  created: boolean;
  charged_minor: string;
}

/** The settlement as a table expression with its parameters numbered from `first` (see settleParams). */
function settleCall(first: number): string {
  const p = (i: number) => `$${first + i}`;
  return `switchboard_settle_task(${p(0)}, ${p(1)}, ${p(2)}, ${p(3)}, ${p(4)}, ${p(5)}, ${p(6)}, ${p(7)}, ${p(8)}, ${p(9)})`;
}

/** settleCall's ten parameters. */
function settleParams(policy: UnfundedPolicy, req: SettlementRequest): unknown[] {
  return [req.tenant, req.taskId, req.agentId, req.requester, req.finalState, req.amountMinor, req.outcome, req.startedAt, req.endedAt, policy === 'unlimited'];
}

const outcomeOf = (row: SettledRow): SettlementOutcome => ({ settlementId: row.settlement_id, created: row.created, chargedMinor: Number(row.charged_minor) });

/**
 * Health from real work (issue 12): an agent that answers probes but fails every task is degraded now. Run after
 * the settlement's commit, not in its transaction (which is one statement now): it reads the projection the task's
 * final state is committed in by then, and it only marks a healthy agent degraded when its recent tasks all failed,
 * so it may run twice: a retried activity (its settlement found, created = false) runs it again, and a crash
 * between the commit and this check loses nothing.
 */
async function healthAfter(pool: Pool, req: SettlementRequest): Promise<void> {
  if (req.finalState !== 'TASK_STATE_COMPLETED') await degradeIfFailing(pool, req.tenant, req.agentId);
}

function settled(req: SettlementRequest, outcome: SettlementOutcome): void {
  if (outcome.created) {
    tasksEnded.inc({ agent: req.agentId, state: stateLabel(req.finalState) });
    settledMinor.inc({ agent: req.agentId }, outcome.chargedMinor);
  }
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
