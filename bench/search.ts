/**
 * Agent search latency over a large registry: inserts BENCH_AGENTS (default 10,000) synthetic agent cards
 * straight into a fresh schema of DATABASE_URL (the search document and filter keys are generated columns, so
 * they are built exactly as registration builds them), then times a fixed set of queries through the real code
 * path: `AgentRegistry.search` (the SQL alone) and `GET /agents` through Fastify (SQL + JSON of full cards).
 * Prints JSON: p50/p99/mean per query, matches, and the plan node the selective query uses.
 *
 * Run: npx tsx bench/search.ts   Env: DATABASE_URL, BENCH_AGENTS, BENCH_SEARCH_N (timed runs per query, default
 * 200), BENCH_WARMUP (default 20). `runSearchBench()` is exported for bench/run.ts.
 */
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import Fastify from 'fastify';
import { Pool } from 'pg';
import { migrate } from '../src/core/db/migrate';
import { AgentRegistry, type AgentSearch } from '../src/core/agents/registry';
import { createOutbound } from '../src/core/http/outbound';
import { agentRoutes } from '../src/api/routes/agents';

const int = (name: string, def: number) => (process.env[name] ? Number.parseInt(process.env[name]!, 10) : def);
const TENANT = 'default';

// ---- synthetic cards: a seeded generator, so every run searches the same registry ----

function rng(seed: number) {
  let s = seed >>> 0;
  return () => {
    // mulberry32
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const DOMAINS = ['travel', 'finance', 'weather', 'legal', 'medical', 'retail', 'logistics', 'education', 'music', 'sports', 'cooking', 'security', 'hr', 'marketing', 'translation', 'coding', 'research', 'insurance', 'energy', 'gaming'];
const VERBS = ['book', 'find', 'track', 'summarize', 'translate', 'plan', 'audit', 'forecast', 'compare', 'recommend', 'draft', 'review', 'schedule', 'monitor', 'convert', 'classify', 'answer', 'price', 'route', 'verify'];
const NOUNS = ['flights', 'hotels', 'invoices', 'contracts', 'symptoms', 'orders', 'parcels', 'lessons', 'playlists', 'matches', 'recipes', 'alerts', 'candidates', 'campaigns', 'documents', 'pull requests', 'papers', 'claims', 'meters', 'quests', 'reports', 'tickets', 'payments', 'shipments', 'portfolios'];
const ADJECTIVES = ['swift', 'clever', 'quiet', 'bright', 'steady', 'nimble', 'careful', 'bold', 'precise', 'friendly', 'tireless', 'frugal'];
const ROLES = ['assistant', 'agent', 'helper', 'planner', 'analyst', 'broker', 'scout', 'clerk', 'advisor', 'operator'];
// Rare words: each appears in a handful of cards, like a brand or a niche skill.
const RARE = Array.from({ length: 500 }, (_, i) => `zq${i.toString(36)}x`);

function syntheticCard(i: number, r: () => number) {
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)]!;
  // Zipf-like domain choice: the first domains are much more common, as in any real marketplace.
  const domain = DOMAINS[Math.min(DOMAINS.length - 1, Math.floor(DOMAINS.length * r() ** 2))]!;
  const name = `${pick(ADJECTIVES)} ${domain} ${pick(ROLES)} ${i}`;
  const skills = Array.from({ length: 1 + Math.floor(r() * 4) }, (_, s) => {
    const verb = pick(VERBS);
    const noun = pick(NOUNS);
    return {
      id: `${verb}-${noun.replace(/ /g, '-')}-${s}`,
      name: `${verb} ${noun}`,
      description: `Can ${verb} ${noun} for ${domain} teams, ${pick(ADJECTIVES)} and ${pick(ADJECTIVES)}${r() < 0.02 ? ` with ${pick(RARE)}` : ''}`,
      tags: [domain, noun.split(' ')[0]!, ...(r() < 0.3 ? [pick(DOMAINS)] : [])],
      examples: [`please ${verb} my ${noun}`, `${verb} the ${pick(NOUNS)} from last week`],
    };
  });
  return {
    name,
    description: `A ${pick(ADJECTIVES)} ${pick(ROLES)} for ${domain}: it can ${skills.map((s) => s.name).join(', ')}.`,
    version: '1.0.0',
    supportedInterfaces: [{ url: `https://agent-${i}.example.com/a2a`, protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
    capabilities: { streaming: r() < 0.5 },
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills,
  };
}

/**
 * Inserts the synthetic agents `agent-<from>` to `agent-<n - 1>`. The cards are those of a registry of `n` (the
 * generator still runs for the ones skipped), so `agent-7` is the same card whatever `from` and `n`.
 */
export async function insertAgents(pool: Pool, n: number, from = 0): Promise<void> {
  const r = rng(42);
  const statuses = () => (r() < 0.85 ? 'healthy' : r() < 0.67 ? 'degraded' : 'down');
  const CHUNK = 1000;
  const started = Date.now();
  for (let start = 0; start < n; start += CHUNK) {
    const rows = Array.from({ length: Math.min(CHUNK, n - start) }, (_, k) => {
      const i = start + k;
      const card = syntheticCard(i, r);
      return {
        id: `agent-${i}`,
        name: card.name,
        url: `https://agent-${i}.example.com`,
        card_url: `https://agent-${i}.example.com/.well-known/agent-card.json`,
        card,
        endpoint_url: card.supportedInterfaces[0]!.url,
        status: statuses(),
        // one second apart, oldest first, as if registered over a few hours
        created_at: new Date(started - (n - i) * 1000).toISOString(),
      };
    }).filter((_, k) => start + k >= from);
    if (rows.length === 0) continue;
    await pool.query(
      `INSERT INTO agents (tenant, id, name, source_url, card_url, card, endpoint_url, protocol_version, status, created_at)
       SELECT $1, x.id, x.name, x.url, x.card_url, x.card, x.endpoint_url, '1.0', x.status, x.created_at
         FROM jsonb_to_recordset($2::jsonb) AS x(id text, name text, url text, card_url text, card jsonb, endpoint_url text, status text, created_at timestamptz)`,
      [TENANT, JSON.stringify(rows)],
    );
  }
  await pool.query('ANALYZE agents');
}

// ---- timing ----

export interface QueryResult {
  query: string;
  matches: number;
  dbP50Ms: number;
  dbP99Ms: number;
  dbMeanMs: number;
  httpP50Ms: number;
  httpP99Ms: number;
}

export interface SearchBenchResult {
  agents: number;
  runsPerQuery: number;
  insertSeconds: number;
  loadAvg1m: number;
  selectivePlan: string;
  queries: QueryResult[];
}

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
const round = (ms: number) => Math.round(ms * 100) / 100;

async function time(n: number, warmup: number, fn: () => Promise<unknown>) {
  for (let i = 0; i < warmup; i++) await fn();
  const samples: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await fn();
    samples.push(performance.now() - t);
  }
  samples.sort((a, b) => a - b);
  return { p50: round(pct(samples, 50)), p99: round(pct(samples, 99)), mean: round(samples.reduce((a, b) => a + b, 0) / n) };
}

export async function runSearchBench(opts: { databaseUrl?: string; agents?: number; runs?: number; warmup?: number } = {}): Promise<SearchBenchResult> {
  const url = opts.databaseUrl ?? process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  const nAgents = opts.agents ?? int('BENCH_AGENTS', 10_000);
  const runs = opts.runs ?? int('BENCH_SEARCH_N', 200);
  const warmup = opts.warmup ?? int('BENCH_WARMUP', 20);
  const schema = `sb_bench_${randomBytes(4).toString('hex')}`;
  const admin = new Pool({ connectionString: url, max: 1 });
  await admin.query(`CREATE SCHEMA ${schema}`);
  const pool = new Pool({ connectionString: url, max: 4, options: `-c search_path=${schema}` });
  const outbound = createOutbound({ allowPrivate: false }); // unused: search makes no outbound calls
  const app = Fastify();
  try {
    await migrate(pool);
    const t0 = performance.now();
    await insertAgents(pool, nAgents);
    const insertSeconds = round((performance.now() - t0) / 1000);
    const registry = new AgentRegistry(pool, outbound);
    // The registry's routes alone, without the app's authentication: every request acts as the tenant's operator.
    app.addHook('onRequest', async (req) => {
      req.caller = { keyId: 'test', role: 'operator', tenant: TENANT, via: 'key' };
    });
    await app.register(agentRoutes, { registry });
    await app.ready();

    // The queries a client of a marketplace would send; the deep page follows real tokens.
    const cases: { query: string; search: AgentSearch; qs: string }[] = [
      { query: 'rare word (a few cards)', search: { q: 'zq1x' }, qs: 'q=zq1x' },
      { query: 'common word (a quarter of the cards)', search: { q: 'travel' }, qs: 'q=travel' },
      { query: 'two words', search: { q: 'forecast invoices' }, qs: 'q=forecast%20invoices' },
      { query: 'phrase', search: { q: '"book flights"' }, qs: `q=${encodeURIComponent('"book flights"')}` },
      { query: 'q + tag + status', search: { q: 'track parcels', tags: ['logistics'], statuses: ['healthy'] }, qs: 'q=track%20parcels&tag=logistics&status=healthy' },
      { query: 'tag filter only', search: { tags: ['weather'] }, qs: 'tag=weather' },
      { query: 'skill id filter only', search: { skills: ['book-flights-0'] }, qs: 'skill=book-flights-0' },
      { query: 'status filter only', search: { statuses: ['down'] }, qs: 'status=down' },
      { query: 'plain list, first page', search: {}, qs: '' },
    ];
    // Page 5 of the common query (pageSize 50): the token of page 4.
    let token = '';
    for (let i = 0; i < 4; i++) token = (await registry.search(TENANT, { q: 'travel', pageToken: token || undefined })).nextPageToken;
    cases.push({ query: 'common word, page 5', search: { q: 'travel', pageToken: token }, qs: `q=travel&pageToken=${token}` });

    const queries: QueryResult[] = [];
    for (const c of cases) {
      const matches = await countMatches(registry, c.search);
      const db = await time(runs, warmup, () => registry.search(TENANT, c.search));
      const http = await time(runs, warmup, async () => {
        const res = await app.inject({ method: 'GET', url: `/agents?${c.qs}` });
        if (res.statusCode !== 200) throw new Error(`${c.qs}: HTTP ${res.statusCode} ${res.body}`);
      });
      queries.push({ query: c.query, matches, dbP50Ms: db.p50, dbP99Ms: db.p99, dbMeanMs: db.mean, httpP50Ms: http.p50, httpP99Ms: http.p99 });
    }
    const plan = await pool.query<{ 'QUERY PLAN': string }>(
      `EXPLAIN SELECT id FROM agents a, websearch_to_tsquery('english', 'zq1x') query WHERE a.tenant = 'default' AND a.search @@ query`,
    );
    // The GIN index must serve a selective query (a Seq Scan here would mean the index is not used).
    const selectivePlan = plan.rows.map((r) => r['QUERY PLAN'].trim().replace(/^->\s*/, '')).find((l) => /Index Scan|Seq Scan/.test(l)) ?? '';
    return { agents: nAgents, runsPerQuery: runs, insertSeconds, loadAvg1m: round(os.loadavg()[0]!), selectivePlan, queries };
  } finally {
    await app.close();
    await outbound.close();
    await pool.end();
    await admin.query(`DROP SCHEMA ${schema} CASCADE`);
    await admin.end();
  }
}

/** Total matches of a search (all pages), for the report. */
async function countMatches(registry: AgentRegistry, s: AgentSearch): Promise<number> {
  let n = 0;
  let token: string | undefined;
  do {
    const page = await registry.search(TENANT, { ...s, pageSize: 100, pageToken: token });
    n += page.agents.length;
    token = page.nextPageToken || undefined;
  } while (token);
  return n;
}

if (require.main === module) {
  runSearchBench().then(
    (result) => console.log(JSON.stringify(result, null, 2)),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}
