/**
 * The NANDA auditor's wallet and payment-intent actions (seed 001: "payment intent reconciliation, settlement
 * verification, and wallet management for x402-NP agent transactions"), answered from Switchboard's ledger:
 * a wallet is a ledger account (`requester:<tenant>` pays, `agent:<id>` is paid), and a task's payment intent is
 * its hold — the price reserved on the requester's account before the agent is called, captured at settlement
 * when the task completes, released otherwise. `audit.settlement` and `audit.reconcile` live in observer.ts.
 */
import type { Pool } from 'pg';
import type { Caller } from '../auth/caller';
import { ACCOUNT_NAME, ACCOUNT_NAME_RULE, DepositConflictError, deposit, getAccount, latestEntries, listAccounts, mayReadAccount, notYourAccount, ownAccount } from '../ledger/accounts';
import type { UnfundedPolicy } from '../ledger/postings';
import { SETTLING_GRACE_MS, TERMINAL_LIST } from '../ledger/reconcile';
import { ActionError, invalidField } from './action-error';
import { ERRORS } from '../../../task/errors';

const INVALID_REQUEST = ERRORS.InvalidRequest.code;
/** The latest movements a wallet shows. */
const WALLET_ENTRIES = 20;
/** The most intents `audit.intents` lists (newest first). */
const MAX_INTENTS = 100;
/** The largest single funding, as `POST /accounts/:account/deposits`. */
const MAX_FUNDING = 1e12;

function checkAccount(action: string, account: string): void {
  if (!ACCOUNT_NAME.test(account)) throw invalidField(action, 'account', ACCOUNT_NAME_RULE);
}

/**
 * `audit.wallet`: one account (default: the caller's own — its tenant's requester account, or an agent key's
 * agent account) with balance, held, available and its latest 20 movements; operators asking with no account get
 * every wallet of the tenant.
 */
export async function auditWallet(pool: Pool, caller: Caller, account: string | undefined, policy: UnfundedPolicy) {
  const operator = caller.role === 'admin' || caller.role === 'operator';
  if (account === undefined && operator) return { wallets: await listAccounts(pool, caller.tenant) };
  const name = account ?? ownAccount(caller);
  checkAccount('audit.wallet', name);
  if (!mayReadAccount(caller, name)) throw new ActionError(INVALID_REQUEST, notYourAccount(caller, name), { requiredRoles: ['admin', 'operator'] });
  const wallet = await getAccount(pool, caller.tenant, name, policy);
  return { ...wallet, entries: await latestEntries(pool, caller.tenant, name, WALLET_ENTRIES) };
}

/** `audit.fund`: a deposit into a requester wallet, once per idempotency key (as `POST /accounts/:a/deposits`). */
export async function auditFund(pool: Pool, caller: Caller, f: { account?: string; amount_minor: number; idempotency_key: string }, policy: UnfundedPolicy) {
  const account = f.account ?? ownAccount(caller);
  checkAccount('audit.fund', account);
  if (!account.startsWith('requester:')) throw invalidField('audit.fund', 'account', `must be a requester account; ${account} is paid by settlements`);
  if (!Number.isSafeInteger(f.amount_minor) || f.amount_minor <= 0 || f.amount_minor > MAX_FUNDING) {
    throw invalidField('audit.fund', 'amount_minor', `must be a positive integer (minor units) of at most ${MAX_FUNDING}`);
  }
  try {
    const r = await deposit(pool, caller.tenant, account, f.amount_minor, f.idempotency_key, policy);
    return { created: r.created, wallet: r.account };
  } catch (err) {
    if (err instanceof DepositConflictError) throw invalidField('audit.fund', 'idempotency_key', err.message);
    throw err;
  }
}

interface IntentRow {
  task_id: string;
  account: string;
  agent_id: string;
  amount_minor: string;
  state: string;
  captured_minor: string | null;
  created_at: Date;
  closed_at: Date | null;
  task_state: string | null;
  stale: boolean;
}

/** An intent `held` longer than this after its task ended is stale: the settlement that closes it is missing. */
const STALE = `h.state = 'held' AND (t.state IS NULL OR (t.state IN ${TERMINAL_LIST} AND t.updated_at < now() - make_interval(secs => ${SETTLING_GRACE_MS / 1000})))`;

const INTENT_SELECT = `
  SELECT h.task_id, h.account, h.agent_id, h.amount_minor::bigint AS amount_minor, h.state, h.captured_minor::bigint AS captured_minor,
         h.created_at, h.closed_at, t.state AS task_state, (${STALE}) AS stale
    FROM holds h LEFT JOIN tasks t ON t.tenant = h.tenant AND t.task_id = h.task_id`;

/**
 * A hold as an x402-style payment intent: who pays (`payer`, the requester account), who is paid (`payee`), what
 * was authorized and what was captured or released. `held` is authorized and open; `declined` never reserved
 * (the wallet could not cover it, and the agent was not called); `captured` paid at settlement; `released` freed.
 */
function intentOf(r: IntentRow) {
  const authorized = Number(r.amount_minor);
  const captured = r.captured_minor === null ? 0 : Number(r.captured_minor);
  return {
    task_id: r.task_id,
    state: r.state,
    payer: r.account,
    payee: `agent:${r.agent_id}`,
    authorized_minor: authorized,
    captured_minor: captured,
    released_minor: r.state === 'captured' || r.state === 'released' ? authorized - captured : 0,
    created_at: r.created_at.toISOString(),
    closed_at: r.closed_at?.toISOString() ?? null,
    task_state: r.task_state,
    stale: r.stale,
  };
}

/** `audit.intent`: one task's payment intent (an agent key sees only its own agent's). Undefined when none. */
export async function auditIntent(pool: Pool, caller: Caller, taskId: string) {
  const { rows } = await pool.query<IntentRow>(`${INTENT_SELECT} WHERE h.tenant = $1 AND h.task_id = $2`, [caller.tenant, taskId]);
  const row = rows[0];
  if (!row || (caller.role === 'agent' && row.agent_id !== caller.agentId)) return undefined;
  return intentOf(row);
}

/**
 * `audit.intents`: the tenant's payment intents, newest first (at most 100), narrowed by `state`, `agent_id` or
 * `stale`; with the counts of open (held) and stale intents — a stale one is held though its task ended over a
 * minute ago (or is gone): its settlement is missing, or did not close it (reconcile reports the settled ones).
 */
export async function auditIntents(pool: Pool, tenant: string, f: { state?: string; agent_id?: string; stale?: boolean }) {
  const where = ['h.tenant = $1'];
  const args: unknown[] = [tenant];
  if (f.state !== undefined) {
    if (!['held', 'declined', 'captured', 'released'].includes(f.state)) throw invalidField('audit.intents', 'state', 'must be held, declined, captured or released');
    args.push(f.state);
    where.push(`h.state = $${args.length}`);
  }
  if (f.agent_id !== undefined) {
    args.push(f.agent_id);
    where.push(`h.agent_id = $${args.length}`);
  }
  if (f.stale !== undefined) where.push(f.stale ? STALE : `NOT (${STALE})`);
  const { rows } = await pool.query<IntentRow>(`${INTENT_SELECT} WHERE ${where.join(' AND ')} ORDER BY h.created_at DESC, h.task_id LIMIT ${MAX_INTENTS}`, args);
  const { rows: counts } = await pool.query<{ open: number; stale: number }>(
    `SELECT count(*)::int AS open, count(*) FILTER (WHERE ${STALE})::int AS stale
       FROM holds h LEFT JOIN tasks t ON t.tenant = h.tenant AND t.task_id = h.task_id
      WHERE h.tenant = $1 AND h.state = 'held'`,
    [tenant],
  );
  return { intents: rows.map(intentOf), open: counts[0]!.open, stale: counts[0]!.stale, limit: MAX_INTENTS };
}
