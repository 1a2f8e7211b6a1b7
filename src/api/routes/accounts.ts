/**
 * Accounts and the ledger over HTTP: fund a requester account, withdraw from a requester or agent account, list
 * the tenant's accounts, read an account and its latest movements, and reconcile the whole ledger.
 */
import type { FastifyInstance } from 'fastify';
import type { Pool } from 'pg';
import { z } from 'zod';
import { ACCOUNT_NAME, ACCOUNT_NAME_RULE, DepositConflictError, InsufficientFundsError, deposit, getAccount, latestEntries, listAccounts, mayReadAccount, notYourAccount, withdraw } from '../../core/ledger/accounts';
import type { UnfundedPolicy } from '../../core/ledger/postings';
import { reconcile } from '../../core/ledger/reconcile';
import { access, callerOf } from '../../core/auth/caller';
import { answer, describeOnly, errorBody, requestSchema } from './openapi';

/** `full=true`: check the whole ledger, not only what changed since the last clean run. */
const ReconcileQuery = z.strictObject({ full: z.enum(['true', 'false']).optional() });

export interface AccountRoutesDeps {
  pool: Pool;
  unfundedAccounts: UnfundedPolicy;
  /** The tenant's tasks whose workflow closed without a terminal state, not yet swept (Temporal's visibility). */
  closedOpenTasks?: (tenant: string) => Promise<string[]>;
}

/** Ledger account names: `requester:<id>`, `agent:<agent id>`, `external:deposits`. */
const AccountName = z.string().regex(ACCOUNT_NAME, ACCOUNT_NAME_RULE);

const DepositBody = z.strictObject({
  /** Integer minor units (cents); at most 10^12 per deposit or withdrawal. */
  amountMinor: z.number().int('must be an integer (minor units)').positive('must be positive').max(1e12, 'at most 10^12 at a time'),
  /** The same key sent again moves nothing (answers 200 with the account); with another amount or account it is 409. */
  idempotencyKey: z.string().min(1).max(200),
});

const LIST_ENTRIES = 20;

export async function accountRoutes(app: FastifyInstance, { pool, unfundedAccounts, closedOpenTasks }: AccountRoutesDeps): Promise<void> {
  describeOnly(app);
  const accountOf = (raw: string) => AccountName.safeParse(raw);

  const params = requestSchema(z.object({ account: AccountName }));
  // Money in (a requester account) and out (a requester account's unspent funds, an agent's payout): one movement
  // each, once per idempotencyKey, an admin's.
  const movements = [
    {
      path: 'deposits',
      audit: 'account.deposit',
      summary: 'Fund a requester account (X-Switchboard-Tenant names the tenant); idempotent by idempotencyKey',
      what: 'deposit',
      conflict: 'The idempotencyKey was used with another amount or account',
      refuse: (a: string) => (a.startsWith('requester:') ? undefined : `Only requester accounts can be funded; ${a} is paid by settlements`),
      move: deposit,
    },
    {
      path: 'withdrawals',
      audit: 'account.withdraw',
      summary: 'Take available money out of a requester account (funds returned) or an agent account (a payout); idempotent by idempotencyKey',
      what: 'withdrawal',
      conflict: 'More than the available balance (or an account on credit), or the idempotencyKey was used with another amount or account',
      refuse: (a: string) => (a.startsWith('external:') ? `${a} is where money comes from and goes to; withdraw from a requester or agent account` : undefined),
      move: withdraw,
    },
  ];
  for (const m of movements) {
    const schema = {
      tags: ['accounts'],
      summary: m.summary,
      params,
      body: requestSchema(DepositBody),
      response: {
        200: answer('{created: false, account}: this idempotencyKey was applied before; nothing moved'),
        201: answer('{created: true, account}'),
        400: errorBody(`Invalid account or ${m.what}, naming the field`),
        409: errorBody(m.conflict),
      },
    };
    app.post<{ Params: { account: string } }>(`/accounts/:account/${m.path}`, { config: { ...access.admin, audit: m.audit }, schema }, async (req, reply) => {
      const { tenant } = callerOf(req);
      const account = accountOf(req.params.account);
      if (!account.success) return reply.code(400).send({ error: `Invalid account: ${z.prettifyError(account.error)}` });
      const refused = m.refuse(account.data);
      if (refused) return reply.code(400).send({ error: refused });
      const body = DepositBody.safeParse(req.body);
      if (!body.success) return reply.code(400).send({ error: `Invalid ${m.what}: ${z.prettifyError(body.error)}` });
      try {
        const r = await m.move(pool, tenant, account.data, body.data.amountMinor, body.data.idempotencyKey, unfundedAccounts);
        return reply.code(r.created ? 201 : 200).send({ created: r.created, account: r.account });
      } catch (err) {
        if (err instanceof DepositConflictError || err instanceof InsufficientFundsError) return reply.code(409).send({ error: err.message });
        throw err;
      }
    });
  }

  // Every account of the tenant that has moved money (requester, agents, deposits), with balance, held and available.
  const listSchema = {
    tags: ['accounts'],
    summary: 'Every account of the caller\'s tenant that has moved money, with balance, held and available (operators)',
    response: { 200: answer('{ accounts: [...] }') },
  };
  app.get('/accounts', { config: access.operator, schema: listSchema }, async (req) => ({ accounts: await listAccounts(pool, callerOf(req).tenant) }));

  const accountSchema = {
    tags: ['accounts'],
    summary: 'Balance, held, available and the latest 20 entries (clients: their requester account; agent keys: their agent\'s)',
    params,
    response: {
      200: answer('The account with its latest entries'),
      400: errorBody('Invalid account name'),
      403: errorBody('A client or agent key asked for an account not its own (adds requiredRoles)'),
    },
  };
  app.get<{ Params: { account: string } }>('/accounts/:account', { config: access.member, schema: accountSchema }, async (req, reply) => {
    const caller = callerOf(req);
    const { tenant } = caller;
    const account = accountOf(req.params.account);
    if (!account.success) return reply.code(400).send({ error: `Invalid account: ${z.prettifyError(account.error)}` });
    if (!mayReadAccount(caller, account.data)) {
      return reply.code(403).send({ error: notYourAccount(caller, account.data), requiredRoles: ['admin', 'operator'] });
    }
    const view = await getAccount(pool, tenant, account.data, unfundedAccounts);
    const entries = await latestEntries(pool, tenant, account.data, LIST_ENTRIES);
    return { ...view, entries };
  });

  // The ledger's invariants, with every violation listed; 200 either way (`ok` says which).
  const reconcileSchema = {
    tags: ['ledger'],
    summary: 'Check the ledger\'s invariants in one snapshot: what changed since the last clean run, or everything with full=true; 200 either way (`ok` says which)',
    querystring: requestSchema(ReconcileQuery),
    response: { 200: answer('{ok, window, invariants}'), 400: errorBody('Invalid query, naming the field') },
  };
  app.get('/ledger/reconcile', { config: access.operator, schema: reconcileSchema }, async (req, reply) => {
    const { tenant } = callerOf(req);
    const query = ReconcileQuery.safeParse(req.query);
    if (!query.success) return reply.code(400).send({ error: `Invalid query: ${z.prettifyError(query.error)}` });
    const report = await reconcile(pool, tenant, { full: query.data.full === 'true' });
    if (!closedOpenTasks) return report;
    // A task whose workflow is gone but whose state is not terminal holds its hold and refuses follow-ups until the
    // orphan sweep ends it: a violation until then.
    const candidates = await closedOpenTasks(tenant);
    const { rows } = await pool.query<{ task_id: string; state: string }>(
      `SELECT task_id, state FROM tasks WHERE tenant = $1 AND task_id = ANY($2)
          AND state NOT IN ('TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED')`,
      [tenant, candidates],
    );
    const invariant = {
      name: 'everyOpenTaskHasALiveWorkflow',
      description: 'no task is left non-terminal after its workflow closed (terminated, timed out, failed); the orphan sweep ends such tasks',
      ok: rows.length === 0,
      checked: candidates.length,
      violations: rows.map((r) => ({ taskId: r.task_id, state: r.state })),
    };
    return { ...report, ok: report.ok && invariant.ok, invariants: [...report.invariants, invariant] };
  });
}
