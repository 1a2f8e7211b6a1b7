/**
 * Hostile load (issue 46): what one client can make the gateway hold, and what one tenant's settings or fields can
 * break for the others. Slow bodies without a key (a 401, then the socket closed at once), slow bodies with one,
 * silent sockets and half-sent headers (closed at the request and headers timeouts), connections past the
 * per-address cap (closed at once, while other addresses are served), and answers that take longer than the request
 * timeout (an SSE stream, a blocking send), which must not be cut. Real sockets on loopback (127.0.0.x, so that a
 * test has addresses of its own), one gateway (Temporal dev server, PostgreSQL), real A2A agents.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import net from 'node:net';
import type { Client as A2AClient } from '@a2a-js/sdk/client';
import { AgentPool, startEchoAgent, startSlowAgent } from './agents';
import { type Gateway, clientFactory, eventually, register, rpc, sendText, startGateway } from './helpers/harness';
import { sse } from './helpers/sse';
import { signEnvelope } from '../src/core/genesis/envelope';

/** Short enough to wait for in a test, long enough to tell a close at once from a close at the timeout. */
const REQUEST_TIMEOUT_MS = 5_000;
const MAX_PER_ADDRESS = 400;

let gw: Gateway;
const agents = new AgentPool();
let client: A2AClient;
let port: number;
let echo: { id: string; rpc: string };
let echoUrl: string;
/** Every raw socket a test opened, ended after the tests whatever became of them. */
const opened: Raw[] = [];

before(async () => {
  gw = await startGateway({ connections: { requestTimeoutMs: REQUEST_TIMEOUT_MS, maxPerAddress: MAX_PER_ADDRESS } });
  port = Number(new URL(gw.url).port);
  echoUrl = (await agents.add(startEchoAgent())).url;
  echo = await register(gw, echoUrl);
  client = await clientFactory(gw.keys.client).createFromUrl(`${gw.url}/agents/${echo.id}/.well-known/agent-card.json`, '');
});

after(async () => {
  for (const r of opened) r.stop();
  await agents.closeAll();
  await gw?.close();
});

/** A raw socket to the gateway, and what it saw: the bytes it received, when the gateway closed it. */
interface Raw {
  socket: net.Socket;
  received: string;
  /** When it connected (ms since the epoch); undefined until then. */
  connectedAt?: number;
  /** When it closed, by either side. */
  closedAt?: number;
  stop(): void;
}

/**
 * Opens a socket from `from` (a loopback address) and writes `head`, then drips `drip` every second (nothing when
 * undefined) until the socket closes.
 */
function openRaw(from: string, head: string, drip?: string): Promise<Raw> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port, localAddress: from });
    let timer: NodeJS.Timeout | undefined;
    const raw: Raw = {
      socket,
      received: '',
      stop: () => {
        clearInterval(timer);
        socket.destroy();
      },
    };
    opened.push(raw);
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => (raw.received += d));
    socket.on('error', () => undefined); // a reset is one way of being closed
    socket.on('close', () => {
      clearInterval(timer);
      raw.closedAt ??= Date.now();
      resolve(raw);
    });
    socket.on('connect', () => {
      raw.connectedAt = Date.now();
      if (head) socket.write(head);
      if (drip !== undefined) timer = setInterval(() => socket.writable && socket.write(drip), 1_000);
      resolve(raw);
    });
  });
}

/** Opens `n` raw sockets, a batch of 50 at a time (a burst of SYNs would overflow the listen backlog). */
async function openMany(n: number, from: string, head: string, drip?: string): Promise<Raw[]> {
  const all: Raw[] = [];
  for (let i = 0; i < n; i += 50) all.push(...(await Promise.all(Array.from({ length: Math.min(50, n - i) }, () => openRaw(from, head, drip)))));
  return all;
}

const slowBody = (path: string, headers: Record<string, string> = {}) =>
  `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n${Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}\r\n{`;

const openCount = (raws: Raw[]) => raws.filter((r) => r.closedAt === undefined).length;

/** The gateway serves: its health probe answers, from an address none of the test's sockets use. */
async function probeAnswers(): Promise<void> {
  const res = await fetch(`${gw.url}/healthz`);
  assert.equal(res.status, 200);
}

describe('slow and silent connections', () => {
  test('300 slow bodies without a key: each gets its 401 and is closed at once, not at the timeout; the process serves on', { timeout: 60_000 }, async () => {
    const raws = await openMany(300, '127.0.0.1', slowBody('/a2a'), ' ');
    const opened = Date.now();
    await probeAnswers();
    await eventually(() => (openCount(raws) === 0 ? true : undefined), REQUEST_TIMEOUT_MS + 5_000, () => `all closed (${openCount(raws)} of 300 still open)`);
    const slowest = Math.max(...raws.map((r) => r.closedAt! - r.connectedAt!));
    assert.ok(Date.now() - opened < REQUEST_TIMEOUT_MS, `closed when refused, not by the request timeout (the slowest was held ${slowest} ms)`);
    for (const r of raws) assert.match(r.received, /^HTTP\/1\.1 401 [^]*\r\nconnection: close\r\n/i);
    await stillServes();
  });

  test('a slow body with a valid key, a silent socket, half-sent headers: all closed by the timeouts', { timeout: 60_000 }, async () => {
    const started = Date.now();
    const keyed = await openMany(20, '127.0.0.2', slowBody('/a2a', { authorization: `Bearer ${gw.keys.client}` }), ' ');
    const silent = await openMany(20, '127.0.0.2', '');
    const halfHeaders = await openMany(20, '127.0.0.2', 'POST /a2a HTTP/1.1\r\nHost: 127.0.0.1\r\n', 'X-Drip: 1\r\n');
    const all = [...keyed, ...silent, ...halfHeaders];
    await new Promise((r) => setTimeout(r, REQUEST_TIMEOUT_MS - 1_500));
    assert.equal(openCount(keyed), 20, 'a client sending its body is given the request timeout');
    await probeAnswers();
    await eventually(() => (openCount(all) === 0 ? true : undefined), 10_000, () => `all closed (${openCount(all)} of ${all.length} still open)`);
    assert.ok(Date.now() - started < REQUEST_TIMEOUT_MS + 5_000, 'within the timeout and a check interval or two');
    for (const r of keyed) assert.match(r.received, /^HTTP\/1\.1 408 /, 'the keyed slow body is told its request timed out');
  });

  test(`past ${MAX_PER_ADDRESS} connections from one address, new ones are closed at once; other addresses are served`, { timeout: 60_000 }, async () => {
    const held = await openMany(MAX_PER_ADDRESS + 20, '127.0.0.3', '');
    await eventually(() => (openCount(held) === MAX_PER_ADDRESS ? true : undefined), 2_000, () => `${MAX_PER_ADDRESS} left open (${openCount(held)} are)`);
    const refused = held.filter((r) => r.closedAt !== undefined);
    for (const r of refused) assert.ok(r.closedAt! - r.connectedAt! < 1_000 && r.received === '', 'closed at once, unanswered');
    const more = await openRaw('127.0.0.3', 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    await eventually(() => (more.closedAt !== undefined ? true : undefined), 2_000, 'the next connection from that address closed');
    assert.equal(more.received, '');
    await probeAnswers();
    await eventually(() => (openCount(held) === 0 ? true : undefined), REQUEST_TIMEOUT_MS + 5_000, 'the held ones closed at the headers timeout');
    // The address has its connections back.
    const again = await openRaw('127.0.0.3', 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n');
    await eventually(() => (again.closedAt !== undefined ? true : undefined), 5_000, 'the answer');
    assert.match(again.received, /^HTTP\/1\.1 200 /);
  });

  test('answers that take longer than the request timeout are not cut: an SSE stream and a blocking send', { timeout: 60_000 }, async () => {
    const slow = await register(gw, (await agents.add(startSlowAgent({ ms: REQUEST_TIMEOUT_MS + 2_000 }))).url);
    const message = () => ({ messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'take your time' }] });
    const [stream, blocking] = await Promise.all([
      sse(slow.rpc, { method: 'SendStreamingMessage', params: { message: message() } }),
      rpc(slow.rpc, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: message() } }, { 'A2A-Version': '1.0' }),
    ]);
    assert.equal(stream.ended, true);
    const last = stream.events.at(-1)?.data?.result;
    assert.equal((last?.statusUpdate ?? last?.task)?.status?.state, 'TASK_STATE_COMPLETED', JSON.stringify(stream.events.at(-1)));
    assert.equal(blocking.json?.result?.task?.status?.state, 'TASK_STATE_COMPLETED', blocking.text);
  });
});

describe('a NUL character (U+0000)', () => {
  /** A request as `role`, with a JSON body. */
  const call = async (method: string, path: string, role: 'admin' | 'operator' | 'client', body?: unknown) => {
    const res = await gw.fetch(`${gw.url}${path}`, { method, ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }) }, role);
    const text = await res.text();
    return { status: res.status, text, json: JSON.parse(text || 'null') as any };
  };

  test('in a management or Genesis field is a 400 naming the field, never a 500', { timeout: 60_000 }, async () => {
    const issued = await call('POST', `/agents/${echo.id}/genesis-secret`, 'operator');
    assert.equal(issued.status, 201, issued.text);
    const worker = (await register(gw, echoUrl)).id;
    const signed = (m: Record<string, unknown>) => ({ ...m, signature: signEnvelope(m as Parameters<typeof signEnvelope>[0], issued.json.secret) });
    const header = () => ({ id: randomUUID(), version: '1.0.0', timestamp: Date.now(), from: echo.id, to: worker, priority: 'normal', ttl: 60_000, requiresAck: false, requiresSignature: true });
    const command = (extra: Record<string, unknown>) => signed({ ...header(), type: 'COMMAND', action: 'plan', payload: { parameters: { n: 1 } }, ...extra });
    const event = (extra: Record<string, unknown>) =>
      signed({ ...header(), type: 'EVENT', to: '*', eventType: 'orders', eventName: 'order.created', payload: { data: { n: 1 }, metadata: { schemaVersion: '1.0', contentType: 'application/json' } }, deliveryGuarantee: 'at-most-once', ...extra });
    const tries: [string, Promise<{ status: number; text: string; json: any }>][] = [
      ['name', call('POST', '/tenants', 'admin', { id: 'nul-tenant', name: 'Acme\u0000' })],
      ['name', call('POST', '/tenants/default/keys', 'admin', { role: 'client', name: 'key\u0000' })],
      ['name', call('POST', '/tenants/default/enrollment-tokens', 'operator', { name: 'token\u0000' })],
      ['name', call('POST', '/agents', 'operator', { url: echoUrl, name: 'Billing\u0000' })],
      ['url', call('POST', '/agents', 'operator', { url: `${echoUrl}/\u0000` })],
      ['idempotencyKey', call('POST', '/accounts/requester:nul-test/deposits', 'admin', { amountMinor: 100, idempotencyKey: 'dep\u0000' })],
      ['idempotencyKey', call('POST', '/accounts/requester:nul-test/withdrawals', 'admin', { amountMinor: 1, idempotencyKey: 'wd\u0000' })],
      ['eventType', call('POST', '/genesis/subscriptions', 'operator', { agentId: echo.id, eventType: 'orders\u0000', url: 'https://hooks.example/x' })],
      ['id', call('POST', '/genesis/messages', 'client', command({ id: `${randomUUID()}\u0000` }))],
      ['payload.parameters.n', call('POST', '/genesis/messages', 'client', command({ payload: { parameters: { n: 'one\u0000' } } }))],
      ['eventType', call('POST', '/genesis/messages', 'client', event({ eventType: 'orders\u0000' }))],
      ['payload.data.n', call('POST', '/genesis/messages', 'client', event({ payload: { data: { n: 'one\u0000' }, metadata: { schemaVersion: '1.0', contentType: 'application/json' } } }))],
      ['id', call('GET', `/agents/${encodeURIComponent('x\u0000')}`, 'operator')],
    ];
    const got = await Promise.all(tries.map(async ([field, r]) => ({ field, ...(await r) })));
    for (const a of got) {
      assert.equal(a.status, 400, `${a.field}: ${a.status} ${a.text}`);
      assert.match(a.json.error, new RegExp(`${a.field.replace(/\./g, '\\.')} contains a NUL character`), a.text);
    }
    await stillServes();
  });
});

/** The gateway still serves a task. */
async function stillServes(): Promise<void> {
  const task = await sendText(client, 'still here?');
  assert.equal(task.status.state, 'TASK_STATE_COMPLETED');
}

describe('card-less registrations', () => {
  test('with "protocol": "0.1" or "genesis", a loopback, private or metadata URL is refused (422) as on every other path', { timeout: 60_000 }, async () => {
    // A second gateway on the same database and Temporal, refusing private addresses as in production.
    const strict = await startGateway({ db: gw.db, temporal: { env: gw.env, taskQueue: gw.taskQueue }, worker: false, allowPrivate: false, listen: false });
    try {
      for (const protocol of ['0.1', 'genesis', 'nexus']) {
        for (const url of ['http://127.0.0.1:8080/a2a', 'http://[::1]:8080/', 'http://10.0.0.1/agent', 'http://169.254.169.254/latest/meta-data/']) {
          const r = await strict.inject({ method: 'POST', url: '/agents', as: 'operator', body: { url, protocol, name: `Private ${protocol}` } });
          assert.equal(r.status, 422, `${protocol} ${url}: ${r.status} ${r.text}`);
          assert.match(r.json.error, /refusing to connect/, r.text);
        }
      }
      const { rows } = await gw.db.pool.query(`SELECT count(*)::int AS n FROM agents WHERE name LIKE 'Private %'`);
      assert.equal(rows[0].n, 0, 'nothing registered');
    } finally {
      await strict.close();
    }
  });
});

describe('a flooding tenant (fair admission, src/api/a2a/fair-gate.ts)', () => {
  test("beside another tenant a flood waits for places; the other tenant's send gets the next one, before the flood's queue", { timeout: 60_000 }, async () => {
    // A second gateway on the same database and Temporal, with one place for sends while tenants share it.
    const fair = await startGateway({ db: gw.db, temporal: { env: gw.env, taskQueue: gw.taskQueue }, worker: false, admission: { capacity: 1, holdMs: 60_000 } });
    try {
      const admin = async (path: string, body: unknown, key = fair.keys.admin) => {
        const res = await fetch(`${fair.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` }, body: JSON.stringify(body) });
        const text = await res.text();
        assert.equal(res.status, 201, `${path}: ${text}`);
        return JSON.parse(text) as Record<string, string>;
      };
      const tenant = `flood-${randomUUID().slice(0, 8)}`;
      await admin('/tenants', { id: tenant, name: 'Flooding tenant' });
      const operator = (await admin(`/tenants/${tenant}/keys`, { role: 'operator', name: 'operator' })).key!;
      const floodKey = (await admin(`/tenants/${tenant}/keys`, { role: 'client', name: 'client' })).key!;
      const slowUrl = (await agents.add(startSlowAgent({ ms: 1_500 }))).url;
      const slow = (await admin('/agents', { url: slowUrl }, operator)).id!;
      const flood = await clientFactory(floodKey).createFromUrl(`${fair.url}/agents/${slow}/.well-known/agent-card.json`, '');
      const light = await clientFactory(fair.keys.client).createFromUrl(`${fair.url}/agents/${echo.id}/.well-known/agent-card.json`, '');
      await sendText(light, 'here'); // the light tenant is about: the flood shares with it now
      const t0 = Date.now();
      const ended: Record<string, number> = {};
      const floods = [1, 2, 3].map((i) => sendText(flood, `flood ${i}`).then((t) => ((ended[`flood ${i}`] = Date.now() - t0), t)));
      await new Promise((r) => setTimeout(r, 200)); // the flood's first holds the one place; the others wait
      const mine = await sendText(light, 'mine');
      ended.light = Date.now() - t0;
      assert.equal(mine.status.state, 'TASK_STATE_COMPLETED');
      for (const t of await Promise.all(floods)) assert.equal(t.status.state, 'TASK_STATE_COMPLETED', 'the flood waited; none of it failed');
      const [first, ...rest] = ['flood 1', 'flood 2', 'flood 3'].map((k) => ended[k]!).sort((a, b) => a - b);
      // The flood's first held the place; when it gave it back, the light send (none held) got it before the flood's
      // two queued earlier, which ran after it (each takes 1.5 s at the agent), not beside the first.
      assert.ok(first! < ended.light! && rest.every((t) => ended.light! < t), `the light send came next: ${JSON.stringify(ended)}`);
      assert.ok(rest.every((t) => t - first! >= 1_000), `the flood waited for its place: ${JSON.stringify(ended)}`);
    } finally {
      await fair.close();
    }
  });
});
