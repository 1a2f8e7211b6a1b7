/**
 * Outages (issue 8): PostgreSQL crashes and comes back, Temporal stops and comes back, an operator terminates a
 * task's workflow. Nothing ends the process; while a dependency is down, reads that can be answered are, and
 * writes are refused within 5 s with HTTP 503, Retry-After and a JSON-RPC error naming it; after it is back, the
 * same messageId gets the one task it asked for; a task whose workflow closed without a terminal state is ended
 * and settled. Real processes: a PostgreSQL cluster of the test's own, a Temporal dev server of its own.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { AgentPool, startAskingAgent, startEchoAgent, startSlowAgent } from './agents';
import { type Gateway, type TestDb, TEST_ADMIN_KEY, eventually, register, rpc, startGateway } from './helpers/harness';
import { freePort } from './helpers/process';
import { type PrivatePostgres, startPrivatePostgres } from './helpers/private-postgres';
import { sse } from './helpers/sse';
import { createPool } from '../src/core/db/pool';
import { migrate } from '../src/core/db/migrate';
import { resolveTemporalBinary, startDevServer, type DevServer } from '../src/embedded/temporal';
import { ensureOrphanSweep, triggerOrphanSweep } from '../src/core/temporal/orphan-sweep';
import { SEARCH_ATTRIBUTES } from '../task/messages';

const V1 = { 'A2A-Version': '1.0' };
const userMessage = (text: string, extra: Record<string, unknown> = {}) => ({ messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...extra });
const send = (url: string, message: Record<string, unknown>) => rpc(url, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message } }, V1);

/** A call that must be answered within 5 s; returns it with how long it took. */
async function timed<T>(what: string, call: () => Promise<T>): Promise<T & { ms: number }> {
  const t0 = Date.now();
  const out = await Promise.race([call(), new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${what}: no answer within 5 s`)), 5_000))]);
  return Object.assign(out as object, { ms: Date.now() - t0 }) as T & { ms: number };
}

function assertUnavailable(res: { status: number; json: any; text: string }, dependency: RegExp) {
  assert.equal(res.status, 503, res.text);
  assert.equal(res.json?.error?.code, -32054, res.text);
  assert.match(res.json.error.message, dependency);
}

describe('PostgreSQL crashes and comes back', () => {
  let pg: PrivatePostgres;
  let db: TestDb;
  let gw: Gateway;
  const agents = new AgentPool();

  before(async () => {
    pg = await startPrivatePostgres();
    const pool = createPool({ connectionString: pg.url, max: 10 });
    await migrate(pool);
    db = { pool, schema: 'public', drop: async () => pool.end() };
    gw = await startGateway({ db });
  });
  after(async () => {
    await gw?.close();
    await agents.closeAll();
    await db?.drop();
    pg?.destroy();
  });

  test('the process stays up, reads by query answer, writes get 503 fast; afterwards the same messageId is one task', async () => {
    const asking = await agents.add(startAskingAgent());
    const echo = await agents.add(startEchoAgent());
    const { rpc: askingRpc } = await register(gw, asking.url);
    const { rpc: echoRpc } = await register(gw, echo.url);
    const waiting = (await send(askingRpc, userMessage('hi'))).json.result.task;
    assert.equal(waiting.status.state, 'TASK_STATE_INPUT_REQUIRED');

    pg.crash();
    const getAt = async (url: string) => timed('GetTask', () => rpc(url, { jsonrpc: '2.0', id: 2, method: 'GetTask', params: { id: waiting.id } }, V1));
    const read = await eventually(async () => {
      const r = await getAt(`${gw.url}/a2a`);
      return r.status === 200 ? r : undefined;
    }, 10_000, 'GetTask by query while PostgreSQL is down');
    assert.equal(read.json.result.status.state, 'TASK_STATE_INPUT_REQUIRED');
    assert.equal((await getAt(askingRpc)).json.result?.status?.state, 'TASK_STATE_INPUT_REQUIRED', 'at the agent endpoint too (agent and ownership from Temporal)');

    const retried = userMessage('echo me once');
    const refused = await timed('SendMessage', () => send(echoRpc, retried));
    assertUnavailable(refused, /PostgreSQL is unavailable/);
    assert.ok(Number((await fetch(`${echoRpc}`, { method: 'POST', headers: { authorization: `Bearer ${gw.keys.client}`, 'content-type': 'application/json', ...V1 }, body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'SendMessage', params: { message: retried } }) })).headers.get('retry-after')) > 0);
    assert.ok(refused.ms < 5_000);
    const ready = await timed('readyz', async () => {
      const res = await fetch(`${gw.url}/readyz`);
      return { status: res.status, body: (await res.json()) as any };
    });
    assert.equal(ready.status, 503);
    assert.deepEqual(ready.body.missing, ['postgresql']);
    assert.equal((await fetch(`${gw.url}/healthz`)).status, 200);
    const admin = await timed('GET /agents', async () => fetch(`${gw.url}/agents`, { headers: { authorization: `Bearer ${TEST_ADMIN_KEY}` } }));
    assert.equal(admin.status, 503, 'a route that needs the database: 503, not 500');
    assert.equal(admin.headers.get('retry-after') !== null, true);
    assert.match(((await admin.json()) as { error: string }).error, /PostgreSQL is unavailable/);

    pg.start();
    await eventually(async () => ((await fetch(`${gw.url}/readyz`)).status === 200 ? true : undefined), 20_000, 'ready again');
    const done = await eventually(async () => {
      const r = await send(echoRpc, retried);
      return r.json?.result?.task?.status?.state === 'TASK_STATE_COMPLETED' ? r : undefined;
    }, 20_000, 'the retried message to complete');
    const tasks = await db.pool.query('SELECT task_id FROM message_tasks WHERE message_id = $1', [retried.messageId]);
    assert.equal(tasks.rowCount, 1, 'one task for the messageId');
    assert.equal(done.json.result.task.id, tasks.rows[0].task_id);
    const resumed = await send(askingRpc, userMessage('Ada', { taskId: waiting.id }));
    assert.equal(resumed.json.result?.task?.status?.state, 'TASK_STATE_COMPLETED', resumed.text);
    const reconcile = await gw.fetch(`${gw.url}/ledger/reconcile`, {}, 'operator');
    assert.equal(((await reconcile.json()) as { ok: boolean }).ok, true);
  });

  test('a new task sent the moment PostgreSQL dies, before anyone noticed, is refused within 5 s and made by its retry', async (t) => {
    const echo = await agents.add(startEchoAgent());
    const { rpc: echoRpc } = await register(gw, echo.url);
    assert.equal((await fetch(`${gw.url}/readyz`)).status, 200, 'PostgreSQL is up and known to be');
    pg.crash();
    const message = userMessage('sent into the outage');
    const refused = await timed('SendMessage', () => send(echoRpc, message));
    // Refused by authentication, which needs the keys in PostgreSQL (the first step of every request), in the
    // endpoint's form: a JSON-RPC error.
    assertUnavailable(refused, /PostgreSQL is unavailable/);
    t.diagnostic(`refused ${refused.ms} ms after PostgreSQL was killed`);

    pg.start();
    await eventually(async () => ((await fetch(`${gw.url}/readyz`)).status === 200 ? true : undefined), 20_000, 'ready again');
    const done = await eventually(async () => {
      const r = await send(echoRpc, message);
      return r.json?.result?.task?.status?.state === 'TASK_STATE_COMPLETED' ? r : undefined;
    }, 20_000, 'the retried message to complete');
    const tasks = await db.pool.query('SELECT task_id FROM message_tasks WHERE message_id = $1', [message.messageId]);
    assert.equal(tasks.rowCount, 1, 'one task for the messageId');
    assert.equal(done.json.result.task.id, tasks.rows[0].task_id);
  });
});

describe('Temporal stops and comes back', () => {
  let server: DevServer;
  let env: TestWorkflowEnvironment;
  let gw: Gateway;
  let dir: string;
  let ports: { port: number; uiPort: number };
  let binary: string;
  const agents = new AgentPool();
  const start = () => startDevServer({ binary, dbFilename: join(dir, 'temporal.sqlite'), ...ports, searchAttributes: SEARCH_ATTRIBUTES, log: () => {} });

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sb-temporal-'));
    binary = process.env.TEMPORAL_CLI ?? (await resolveTemporalBinary(join(__dirname, '..')));
    ports = { port: await freePort(), uiPort: await freePort() };
    server = await start();
    env = await TestWorkflowEnvironment.createFromExistingServer({ address: server.address });
    gw = await startGateway({ temporal: { env, taskQueue: `outage-${randomUUID().slice(0, 6)}` } });
  });
  after(async () => {
    await gw?.close();
    await env?.teardown();
    await server?.stop();
    await agents.closeAll();
    rmSync(dir, { recursive: true, force: true });
  });

  test('reads answer from PostgreSQL, writes get 503 fast; afterwards the same messageId is one task and waiting tasks go on', async () => {
    const asking = await agents.add(startAskingAgent());
    const echo = await agents.add(startEchoAgent());
    const { rpc: askingRpc } = await register(gw, asking.url);
    const { rpc: echoRpc } = await register(gw, echo.url);
    const waiting = (await send(askingRpc, userMessage('hi'))).json.result.task;
    const finished = (await send(echoRpc, userMessage('before'))).json.result.task;
    assert.equal(finished.status.state, 'TASK_STATE_COMPLETED');

    await server.stop();
    await eventually(async () => ((await fetch(`${gw.url}/readyz`)).status === 503 ? true : undefined), 10_000, 'Temporal to be seen down');
    const ready = (await (await fetch(`${gw.url}/readyz`)).json()) as any;
    assert.deepEqual(ready.missing, ['temporal']);

    const got = await timed('GetTask', () => rpc(`${gw.url}/a2a`, { jsonrpc: '2.0', id: 2, method: 'GetTask', params: { id: waiting.id } }, V1));
    assert.equal(got.json.result?.status?.state, 'TASK_STATE_INPUT_REQUIRED', got.text);
    const listed = await timed('ListTasks', () => rpc(`${gw.url}/a2a`, { jsonrpc: '2.0', id: 3, method: 'ListTasks', params: {} }, V1));
    assert.ok(listed.json.result.tasks.some((t: { id: string }) => t.id === finished.id));
    const replay = await timed('replay', () => sse(`${gw.url}/a2a`, { method: 'SubscribeToTask', params: { id: finished.id }, lastEventId: 0 }));
    assert.equal(replay.status, 200);
    assert.ok(replay.events.length >= 2, 'the logged events, replayed from PostgreSQL');

    const retried = userMessage('echo me once');
    const refused = await timed('SendMessage', () => send(echoRpc, retried));
    assertUnavailable(refused, /Temporal is unavailable/);
    assertUnavailable(await timed('CancelTask', () => rpc(`${gw.url}/a2a`, { jsonrpc: '2.0', id: 4, method: 'CancelTask', params: { id: waiting.id } }, V1)), /Temporal/);
    assertUnavailable(await timed('follow-up', () => send(askingRpc, userMessage('Ada', { taskId: waiting.id }))), /Temporal/);
    assert.equal((await db(gw).query('SELECT count(*)::int AS n FROM message_tasks WHERE message_id = $1', [retried.messageId])).rows[0].n, 0, 'nothing half-started');

    server = await start();
    await eventually(async () => ((await fetch(`${gw.url}/readyz`)).status === 200 ? true : undefined), 30_000, 'ready again');
    const done = await eventually(async () => {
      const r = await send(echoRpc, retried);
      return r.json?.result?.task?.status?.state === 'TASK_STATE_COMPLETED' ? r : undefined;
    }, 60_000, 'the retried message to complete');
    assert.equal((await db(gw).query('SELECT count(*)::int AS n FROM message_tasks WHERE message_id = $1', [retried.messageId])).rows[0].n, 1);
    assert.ok(done.json.result.task.id);
    const resumed = await eventually(async () => {
      const r = await send(askingRpc, userMessage('Ada', { taskId: waiting.id }));
      return r.json?.result?.task?.status?.state === 'TASK_STATE_COMPLETED' ? r : undefined;
    }, 60_000, 'the waiting task to go on');
    assert.equal(resumed.json.result.task.id, waiting.id);
  });

  test('a new task sent the moment Temporal dies, before anyone noticed, is refused within 5 s; its retry is one task', async (t) => {
    const echo = await agents.add(startEchoAgent());
    const { rpc: echoRpc } = await register(gw, echo.url);
    assert.equal((await fetch(`${gw.url}/readyz`)).status, 200, 'Temporal is up and known to be');
    await server.kill();
    const message = userMessage('sent into the outage');
    const refused = await timed('SendMessage', () => send(echoRpc, message));
    assertUnavailable(refused, /Temporal is unavailable/);
    t.diagnostic(`refused ${refused.ms} ms after Temporal was killed`);
    assert.match(refused.json.error.message, /same messageId/, 'the client is told how to get the task: retry with the same messageId');

    server = await start();
    await eventually(async () => ((await fetch(`${gw.url}/readyz`)).status === 200 ? true : undefined), 30_000, 'ready again');
    const done = await eventually(async () => {
      const r = await send(echoRpc, message);
      return r.json?.result?.task?.status?.state === 'TASK_STATE_COMPLETED' ? r : undefined;
    }, 60_000, 'the retried message to complete');
    const claims = await db(gw).query('SELECT task_id FROM message_tasks WHERE message_id = $1', [message.messageId]);
    assert.equal(claims.rows.length, 1, 'one claim: the refused send and its retry are one task');
    assert.equal(done.json.result.task.id, claims.rows[0].task_id);
  });
});

const db = (gw: Gateway) => gw.db.pool;

describe('a workflow closed without a terminal state (an operator\'s Terminate)', () => {
  let gw: Gateway;
  const agents = new AgentPool();

  before(async () => {
    gw = await startGateway({ unfundedAccounts: 'unlimited' });
    await ensureOrphanSweep(gw.env.client, gw.taskQueue, 3_600_000);
  });
  after(async () => {
    await gw?.close();
    await agents.closeAll();
  });

  test('is a reconcile violation until the sweep ends the task failed, saying why, and releases its hold', async () => {
    const asking = await agents.add(startAskingAgent());
    const { rpc: askingRpc } = await register(gw, asking.url, { priceMinor: 50 });
    const task = (await send(askingRpc, userMessage('hi'))).json.result.task;
    assert.equal(task.status.state, 'TASK_STATE_INPUT_REQUIRED');
    const account = async () => (await (await gw.fetch(`${gw.url}/accounts/requester:default`, {}, 'admin')).json()) as { heldMinor: number };
    assert.equal((await account()).heldMinor, 50);

    await gw.env.client.workflow.getHandle(`a2a:default:${task.id}`).terminate('operator cleanup');
    const violated = await eventually(async () => {
      const r = (await (await gw.fetch(`${gw.url}/ledger/reconcile`, {}, 'operator')).json()) as any;
      return r.ok === false ? r : undefined;
    }, 15_000, 'reconcile to report the orphan');
    const inv = violated.invariants.find((i: { name: string }) => i.name === 'everyOpenTaskHasALiveWorkflow');
    assert.deepEqual(inv.violations, [{ taskId: task.id, state: 'TASK_STATE_INPUT_REQUIRED' }]);

    await triggerOrphanSweep(gw.env.client, gw.taskQueue);
    const ended = await eventually(async () => {
      const r = await rpc(`${gw.url}/a2a`, { jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: task.id } }, V1);
      return r.json.result?.status?.state === 'TASK_STATE_FAILED' ? r.json.result : undefined;
    }, 20_000, 'the sweep to end the task');
    assert.match(JSON.stringify(ended.status.message), /terminated/);
    assert.equal((await account()).heldMinor, 0, 'the hold is released');
    const settled = await gw.db.pool.query('SELECT final_state, amount_minor FROM settlements WHERE task_id = $1', [task.id]);
    assert.deepEqual(settled.rows, [{ final_state: 'TASK_STATE_FAILED', amount_minor: '0' }]);
    const after = (await (await gw.fetch(`${gw.url}/ledger/reconcile`, {}, 'operator')).json()) as any;
    assert.equal(after.ok, true, JSON.stringify(after.invariants.filter((i: { ok: boolean }) => !i.ok)));
    // A second sweep changes nothing: it ends no task, and there is still one settlement.
    const second = await triggerOrphanSweep(gw.env.client, gw.taskQueue);
    assert.ok(!second.ended.some((e) => e.taskId === task.id), JSON.stringify(second));
    assert.equal((await gw.db.pool.query('SELECT count(*)::int AS n FROM settlements WHERE task_id = $1', [task.id])).rows[0].n, 1);
  });
});

describe('an agent that asks Switchboard to come back later', () => {
  let gw: Gateway;
  const agents = new AgentPool();
  before(async () => {
    gw = await startGateway();
  });
  after(async () => {
    await gw?.close();
    await agents.closeAll();
  });

  test('429 with Retry-After: the next attempt waits that long (not the backoff), with the same messageId', async () => {
    const { startFaultyAgent } = await import('./agents/faulty');
    const agent = await agents.add(startFaultyAgent({ mode: 'http429', times: 1, retryAfterS: 2 }));
    const { rpc: url } = await register(gw, agent.url, { retry: { maxAttempts: 3, initialIntervalMs: 100, attemptTimeoutMs: 5_000 } });
    const res = await send(url, userMessage('later'));
    assert.equal(res.json.result?.task?.status?.state, 'TASK_STATE_COMPLETED', res.text);
    // Sends only: the agent honours the non-blocking send, so the gateway then reads its task (GetTask).
    const sends = agent.arrivals.filter((_, i) => agent.calls[i]!.method === 'SendMessage');
    assert.equal(sends.length, 2);
    assert.ok(sends[1]! - sends[0]! >= 1_900, `retried after ${sends[1]! - sends[0]!} ms`);
    const ids = agent.calls.filter((c) => c.method === 'SendMessage').map((c) => c.params?.message?.messageId);
    assert.equal(new Set(ids).size, 1, 'one messageId on every attempt');
  });
});

describe('every pooled PostgreSQL connection in use (load, not an outage)', () => {
  let gw: Gateway;
  before(async () => {
    gw = await startGateway();
  });
  after(async () => {
    await gw?.close();
  });

  test('a request that cannot get a connection in time is a 503 saying busy; PostgreSQL is not marked down, and it answers once one is free', async () => {
    // Hold every connection of the gateway's pool, as a burst of slow requests would.
    const held = await Promise.all(Array.from({ length: gw.db.pool.options.max ?? 10 }, () => gw.db.pool.connect()));
    try {
      const res = await gw.fetch(`${gw.url}/agents`, {}, 'operator');
      assert.equal(res.status, 503);
      assert.equal(res.headers.get('retry-after'), '1');
      const body = (await res.json()) as { error: string; dependency: string };
      assert.match(body.error, /^PostgreSQL is busy \(all \d+ connections of this process are in use\)/);
      // The health probe has a connection of its own: the gateway stays ready.
      const ready = await fetch(`${gw.url}/readyz`);
      assert.equal(ready.status, 200, JSON.stringify(await ready.json()));
    } finally {
      for (const c of held) c.release();
    }
    assert.equal((await gw.fetch(`${gw.url}/agents`, {}, 'operator')).status, 200);
  });
});

describe('PostgreSQL refuses a running turn\'s writes (the gateway\'s fault, never the agent\'s)', () => {
  let gw: Gateway;
  const agents = new AgentPool();
  before(async () => {
    gw = await startGateway();
  });
  after(async () => {
    await gw?.close();
    await agents.closeAll();
  });

  test('the turn is not failed: its attempts lost to the database are not counted, and it re-attaches to the agent\'s task until the writes go through', async () => {
    const slow = await agents.add(startSlowAgent({ ms: 1_500 }));
    const { rpc: url } = await register(gw, slow.url, { retry: { maxAttempts: 2, initialIntervalMs: 200, attemptTimeoutMs: 5_000 } });
    const sent = await rpc(url, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: userMessage('work'), configuration: { returnImmediately: true } } }, V1);
    const taskId = sent.json.result.task.id as string;
    const handle = gw.env.client.workflow.getHandle(`a2a:default:${taskId}`);
    await eventually(async () => (await handle.describe()).raw.pendingActivities?.length, 10_000, 'the forwarding activity to run');

    // Every event the agent's answer brings is refused from now on: a real PostgreSQL error (23514) on each write.
    await db(gw).query('ALTER TABLE task_events ADD CONSTRAINT refuse_writes CHECK (false) NOT VALID');
    try {
      // The positive signal: the turn's attempts are lost to the database, more of them than the agent's maxAttempts
      // (they are not the agent's failures, so they are not counted), the agent's task done meanwhile.
      const lost = await eventually(async () => {
        const pending = (await handle.describe()).raw.pendingActivities?.[0];
        const failure = pending?.lastFailure;
        const type = failure?.applicationFailureInfo?.type ?? failure?.cause?.applicationFailureInfo?.type;
        return pending && (pending.attempt ?? 0) >= 3 && type === 'DatabaseUnavailable' ? pending : undefined;
      }, 30_000, 'the turn to be lost to the database on a third attempt');
      assert.ok(lost);
      const during = await rpc(`${gw.url}/a2a`, { jsonrpc: '2.0', id: 2, method: 'GetTask', params: { id: taskId } }, V1);
      assert.equal(during.json.result.status.state, 'TASK_STATE_WORKING', 'not failed, and not the agent\'s fault');
    } finally {
      await db(gw).query('ALTER TABLE task_events DROP CONSTRAINT refuse_writes');
    }
    const done = await eventually(async () => {
      const r = await rpc(`${gw.url}/a2a`, { jsonrpc: '2.0', id: 3, method: 'GetTask', params: { id: taskId } }, V1);
      return r.json.result?.status?.state === 'TASK_STATE_COMPLETED' ? r.json.result : undefined;
    }, 60_000, 'the task to complete once PostgreSQL takes the writes');
    assert.match(JSON.stringify(done.artifacts ?? done.status), /done: work/);
    assert.equal(slow.calls.filter((c) => /^Send(Streaming)?Message$/.test(c.method)).length, 1, `the agent was sent the message once: the turn re-attached to its task (${slow.calls.map((c) => c.method)})`);
  });
});
