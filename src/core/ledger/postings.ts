/**
 * Posting movements to the ledger. A movement is a set of ledger entries under one movement key; each entry
 * changes one account's balance (amount) and/or its held part (held). The entries and the account rows they
 * change are written by the caller's transaction, so the `accounts` cache never disagrees with the ledger.
 */
import type { PoolClient } from 'pg';

export type AccountKind = 'requester' | 'agent' | 'external';
export type MovementKind = 'deposit' | 'hold' | 'capture' | 'release' | 'withdrawal';

/** How a requester account that has never been funded behaves (SWITCHBOARD_UNFUNDED_ACCOUNTS). */
export type UnfundedPolicy = 'enforce' | 'unlimited';

export const requesterAccount = (requester: string) => `requester:${requester}`;
export const DEPOSITS_ACCOUNT = 'external:deposits';
export const WITHDRAWALS_ACCOUNT = 'external:withdrawals';

export const kindOf = (account: string): AccountKind => account.slice(0, account.indexOf(':')) as AccountKind;

export interface Entry {
  account: string;
  amountMinor: number;
  heldMinor?: number;
}

export interface Movement {
  tenant: string;
  key: string;
  kind: MovementKind;
  entries: Entry[];
}

/**
 * Creates the account row if this is its first use. A requester account starts unlimited only under the
 * `unlimited` policy; agent accounts are only ever credited, and the external account may go negative.
 */
export async function ensureAccount(client: PoolClient, tenant: string, account: string, policy: UnfundedPolicy): Promise<void> {
  const kind = kindOf(account);
  await client.query(
    `INSERT INTO accounts (tenant, account, kind, unlimited) VALUES ($1, $2, $3, $4) ON CONFLICT (tenant, account) DO NOTHING`,
    [tenant, account, kind, kind === 'requester' && policy === 'unlimited'],
  );
}

/**
 * Writes the movement's entries and applies them to the accounts. Accounts are locked in name order, so two
 * movements touching the same accounts cannot deadlock (a task's settlement, switchboard_settle_task in migration
 * 017, locks its two in the same order). A movement key seen before raises a unique violation
 * (23505): callers check for the movement first and treat that as "already done".
 * Throws a check violation (23514) if an account's available balance would go negative.
 */
export async function post(client: PoolClient, m: Movement, policy: UnfundedPolicy): Promise<void> {
  const sum = m.entries.reduce((s, e) => s + e.amountMinor, 0);
  if (sum !== 0) throw new Error(`movement ${m.key} does not balance (${sum})`);
  const entries = [...m.entries].sort((a, b) => (a.account < b.account ? -1 : a.account > b.account ? 1 : 0));
  for (const e of entries) {
    await ensureAccount(client, m.tenant, e.account, policy);
    await client.query(
      `UPDATE accounts SET balance_minor = balance_minor + $3, held_minor = held_minor + $4, updated_at = now()
        WHERE tenant = $1 AND account = $2`,
      [m.tenant, e.account, e.amountMinor, e.heldMinor ?? 0],
    );
  }
  await client.query(
    `INSERT INTO ledger_entries (tenant, account, amount_minor, held_minor, movement_key, kind)
     SELECT $1, e.account, e.amount, e.held, $2, $3
       FROM unnest($4::text[], $5::bigint[], $6::bigint[]) AS e(account, amount, held)`,
    [
      m.tenant,
      m.key,
      m.kind,
      entries.map((e) => e.account),
      entries.map((e) => e.amountMinor),
      entries.map((e) => e.heldMinor ?? 0),
    ],
  );
}
