/** Funding and reading accounts (the HTTP side of the ledger; holds and settlements are activities). */
import type { Pool, PoolClient } from 'pg';
import { DEPOSITS_ACCOUNT, type UnfundedPolicy, WITHDRAWALS_ACCOUNT, kindOf, post } from './postings';
import { inTransaction } from '../db/tx';
import type { Caller } from '../auth/caller';

/** Ledger account names: `requester:<id>`, `agent:<agent id>`, `external:<id>`. */
export const ACCOUNT_NAME = /^(requester|agent|external):[A-Za-z0-9._~-]{1,200}$/;
export const ACCOUNT_NAME_RULE = 'must be requester:<id>, agent:<id> or external:<id> (letters, digits, . _ ~ -)';

/** The account a key of this role pays from or is paid into: the tenant's requester account, or its agent's. */
export const ownAccount = (caller: Caller): string => (caller.role === 'agent' ? `agent:${caller.agentId}` : `requester:${caller.tenant}`);

/**
 * Whose account a caller may read: admins and operators any of the tenant's; a client the tenant's requester
 * account (the one its tasks are charged to); an agent key its own agent's account.
 */
export function mayReadAccount(caller: Caller, account: string): boolean {
  return caller.role === 'admin' || caller.role === 'operator' || account === ownAccount(caller);
}

export const notYourAccount = (caller: Caller, account: string): string =>
  `A ${caller.role} key reads only its own account (${ownAccount(caller)}); ${account} needs the role admin or operator`;

export interface AccountView {
  account: string;
  kind: string;
  balanceMinor: number;
  heldMinor: number;
  availableMinor: number;
  /** true while a never-funded requester account runs on credit (SWITCHBOARD_UNFUNDED_ACCOUNTS=unlimited). */
  unlimited: boolean;
  updatedAt?: string;
}

interface AccountRow {
  account: string;
  kind: string;
  balance_minor: string;
  held_minor: string;
  unlimited: boolean;
  updated_at: Date;
}

const view = (r: AccountRow): AccountView => ({
  account: r.account,
  kind: r.kind,
  balanceMinor: Number(r.balance_minor),
  heldMinor: Number(r.held_minor),
  availableMinor: Number(r.balance_minor) - Number(r.held_minor),
  unlimited: r.unlimited,
  updatedAt: r.updated_at.toISOString(),
});

/** An account as it stands; one never used reads as empty (unlimited if the policy says so). */
export async function getAccount(pool: Pool, tenant: string, account: string, policy: UnfundedPolicy): Promise<AccountView> {
  const { rows } = await pool.query<AccountRow>('SELECT * FROM accounts WHERE tenant = $1 AND account = $2', [tenant, account]);
  if (rows[0]) return view(rows[0]);
  const kind = kindOf(account);
  return { account, kind, balanceMinor: 0, heldMinor: 0, availableMinor: 0, unlimited: kind === 'requester' && policy === 'unlimited' };
}

/** Every account of the tenant that has been used, requester accounts first, then agents', then external. */
export async function listAccounts(pool: Pool, tenant: string): Promise<AccountView[]> {
  const { rows } = await pool.query<AccountRow>(
    `SELECT * FROM accounts WHERE tenant = $1
      ORDER BY CASE kind WHEN 'requester' THEN 0 WHEN 'agent' THEN 1 ELSE 2 END, account`,
    [tenant],
  );
  return rows.map(view);
}

export interface EntryView {
  movement: string;
  kind: string;
  taskId?: string;
  amountMinor: number;
  heldMinor: number;
  at: string;
}

/** An account's latest `limit` ledger entries, newest first. */
export async function latestEntries(pool: Pool, tenant: string, account: string, limit: number): Promise<EntryView[]> {
  const { rows } = await pool.query<{ movement_key: string; kind: string; task_id: string | null; amount_minor: string; held_minor: string; created_at: Date }>(
    `SELECT movement_key, kind, task_id, amount_minor, held_minor, created_at FROM ledger_entries
      WHERE tenant = $1 AND account = $2 ORDER BY id DESC LIMIT $3`,
    [tenant, account, limit],
  );
  return rows.map((r) => ({
    movement: r.movement_key,
    kind: r.kind,
    ...(r.task_id ? { taskId: r.task_id } : {}),
    amountMinor: Number(r.amount_minor),
    heldMinor: Number(r.held_minor),
    at: r.created_at.toISOString(),
  }));
}

/** The same idempotency key was used before for a different account or amount. */
export class DepositConflictError extends Error {}

export interface DepositOutcome {
  /** false when this idempotency key had already been applied: nothing was added this time. */
  created: boolean;
  account: AccountView;
}

/**
 * Claims a deposit's or withdrawal's idempotency key in its table (in the caller's transaction). @returns true when
 * this request is the first with the key; false when the same request was applied before.
 * @throws DepositConflictError when the key was used for another account or amount (`conflict` says how).
 */
async function claimKey(
  client: PoolClient,
  table: 'deposits' | 'withdrawals',
  req: { tenant: string; idempotencyKey: string; account: string; amountMinor: number },
  conflict: (was: { account: string; amount_minor: string }) => string,
): Promise<boolean> {
  const claimed = await client.query(
    `INSERT INTO ${table} (tenant, idempotency_key, account, amount_minor) VALUES ($1, $2, $3, $4)
     ON CONFLICT (tenant, idempotency_key) DO NOTHING RETURNING 1`,
    [req.tenant, req.idempotencyKey, req.account, req.amountMinor],
  );
  if (claimed.rowCount) return true;
  const { rows } = await client.query<{ account: string; amount_minor: string }>(
    `SELECT account, amount_minor FROM ${table} WHERE tenant = $1 AND idempotency_key = $2`,
    [req.tenant, req.idempotencyKey],
  );
  if (rows[0]!.account !== req.account || Number(rows[0]!.amount_minor) !== req.amountMinor) throw new DepositConflictError(conflict(rows[0]!));
  return false;
}

/**
 * Credits a requester account from `external:deposits`, once per idempotency key. The key's row and the
 * ledger movement commit together, so a retried request (or two racing ones) adds the money once.
 * @throws DepositConflictError when the key was used for another account or amount.
 */
export async function deposit(
  pool: Pool,
  tenant: string,
  account: string,
  amountMinor: number,
  idempotencyKey: string,
  policy: UnfundedPolicy,
): Promise<DepositOutcome> {
  const created = await inTransaction(pool, async (client) => {
    const claimed = await claimKey(client, 'deposits', { tenant, idempotencyKey, account, amountMinor }, (was) =>
      `idempotencyKey ${idempotencyKey} was already used for ${was.amount_minor} into ${was.account}; use a new key for a new deposit`);
    if (!claimed) return false;
    await post(
      client,
      {
        tenant,
        key: `deposit:${idempotencyKey}`,
        kind: 'deposit',
        entries: [
          { account: DEPOSITS_ACCOUNT, amountMinor: -amountMinor },
          { account, amountMinor },
        ],
      },
      policy,
    );
    // Funded: from the first time its available balance is covered, the account is held to it.
    await client.query(
      `UPDATE accounts SET unlimited = false WHERE tenant = $1 AND account = $2 AND unlimited AND balance_minor - held_minor >= 0`,
      [tenant, account],
    );
    return true;
  });
  return { created, account: await getAccount(pool, tenant, account, policy) };
}

/** A withdrawal the account cannot cover (its available balance, or an account on credit). */
export class InsufficientFundsError extends Error {}

/**
 * Takes money out of a requester account (unspent funds returned) or an agent account (a payout) into
 * `external:withdrawals`, once per idempotency key, as deposit() puts it in. Only what is available (balance −
 * held) can go: the account's row is locked while that is checked and the movement made, so a hold racing it
 * waits. An account running on credit (never funded, SWITCHBOARD_UNFUNDED_ACCOUNTS=unlimited) has nothing to
 * withdraw.
 * @throws DepositConflictError when the key was used for another account or amount; InsufficientFundsError.
 */
export async function withdraw(pool: Pool, tenant: string, account: string, amountMinor: number, idempotencyKey: string, policy: UnfundedPolicy): Promise<DepositOutcome> {
  const created = await inTransaction(pool, async (client) => {
    const claimed = await claimKey(client, 'withdrawals', { tenant, idempotencyKey, account, amountMinor }, (was) =>
      `idempotencyKey ${idempotencyKey} was already used to withdraw ${was.amount_minor} from ${was.account}; use a new key for a new withdrawal`);
    if (!claimed) return false;
    const { rows } = await client.query<{ available: string; unlimited: boolean }>(
      'SELECT balance_minor - held_minor AS available, unlimited FROM accounts WHERE tenant = $1 AND account = $2 FOR UPDATE',
      [tenant, account],
    );
    const available = Number(rows[0]?.available ?? 0);
    // A requester account never used reads as on credit under the unlimited policy (as getAccount shows it).
    const unlimited = rows[0] ? rows[0].unlimited : kindOf(account) === 'requester' && policy === 'unlimited';
    if (unlimited) throw new InsufficientFundsError(`${account} runs on credit (never funded): there is nothing to withdraw`);
    if (available < amountMinor) throw new InsufficientFundsError(`${account} has ${available} available (balance − held); ${amountMinor} cannot be withdrawn`);
    await post(
      client,
      {
        tenant,
        key: `withdrawal:${idempotencyKey}`,
        kind: 'withdrawal',
        entries: [
          { account, amountMinor: -amountMinor },
          { account: WITHDRAWALS_ACCOUNT, amountMinor },
        ],
      },
      policy,
    );
    return true;
  });
  return { created, account: await getAccount(pool, tenant, account, policy) };
}
