/**
 * Outbound credentials (issue 14): what Switchboard presents when it calls an agent. Sealed at rest (rotation, bound
 * to their agent), OAuth tokens fetched once and cached, and presented on every kind of call (registration's card
 * fetch, forwarding, cancel, card refresh, liveness probe) while appearing in no API answer, no log line, no
 * Temporal history and no error message. Real PostgreSQL, Temporal, @a2a-js/sdk agents and a token endpoint.
 */
import { after, before, describe, mock, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { temporal } from '@temporalio/proto';
import { AgentPool } from './agents';
import { type GuardedAgent, startGuardedAgent } from './agents/guarded';
import { DATABASE_URL, type Gateway, type TestDb, createTestDb, eventually, rpc, startGateway } from './helpers/harness';
import { AgentCredentials, CredentialError, SecretBox, authorizedFetch } from '../src/core/agents/agent-credentials';
import { createOutbound } from '../src/core/http/outbound';
import { EventHub } from '../src/core/events/hub';
import { generateKeySpec, parseKeyRing } from '../src/core/temporal/encryption-codec';

const V1 = { 'A2A-Version': '1.0' };
const userMessage = (text: string) => ({ messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] });

/** A client-credentials token endpoint: counts requests, remembers what it received, issues `tok-<n>`. */
async function startTokenServer(opts: { expiresIn?: number; fail?: boolean; delayMs?: number } = {}) {
  const received: { authorization?: string; body: string }[] = [];
  const issued = new Set<string>();
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      received.push({ authorization: req.headers.authorization, body });
      setTimeout(() => {
        if (opts.fail) {
          res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'server_error', echoed: body }));
          return;
        }
        const token = `tok-${received.length}-${randomUUID().slice(0, 8)}`;
        issued.add(token);
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ access_token: token, token_type: 'Bearer', expires_in: opts.expiresIn ?? 3600 }));
      }, opts.delayMs ?? 0);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/token`,
    received,
    issued,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

async function insertAgent(db: TestDb, id: string) {
  await db.pool.query(
    `INSERT INTO agents (tenant, id, name, source_url, card_url, card, endpoint_url, protocol_version) VALUES ('default', $1, $1, 'http://x', 'http://x/card', '{}', 'http://x/rpc', '1.0')`,
    [id],
  );
}

describe('the credential store', () => {
  let db: TestDb;
  const outbound = createOutbound({ allowPrivate: true });
  const ring = generateKeySpec('k1');
  const store = (spec = ring, margin?: number) => new AgentCredentials({ pool: db.pool, box: new SecretBox(parseKeyRing(spec)), fetch: outbound.fetch, refreshMarginMs: margin });

  before(async () => {
    db = await createTestDb();
    for (const id of ['a1', 'a2', 'o1', 'o2', 'o3']) await insertAgent(db, id);
  });
  after(async () => {
    await db.drop();
    await outbound.close();
  });

  test('each kind makes its header; the row holds ciphertext only; describe() names no secret', async () => {
    const s = store();
    await s.put('default', 'a1', { type: 'bearer', token: 'bearer-secret-1' });
    assert.deepEqual(await s.headersFor('default', 'a1'), { authorization: 'Bearer bearer-secret-1' });
    await s.put('default', 'a2', { type: 'apiKey', header: 'X-Agent-Key', value: 'apikey-secret-2' });
    assert.deepEqual(await s.headersFor('default', 'a2'), { 'X-Agent-Key': 'apikey-secret-2' });
    assert.deepEqual(await s.headersFor('default', 'nobody'), {});
    const { rows } = await db.pool.query<{ sealed: Buffer; kind: string; key_id: string }>('SELECT sealed, kind, key_id FROM agent_credentials ORDER BY agent_id');
    for (const r of rows) assert.equal(r.sealed.includes('secret'), false, 'no plaintext at rest');
    assert.deepEqual(rows.map((r) => [r.kind, r.key_id]), [['bearer', 'k1'], ['apiKey', 'k1']]);
    assert.deepEqual(await s.describe('default', 'a2'), { type: 'apiKey', header: 'X-Agent-Key' });
    assert.deepEqual(await s.describe('default', 'a1'), { type: 'bearer' });
  });

  test('keys rotate (old ciphertext opens under a ring that still holds its key), and a sealed value is bound to its agent', async () => {
    const rotated = `${generateKeySpec('k2')},${ring}`;
    assert.deepEqual(await store(rotated).headersFor('default', 'a1'), { authorization: 'Bearer bearer-secret-1' });
    await store(rotated).put('default', 'a1', { type: 'bearer', token: 'bearer-secret-1b' });
    assert.equal((await db.pool.query("SELECT key_id FROM agent_credentials WHERE agent_id = 'a1'")).rows[0].key_id, 'k2');
    await assert.rejects(store(generateKeySpec('k3')).headersFor('default', 'a2'), /key k1, which SWITCHBOARD_SECRETS_KEY does not hold/);
    // The same bytes moved to another agent's row do not open: the tenant and agent are bound in.
    await db.pool.query("UPDATE agent_credentials SET sealed = (SELECT sealed FROM agent_credentials WHERE agent_id = 'a2') WHERE agent_id = 'a1'");
    await db.pool.query("UPDATE agent_credentials SET key_id = 'k1' WHERE agent_id = 'a1'");
    await assert.rejects(store(rotated).headersFor('default', 'a1'));
  });

  test('OAuth 2.0 client credentials: Basic auth and form as RFC 6749 says, one fetch for many concurrent calls, refetched near expiry', async () => {
    const tokens = await startTokenServer({ expiresIn: 1, delayMs: 100 });
    try {
      const s = store(ring, 30_000);
      await s.put('default', 'o1', { type: 'oauth2', tokenUrl: tokens.url, clientId: 'client:1', clientSecret: 'oauth-secret-&=', scope: 'a2a tasks' });
      const all = await Promise.all(Array.from({ length: 10 }, () => s.headersFor('default', 'o1')));
      const fetchedBy = Date.now();
      assert.equal(tokens.received.length, 1, 'single flight');
      assert.equal(new Set(all.map((h) => h.authorization)).size, 1);
      assert.ok(tokens.issued.has(all[0]!.authorization!.replace('Bearer ', '')));
      assert.equal(tokens.received[0]!.authorization, `Basic ${Buffer.from('client%3A1:oauth-secret-%26%3D').toString('base64')}`);
      assert.deepEqual(Object.fromEntries(new URLSearchParams(tokens.received[0]!.body)), { grant_type: 'client_credentials', scope: 'a2a tasks' });
      await s.headersFor('default', 'o1');
      assert.equal(tokens.received.length, 1, 'cached');
      // expires_in 1 s: with the margin capped at half the lifetime, the token is fetched again after 0.5 s. The
      // clock is moved 0.6 s on (mocked Date) rather than waited for.
      mock.timers.enable({ apis: ['Date'], now: fetchedBy + 600 });
      try {
        await s.headersFor('default', 'o1');
      } finally {
        mock.timers.reset();
      }
      assert.equal(tokens.received.length, 2, 'refetched before expiry');
      s.invalidate('default', 'o1');
      await s.headersFor('default', 'o1');
      assert.equal(tokens.received.length, 3, 'an invalidated token is fetched again');
    } finally {
      await tokens.close();
    }
  });

  test('a failing token endpoint is a CredentialError naming the agent and the status, never the secret', async () => {
    const tokens = await startTokenServer({ fail: true });
    try {
      const s = store();
      await s.put('default', 'o2', { type: 'oauth2', tokenUrl: tokens.url, clientId: 'c', clientSecret: 'never-show-me' });
      const err = await s.headersFor('default', 'o2').catch((e: unknown) => e);
      assert.ok(err instanceof CredentialError);
      assert.match(err.message, /default\/o2.*HTTP 500/);
      assert.equal(err.message.includes('never-show-me'), false);
    } finally {
      await tokens.close();
    }
  });

  test('authorizedFetch adds the headers over the request\'s own, and a deleted agent takes its credential with it', async () => {
    const seen: (string | undefined)[] = [];
    const fake: typeof fetch = async (_input, init) => {
      seen.push(new Headers(init?.headers).get('authorization') ?? undefined);
      return new Response('ok');
    };
    await authorizedFetch(fake, async () => ({ authorization: 'Bearer x' }))('http://a', { headers: { authorization: 'Bearer client' } });
    await authorizedFetch(fake, async () => ({}))('http://a', { headers: { authorization: 'Bearer client' } });
    assert.deepEqual(seen, ['Bearer x', 'Bearer client']);
    const s = store();
    await s.put('default', 'o3', { type: 'bearer', token: 't' });
    await db.pool.query("DELETE FROM agents WHERE id = 'o3'");
    assert.deepEqual(await s.headersFor('default', 'o3'), {});
  });
});

describe('the credential cache (migration 022)', () => {
  let db: TestDb;
  const outbound = createOutbound({ allowPrivate: true });
  const ring = generateKeySpec('k1');
  /** Two processes: each its own store and LISTEN connection, on the same database. */
  const hubs: EventHub[] = [];
  const hubOf = new Map<AgentCredentials, EventHub>();
  let reads = 0;

  /** Resolves when `store`'s process hears that `id`'s credential changed (the trigger's NOTIFY, migration 022). */
  function heard(store: AgentCredentials, id: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const deadline = setTimeout(() => (off(), reject(new Error(`timed out waiting for the notice of ${id}'s credential`))), 10_000);
      const off = hubOf.get(store)!.onConfigChange((n) => {
        if (n?.kind === 'agent_credentials' && n.id === id) (clearTimeout(deadline), off(), resolve());
      });
    });
  }

  async function aProcess(): Promise<AgentCredentials> {
    const hub = new EventHub({ connection: { connectionString: DATABASE_URL } });
    await hub.start();
    hubs.push(hub);
    // The real pool, with its credential reads counted.
    const pool = Object.create(db.pool) as typeof db.pool;
    pool.query = ((...args: Parameters<typeof db.pool.query>) => {
      if (String(args[0]).includes('FROM agent_credentials')) reads++;
      return (db.pool.query as (...a: unknown[]) => unknown)(...args);
    }) as typeof db.pool.query;
    const store = new AgentCredentials({ pool, box: new SecretBox(parseKeyRing(ring)), fetch: outbound.fetch, hub });
    hubOf.set(store, hub);
    return store;
  }

  before(async () => {
    db = await createTestDb();
  });
  after(async () => {
    for (const h of hubs) await h.close();
    await db.drop();
    await outbound.close();
  });

  test('a credential is read once, and a change made anywhere (another process, a hand-run UPDATE) applies at once, not after the TTL', async () => {
    const id = `c-${randomUUID().slice(0, 8)}`;
    await insertAgent(db, id);
    const [here, there] = [await aProcess(), await aProcess()];
    const put = heard(here, id);
    await there.put('default', id, { type: 'bearer', token: 'one' });
    // The put's own notice reaches this process some milliseconds after its commit, and drops what is cached then.
    await put;
    assert.deepEqual(await here.headersFor('default', id), { authorization: 'Bearer one' });
    const after1 = reads;
    for (let i = 0; i < 5; i++) assert.deepEqual(await here.headersFor('default', id), { authorization: 'Bearer one' });
    assert.equal(reads, after1, 'cached: no read per call');

    await there.put('default', id, { type: 'bearer', token: 'two' });
    await eventually(async () => ((await here.headersFor('default', id)).authorization === 'Bearer two' ? true : undefined), 1_000, 'the rotation seen by the other process');
    await db.pool.query('DELETE FROM agent_credentials WHERE tenant = $1 AND agent_id = $2', ['default', id]);
    await eventually(async () => ((await here.headersFor('default', id)).authorization === undefined ? true : undefined), 1_000, 'the hand-run delete seen');
    here.close();
    there.close();
  });

  test('an OAuth token fetched with a credential another process replaced is not used again', async () => {
    const id = `c-${randomUUID().slice(0, 8)}`;
    await insertAgent(db, id);
    const tokens = await startTokenServer();
    try {
      const [here, there] = [await aProcess(), await aProcess()];
      const put = heard(here, id);
      await here.put('default', id, { type: 'oauth2', tokenUrl: tokens.url, clientId: 'old-client', clientSecret: 's' });
      await put; // the put's own notice, which would drop the token fetched before it
      const first = (await here.headersFor('default', id)).authorization;
      assert.equal((await here.headersFor('default', id)).authorization, first, 'the token is cached');
      await there.put('default', id, { type: 'oauth2', tokenUrl: tokens.url, clientId: 'new-client', clientSecret: 's' });
      const next = await eventually(async () => {
        const h = await here.headersFor('default', id);
        return h.authorization !== first ? h.authorization : undefined;
      }, 1_000, 'a new token after the other process replaced the credential');
      assert.ok(tokens.issued.has(next!.replace('Bearer ', '')));
      assert.equal(tokens.received.at(-1)!.authorization, `Basic ${Buffer.from('new-client:s').toString('base64')}`, 'fetched with the new credential');
      here.close();
      there.close();
    } finally {
      await tokens.close();
    }
  });
});

describe('through the gateway', () => {
  let gw: Gateway;
  const agents = new AgentPool();
  const logged: string[] = [];
  const SECRET = `agent-bearer-${randomUUID()}`;
  let agent: GuardedAgent;
  let id: string;

  before(async () => {
    const stream = new Writable({
      write(chunk, _enc, done) {
        logged.push(String(chunk));
        done();
      },
    });
    gw = await startGateway({ logTo: { level: 'debug', stream } });
    agent = await agents.add(startGuardedAgent({ accept: (h) => h.authorization === `Bearer ${SECRET}`, ms: 2_500 }));
  });
  after(async () => {
    await gw?.close();
    await agents.closeAll();
  });

  const operator = (method: string, path: string, body?: unknown) =>
    gw.fetch(`${gw.url}${path}`, { method, headers: body ? { 'content-type': 'application/json' } : {}, body: body ? JSON.stringify(body) : undefined }, 'operator');

  test('registration fetches the card with the credential; without it the agent refuses and so does registration', async () => {
    const refused = await operator('POST', '/agents', { url: agent.url });
    assert.equal(refused.status, 422, 'the card answers 401 without the credential');
    const res = await operator('POST', '/agents', { url: agent.url, credentials: { type: 'bearer', token: SECRET } });
    const body = await res.text();
    assert.equal(res.status, 201, body);
    assert.equal(body.includes(SECRET), false, 'the answer names the kind, not the secret');
    id = JSON.parse(body).id;
    assert.deepEqual(JSON.parse(body).credentials, { type: 'bearer' });
    const listed = (await (await operator('GET', '/agents')).json()) as { agents: { id: string; credentials: unknown }[] };
    assert.deepEqual(listed.agents.find((a) => a.id === JSON.parse(body).id)?.credentials, { type: 'bearer' });
    assert.ok(agent.seen.some((s) => s.path.endsWith('agent-card.json') && s.admitted));
  });

  test('forwarding, cancel, card refresh and probe all present it; the client\'s own key never reaches the agent', async () => {
    const rpcUrl = `${gw.url}/agents/${id}/a2a`;
    const from = agent.seen.length; // the refused registration of the first test is not Switchboard's call
    const done = await rpc(rpcUrl, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: userMessage('hello') } }, V1);
    assert.equal(done.json.result?.task?.status?.state, 'TASK_STATE_COMPLETED', done.text);

    const sends = () => agent.calls.filter((c) => c.method === 'SendMessage' || c.method === 'SendStreamingMessage').length;
    const before = sends();
    const started = await rpc(rpcUrl, { jsonrpc: '2.0', id: 2, method: 'SendMessage', params: { message: userMessage('to cancel'), configuration: { returnImmediately: true } } }, V1);
    const taskId = started.json.result.task.id;
    await eventually(() => sends() > before || undefined, 10_000, 'the second call to reach the agent');
    const canceled = await rpc(rpcUrl, { jsonrpc: '2.0', id: 3, method: 'CancelTask', params: { id: taskId } }, V1);
    assert.equal(canceled.json.result?.status?.state, 'TASK_STATE_CANCELED', canceled.text);
    await eventually(() => agent.cancels.length > 0 || undefined, 10_000, 'the cancel at the agent');

    const refreshed = await operator('POST', `/agents/${id}/refresh`);
    const view = (await refreshed.json()) as any;
    assert.equal(view.status, 'healthy', JSON.stringify(view.liveness));

    const kinds = new Set(agent.calls.map((c) => c.method));
    for (const m of ['SendStreamingMessage', 'CancelTask', 'GetTask']) assert.ok(kinds.has(m), `the agent saw ${m}: ${[...kinds]}`);
    for (const c of agent.calls) assert.equal(c.headers.authorization, `Bearer ${SECRET}`, `${c.method} carried the credential`);
    assert.ok(agent.seen.filter((s) => s.path.endsWith('agent-card.json')).length >= 2, 'registration and refresh fetched the card');
    const mine = agent.seen.slice(from);
    assert.deepEqual(mine.filter((s) => !s.admitted).map((s) => `${s.method} ${s.path}`), [], 'no call reached the agent without it');
    assert.equal(agent.seen.some((s) => JSON.stringify(s.headers).includes(gw.keys.client)), false);
  });

  test('rotating it (PUT /agents/:id/credentials) takes effect on the next call; the old one is refused by the agent', async () => {
    const next = `rotated-${randomUUID()}`;
    agent.accept((h) => h.authorization === `Bearer ${next}`);
    assert.equal((await operator('PUT', `/agents/${id}/credentials`, { type: 'bearer', token: next })).status, 204);
    const res = await rpc(`${gw.url}/agents/${id}/a2a`, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: userMessage('again') } }, V1);
    assert.equal(res.json.result?.task?.status?.state, 'TASK_STATE_COMPLETED', res.text);
    assert.equal((await operator('PUT', `/agents/${id}/credentials`, { type: 'bearer', token: 'x\r\ninjected: 1' })).status, 400);
    agent.accept((h) => h.authorization === `Bearer ${SECRET}`);
    assert.equal((await operator('PUT', `/agents/${id}/credentials`, { type: 'bearer', token: SECRET })).status, 204);
  });

  test('an OAuth agent whose token endpoint fails: a clear refusal without the secret', async () => {
    const tokens = await startTokenServer({ fail: true });
    try {
      // A URL of its own: the agent's is registered already (a second registration of it would be a 409 first).
      const res = await operator('POST', '/agents', { url: `${agent.url}/?as=oauth`, credentials: { type: 'oauth2', tokenUrl: tokens.url, clientId: 'c', clientSecret: 'oauth-never-shown' } });
      const text = await res.text();
      assert.equal(res.status, 422);
      assert.match(text, /HTTP 500/);
      assert.equal(text.includes('oauth-never-shown'), false);
    } finally {
      await tokens.close();
    }
  });

  test('the secret is in no API answer, no log line and no Temporal history', async () => {
    for (const path of [`/agents/${id}`, '/agents', `/agents/${id}/probes`, '/audit?pageSize=500']) {
      const text = await (await operator('GET', path)).text();
      assert.equal(text.includes(SECRET), false, path);
    }
    const all = logged.join('');
    assert.ok(all.length > 0, 'the gateway logged something');
    assert.equal(all.includes(SECRET), false, 'no log line holds the secret');

    // Every workflow of this gateway's task queue, histories encoded as Temporal stores them.
    let histories = 0;
    for await (const wf of gw.env.client.workflow.list({ query: `TaskQueue = "${gw.taskQueue}"` })) {
      const history = await gw.env.client.workflow.getHandle(wf.workflowId, wf.runId).fetchHistory();
      const bytes = Buffer.from(temporal.api.history.v1.History.encode(history).finish());
      assert.equal(bytes.includes(SECRET), false, `history of ${wf.workflowId}`);
      histories++;
    }
    assert.ok(histories >= 2, `histories read: ${histories}`);
  });
});
