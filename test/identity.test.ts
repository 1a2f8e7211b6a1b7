/**
 * Who is calling (issue 14): every route and every JSON-RPC method for every kind of caller (none, each role,
 * a revoked key, an expired key); tenants that cannot see each other; agent endpoints that answer only for
 * their own agent's tasks; the cards advertising how to authenticate; the audit trail; quotas and rate limits;
 * and a sweep of malformed credentials. Real Temporal, PostgreSQL, @a2a-js/sdk agents and clients; calls to
 * Switchboard's own routes go in-process (gw.inject), streams and SDK clients over the wire.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { SendMessageRequest, Task } from '@a2a-js/sdk';
import { ClientFactory } from '@a2a-js/sdk/client';
import { A2AClient as A2AClient03 } from 'a2a-sdk-03/client';
import { AgentPool, startAskingAgent, startEchoAgent, startSlowAgent, type TestAgent } from './agents';
import { type Gateway, agentKey, authFetch, clientFactory, eventually, register, rpc, startGateway } from './helpers/harness';
import { sse } from './helpers/sse';
import { KeyStore } from '../src/core/auth/keys';
import type { Role } from '../src/core/auth/caller';
import { RPC_METHODS } from '../src/api/a2a/rpc-handler';

let gw: Gateway;
const agents = new AgentPool();
let echo: TestAgent;
let echoId: string;
let taskId: string;

type Principal = 'none' | Role | 'revoked' | 'expired';
const PRINCIPALS: Principal[] = ['none', 'admin', 'operator', 'client', 'agent', 'metrics', 'revoked', 'expired'];
const key: Partial<Record<Principal, string>> = {};
const V1 = { 'A2A-Version': '1.0' };
const stateOf = (e: { data: any } | undefined): string | undefined => e?.data.result?.statusUpdate?.status?.state ?? e?.data.result?.task?.status?.state;

const userMessage = (text: string, extra: Record<string, unknown> = {}) => ({ messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...extra });

/** A call to Switchboard's own routes, in-process (gw.inject): as `key`, or without credentials. */
async function call(method: string, path: string, opts: { key?: string; body?: unknown; headers?: Record<string, string> } = {}) {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.key) headers.authorization = `Bearer ${opts.key}`;
  const res = await gw.inject({ method, url: path, body: opts.body, headers, as: 'none' });
  const fetched = new Headers();
  for (const [name, value] of Object.entries(res.headers)) if (value !== undefined) fetched.set(name, String(value));
  return { status: res.status, json: res.json, text: res.text, headers: fetched };
}

const admin = (method: string, path: string, body?: unknown) => call(method, path, { key: gw.keys.admin, body });

before(async () => {
  gw = await startGateway({ hub: {} }); // with the WebSocket hub, so GET /hub is in the matrix
  echo = await agents.add(startEchoAgent());
  echoId = (await register(gw, echo.url)).id;
  key.admin = gw.keys.admin;
  key.operator = gw.keys.operator;
  key.client = gw.keys.client;
  key.agent = await agentKey(gw, echoId);
  key.metrics = (await admin('POST', '/tenants/default/keys', { role: 'metrics', name: 'scraper' })).json.key;
  const revoked = (await admin('POST', '/tenants/default/keys', { role: 'client', name: 'to revoke' })).json;
  assert.equal((await admin('DELETE', `/tenants/default/keys/${revoked.id}`)).status, 204);
  key.revoked = revoked.key;
  key.expired = (await new KeyStore(gw.db.pool).create({ tenant: 'default', role: 'client', name: 'expired', expiresAt: new Date(Date.now() - 1000) })).key;
  const sent = await rpc(`${gw.url}/agents/${echoId}/a2a`, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: userMessage('hello') } }, V1);
  taskId = sent.json.result.task.id;
});

after(async () => {
  await gw?.close();
  await agents.closeAll();
});

// ---- the role × route matrix ----

interface Row {
  /** Who passes authentication and authorization; `public` is everyone, credentials or not. */
  allowed: 'public' | readonly Role[];
  request: () => { path: string; body?: unknown; headers?: Record<string, string> };
  /** The status an allowed caller gets (the route's own answer to this request), per role where it differs. */
  ok: number | Partial<Record<Principal, number>>;
}

const ALL: readonly Role[] = ['admin', 'operator', 'client', 'agent'];
const OPS: readonly Role[] = ['admin', 'operator'];
const ADMIN: readonly Role[] = ['admin'];
/** The A2A methods that change something: everyone but operators (rpcMethodRoles). */
const WRITERS: readonly Role[] = ['admin', 'client', 'agent'];
const completedPushBody = { statusUpdate: { taskId: 'agent-task', status: { state: 'TASK_STATE_COMPLETED' } } };
const MCP_ACCEPT = { accept: 'application/json, text/event-stream' };
const rpcBody = () => ({ jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: randomUUID() } });

/** One row per route: the test fails when the app has a route this table does not name, or the other way round. */
const MATRIX: Record<string, Row> = {
  'GET /healthz': { allowed: 'public', request: () => ({ path: '/healthz' }), ok: 200 },
  'GET /readyz': { allowed: 'public', request: () => ({ path: '/readyz' }), ok: 200 },
  'GET /metrics': { allowed: ['admin', 'metrics'], request: () => ({ path: '/metrics' }), ok: 200 },
  'GET /.well-known/jwks.json': { allowed: 'public', request: () => ({ path: '/.well-known/jwks.json' }), ok: 200 },
  'GET /openapi.json': { allowed: 'public', request: () => ({ path: '/openapi.json' }), ok: 200 },
  // Bitstring Status Lists are public, like any W3C status list (test/nanda.test.ts reads a real one without a key).
  'GET /credentials/status/:listId': { allowed: 'public', request: () => ({ path: '/credentials/status/sl-none' }), ok: 404 },
  'GET /.well-known/agent-card.json': { allowed: 'public', request: () => ({ path: '/.well-known/agent-card.json' }), ok: 200 },
  'GET /.well-known/agent.json': { allowed: 'public', request: () => ({ path: '/.well-known/agent.json' }), ok: 200 },
  'GET /agents/:id/.well-known/agent-card.json': { allowed: 'public', request: () => ({ path: `/agents/${echoId}/.well-known/agent-card.json` }), ok: 200 },
  'GET /agents/:id/.well-known/agent.json': { allowed: 'public', request: () => ({ path: `/agents/${echoId}/.well-known/agent.json` }), ok: 200 },
  'GET /agents/:id/a2a/.well-known/agent-card.json': { allowed: 'public', request: () => ({ path: `/agents/${echoId}/a2a/.well-known/agent-card.json` }), ok: 200 },
  'GET /agents/:id/a2a/.well-known/agent.json': { allowed: 'public', request: () => ({ path: `/agents/${echoId}/a2a/.well-known/agent.json` }), ok: 200 },
  // The console is a page without data: it reads everything through the routes below with the key it is given.
  'GET /console': { allowed: 'public', request: () => ({ path: '/console' }), ok: 200 },
  'GET /console/console.js': { allowed: 'public', request: () => ({ path: '/console/console.js' }), ok: 200 },
  'GET /console/task-page.js': { allowed: 'public', request: () => ({ path: '/console/task-page.js' }), ok: 200 },
  'GET /console/console.css': { allowed: 'public', request: () => ({ path: '/console/console.css' }), ok: 200 },
  // Bodies that fail validation: the caller got past authorization, and nothing changes.
  'POST /tenants': { allowed: ADMIN, request: () => ({ path: '/tenants', body: {} }), ok: 400 },
  'GET /tenants': { allowed: ADMIN, request: () => ({ path: '/tenants' }), ok: 200 },
  'GET /tenants/:id': { allowed: ADMIN, request: () => ({ path: '/tenants/default' }), ok: 200 },
  'PATCH /tenants/:id': { allowed: ADMIN, request: () => ({ path: '/tenants/default', body: { quotas: { bogus: 1 } } }), ok: 400 },
  'POST /tenants/:id/keys': { allowed: ADMIN, request: () => ({ path: '/tenants/default/keys', body: {} }), ok: 400 },
  'GET /tenants/:id/keys': { allowed: ADMIN, request: () => ({ path: '/tenants/default/keys' }), ok: 200 },
  'DELETE /tenants/:id/keys/:keyId': { allowed: ADMIN, request: () => ({ path: '/tenants/default/keys/key_none' }), ok: 404 },
  // Hub enrollment tokens: an admin's, or an operator's of its own tenant (issue 30).
  'POST /tenants/:id/enrollment-tokens': { allowed: OPS, request: () => ({ path: '/tenants/default/enrollment-tokens', body: { uses: 0 } }), ok: 400 },
  'GET /tenants/:id/enrollment-tokens': { allowed: OPS, request: () => ({ path: '/tenants/default/enrollment-tokens' }), ok: 200 },
  'DELETE /tenants/:id/enrollment-tokens/:tokenId': { allowed: OPS, request: () => ({ path: '/tenants/default/enrollment-tokens/enr_none' }), ok: 404 },
  'GET /audit': { allowed: OPS, request: () => ({ path: '/audit' }), ok: 200 },
  'POST /agents': { allowed: OPS, request: () => ({ path: '/agents', body: {} }), ok: 400 },
  'GET /agents': { allowed: ALL, request: () => ({ path: '/agents' }), ok: 200 },
  'GET /agents/:id': { allowed: ALL, request: () => ({ path: `/agents/${echoId}` }), ok: 200 },
  'GET /agents/:id/probes': { allowed: ALL, request: () => ({ path: `/agents/${echoId}/probes` }), ok: 200 },
  'GET /agents/:id/reputation': { allowed: ALL, request: () => ({ path: `/agents/${echoId}/reputation` }), ok: 200 },
  'PUT /agents/:id/credentials': { allowed: OPS, request: () => ({ path: '/agents/no-such-agent/credentials', body: { type: 'bearer', token: 't' } }), ok: 404 },
  'DELETE /agents/:id/credentials': { allowed: OPS, request: () => ({ path: '/agents/no-such-agent/credentials' }), ok: 404 },
  'OPTIONS /codec/decode': { allowed: 'public', request: () => ({ path: '/codec/decode' }), ok: 204 },
  'OPTIONS /codec/encode': { allowed: 'public', request: () => ({ path: '/codec/encode' }), ok: 204 },
  'POST /codec/decode': { allowed: OPS, request: () => ({ path: '/codec/decode', body: { payloads: [] } }), ok: 200 },
  'POST /codec/encode': { allowed: OPS, request: () => ({ path: '/codec/encode', body: { payloads: 'no' } }), ok: 400 },
  'POST /agents/:id/refresh': { allowed: OPS, request: () => ({ path: '/agents/no-such-agent/refresh' }), ok: 404 },
  'DELETE /agents/:id': { allowed: OPS, request: () => ({ path: '/agents/no-such-agent' }), ok: 404 },
  'GET /tasks': { allowed: OPS, request: () => ({ path: '/tasks' }), ok: 200 },
  'GET /tasks/versions': { allowed: ADMIN, request: () => ({ path: '/tasks/versions' }), ok: 200 },
  'GET /tasks/:id/route': { allowed: ALL, request: () => ({ path: `/tasks/${taskId}/route` }), ok: 200 },
  'GET /accounts': { allowed: OPS, request: () => ({ path: '/accounts' }), ok: 200 },
  'POST /accounts/:account/deposits': { allowed: ADMIN, request: () => ({ path: '/accounts/requester:default/deposits', body: {} }), ok: 400 },
  'POST /accounts/:account/withdrawals': { allowed: ADMIN, request: () => ({ path: '/accounts/requester:default/withdrawals', body: {} }), ok: 400 },
  // A client reads its tenant's requester account; an agent key only its own agent's account.
  'GET /accounts/:account': { allowed: ALL, request: () => ({ path: '/accounts/requester:default' }), ok: { admin: 200, operator: 200, client: 200, agent: 403 } },
  'GET /ledger/reconcile': { allowed: OPS, request: () => ({ path: '/ledger/reconcile' }), ok: 200 },
  'POST /agents/:id/a2a': { allowed: ALL, request: () => ({ path: `/agents/${echoId}/a2a`, body: rpcBody() }), ok: 200 },
  'POST /a2a': { allowed: ALL, request: () => ({ path: '/a2a', body: rpcBody() }), ok: 200 },
  // MCP (docs/mcp.md): a call without a session is a JSON-RPC error (400); operators may not send (403).
  'POST /mcp': { allowed: WRITERS, request: () => ({ path: '/mcp', body: { jsonrpc: '2.0', id: 1, method: 'tools/list' }, headers: MCP_ACCEPT }), ok: 400 },
  'GET /mcp': { allowed: WRITERS, request: () => ({ path: '/mcp', headers: { accept: 'text/event-stream' } }), ok: 400 },
  'DELETE /mcp': { allowed: WRITERS, request: () => ({ path: '/mcp', headers: MCP_ACCEPT }), ok: 400 },
  'POST /api/v1/a2a': { allowed: ALL, request: () => ({ path: '/api/v1/a2a', body: rpcBody() }), ok: 200 },
  // NEXUS's task API: creating one sends a message (not operators); reading one is a GetTask.
  'POST /api/v1/tasks': { allowed: WRITERS, request: () => ({ path: '/api/v1/tasks', body: {} }), ok: 400 },
  'GET /api/v1/tasks/:id': { allowed: ALL, request: () => ({ path: `/api/v1/tasks/${randomUUID()}` }), ok: 404 },
  // HTTP+JSON (REST): every A2A method under one route per HTTP method; the method's roles are the JSON-RPC ones.
  'GET /agents/:id/rest/*': { allowed: ALL, request: () => ({ path: `/agents/${echoId}/rest/tasks/${randomUUID()}`, headers: V1 }), ok: 404 },
  'POST /agents/:id/rest/*': { allowed: WRITERS, request: () => ({ path: `/agents/${echoId}/rest/message:send`, body: {}, headers: V1 }), ok: 400 },
  'DELETE /agents/:id/rest/*': { allowed: WRITERS, request: () => ({ path: `/agents/${echoId}/rest/tasks/${randomUUID()}/pushNotificationConfigs/x`, headers: V1 }), ok: 404 },
  'GET /rest/*': { allowed: ALL, request: () => ({ path: `/rest/tasks/${randomUUID()}`, headers: V1 }), ok: 404 },
  'POST /rest/*': { allowed: WRITERS, request: () => ({ path: '/rest/message:send', body: {}, headers: V1 }), ok: 400 },
  // The WebSocket hub: an agent's own connection. A plain GET (no upgrade) past authorization is 426.
  'GET /hub': { allowed: ['agent'], request: () => ({ path: '/hub' }), ok: 426 },
  'DELETE /rest/*': { allowed: WRITERS, request: () => ({ path: `/rest/tasks/${randomUUID()}/pushNotificationConfigs/x`, headers: V1 }), ok: 404 },
  // Genesis Nexus: envelopes are sent like A2A writes; secrets are the operators'; subscriptions the agents' (or their operators').
  'POST /genesis/messages': { allowed: WRITERS, request: () => ({ path: '/genesis/messages', body: {} }), ok: 400 },
  'GET /genesis/messages/:id': { allowed: ALL, request: () => ({ path: '/genesis/messages/no-such-envelope' }), ok: 404 },
  'POST /agents/:id/genesis-secret': { allowed: OPS, request: () => ({ path: '/agents/no-such-agent/genesis-secret' }), ok: 404 },
  'POST /genesis/subscriptions': { allowed: ['admin', 'operator', 'agent'], request: () => ({ path: '/genesis/subscriptions', body: {} }), ok: 400 },
  'GET /genesis/subscriptions': { allowed: ALL, request: () => ({ path: '/genesis/subscriptions' }), ok: 200 },
  // Agents' push notifications: no Switchboard key (an agent pushes), the follow's own token instead; any
  // Authorization is read as that token, so every caller here is refused as a bad push token.
  'POST /agent-push/:id': { allowed: 'public', request: () => ({ path: '/agent-push/no-such-follow', body: completedPushBody }), ok: 401 },
  'DELETE /genesis/subscriptions/:id': { allowed: ['admin', 'operator', 'agent'], request: () => ({ path: '/genesis/subscriptions/no-such-subscription' }), ok: 404 },
};

function expected(row: Row, who: Principal): number {
  if (row.allowed === 'public') return typeof row.ok === 'number' ? row.ok : row.ok[who]!;
  if (who === 'none' || who === 'revoked' || who === 'expired') return 401;
  if (!row.allowed.includes(who)) return 403;
  return typeof row.ok === 'number' ? row.ok : row.ok[who]!;
}

/** A refusal's message, in any of its forms: `{error: "…"}`, a JSON-RPC error, or AIP-193 (on the A2A endpoints). */
function refusalMessage(json: any): string | undefined {
  return typeof json?.error === 'string' ? json.error : typeof json?.error?.message === 'string' ? json.error.message : undefined;
}

describe('role × route matrix', () => {
  test('every route of the app has a row, and every row a route', () => {
    const routes = gw.app.accessTable.map((r) => `${r.method} ${r.url}`).sort();
    assert.deepEqual(routes, Object.keys(MATRIX).sort(), 'add a MATRIX row (and its access policy) for each new route');
  });

  test('each route answers each caller as its policy says', async () => {
    const failures: string[] = [];
    for (const [route, row] of Object.entries(MATRIX)) {
      const method = route.split(' ')[0];
      for (const who of PRINCIPALS) {
        const { path, body, headers } = row.request();
        const res = await call(method, path, { key: key[who], body, headers });
        const want = expected(row, who);
        if (res.status !== want) failures.push(`${route} as ${who}: ${res.status} (want ${want}) ${res.text.slice(0, 200)}`);
        if (want === 401) {
          if (!/^Bearer realm="switchboard"/.test(res.headers.get('www-authenticate') ?? '')) failures.push(`${route} as ${who}: 401 without WWW-Authenticate`);
          if (typeof refusalMessage(res.json) !== 'string') failures.push(`${route} as ${who}: 401 without an error message`);
        }
        if (want === 403 && row.allowed !== 'public' && !refusalMessage(res.json)?.includes('role') && !refusalMessage(res.json)?.includes('own account')) {
          failures.push(`${route} as ${who}: 403 that does not say which role is needed: ${res.text}`);
        }
      }
    }
    assert.deepEqual(failures, []);
  });

  test('each JSON-RPC method: 401 without a valid key, operators read and cancel (a new message is refused), clients and agents do everything', async () => {
    // An operator's message must continue a task (test/console.test.ts answers one); these start one.
    const operatorMay = new Set([
      'GetTask', 'ListTasks', 'tasks/get', 'SubscribeToTask', 'tasks/resubscribe', 'GetExtendedAgentCard', 'agent/getAuthenticatedExtendedCard',
      'tasks/list', 'task/resubscribe', 'CancelTask', 'tasks/cancel',
    ]);
    const failures: string[] = [];
    for (const method of RPC_METHODS) {
      const legacy = method.includes('/');
      // Params that reach the method: an unknown task (an error envelope, HTTP 200), or a message to send.
      // Made anew for each key: a 0.1 task id another key used already names an existing task (a continuation).
      const paramsOf = () => /send|stream|Message/i.test(method) && !/resubscribe|Subscribe/.test(method)
        ? method.startsWith('tasks/send')
          ? { id: randomUUID(), message: { role: 'user', parts: [{ type: 'text', text: 'hi' }] } } // 0.1 names its new task
          : { message: legacy ? { kind: 'message', messageId: randomUUID(), role: 'user', parts: [{ kind: 'text', text: 'hi' }] } : userMessage('hi') }
        : /PushNotificationConfig|pushNotificationConfig/.test(method)
          ? legacy ? { id: randomUUID(), taskId: randomUUID(), pushNotificationConfigId: 'x' } : { taskId: randomUUID(), id: 'x' }
          : { id: randomUUID() };
      for (const who of PRINCIPALS) {
        const res = await fetch(`${gw.url}/agents/${echoId}/a2a`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...(legacy ? {} : V1), ...(key[who] ? { authorization: `Bearer ${key[who]}` } : {}) },
          body: JSON.stringify({ jsonrpc: '2.0', id: 7, method, params: paramsOf() }),
        });
        await res.arrayBuffer(); // a streaming answer ends with its task
        const want = who === 'none' || who === 'revoked' || who === 'expired' ? 401 : (who === 'operator' && !operatorMay.has(method)) || who === 'metrics' ? 403 : 200;
        if (res.status !== want) failures.push(`${method} as ${who}: ${res.status} (want ${want})`);
      }
    }
    assert.deepEqual(failures, []);
  });

  test('a revoked key stops working at once, although it was just used (and cached)', async () => {
    const made = (await admin('POST', '/tenants/default/keys', { role: 'client', name: 'short-lived' })).json;
    assert.match(made.key, /^sb_[A-Za-z0-9_-]{43}$/);
    assert.equal((await call('GET', '/agents', { key: made.key })).status, 200);
    assert.equal((await admin('DELETE', `/tenants/default/keys/${made.id}`)).status, 204);
    assert.equal((await call('GET', '/agents', { key: made.key })).status, 401);
    const listed = (await admin('GET', '/tenants/default/keys')).json.keys.find((k: { id: string }) => k.id === made.id);
    assert.ok(listed.revokedAt, 'the listing shows the revocation');
    assert.equal(JSON.stringify((await admin('GET', '/tenants/default/keys')).json).includes(made.key), false, 'no listing holds a secret');
  });

  test('X-API-Key works like a bearer token; a non-admin cannot act in another tenant', async () => {
    assert.equal((await call('GET', '/agents', { headers: { 'x-api-key': gw.keys.client } })).status, 200);
    const other = await call('GET', '/agents', { key: gw.keys.client, headers: { 'x-switchboard-tenant': 'someone-else' } });
    assert.equal(other.status, 403);
    const unknown = await call('GET', '/agents', { key: gw.keys.admin, headers: { 'x-switchboard-tenant': 'no-such-tenant' } });
    assert.equal(unknown.status, 404);
  });
});

// ---- tenants ----

describe('two tenants', () => {
  let b: { client: string; operator: string };
  let askingId: string;
  let waitingTask: string;

  before(async () => {
    assert.equal((await admin('POST', '/tenants', { id: 'team-b', name: 'Team B' })).status, 201);
    assert.equal((await admin('POST', '/tenants', { id: 'team-b', name: 'again' })).status, 409);
    b = {
      client: (await admin('POST', '/tenants/team-b/keys', { role: 'client', name: 'b client' })).json.key,
      operator: (await admin('POST', '/tenants/team-b/keys', { role: 'operator', name: 'b operator' })).json.key,
    };
    // Tenant A (default) has a task waiting for input, and a completed one (taskId).
    const asking = await agents.add(startAskingAgent());
    askingId = (await register(gw, asking.url)).id;
    const first = await rpc(`${gw.url}/agents/${askingId}/a2a`, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: userMessage('hi') } }, V1);
    waitingTask = first.json.result.task.id;
    assert.equal(first.json.result.task.status.state, 'TASK_STATE_INPUT_REQUIRED');
  });

  /** The error B gets for A's task, and for a made-up id: the same code and the same words. */
  async function sameAsUnknown(method: string, params: (id: string) => unknown, path = '/a2a') {
    const asB = (id: string) => rpc(`${gw.url}${path}`, { jsonrpc: '2.0', id: 1, method, params: params(id) }, { ...V1, authorization: `Bearer ${b.client}` });
    const theirs = await asB(waitingTask);
    const made = randomUUID();
    const unknown = await asB(made);
    assert.equal(theirs.json?.error?.code, -32001, `${method}: ${theirs.text}`);
    assert.equal(theirs.json.error.message.replace(waitingTask, '<id>'), unknown.json.error.message.replace(made, '<id>'), `${method}: not an oracle`);
  }

  test("B cannot get, cancel, resume, subscribe to or push-configure A's task: the answer is the unknown task's", async () => {
    await sameAsUnknown('GetTask', (id) => ({ id }));
    await sameAsUnknown('CancelTask', (id) => ({ id }));
    await sameAsUnknown('SendMessage', (id) => ({ message: userMessage('resume', { taskId: id }) }));
    await sameAsUnknown('SubscribeToTask', (id) => ({ id }));
    await sameAsUnknown('CreateTaskPushNotificationConfig', (id) => ({ taskId: id, url: 'https://example.com/hook' }));
    await sameAsUnknown('ListTaskPushNotificationConfigs', (id) => ({ taskId: id }));
    const list = await rpc(`${gw.url}/a2a`, { jsonrpc: '2.0', id: 1, method: 'ListTasks', params: {} }, { ...V1, authorization: `Bearer ${b.client}` });
    assert.deepEqual(list.json.result.tasks, [], 'B lists none of A\'s tasks');
    // Resubscribing with Last-Event-ID reads the log: still scoped.
    const replay = await sse(`${gw.url}/a2a`, { method: 'SubscribeToTask', params: { id: taskId }, lastEventId: 0, headers: { authorization: `Bearer ${b.client}` } });
    assert.equal(replay.json?.error?.code, -32001, JSON.stringify(replay));
    // A's task is untouched and still waits for A.
    const a = await rpc(`${gw.url}/a2a`, { jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: waitingTask } }, V1);
    assert.equal(a.json.result.status.state, 'TASK_STATE_INPUT_REQUIRED');
  });

  test("B sees none of A's agents, routes, accounts or ledger, and routing never crosses over", async () => {
    const asB = (path: string, k = b.operator) => call('GET', path, { key: k });
    assert.deepEqual((await asB('/agents')).json.agents, []);
    assert.deepEqual((await asB('/agents?q=echo')).json.agents, []);
    assert.equal((await asB(`/agents/${echoId}`)).status, 404);
    assert.equal((await asB(`/agents/${echoId}/reputation`)).status, 404);
    assert.equal((await asB(`/tasks/${taskId}/route`)).status, 404);
    const reconcile = (await asB('/ledger/reconcile')).json;
    assert.equal(reconcile.ok, true);
    assert.equal(JSON.stringify(reconcile).includes(taskId), false);
    const account = (await asB('/accounts/requester:default')).json;
    assert.equal(account.entries.length, 0, 'the same account name in B is B\'s own, empty one');
    assert.equal((await asB('/accounts/requester:default', b.client)).status, 403, 'a client reads only requester:<its tenant>');
    assert.equal((await asB('/audit')).json.entries.some((e: { tenant: string }) => e.tenant !== 'team-b'), false);
    // A's agent endpoint does not exist for B; naming A's agent at the front door routes nowhere.
    const endpoint = await rpc(`${gw.url}/agents/${echoId}/a2a`, rpcBody(), { ...V1, authorization: `Bearer ${b.client}` });
    assert.equal(endpoint.status, 404);
    const routed = await rpc(`${gw.url}/a2a`, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: userMessage('echo this', { metadata: { agentId: echoId } }) } }, { ...V1, authorization: `Bearer ${b.client}` });
    assert.equal(routed.json.error?.code, -32051, routed.text);
    const byText = await rpc(`${gw.url}/a2a`, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: userMessage('Echoes the text') } }, { ...V1, authorization: `Bearer ${b.client}` });
    assert.equal(byText.json.error?.code, -32051, 'no agent of B matches: A\'s echo agent is never chosen');
    // The public root card lists B's skills (none) to B.
    assert.deepEqual((await asB('/.well-known/agent-card.json', b.client)).json.skills, []);
  });
});

// ---- one agent's endpoint, another agent's task ----

describe('agent endpoints answer only for their own agent', () => {
  test("another agent's task of the same tenant answers as an unknown one at this endpoint, and normally at its own and at /a2a", async () => {
    const asking = await agents.add(startAskingAgent());
    const otherId = (await register(gw, asking.url)).id;
    const at = (agent: string, method: string, params: unknown) => rpc(`${gw.url}/agents/${agent}/a2a`, { jsonrpc: '2.0', id: 1, method, params }, V1);
    for (const [method, params] of [
      ['GetTask', { id: taskId }],
      ['CancelTask', { id: taskId }],
      ['SubscribeToTask', { id: taskId }],
      ['ListTaskPushNotificationConfigs', { taskId }],
    ] as const) {
      const res = await at(otherId, method, params);
      assert.equal(res.json?.error?.code, -32001, `${method}: ${res.text}`);
      assert.equal(res.json.error.message, `Task ${taskId} not found`);
    }
    assert.equal((await at(otherId, 'tasks/get', { id: taskId })).json.error.code, -32001, 'the 0.3 dialect too');
    const list = await at(otherId, 'ListTasks', {});
    assert.equal(list.json.result.tasks.some((t: { id: string }) => t.id === taskId), false);
    assert.equal((await at(echoId, 'GetTask', { id: taskId })).json.result.status.state, 'TASK_STATE_COMPLETED');
    const front = await rpc(`${gw.url}/a2a`, { jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: taskId } }, V1);
    assert.equal(front.json.result.id, taskId);
  });
});

// ---- cards and SDK clients ----

describe('the cards say how to authenticate, and SDK clients with a key just work', () => {
  test('1.0 securitySchemes + securityRequirements, and 0.3 security for 0.3 readers, on agent and front-door cards', async () => {
    for (const path of [`/agents/${echoId}/.well-known/agent-card.json`, '/.well-known/agent-card.json']) {
      const card = (await call('GET', path, { headers: { 'A2A-Version': '1.0' } })).json;
      assert.deepEqual(card.securitySchemes.bearer, { httpAuthSecurityScheme: { scheme: 'Bearer', bearerFormat: 'Switchboard API key (sb_…) or JWT' } });
      assert.deepEqual(card.securitySchemes.apiKey, { apiKeySecurityScheme: { location: 'header', name: 'X-API-Key' } });
      assert.deepEqual(card.securityRequirements, [{ schemes: { bearer: { list: [] } } }, { schemes: { apiKey: { list: [] } } }]);
      // A reader that names no version is a 0.3 reader (1.0 §3.6.2).
      for (const headers of [{ 'A2A-Version': '0.3' }, {}] as Record<string, string>[]) {
        const card03 = (await call('GET', path, { headers })).json;
        assert.equal(card03.securitySchemes.bearer.type, 'http');
        assert.equal(card03.securitySchemes.apiKey.in, 'header');
        assert.deepEqual(card03.security, [{ bearer: [] }, { apiKey: [] }]);
      }
    }
  });

  test('an SDK client without a key gets 401; with a bearer key or an X-API-Key it runs a task (1.0 and 0.3)', async () => {
    const cardUrl = `${gw.url}/agents/${echoId}/.well-known/agent-card.json`;
    const bare = await new ClientFactory().createFromUrl(cardUrl, '');
    // The 401's body is a JSON-RPC error (-32055), which the SDK client reads and shows.
    await assert.rejects(bare.sendMessage(SendMessageRequest.fromJSON({ message: userMessage('x') })), /Authentication required/);
    const bearer = await clientFactory(gw.keys.client).createFromUrl(cardUrl, '');
    const t1 = Task.toJSON((await bearer.sendMessage(SendMessageRequest.fromJSON({ message: userMessage('by bearer') }))) as Task) as any;
    assert.equal(t1.status.state, 'TASK_STATE_COMPLETED');
    const apiKeyFetch: typeof fetch = (input, init) => {
      const headers = new Headers(init?.headers);
      headers.set('x-api-key', gw.keys.client);
      return fetch(input, { ...init, headers });
    };
    // A 0.3 client (@a2a-js/sdk 0.3.13) reads the card with no A2A-Version and calls the card's URL.
    const client03 = await A2AClient03.fromCardUrl(cardUrl, { fetchImpl: apiKeyFetch });
    const sent = await client03.sendMessage({ message: { kind: 'message', messageId: randomUUID(), role: 'user', parts: [{ kind: 'text', text: 'by api key' }] } });
    assert.ok(!('error' in sent) && sent.result.kind === 'task', JSON.stringify(sent));
    const taskId = sent.result.id;
    const t2 = await eventually(async () => {
      const got = await client03.getTask({ id: taskId });
      return 'result' in got && got.result.status.state === 'completed' ? got.result : undefined;
    });
    assert.equal(t2.status.state, 'completed');
  });
});

// ---- audit ----

describe('the audit trail', () => {
  test('admin and operator mutations are written with actor, tenant, action, target and request id; operators read their own', async () => {
    const made = await admin('POST', '/tenants', { id: 'audited', name: 'Audited' });
    assert.equal(made.status, 201);
    const requestId = made.headers.get('x-request-id');
    const opKey = (await admin('POST', '/tenants/audited/keys', { role: 'operator', name: 'audited operator' })).json;
    const deposit = await call('POST', '/accounts/requester:audited/deposits', {
      key: gw.keys.admin,
      headers: { 'x-switchboard-tenant': 'audited' },
      body: { amountMinor: 500, idempotencyKey: randomUUID() },
    });
    assert.equal(deposit.status, 201);
    const registered = await call('POST', '/agents', { key: opKey.key, body: { url: echo.url } });
    assert.equal(registered.status, 201);
    const removed = await call('DELETE', `/agents/${registered.json.id}`, { key: opKey.key });
    assert.equal(removed.status, 204);

    const all = await eventually(async () => {
      const r = (await admin('GET', '/audit?pageSize=500')).json;
      return r.entries.some((e: { action: string; target: string }) => e.action === 'agent.delete' && e.target === registered.json.id) ? r : undefined;
    }, 10_000, 'the audit entries');
    const byAction = (action: string) => all.entries.find((e: { action: string }) => e.action === action);
    assert.deepEqual(
      { ...byAction('tenant.create'), id: undefined, at: undefined },
      { id: undefined, at: undefined, tenant: 'default', actor: 'env-admin', role: 'admin', action: 'tenant.create', target: 'audited', status: 201, requestId },
    );
    assert.equal(byAction('key.create').target, `audited/${opKey.id}`);
    assert.equal(byAction('account.deposit').tenant, 'audited');
    assert.deepEqual([byAction('agent.register').actor, byAction('agent.register').role, byAction('agent.register').target], [opKey.id, 'operator', registered.json.id]);
    assert.equal(JSON.stringify(all).includes(opKey.key), false, 'no secret in the trail');

    const own = (await call('GET', '/audit', { key: opKey.key })).json.entries;
    assert.deepEqual([...new Set(own.map((e: { tenant: string }) => e.tenant))], ['audited']);
    assert.equal((await call('GET', '/audit?tenant=default', { key: opKey.key })).status, 403);
    const page1 = (await admin('GET', '/audit?pageSize=2')).json;
    const page2 = (await admin('GET', `/audit?pageSize=2&pageToken=${page1.nextPageToken}`)).json;
    assert.equal(page1.entries.length, 2);
    assert.ok(Number(page2.entries[0].id) < Number(page1.entries[1].id), 'pages go back in time');
    assert.equal((await admin('GET', '/audit?pageToken=bogus')).status, 400);
  });
});

// ---- quotas and rate limits ----

describe('quotas', () => {
  test('a new task over the open-task or daily quota is refused with -32053 naming it, and nothing starts', async () => {
    assert.equal((await admin('POST', '/tenants', { id: 'small', name: 'Small', quotas: { openTasks: 1, newTasksPerDay: 3 } })).status, 201);
    const smallOps = (await admin('POST', '/tenants/small/keys', { role: 'operator', name: 'ops' })).json.key;
    const smallClient = (await admin('POST', '/tenants/small/keys', { role: 'client', name: 'c' })).json.key;
    const asking = await agents.add(startAskingAgent());
    const id = (await call('POST', '/agents', { key: smallOps, body: { url: asking.url } })).json.id;
    const send = (message: Record<string, unknown>) =>
      rpc(`${gw.url}/agents/${id}/a2a`, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message } }, { ...V1, authorization: `Bearer ${smallClient}` });
    const claims = async () => (await gw.db.pool.query("SELECT count(*)::int AS n FROM message_tasks WHERE tenant = 'small'")).rows[0].n;
    // A new task's `submitted` event goes in with its claim (one statement): never without it, never twice.
    const submitted = async () => (await gw.db.pool.query("SELECT count(*)::int AS n FROM task_events WHERE tenant = 'small' AND event_key = 'v0'")).rows[0].n;

    const first = userMessage('hi');
    const open = await send(first);
    assert.equal(open.json.result.task.status.state, 'TASK_STATE_INPUT_REQUIRED', open.text);
    const callsBefore = asking.calls.length;
    const over = await send(userMessage('another'));
    assert.equal(over.json.error?.code, -32053, over.text);
    assert.match(over.json.error.message, /openTasks \(1\)/);
    assert.equal(await claims(), 1, 'the refused message claimed nothing');
    assert.equal(await submitted(), 1, 'the refused message logged nothing');
    assert.equal(asking.calls.length, callsBefore, 'the agent was not called');
    // The same first message sent again is the same task, not a new one: no quota applies.
    assert.equal((await send(first)).json.result.task.id, open.json.result.task.id);
    assert.equal(await submitted(), 1, 'the resent message logged nothing new');

    // Finish the open task; two more fit the day, the fourth does not.
    const done = await send(userMessage('Ada', { taskId: open.json.result.task.id }));
    assert.equal(done.json.result.task.status.state, 'TASK_STATE_COMPLETED', done.text);
    const second = await send(userMessage('two'));
    assert.equal((await send(userMessage('Bo', { taskId: second.json.result.task.id }))).json.result.task.status.state, 'TASK_STATE_COMPLETED');
    const third = await send(userMessage('three'));
    assert.equal((await send(userMessage('Cy', { taskId: third.json.result.task.id }))).json.result.task.status.state, 'TASK_STATE_COMPLETED');
    const fourth = await send(userMessage('four'));
    assert.equal(fourth.json.error?.code, -32053, fourth.text);
    assert.match(fourth.json.error.message, /newTasksPerDay \(3\)/);
    assert.equal(await claims(), 3);
    assert.equal(await submitted(), 3);

    // An admin raises the quota; it applies within the cache's few seconds.
    assert.equal((await admin('PATCH', '/tenants/small', { quotas: { newTasksPerDay: 10 } })).status, 200);
    await eventually(async () => ((await send(userMessage('five'))).json.result ? true : undefined), 10_000, 'the raised quota');
  });

  test('concurrent new tasks cannot pass the open-task quota together', async () => {
    assert.equal((await admin('POST', '/tenants', { id: 'racy', name: 'Racy', quotas: { openTasks: 3 } })).status, 201);
    const ops = (await admin('POST', '/tenants/racy/keys', { role: 'operator', name: 'ops' })).json.key;
    const client = (await admin('POST', '/tenants/racy/keys', { role: 'client', name: 'c' })).json.key;
    const asking = await agents.add(startAskingAgent());
    const id = (await call('POST', '/agents', { key: ops, body: { url: asking.url } })).json.id;
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        rpc(`${gw.url}/agents/${id}/a2a`, { jsonrpc: '2.0', id: i, method: 'SendMessage', params: { message: userMessage(`n${i}`) } }, { ...V1, authorization: `Bearer ${client}` }),
      ),
    );
    assert.equal(results.filter((r) => r.json.result).length, 3, results.map((r) => r.text.slice(0, 120)).join('\n'));
    assert.equal(results.filter((r) => r.json.error?.code === -32053).length, 7);
  });

  test('a key holds at most streamsPerKey open streams (HTTP 429 with -32053)', async () => {
    assert.equal((await admin('POST', '/tenants', { id: 'streamy', name: 'Streamy', quotas: { streamsPerKey: 1 } })).status, 201);
    const ops = (await admin('POST', '/tenants/streamy/keys', { role: 'operator', name: 'ops' })).json.key;
    const client = (await admin('POST', '/tenants/streamy/keys', { role: 'client', name: 'c' })).json.key;
    const slow = await agents.add(startSlowAgent({ ms: 2_000 }));
    const id = (await call('POST', '/agents', { key: ops, body: { url: slow.url } })).json.id;
    const rpcUrl = `${gw.url}/agents/${id}/a2a`;
    const auth = { authorization: `Bearer ${client}` };
    // One stream open for as long as the slow agent works.
    const first = sse(rpcUrl, { method: 'SendStreamingMessage', params: { message: userMessage('take your time') }, headers: auth });
    await eventually(async () => (slow.calls.length > 0 ? true : undefined), 10_000, 'the first stream to reach the agent');
    const second = await sse(rpcUrl, { method: 'SendStreamingMessage', params: { message: userMessage('me too') }, headers: auth });
    assert.equal(second.status, 429, JSON.stringify(second));
    assert.equal(second.json.error.code, -32053);
    assert.match(second.json.error.message, /streamsPerKey \(1\)/);
    // The same quota over HTTP+JSON (it counts a key's streams on every binding), with the Retry-After the SDK's
    // REST error renderer would not set by itself.
    const restSecond = await fetch(`${gw.url}/agents/${id}/rest/message:stream`, {
      method: 'POST',
      headers: { ...auth, ...V1, 'content-type': 'application/json' },
      body: JSON.stringify({ message: userMessage('me too, over REST') }),
    });
    assert.equal(restSecond.status, 429, await restSecond.clone().text());
    assert.equal(restSecond.headers.get('retry-after'), '5');
    assert.equal(slow.calls.length, 1, 'the refused streams started nothing');
    assert.equal((await rpc(rpcUrl, { jsonrpc: '2.0', id: 4, method: 'ListTasks', params: {} }, { ...V1, ...auth })).status, 200, 'other calls still pass');
    assert.equal(stateOf((await first).events.at(-1)), 'TASK_STATE_COMPLETED');
    // Once the stream has closed, the key may open another.
    const third = await sse(rpcUrl, { method: 'SendStreamingMessage', params: { message: userMessage('now') }, headers: auth });
    assert.equal(third.status, 200);
    assert.equal(stateOf(third.events.at(-1)), 'TASK_STATE_COMPLETED');
  });
});

describe('rate limits', () => {
  test('per key: 429 with Retry-After past the limit, and calls pass again after the window', async () => {
    assert.equal((await admin('POST', '/tenants', { id: 'chatty', name: 'Chatty', quotas: { requestsPerSecondPerKey: 5 } })).status, 201);
    const k = (await admin('POST', '/tenants/chatty/keys', { role: 'client', name: 'c' })).json.key;
    const other = (await admin('POST', '/tenants/chatty/keys', { role: 'client', name: 'c2' })).json.key;
    const burst = await Promise.all(Array.from({ length: 20 }, () => call('GET', '/agents', { key: k })));
    const limited = burst.filter((r) => r.status === 429);
    assert.ok(limited.length >= 10, `429s: ${limited.length}`);
    assert.ok(Number(limited[0].headers.get('retry-after')) >= 1);
    assert.match(limited[0].json.error, /5 requests per second for this key/);
    assert.equal((await call('GET', '/agents', { key: other })).status, 200, 'another key of the tenant is not limited by this one');
    await eventually(async () => ((await call('GET', '/agents', { key: k })).status === 200 ? true : undefined), 5_000, 'the window to pass');
  });

  test('per tenant, with the counters in Redis shared by two processes', async () => {
    const redisUrl = 'redis://127.0.0.1:6379';
    const one = await startGateway({ db: gw.db, temporal: { env: gw.env, taskQueue: gw.taskQueue }, worker: false, redisUrl });
    const two = await startGateway({ db: gw.db, temporal: { env: gw.env, taskQueue: gw.taskQueue }, worker: false, redisUrl });
    try {
      const tenant = `shared-${randomUUID().slice(0, 8)}`;
      assert.equal((await admin('POST', '/tenants', { id: tenant, name: 'Shared', quotas: { requestsPerSecond: 6 } })).status, 201);
      const keys = await Promise.all([1, 2, 3].map(async (i) => (await admin('POST', `/tenants/${tenant}/keys`, { role: 'client', name: `k${i}` })).json.key as string));
      // 18 calls in one burst, spread over three keys and two processes: the tenant's 6/s holds across all of them.
      const burst = await Promise.all(
        Array.from({ length: 18 }, (_, i) => authFetch(keys[i % 3])(`${(i % 2 ? one : two).url}/agents`).then((r) => r.status)),
      );
      const ok = burst.filter((s) => s === 200).length;
      assert.ok(ok <= 6 * 2, `${ok} passed: at most one window's worth, or two if the burst straddled a second`);
      assert.ok(burst.filter((s) => s === 429).length >= 6);
    } finally {
      await Promise.all([one.close(), two.close()]);
    }
  });
});

// ---- hostile credentials ----

describe('malformed credentials (fast-check)', () => {
  test('~500 Authorization / X-API-Key values: never a 5xx, a protected route always 401, a public one always 200', { timeout: 120_000 }, async () => {
    const printable = fc.string({ unit: fc.constantFrom(...' !"#$%&\'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~'.split('')), maxLength: 300 });
    const value = fc.oneof(
      printable,
      printable.map((s) => `Bearer ${s}`),
      printable.map((s) => `bearer   sb_${s}`),
      printable.map((s) => `Basic ${Buffer.from(s).toString('base64')}`),
      fc.constant('Bearer'),
      fc.constant('Bearer '),
      fc.constant(`Bearer ${'sb_' + 'A'.repeat(43)}`),
      fc.constant(`Bearer ${'x'.repeat(9000)}`),
      fc.constant('Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.'),
      fc.constant(`Bearer ${gw.keys.client}x`),
      fc.constant(`Bearer ${gw.keys.client.slice(0, -1)}`),
    );
    let n = 0;
    await fc.assert(
      fc.asyncProperty(value, fc.boolean(), async (v, asApiKey) => {
        n++;
        const headers: Record<string, string> = asApiKey ? { 'x-api-key': v.replace(/^Bearer /, '') } : { authorization: v };
        const res = await fetch(`${gw.url}/agents`, { headers, signal: AbortSignal.timeout(5_000) });
        const body = await res.text();
        assert.equal(res.status, 401, `${JSON.stringify(headers).slice(0, 200)} → ${res.status} ${body.slice(0, 200)}`);
        const pub = await fetch(`${gw.url}/.well-known/agent-card.json`, { headers, signal: AbortSignal.timeout(5_000) });
        assert.equal(pub.status, 200);
        await pub.arrayBuffer();
      }),
      { numRuns: 250, seed: 14 },
    );
    assert.ok(n >= 250);
    assert.equal((await fetch(`${gw.url}/healthz`)).status, 200, 'still up');
  });
});
