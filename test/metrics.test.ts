// GET /metrics on a real gateway (Temporal dev server, PostgreSQL, SDK agents): what a task, a retried agent call,
// a push delivery and a quota refusal count, the gauges read at scrape time, the SDK runtime's metrics appended, and
// that only an admin may read it. Every call is to Switchboard's own routes: in-process (gw.inject), no port.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { AgentPool, startEchoAgent } from './agents';
import { startFaultyAgent } from './agents/faulty';
import { type Gateway, TEST_ADMIN_KEY, eventually, register, startGateway } from './helpers/harness';
import { metricsText } from '../src/metrics';
import { buildWorkerApp } from '../src/app';
import { KeyStore } from '../src/auth/keys';
import { createLogger } from '../src/log';

let gw: Gateway;
const agents = new AgentPool();

before(async () => {
  gw = await startGateway({ listen: false });
});
after(async () => {
  await gw?.close();
  await agents.closeAll();
});

const userMessage = (text: string) => ({ messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] });

async function scrape(role: 'admin' | 'operator' | 'client' | 'none' = 'admin'): Promise<{ status: number; text: string }> {
  return gw.inject({ url: '/metrics', as: role });
}

/** A blocking SendMessage to the agent's endpoint (1.0), as the tenant's client or `key`. */
const send = (agentId: string, text: string, key?: string) =>
  gw.inject({
    method: 'POST',
    url: `/agents/${agentId}/a2a`,
    headers: { 'A2A-Version': '1.0', ...(key ? { authorization: `Bearer ${key}` } : {}) },
    body: { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: userMessage(text) } },
  });

/** The value of one sample (`name{labels} value`), 0 when absent. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) return Number(line.split(' ').at(-1));
  }
  return 0;
}

test('a completed task counts as started and ended for its agent, with its forward attempt timed', async () => {
  const echo = await agents.add(startEchoAgent());
  const { id } = await register(gw, echo.url);
  const before = (await scrape()).text;
  const sent = await send(id, 'count me');
  assert.equal(sent.json.result.task.status.state, 'TASK_STATE_COMPLETED');
  // Settlement runs just after the answer: wait for it to be counted.
  const text = await eventually(async () => {
    const scraped = (await scrape()).text;
    return sample(scraped, 'switchboard_tasks_ended_total', { agent: id, state: 'completed' }) >= 1 ? scraped : undefined;
  }, 15_000, 'the task counted as ended');
  assert.equal(sample(text, 'switchboard_tasks_started_total', { agent: id }) - sample(before, 'switchboard_tasks_started_total', { agent: id }), 1);
  assert.equal(sample(text, 'switchboard_tasks_ended_total', { agent: id, state: 'completed' }), 1);
  assert.equal(sample(text, 'switchboard_forward_attempts_total', { agent: id }), 1);
  assert.equal(sample(text, 'switchboard_forward_duration_seconds_count', { agent: id, outcome: 'ok' }), 1);
  assert.ok(sample(text, 'switchboard_agents', { status: 'healthy' }) + sample(text, 'switchboard_agents', { status: 'unknown' }) >= 1, 'agents by status');
  assert.match(text, /^switchboard_open_streams \d+$/m);
  assert.match(text, /^switchboard_ledger_balance_minor\{kind="/m);
});

test('a retried agent call counts its retry and the failed attempt by failure type', async () => {
  const faulty = await agents.add(startFaultyAgent({ mode: 'http500', times: 1 }));
  const { id } = await register(gw, faulty.url, { retry: { initialIntervalMs: 50 } });
  const sent = await send(id, 'retry me');
  assert.equal(sent.json.result.task.status.state, 'TASK_STATE_COMPLETED');
  const { text } = await scrape();
  assert.equal(sample(text, 'switchboard_forward_attempts_total', { agent: id }), 2);
  assert.equal(sample(text, 'switchboard_forward_retries_total', { agent: id }), 1);
  assert.equal(sample(text, 'switchboard_forward_duration_seconds_count', { agent: id, outcome: 'ok' }), 1);
  assert.ok(/switchboard_forward_duration_seconds_count\{[^}]*agent="[^"]+"[^}]*outcome="(?!ok)/.test(text), 'the failed attempt, by its failure type');
});

test('only an admin reads /metrics: its labels name every tenant\'s agents', async () => {
  assert.equal((await scrape('admin')).status, 200);
  assert.equal((await scrape('operator')).status, 403);
  assert.equal((await scrape('client')).status, 403);
  assert.equal((await scrape('none')).status, 401);
});

test("the Temporal SDK runtime's metrics are appended when it exports them; a dead exporter leaves Switchboard's", async () => {
  const exporter = http.createServer((_req, res) => res.end('# TYPE temporal_workflow_completed counter\ntemporal_workflow_completed 7\n'));
  await new Promise<void>((r) => exporter.listen(0, '127.0.0.1', r));
  const port = (exporter.address() as AddressInfo).port;
  try {
    // What GET /metrics sends (src/routes/metrics.ts answers with metricsText of the runtime's endpoint).
    const appended = await metricsText(`http://127.0.0.1:${port}/metrics`);
    assert.match(appended, /^switchboard_tasks_started_total/m);
    assert.match(appended, /^temporal_workflow_completed 7$/m);
    const alone = await metricsText('http://127.0.0.1:9/metrics');
    assert.match(alone, /^switchboard_tasks_started_total/m);
    assert.doesNotMatch(alone, /temporal_workflow_completed/);
  } finally {
    exporter.close();
  }
});

test('a new task over a tenant quota counts as a quota refusal, by quota', async () => {
  const echo = await agents.add(startEchoAgent());
  const asAdmin = (method: string, url: string, body: unknown) => gw.inject({ method, url, body, as: 'admin' });
  assert.equal((await asAdmin('POST', '/tenants', { id: 'tiny', name: 'Tiny', quotas: { openTasks: 0 } })).status, 201);
  const operator = (await asAdmin('POST', '/tenants/tiny/keys', { role: 'operator', name: 'op' })).json.key as string;
  const client = (await asAdmin('POST', '/tenants/tiny/keys', { role: 'client', name: 'cl' })).json.key as string;
  const agent = (await gw.inject({ method: 'POST', url: '/agents', headers: { authorization: `Bearer ${operator}` }, body: { url: echo.url } })).json as { id: string };
  const before = sample((await scrape()).text, 'switchboard_quota_refusals_total', { quota: 'openTasks' });
  const res = await send(agent.id, 'over quota', client);
  assert.equal((res.json as { error?: { code: number } }).error?.code, -32053);
  assert.equal(sample((await scrape()).text, 'switchboard_quota_refusals_total', { quota: 'openTasks' }) - before, 1);
});

test('a worker process\'s app (SWITCHBOARD_ROLE=worker) serves only /healthz, /readyz and /metrics: the tasks\' series and the runtime\'s', async () => {
  const exporter = http.createServer((_req, res) => res.end('# TYPE temporal_workflow_completed counter\ntemporal_workflow_completed 3\n'));
  await new Promise<void>((r) => exporter.listen(0, '127.0.0.1', r));
  let polling = true;
  const app = await buildWorkerApp({
    pool: gw.db.pool,
    temporal: gw.temporal,
    log: createLogger('silent'),
    workerRunning: () => polling,
    runtimeMetricsUrl: `http://127.0.0.1:${(exporter.address() as AddressInfo).port}/metrics`,
    auth: { keys: new KeyStore(gw.db.pool, { envAdminKey: TEST_ADMIN_KEY }) },
  });
  try {
    const get = (url: string, key?: string) => app.inject({ url, headers: key ? { authorization: `Bearer ${key}` } : {} });
    assert.equal((await get('/healthz')).statusCode, 200);
    const ready = await get('/readyz');
    assert.equal(ready.statusCode, 200, ready.body);
    assert.deepEqual(ready.json().checks.worker, { running: true });
    polling = false;
    const notReady = await get('/readyz');
    assert.equal(notReady.statusCode, 503);
    assert.deepEqual(notReady.json().missing, ['worker']);
    // The tasks' series are counted here, where workflows run; the SDK runtime's follow in the same answer.
    const metrics = await get('/metrics', TEST_ADMIN_KEY);
    assert.equal(metrics.statusCode, 200);
    assert.match(metrics.body, /^# HELP switchboard_tasks_ended_total /m);
    assert.match(metrics.body, /^temporal_workflow_completed 3$/m);
    assert.equal((await get('/metrics')).statusCode, 401);
    assert.equal((await get('/metrics', gw.keys.operator)).statusCode, 403);
    assert.equal((await get('/agents', TEST_ADMIN_KEY)).statusCode, 404, 'nothing but the probes');
  } finally {
    await app.close();
    exporter.close();
  }
});
