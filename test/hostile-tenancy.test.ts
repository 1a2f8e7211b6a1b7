/**
 * Issue 32, tried again as an attacker would: who may act where, and for how long. Two Switchboard processes on
 * one PostgreSQL and one Temporal: A, a gateway in this process (test/helpers/harness.ts), and B, a real child
 * process (`node src/main.ts`), each with its own key cache, LISTEN connection and hub.
 *
 * - An HTTP agent's key on the hub cannot rewrite its agent's entry into a socket's (agent.register).
 * - Revoking a key, deleting an agent, deleting a JWT's tenant, and a key's expiry end, in both processes and
 *   within 2 s, what the credential holds open: JSON-RPC and REST SSE streams (a last event saying why), gRPC
 *   streams (UNAUTHENTICATED), hub sockets (4001); a deleted agent's keys are refused everywhere at once.
 * - A JWT naming a tenant that does not exist is refused (401).
 * - A REST path's tenant segment is checked on every method, GET included.
 * The measured times (revoke call → stream ended, socket closed) are printed as test diagnostics.
 */
import { after, before, describe, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import WebSocket from 'ws';
import { type JWK, SignJWT, exportJWK, generateKeyPair } from 'jose';
import { AgentPool, startEchoAgent, startSlowAgent } from './agents';
import { DATABASE_URL, type Gateway, TEST_ADMIN_KEY, TEST_SECRETS_KEY, register, rememberKeys, rpc, startGateway } from './helpers/harness';
import { SubscribeToTaskRequest } from '@a2a-js/sdk';
import { A2AService } from '@a2a-js/sdk/server/grpc';
import { type ClientBinding, bindingFactory } from './helpers/binding-scenarios';
import { sse, type SseEvent } from './helpers/sse';
import { freePort, startSwitchboard, type SwitchboardProcess } from './helpers/process';
import { JwtVerifier } from '../src/core/auth/jwt';
import { workflowIdOf } from '../src/core/temporal/task-gateway';
import { createOutbound } from '../src/core/http/outbound';

const ISS = 'https://idp.test';
const AUD = 'switchboard';
/** The issue's bound: what a lapsed credential opened is closed within this long, in every process. */
const BOUND_MS = 2_000;

let a: Gateway;
let b: SwitchboardProcess;
let bGrpc: string;
let jwks: http.Server;
let signer: { privateKey: Awaited<ReturnType<typeof generateKeyPair>>['privateKey']; jwk: JWK };
let dataDir: string;
const agents = new AgentPool();
const sockets: WebSocket[] = [];
let slowId: string;
/** Workflow ids of the slow tasks started, terminated at the end. */
const slowTasks: string[] = [];

before(async () => {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  signer = { privateKey, jwk: { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' } };
  jwks = http.createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [signer.jwk] })));
  await new Promise<void>((r) => jwks.listen(0, '127.0.0.1', r));
  const jwksUrl = `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks.json`;
  a = await startGateway({ hub: { pingMs: 1000 }, grpc: true, jwt: new JwtVerifier({ jwksUrl, issuer: ISS, audience: AUD, fetch: createOutbound({ allowPrivate: true }).fetch }) });
  const url = new URL(DATABASE_URL);
  url.searchParams.set('options', `-c search_path=${a.db.schema}`);
  dataDir = mkdtempSync(join(tmpdir(), 'sb-tenancy-'));
  const grpcPort = await freePort();
  bGrpc = `127.0.0.1:${grpcPort}`;
  b = await startSwitchboard({
    PORT: String(await freePort()),
    SWITCHBOARD_GRPC_PORT: String(grpcPort),
    DATABASE_URL: url.toString(),
    TEMPORAL_ADDRESS: a.env.address,
    TEMPORAL_TASK_QUEUE: a.taskQueue,
    HOST: '127.0.0.1',
    SWITCHBOARD_DATA_DIR: dataDir,
    SWITCHBOARD_ALLOW_PRIVATE_URLS: 'true',
    SWITCHBOARD_ADMIN_KEY: TEST_ADMIN_KEY,
    SWITCHBOARD_SECRETS_KEY: TEST_SECRETS_KEY,
    SWITCHBOARD_UNFUNDED_ACCOUNTS: 'unlimited',
    SWITCHBOARD_JWT_JWKS_URL: jwksUrl,
    SWITCHBOARD_JWT_ISSUER: ISS,
    SWITCHBOARD_JWT_AUDIENCE: AUD,
    LOG_LEVEL: 'warn',
  });
  rememberKeys(b.url, a.keys);
  slowId = (await register(a, (await agents.add(startSlowAgent({ ms: 300_000 }))).url)).id;
});

after(async () => {
  for (const ws of sockets) ws.terminate();
  await b?.kill();
  // The slow tasks would keep the worker's activities (and its shutdown) waiting on the agent.
  await Promise.all(slowTasks.map((w) => a.temporal.workflow.getHandle(w).terminate('test over').catch(() => undefined)));
  await a?.close();
  await agents.closeAll();
  jwks?.closeAllConnections();
  await new Promise((r) => jwks?.close(r));
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

/** A failed assertion shows what process B printed. */
async function withOutput(fn: () => Promise<void>): Promise<void> {
  try {
    await fn();
  } catch (err) {
    if (err instanceof Error) err.message += `\n--- B ---\n${b?.output()}`;
    throw err;
  }
}

async function call(url: string, method: string, path: string, key: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text ? (JSON.parse(text) as any) : undefined };
}

async function newKey(role: 'client' | 'agent', opts: { agentId?: string; expiresAt?: string } = {}): Promise<{ id: string; key: string }> {
  const res = await call(a.url, 'POST', '/tenants/default/keys', TEST_ADMIN_KEY, { role, name: `hostile ${role}`, ...opts });
  assert.equal(res.status, 201, JSON.stringify(res.json));
  return { id: res.json.id, key: res.json.key };
}

const revoke = (url: string, keyId: string) => call(url, 'DELETE', `/tenants/default/keys/${keyId}`, TEST_ADMIN_KEY);

function token(claims: Record<string, unknown>): Promise<string> {
  return new SignJWT(claims).setProtectedHeader({ alg: 'ES256', kid: 'k1' }).setIssuer(ISS).setAudience(AUD).setSubject('mallory').setIssuedAt().setExpirationTime('10m').sign(signer.privateKey);
}

/** A task on the slow agent that keeps working for minutes: streams on it stay open until something ends them. */
async function slowTask(key = a.keys.client, agentId = slowId, tenant = 'default'): Promise<string> {
  const res = await rpc(`${a.url}/agents/${agentId}/a2a`, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'work' }] }, configuration: { returnImmediately: true } } }, { authorization: `Bearer ${key}` });
  assert.ok(res.json?.result?.task?.id, res.text);
  slowTasks.push(workflowIdOf(tenant, res.json.result.task.id));
  return res.json.result.task.id;
}

/** One open stream: `opened` once its first event arrived; `ended` with when (ms, performance.now()) and how it ended. */
interface OpenStream {
  name: string;
  opened: Promise<void>;
  ended: Promise<{ at: number; last?: SseEvent; error?: { code?: number; message: string } }>;
}

function jsonRpcStream(name: string, url: string, key: string, taskId: string, agentId = slowId): OpenStream {
  let opened!: () => void;
  const first = new Promise<void>((r) => (opened = r));
  const ended = sse(`${url}/agents/${agentId}/a2a`, { method: 'SubscribeToTask', params: { id: taskId }, headers: { authorization: `Bearer ${key}` }, onEvent: () => opened() }).then((read) => {
    assert.ok(read.ended, `${name}: the server ended the stream`);
    assert.equal(read.status, 200, `${name}: ${JSON.stringify(read.json)}`);
    return { at: performance.now(), last: read.events.at(-1) };
  });
  return { name, opened: first, ended };
}

/** A stream read by an @a2a-js/sdk client over REST or gRPC, as an attacker's client would hold it. */
function sdkStream(name: string, binding: ClientBinding, url: string, key: string, taskId: string): OpenStream {
  let opened!: () => void;
  const first = new Promise<void>((r) => (opened = r));
  const ended = (async () => {
    const client = await bindingFactory(binding, key).createFromUrl(`${url}/agents/${slowId}/`);
    assert.equal(client.transport.protocolName, binding);
    try {
      for await (const _e of client.resubscribeTask({ id: taskId, tenant: '' })) opened();
      return { at: performance.now() };
    } catch (err) {
      const e = err as { code?: number; message: string };
      return { at: performance.now(), error: { code: e.code, message: e.message } };
    }
  })();
  return { name, opened: first, ended };
}

/** A raw gRPC SubscribeToTask (the SDK's service definition, no SDK client in between): the status code it ends with. */
function grpcStream(name: string, address: string, key: string, taskId: string): OpenStream {
  const Ctor = grpc.makeGenericClientConstructor(A2AService as unknown as grpc.ServiceDefinition, 'A2AService');
  const client = new Ctor(address, grpc.credentials.createInsecure()) as unknown as grpc.Client & { subscribeToTask(req: unknown, md: grpc.Metadata): grpc.ClientReadableStream<unknown> };
  const md = new grpc.Metadata();
  md.set('authorization', `Bearer ${key}`);
  md.set('a2a-version', '1.0');
  const stream = client.subscribeToTask(SubscribeToTaskRequest.fromJSON({ tenant: slowId, id: taskId }), md);
  let opened!: () => void;
  const first = new Promise<void>((r) => (opened = r));
  stream.on('data', () => opened());
  const ended = new Promise<{ at: number; error?: { code?: number; message: string } }>((resolve) => {
    stream.on('error', (err: grpc.ServiceError) => resolve({ at: performance.now(), error: { code: err.code, message: err.details } }));
    stream.on('end', () => resolve({ at: performance.now() }));
  }).finally(() => client.close());
  return { name, opened: first, ended };
}

type Frame = { id?: number; method?: string; result?: any; error?: { code: number; message: string } };

/** An agent connected out to one process's hub. */
async function hubSocket(url: string, key: string): Promise<{ call(method: string, params?: unknown): Promise<Frame>; closed: Promise<{ at: number; code: number; reason: string }> }> {
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/hub`, { headers: { authorization: `Bearer ${key}` } });
  sockets.push(ws);
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    // An attacker keeps a refused upgrade's connection open: the server must close it (the error names who closed first).
    ws.once('unexpected-response', (_req, res) => res.socket.once('close', () => reject(new Error(`HTTP ${res.statusCode}, closed by the server`))));
    ws.once('error', reject);
  });
  let next = 1;
  const waiting = new Map<number, (f: Frame) => void>();
  ws.on('message', (data) => {
    const f = JSON.parse(data.toString()) as Frame;
    if (typeof f.id === 'number') waiting.get(f.id)?.(f);
  });
  const closed = new Promise<{ at: number; code: number; reason: string }>((r) => ws.once('close', (code, reason) => r({ at: performance.now(), code, reason: reason.toString() })));
  return {
    call: (method, params) =>
      new Promise((resolve) => {
        const id = next++;
        waiting.set(id, resolve);
        ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, ...(params === undefined ? {} : { params }) }));
      }),
    closed,
  };
}

async function hubAgent(name: string): Promise<{ id: string; key: string; keyId: string }> {
  const reg = await call(a.url, 'POST', '/agents', a.keys.operator, { url: 'ws-agent://', name });
  assert.equal(reg.status, 201, JSON.stringify(reg.json));
  const key = await newKey('agent', { agentId: reg.json.id });
  return { id: reg.json.id, key: key.key, keyId: key.id };
}

/** Waits for every stream's first event, so that each is open before the credential lapses. */
async function allOpen(streams: OpenStream[]): Promise<void> {
  await Promise.all(streams.map((s) => Promise.race([s.opened, s.ended.then((e) => assert.fail(`${s.name} ended before it opened: ${JSON.stringify(e)}`))])));
}

function report(t: TestContext, what: string, ms: number): void {
  t.diagnostic(`${what}: ${ms.toFixed(0)} ms`);
  assert.ok(ms < BOUND_MS, `${what} took ${ms.toFixed(0)} ms (the bound is ${BOUND_MS} ms)`);
}

/** `p`, or a failure naming `what` once 10 s have passed (the issue found streams still open 10 s later). */
function within10s<T>(p: Promise<T>, what: string): Promise<T> {
  let timer!: NodeJS.Timeout;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} is still open 10 s later`)), 10_000)));
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/** Asserts how a stream ended once its credential lapsed (the reason's text `why`), and reports how long it took from t0. */
async function endedBecause(t: TestContext, s: OpenStream, t0: number, why: RegExp): Promise<void> {
  const end = await within10s(s.ended, s.name);
  if (s.name.includes('JSON-RPC')) {
    assert.equal(end.last?.data.error?.code, -32055, `${s.name}: the last event is -32055: ${JSON.stringify(end.last)}`);
    assert.match(end.last.data.error.message, why, s.name);
  } else if (s.name.includes('gRPC')) {
    assert.equal(end.error?.code, grpc.status.UNAUTHENTICATED, `${s.name}: ${JSON.stringify(end.error)}`);
    assert.match(end.error!.message, why, s.name);
  } else {
    assert.match(end.error?.message ?? '', why, `${s.name}: the SDK client reports why: ${JSON.stringify(end.error)}`);
  }
  report(t, `${s.name} ended after`, end.at - t0);
}

describe('the hub registers only hub agents', () => {
  test('an HTTP agent\'s key calling agent.register gets an error frame; its entry is unchanged and its tasks still go over HTTP', { timeout: 120_000 }, async () => {
    const echo = await agents.add(startEchoAgent());
    const { id } = await register(a, echo.url);
    const before = await call(a.url, 'GET', `/agents/${id}`, a.keys.operator);
    const { key } = await newKey('agent', { agentId: id });
    await withOutput(async () => {
      for (const url of [a.url, b.url]) {
        const socket = await hubSocket(url, key);
        // Both shapes the hub reads: the card itself, and {card}.
        for (const params of [{ name: 'hijacked', skills: [{ id: 'all', name: 'Everything', tags: ['all'] }] }, { card: { name: 'hijacked', url: 'https://evil.example' } }]) {
          const answer = await socket.call('agent.register', params);
          assert.equal(answer.result, undefined, JSON.stringify(answer));
          assert.equal(answer.error?.code, -32004, JSON.stringify(answer));
          assert.match(answer.error!.message, /not registered as a hub agent \(ws-agent:\/\/\)/);
        }
      }
    });
    const after = await call(a.url, 'GET', `/agents/${id}`, a.keys.operator);
    assert.equal(after.json.name, before.json.name);
    assert.deepEqual(after.json.endpoint, before.json.endpoint);
    assert.deepEqual(after.json.card, before.json.card);
    assert.match(after.json.endpoint.url, /^http:/);
    // The next task goes to the agent's HTTP endpoint (the echo agent answers it), not to the socket.
    const calls = echo.calls.length;
    const sent = await rpc(`${a.url}/agents/${id}/a2a`, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'still http' }] } } });
    assert.equal(sent.json?.result?.task?.status?.state, 'TASK_STATE_COMPLETED', sent.text);
    assert.ok(echo.calls.length > calls, 'the HTTP agent got the task');
  });

  test('a hub agent (ws-agent://) still registers its card', { timeout: 120_000 }, async () => {
    const hub = await hubAgent('hub-proper');
    const socket = await hubSocket(a.url, hub.key);
    const answer = await socket.call('agent.register', { name: 'hub-proper', skills: [{ id: 's', name: 'Summaries' }] });
    assert.equal(answer.result?.url, `ws-agent://${hub.id}`, JSON.stringify(answer));
  });
});

describe('a JWT naming a tenant that does not exist', () => {
  test('is refused with 401 on every route and binding, in both processes; it registers nothing', { timeout: 120_000 }, async () => {
    const ghostOperator = await token({ switchboard_role: 'operator', switchboard_tenant: 'ghost' });
    const ghostClient = await token({ switchboard_role: 'client', switchboard_tenant: 'ghost' });
    await withOutput(async () => {
      for (const url of [a.url, b.url]) {
        const reg = await call(url, 'POST', '/agents', ghostOperator, { url: 'ws-agent://', name: 'squatter' });
        assert.equal(reg.status, 401, JSON.stringify(reg.json));
        assert.match(reg.json.error, /tenant ghost does not exist/);
        assert.equal((await call(url, 'GET', '/agents', ghostOperator)).status, 401);
        const sent = await rpc(`${url}/a2a`, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'x' }] } } }, { authorization: `Bearer ${ghostClient}` });
        assert.equal(sent.status, 401, sent.text);
      }
      const { rowCount } = await a.db.pool.query(`SELECT 1 FROM agents WHERE tenant = 'ghost'`);
      assert.equal(rowCount, 0);
      // The same token for a tenant that exists is let in: the refusal is the tenant's, not the token's.
      const real = await token({ switchboard_role: 'operator', switchboard_tenant: 'default' });
      assert.equal((await call(b.url, 'GET', '/agents', real)).status, 200);
    });
  });
});

describe('REST paths carry a tenant segment', () => {
  test('a segment naming another agent is refused on every method (400 INVALID_ARGUMENT, as for POST); the agent\'s own is served', { timeout: 120_000 }, async () => {
    const [one, two] = [await agents.add(startEchoAgent()), await agents.add(startEchoAgent())];
    const [x, y] = [(await register(a, one.url)).id, (await register(a, two.url)).id];
    const send = (agentId: string) =>
      rpc(`${a.url}/agents/${agentId}/a2a`, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hi' }] } } });
    const [tx, ty] = [(await send(x)).json.result.task.id, (await send(y)).json.result.task.id];
    const message = { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hi' }] } };
    const rest = (path: string, method = 'GET') => call(a.url, method, path, a.keys.client, method === 'POST' ? message : undefined, { 'a2a-version': '1.0' });
    for (const [method, path] of [
      ['GET', `/agents/${x}/rest/${y}/tasks/${ty}`],
      ['GET', `/agents/${x}/rest/${y}/tasks/${tx}`],
      ['GET', `/agents/${x}/rest/${y}/tasks`],
      ['GET', `/agents/${x}/rest/${y}/tasks/${ty}:subscribe`],
      ['GET', `/agents/${x}/rest/${y}/tasks/${ty}/pushNotificationConfigs`],
      ['POST', `/agents/${x}/rest/${y}/tasks/${ty}:cancel`],
      ['POST', `/agents/${x}/rest/${y}/message:send`],
    ]) {
      const res = await rest(path, method);
      assert.equal(res.status, 400, `${method} ${path}: ${JSON.stringify(res.json)}`);
      assert.equal(res.json.error.status, 'INVALID_ARGUMENT');
      assert.match(res.json.error.message, new RegExp(`tenant ${y} names another agent than the URL \\(${x}\\)`));
    }
    const own = await rest(`/agents/${x}/rest/${x}/tasks/${tx}`);
    assert.equal(own.status, 200, JSON.stringify(own.json));
    assert.equal(own.json.id, tx);
    // The front door's segment names the agent: its tasks only, as on POST.
    assert.equal((await rest(`/rest/${x}/tasks/${tx}`)).status, 200);
    const elsewhere = await rest(`/rest/${y}/tasks/${tx}`);
    assert.equal(elsewhere.status, 404, JSON.stringify(elsewhere.json));
    assert.equal(elsewhere.json.error.details[0].reason, 'TASK_NOT_FOUND');
  });
});

describe('a lapsed credential ends what it opened, in every process, within 2 s', () => {
  test('revoking keys: SSE (JSON-RPC, REST) and gRPC streams end with the reason, hub sockets close with 4001, in A and B', { timeout: 120_000 }, async (t) => {
    const client = await newKey('client');
    const [h1, h2] = [await hubAgent('revoked-on-a'), await hubAgent('revoked-on-b')];
    const taskId = await slowTask();
    const streams = [
      jsonRpcStream('A JSON-RPC SSE', a.url, client.key, taskId),
      jsonRpcStream('B JSON-RPC SSE', b.url, client.key, taskId),
      sdkStream('A REST SSE (SDK client)', 'HTTP+JSON', a.url, client.key, taskId),
      sdkStream('B REST SSE (SDK client)', 'HTTP+JSON', b.url, client.key, taskId),
      grpcStream('A gRPC stream', a.grpc!, client.key, taskId),
      grpcStream('B gRPC stream', bGrpc, client.key, taskId),
    ];
    const [s1, s2] = [await hubSocket(a.url, h1.key), await hubSocket(b.url, h2.key)];
    await withOutput(async () => {
      await allOpen(streams);
      for (const s of [s1, s2]) assert.ok((await s.call('agent.search', { q: 'slow' })).result?.agents, 'the socket answers before');
      const t0 = performance.now();
      const revoked = await Promise.all([revoke(a.url, client.id), revoke(a.url, h1.keyId), revoke(a.url, h2.keyId)]);
      for (const r of revoked) assert.equal(r.status, 204);
      for (const s of streams) await endedBecause(t, s, t0, new RegExp(`API key ${client.id} was revoked`));
      for (const [name, s, keyId] of [['A hub socket', s1, h1.keyId], ['B hub socket', s2, h2.keyId]] as const) {
        const closed = await within10s(s.closed, name);
        assert.equal(closed.code, 4001, `${name}: ${JSON.stringify(closed)}`);
        assert.match(closed.reason, new RegExp(`API key ${keyId} was revoked`));
        report(t, `${name} closed after`, closed.at - t0);
      }
      // Refused at once in both processes (B had the key cached from its streams).
      for (const url of [a.url, b.url]) {
        const again = await rpc(`${url}/agents/${slowId}/a2a`, { jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: taskId } }, { authorization: `Bearer ${client.key}` });
        assert.equal(again.status, 401, again.text);
        await assert.rejects(within10s(hubSocket(url, h1.key), 'a refused upgrade'), /HTTP 401, closed by the server/);
      }
    });
  });

  test('deleting an agent: its keys are revoked, all of them, everywhere at once; its streams and its socket end', { timeout: 120_000 }, async (t) => {
    const echo = await agents.add(startEchoAgent());
    const { id } = await register(a, echo.url);
    const [k1, k2] = [await newKey('agent', { agentId: id }), await newKey('agent', { agentId: id })];
    const hub = await hubAgent('deleted-hub-agent');
    const taskId = await slowTask();
    const streams = [jsonRpcStream('A JSON-RPC SSE', a.url, k1.key, taskId), grpcStream('B gRPC stream', bGrpc, k1.key, taskId), jsonRpcStream('B JSON-RPC SSE', b.url, k1.key, taskId)];
    const socket = await hubSocket(a.url, hub.key);
    const read = (url: string, key: string) => rpc(`${url}/agents/${slowId}/a2a`, { jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: taskId } }, { authorization: `Bearer ${key}` });
    await withOutput(async () => {
      await allOpen(streams);
      // Both keys answer, and are cached, in both processes.
      for (const url of [a.url, b.url]) for (const k of [k1, k2]) assert.equal((await read(url, k.key)).status, 200);
      const t0 = performance.now();
      // Deleted through B: A hears of it from PostgreSQL.
      const deleted = await Promise.all([call(b.url, 'DELETE', `/agents/${id}`, TEST_ADMIN_KEY), call(b.url, 'DELETE', `/agents/${hub.id}`, TEST_ADMIN_KEY)]);
      for (const d of deleted) assert.equal(d.status, 204);
      for (const s of streams) await endedBecause(t, s, t0, new RegExp(`agent ${id} was deleted`));
      const closed = await within10s(socket.closed, 'the hub socket');
      assert.equal(closed.code, 4001, JSON.stringify(closed));
      assert.match(closed.reason, new RegExp(`agent ${hub.id} was deleted`));
      report(t, 'A hub socket (agent deleted through B) closed after', closed.at - t0);
      for (const url of [a.url, b.url]) {
        for (const k of [k1, k2]) {
          const refused = await read(url, k.key);
          assert.equal(refused.status, 401, `${url}: ${refused.text}`);
        }
      }
      report(t, 'both keys of the deleted agent refused in A and B after', performance.now() - t0);
      const keys = (await call(a.url, 'GET', '/tenants/default/keys', TEST_ADMIN_KEY)).json.keys as { id: string; revokedAt?: string }[];
      for (const k of [k1, k2]) assert.ok(keys.find((v) => v.id === k.id)?.revokedAt, `${k.id} is shown revoked`);
    });
  });

  test('a JWT\'s tenant deleted (by hand, in PostgreSQL): its streams end in A and B, and the token is refused', { timeout: 120_000 }, async (t) => {
    const tenant = `jwt-${randomBytes(3).toString('hex')}`;
    assert.equal((await call(a.url, 'POST', '/tenants', TEST_ADMIN_KEY, { id: tenant, name: 'JWT team' })).status, 201);
    const slow = await agents.add(startSlowAgent({ ms: 300_000 }));
    const reg = await call(a.url, 'POST', '/agents', TEST_ADMIN_KEY, { url: slow.url }, { 'x-switchboard-tenant': tenant });
    assert.equal(reg.status, 201, JSON.stringify(reg.json));
    const jwt = await token({ switchboard_role: 'client', switchboard_tenant: tenant });
    const taskId = await slowTask(jwt, reg.json.id, tenant);
    const streams = [jsonRpcStream('A JSON-RPC SSE', a.url, jwt, taskId, reg.json.id), jsonRpcStream('B JSON-RPC SSE', b.url, jwt, taskId, reg.json.id)];
    await withOutput(async () => {
      await allOpen(streams);
      const t0 = performance.now();
      await a.db.pool.query('DELETE FROM tenants WHERE id = $1', [tenant]);
      for (const s of streams) await endedBecause(t, s, t0, new RegExp(`tenant ${tenant} was deleted`));
      for (const url of [a.url, b.url]) {
        const refused = await call(url, 'GET', '/agents', jwt);
        assert.equal(refused.status, 401, JSON.stringify(refused.json));
      }
    });
  });

  test('a key that expires while its stream is open: the stream ends at its expiry, in A and B', { timeout: 120_000 }, async (t) => {
    const expiresAt = new Date(Date.now() + 4_000);
    const key = await newKey('client', { expiresAt: expiresAt.toISOString() });
    const taskId = await slowTask();
    const streams = [jsonRpcStream('A JSON-RPC SSE', a.url, key.key, taskId), jsonRpcStream('B JSON-RPC SSE', b.url, key.key, taskId)];
    await withOutput(async () => {
      await allOpen(streams);
      assert.ok(Date.now() < expiresAt.getTime(), 'the streams opened before the expiry');
      const expiry = performance.now() + (expiresAt.getTime() - Date.now());
      for (const s of streams) await endedBecause(t, s, expiry, new RegExp(`API key ${key.id} expired`));
    });
  });
});
