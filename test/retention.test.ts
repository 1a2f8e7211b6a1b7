/**
 * Retention (issue 31): a task terminal for longer than its tenant's retention is purged by the retention sweep (a
 * Temporal Schedule): its projection row, event log, push configs, claims and workflow go, and GetTask /
 * SubscribeToTask answer -32001. A paused task is never purged and can be resumed after a sweep; the ledger keeps
 * the purged task's settlement and reconcile still balances. A tenant's own retention wins over the default.
 * Real Temporal dev server, real PostgreSQL, real A2A agents.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { WorkflowNotFoundError } from '@temporalio/client';
import { AgentPool, startAskingAgent, startEchoAgent } from './agents';
import { type Gateway, eventually, register, rpc, startGateway } from './helpers/harness';
import { sse } from './helpers/sse';
import { ensureRetentionSweep, triggerRetentionSweep } from '../src/core/temporal/retention-sweep';

const V1 = { 'A2A-Version': '1.0' };
const RETENTION_MS = 4_000;
const userMessage = (text: string, extra: Record<string, unknown> = {}) => ({ messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...extra });
const call = (url: string, method: string, params: unknown) => rpc(url, { jsonrpc: '2.0', id: 1, method, params }, V1);

describe('retention', () => {
  let gw: Gateway;
  const agents = new AgentPool();

  before(async () => {
    gw = await startGateway({ retentionMs: RETENTION_MS, unfundedAccounts: 'unlimited' });
    // Hourly, as in production; the test runs it when it wants with a trigger.
    await ensureRetentionSweep(gw.env.client, gw.taskQueue, 3_600_000);
  });
  after(async () => {
    await gw?.close();
    await agents.closeAll();
  });

  const patchTenant = (body: unknown) => gw.inject({ method: 'PATCH', url: '/tenants/default', as: 'admin', body });
  const rows = async (table: string, taskId: string) =>
    (await gw.db.pool.query(`SELECT count(*)::int AS n FROM ${table} WHERE tenant = 'default' AND task_id = $1`, [taskId])).rows[0].n as number;
  const completedSweeps = async () => {
    let n = 0;
    for await (const _ of gw.env.client.workflow.list({ query: `WorkflowType = "retentionSweepWorkflow" AND TaskQueue = "${gw.taskQueue}" AND ExecutionStatus = "Completed"` })) n++;
    return n;
  };
  /** The result of the retention sweep that closed last. */
  const lastSweep = async () => {
    let last: { workflowId: string; runId: string; closeTime?: Date } | undefined;
    for await (const w of gw.env.client.workflow.list({ query: `WorkflowType = "retentionSweepWorkflow" AND TaskQueue = "${gw.taskQueue}" AND ExecutionStatus = "Completed"` })) {
      if (!last || (w.closeTime && last.closeTime && w.closeTime > last.closeTime)) last = w;
    }
    return (await gw.env.client.workflow.getHandle(last!.workflowId, last!.runId).result()) as { purged: Record<string, number>; failed?: Record<string, string> };
  };
  const sweep = async () => {
    const before = await completedSweeps();
    await triggerRetentionSweep(gw.env.client, gw.taskQueue);
    await eventually(async () => ((await completedSweeps()) > before ? true : undefined), 60_000, 'the retention sweep to complete');
  };

  test('a tenant\'s retention is a duration, and a bad one is refused naming the field', async () => {
    const bad = await patchTenant({ retention: 'soon' });
    assert.equal(bad.status, 400, bad.text);
    assert.match(bad.json.error, /retention/);
    assert.equal((await patchTenant({ retention: '0s' })).status, 400);
    const set = await patchTenant({ retention: '36h' });
    assert.equal(set.status, 200, set.text);
    assert.equal(set.json.retention, '36h');
    const reset = await patchTenant({ retention: null });
    assert.equal(reset.json.retention, null);
  });

  test('a completed task is purged after the retention; a paused task is kept and resumable; the ledger balances', async () => {
    const echo = await agents.add(startEchoAgent());
    const asking = await agents.add(startAskingAgent());
    const { rpc: echoRpc } = await register(gw, echo.url, { priceMinor: 30 });
    const { rpc: askingRpc } = await register(gw, asking.url, { priceMinor: 20 });

    const done = (await call(echoRpc, 'SendMessage', { message: userMessage('purge me') })).json.result.task;
    assert.equal(done.status.state, 'TASK_STATE_COMPLETED');
    const pushed = await call(echoRpc, 'CreateTaskPushNotificationConfig', { taskId: done.id, url: 'https://hooks.example/done', token: 't' });
    assert.ok(pushed.json.result, JSON.stringify(pushed.json));
    const paused = (await call(askingRpc, 'SendMessage', { message: userMessage('hi') })).json.result.task;
    assert.equal(paused.status.state, 'TASK_STATE_INPUT_REQUIRED');
    assert.ok((await rows('task_events', done.id)) > 0);
    assert.equal(await rows('push_configs', done.id), 1);
    assert.equal(await rows('message_tasks', done.id), 1);
    const settled = async () => (await gw.db.pool.query(`SELECT count(*)::int AS n FROM settlements WHERE task_id = $1`, [done.id])).rows[0].n as number;
    await eventually(async () => ((await settled()) === 1 ? true : undefined), 15_000, 'the completed task to settle');

    // The tenant's own retention (an hour) wins: the task, now older than the default 4 s, is kept.
    assert.equal((await patchTenant({ retention: '1h' })).status, 200);
    await eventually(async () => {
      const { rows: r } = await gw.db.pool.query(`SELECT updated_at < now() - make_interval(secs => $2 / 1000.0) AS old FROM tasks WHERE tenant = 'default' AND task_id = $1`, [done.id, RETENTION_MS]);
      return r[0]?.old ? true : undefined;
    }, 30_000, 'the completed task to be older than the default retention');
    await sweep();
    assert.equal((await call(echoRpc, 'GetTask', { id: done.id })).json.result?.status?.state, 'TASK_STATE_COMPLETED', 'kept under the tenant\'s retention');

    // Back to the default (4 s): the next sweep purges it.
    assert.equal((await patchTenant({ retention: null })).status, 200);
    await sweep();
    const gone = await call(echoRpc, 'GetTask', { id: done.id });
    assert.equal(gone.json.error?.code, -32001, gone.text);
    const subscribed = await sse(echoRpc, { method: 'SubscribeToTask', params: { id: done.id }, headers: V1 });
    assert.equal(subscribed.json?.error?.code, -32001, JSON.stringify(subscribed.json));
    for (const table of ['tasks', 'task_events', 'task_event_heads', 'push_configs', 'message_tasks']) assert.equal(await rows(table, done.id), 0, `${table} of the purged task`);
    await assert.rejects(gw.env.client.workflow.getHandle(`a2a:default:${done.id}`).describe(), WorkflowNotFoundError, 'its workflow is deleted too');
    assert.equal(await rows('purged_tasks', done.id), 1);
    // The ledger keeps the purged task's settlement, its entries and its trust event.
    assert.equal(await settled(), 1);
    assert.ok((await gw.db.pool.query(`SELECT count(*)::int AS n FROM ledger_entries WHERE task_id = $1`, [done.id])).rows[0].n > 0);
    assert.equal(await rows('trust_events', done.id), 1);

    // The paused task, older than the retention too, is kept, and resumes.
    assert.ok((await rows('task_events', paused.id)) > 0);
    const still = await call(askingRpc, 'GetTask', { id: paused.id });
    assert.equal(still.json.result?.status?.state, 'TASK_STATE_INPUT_REQUIRED', still.text);
    const resumed = await call(askingRpc, 'SendMessage', { message: userMessage('Ada', { taskId: paused.id, contextId: paused.contextId }) });
    assert.equal(resumed.json.result?.task?.status?.state, 'TASK_STATE_COMPLETED', resumed.text);

    await eventually(async () => {
      const r = (await (await gw.fetch(`${gw.url}/ledger/reconcile`, {}, 'operator')).json()) as any;
      return r.ok && r.settling.length === 0 ? r : undefined;
    }, 15_000, 'reconcile to be clean');
    // The whole ledger, checked from its first entry, balances too: the purged task's settlement is checked against
    // its tombstone; an incremental run after it checks only what changed since.
    const full = (await (await gw.fetch(`${gw.url}/ledger/reconcile?full=true`, {}, 'operator')).json()) as any;
    assert.equal(full.ok, true, JSON.stringify(full.invariants.filter((i: { ok: boolean }) => !i.ok)));
    assert.deepEqual(full.window, { full: true, since: null });
    const byName = Object.fromEntries(full.invariants.map((i: { name: string }) => [i.name, i]));
    assert.ok(byName.settledTaskIsTerminal.checked >= 2, 'the purged task\'s settlement is among those checked');
    const incremental = (await (await gw.fetch(`${gw.url}/ledger/reconcile`, {}, 'operator')).json()) as any;
    assert.equal(incremental.ok, true);
    assert.equal(incremental.window.full, false);
    assert.ok(Date.parse(incremental.window.since) > Date.parse(full.checkedAt) - 6 * 60_000, 'the window starts shortly before the last clean run');
    assert.equal((await gw.fetch(`${gw.url}/ledger/reconcile?full=maybe`, {}, 'operator')).status, 400);
  });

  test('an absurd retention is refused; one already in the database fails only its own tenant\'s purge (issue 46)', async () => {
    const absurd = await patchTenant({ retention: '10000000d' });
    assert.equal(absurd.status, 400, absurd.text);
    assert.match(absurd.json.error, /3650d[^]*retention/, 'naming the longest and the field');
    assert.equal((await patchTenant({ retention: '3651d' })).status, 400);
    assert.equal((await patchTenant({ retention: '3650d' })).status, 200, 'ten years is the longest');
    assert.equal((await patchTenant({ retention: null })).status, 200);

    // A tenant sorted before `default`, whose retention was written before the check: its cut-off is out of
    // PostgreSQL's range. The sweep reports it and purges `default`'s tasks all the same.
    const made = await gw.inject({ method: 'POST', url: '/tenants', as: 'admin', body: { id: '0-absurd', name: 'Absurd retention' } });
    assert.equal(made.status, 201, made.text);
    await gw.db.pool.query(`UPDATE tenants SET retention_ms = $1 WHERE id = '0-absurd'`, [10_000_000 * 86_400_000]);
    const { rpc: echoRpc } = await register(gw, (await agents.add(startEchoAgent())).url);
    const done = (await call(echoRpc, 'SendMessage', { message: userMessage('purge me too') })).json.result.task;
    assert.equal(done.status.state, 'TASK_STATE_COMPLETED');
    await new Promise((r) => setTimeout(r, RETENTION_MS + 500));
    await sweep();
    const gone = await call(echoRpc, 'GetTask', { id: done.id });
    assert.equal(gone.json.error?.code, -32001, `default's task is purged: ${gone.text}`);
    const result = await lastSweep();
    assert.match(result.failed?.['0-absurd'] ?? '', /out of range/, JSON.stringify(result));
  });
});
