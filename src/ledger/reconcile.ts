/**
 * GET /ledger/reconcile: the ledger's invariants, each checked by one SQL query over the whole tenant, with
 * every row that breaks one listed. A clean ledger answers `ok: true` and empty violation lists.
 */
import type { Pool } from 'pg';
import { inTransaction } from '../db/tx';

/** A task that turned terminal this recently may still be settling (the settlement follows the projection write). */
export const SETTLING_GRACE_MS = 60_000;

export interface Invariant {
  name: string;
  description: string;
  ok: boolean;
  checked: number;
  violations: Record<string, unknown>[];
}

export interface Reconciliation {
  ok: boolean;
  checkedAt: string;
  totals: { accounts: number; tasksTerminal: number; settlements: number; openHolds: number; depositedMinor: number; balanceSumMinor: number };
  /** Terminal tasks still inside the settling grace period without a settlement (not violations). */
  settling: string[];
  invariants: Invariant[];
}

const TERMINAL = ['TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED'];

interface Check {
  name: string;
  description: string;
  /** Counts what the invariant ranges over. */
  count: string;
  /** Selects the rows that break it (at most 100 are listed). */
  violations: string;
}

const CHECKS: Check[] = [
  {
    name: 'terminalTaskSettledOnce',
    description: 'every terminal task has exactly one settlement, in its final state',
    count: `SELECT count(*) FROM tasks WHERE tenant = $1 AND state = ANY($2)`,
    violations: `
      SELECT t.task_id AS "taskId", t.state, count(s.id)::int AS settlements, min(s.final_state) AS "settledAs"
        FROM tasks t LEFT JOIN settlements s ON s.tenant = t.tenant AND s.task_id = t.task_id
       WHERE t.tenant = $1 AND t.state = ANY($2)
       GROUP BY t.task_id, t.state, t.status_timestamp
      HAVING (count(s.id) = 0 AND t.status_timestamp < now() - make_interval(secs => $3 / 1000.0))
          OR count(s.id) > 1 OR (count(s.id) = 1 AND min(s.final_state) <> t.state)`,
  },
  {
    name: 'settledTaskIsTerminal',
    description: 'every settlement belongs to a task that the projection shows terminal, or that retention purged terminal',
    count: `SELECT count(*) FROM settlements WHERE tenant = $1`,
    violations: `
      SELECT s.task_id AS "taskId", coalesce(t.state, p.state) AS state FROM settlements s
        LEFT JOIN tasks t ON t.tenant = s.tenant AND t.task_id = s.task_id
        LEFT JOIN purged_tasks p ON t.task_id IS NULL AND p.tenant = s.tenant AND p.task_id = s.task_id
       WHERE s.tenant = $1 AND (coalesce(t.state, p.state) IS NULL OR NOT coalesce(t.state, p.state) = ANY($2))`,
  },
  {
    name: 'noHoldOnTerminalTask',
    description: 'no hold is still open on a settled task, and every settled task\'s hold was closed by its settlement',
    count: `SELECT count(*) FROM holds WHERE tenant = $1`,
    violations: `
      SELECT h.task_id AS "taskId", h.state, h.amount_minor::bigint AS "amountMinor"
        FROM holds h JOIN settlements s ON s.tenant = h.tenant AND s.task_id = h.task_id
       WHERE h.tenant = $1 AND h.state = 'held'`,
  },
  {
    name: 'captureWithinHold',
    description: 'what a settlement charged equals its hold\'s capture and never exceeds the hold',
    count: `SELECT count(*) FROM settlements WHERE tenant = $1`,
    violations: `
      SELECT s.task_id AS "taskId", s.amount_minor::bigint AS "chargedMinor", h.amount_minor::bigint AS "heldMinor", h.captured_minor::bigint AS "capturedMinor"
        FROM settlements s LEFT JOIN holds h ON h.tenant = s.tenant AND h.task_id = s.task_id AND h.state IN ('captured', 'released')
       WHERE s.tenant = $1 AND s.amount_minor > 0 AND (h.task_id IS NULL OR s.amount_minor > h.amount_minor OR s.amount_minor <> h.captured_minor)`,
  },
  {
    name: 'balanceIsSumOfEntries',
    description: 'each account\'s balance and held amount equal the sums of its ledger entries',
    count: `SELECT count(*) FROM accounts WHERE tenant = $1`,
    violations: `
      SELECT coalesce(a.account, e.account) AS account, a.balance_minor::bigint AS "balanceMinor", e.amount::bigint AS "entriesMinor",
             a.held_minor::bigint AS "heldMinor", e.held::bigint AS "entriesHeldMinor"
        FROM (SELECT * FROM accounts WHERE tenant = $1) a
        FULL JOIN (SELECT account, sum(amount_minor) AS amount, sum(held_minor) AS held FROM ledger_entries WHERE tenant = $1 GROUP BY account) e
          ON e.account = a.account
       WHERE a.account IS NULL OR (e.account IS NULL AND (a.balance_minor <> 0 OR a.held_minor <> 0))
          OR a.balance_minor <> e.amount OR a.held_minor <> e.held`,
  },
  {
    name: 'heldIsSumOfOpenHolds',
    description: 'each account\'s held amount equals the sum of its open holds',
    count: `SELECT count(*) FROM accounts WHERE tenant = $1 AND kind = 'requester'`,
    violations: `
      SELECT a.account, a.held_minor::bigint AS "heldMinor", coalesce(h.open, 0)::bigint AS "openHoldsMinor"
        FROM accounts a
        LEFT JOIN (SELECT account, sum(amount_minor) AS open FROM holds WHERE tenant = $1 AND state = 'held' GROUP BY account) h ON h.account = a.account
       WHERE a.tenant = $1 AND a.held_minor <> coalesce(h.open, 0)`,
  },
  {
    name: 'availableNotNegative',
    description: 'no limited account has more held or spent than it holds (balance − held ≥ 0)',
    count: `SELECT count(*) FROM accounts WHERE tenant = $1`,
    violations: `
      SELECT account, balance_minor::bigint AS "balanceMinor", held_minor::bigint AS "heldMinor" FROM accounts
       WHERE tenant = $1 AND kind <> 'external' AND NOT unlimited AND balance_minor - held_minor < 0`,
  },
  {
    name: 'movementsBalance',
    description: 'the entries of every movement (each settlement, deposit, hold) sum to zero',
    count: `SELECT count(DISTINCT movement_key) FROM ledger_entries WHERE tenant = $1`,
    violations: `
      SELECT movement_key AS movement, min(settlement_id)::text AS "settlementId", sum(amount_minor)::bigint AS "sumMinor"
        FROM ledger_entries WHERE tenant = $1 GROUP BY movement_key HAVING sum(amount_minor) <> 0`,
  },
  {
    name: 'settlementMatchesEntries',
    description: 'every settlement has its ledger movement, charging the requester exactly the settled amount',
    count: `SELECT count(*) FROM settlements WHERE tenant = $1`,
    violations: `
      SELECT s.task_id AS "taskId", s.amount_minor::bigint AS "amountMinor", count(e.id)::int AS entries,
             coalesce(sum(e.amount_minor) FILTER (WHERE e.amount_minor < 0), 0)::bigint AS "debitedMinor"
        FROM settlements s LEFT JOIN ledger_entries e ON e.settlement_id = s.id
       WHERE s.tenant = $1
       GROUP BY s.id, s.task_id, s.amount_minor
      HAVING count(e.id) = 0 OR coalesce(sum(e.amount_minor) FILTER (WHERE e.amount_minor < 0), 0) <> -s.amount_minor`,
  },
  {
    name: 'trustEventPerSettlement',
    description: 'every settled task has exactly one trust event',
    count: `SELECT count(*) FROM settlements WHERE tenant = $1`,
    violations: `
      SELECT s.task_id AS "taskId" FROM settlements s LEFT JOIN trust_events t ON t.tenant = s.tenant AND t.task_id = s.task_id
       WHERE s.tenant = $1 AND t.task_id IS NULL`,
  },
];

/** Some checks take the terminal states and the grace period as parameters; the others only the tenant. */
function paramsFor(sql: string, tenant: string): unknown[] {
  if (sql.includes('$3')) return [tenant, TERMINAL, SETTLING_GRACE_MS];
  if (sql.includes('$2')) return [tenant, TERMINAL];
  return [tenant];
}

export async function reconcile(pool: Pool, tenant: string): Promise<Reconciliation> {
  // One snapshot for every query: a settlement committing halfway through cannot make the checks disagree.
  return inTransaction(pool, async (client) => {
    const invariants: Invariant[] = [];
    for (const c of CHECKS) {
      const [{ rows: counted }, { rows }] = [
        await client.query<{ count: string }>(c.count, paramsFor(c.count, tenant)),
        await client.query(`${c.violations} LIMIT 100`, paramsFor(c.violations, tenant)),
      ];
      const violations = rows.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, typeof v === 'string' && /Minor$/.test(k) ? Number(v) : v])));
      invariants.push({ name: c.name, description: c.description, ok: rows.length === 0, checked: Number(counted[0].count), violations });
    }
    const { rows: settling } = await client.query<{ task_id: string }>(
      `SELECT t.task_id FROM tasks t
        WHERE t.tenant = $1 AND t.state = ANY($2) AND t.status_timestamp >= now() - make_interval(secs => $3 / 1000.0)
          AND NOT EXISTS (SELECT 1 FROM settlements s WHERE s.tenant = t.tenant AND s.task_id = t.task_id)`,
      [tenant, TERMINAL, SETTLING_GRACE_MS],
    );
    const { rows: t } = await client.query(
      `SELECT (SELECT count(*) FROM accounts WHERE tenant = $1)::int AS accounts,
              (SELECT count(*) FROM tasks WHERE tenant = $1 AND state = ANY($2))::int AS "tasksTerminal",
              (SELECT count(*) FROM settlements WHERE tenant = $1)::int AS settlements,
              (SELECT count(*) FROM holds WHERE tenant = $1 AND state = 'held')::int AS "openHolds",
              (SELECT coalesce(sum(amount_minor), 0) FROM deposits WHERE tenant = $1)::bigint AS "depositedMinor",
              (SELECT coalesce(sum(balance_minor), 0) FROM accounts WHERE tenant = $1)::bigint AS "balanceSumMinor"`,
      [tenant, TERMINAL],
    );
    const totals = { ...t[0], depositedMinor: Number(t[0].depositedMinor), balanceSumMinor: Number(t[0].balanceSumMinor) };
    return { ok: invariants.every((i) => i.ok), checkedAt: new Date().toISOString(), totals, settling: settling.map((r) => r.task_id), invariants };
  }, 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
}
