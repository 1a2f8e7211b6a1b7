/**
 * Hostile input (issue 32): no peer can end the process. JSON nested 3,000, 20,000 and 100,000 deep, bodies that are
 * not UTF-8 and bodies over the limits, at every entry point: JSON-RPC (per-agent endpoint, front door, NANDA
 * action text), REST, NEXUS, Genesis (body and encrypted plaintext), agent registration (body and card), agent
 * pushes, the WebSocket hub (with a frame flood), agents' answers and SSE events, a JWKS. Each gets its clear error
 * (JSON-RPC code, HTTP status, close code, a failed task naming why), and afterwards the same gateway still
 * completes a normal task. Real components: one gateway (Temporal dev server, PostgreSQL), @a2a-js/sdk agents and
 * clients, raw node:http servers where the SDK cannot produce the hostile answer, real sockets.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createCipheriv, randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client as PgClient } from 'pg';
import WebSocket from 'ws';
import { SignJWT, exportJWK, generateKeyPair } from 'jose';
import type { Client as A2AClient } from '@a2a-js/sdk/client';
import { AgentPool, startEchoAgent } from './agents';
import { deepJson, startFaultyAgent, type FaultMode } from './agents/faulty';
import { DATABASE_URL, type Gateway, TEST_SECRETS_KEY, agentKey, clientFactory, eventually, register, rpc, sendText, startGateway, textOf } from './helpers/harness';
import { AgentPushTokens } from '../src/core/push/agent-push';
import { parseKeyRing } from '../src/core/temporal/encryption-codec';
import { pairKey, signEnvelope } from '../src/core/genesis/envelope';
import { EventHub } from '../src/core/events/hub';
import { JwtError, JwtVerifier } from '../src/core/auth/jwt';
import { MAX_AGENT_JSON_DEPTH, MAX_JSON_DEPTH } from '../src/core/http/json-guard';

const DEPTHS = [3_000, 20_000, 100_000];
/** A client's JSON is read to MAX_JSON_DEPTH, an agent's (answers, events, pushes, hub frames, cards) to twice that. */
const TOO_DEEP = new RegExp(`deeper than ${MAX_JSON_DEPTH} levels`);
const AGENT_TOO_DEEP = new RegExp(`deeper than ${MAX_AGENT_JSON_DEPTH} levels`);
const FRAMES_PER_SECOND = 20;

/** Objects nested `depth` deep, as text (JSON.stringify overflows the stack that deep). */
const deepObject = (depth: number) => `${'{"a":'.repeat(depth)}0${'}'.repeat(depth)}`;
/** Arrays for one depth, objects for the next: both kinds of bracket are counted. */
const deep = (depth: number, i: number) => (i % 2 === 0 ? deepJson(depth) : deepObject(depth));
/** Two bytes that are no UTF-8 (0xC3 must be followed by a continuation byte). */
const NOT_UTF8 = Buffer.from([0xc3, 0x28]);

/** A SendMessage whose data part holds `data` (JSON text, inserted as is). */
const sendMessageWith = (data: string) =>
  `{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"message":{"messageId":"${randomUUID()}","role":"ROLE_USER","parts":[{"text":"hi"},{"data":{"x":${data}}}]}}}`;
/** The same with a text part holding `text`'s bytes as they are. */
const sendMessageWithText = (text: Buffer) =>
  Buffer.concat([Buffer.from(`{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"message":{"messageId":"${randomUUID()}","role":"ROLE_USER","parts":[{"text":"`), text, Buffer.from('"}]}}}')]);

let gw: Gateway;
const agents = new AgentPool();
let echo: { id: string; rpc: string };
let client: A2AClient;
const servers: http.Server[] = [];

before(async () => {
  gw = await startGateway({ hub: { maxFramesPerSecond: FRAMES_PER_SECOND, pingMs: 60_000, heartbeatTimeoutMs: 120_000 } });
  echo = await register(gw, (await agents.add(startEchoAgent())).url);
  client = await clientFactory(gw.keys.client).createFromUrl(`${gw.url}/agents/${echo.id}/.well-known/agent-card.json`, '');
});

after(async () => {
  for (const s of servers) s.closeAllConnections();
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  await agents.closeAll();
  await gw?.close();
});

/** The process still serves: a normal task on the same gateway completes. */
async function stillServes(): Promise<void> {
  const task = await sendText(client, 'still here?');
  assert.equal(task.status.state, 'TASK_STATE_COMPLETED');
}

/** POSTs raw bytes or text (JSON unless said otherwise) with the tenant's client key, or `key`. */
const post = (path: string, body: string | Buffer, opts: { key?: string; contentType?: string; headers?: Record<string, string> } = {}) =>
  rpc(`${gw.url}${path}`, body, {
    ...(opts.key ? { authorization: `Bearer ${opts.key}` } : {}),
    ...(opts.contentType ? { 'content-type': opts.contentType } : {}),
    ...opts.headers,
  });

/** A raw HTTP server answering every request with `body` (for what no SDK would serve). */
async function rawServer(contentType: string, body: () => string): Promise<string> {
  const server = http.createServer((_req, res) => res.writeHead(200, { 'content-type': contentType }).end(body()));
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('JSON-RPC', () => {
  test('nested 3,000 / 20,000 / 100,000 deep: -32600 naming the limit, on an agent endpoint and the front door', async () => {
    for (const [i, depth] of DEPTHS.entries()) {
      for (const path of [`/agents/${echo.id}/a2a`, '/a2a']) {
        const r = await post(path, sendMessageWith(deep(depth, i)));
        assert.equal(r.status, 200, r.text);
        assert.equal(r.json.error.code, -32600, `${path} at ${depth}: ${r.text.slice(0, 300)}`);
        assert.match(r.json.error.message, TOO_DEEP);
      }
    }
    await stillServes();
  });

  test('data nested within the limit still makes a task (through the agent, PostgreSQL and Temporal)', async () => {
    // The envelope's 6 levels ({…, params:{message:{parts:[{data:{x:…}}]}}}) and 94 of data: 100. The agent's
    // answer carries the message again, deeper (its task's history): read to the agent's limit.
    const r = await post(`/agents/${echo.id}/a2a`, sendMessageWith(deepJson(MAX_JSON_DEPTH - 6)));
    assert.equal(r.json.result?.task?.status?.state, 'TASK_STATE_COMPLETED', r.text.slice(0, 300));
    const over = await post(`/agents/${echo.id}/a2a`, sendMessageWith(deepJson(MAX_JSON_DEPTH - 5)));
    assert.equal(over.json.error?.code, -32600, 'one level more is refused');
  });

  test('a body that is not UTF-8 is -32700; one over 1 MiB is 413', async () => {
    const r = await post(`/agents/${echo.id}/a2a`, sendMessageWithText(Buffer.concat([Buffer.from('caf'), NOT_UTF8])));
    assert.equal(r.status, 200);
    assert.equal(r.json.error.code, -32700);
    assert.match(r.json.error.message, /not valid UTF-8/);
    const big = await post(`/agents/${echo.id}/a2a`, sendMessageWith(`"${'x'.repeat(1024 * 1024)}"`));
    assert.equal(big.status, 413);
    assert.equal(big.json.error.code, -32059, 'BodyTooLarge, in the JSON-RPC form on a JSON-RPC endpoint');
    await stillServes();
  });

  test('a NANDA action whose JSON (in the text part) is nested deep: -32602 naming the limit', async () => {
    for (const depth of DEPTHS) {
      const action = `{"action":"reputation","agent_id":${deepJson(depth)}}`;
      const r = await post('/a2a', sendMessageWithText(Buffer.from(JSON.stringify(action).slice(1, -1))));
      assert.equal(r.json.error?.code, -32602, r.text.slice(0, 300));
      assert.match(r.json.error.message, TOO_DEEP);
    }
    await stillServes();
  });
});

describe('REST, NEXUS, Genesis, registration', () => {
  test('REST (HTTP+JSON): 400 INVALID_ARGUMENT naming the limit; not UTF-8 400; over 1 MiB 413', async () => {
    const body = (data: string) => `{"message":{"messageId":"${randomUUID()}","role":"ROLE_USER","parts":[{"data":{"x":${data}}}]}}`;
    for (const [i, depth] of DEPTHS.entries()) {
      const r = await post(`/agents/${echo.id}/rest/message:send`, body(deep(depth, i)));
      assert.equal(r.status, 400, r.text.slice(0, 300));
      assert.equal(r.json.error.status, 'INVALID_ARGUMENT');
      assert.match(r.json.error.message, TOO_DEEP);
    }
    const bad = await post(`/agents/${echo.id}/rest/message:send`, Buffer.concat([Buffer.from(body('"caf')), NOT_UTF8, Buffer.from('"')]).subarray(0));
    assert.equal(bad.status, 400, bad.text);
    assert.match(bad.json.error.message, /not valid UTF-8/);
    const big = await post(`/agents/${echo.id}/rest/message:send`, body(`"${'x'.repeat(1024 * 1024)}"`));
    assert.equal(big.status, 413);
    await stillServes();
  });

  test('NEXUS (POST /api/v1/tasks): 400 naming the limit; not UTF-8 400', async () => {
    for (const [i, depth] of DEPTHS.entries()) {
      const r = await post('/api/v1/tasks', `{"agentId":"${echo.id}","message":{"role":"user","parts":[{"type":"data","data":${deep(depth, i)}}]}}`);
      assert.equal(r.status, 400, r.text.slice(0, 300));
      assert.match(r.json.message ?? r.json.error, TOO_DEEP);
    }
    const bad = await post('/api/v1/tasks', Buffer.concat([Buffer.from(`{"agentId":"${echo.id}","message":{"parts":[{"type":"text","text":"`), NOT_UTF8, Buffer.from('"}]}}')]));
    assert.equal(bad.status, 400);
    assert.match(bad.json.message, /not valid UTF-8/);
    await stillServes();
  });

  test('Genesis: an envelope nested deep is 400; so is an encrypted one whose plaintext is', async () => {
    for (const [i, depth] of DEPTHS.entries()) {
      const r = await post('/genesis/messages', `{"id":"${randomUUID()}","type":"COMMAND","payload":{"parameters":${deep(depth, i)}}}`);
      assert.equal(r.status, 400, r.text.slice(0, 300));
      assert.match(r.json.message, TOO_DEEP);
    }
    // The ciphertext passes the body's check; the plaintext is checked when decrypted.
    const sender = echo.id;
    const worker = (await register(gw, (await agents.add(startEchoAgent())).url)).id;
    const issued = await post(`/agents/${sender}/genesis-secret`, '', { key: gw.keys.operator, contentType: 'text/plain' });
    assert.equal(issued.status, 201, issued.text);
    const key = pairKey(issued.json.secret, sender, worker);
    for (const depth of DEPTHS) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      const ciphertext = Buffer.concat([cipher.update(`{"action":"plan","payload":{"parameters":${deepJson(depth)}}}`), cipher.final()]);
      const clear = { id: randomUUID(), type: 'COMMAND', version: '1.0.0', timestamp: Date.now(), from: sender, to: worker, priority: 'normal', ttl: 60_000, requiresAck: false, requiresSignature: true };
      const envelope = {
        ...clear,
        signature: signEnvelope(clear, issued.json.secret),
        encryption: { algorithm: 'AES-256-GCM', iv: iv.toString('base64'), ciphertext: ciphertext.toString('base64'), authTag: cipher.getAuthTag().toString('base64') },
      };
      const r = await post('/genesis/messages', JSON.stringify(envelope));
      assert.equal(r.status, 400, r.text.slice(0, 300));
      assert.match(r.json.error, /plaintext is not read/);
      assert.match(r.json.error, TOO_DEEP);
    }
    await stillServes();
  });

  test('registration: a body nested deep is 400; a card nested deep is 422 naming the problem', async () => {
    for (const [i, depth] of DEPTHS.entries()) {
      const r = await post('/agents', `{"url":"http://127.0.0.1:1","tags":${deep(depth, i)}}`, { key: gw.keys.operator });
      assert.equal(r.status, 400, r.text.slice(0, 300));
      assert.match(r.json.message, TOO_DEEP);
    }
    for (const depth of DEPTHS) {
      const url = await rawServer('application/json', () => `{"name":"deep card","description":"d","version":"1","supportedInterfaces":[{"url":"http://127.0.0.1:1","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"capabilities":{},"defaultInputModes":[],"defaultOutputModes":[],"skills":[],"x":${deepJson(depth)}}`);
      const r = await post('/agents', JSON.stringify({ url }), { key: gw.keys.operator });
      assert.equal(r.status, 422, r.text.slice(0, 300));
      assert.match(r.json.error, /no agent card could be fetched/);
      assert.match(r.json.error, AGENT_TOO_DEEP);
    }
    await stillServes();
  });
});

describe('agent pushes', () => {
  const tokens = new AgentPushTokens(parseKeyRing(TEST_SECRETS_KEY));
  const push = (id: string, body: string | Buffer) => post(`/agent-push/${id}`, body, { contentType: 'application/a2a+json', headers: { 'x-a2a-notification-token': tokens.issue(id, Date.now() + 60_000) } });

  test('a push nested deep is 400 naming the limit; not UTF-8 400; over 4 MiB 413', async () => {
    for (const [i, depth] of DEPTHS.entries()) {
      const r = await push('follow-1', `{"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"},"metadata":{"x":${deep(depth, i)}}}}`);
      assert.equal(r.status, 400, r.text.slice(0, 300));
      assert.match(r.json.error, AGENT_TOO_DEEP);
    }
    const bad = await push('follow-1', Buffer.concat([Buffer.from('{"statusUpdate":{"taskId":"'), NOT_UTF8, Buffer.from('"}}')]));
    assert.equal(bad.status, 400);
    assert.match(bad.json.error, /not valid UTF-8/);
    const big = await push('follow-1', `{"task":{"id":"${'x'.repeat(4 * 1024 * 1024)}"}}`);
    assert.equal(big.status, 413);
    await stillServes();
  });
});

/** A socket to GET /hub with an agent key, keeping the frames it gets and how it closed. */
async function hubSocket(key: string): Promise<{ ws: WebSocket; frames: any[]; closed: Promise<{ code: number; reason: string }> }> {
  const ws = new WebSocket(`${gw.url.replace(/^http/, 'ws')}/hub`, { headers: { authorization: `Bearer ${key}` } });
  const frames: any[] = [];
  ws.on('message', (data) => frames.push(JSON.parse(data.toString())));
  // A socket the hub should have closed and did not fails the test in seconds, not at the heartbeat timeout.
  const closed = new Promise<{ code: number; reason: string }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the hub did not close the socket; frames: ${JSON.stringify(frames).slice(0, 300)}`)), 15_000);
    ws.on('close', (code, reason) => (clearTimeout(timer), resolve({ code, reason: reason.toString() })));
  });
  closed.catch(() => ws.terminate());
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  return { ws, frames, closed };
}

describe('WebSocket hub', () => {
  let key: string;
  before(async () => {
    const reg = await post('/agents', JSON.stringify({ url: 'ws-agent://', name: 'hostile hub agent' }), { key: gw.keys.operator });
    assert.equal(reg.status, 201, reg.text);
    key = await agentKey(gw, reg.json.id);
  });

  test('a frame nested 3,000 / 20,000 / 100,000 deep: -32600 naming the limit, then close 1008', async () => {
    for (const [i, depth] of DEPTHS.entries()) {
      const s = await hubSocket(key);
      s.ws.send(`{"jsonrpc":"2.0","id":1,"method":"agent.register","params":{"card":{"name":"x","skills":[${deep(depth, i)}]}}}`);
      const closed = await s.closed;
      assert.equal(closed.code, 1008, JSON.stringify(closed));
      assert.match(closed.reason, AGENT_TOO_DEEP);
      assert.equal(s.frames[0]?.error?.code, -32600, JSON.stringify(s.frames));
      assert.match(s.frames[0].error.message, AGENT_TOO_DEEP);
    }
    // Within an agent's limit (deeper than a client's): read and answered.
    const ok = await hubSocket(key);
    ok.ws.send(`{"jsonrpc":"2.0","id":"beat","method":"heartbeat","params":{"x":${deepJson(MAX_AGENT_JSON_DEPTH - 3)}}}`);
    await eventually(() => ok.frames.find((f) => f.id === 'beat')?.result?.ok, 10_000, 'a heartbeat answer');
    ok.ws.close();
    await stillServes();
  });

  test('not UTF-8: 1007; over the frame cap: 1009; a flood past the rate: -32053, then 1008', async () => {
    const notUtf8 = await hubSocket(key);
    notUtf8.ws.send(Buffer.concat([Buffer.from('{"jsonrpc":"2.0","id":1,"method":"heartbeat","params":{"x":"'), NOT_UTF8, Buffer.from('"}}')]), { binary: false });
    assert.equal((await notUtf8.closed).code, 1007);
    const big = await hubSocket(key);
    big.ws.send(`{"jsonrpc":"2.0","id":1,"method":"heartbeat","params":{"pad":"${'x'.repeat(1024 * 1024)}"}}`);
    assert.equal((await big.closed).code, 1009);

    const flood = await hubSocket(key);
    for (let i = 0; i < FRAMES_PER_SECOND * 20; i++) flood.ws.send(JSON.stringify({ jsonrpc: '2.0', id: i, method: 'heartbeat', params: {} }));
    const closed = await flood.closed;
    assert.equal(closed.code, 1008, JSON.stringify(closed));
    assert.match(closed.reason, /too many frames/);
    assert.ok(flood.frames.some((f) => f.error?.code === -32053), 'refused before it was closed');
    // Another socket of the same agent is served.
    const again = await hubSocket(key);
    again.ws.send(JSON.stringify({ jsonrpc: '2.0', id: 'beat', method: 'heartbeat', params: {} }));
    await eventually(() => again.frames.find((f) => f.id === 'beat')?.result?.ok, 10_000, 'a heartbeat answer');
    again.ws.close();
    await stillServes();
  });
});

describe("agents' answers", () => {
  async function failsWith(mode: FaultMode, depth: number): Promise<void> {
    const agent = await agents.add(startFaultyAgent({ mode, times: 1, depth }));
    const { id } = await register(gw, agent.url);
    const c = await clientFactory(gw.keys.client).createFromUrl(`${gw.url}/agents/${id}/.well-known/agent-card.json`, '');
    const task = await sendText(c, 'answer deep');
    assert.equal(task.status.state, 'TASK_STATE_FAILED', JSON.stringify(task).slice(0, 500));
    const why = textOf(task.status.message?.parts);
    assert.match(why, /not a valid A2A response/, why);
    assert.match(why, AGENT_TOO_DEEP, why);
    assert.equal(agent.faults(), 1);
  }

  test('a JSON-RPC result nested deep fails the task as the agent\'s bad answer', async () => {
    for (const depth of DEPTHS) await failsWith('deep-result', depth);
    await stillServes();
  });

  test('an SSE event nested deep fails the task as the agent\'s bad answer', async () => {
    for (const depth of DEPTHS) await failsWith('sse-deep', depth);
    await stillServes();
  });

  test('a JWKS nested deep: the token cannot be checked (unavailable), nothing crashes', async () => {
    const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
    const jwk = JSON.stringify({ ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' });
    for (const depth of DEPTHS) {
      const url = await rawServer('application/json', () => `{"keys":[${jwk}],"x":${deepJson(depth)}}`);
      const verifier = new JwtVerifier({ jwksUrl: `${url}/jwks.json`, issuer: 'https://idp.test', audience: 'switchboard', fetch: gw.outbound.fetch, cooldownMs: 0 });
      const token = await new SignJWT({ switchboard_role: 'client', switchboard_tenant: 'default' })
        .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
        .setIssuer('https://idp.test')
        .setAudience('switchboard')
        .setSubject('someone')
        .setExpirationTime('5m')
        .sign(privateKey);
      await assert.rejects(verifier.verify(token), (err: unknown) => err instanceof JwtError && err.kind === 'unavailable');
    }
    await stillServes();
  });
});

describe('last resort', () => {
  test('an event-hub listener that throws on a NOTIFY is logged; the other listeners hear it, the process goes on', async () => {
    const hub = new EventHub({ connection: { connectionString: DATABASE_URL } });
    await hub.start();
    try {
      const heard: string[] = [];
      const offThrowing = hub.onAgentPush('f1', () => {
        throw new RangeError('Maximum call stack size exceeded');
      });
      const offHearing = hub.onAgentPush('f1', (n) => heard.push(n.taskId));
      const pg = new PgClient({ connectionString: DATABASE_URL });
      await pg.connect();
      await pg.query(`SELECT pg_notify('switchboard_agent_push', $1)`, [JSON.stringify({ id: 'f1', taskId: 't1' })]);
      await pg.end();
      await eventually(() => heard.includes('t1'), 10_000, 'the second listener hearing the NOTIFY');
      offThrowing();
      offHearing();
    } finally {
      await hub.close();
    }
    await stillServes();
  });
});
