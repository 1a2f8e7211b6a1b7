/**
 * Exact economics end to end (real Temporal, PostgreSQL and @a2a-js/sdk agents): accounts funded over HTTP, a
 * hold reserved before the agent is called, the cost captured (capped by the hold) or the hold released, every
 * movement once under its key, whatever crashes or races, and GET /ledger/reconcile clean afterwards.
 */
import { after, before, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { activityInfo } from '@temporalio/activity';
import { AgentPool, startEchoAgent, startFailingAgent, startSlowAgent } from './agents';
import { Pool } from 'pg';
import { finishTask, holdFunds } from '../activities/bookkeeping';
import { DATABASE_URL, type Gateway, eventually, register, rpc, startGateway } from './helpers/harness';

const ACCOUNT = 'requester:default';
const V1 = { 'A2A-Version': '1.0' };

let gw: Gateway;
const agents = new AgentPool();
/** Activities whose first attempt for a task throws *after* its database write committed. */
const crashAfterCommit = new Set<string>();
/** Chaos: crash the first attempt of these activities at random (seeded), after the commit. */
let chaos: { rate: number; next: () => number } | undefined;
const attempts = new Map<string, number>();

function crashMaybe(activity: string, taskId: string): void {
  const key = `${activity}:${taskId}`;
  attempts.set(key, (attempts.get(key) ?? 0) + 1);
  if (activityInfo().attempt !== 1) return;
  if (crashAfterCommit.has(activity) || (chaos && chaos.next() < chaos.rate)) {
    throw new Error(`simulated crash after ${activity} committed`);
  }
}

before(async () => {
  gw = await startGateway({
    unfundedAccounts: 'enforce',
    wrapActivities: (real) => ({
      ...real,
      async holdFunds(req) {
        const r = await real.holdFunds(req);
        crashMaybe('holdFunds', req.taskId);
        return r;
      },
      // A task settles in the workflow's finishTask (its final record and settlement in one transaction), or, a simple
      // one, in its first exchange's statement (patch level 7).
      async finishTask(rec, req, opts) {
        const r = await real.finishTask(rec, req, opts);
        crashMaybe('finishTask', req.taskId);
        return r;
      },
      async recordTask(rec) {
        await real.recordTask(rec);
        if (chaos) crashMaybe('recordTask', `${rec.task.id}:${rec.version}`);
      },
    }),
  });
});
after(async () => {
  await gw?.close();
  await agents.closeAll();
});
beforeEach(() => {
  crashAfterCommit.clear();
  chaos = undefined;
});


async function http(method: string, path: string, body?: unknown) {
  // As the admin: deposits are an admin's; the tests read accounts and the ledger as one too.
  const res = await gw.fetch(`${gw.url}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  }, 'admin');
  return { status: res.status, json: (await res.json()) as any };
}

const accountOf = async (account = ACCOUNT) => (await http('GET', `/accounts/${account}`)).json;
async function fund(amountMinor: number) {
  const r = await http('POST', `/accounts/${ACCOUNT}/deposits`, { amountMinor, idempotencyKey: randomUUID() });
  assert.equal(r.status, 201, JSON.stringify(r.json));
}
/** Spends the whole available balance of the requester (a capture to a throwaway agent is not needed: a test deposit sets it). */
async function resetTo(amountMinor: number) {
  const { availableMinor, heldMinor } = await accountOf();
  assert.equal(heldMinor, 0, 'no hold is open between tests');
  // The ledger never loses money: to start a test from a known balance, the rest is withdrawn.
  if (availableMinor > 0) {
    const r = await http('POST', `/accounts/${ACCOUNT}/withdrawals`, { amountMinor: availableMinor, idempotencyKey: randomUUID() });
    assert.equal(r.status, 201, JSON.stringify(r.json));
  }
  if (amountMinor > 0) await fund(amountMinor);
}

const message = (text: string, metadata?: Record<string, unknown>) => ({
  messageId: randomUUID(),
  role: 'ROLE_USER',
  parts: [{ text }],
  ...(metadata ? { metadata } : {}),
});

async function send(rpcUrl: string, text: string, opts: { metadata?: Record<string, unknown>; returnImmediately?: boolean } = {}) {
  return rpc(
    rpcUrl,
    { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: message(text, opts.metadata), configuration: { returnImmediately: opts.returnImmediately ?? false } } },
    V1,
  );
}

async function settled(taskId: string) {
  return eventually(async () => {
    const { rows } = await gw.db.pool.query('SELECT * FROM settlements WHERE task_id = $1', [taskId]);
    return rows[0];
  }, 15_000, `the settlement of ${taskId}`);
}

async function movementsOf(taskId: string) {
  const { rows } = await gw.db.pool.query('SELECT movement_key, kind, account, amount_minor, held_minor FROM ledger_entries WHERE task_id = $1 ORDER BY id', [taskId]);
  return rows.map((r) => ({ key: r.movement_key, kind: r.kind, account: r.account, amount: Number(r.amount_minor), held: Number(r.held_minor) }));
}

async function reconciled() {
  const r = await http('GET', '/ledger/reconcile');
  assert.equal(r.status, 200);
  const broken = r.json.invariants.filter((i: any) => !i.ok);
  assert.deepEqual(broken, [], 'every invariant holds');
  assert.equal(r.json.ok, true);
  return r.json;
}

describe('accounts API', () => {
  test('a deposit is applied once per idempotency key; a reused key with other values is 409; bad input is 400', async () => {
    const before = await accountOf();
    const idempotencyKey = randomUUID();
    const first = await http('POST', `/accounts/${ACCOUNT}/deposits`, { amountMinor: 500, idempotencyKey });
    assert.equal(first.status, 201);
    assert.equal(first.json.created, true);
    assert.equal(first.json.account.balanceMinor, before.balanceMinor + 500);
    const again = await http('POST', `/accounts/${ACCOUNT}/deposits`, { amountMinor: 500, idempotencyKey });
    assert.equal(again.status, 200);
    assert.equal(again.json.created, false);
    assert.equal(again.json.account.balanceMinor, before.balanceMinor + 500, 'the replay added nothing');
    // Two racing requests with one new key: one deposit.
    const raceKey = randomUUID();
    const raced = await Promise.all([1, 2, 3].map(() => http('POST', `/accounts/${ACCOUNT}/deposits`, { amountMinor: 10, idempotencyKey: raceKey })));
    assert.deepEqual(raced.map((r) => r.status).sort(), [200, 200, 201]);
    assert.equal((await accountOf()).balanceMinor, before.balanceMinor + 510);

    const conflict = await http('POST', `/accounts/${ACCOUNT}/deposits`, { amountMinor: 501, idempotencyKey });
    assert.equal(conflict.status, 409);
    assert.match(conflict.json.error, /already used/);
    for (const [body, pattern] of [
      [{ amountMinor: 0, idempotencyKey: 'k' }, /positive/],
      [{ amountMinor: 1.5, idempotencyKey: 'k' }, /integer/],
      [{ amountMinor: '5', idempotencyKey: 'k' }, /amountMinor/],
      [{ amountMinor: 5 }, /idempotencyKey/],
      [{ amountMinor: 5, idempotencyKey: 'k', extra: 1 }, /extra/],
    ] as const) {
      const r = await http('POST', `/accounts/${ACCOUNT}/deposits`, body);
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.match(r.json.error, pattern);
    }
    assert.equal((await http('POST', '/accounts/agent:someone/deposits', { amountMinor: 5, idempotencyKey: 'k' })).status, 400);
    assert.equal((await http('GET', '/accounts/bogus')).status, 400);

    const fresh = await accountOf('requester:nobody');
    assert.deepEqual([fresh.balanceMinor, fresh.heldMinor, fresh.availableMinor, fresh.unlimited], [0, 0, 0, false]);
    const read = await accountOf();
    assert.equal(read.entries[0].kind, 'deposit');
    await reconciled();
  });
});

describe('withdrawals', () => {
  test('available money leaves once per key; more than is available, or an external account, is refused and nothing moves', async () => {
    await resetTo(1_000);
    const idempotencyKey = randomUUID();
    const first = await http('POST', `/accounts/${ACCOUNT}/withdrawals`, { amountMinor: 300, idempotencyKey });
    assert.deepEqual([first.status, first.json.created, first.json.account.balanceMinor], [201, true, 700]);
    const again = await http('POST', `/accounts/${ACCOUNT}/withdrawals`, { amountMinor: 300, idempotencyKey });
    assert.deepEqual([again.status, again.json.created, again.json.account.balanceMinor], [200, false, 700], 'the replay took nothing');
    const conflict = await http('POST', `/accounts/${ACCOUNT}/withdrawals`, { amountMinor: 301, idempotencyKey });
    assert.equal(conflict.status, 409);
    assert.match(conflict.json.error, /already used to withdraw 300/);
    const tooMuch = await http('POST', `/accounts/${ACCOUNT}/withdrawals`, { amountMinor: 701, idempotencyKey: 'too-much' });
    assert.equal(tooMuch.status, 409);
    assert.match(tooMuch.json.error, /has 700 available/);
    assert.equal((await accountOf()).balanceMinor, 700, 'nothing moved');
    // The refused key was not spent: once the money is there, the same request goes through.
    await fund(1);
    assert.equal((await http('POST', `/accounts/${ACCOUNT}/withdrawals`, { amountMinor: 701, idempotencyKey: 'too-much' })).status, 201);
    assert.equal((await accountOf()).availableMinor, 0);
    const read = await accountOf();
    assert.deepEqual([read.entries[0].kind, read.entries[0].amountMinor], ['withdrawal', -701]);
    assert.equal((await http('POST', '/accounts/external:deposits/withdrawals', { amountMinor: 5, idempotencyKey: 'x' })).status, 400);
    assert.match((await http('POST', `/accounts/${ACCOUNT}/withdrawals`, { amountMinor: -5, idempotencyKey: 'x' })).json.error, /positive/);
    const asOperator = await gw.fetch(`${gw.url}/accounts/${ACCOUNT}/withdrawals`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ amountMinor: 1, idempotencyKey: 'op' }) }, 'operator');
    assert.equal(asOperator.status, 403, 'money out is an admin\'s');
    await reconciled();
  });

  test("an agent's earnings are paid out from its account; a hold on the requester is not available to withdraw", async () => {
    await resetTo(500);
    const echo = await agents.add(startEchoAgent());
    const { rpc: rpcUrl, id: agentId } = await register(gw, echo.url, { priceMinor: 100 });
    const task = (await send(rpcUrl, 'paid')).json.result.task;
    await settled(task.id);
    const payout = await http('POST', `/accounts/agent:${agentId}/withdrawals`, { amountMinor: 100, idempotencyKey: randomUUID() });
    assert.deepEqual([payout.status, payout.json.account.balanceMinor], [201, 0]);
    assert.equal((await http('POST', `/accounts/agent:${agentId}/withdrawals`, { amountMinor: 1, idempotencyKey: randomUUID() })).status, 409);
    // 400 left; a slow task holds 300 of it: only 100 can leave.
    const slow = await agents.add(startSlowAgent({ ms: 60_000 }));
    const s = await register(gw, slow.url, { priceMinor: 300 });
    const held = (await send(s.rpc, 'hold it', { returnImmediately: true })).json.result.task;
    await eventually(async () => ((await accountOf()).heldMinor === 300 ? true : undefined), 15_000, 'the hold');
    assert.match((await http('POST', `/accounts/${ACCOUNT}/withdrawals`, { amountMinor: 101, idempotencyKey: randomUUID() })).json.error, /has 100 available/);
    assert.equal((await http('POST', `/accounts/${ACCOUNT}/withdrawals`, { amountMinor: 100, idempotencyKey: randomUUID() })).status, 201);
    const canceled = await rpc(s.rpc, { jsonrpc: '2.0', id: 9, method: 'CancelTask', params: { id: held.id } }, V1);
    assert.equal(canceled.json.result?.status?.state, 'TASK_STATE_CANCELED', JSON.stringify(canceled.json));
    await settled(held.id);
    await reconciled();
  });
});

describe('holds and captures', () => {
  test('an unfunded requester is refused with -32050 before the agent is called; the task ends rejected and settled at 0', async () => {
    await resetTo(0);
    const echo = await agents.add(startEchoAgent());
    const { rpc: rpcUrl, id: agentId } = await register(gw, echo.url, { priceMinor: 100 });
    const res = await send(rpcUrl, 'pay me');
    assert.equal(res.json.error?.code, -32050, JSON.stringify(res.json));
    assert.match(res.json.error.message, /Insufficient funds.*hold of 100 on requester:default.*0 available/);
    assert.equal(echo.calls.length, 0, 'the agent never heard of it');
    // The 0.3 dialect gets the same code.
    const legacy = await rpc(rpcUrl, { jsonrpc: '2.0', id: 2, method: 'message/send', params: { message: { kind: 'message', messageId: randomUUID(), role: 'user', parts: [{ kind: 'text', text: 'pay me' }] } } });
    assert.equal(legacy.json.error?.code, -32050, JSON.stringify(legacy.json));
    // A stream is refused the same way, as a plain JSON-RPC answer before any event.
    const stream = await rpc(rpcUrl, { jsonrpc: '2.0', id: 3, method: 'SendStreamingMessage', params: { message: message('stream me') } }, V1);
    assert.equal(stream.json?.error?.code, -32050, stream.text);
    assert.equal(echo.calls.length, 0);

    const { rows } = await eventually(async () => {
      const r = await gw.db.pool.query("SELECT task_id, state FROM tasks WHERE agent_id = $1 AND state = 'TASK_STATE_REJECTED'", [agentId]);
      return r.rows.length === 3 ? r : undefined;
    }, 10_000, 'three rejected tasks');
    for (const { task_id } of rows) {
      const s = await settled(task_id);
      assert.equal(Number(s.amount_minor), 0);
      const { rows: holds } = await gw.db.pool.query('SELECT state FROM holds WHERE task_id = $1', [task_id]);
      assert.deepEqual(holds.map((h) => h.state), ['declined']);
    }
    // A free agent needs no funds.
    const free = await agents.add(startEchoAgent());
    const { rpc: freeUrl } = await register(gw, free.url);
    assert.equal((await send(freeUrl, 'gratis')).json.result.task.status.state, 'TASK_STATE_COMPLETED');
    await reconciled();
  });

  test('completed captures the price; the hold is reserved before the agent runs and released on completion', async () => {
    await resetTo(1_000);
    const slow = await agents.add(startSlowAgent({ ms: 1_000 }));
    const { rpc: rpcUrl, id: agentId } = await register(gw, slow.url, { priceMinor: 300 });
    const started = await send(rpcUrl, 'work', { returnImmediately: true });
    const taskId = started.json.result.task.id;
    await eventually(() => slow.calls.length > 0 || undefined, 10_000, 'the agent call');
    const during = await accountOf();
    assert.deepEqual([during.balanceMinor, during.heldMinor, during.availableMinor], [1_000, 300, 700], 'held while the agent works');
    const s = await settled(taskId);
    assert.equal(Number(s.amount_minor), 300);
    const afterwards = await accountOf();
    assert.deepEqual([afterwards.balanceMinor, afterwards.heldMinor], [700, 0]);
    assert.equal((await accountOf(`agent:${agentId}`)).balanceMinor, 300);
    assert.deepEqual(await movementsOf(taskId), [
      { key: `hold:${taskId}`, kind: 'hold', account: ACCOUNT, amount: 0, held: 300 },
      { key: `settle:${taskId}`, kind: 'capture', account: `agent:${agentId}`, amount: 300, held: 0 },
      { key: `settle:${taskId}`, kind: 'capture', account: ACCOUNT, amount: -300, held: -300 },
    ]);
    await reconciled();
  });

  test('a reported cost is captured and the rest released; a budget caps the cost; a budget below the price is refused', async () => {
    await resetTo(1_000);
    const cheap = await agents.add(startEchoAgent({ cost: 42 }));
    const { rpc: cheapUrl } = await register(gw, cheap.url, { priceMinor: 100 });
    const t1 = (await send(cheapUrl, 'cheap')).json.result.task;
    assert.equal(Number((await settled(t1.id)).amount_minor), 42);

    const greedy = await agents.add(startEchoAgent({ cost: 5_000 }));
    const { rpc: greedyUrl, id: greedyId } = await register(gw, greedy.url, { priceMinor: 100 });
    const t2 = (await send(greedyUrl, 'greedy', { metadata: { budgetMinor: 250 } })).json.result.task;
    assert.equal(t2.status.state, 'TASK_STATE_COMPLETED');
    assert.equal(Number((await settled(t2.id)).amount_minor), 250, 'capped by the hold (the budget)');
    const t3 = (await send(greedyUrl, 'greedy again')).json.result.task;
    assert.equal(Number((await settled(t3.id)).amount_minor), 100, 'without a budget the price is the hold');
    assert.equal((await accountOf(`agent:${greedyId}`)).balanceMinor, 350);

    const calls = greedy.calls.length;
    for (const budgetMinor of [99, -1, 1.5, 'lots']) {
      const r = await send(greedyUrl, 'too little', { metadata: { budgetMinor } });
      assert.equal(r.json.error?.code, -32602, JSON.stringify(r.json));
      assert.match(r.json.error.message, /budgetMinor/);
    }
    assert.equal(greedy.calls.length, calls, 'refused before anything started');
    const acct = await accountOf();
    assert.deepEqual([acct.balanceMinor, acct.heldMinor], [1_000 - 42 - 250 - 100, 0]);
    await reconciled();
  });

  test('failed and canceled tasks release their holds', async () => {
    await resetTo(500);
    const failing = await agents.add(startFailingAgent({ mode: 'jsonrpc-error' }));
    const { rpc: failUrl } = await register(gw, failing.url, { priceMinor: 200 });
    // Not blocking: a blocking sender of a new task gets the agent's JSON-RPC error itself (issue 11).
    const failed = (await send(failUrl, 'boom', { returnImmediately: true })).json.result.task;
    const failedSettlement = await settled(failed.id);
    assert.equal(failedSettlement.final_state, 'TASK_STATE_FAILED');
    assert.equal(Number(failedSettlement.amount_minor), 0);

    const slow = await agents.add(startSlowAgent({ ms: 60_000 }));
    const { rpc: slowUrl } = await register(gw, slow.url, { priceMinor: 300 });
    const task = (await send(slowUrl, 'forever', { returnImmediately: true })).json.result.task;
    await eventually(() => slow.calls.length > 0 || undefined, 10_000, 'the agent call');
    assert.equal((await accountOf()).heldMinor, 300);
    const canceled = await rpc(slowUrl, { jsonrpc: '2.0', id: 2, method: 'CancelTask', params: { id: task.id } }, V1);
    assert.equal(canceled.json.result.status.state, 'TASK_STATE_CANCELED');
    const s = await settled(task.id);
    assert.equal(s.final_state, 'TASK_STATE_CANCELED');
    assert.equal(Number(s.amount_minor), 0);
    const { rows } = await gw.db.pool.query('SELECT state, captured_minor FROM holds WHERE task_id = ANY($1) ORDER BY created_at', [[failed.id, task.id]]);
    assert.deepEqual(rows.map((r) => [r.state, Number(r.captured_minor)]), [['released', 0], ['released', 0]]);
    const acct = await accountOf();
    assert.deepEqual([acct.balanceMinor, acct.heldMinor], [500, 0]);
    await reconciled();
  });

  test('hold and settlement activities retried after their commit charge once', async () => {
    await resetTo(1_000);
    crashAfterCommit.add('holdFunds');
    crashAfterCommit.add('finishTask');
    const echo = await agents.add(startEchoAgent({ cost: 70 }));
    const { rpc: rpcUrl, id: agentId } = await register(gw, echo.url, { priceMinor: 100 });
    // Answered at once, the task is settled by the workflow's finishTask (a blocking send's first exchange settles a
    // simple task itself: its crash is a rerun of the workflow task, test/first-exchange-rerun.test.ts).
    const task = (await send(rpcUrl, 'once', { returnImmediately: true })).json.result.task;
    await settled(task.id);
    await eventually(() => (attempts.get(`finishTask:${task.id}`) ?? 0) >= 2 || undefined, 10_000, 'the settlement retry');
    assert.ok((attempts.get(`holdFunds:${task.id}`) ?? 0) >= 2, 'the hold was retried too');
    assert.equal(echo.calls.length, 1);
    assert.deepEqual(
      (await movementsOf(task.id)).map((m) => [m.key.split(':')[0], m.account, m.amount, m.held]),
      [
        ['hold', ACCOUNT, 0, 100],
        ['settle', `agent:${agentId}`, 70, 0],
        ['settle', ACCOUNT, -70, -100],
      ],
    );
    const acct = await accountOf();
    assert.deepEqual([acct.balanceMinor, acct.heldMinor], [930, 0]);
    const { rows } = await gw.db.pool.query('SELECT count(*)::int AS n FROM trust_events WHERE task_id = $1', [task.id]);
    assert.equal(rows[0].n, 1);
    await reconciled();
  });

  test("a task's last writes are one statement: recorded and settled once however often retried, the capture moving the right amounts", async () => {
    await resetTo(1_000);
    const agentId = `direct-${randomUUID()}`;
    const taskId = randomUUID();
    assert.deepEqual(await holdFunds(gw.db.pool, 'enforce', { tenant: 'default', taskId, agentId, requester: 'default', amountMinor: 100 }), { ok: true });
    // Its own pool on the test's schema, every statement it sends counted (as bench/sql-count.ts counts them).
    const pool = new Pool({ connectionString: DATABASE_URL, max: 1, options: `-c search_path=${gw.db.schema}` });
    const sent: string[] = [];
    pool.on('connect', (client) => {
      const query = client.query.bind(client) as (...args: unknown[]) => unknown;
      client.query = ((...args: unknown[]) => {
        const statement = args[0] as string | { text: string }; // a text, or a prepared statement's config
        sent.push((typeof statement === 'string' ? statement : statement.text).trim().split(/\s+/)[0]);
        return query(...args);
      }) as typeof client.query;
    });
    const now = new Date().toISOString();
    const task = { id: taskId, contextId: randomUUID(), status: { state: 'TASK_STATE_COMPLETED' as const, timestamp: now } };
    const rec = { tenant: 'default', agentId, task, version: 2, createdAt: now, event: { key: 'v2', event: { statusUpdate: { taskId, contextId: task.contextId, status: task.status } } } };
    const req = { tenant: 'default', taskId, agentId, requester: 'default', finalState: task.status.state, amountMinor: 70, outcome: 'completed' as const, startedAt: now, endedAt: now };
    try {
      const first = await finishTask(pool, gw.hub, 'enforce', rec, req);
      assert.deepEqual(sent, ['WITH'], 'one round trip: no BEGIN, no COMMIT, nothing else');
      assert.equal(first.created, true);
      assert.equal(first.chargedMinor, 70);
      const again = await finishTask(pool, gw.hub, 'enforce', rec, req);
      assert.deepEqual(again, { ...first, created: false }, 'a retry finds the first settlement');
      assert.equal(sent.length, 2);
    } finally {
      await pool.end();
    }
    assert.deepEqual(await movementsOf(taskId), [
      { key: `hold:${taskId}`, kind: 'hold', account: ACCOUNT, amount: 0, held: 100 },
      { key: `settle:${taskId}`, kind: 'capture', account: `agent:${agentId}`, amount: 70, held: 0 },
      { key: `settle:${taskId}`, kind: 'capture', account: ACCOUNT, amount: -70, held: -100 },
    ]);
    const acct = await accountOf();
    assert.deepEqual([acct.balanceMinor, acct.heldMinor], [930, 0]);
    assert.equal((await accountOf(`agent:${agentId}`)).balanceMinor, 70);
    const { rows } = await gw.db.pool.query(
      `SELECT (SELECT state FROM tasks WHERE task_id = $1) AS state, (SELECT count(*)::int FROM task_events WHERE task_id = $1) AS events,
              (SELECT state FROM holds WHERE task_id = $1) AS hold, (SELECT count(*)::int FROM trust_events WHERE task_id = $1) AS trust`,
      [taskId],
    );
    assert.deepEqual(rows[0], { state: 'TASK_STATE_COMPLETED', events: 1, hold: 'captured', trust: 1 });
    await reconciled();
  });

  test("level 5's last statement counts the children: one the workflow does not know holds the record and the settlement back, the relayed events are logged", async () => {
    await resetTo(1_000);
    const agentId = `direct-${randomUUID()}`;
    const taskId = randomUUID();
    assert.deepEqual(await holdFunds(gw.db.pool, 'enforce', { tenant: 'default', taskId, agentId, requester: 'default', amountMinor: 100 }), { ok: true });
    await gw.db.pool.query('INSERT INTO task_children (tenant, parent_task_id, child_task_id) VALUES ($1, $2, $3)', ['default', taskId, randomUUID()]);
    const now = new Date().toISOString();
    const task = { id: taskId, contextId: randomUUID(), status: { state: 'TASK_STATE_COMPLETED' as const, timestamp: now } };
    const rec = { tenant: 'default', agentId, task, version: 2, createdAt: now, event: { key: 'v2', event: { statusUpdate: { taskId, contextId: task.contextId, status: task.status } } } };
    const req = { tenant: 'default', taskId, agentId, requester: 'default', finalState: task.status.state, amountMinor: 70, outcome: 'completed' as const, startedAt: now, endedAt: now };
    const artifact = { artifactUpdate: { taskId, contextId: task.contextId, artifact: { artifactId: 'a', parts: [{ text: 'hi' }] }, append: false, lastChunk: true } };
    const relayed = [{ key: `fwd/${taskId}/1`, event: artifact }];
    const state = async () =>
      (
        await gw.db.pool.query(
          `SELECT (SELECT state FROM tasks WHERE task_id = $1) AS state, (SELECT array_agg(event_key ORDER BY seq) FROM task_events WHERE task_id = $1) AS keys,
                  (SELECT state FROM holds WHERE task_id = $1) AS hold`,
          [taskId],
        )
      ).rows[0];
    assert.deepEqual(await finishTask(gw.db.pool, gw.hub, 'enforce', rec, req, { relayed, knownChildren: 0 }), { childrenLinked: 1 });
    assert.deepEqual(await state(), { state: null, keys: [`fwd/${taskId}/1`], hold: 'held' }, 'only the relayed events: no record, no settlement');
    const done = await finishTask(gw.db.pool, gw.hub, 'enforce', rec, req, { relayed, knownChildren: 1 });
    assert.equal(done.created, true);
    assert.equal(done.chargedMinor, 70);
    assert.deepEqual(await state(), { state: 'TASK_STATE_COMPLETED', keys: [`fwd/${taskId}/1`, 'v2'], hold: 'captured' }, 'the events once, then the final state');
    await reconciled();
  });

  test('concurrent tasks on a small balance: it never goes negative and the overflow is refused before reaching the agent', async () => {
    await resetTo(500);
    // Long enough that every hold is decided while the first five still hold their funds, even on a loaded box.
    const slow = await agents.add(startSlowAgent({ ms: 4_000 }));
    const { rpc: rpcUrl, id: agentId } = await register(gw, slow.url, { priceMinor: 100 });
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) => send(rpcUrl, `job ${i}`)));
    const completed = results.filter((r) => r.json.result?.task?.status?.state === 'TASK_STATE_COMPLETED');
    const refused = results.filter((r) => r.json.error?.code === -32050);
    assert.equal(completed.length, 5, JSON.stringify(results.map((r) => r.json.error?.message ?? r.json.result?.task?.status?.state)));
    assert.equal(refused.length, 7);
    assert.equal(slow.calls.length, 5, 'only the funded tasks reached the agent');
    const acct = await accountOf();
    assert.deepEqual([acct.balanceMinor, acct.heldMinor], [0, 0]);
    assert.equal((await accountOf(`agent:${agentId}`)).balanceMinor, 500);
    await eventually(async () => {
      const { rows } = await gw.db.pool.query('SELECT count(*)::int AS n FROM settlements WHERE agent_id = $1', [agentId]);
      return rows[0].n === 12 || undefined;
    }, 15_000, 'all twelve settled');
    await reconciled();
  });
});

describe('SWITCHBOARD_UNFUNDED_ACCOUNTS=unlimited', () => {
  test('a never-funded account runs on credit until a deposit covers it; from then on it is enforced', async () => {
    const open = await startGateway({ unfundedAccounts: 'unlimited', temporal: { env: gw.env, taskQueue: `${gw.taskQueue}-credit` } });
    try {
      const call = async (method: string, path: string, body?: unknown) => {
        const res = await open.fetch(`${open.url}${path}`, { method, headers: body ? { 'content-type': 'application/json' } : {}, body: body ? JSON.stringify(body) : undefined }, 'admin');
        return (await res.json()) as any;
      };
      assert.equal((await call('GET', `/accounts/${ACCOUNT}`)).unlimited, true);
      assert.match((await call('POST', `/accounts/${ACCOUNT}/withdrawals`, { amountMinor: 1, idempotencyKey: randomUUID() })).error, /runs on credit/);
      const echo = await agents.add(startEchoAgent());
      const { rpc: rpcUrl } = await register(open, echo.url, { priceMinor: 100 });
      assert.equal((await send(rpcUrl, 'on credit')).json.result.task.status.state, 'TASK_STATE_COMPLETED');
      await eventually(async () => ((await call('GET', `/accounts/${ACCOUNT}`)).balanceMinor === -100 ? true : undefined), 10_000, 'the charge');
      const partly = await call('POST', `/accounts/${ACCOUNT}/deposits`, { amountMinor: 50, idempotencyKey: randomUUID() });
      assert.deepEqual([partly.account.balanceMinor, partly.account.unlimited], [-50, true], 'still in debt: still on credit');
      const covered = await call('POST', `/accounts/${ACCOUNT}/deposits`, { amountMinor: 120, idempotencyKey: randomUUID() });
      assert.deepEqual([covered.account.balanceMinor, covered.account.unlimited], [70, false], 'funded: enforced from now on');
      const refused = await send(rpcUrl, 'more than I have');
      assert.equal(refused.json.error?.code, -32050);
      assert.equal(echo.calls.length, 1);
      const report = (await call('GET', '/ledger/reconcile')) as any;
      await eventually(async () => ((await call('GET', '/ledger/reconcile')).ok ? true : undefined), 10_000, `a clean ledger: ${JSON.stringify(report.invariants.filter((i: any) => !i.ok))}`);
    } finally {
      await open.close();
    }
  });
});

describe('reconcile', () => {
  test('clean after a chaos run: completed, failed and canceled tasks with crashes after commit everywhere', async () => {
    await resetTo(3_000);
    let seed = 42;
    chaos = { rate: 0.4, next: () => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31) };
    const echo = await agents.add(startEchoAgent({ cost: 30 }));
    const failing = await agents.add(startFailingAgent({ mode: 'jsonrpc-error' }));
    const slow = await agents.add(startSlowAgent({ ms: 60_000 }));
    const [e, f, s] = await Promise.all([
      register(gw, echo.url, { priceMinor: 50 }),
      register(gw, failing.url, { priceMinor: 80 }),
      register(gw, slow.url, { priceMinor: 120 }),
    ]);
    const sends = [
      ...Array.from({ length: 10 }, (_, i) => send(e.rpc, `ok ${i}`)),
      ...Array.from({ length: 5 }, (_, i) => send(f.rpc, `bad ${i}`, { returnImmediately: true })),
      ...Array.from({ length: 5 }, (_, i) => send(s.rpc, `stuck ${i}`, { returnImmediately: true })),
    ];
    const results = await Promise.all(sends);
    for (const r of results) assert.ok(r.json.result?.task, JSON.stringify(r.json));
    await eventually(() => slow.calls.length >= 5 || undefined, 15_000, 'the slow agent calls');
    const cancels = await Promise.all(
      results.slice(15).map((r) => rpc(s.rpc, { jsonrpc: '2.0', id: 9, method: 'CancelTask', params: { id: r.json.result.task.id } }, V1)),
    );
    for (const c of cancels) assert.equal(c.json.result?.status?.state, 'TASK_STATE_CANCELED', JSON.stringify(c.json));
    const ids = results.map((r) => r.json.result.task.id);
    await eventually(async () => {
      const { rows } = await gw.db.pool.query('SELECT count(*)::int AS n FROM settlements WHERE task_id = ANY($1)', [ids]);
      return rows[0].n === ids.length || undefined;
    }, 30_000, 'every chaos task settled');
    chaos = undefined;
    const crashed = [...attempts.entries()].filter(([k, n]) => n > 1 && ids.some((id) => k.includes(id)));
    assert.ok(crashed.length >= 5, `crashes were injected (${crashed.length})`);

    const report = await reconciled();
    assert.deepEqual(report.settling, []);
    assert.equal(report.totals.openHolds, 0);
    // Conservation: this run moved exactly 10 × 30 from the requester to the echo agent.
    const acct = await accountOf();
    assert.deepEqual([acct.balanceMinor, acct.heldMinor], [3_000 - 300, 0]);
    assert.equal((await accountOf(`agent:${e.id}`)).balanceMinor, 300);
    assert.equal((await accountOf(`agent:${f.id}`)).balanceMinor, 0);
    assert.equal((await accountOf(`agent:${s.id}`)).balanceMinor, 0);
    assert.equal(report.totals.balanceSumMinor, 0, 'money is neither created nor destroyed');
  });

  test('a broken ledger is reported with the rows that break it', async () => {
    const other = await startGateway({ unfundedAccounts: 'enforce', temporal: { env: gw.env, taskQueue: `${gw.taskQueue}-x` }, worker: false });
    try {
      const pool = other.db.pool;
      await pool.query(`INSERT INTO tasks (tenant, task_id, context_id, agent_id, state, status_timestamp, version, task, created_at)
                        VALUES ('default', 'lost', 'c', 'a', 'TASK_STATE_COMPLETED', now() - interval '1 hour', 1, '{}', now() - interval '1 hour')`);
      await pool.query(`INSERT INTO accounts (tenant, account, kind, balance_minor) VALUES ('default', 'agent:forged', 'agent', 99)`);
      const r = (await other.fetch(`${other.url}/ledger/reconcile`, {}, 'operator').then((res) => res.json())) as any;
      assert.equal(r.ok, false);
      const byName = Object.fromEntries(r.invariants.map((i: any) => [i.name, i]));
      assert.deepEqual(byName.terminalTaskSettledOnce.violations, [{ taskId: 'lost', state: 'TASK_STATE_COMPLETED', settlements: 0, settledAs: null }]);
      assert.equal(byName.balanceIsSumOfEntries.violations[0].account, 'agent:forged');
      assert.equal(byName.movementsBalance.ok, true);
    } finally {
      await other.close();
    }
  });
});
