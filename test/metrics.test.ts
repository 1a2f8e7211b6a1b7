// GET /metrics on a real gateway (Temporal dev server, PostgreSQL, SDK agents): what a task, a retried agent call,
// a push delivery and a quota refusal count, the gauges read at scrape time (open tasks by state), the SDK runtime's
// metrics appended, the process's default metrics, HTTP requests by route pattern, and that only an admin or a
// `metrics` key may read it, the metrics key nothing else. Every call is to Switchboard's own routes: in-process (gw.inject), no port.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { AgentPool, startAskingAgent, startEchoAgent } from './agents';
import { startFaultyAgent } from './agents/faulty';
import { type Gateway, TEST_ADMIN_KEY, eventually, register, startGateway } from './helpers/harness';
import { metricsText } from '../src/core/metrics';
import { buildWorkerApp } from '../src/api/app';
import { KeyStore } from '../src/core/auth/keys';
import { createLogger } from '../src/core/log';

let gw: Gateway;
const agents = new AgentPool();
/** A scraper's key (role `metrics`), made through the admin API as an operator of Switchboard would. */
let metricsKey: string;

before(async () => {
  gw = await startGateway({ listen: false });
  const made = await gw.inject({ method: 'POST', url: '/tenants/default/keys', as: 'admin', body: { role: 'metrics', name: 'prometheus' } });
  assert.equal(made.status, 201, made.text);
  metricsKey = made.json.key as string;
});
after(async () => {
  await gw?.close();
  await agents.closeAll();
});

const userMessage = (text: string) => ({ messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] });

/** A call with the scraper's key. */
const asMetrics = (method: string, url: string, body?: unknown, headers: Record<string, string> = {}) =>
  gw.inject({ method, url, body, as: 'none', headers: { ...headers, authorization: `Bearer ${metricsKey}` } });

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

test('only an admin or a metrics key reads /metrics: its labels name every tenant\'s agents', async () => {
  assert.equal((await scrape('admin')).status, 200);
  assert.equal((await asMetrics('GET', '/metrics')).status, 200);
  assert.equal((await scrape('operator')).status, 403);
  assert.equal((await scrape('client')).status, 403);
  assert.equal((await scrape('none')).status, 401);
});

test("the Temporal SDK runtime's metrics are appended when it exports them; a dead exporter leaves Switchboard's", async () => {
  const exporter = http.createServer((_req, res) => res.end('# TYPE temporal_workflow_completed counter\ntemporal_workflow_completed 7\n'));
  await new Promise<void>((r) => exporter.listen(0, '127.0.0.1', r));
  const port = (exporter.address() as AddressInfo).port;
  try {
    // What GET /metrics sends (src/api/routes/metrics.ts answers with metricsText of the runtime's endpoint).
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
    assert.equal((await get('/metrics', metricsKey)).statusCode, 200, 'a scraper\'s key reads a worker\'s /metrics too');
    assert.equal((await get('/agents', TEST_ADMIN_KEY)).statusCode, 404, 'nothing but the probes');
  } finally {
    await app.close();
    exporter.close();
  }
});

test('a metrics key reads /metrics (default, HTTP and task metrics) and is refused everything else, saying so', async () => {
  const echo = await agents.add(startEchoAgent());
  const { id } = await register(gw, echo.url);
  const scraped = await asMetrics('GET', '/metrics');
  assert.equal(scraped.status, 200);
  assert.match(scraped.text, /^process_resident_memory_bytes \d+/m);
  assert.match(scraped.text, /^nodejs_eventloop_lag_seconds /m);
  assert.match(scraped.text, /^switchboard_http_requests_total\{/m);
  assert.match(scraped.text, /^switchboard_tasks\{state="working"\} \d+$/m);
  const rpcBody = (method: string) => ({ jsonrpc: '2.0', id: 1, method, params: method === 'SendMessage' ? { message: userMessage('no') } : { id: randomUUID() } });
  const refused: Array<[string, string, unknown?]> = [
    ['GET', '/agents'],
    ['POST', '/agents', { url: echo.url }],
    ['GET', '/tasks'],
    ['GET', '/tenants'],
    ['POST', `/agents/${id}/a2a`, rpcBody('SendMessage')],
    ['POST', `/agents/${id}/a2a`, rpcBody('GetTask')],
  ];
  for (const [method, url, body] of refused) {
    const res = await asMetrics(method, url, body, url.endsWith('/a2a') ? { 'A2A-Version': '1.0' } : {});
    assert.equal(res.status, 403, `${method} ${url}: ${res.text}`);
    assert.match(res.text, /a metrics key reads GET \/metrics only/, `${method} ${url} says why`);
  }
});

test('switchboard_tasks counts open tasks by state from the projection: an input-required task counts, a completed one does not', async () => {
  const echo = await agents.add(startEchoAgent());
  const asker = await agents.add(startAskingAgent());
  const echoId = (await register(gw, echo.url)).id;
  const askerId = (await register(gw, asker.url)).id;
  const open = (text: string, state: string) => sample(text, 'switchboard_tasks', { state });
  const before = (await scrape()).text;
  const asked = await send(askerId, 'hello');
  assert.equal(asked.json.result.task.status.state, 'TASK_STATE_INPUT_REQUIRED');
  assert.equal((await send(echoId, 'done')).json.result.task.status.state, 'TASK_STATE_COMPLETED');
  // The projection is written as the task's state changes; the gauge reads it at scrape time.
  const text = await eventually(async () => {
    const t = (await scrape()).text;
    return open(t, 'input-required') - open(before, 'input-required') === 1 ? t : undefined;
  }, 15_000, 'the input-required task counted');
  assert.equal(open(text, 'working'), open(before, 'working'), 'the completed task is not open');
  assert.equal(open(text, 'submitted'), 0);
  assert.doesNotMatch(text, /^switchboard_tasks\{state="(completed|failed|canceled|rejected)"\}/m, 'terminal states are not series');
  assert.match(text, /^# HELP switchboard_tasks .*max\(\), not sum\(\)/m);
});

test('HTTP requests count by route pattern, never by URL; a URL no route serves counts as route="unmatched"', async () => {
  const labels = { route: '/agents/:id', method: 'GET', status: '404' };
  const before = (await scrape()).text;
  const missing = [`nope-${randomUUID()}`, `nope-${randomUUID()}`];
  for (const id of missing) assert.equal((await gw.inject({ url: `/agents/${id}`, as: 'operator' })).status, 404);
  const unknown = `/no-such-route-${randomUUID()}`;
  const stray = await gw.inject({ url: unknown, as: 'operator' });
  const text = (await scrape()).text;
  assert.equal(sample(text, 'switchboard_http_requests_total', labels) - sample(before, 'switchboard_http_requests_total', labels), 2);
  assert.equal(sample(text, 'switchboard_http_request_duration_seconds_count', labels) - sample(before, 'switchboard_http_request_duration_seconds_count', labels), 2);
  const strayLabels = { route: 'unmatched', method: 'GET', status: String(stray.status) };
  assert.equal(sample(text, 'switchboard_http_requests_total', strayLabels) - sample(before, 'switchboard_http_requests_total', strayLabels), 1);
  for (const raw of [...missing, unknown]) assert.ok(!text.includes(raw), `no series names the URL ${raw}`);
  // The method is the client's to choose: one no route has counts as `other`, never as itself.
  const odd = await gw.inject({ method: 'PROPFIND', url: '/agents', as: 'operator' });
  const oddLabels = { route: 'unmatched', method: 'other', status: String(odd.status) };
  assert.equal(sample((await scrape()).text, 'switchboard_http_requests_total', oddLabels) - sample(text, 'switchboard_http_requests_total', oddLabels), 1);
  // The scrapes themselves are counted too, under their own pattern and the admin's 200.
  assert.ok(sample(text, 'switchboard_http_requests_total', { route: '/metrics', method: 'GET', status: '200' }) >= 1);
});
