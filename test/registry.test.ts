// The agent registry's HTTP API (POST/GET/DELETE /agents), the checks a registration must pass (card shape,
// reachability, SSRF), and the card the gateway publishes for each agent — read by real @a2a-js/sdk clients.
// Run: npx tsx --test test/registry.test.ts
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import type { Task as Task03 } from 'a2a-sdk-03';
import { A2AClient as A2AClient03 } from 'a2a-sdk-03/client';
import { RPC_PATH, startEchoAgent, startLegacyAgent, type TestAgent } from './agents';
import { type Gateway, authFetch, eventually, keysFor, rpc, startGateway } from './helpers/harness';
import { GATEWAY_SECURITY } from '../src/core/agents/gateway-card';

// ---- a tiny card server: serves fixed documents at fixed paths and records every request ----

interface CardServer {
  url: string;
  requests: string[];
  close(): Promise<void>;
}

async function startCardServer(routes: (url: string) => Record<string, { body: string; type?: string; status?: number }>): Promise<CardServer> {
  const requests: string[] = [];
  let table: ReturnType<typeof routes> = {};
  const server = http.createServer((req, res) => {
    requests.push(req.url ?? '');
    const route = table[req.url ?? ''];
    if (!route) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
      return;
    }
    res.writeHead(route.status ?? 200, { 'content-type': route.type ?? 'application/json' }).end(route.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  table = routes(url);
  return {
    url,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** A URL on 127.0.0.1 where nothing listens: a port that was just bound and released. */
async function closedPortUrl(): Promise<string> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

const card03 = (url: string, name: string) => ({
  protocolVersion: '0.3.0',
  name,
  description: `${name} (0.3 card served only at agent.json)`,
  url: `${url}/rpc`,
  preferredTransport: 'JSONRPC',
  version: '0.3.0',
  capabilities: { streaming: false, pushNotifications: false },
  defaultInputModes: ['text/plain'],
  defaultOutputModes: ['text/plain'],
  skills: [{ id: 'old', name: 'Old', description: 'old skill', tags: [] }],
});

const card10 = (url: string, name: string, extra: Record<string, unknown> = {}) => ({
  name,
  description: `${name} description`,
  version: '2.0.0',
  supportedInterfaces: [{ url: `${url}/rpc`, protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
  capabilities: { streaming: true, pushNotifications: true, extendedAgentCard: true },
  defaultInputModes: ['text/plain'],
  defaultOutputModes: ['text/plain'],
  skills: [{ id: 's', name: 'Skill', description: 'a skill', tags: ['x'] }],
  ...extra,
});

// ---- fixtures ----

let gw: Gateway;
let strictGw: Gateway; // allowPrivate: false, like a production gateway
let echo: TestAgent;
let legacy: TestAgent;
let legacyNoStream: TestAgent;
let cards: CardServer;

before(async () => {
  [gw, strictGw, echo, legacy, legacyNoStream] = await Promise.all([
    startGateway(),
    startGateway({ allowPrivate: false }),
    startEchoAgent(),
    startLegacyAgent(),
    startLegacyAgent({ streaming: false }),
  ]);
  cards = await startCardServer((url) => ({
    '/.well-known/agent.json': { body: JSON.stringify(card03(url, 'Fallback')) },
    '/team/.well-known/agent-card.json': { body: JSON.stringify(card10(url, 'Team agent')) },
    '/signed.json': {
      body: JSON.stringify(
        card10(url, 'Signed', {
          signatures: [{ protected: 'eyJhbGciOiJFUzI1NiJ9', signature: 'c2lnbmF0dXJl' }],
          securitySchemes: { bearer: { httpAuthSecurityScheme: { scheme: 'Bearer' } } },
          securityRequirements: [{ schemes: { bearer: { list: [] } } }],
        }),
      ),
    },
    '/not-json.json': { body: '{"name": "Broken", "supportedInterfaces": [' },
    '/html.json': { body: '<html><body>Welcome</body></html>', type: 'text/html' },
    '/no-name.json': { body: JSON.stringify({ description: 'nameless', url: `${url}/rpc` }) },
    '/no-interface.json': { body: JSON.stringify({ name: 'Nowhere', description: 'no url, no interfaces', skills: [] }) },
    '/empty-interfaces.json': { body: JSON.stringify(card10(url, 'Empty', { supportedInterfaces: [] })) },
    '/array.json': { body: JSON.stringify([card10(url, 'In an array')]) },
    '/grpc.json': { body: JSON.stringify(card10(url, 'Grpc only', { supportedInterfaces: [{ url: 'grpc.example.com:443', protocolBinding: 'GRPC', protocolVersion: '1.0' }] })) },
    '/websocket.json': { body: JSON.stringify(card10(url, 'Socket only', { supportedInterfaces: [{ url: 'wss://socket.example.com/a2a', protocolBinding: 'WEBSOCKET', protocolVersion: '1.0' }] })) },
    '/grpc-03.json': { body: JSON.stringify({ ...card03(url, 'Grpc 0.3'), preferredTransport: 'GRPC', url: 'grpc://grpc.example.com:50051' }) },
    '/grpc-path.json': { body: JSON.stringify({ ...card03(url, 'Grpc path'), preferredTransport: 'GRPC' }) },
    '/v01.json': { body: JSON.stringify({ ...card03(url, 'Ancient'), protocolVersion: '0.1.0' }) },
    '/bad-url.json': { body: JSON.stringify(card10(url, 'Bad URL', { supportedInterfaces: [{ url: 'file:///etc/passwd', protocolBinding: 'JSONRPC', protocolVersion: '1.0' }] })) },
    '/gone.json': { body: JSON.stringify({ error: 'gone' }), status: 410 },
    '/nul.json': { body: JSON.stringify(card10(url, 'Nul', { description: 'a \u0000 inside' })) },
  }));
});

after(async () => {
  await Promise.all([gw?.close(), strictGw?.close()]);
  await Promise.all([echo?.close(), legacy?.close(), legacyNoStream?.close(), cards?.close()]);
});

// ---- helpers ----

async function post(g: Gateway, body: unknown) {
  const res = await fetch(`${g.url}/agents`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${g.keys.operator}` },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, text };
}

/** GET as the operator of the gateway at `url`. */
async function get(url: string, headers: Record<string, string> = {}) {
  const res = await fetch(url, { headers: { authorization: `Bearer ${keysFor(url)?.operator}`, ...headers } });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}

/**
 * Registers, as a new agent: the tests here register the same agents again and again (a tenant registers a URL
 * once, migration 034), so an earlier test's registration of the URL is deleted first (409 names it).
 */
async function registered(g: Gateway, body: Record<string, unknown>) {
  let res = await post(g, body);
  if (res.status === 409 && res.body?.conflict === 'url') {
    assert.equal((await g.fetch(`${g.url}/agents/${res.body.agentId}`, { method: 'DELETE' }, 'operator')).status, 204);
    res = await post(g, body);
  }
  assert.equal(res.status, 201, res.text);
  return res.body;
}

async function agentCount(g: Gateway): Promise<number> {
  return (await get(`${g.url}/agents`)).body.agents.length;
}

/** A registration that must fail with `status` and an error message matching every pattern; nothing is stored. */
async function refused(g: Gateway, body: unknown, status: number, ...patterns: RegExp[]): Promise<string> {
  const before = await agentCount(g);
  const res = await post(g, body);
  assert.equal(res.status, status, res.text);
  // The API's own errors are {error}; fastify's body parser answers {error: 'Bad Request', message}.
  const message = [res.body?.error, res.body?.message].filter((m) => typeof m === 'string').join(': ');
  assert.ok(message.length > 0, `an error message is expected: ${res.text}`);
  for (const p of patterns) assert.match(message, p);
  assert.equal(await agentCount(g), before, 'a refused registration stores nothing');
  return message;
}

// ---- tests ----

describe('POST /agents', () => {
  it('registers the echo agent by base URL: 201 with id, name, its card and a 1.0 endpoint', async () => {
    const a = await registered(gw, { url: echo.url });
    assert.match(a.id, /^echo-[0-9a-f]{12}$/);
    assert.equal(a.name, 'Echo');
    assert.equal(a.url, echo.url);
    assert.equal(a.cardUrl, `${echo.url}/.well-known/agent-card.json`);
    assert.deepEqual(a.card, echo.card, 'the stored card is the agent card as served');
    assert.deepEqual(a.endpoint, { url: `${echo.url}${RPC_PATH}`, protocolVersion: '1.0', streaming: true, binding: 'JSONRPC' });
    assert.deepEqual(a.gateway, {
      card: `${gw.url}/agents/${a.id}/.well-known/agent-card.json`,
      jsonRpc: `${gw.url}/agents/${a.id}/a2a`,
      rest: `${gw.url}/agents/${a.id}/rest`,
    });
    assert.equal(a.priceMinor, 0);
    assert.ok(!Number.isNaN(Date.parse(a.createdAt)));
  });

  it('registers by a direct card URL', async () => {
    const cardUrl = `${echo.url}/.well-known/agent-card.json`;
    const a = await registered(gw, { url: cardUrl });
    assert.equal(a.cardUrl, cardUrl);
    assert.equal(a.endpoint.protocolVersion, '1.0');
    assert.equal(a.endpoint.url, `${echo.url}${RPC_PATH}`);
  });

  it('registers the legacy agent: a 0.3 card and a 0.3 endpoint', async () => {
    const a = await registered(gw, { url: legacy.url });
    assert.equal(a.name, 'Legacy echo');
    assert.equal(a.card.protocolVersion, '0.3.0');
    assert.deepEqual(a.endpoint, { url: `${legacy.url}${RPC_PATH}`, protocolVersion: '0.3', streaming: true, binding: 'JSONRPC' });
  });

  it('falls back to /.well-known/agent.json when agent-card.json is missing', async () => {
    const seen = cards.requests.length;
    const a = await registered(gw, { url: cards.url });
    assert.equal(a.name, 'Fallback');
    assert.equal(a.cardUrl, `${cards.url}/.well-known/agent.json`);
    assert.deepEqual(a.endpoint, { url: `${cards.url}/rpc`, protocolVersion: '0.3', streaming: false, binding: 'JSONRPC' });
    assert.deepEqual(cards.requests.slice(seen), ['/.well-known/agent-card.json', '/.well-known/agent.json'], 'agent-card.json first, then agent.json');
  });

  it('looks for the well-known card under the base URL path', async () => {
    const a = await registered(gw, { url: `${cards.url}/team/` });
    assert.equal(a.cardUrl, `${cards.url}/team/.well-known/agent-card.json`);
    assert.equal(a.name, 'Team agent');
  });

  it('takes name, priceMinor and retry from the body', async () => {
    const a = await registered(gw, { url: echo.url, name: 'My Echo!', priceMinor: 250, retry: { maxAttempts: 5 } });
    assert.equal(a.name, 'My Echo!');
    assert.match(a.id, /^my-echo-[0-9a-f]{12}$/);
    assert.equal(a.priceMinor, 250);
    assert.equal(a.retry.maxAttempts, 5);
    assert.equal(typeof a.retry.initialIntervalMs, 'number', 'unset retry fields keep their defaults');
  });
});

describe('GET and DELETE /agents', () => {
  it('GET /agents lists registrations; GET /agents/:id returns the same view; DELETE → 204, then 404 everywhere', async () => {
    const a = await registered(gw, { url: echo.url, name: 'Short lived' });
    const b = await registered(gw, { url: legacy.url, name: 'Also listed' });

    const list = await get(`${gw.url}/agents`);
    assert.equal(list.status, 200);
    const ids = list.body.agents.map((x: { id: string }) => x.id);
    assert.ok(ids.includes(a.id) && ids.includes(b.id), JSON.stringify(ids));
    assert.deepEqual(
      list.body.agents.find((x: { id: string }) => x.id === a.id),
      a,
    );

    const one = await get(`${gw.url}/agents/${a.id}`);
    assert.equal(one.status, 200);
    assert.deepEqual(one.body, a);

    const del = await gw.fetch(`${gw.url}/agents/${a.id}`, { method: 'DELETE' }, 'operator');
    assert.equal(del.status, 204);
    assert.equal(await del.text(), '');

    const gone = await get(`${gw.url}/agents/${a.id}`);
    assert.equal(gone.status, 404);
    assert.match(gone.body.error, new RegExp(a.id));
    assert.equal((await gw.fetch(`${gw.url}/agents/${a.id}`, { method: 'DELETE' }, 'operator')).status, 404, 'a second DELETE is 404');
    assert.equal((await get(`${gw.url}/agents/${a.id}/.well-known/agent-card.json`)).status, 404);
    const call = await rpc(`${gw.url}/agents/${a.id}/a2a`, { jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: 'x' } }, { 'A2A-Version': '1.0' });
    assert.equal(call.status, 404);
    assert.equal(call.json.jsonrpc, '2.0');

    const after = (await get(`${gw.url}/agents`)).body.agents.map((x: { id: string }) => x.id);
    assert.ok(!after.includes(a.id));
    assert.ok(after.includes(b.id), 'other agents stay');
  });

  it('GET /agents/:id of an unknown id is 404', async () => {
    const res = await get(`${gw.url}/agents/nobody-000000`);
    assert.equal(res.status, 404);
    assert.equal(typeof res.body.error, 'string');
  });
});

describe('registration errors', () => {
  it('invalid bodies: 400 with a message naming the field', async () => {
    await refused(gw, {}, 400, /url/);
    await refused(gw, { url: 'not a url' }, 400, /url/);
    await refused(gw, { url: 'ftp://example.com/agent' }, 400, /url/);
    await refused(gw, { url: echo.url, priceMinor: -1 }, 400, /priceMinor/);
    await refused(gw, { url: echo.url, name: '' }, 400, /name/);
    await refused(gw, { url: echo.url, retry: { maxAttempts: 0 } }, 400, /maxAttempts/);
    await refused(gw, { url: echo.url, retry: { bogus: 1 } }, 400, /bogus/);
    await refused(gw, [echo.url], 400);
    await refused(gw, '{"url": ', 400, /JSON/);
  });

  it('an unreachable URL (a closed port on 127.0.0.1): 422 naming the URL and the failure', async () => {
    const url = await closedPortUrl();
    await refused(gw, { url }, 422, new RegExp(url.replace(/\./g, '\\.')), /ECONNREFUSED/);
  });

  it('no card at either well-known path: 422 naming the HTTP status', async () => {
    await refused(gw, { url: `${cards.url}/nothing-here/` }, 422, /HTTP 404/, /agent-card\.json/, /agent\.json/);
  });

  it('a card URL answering 410: 422 naming the status', async () => {
    await refused(gw, { url: `${cards.url}/gone.json` }, 422, /HTTP 410/);
  });

  it('a URL serving invalid JSON or HTML: 422 naming the card URL and that it is not a JSON object', async () => {
    await refused(gw, { url: `${cards.url}/not-json.json` }, 422, /not-json\.json/, /JSON/);
    await refused(gw, { url: `${cards.url}/html.json` }, 422, /html\.json/, /JSON/);
    await refused(gw, { url: `${cards.url}/array.json` }, 422, /array\.json/, /JSON object/);
  });

  it('invalid cards: 422 naming the problem', async () => {
    await refused(gw, { url: `${cards.url}/no-name.json` }, 422, /no-name\.json/, /name/);
    await refused(gw, { url: `${cards.url}/no-interface.json` }, 422, /supportedInterfaces|url/);
    await refused(gw, { url: `${cards.url}/empty-interfaces.json` }, 422, /supportedInterfaces/);
    await refused(gw, { url: `${cards.url}/bad-url.json` }, 422, /file:/);
    await refused(gw, { url: `${cards.url}/nul.json` }, 422, /NUL character/, /description/);
  });

  it('a card declaring 0.1.0 registers in the 0.1 dialect (tasks/send; issue 11)', async () => {
    const v01 = await registered(gw, { url: `${cards.url}/v01.json` });
    assert.equal(v01.endpoint.protocolVersion, '0.1');
    assert.equal(v01.endpoint.binding, 'JSONRPC');
  });

  it('a card with only a gRPC interface registers over gRPC (1.0 and 0.3 shapes); one with no binding Switchboard speaks: 422', async () => {
    const v1 = await registered(gw, { url: `${cards.url}/grpc.json` });
    assert.deepEqual(v1.endpoint, { url: 'grpc.example.com:443', protocolVersion: '1.0', streaming: true, binding: 'GRPC' });
    const v03 = await registered(gw, { url: `${cards.url}/grpc-03.json` });
    assert.equal(v03.endpoint.binding, 'GRPC');
    assert.equal(v03.endpoint.protocolVersion, '0.3');
    await refused(gw, { url: `${cards.url}/websocket.json` }, 422, /JSONRPC, HTTP\+JSON, GRPC/);
    // gRPC has no path prefix: a URL with one would be called without it.
    await refused(gw, { url: `${cards.url}/grpc-path.json` }, 422, /GRPC interface URL .*\/rpc.* no path/);
  });

  it('SSRF: a gateway that refuses private addresses refuses a 127.0.0.1 agent URL with 422, and never connects', async () => {
    const seen = cards.requests.length;
    const message = await refused(strictGw, { url: cards.url }, 422, /127\.0\.0\.1/, /refus/);
    assert.match(message, /private|loopback/);
    assert.equal(cards.requests.length, seen, 'the refused address was never contacted');
    await refused(strictGw, { url: `${echo.url}/.well-known/agent-card.json` }, 422, /127\.0\.0\.1/, /refus/);
    await refused(strictGw, { url: 'http://[::1]:8080/' }, 422, /::1/, /refus/);
    await refused(strictGw, { url: 'http://169.254.169.254/latest/meta-data/' }, 422, /169\.254\.169\.254/, /refus/);
  });
});

describe('the card the gateway publishes', () => {
  let echoAgent: { id: string };
  let rpcUrl: string;
  before(async () => {
    echoAgent = await registered(gw, { url: echo.url });
    rpcUrl = `${gw.url}/agents/${echoAgent.id}/a2a`;
  });

  /** The fields of the 1.0 AgentCard schema (the TCK validates the card against it: nothing else may be there). */
  const V1_CARD_FIELDS = [
    'capabilities', 'defaultInputModes', 'defaultOutputModes', 'description', 'documentationUrl', 'iconUrl', 'name', 'provider',
    'securityRequirements', 'securitySchemes', 'signatures', 'skills', 'supportedInterfaces', 'version',
  ];

  const v1 = { 'A2A-Version': '1.0' };
  const interfaces = () => [
    { url: rpcUrl, protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
    { url: rpcUrl, protocolBinding: 'JSONRPC', protocolVersion: '0.3' },
    { url: rpcUrl.replace(/\/a2a$/, '/rest'), protocolBinding: 'HTTP+JSON', protocolVersion: '1.0' },
  ];

  it('a 1.0 reader (A2A-Version 1.0, header or query) gets a 1.0 card (nothing of 0.3 in it), 0.3 JSON-RPC among its interfaces', async () => {
    const cardUrl = `${gw.url}/agents/${echoAgent.id}/.well-known/agent-card.json`;
    const byHeader = await get(cardUrl, v1);
    const byQuery = await get(`${cardUrl}?A2A-Version=1.0`);
    const atAgentJson = await get(`${gw.url}/agents/${echoAgent.id}/.well-known/agent.json`, v1);
    for (const a of [byHeader, byQuery, atAgentJson]) {
      assert.equal(a.status, 200);
      assert.match(a.headers.get('cache-control') ?? '', /max-age=\d+/);
      const card = a.body;
      assert.deepEqual(Object.keys(card).filter((k) => !V1_CARD_FIELDS.includes(k)), [], 'only 1.0 fields');
      assert.deepEqual(Object.keys(card.capabilities).sort(), ['extendedAgentCard', 'pushNotifications', 'streaming']);
      assert.deepEqual(card.supportedInterfaces, interfaces());
      assert.ok(!JSON.stringify(card).includes(`${echo.url}${RPC_PATH}`), "the agent's own endpoint is not published");
    }
  });

  it('a reader that names no version (1.0 §3.6.2: that is 0.3) or 0.3 gets a 0.3 card, the 1.0 interfaces beside it', async () => {
    const bare = await get(`${gw.url}/agents/${echoAgent.id}/.well-known/agent-card.json`);
    const byHeader = await get(`${gw.url}/agents/${echoAgent.id}/.well-known/agent-card.json`, { 'A2A-Version': '0.3' });
    const byPath = await get(`${gw.url}/agents/${echoAgent.id}/.well-known/agent.json`);
    const underRpc = await get(`${rpcUrl}/.well-known/agent-card.json`);
    for (const other of [byHeader, byPath, underRpc]) assert.deepEqual(other.body, bare.body);
    const card = bare.body;
    assert.equal(card.url, rpcUrl);
    assert.equal(card.preferredTransport, 'JSONRPC');
    assert.equal(card.protocolVersion, '0.3.0');
    assert.deepEqual(card.additionalInterfaces, [{ url: rpcUrl, transport: 'JSONRPC' }]);
    assert.deepEqual(card.security, GATEWAY_SECURITY.v03.security);
    assert.deepEqual(card.securitySchemes, GATEWAY_SECURITY.v03.securitySchemes);
    assert.equal(card.supportsAuthenticatedExtendedCard, false);
    for (const field of ['capabilities', 'defaultInputModes', 'defaultOutputModes', 'description', 'name', 'protocolVersion', 'skills', 'url', 'version']) {
      assert.ok(card[field] !== undefined, `0.3 requires ${field}`);
    }
    // a2a-python 1.x reads the card with no A2A-Version and prefers supportedInterfaces: it finds the 1.0 endpoints.
    assert.deepEqual(card.supportedInterfaces, interfaces());
  });

  it("an agent that speaks 1.0 only answers a reader that names no version with its 1.0 card, and so does its gateway card (the official 1.0 TCK reads it so)", async () => {
    const only10 = await startEchoAgent({ legacyCompat: false });
    try {
      const direct = await fetch(`${only10.url}/.well-known/agent-card.json`).then((r) => r.json() as Promise<Record<string, unknown>>);
      assert.equal(direct.url, undefined, 'the agent itself: a 1.0 card');
      const agent = await registered(gw, { url: only10.url });
      const bare = await get(`${gw.url}/agents/${agent.id}/.well-known/agent-card.json`);
      assert.deepEqual(Object.keys(bare.body).filter((k) => !V1_CARD_FIELDS.includes(k)), [], 'nothing the 1.0 schema does not allow');
      assert.ok(Array.isArray(bare.body.supportedInterfaces) && bare.body.supportedInterfaces.length > 0);
      // A 0.3 reader still gets a card it can use by naming its version.
      const asked03 = await get(`${gw.url}/agents/${agent.id}/.well-known/agent-card.json`, { 'A2A-Version': '0.3' });
      assert.equal(asked03.body.url, `${gw.url}/agents/${agent.id}/a2a`);
      assert.notEqual(bare.headers.get('etag'), asked03.headers.get('etag'));
    } finally {
      await only10.close();
    }
  });

  it('is cacheable as 1.0 §8.6 says: ETag, Last-Modified, Vary A2A-Version; 304 for a current copy', async () => {
    const url = `${gw.url}/agents/${echoAgent.id}/.well-known/agent-card.json`;
    const first = await fetch(url);
    const etag = first.headers.get('etag');
    const lastModified = first.headers.get('last-modified');
    assert.match(etag ?? '', /^"[\w-]+"$/);
    assert.ok(lastModified && !Number.isNaN(Date.parse(lastModified)), String(lastModified));
    assert.match(first.headers.get('vary') ?? '', /a2a-version/i);
    const again = await fetch(url, { headers: { 'if-none-match': etag! } });
    assert.equal(again.status, 304);
    assert.equal(again.headers.get('etag'), etag);
    assert.equal((await fetch(url, { headers: { 'if-modified-since': lastModified! } })).status, 304);
    assert.equal((await fetch(url, { headers: { 'if-none-match': '"stale"' } })).status, 200);
    assert.equal((await fetch(url, { headers: { 'if-none-match': etag!, 'A2A-Version': '0.3' } })).status, 304, 'no version is 0.3: the same card');
    const v10 = await fetch(url, { headers: { 'if-none-match': etag!, ...v1 } });
    assert.equal(v10.status, 200, 'the 1.0 card is another representation, with its own ETag');
    assert.notEqual(v10.headers.get('etag'), etag);
  });

  it('advertises what the gateway offers: streaming and push (whatever the agent says), no extended card', async () => {
    const { body: card } = await get(`${gw.url}/agents/${echoAgent.id}/.well-known/agent-card.json`, v1);
    assert.equal((echo.card as { capabilities: { pushNotifications: boolean } }).capabilities.pushNotifications, false);
    assert.equal(card.capabilities.streaming, true);
    assert.equal(card.capabilities.pushNotifications, true);
    assert.equal(card.capabilities.extendedAgentCard, false);
  });

  it("keeps what describes the agent; its skills' own security requirements are the agent's business, not the client's", async () => {
    const { body: card } = await get(`${gw.url}/agents/${echoAgent.id}/.well-known/agent-card.json`);
    const agentCard = echo.card as { name: string; description: string; skills: Record<string, unknown>[] };
    assert.equal(card.name, agentCard.name);
    assert.equal(card.description, agentCard.description);
    assert.deepEqual(card.skills, agentCard.skills.map(({ securityRequirements: _agents, ...skill }) => skill));
  });

  it('has no signatures (the agent signed another card) and none of the agent security', async () => {
    const { body: echoCard } = await get(`${gw.url}/agents/${echoAgent.id}/.well-known/agent-card.json`);
    assert.ok(!('signatures' in echoCard), JSON.stringify(echoCard.signatures));

    const signed = await registered(gw, { url: `${cards.url}/signed.json` });
    assert.equal(signed.card.signatures.length, 1, 'the stored card is the agent card, signatures included');
    const { body: card } = await get(`${gw.url}/agents/${signed.id}/.well-known/agent-card.json`, v1);
    assert.ok(!('signatures' in card), 'signatures must not be published');
    // The agent's own security is Switchboard's business, not the client's: the card names Switchboard's schemes only.
    assert.deepEqual(card.securitySchemes, GATEWAY_SECURITY.v1.securitySchemes);
    assert.deepEqual(card.securityRequirements, GATEWAY_SECURITY.v1.securityRequirements);
    assert.equal(card.capabilities.streaming, true);
    assert.equal(card.capabilities.pushNotifications, true);
    assert.equal(card.capabilities.extendedAgentCard, false);
    assert.equal(card.supportedInterfaces[0].url, `${gw.url}/agents/${signed.id}/a2a`);
  });

  it('the legacy agent gets a card with 1.0 and 0.3 interfaces on the gateway too', async () => {
    const a = await registered(gw, { url: legacy.url });
    const { body: card } = await get(`${gw.url}/agents/${a.id}/.well-known/agent-card.json`);
    const url = `${gw.url}/agents/${a.id}/a2a`;
    assert.deepEqual(
      card.supportedInterfaces.map((i: { url: string; protocolVersion: string }) => [i.url, i.protocolVersion]),
      [
        [url, '1.0'],
        [url, '0.3'],
        [`${gw.url}/agents/${a.id}/rest`, '1.0'],
      ],
    );
    assert.equal(card.capabilities.streaming, true, 'Switchboard streams the task even when the agent cannot');
  });

  it('an unknown agent has no card', async () => {
    assert.equal((await get(`${gw.url}/agents/nobody-000000/.well-known/agent-card.json`)).status, 404);
    assert.equal((await get(`${gw.url}/agents/nobody-000000/.well-known/agent.json`)).status, 404);
  });
});

describe('a 0.3 client (@a2a-js/sdk 0.3.13, what 0.3 deployments run) through the gateway', () => {
  type Sent = { url: string; method?: string; version: string | null; body: any };
  /**
   * A2AClient of @a2a-js/sdk 0.3.13 made as its users make it: from the gateway card's URL, which it fetches with no
   * A2A-Version (0.3 clients send none). Every request it makes is recorded.
   */
  async function client03(agentId: string) {
    const sent: Sent[] = [];
    const recordingFetch: typeof fetch = async (input, init) => {
      const body = typeof init?.body === 'string' ? JSON.parse(init.body) : undefined;
      const url = String(input instanceof Request ? input.url : input);
      sent.push({ url, method: body?.method, version: new Headers(init?.headers).get('a2a-version'), body });
      return authFetch(gw.keys.client)(input, init);
    };
    const client = await A2AClient03.fromCardUrl(`${gw.url}/agents/${agentId}/.well-known/agent-card.json`, { fetchImpl: recordingFetch });
    return { client, sent };
  }

  const message03 = (text: string) => ({ kind: 'message' as const, messageId: randomUUID(), role: 'user' as const, parts: [{ kind: 'text' as const, text }] });
  const text03 = (t: Task03) => (t.artifacts ?? []).flatMap((a) => a.parts.map((p) => (p.kind === 'text' ? p.text : ''))).join('');

  /** Sends `text` to the agent at `agentUrl` through the gateway, streamed or not; the completed task and what went over the wire. */
  async function sendThrough(agentUrl: string, text: string, stream = false) {
    const agent = await registered(gw, { url: agentUrl });
    const { client, sent } = await client03(agent.id);
    const card = await client.getAgentCard();
    assert.equal(card.url, `${gw.url}/agents/${agent.id}/a2a`, 'the card a 0.3 client reads points it at the gateway');
    const message = message03(text);
    let task: Task03;
    if (stream) {
      const events: { kind: string }[] = [];
      for await (const e of client.sendMessageStream({ message })) events.push(e);
      const first = events[0] as Task03;
      assert.equal(first.kind, 'task', JSON.stringify(events));
      assert.equal((events.at(-1) as { status?: { state: string } }).status?.state, 'completed', JSON.stringify(events.map((e) => e.kind)));
      task = await getTask03(client, first.id);
    } else {
      const reply = await client.sendMessage({ message });
      assert.ok(!('error' in reply), JSON.stringify(reply));
      assert.equal(reply.result.kind, 'task', JSON.stringify(reply.result));
      task = await getTask03(client, reply.result.id);
    }
    assert.equal(text03(task), `echo: ${text}`);
    // What went over the wire: the card, then 0.3 methods only, to the gateway's endpoint for this agent, and never
    // an A2A-Version (a 0.3 client's requests are 0.3 because they name none).
    assert.equal(sent[0]!.url, `${gw.url}/agents/${agent.id}/.well-known/agent-card.json`);
    for (const s of sent.slice(1)) {
      assert.equal(s.url, `${gw.url}/agents/${agent.id}/a2a`);
      assert.match(s.method ?? '', /^(message\/send|message\/stream|tasks\/get)$/);
    }
    assert.deepEqual([...new Set(sent.map((s) => s.version))], [null]);
    return { task, messageId: message.messageId };
  }

  /** tasks/get until the task is completed (a 0.3 message/send may answer before the agent has). */
  async function getTask03(client: A2AClient03, id: string): Promise<Task03> {
    return eventually(async () => {
      const got = await client.getTask({ id });
      assert.ok(!('error' in got), JSON.stringify(got));
      return got.result.status.state === 'completed' ? got.result : undefined;
    });
  }

  it('fetches the gateway card, which has the url and preferredTransport 0.3 clients need', async () => {
    const agent = await registered(gw, { url: echo.url });
    const { client } = await client03(agent.id);
    const card = await client.getAgentCard();
    assert.equal(card.preferredTransport, 'JSONRPC');
    assert.equal(card.protocolVersion, '0.3.0');
  });

  it('to the echo agent (1.0): a completed task with the echo artifact', async () => {
    const before = echo.calls.length;
    const { messageId } = await sendThrough(echo.url, 'hello from 0.3');
    const call = echo.calls.slice(before).find((c) => c.params?.message?.messageId === messageId);
    assert.ok(call, 'the echo agent got the message');
    assert.match(call.method, /^(SendMessage|SendStreamingMessage)$/, 'the gateway speaks 1.0 to a 1.0 agent');
  });

  it('to the legacy agent (0.3 only, no streaming): the agent receives a 0.3 message/send', async () => {
    const before = legacyNoStream.calls.length;
    const { messageId } = await sendThrough(legacyNoStream.url, 'old to old');
    const calls = legacyNoStream.calls.slice(before);
    const call = calls.find((c) => c.params?.message?.messageId === messageId);
    assert.ok(call, `the legacy agent got the message: ${JSON.stringify(calls.map((c) => c.method))}`);
    assert.equal(call.method, 'message/send');
    assert.equal(call.params.message.kind, 'message');
    assert.equal(call.params.message.role, 'user');
    assert.deepEqual(call.params.message.parts, [{ kind: 'text', text: 'old to old' }]);
  });

  it('streamed (message/stream) to the legacy agent that streams: the agent receives a 0.3 call, the client the task to its end', async () => {
    const before = legacy.calls.length;
    const { messageId } = await sendThrough(legacy.url, 'old, streamed', true);
    const call = legacy.calls.slice(before).find((c) => c.params?.message?.messageId === messageId);
    assert.ok(call, 'the legacy agent got the message');
    assert.match(call.method, /^message\/(send|stream)$/, 'a 0.3 method, never a 1.0 one');
    assert.equal(call.params.message.kind, 'message');
  });
});
