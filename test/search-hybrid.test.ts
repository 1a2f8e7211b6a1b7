// Hybrid search (issue 42): GET /agents?q=… ranks by full text and by meaning (embeddings from an
// OpenAI-compatible model service, fused by reciprocal rank), with the model service a real HTTP server started
// here (its vectors from a small rule of its own: test/helpers/embedding-service.ts). Cards share no word with the
// queries; the service down or slow leaves full-text search, which says so; a changed model re-embeds every card;
// one tenant's vectors never rank in another's search. The routing part is in search-hybrid-routing.test.ts.
// Run: bash scripts/test.sh test/search-hybrid.test.ts   (PostgreSQL only; no Temporal)
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { call, startRegistryGateway, TENANT, type RegistryGateway } from './helpers/registry-gateway';
import { type EmbeddingService, startEmbeddingService } from './helpers/embedding-service';
import { createTestDb, type TestDb } from './helpers/harness';

interface CardSpec {
  slug: string;
  name: string;
  description: string;
  skills: { id: string; name: string; description: string; tags: string[]; examples?: string[] }[];
}

// No card shares a word with the queries below (stop words aside): full text finds none of them.
const CARDS: CardSpec[] = [
  { slug: 'billing', name: 'Billing desk', description: 'Handles invoices and billing disputes', skills: [{ id: 'disputes', name: 'Disputes', description: 'Settles invoice disputes', tags: ['finance'] }] },
  { slug: 'travel', name: 'Journey planner', description: 'Arranges journeys and itineraries', skills: [{ id: 'itineraries', name: 'Itineraries', description: 'Plans trips by airport', tags: ['travel'] }] },
  { slug: 'weather', name: 'Sky watcher', description: 'Predicts sunshine and storm', skills: [{ id: 'forecasts', name: 'Forecasts', description: 'Forecasts for skies anywhere', tags: ['weather'] }] },
  { slug: 'poet', name: 'Verse smith', description: 'Writes rhymes', skills: [{ id: 'verse', name: 'Verse', description: 'Sonnet and stanza', tags: ['writing'] }] },
  { slug: 'refunds', name: 'Refund office', description: 'Refunds charges', skills: [{ id: 'refunds', name: 'Refunds', description: 'Gets people reimbursed', tags: ['finance'] }] },
];
const QUERIES: [string, string][] = [
  ['I want my money back', 'billing'],
  ['get me on a plane to Lisbon', 'travel'],
  ['should I carry an umbrella tomorrow', 'weather'],
];

let service: EmbeddingService;
let cardHost: http.Server;
let hostUrl: string;

async function startCardHost(): Promise<string> {
  cardHost = http.createServer((req, res) => {
    if (req.method === 'POST') {
      res.writeHead(200, { 'content-type': 'application/json' });
      return void res.end(JSON.stringify({ jsonrpc: '2.0', id: 'switchboard-probe', error: { code: -32001, message: 'Task not found' } }));
    }
    const spec = CARDS.find((c) => req.url === `/${c.slug}/.well-known/agent-card.json`);
    if (!spec) return void res.writeHead(404).end();
    const { slug, ...card } = spec;
    res.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify({
        ...card, version: '1.0.0', protocolVersion: '0.3.0', url: `${hostUrl}/${slug}/rpc`, capabilities: {},
        defaultInputModes: ['text/plain'], defaultOutputModes: ['text/plain'],
      }),
    );
  });
  await new Promise<void>((resolve) => cardHost.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(cardHost.address() as AddressInfo).port}`;
}

const settings = (model = 'concepts') => ({ url: service.url, model, key: 'test-embeddings-key', timeoutMs: 1_500, backoffMs: 300 });
const search = async (gw: RegistryGateway, query: string) => {
  const res = await call('GET', `${gw.url}/agents?${query}`);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body as { agents: { id: string; name: string; rank: number; ranks?: { fullText: number | null; semantic: number | null; similarity: number | null } }[]; ranking?: string; semantic?: string; nextPageToken: string };
};
const q = (text: string) => `q=${encodeURIComponent(text)}`;

before(async () => {
  service = await startEmbeddingService();
  hostUrl = await startCardHost();
});
after(async () => {
  await service?.close();
  await new Promise((r) => cardHost?.close(r));
});

describe('hybrid search', () => {
  let gw: RegistryGateway;
  const ids = new Map<string, string>();
  const slugOf = (id: string) => [...ids].find(([, v]) => v === id)?.[0];

  before(async () => {
    gw = await startRegistryGateway({ temporal: false, embeddings: settings() });
    for (const slug of ['billing', 'travel', 'weather']) {
      const res = await call('POST', `${gw.url}/agents`, { url: `${hostUrl}/${slug}` });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      ids.set(slug, res.body.id);
    }
  });
  after(async () => gw?.close());

  it('ranks the agent nearest in meaning first when no card shares a word with the query, and says it ranked both ways', async () => {
    for (const [text, slug] of QUERIES) {
      const page = await search(gw, q(text));
      assert.equal(page.ranking, 'hybrid');
      assert.equal(page.semantic, 'on');
      assert.equal(slugOf(page.agents[0]!.id), slug, `${text}: ${page.agents.map((a) => a.name).join(', ')}`);
      assert.deepEqual({ ...page.agents[0]!.ranks, similarity: undefined }, { fullText: null, semantic: 1, similarity: undefined });
      assert.ok(page.agents[0]!.ranks!.similarity! > 0.5);
    }
    // The service was called for the cards and for the queries, with the configured model and key.
    const inputs = service.calls.flatMap((c) => c.input);
    assert.ok(inputs.some((i) => i.includes('Handles invoices and billing disputes')), 'the billing card was embedded');
    assert.ok(inputs.includes('I want my money back'), 'the query was embedded');
    assert.ok(service.calls.every((c) => c.model === 'concepts' && c.authorization === 'Bearer test-embeddings-key'));
  });

  it('still finds by full text, a card in both lists first', async () => {
    const page = await search(gw, q('invoices'));
    assert.equal(page.ranking, 'hybrid');
    assert.equal(slugOf(page.agents[0]!.id), 'billing');
    assert.equal(page.agents[0]!.ranks!.fullText, 1);
    assert.equal(page.agents[0]!.ranks!.semantic, 1);
    assert.ok(page.agents.slice(1).every((a) => a.ranks!.fullText === null && a.rank < page.agents[0]!.rank));
  });

  it('embeds the query once per request and reuses it for a while', async () => {
    const text = 'my refund please, now';
    await search(gw, q(text));
    await search(gw, q(text));
    assert.equal(service.calls.filter((c) => c.input.includes(text)).length, 1);
  });

  it('applies the filters to both ranks', async () => {
    const page = await search(gw, `${q('I want my money back')}&tag=travel`);
    assert.deepEqual(page.agents.map((a) => slugOf(a.id)), ['travel'], 'only the travel agent has the tag');
    const none = await search(gw, `${q('I want my money back')}&skill=nothing-has-this`);
    assert.deepEqual(none.agents, []);
  });

  it('pages a hybrid ranking without repeats', async () => {
    const seen: string[] = [];
    let token = '';
    do {
      const page = await search(gw, `${q('I want my money back')}&pageSize=1${token ? `&pageToken=${token}` : ''}`);
      seen.push(...page.agents.map((a) => a.id));
      token = page.nextPageToken;
    } while (token);
    assert.equal(seen.length, 3);
    assert.equal(new Set(seen).size, 3);
    assert.equal(slugOf(seen[0]!), 'billing');
  });

  it('ranks an agent registered just before the query by meaning', async () => {
    const res = await call('POST', `${gw.url}/agents`, { url: `${hostUrl}/poet` });
    assert.equal(res.status, 201);
    ids.set('poet', res.body.id);
    const page = await search(gw, q('write me a poem'));
    assert.equal(page.ranking, 'hybrid');
    assert.equal(slugOf(page.agents[0]!.id), 'poet');
  });

  it('falls back to full text when the model service is down, says so, and registration does not wait for it', async () => {
    service.mode = 'down';
    try {
      const started = Date.now();
      const res = await call('POST', `${gw.url}/agents`, { url: `${hostUrl}/refunds` });
      assert.equal(res.status, 201);
      assert.ok(Date.now() - started < 1_000, 'registered without waiting on the service');
      ids.set('refunds', res.body.id);
      const page = await search(gw, q('billing'));
      assert.equal(page.ranking, 'full-text');
      assert.match(page.semantic!, /^unavailable: .*503/);
      assert.deepEqual(page.agents.map((a) => slugOf(a.id)), ['billing'], 'full text still answers');
      assert.equal(page.agents[0]!.ranks, undefined);
      // (A query embedded a moment ago would still rank by meaning from the cache: this one is new.)
      const nothing = await search(gw, q('I want a refund of my money'));
      assert.equal(nothing.ranking, 'full-text');
      assert.deepEqual(nothing.agents, []);
    } finally {
      service.mode = 'ok';
    }
    // Back up (after the backoff): the agent registered meanwhile is embedded before the next search ranks.
    await new Promise((r) => setTimeout(r, 350));
    const page = await search(gw, q('I want my money back'));
    assert.equal(page.ranking, 'hybrid');
    const refunds = page.agents.find((a) => slugOf(a.id) === 'refunds');
    assert.ok(refunds?.ranks && refunds.ranks.semantic !== null && refunds.ranks.fullText === null, 'ranked by meaning alone: it was embedded');
    const { rows } = await gw.db.pool.query('SELECT count(*)::int AS n FROM agent_embed_queue');
    assert.equal(rows[0].n, 0, 'nothing is left queued');
  });

  it('falls back to full text within the timeout when the model service is slow', async () => {
    service.mode = 'slow';
    service.delayMs = 5_000;
    try {
      const started = Date.now();
      const page = await search(gw, q('a different query about invoices'));
      const took = Date.now() - started;
      assert.equal(page.ranking, 'full-text');
      assert.match(page.semantic!, /^unavailable: the model service took longer than 1500 ms/);
      assert.ok(took < 3_000, `answered in ${took} ms`);
      // Slow is not down: the next search asks again, and waits no longer than the timeout either.
      const again = Date.now();
      assert.equal((await search(gw, q('more invoices'))).ranking, 'full-text');
      assert.ok(Date.now() - again < 3_000);
      // Down is: within the backoff the service is not asked again, and a search answers at once.
      service.mode = 'down';
      assert.match((await search(gw, q('invoices yet again'))).semantic!, /503/);
      const asked = service.calls.length;
      const third = Date.now();
      assert.match((await search(gw, q('invoices once more'))).semantic!, /^unavailable: .*503/);
      assert.ok(Date.now() - third < 500);
      assert.equal(service.calls.length, asked, 'not asked within the backoff');
    } finally {
      service.mode = 'ok';
    }
  });

  it("keeps each tenant's vectors to itself", async () => {
    // Another tenant's card is the nearest of all to the query; this tenant's search must not see it.
    const other = await gw.registry.register('other-tenant', { url: `${hostUrl}/refunds` });
    await new Promise((r) => setTimeout(r, 400));
    const mine = await search(gw, q('refunds reimbursed charged'));
    assert.ok(!mine.agents.some((a) => a.id === other.id));
    assert.equal(slugOf(mine.agents[0]!.id), 'refunds', "this tenant's own refund agent");
    const theirs = await gw.registry.search('other-tenant', { q: 'I want my money back' });
    assert.equal(theirs.ranking, 'hybrid');
    assert.deepEqual(theirs.agents.map((a) => a.id), [other.id]);
    const { rows } = await gw.db.pool.query('SELECT tenant, agent_id FROM agent_embeddings WHERE tenant = $1', ['other-tenant']);
    assert.deepEqual(rows, [{ tenant: 'other-tenant', agent_id: other.id }]);
  });
});

describe('a changed model', () => {
  let db: TestDb;
  before(async () => {
    db = await createTestDb();
  });
  after(async () => db?.drop());

  it('re-embeds every card with the new model, and ranks with its vectors only', async () => {
    const first = await startRegistryGateway({ temporal: false, embeddings: settings('concepts'), db });
    for (const slug of ['billing', 'travel', 'weather']) assert.equal((await call('POST', `${first.url}/agents`, { url: `${hostUrl}/${slug}` })).status, 201);
    assert.equal((await search(first, q('I want my money back'))).ranking, 'hybrid');
    const before = (await db.pool.query<{ vector: number[] }>("SELECT vector FROM agent_embeddings e JOIN agents a ON a.id = e.agent_id WHERE a.name = 'Billing desk'")).rows[0]!.vector;
    await first.close();

    const callsBefore = service.calls.length;
    const second = await startRegistryGateway({ temporal: false, embeddings: settings('concepts-v2'), db });
    try {
      const page = await search(second, q('I want my money back'));
      assert.equal(page.ranking, 'hybrid');
      assert.equal(page.agents[0]!.name, 'Billing desk');
      const { rows } = await db.pool.query<{ model: string; n: number }>('SELECT model, count(*)::int AS n FROM agent_embeddings WHERE tenant = $1 GROUP BY model', [TENANT]);
      assert.deepEqual(rows, [{ model: 'concepts-v2', n: 3 }], 'every card re-embedded with the new model');
      const cardCalls = service.calls.slice(callsBefore).filter((c) => c.model === 'concepts-v2' && c.input.some((i) => i.startsWith('Billing desk')));
      assert.equal(cardCalls.length, 1, 'the card was sent to the new model once');
      const after = (await db.pool.query<{ vector: number[] }>("SELECT vector FROM agent_embeddings e JOIN agents a ON a.id = e.agent_id WHERE a.name = 'Billing desk'")).rows[0]!.vector;
      assert.notDeepEqual(after, before, 'the vector was made again');
    } finally {
      await second.close();
    }
  });
});

describe('without a model service', () => {
  it('searches by full text and says so', async () => {
    const gw = await startRegistryGateway({ temporal: false });
    try {
      assert.equal((await call('POST', `${gw.url}/agents`, { url: `${hostUrl}/billing` })).status, 201);
      const page = await search(gw, q('invoices'));
      assert.equal(page.ranking, 'full-text');
      assert.equal(page.semantic, 'off: SWITCHBOARD_EMBEDDINGS_URL is not set');
      assert.equal(page.agents.length, 1);
      const list = await search(gw, '');
      assert.equal(list.ranking, undefined, 'a list without q ranks nothing');
    } finally {
      await gw.close();
    }
  });
});
