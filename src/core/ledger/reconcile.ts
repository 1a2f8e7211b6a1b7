/**
 * GET /ledger/reconcile: the ledger's invariants, each checked by one SQL query, with every row that breaks one
 * listed. A clean ledger answers `ok: true` and empty violation lists.
 *
 * Incremental by default, so its cost follows what changed, not how much there is: the checks over tasks,
 * settlements and movements look at those written since the tenant's last clean run (less WINDOW_OVERLAP; a first
 * run looks back FIRST_WINDOW), and each account's balance is checked against running sums of its entries
 * (reconcile_sums, advanced to ENTRIES_MARGIN ago at each run) plus the entries after them. The checks over
 * accounts and open holds always cover them all (a tenant has few). A run that finds a violation does not move
 * the window, so the next one sees it again. `full` checks everything from the first entry (operators:
 * `GET /ledger/reconcile?full=true`).
 */
import type { Pool, PoolClient } from 'pg';
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
  /** What the checks over tasks, settlements and movements covered: everything, or what was written since `since`. */
  window: { full: boolean; since: string | null };
  /** tasksTerminal and settlements: those in the window. */
  totals: { accounts: number; tasksTerminal: number; settlements: number; openHolds: number; depositedMinor: number; balanceSumMinor: number };
  /** Terminal tasks still inside the settling grace period without a settlement (not violations). */
  settling: string[];
  invariants: Invariant[];
}

/** How far before the last clean run's window end the next one starts (covers the settling grace and commit lag). */
const WINDOW_OVERLAP = '5 minutes';
/** A tenant's first incremental run looks back this far. */
const FIRST_WINDOW = '1 day';
/** Entries are summed into reconcile_sums up to this long ago: a transaction still open that long is not expected. */
const ENTRIES_MARGIN = '5 minutes';

// Literal, not a parameter: the partial index tasks_expiring (026) matches only its own predicate.
export const TERMINAL_LIST = `('TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED')`;

interface Check {
  name: string;
  description: string;
  /** Counts what the invariant ranges over (in the window). Named parameters: :tenant, :since, :grace. */
  count: string;
  /** Selects the rows that break it (at most 100 are listed). */
  violations: string;
  /** The whole-ledger form of `violations`, when the windowed one reads running sums or recent rows only. */
  fullViolations?: string;
  fullCount?: string;
}

const CHECKS: Check[] = [
  {
    name: 'terminalTaskSettledOnce',
    description: 'every terminal task has exactly one settlement, in its final state',
    count: `SELECT count(*) FROM tasks WHERE tenant = :tenant AND state IN ${TERMINAL_LIST} AND updated_at >= :since::timestamptz`,
    violations: `
      SELECT t.task_id AS "taskId", t.state, count(s.id)::int AS settlements, min(s.final_state) AS "settledAs"
        FROM tasks t LEFT JOIN settlements s ON s.tenant = t.tenant AND s.task_id = t.task_id
       WHERE t.tenant = :tenant AND t.state IN ${TERMINAL_LIST} AND t.updated_at >= :since::timestamptz
       GROUP BY t.task_id, t.state, t.status_timestamp
      HAVING (count(s.id) = 0 AND t.status_timestamp < now() - make_interval(secs => :grace / 1000.0))
          OR count(s.id) > 1 OR (count(s.id) = 1 AND min(s.final_state) <> t.state)`,
  },
  {
    name: 'settledTaskIsTerminal',
    description: 'every settlement belongs to a task that the projection shows terminal, or that retention purged terminal',
    count: `SELECT count(*) FROM settlements WHERE tenant = :tenant AND created_at >= :since::timestamptz`,
    violations: `
      SELECT s.task_id AS "taskId", coalesce(t.state, p.state) AS state FROM settlements s
        LEFT JOIN tasks t ON t.tenant = s.tenant AND t.task_id = s.task_id
        LEFT JOIN purged_tasks p ON t.task_id IS NULL AND p.tenant = s.tenant AND p.task_id = s.task_id
       WHERE s.tenant = :tenant AND s.created_at >= :since::timestamptz
         AND (coalesce(t.state, p.state) IS NULL OR coalesce(t.state, p.state) NOT IN ${TERMINAL_LIST})`,
  },
  {
    name: 'noHoldOnTerminalTask',
    description: 'no hold is still open on a settled task, and every settled task\'s hold was closed by its settlement',
    count: `SELECT count(*) FROM holds WHERE tenant = :tenant AND state = 'held'`,
    violations: `
      SELECT h.task_id AS "taskId", h.state, h.amount_minor::bigint AS "amountMinor"
        FROM holds h JOIN settlements s ON s.tenant = h.tenant AND s.task_id = h.task_id
       WHERE h.tenant = :tenant AND h.state = 'held'`,
  },
  {
    name: 'captureWithinHold',
    description: 'what a settlement charged equals its hold\'s capture and never exceeds the hold',
    count: `SELECT count(*) FROM settlements WHERE tenant = :tenant AND created_at >= :since::timestamptz`,
    violations: `
      SELECT s.task_id AS "taskId", s.amount_minor::bigint AS "chargedMinor", h.amount_minor::bigint AS "heldMinor", h.captured_minor::bigint AS "capturedMinor"
        FROM settlements s LEFT JOIN holds h ON h.tenant = s.tenant AND h.task_id = s.task_id AND h.state IN ('captured', 'released')
       WHERE s.tenant = :tenant AND s.created_at >= :since::timestamptz
         AND s.amount_minor > 0 AND (h.task_id IS NULL OR s.amount_minor > h.amount_minor OR s.amount_minor <> h.captured_minor)`,
  },
  {
    name: 'balanceIsSumOfEntries',
    description: 'each account\'s balance and held amount equal the sums of its ledger entries',
    count: `SELECT count(*) FROM accounts WHERE tenant = :tenant`,
    // The running sums of the entries before entries_through, plus the entries since (a parameter, not a subquery:
    // the planner then sees how recent it is and takes ledger_by_time instead of scanning every entry).
    violations: balanceCheck(`
      SELECT account, sum(amount) AS amount, sum(held) AS held FROM (
        SELECT account, amount_minor AS amount, held_minor AS held FROM reconcile_sums WHERE tenant = :tenant
        UNION ALL
        SELECT account, amount_minor, held_minor FROM ledger_entries WHERE tenant = :tenant AND created_at >= :through::timestamptz
      ) x GROUP BY account`),
    fullViolations: balanceCheck(`SELECT account, sum(amount_minor) AS amount, sum(held_minor) AS held FROM ledger_entries WHERE tenant = :tenant GROUP BY account`),
  },
  {
    name: 'heldIsSumOfOpenHolds',
    description: 'each account\'s held amount equals the sum of its open holds',
    count: `SELECT count(*) FROM accounts WHERE tenant = :tenant AND kind = 'requester'`,
    violations: `
      SELECT a.account, a.held_minor::bigint AS "heldMinor", coalesce(h.open, 0)::bigint AS "openHoldsMinor"
        FROM accounts a
        LEFT JOIN (SELECT account, sum(amount_minor) AS open FROM holds WHERE tenant = :tenant AND state = 'held' GROUP BY account) h ON h.account = a.account
       WHERE a.tenant = :tenant AND a.held_minor <> coalesce(h.open, 0)`,
  },
  {
    name: 'availableNotNegative',
    description: 'no limited account has more held or spent than it holds (balance − held ≥ 0)',
    count: `SELECT count(*) FROM accounts WHERE tenant = :tenant`,
    violations: `
      SELECT account, balance_minor::bigint AS "balanceMinor", held_minor::bigint AS "heldMinor" FROM accounts
       WHERE tenant = :tenant AND kind <> 'external' AND NOT unlimited AND balance_minor - held_minor < 0`,
  },
  {
    name: 'movementsBalance',
    description: 'the entries of every movement (each settlement, deposit, hold) sum to zero',
    count: `SELECT count(DISTINCT movement_key) FROM ledger_entries WHERE tenant = :tenant AND created_at >= :since::timestamptz`,
    violations: `
      SELECT movement_key AS movement, min(settlement_id)::text AS "settlementId", sum(amount_minor)::bigint AS "sumMinor"
        FROM ledger_entries
       WHERE tenant = :tenant AND movement_key IN (SELECT movement_key FROM ledger_entries WHERE tenant = :tenant AND created_at >= :since::timestamptz)
       GROUP BY movement_key HAVING sum(amount_minor) <> 0`,
    fullViolations: `
      SELECT movement_key AS movement, min(settlement_id)::text AS "settlementId", sum(amount_minor)::bigint AS "sumMinor"
        FROM ledger_entries WHERE tenant = :tenant GROUP BY movement_key HAVING sum(amount_minor) <> 0`,
  },
  {
    name: 'settlementMatchesEntries',
    description: 'every settlement has its ledger movement, charging the requester exactly the settled amount',
    count: `SELECT count(*) FROM settlements WHERE tenant = :tenant AND created_at >= :since::timestamptz`,
    violations: `
      SELECT s.task_id AS "taskId", s.amount_minor::bigint AS "amountMinor", count(e.id)::int AS entries,
             coalesce(sum(e.amount_minor) FILTER (WHERE e.amount_minor < 0), 0)::bigint AS "debitedMinor"
        FROM settlements s LEFT JOIN ledger_entries e ON e.settlement_id = s.id
       WHERE s.tenant = :tenant AND s.created_at >= :since::timestamptz
       GROUP BY s.id, s.task_id, s.amount_minor
      HAVING count(e.id) = 0 OR coalesce(sum(e.amount_minor) FILTER (WHERE e.amount_minor < 0), 0) <> -s.amount_minor`,
  },
  {
    name: 'trustEventPerSettlement',
    description: 'every settled task has exactly one trust event',
    count: `SELECT count(*) FROM settlements WHERE tenant = :tenant AND created_at >= :since::timestamptz`,
    violations: `
      SELECT s.task_id AS "taskId" FROM settlements s LEFT JOIN trust_events t ON t.tenant = s.tenant AND t.task_id = s.task_id
       WHERE s.tenant = :tenant AND s.created_at >= :since::timestamptz AND t.task_id IS NULL`,
  },
];

/** balanceIsSumOfEntries over the per-account sums `sums` selects (account, amount, held). */
function balanceCheck(sums: string): string {
  return `
      SELECT coalesce(a.account, e.account) AS account, a.balance_minor::bigint AS "balanceMinor", e.amount::bigint AS "entriesMinor",
             a.held_minor::bigint AS "heldMinor", e.held::bigint AS "entriesHeldMinor"
        FROM (SELECT * FROM accounts WHERE tenant = :tenant) a
        FULL JOIN (${sums}) e ON e.account = a.account
       WHERE a.account IS NULL OR (e.account IS NULL AND (a.balance_minor <> 0 OR a.held_minor <> 0))
          OR a.balance_minor <> e.amount OR a.held_minor <> e.held`;
}

/** `:name` parameters as `$n`, with the values in order. */
function bind(sql: string, values: Record<string, unknown>): [string, unknown[]] {
  const names: string[] = [];
  const text = sql.replace(/(?<!:):([a-z]+)\b/g, (_, name: string) => {
    if (!(name in values)) throw new Error(`reconcile: no value for :${name}`);
    const at = names.indexOf(name);
    if (at >= 0) return `$${at + 1}`;
    names.push(name);
    return `$${names.length}`;
  });
  return [text, names.map((n) => values[n])];
}

export interface ReconcileOptions {
  /** Check the whole ledger, not only what changed since the last clean run. */
  full?: boolean;
}

export async function reconcile(pool: Pool, tenant: string, opts: ReconcileOptions = {}): Promise<Reconciliation> {
  const full = opts.full ?? false;
  const { since, sinceAt, through } = await advance(pool, tenant, full);
  // One snapshot for every query: a settlement committing halfway through cannot make the checks disagree.
  const report = await inTransaction(pool, async (client) => {
    const { rows: at } = await client.query<{ now: Date }>('SELECT now()');
    const values = { tenant, since, through, grace: SETTLING_GRACE_MS };
    const invariants: Invariant[] = [];
    for (const c of CHECKS) {
      const [countSql, countArgs] = bind((full && c.fullCount) || c.count, values);
      const [sql, args] = bind(`${(full && c.fullViolations) || c.violations} LIMIT 100`, values);
      const { rows: counted } = await client.query<{ count: string }>(countSql, countArgs);
      const { rows } = await client.query(sql, args);
      const violations = rows.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, typeof v === 'string' && /Minor$/.test(k) ? Number(v) : v])));
      invariants.push({ name: c.name, description: c.description, ok: rows.length === 0, checked: Number(counted[0]!.count), violations });
    }
    const [settlingSql, settlingArgs] = bind(
      `SELECT t.task_id FROM tasks t
        WHERE t.tenant = :tenant AND t.state IN ${TERMINAL_LIST} AND t.updated_at >= :since::timestamptz
          AND t.status_timestamp >= now() - make_interval(secs => :grace / 1000.0)
          AND NOT EXISTS (SELECT 1 FROM settlements s WHERE s.tenant = t.tenant AND s.task_id = t.task_id)`,
      values,
    );
    const { rows: settling } = await client.query<{ task_id: string }>(settlingSql, settlingArgs);
    const [totalsSql, totalsArgs] = bind(
      `SELECT (SELECT count(*) FROM accounts WHERE tenant = :tenant)::int AS accounts,
              (SELECT count(*) FROM tasks WHERE tenant = :tenant AND state IN ${TERMINAL_LIST} AND updated_at >= :since::timestamptz)::int AS "tasksTerminal",
              (SELECT count(*) FROM settlements WHERE tenant = :tenant AND created_at >= :since::timestamptz)::int AS settlements,
              (SELECT count(*) FROM holds WHERE tenant = :tenant AND state = 'held')::int AS "openHolds",
              (SELECT coalesce(sum(amount_minor), 0) FROM deposits WHERE tenant = :tenant)::bigint AS "depositedMinor",
              (SELECT coalesce(sum(balance_minor), 0) FROM accounts WHERE tenant = :tenant)::bigint AS "balanceSumMinor"`,
      values,
    );
    const { rows: t } = await client.query(totalsSql, totalsArgs);
    const totals = { ...t[0], depositedMinor: Number(t[0].depositedMinor), balanceSumMinor: Number(t[0].balanceSumMinor) };
    const window = { full, since: sinceAt ? sinceAt.toISOString() : null };
    return { ok: invariants.every((i) => i.ok), checkedAt: at[0]!.now.toISOString(), window, totals, settling: settling.map((r) => r.task_id), invariants };
  }, 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
  // A clean run moves the window: the next one starts a little before this one's snapshot.
  if (report.ok) await pool.query('UPDATE reconcile_runs SET checked_at = greatest(checked_at, $2) WHERE tenant = $1', [tenant, report.checkedAt]);
  return report;
}

/**
 * Sums the tenant's ledger entries written since the last run (up to ENTRIES_MARGIN ago) into reconcile_sums, in a
 * transaction of its own that holds the tenant's reconcile_runs row (two runs at once add each entry once).
 * @returns where this run's window starts (-infinity for a full run), and how far reconcile_sums reach.
 */
async function advance(pool: Pool, tenant: string, full: boolean): Promise<{ since: string; sinceAt?: Date; through: string }> {
  return inTransaction(pool, async (client: PoolClient) => {
    await client.query('INSERT INTO reconcile_runs (tenant) VALUES ($1) ON CONFLICT (tenant) DO NOTHING', [tenant]);
    // Timestamps as text, so that -infinity (no entries summed yet) goes back to PostgreSQL as it came.
    const { rows } = await client.query<{ since: Date; since_text: string; through: string; next: string; due: boolean }>(
      `SELECT coalesce(checked_at - interval '${WINDOW_OVERLAP}', now() - interval '${FIRST_WINDOW}') AS since,
              coalesce(checked_at - interval '${WINDOW_OVERLAP}', now() - interval '${FIRST_WINDOW}')::text AS since_text,
              entries_through::text AS through, (now() - interval '${ENTRIES_MARGIN}')::text AS next,
              entries_through < now() - interval '${ENTRIES_MARGIN}' AS due
         FROM reconcile_runs WHERE tenant = $1 FOR UPDATE`,
      [tenant],
    );
    const run = rows[0]!;
    if (run.due) {
      await client.query(
        `INSERT INTO reconcile_sums AS r (tenant, account, amount_minor, held_minor)
         SELECT $1, account, sum(amount_minor), sum(held_minor) FROM ledger_entries
          WHERE tenant = $1 AND created_at >= $2::timestamptz AND created_at < $3::timestamptz GROUP BY account
         ON CONFLICT (tenant, account) DO UPDATE
           SET amount_minor = r.amount_minor + EXCLUDED.amount_minor, held_minor = r.held_minor + EXCLUDED.held_minor`,
        [tenant, run.through, run.next],
      );
      await client.query('UPDATE reconcile_runs SET entries_through = $2::timestamptz WHERE tenant = $1', [tenant, run.next]);
    }
    const through = run.due ? run.next : run.through;
    return full ? { since: '-infinity', through } : { since: run.since_text, sinceAt: run.since, through };
  });
}
