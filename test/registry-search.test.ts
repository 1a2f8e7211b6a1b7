// GET /agents?q=…: PostgreSQL full-text search over the registered cards, weighted name (A) > skill names and
// tags (B) > descriptions (C) > examples (D), with tag / skill / status filters and keyset pages. The cards are a
// fixed set served over HTTP and registered through the API, as an operator would.
// Run: npx tsx --test test/registry-search.test.ts   (PostgreSQL only; no Temporal)
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { call, startRegistryGateway, type RegistryGateway } from './helpers/registry-gateway';

interface Skill {
  id: string;
  name: string;
  description?: string;
  tags?: string[];
  examples?: string[];
}
interface CardSpec {
  slug: string;
  name: string;
  description: string;
  skills: Skill[];
}

/** The fixed set. Filler words keep the "compass" cards about the same length, so only weights order them. */
const CARDS: CardSpec[] = [
  { slug: 'compass-a', name: 'Compass', description: 'Gives general help with maps', skills: [{ id: 'nav-a', name: 'Navigation', description: 'Helps with routes', tags: ['maps'], examples: ['take me home'] }] },
  { slug: 'compass-b', name: 'Wayfinder', description: 'Gives general help with maps', skills: [{ id: 'nav-b', name: 'Compass reading', description: 'Helps with routes', tags: ['maps'], examples: ['take me home'] }] },
  { slug: 'compass-c', name: 'Pathfinder', description: 'Gives general help with a compass', skills: [{ id: 'nav-c', name: 'Navigation', description: 'Helps with routes', tags: ['maps'], examples: ['take me home'] }] },
  { slug: 'compass-d', name: 'Trailblazer', description: 'Gives general help with maps', skills: [{ id: 'nav-d', name: 'Navigation', description: 'Helps with routes', tags: ['maps'], examples: ['where is my compass'] }] },
  {
    slug: 'travel',
    name: 'Travel Planner',
    description: 'Plans whole trips',
    skills: [
      { id: 'flights', name: 'Flight booking', description: 'Books flights and seats', tags: ['Travel', 'air'], examples: ['book a flight to Paris'] },
      { id: 'itinerary', name: 'Itinerary', description: 'Day-by-day plans', tags: ['travel'] },
    ],
  },
  { slug: 'hotels', name: 'Hotel Finder', description: 'Finds rooms', skills: [{ id: 'hotels', name: 'Hotel search', description: 'Finds hotels near a place', tags: ['travel', 'lodging'], examples: ['a hotel in Rome'] }] },
  { slug: 'fx', name: 'Currency Converter', description: 'Converts money, handy when you travel', skills: [{ id: 'fx', name: 'Exchange rates', description: 'Live rates', tags: ['finance'] }] },
  { slug: 'poet', name: 'Poetry Writer', description: 'Writes sonnets', skills: [{ id: 'sonnet', name: 'Sonnets', tags: ['writing'], examples: ['a sonnet about the sea'] }] },
];

let gw: RegistryGateway;
let host: http.Server;
const ids = new Map<string, string>(); // slug → agent id
const slugOf = (id: string) => [...ids].find(([, v]) => v === id)?.[0];

/** Serves every card at /<slug>/.well-known/agent-card.json and answers JSON-RPC probes at /rpc. */
async function startCardHost(): Promise<string> {
  host = http.createServer((req, res) => {
    if (req.method === 'POST' && req.url === '/rpc') {
      res.writeHead(200, { 'content-type': 'application/json' });
      return void res.end(JSON.stringify({ jsonrpc: '2.0', id: 'switchboard-probe', error: { code: -32001, message: 'Task not found' } }));
    }
    const spec = CARDS.find((c) => req.url === `/${c.slug}/.well-known/agent-card.json`);
    if (!spec) return void res.writeHead(404).end();
    const { slug: _slug, ...card } = spec;
    res.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify({ ...card, version: '1.0.0', supportedInterfaces: [{ url: `${base}/rpc`, protocolBinding: 'JSONRPC', protocolVersion: '1.0' }] }),
    );
  });
  await new Promise<void>((resolve) => host.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(host.address() as AddressInfo).port}`;
  return base;
}

before(async () => {
  gw = await startRegistryGateway({ temporal: false });
  const base = await startCardHost();
  for (const c of CARDS) {
    const res = await call('POST', `${gw.url}/agents`, { url: `${base}/${c.slug}/` });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    ids.set(c.slug, res.body.id);
  }
  // A status the probes would set; here the filter is what is tested (test/registry-refresh covers the probes).
  await gw.db.pool.query(`UPDATE agents SET status = 'down', status_reason = 'test' WHERE id = $1`, [ids.get('hotels')]);
});
after(async () => {
  await gw?.close();
  await new Promise((r) => host?.close(r));
});

const search = async (qs: string) => {
  const res = await call('GET', `${gw.url}/agents?${qs}`);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body as { agents: { id: string; rank?: number; status: string }[]; nextPageToken: string };
};
const slugs = async (qs: string) => (await search(qs)).agents.map((a) => slugOf(a.id));

describe('GET /agents?q= ranking', () => {
  it('weights: a match in the name beats skill names/tags, which beat descriptions, which beat examples', async () => {
    const page = await search('q=compass');
    assert.deepEqual(page.agents.map((a) => slugOf(a.id)), ['compass-a', 'compass-b', 'compass-c', 'compass-d']);
    const ranks = page.agents.map((a) => a.rank!);
    assert.ok(ranks.every((r, i) => typeof r === 'number' && r > 0 && (i === 0 || r < ranks[i - 1]!)), `strictly decreasing: ${ranks}`);
  });

  it('stems words ("flights" finds "flight", "booked" finds "booking") and ranks the better match first', async () => {
    assert.deepEqual(await slugs('q=flights'), ['travel']);
    assert.deepEqual((await slugs('q=booked flights'))[0], 'travel');
    // "travel": a skill tag of three agents (B) and a description word of one (C).
    const travel = await slugs('q=travel');
    assert.deepEqual(new Set(travel.slice(0, 2)), new Set(['travel', 'hotels']), 'the tagged agents first');
    assert.ok(travel.includes('fx'), 'the description match is found too');
    assert.ok(travel.indexOf('fx') > travel.indexOf('hotels'));
  });

  it('web-search syntax: quoted phrases, or, and -exclusion', async () => {
    assert.deepEqual(await slugs(`q=${encodeURIComponent('"hotel search"')}`), ['hotels']);
    assert.deepEqual(new Set(await slugs('q=sonnet or rates')), new Set(['poet', 'fx']));
    assert.ok(!(await slugs('q=travel -hotel')).includes('hotels'));
  });

  it('no match is an empty page; a query of stop words only matches nothing rather than failing', async () => {
    // Without a model service the answer says the ranking is full text (test/search-hybrid.test.ts has the hybrid one).
    assert.deepEqual(await search('q=zeppelin'), { agents: [], nextPageToken: '', ranking: 'full-text', semantic: 'off: SWITCHBOARD_EMBEDDINGS_URL is not set' });
    assert.deepEqual((await search('q=the')).agents, []);
    assert.deepEqual((await search(`q=${encodeURIComponent('!!! ( & |')}`)).agents, [], 'operators are text to websearch_to_tsquery');
  });
});

describe('GET /agents filters', () => {
  it('tag (any case); repeated tags must all match', async () => {
    assert.deepEqual(new Set(await slugs('tag=travel')), new Set(['travel', 'hotels']));
    assert.deepEqual(new Set(await slugs('tag=TRAVEL')), new Set(['travel', 'hotels']));
    assert.deepEqual(await slugs('tag=travel&tag=air'), ['travel']);
    assert.deepEqual(await slugs('tag=nothing'), []);
  });

  it('skill id', async () => {
    assert.deepEqual(await slugs('skill=fx'), ['fx']);
    assert.deepEqual(await slugs('skill=itinerary'), ['travel'], 'any of the agent\'s skills');
  });

  it('status, one or several (repeated or comma-separated)', async () => {
    assert.deepEqual(await slugs('status=down'), ['hotels']);
    assert.equal((await slugs('status=healthy')).length, CARDS.length - 1);
    assert.equal((await slugs('status=healthy,down')).length, CARDS.length);
    assert.equal((await slugs('status=healthy&status=down')).length, CARDS.length);
  });

  it('filters combine with q', async () => {
    assert.deepEqual(await slugs('q=travel&status=healthy&tag=travel'), ['travel']);
    assert.deepEqual(await slugs('q=travel&skill=fx'), ['fx']);
  });
});

describe('GET /agents pages', () => {
  it('keyset pages of a ranked search: every match once, in rank order', async () => {
    const all = await slugs('q=help&pageSize=100');
    assert.equal(all.length, 4, 'the four compass cards say "help"');
    const seen: (string | undefined)[] = [];
    let token = '';
    do {
      const page = await search(`q=help&pageSize=3${token ? `&pageToken=${token}` : ''}`);
      assert.ok(page.agents.length <= 3);
      seen.push(...page.agents.map((a) => slugOf(a.id)));
      token = page.nextPageToken;
    } while (token);
    assert.deepEqual(seen, all);
  });

  it('keyset pages of the plain list, oldest first; an agent registered meanwhile does not shift them', async () => {
    const first = await search('pageSize=5');
    assert.deepEqual(first.agents.map((a) => slugOf(a.id)), CARDS.slice(0, 5).map((c) => c.slug));
    const rest = await search(`pageSize=5&pageToken=${first.nextPageToken}`);
    assert.deepEqual(rest.agents.map((a) => slugOf(a.id)), CARDS.slice(5).map((c) => c.slug));
    assert.equal(rest.nextPageToken, '');
  });

  it('a list without q carries no rank; a search does', async () => {
    assert.ok((await search('pageSize=1')).agents.every((a) => a.rank === undefined));
    assert.ok((await search('q=compass')).agents.every((a) => typeof a.rank === 'number'));
  });
});

describe('GET /agents bad parameters: 400 with a message', () => {
  const bad = async (qs: string, pattern: RegExp) => {
    const res = await call('GET', `${gw.url}/agents?${qs}`);
    assert.equal(res.status, 400, `${qs}: ${JSON.stringify(res.body)}`);
    assert.match(res.body.error, pattern, qs);
  };

  it('names the parameter and the problem', async () => {
    await bad('q=', /q must not be empty/);
    await bad('q=%20%20', /q must not be empty/);
    await bad(`q=${'x'.repeat(501)}`, /500 characters/);
    await bad('pageSize=0', /pageSize/);
    await bad('pageSize=101', /pageSize/);
    await bad('pageSize=ten', /pageSize/);
    await bad('status=sleepy', /status/);
    await bad('status=healthy,', /status/);
    await bad('tags=travel', /tags/); // a misspelt filter is an error, not silently ignored
    await bad(`tag=${'t&tag='.repeat(21)}t`, /at most 20 values[\s\S]*at tag/);
    await bad('pageToken=garbage', /pageToken is not a token this API issued/);
  });

  it('a page token used with another query is refused', async () => {
    const { nextPageToken } = await search('q=help&pageSize=1');
    assert.ok(nextPageToken);
    await bad(`q=travel&pageToken=${nextPageToken}`, /pageToken belongs to another query/);
    await bad(`q=help&tag=maps&pageToken=${nextPageToken}`, /pageToken belongs to another query/);
    // the page size may change between pages
    assert.equal((await search(`q=help&pageSize=2&pageToken=${nextPageToken}`)).agents.length, 2);
  });

  it('a forged token of the right query but a bad key is refused, not a server error', async () => {
    const { nextPageToken } = await search('q=help&pageSize=1');
    const token = JSON.parse(Buffer.from(nextPageToken, 'base64url').toString());
    const forged = Buffer.from(JSON.stringify({ ...token, k: 'NaN; DROP TABLE agents' })).toString('base64url');
    await bad(`q=help&pageToken=${forged}`, /pageToken is not a token this API issued/);
  });
});
