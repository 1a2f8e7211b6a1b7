/**
 * Hybrid search at growth (issue 42), part of `BENCH_ONLY=search`: for each size in BENCH_HYBRID_AGENTS (default
 * 10000; `10000,100000` for the growth figure) a fresh schema gets that many synthetic cards (bench/search.ts),
 * every card is embedded through the real path (the card embedder draining migration 037's queue, batched, over
 * HTTP, through the guarded outbound client) from an OpenAI-compatible service started here (vectors of
 * BENCH_HYBRID_DIMS, default 384, from hashed words), and then, alternated, are timed through
 * `AgentRegistry.search`: the full-text query alone (the baseline), the same query hybrid (its vector cached, as a
 * repeated query is), and a new query text each time (one call to the service per search). Prints p50 per size,
 * hybrid / full-text, and the growth ratio (p50 at the largest size / p50 at the smallest), as bench/growth.ts does.
 *
 * Run: npx tsx bench/search-hybrid.ts   Env: DATABASE_URL, BENCH_HYBRID_AGENTS, BENCH_HYBRID_DIMS,
 * BENCH_HYBRID_N (timed searches per kind and size, default 20).
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { Pool } from 'pg';
import { migrate } from '../src/core/db/migrate';
import { AgentRegistry } from '../src/core/agents/registry';
import { CardEmbedder } from '../src/core/agents/card-embedder';
import { Embeddings } from '../src/core/agents/embeddings';
import { createOutbound } from '../src/core/http/outbound';
import { insertAgents } from './search';

const TENANT = 'default';
const int = (name: string, def: number) => (process.env[name] ? Number.parseInt(process.env[name]!, 10) : def);
const round = (x: number, d = 2) => Math.round(x * 10 ** d) / 10 ** d;
const log = (msg: string) => console.error(`search-hybrid: ${msg}`);

export interface HybridSize {
  agents: number;
  embedSeconds: number;
  fullTextP50Ms: number;
  hybridP50Ms: number;
  hybridNewQueryP50Ms: number;
  /** hybrid p50 / full-text p50, same size, same run. */
  hybridOverFullText: number;
}

export interface HybridReport {
  dims: number;
  runs: number;
  loadAvg1m: number;
  sizes: HybridSize[];
  /** Hybrid p50 at the largest size / at the smallest (bench/growth.ts's ratio), when two sizes ran. */
  growthRatio?: number;
  fullTextGrowthRatio?: number;
}

/** Deterministic vectors: each word adds to a few dimensions picked by its hash, so texts with common words are near. */
function vectorOf(text: string, dims: number): number[] {
  const v = new Array<number>(dims).fill(0);
  for (const w of text.toLowerCase().match(/[a-z0-9]+/g) ?? []) {
    let h = 2166136261;
    for (const c of w) h = Math.imul(h ^ c.charCodeAt(0), 16777619) >>> 0;
    for (let k = 0; k < 3; k++) v[(h >>> (k * 7)) % dims]! += k === 0 ? 1 : 0.5;
  }
  return v;
}

async function startService(dims: number): Promise<{ url: string; calls: () => number; close(): Promise<void> }> {
  let calls = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      calls++;
      const { input } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { input: string[] };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ data: input.map((t, index) => ({ index, embedding: vectorOf(t, dims) })) }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    calls: () => calls,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;

async function measureSize(url: string, n: number, dims: number, runs: number, serviceUrl: string): Promise<HybridSize> {
  const schema = `sb_bench_${randomBytes(4).toString('hex')}`;
  const admin = new Pool({ connectionString: url, max: 1 });
  await admin.query(`CREATE SCHEMA ${schema}`);
  const pool = new Pool({ connectionString: url, max: 4, options: `-c search_path=${schema}` });
  const outbound = createOutbound({ allowPrivate: true }); // the service is on 127.0.0.1
  const embedder = new CardEmbedder(pool, new Embeddings({ url: serviceUrl, model: 'bench-hash', timeoutMs: 10_000 }, outbound.fetch));
  try {
    await migrate(pool);
    await insertAgents(pool, n);
    const t0 = performance.now();
    await embedder.start();
    for (;;) {
      const { rows } = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM agent_embed_queue');
      if (rows[0]!.n === 0) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    const embedSeconds = round((performance.now() - t0) / 1000, 1);
    // As autovacuum leaves a table after a bulk insert: the visibility map set, so the bits index is read alone.
    await pool.query('VACUUM ANALYZE agent_embeddings');
    log(`${n} cards embedded in ${embedSeconds} s`);
    const full = new AgentRegistry(pool, outbound);
    const hybrid = new AgentRegistry(pool, outbound, { embedder });
    const q = 'forecast invoices';
    const samples = { full: [] as number[], hybrid: [] as number[], fresh: [] as number[] };
    const timed = async (into: number[], fn: () => Promise<unknown>) => {
      const t = performance.now();
      await fn();
      into.push(performance.now() - t);
    };
    // One warm-up each, then alternated so that the box's load falls on all three alike.
    await full.search(TENANT, { q });
    const first = await hybrid.search(TENANT, { q });
    if (first.ranking !== 'hybrid') throw new Error(`the bench's search ranked ${first.ranking}: ${first.semantic}`);
    for (let i = 0; i < runs; i++) {
      await timed(samples.full, () => full.search(TENANT, { q }));
      await timed(samples.hybrid, () => hybrid.search(TENANT, { q }));
      await timed(samples.fresh, () => hybrid.search(TENANT, { q: `${q} ${i}` }));
    }
    const fullTextP50Ms = round(median(samples.full));
    const hybridP50Ms = round(median(samples.hybrid));
    return { agents: n, embedSeconds, fullTextP50Ms, hybridP50Ms, hybridNewQueryP50Ms: round(median(samples.fresh)), hybridOverFullText: round(hybridP50Ms / fullTextP50Ms) };
  } finally {
    await embedder.stop();
    await outbound.close();
    await pool.end();
    await admin.query(`DROP SCHEMA ${schema} CASCADE`);
    await admin.end();
  }
}

export async function runHybridBench(): Promise<HybridReport> {
  const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  const sizes = (process.env.BENCH_HYBRID_AGENTS ?? '10000').split(',').map((s) => Number.parseInt(s, 10));
  const dims = int('BENCH_HYBRID_DIMS', 384);
  const runs = int('BENCH_HYBRID_N', 20);
  const service = await startService(dims);
  try {
    const measured: HybridSize[] = [];
    for (const n of sizes) measured.push(await measureSize(url, n, dims, runs, service.url));
    const [small, large] = [measured[0]!, measured[measured.length - 1]!];
    const growth = measured.length > 1 ? { growthRatio: round(large.hybridP50Ms / small.hybridP50Ms), fullTextGrowthRatio: round(large.fullTextP50Ms / small.fullTextP50Ms) } : {};
    return { dims, runs, loadAvg1m: round(os.loadavg()[0]!), sizes: measured, ...growth };
  } finally {
    await service.close();
  }
}

export function printHybrid(r: HybridReport): void {
  console.log(`\nhybrid search (${r.dims}-dimension vectors, ${r.runs} runs per kind, load ${r.loadAvg1m}), p50 ms`);
  for (const s of r.sizes) {
    console.log(`  ${s.agents} cards: full-text ${s.fullTextP50Ms}, hybrid ${s.hybridP50Ms} (new query text: ${s.hybridNewQueryP50Ms}), hybrid / full-text ${s.hybridOverFullText}; embedded in ${s.embedSeconds} s`);
  }
  if (r.growthRatio !== undefined) console.log(`  growth: hybrid p50 ratio ${r.growthRatio} (full-text ${r.fullTextGrowthRatio}), ${r.sizes[r.sizes.length - 1]!.agents} vs ${r.sizes[0]!.agents} cards`);
}

if (require.main === module) {
  runHybridBench().then(
    (r) => {
      printHybrid(r);
      console.log(JSON.stringify(r));
    },
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}
