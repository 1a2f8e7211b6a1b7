/**
 * `BENCH_ONLY=growth npm run bench`: does a task's cost stay flat as the tables grow? Two schemas of DATABASE_URL
 * get the same working set for the measured tenant (`default`, bench/growth-data.ts: 2,000 tasks in 20 contexts,
 * one task of 1,000 events, their settlements and 51 accounts, 1,000 agents of which 10 match the search); the
 * second also gets, in bulk (generate_series INSERTs), BENCH_GROWTH_TASKS tasks (default 1,000,000) with
 * BENCH_GROWTH_EVENTS events each (default 10) and their claims over 100 other tenants and 1,000 agents, the
 * measured tenant's history as retention leaves it (settlements, ledger entries, trust events and tombstones of
 * BENCH_GROWTH_TASKS / 5 purged tasks), and 99,000 more agents, none matching the search. Then each hot statement
 * is timed through the code that runs it, at c=1 and c=16, in both: GetTask's projection read, ListTasks (first
 * page and the 20th, by state and by context), SubscribeToTask's replay from event 0, a new task's claim and
 * submit, search (a selective query), the quota counts, and incremental reconcile (with the same minute of recent
 * activity in both). Prints one line per operation and `growth: worst ratio X.XX (<op>)` (full p50 / empty p50, the
 * median over alternated rounds).
 *
 * Env: DATABASE_URL, BENCH_GROWTH_TASKS, BENCH_GROWTH_EVENTS, BENCH_GROWTH_N (timed calls per round at c=1,
 * default 200: 5 × N for the operations under a millisecond, N/4 for the replay and reconcile; c=16 makes 16 × that
 * / 4), BENCH_GROWTH_ROUNDS (alternated rounds per side, default 7), BENCH_GROWTH_KEEP=1 (fill the full schema once
 * as `sb_growth_kept` and keep it: a later run with the same size reuses it, after resetting the measured tenant's
 * working set; the empty one, `sb_growth_kept_empty`, is made afresh and kept too, to compare plans).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Pool } from 'pg';
import { migrate } from '../src/core/db/migrate';
import { findTask, listTasks } from '../src/core/db/task-store';
import { readEvents } from '../src/core/events/event-log';
import { claimWithinQuota } from '../src/core/auth/quotas';
import { reconcile } from '../src/core/ledger/reconcile';
import { AgentRegistry } from '../src/core/agents/registry';
import { createOutbound } from '../src/core/http/outbound';
import { fill, recentActivity, SEARCH_WORD, TENANT, TERMINAL, workingSet } from './growth-data';

const int = (name: string, def: number) => (process.env[name] ? Number.parseInt(process.env[name]!, 10) : def);
const TASKS = int('BENCH_GROWTH_TASKS', 1_000_000);
const EVENTS = int('BENCH_GROWTH_EVENTS', 10);
const N = int('BENCH_GROWTH_N', 200);
const ROUNDS = Math.max(1, int('BENCH_GROWTH_ROUNDS', 7));
const KEEP = process.env.BENCH_GROWTH_KEEP === '1';
const KEPT_SCHEMA = 'sb_growth_kept';
const QUOTAS = { openTasks: 1_000_000, newTasksPerDay: 100_000_000, streamsPerKey: 1000, requestsPerSecond: 1000, requestsPerSecondPerKey: 1000 };

export interface GrowthLine {
  op: string;
  concurrency: number;
  emptyP50Ms: number;
  fullP50Ms: number;
  ratio: number;
}

export interface GrowthReport {
  tasks: number;
  events: number;
  fillSeconds: number;
  lines: GrowthLine[];
  worst: GrowthLine;
}

const log = (msg: string) => console.error(`growth: ${msg}`);
const round = (x: number, d = 2) => Math.round(x * 10 ** d) / 10 ** d;

/**
 * `setup` runs on both schemas before the operation's rounds (the same moment for both, give or take a second);
 * `tidy` after each of its rounds, untimed.
 */
type Op = { name: string; run: () => Promise<unknown>; n1?: number; setup?: () => Promise<unknown>; tidy?: () => Promise<unknown> };

/** Calls per round at c=1 of the operations under a millisecond: enough that a round spans a few hundred ms. */
const LIGHT = N * 5;

function ops(pool: Pool, registry: AgentRegistry, deepToken: { state: string; context: string }): Op[] {
  let k = 0;
  return [
    { name: 'GetTask', run: () => findTask(pool, TENANT, `bt${1 + (k++ % 2000)}`), n1: LIGHT },
    { name: 'ListTasks first page (state)', run: () => listTasks(pool, TENANT, undefined, { status: 'TASK_STATE_COMPLETED' as never, pageSize: 50 }), n1: LIGHT },
    { name: 'ListTasks first page (context)', run: () => listTasks(pool, TENANT, undefined, { contextId: `bc${k++ % 20}`, pageSize: 50 }), n1: LIGHT },
    { name: 'ListTasks page 20 (state)', run: () => listTasks(pool, TENANT, undefined, { status: 'TASK_STATE_COMPLETED' as never, pageSize: 50, pageToken: deepToken.state }), n1: LIGHT },
    { name: 'ListTasks page 20 (context)', run: () => listTasks(pool, TENANT, undefined, { contextId: 'bc1', pageSize: 5, pageToken: deepToken.context }), n1: LIGHT },
    {
      name: 'SubscribeToTask replay (1,000 events)',
      run: async () => {
        for (let after = 0; ; ) {
          const page = await readEvents(pool, TENANT, 'bt-big', after);
          if (page.length === 0) return;
          after = page[page.length - 1]!.seq;
        }
      },
      n1: Math.ceil(N / 4),
    },
    {
      name: 'new task claim + submit',
      run: () => {
        const taskId = randomUUID();
        const first = [{ key: 'submitted', event: { task: { id: taskId, contextId: randomUUID(), status: { state: 'TASK_STATE_SUBMITTED' } } } }];
        return claimWithinQuota(pool, TENANT, randomUUID(), taskId, QUOTAS, 'agent-1', first as never);
      },
      // No workflow writes these tasks' projection rows, which in service record a claim within moments: record all
      // but the newest 20 (each claim counts the unrecorded ones), and vacuum as autovacuum would, on both sides.
      tidy: async () => {
        await pool.query(
          `UPDATE message_tasks SET recorded = true WHERE tenant = $1 AND NOT recorded
              AND message_id NOT IN (SELECT message_id FROM message_tasks WHERE tenant = $1 AND NOT recorded ORDER BY created_at DESC LIMIT 20)`,
          [TENANT],
        );
        await pool.query('VACUUM (INDEX_CLEANUP ON) message_tasks');
      },
    },
    { name: 'search (selective, 1k vs 100k agents)', run: () => registry.search(TENANT, { q: SEARCH_WORD }), n1: LIGHT },
    {
      name: 'quota counts',
      n1: LIGHT,
      run: () =>
        pool.query(
          `SELECT (SELECT count(*) FROM tasks t WHERE t.tenant = $1 AND t.state NOT IN ${TERMINAL})
                + (SELECT count(*) FROM message_tasks m WHERE m.tenant = $1 AND NOT m.recorded AND m.created_at > now() - interval '5 minutes') AS open,
                  (SELECT count FROM tenant_daily_tasks WHERE tenant = $1 AND day = (now() AT TIME ZONE 'UTC')::date) AS today`,
          [TENANT],
        ),
    },
    {
      name: 'reconcile (incremental)',
      // What its window holds: the last minute's 20 settled tasks, in both schemas; the rest is older history.
      setup: () => recentActivity(pool, randomBytes(3).toString('hex')),
      run: () => reconcile(pool, TENANT),
      n1: Math.ceil(N / 4),
    },
  ];
}

async function deepTokens(pool: Pool): Promise<{ state: string; context: string }> {
  const follow = async (q: Parameters<typeof listTasks>[3], pages: number) => {
    let token = '';
    for (let i = 1; i < pages; i++) token = (await listTasks(pool, TENANT, undefined, { ...q, pageToken: token || undefined })).nextPageToken;
    return token;
  };
  return { state: await follow({ status: 'TASK_STATE_COMPLETED' as never, pageSize: 50 }, 20), context: await follow({ contextId: 'bc1', pageSize: 5 }, 20) };
}

/** p50 (ms) of `n` calls from `concurrency` loops, after a warm-up. */
async function timeOp(op: Op, concurrency: number): Promise<number> {
  const n = concurrency === 1 ? (op.n1 ?? N) : Math.max(concurrency, Math.ceil(((op.n1 ?? N) * concurrency) / 4));
  for (let i = 0; i < Math.min(20, n); i++) await op.run();
  const samples: number[] = [];
  let left = n;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (left-- > 0) {
        const t = performance.now();
        await op.run();
        samples.push(performance.now() - t);
      }
    }),
  );
  samples.sort((a, b) => a - b);
  return samples[Math.floor(samples.length / 2)]!;
}

function median(xs: number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** A fresh schema of its own (or `name`, created if missing), migrated, and a pool that uses it. */
async function schemaPool(url: string, admin: Pool, name?: string): Promise<{ pool: Pool; schema: string }> {
  const schema = name ?? `sb_growth_${randomBytes(4).toString('hex')}`;
  await admin.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
  const pool = new Pool({ connectionString: url, max: 20, options: `-c search_path=${schema}` });
  await migrate(pool);
  return { pool, schema };
}

/**
 * Each operation on both schemas in ROUNDS rounds, which side goes first alternating (empty, full; full, empty;
 * …). Load from other work on the box comes and goes over seconds: a round's two sides run back to back, under
 * much the same load, so the ratio is the median of the rounds' full/empty ratios, and the p50 columns the median
 * of each side's per-round p50s. A round that other work slowed, or one that ran in a lull, moves neither much,
 * while a cost that grows with the tables is in every round's ratio. Each round's p50s are logged (stderr).
 */
async function measureBoth(empty: Pool, full: Pool): Promise<GrowthLine[]> {
  const sides = await Promise.all([empty, full].map(async (pool) => ({ pool, registry: new AgentRegistry(pool, createOutbound({ allowPrivate: false })), tokens: await deepTokens(pool) })));
  const [e, f] = sides.map((s) => ops(s.pool, s.registry, s.tokens)) as [Op[], Op[]];
  const lines: GrowthLine[] = [];
  for (let i = 0; i < e.length; i++) {
    await Promise.all([e[i]!.setup?.(), f[i]!.setup?.()]);
    for (const c of [1, 16]) {
      const p50s = { empty: [] as number[], full: [] as number[] };
      for (let r = 0; r < ROUNDS; r++) {
        for (const side of r % 2 === 0 ? (['empty', 'full'] as const) : (['full', 'empty'] as const)) {
          const op = (side === 'empty' ? e : f)[i]!;
          p50s[side].push(await timeOp(op, c));
          await op.tidy?.();
        }
      }
      const emptyP50 = median(p50s.empty);
      const fullP50 = median(p50s.full);
      const show = (xs: number[]) => xs.map((x) => x.toFixed(2)).join(' ');
      log(`${e[i]!.name} c=${c}: empty p50s ${show(p50s.empty)} ms; full p50s ${show(p50s.full)} ms`);
      const ratio = median(p50s.full.map((x, r) => x / p50s.empty[r]!));
      lines.push({ op: e[i]!.name, concurrency: c, emptyP50Ms: round(emptyP50, 3), fullP50Ms: round(fullP50, 3), ratio: round(ratio) });
    }
  }
  return lines;
}

/** Whether the kept schema holds a complete fill of this size (a fill records it in the schema's comment). */
async function keptFill(admin: Pool): Promise<{ fillSeconds: number } | undefined> {
  const { rows } = await admin.query<{ c: string | null }>(`SELECT obj_description(oid, 'pg_namespace') AS c FROM pg_namespace WHERE nspname = $1`, [KEPT_SCHEMA]);
  if (!rows[0]) return undefined;
  const kept = rows[0].c ? (JSON.parse(rows[0].c) as { tasks: number; events: number; fillSeconds: number }) : undefined;
  if (kept && kept.tasks === TASKS && kept.events === EVENTS) return kept;
  log(`${KEPT_SCHEMA} is not a complete fill of this size: filling it again`);
  await admin.query(`DROP SCHEMA ${KEPT_SCHEMA} CASCADE`);
  return undefined;
}

/** Sets up the working set (and fills the full schema unless kept), then checks the ledger is clean in both. */
async function prepare(empty: Pool, full: Pool, schema: string, kept: { fillSeconds: number } | undefined, admin: Pool): Promise<number> {
  // Vacuumed with index cleanup, so that no page keeps dead line pointers (a vacuum of a big table with few dead
  // rows skips its indexes and leaves them, and such a page is never all-visible): a kept full schema's reset
  // would otherwise leave the working set's pages needing a heap fetch per row in index-only scans, where the fresh
  // empty schema's need none.
  const vacuum = 'VACUUM (ANALYZE, INDEX_CLEANUP ON)';
  await workingSet(empty);
  await empty.query(vacuum);
  let fillSeconds = kept?.fillSeconds ?? 0;
  if (kept) log(`reusing ${schema} (filled before in ${fillSeconds} s); resetting the working set`);
  else {
    log(`empty schema ready; filling ${TASKS} tasks × ${EVENTS} events into ${schema}`);
    const t0 = performance.now();
    await fill(full, TASKS, EVENTS);
    fillSeconds = round((performance.now() - t0) / 1000, 0);
    log(`filled in ${fillSeconds} s`);
  }
  await workingSet(full);
  await full.query(vacuum);
  if (KEEP && !kept) await admin.query(`COMMENT ON SCHEMA ${schema} IS '${JSON.stringify({ tasks: TASKS, events: EVENTS, fillSeconds })}'`);
  // The first reconcile sums the tenant's whole ledger once (reconcile_sums) and checks the last day; what is
  // timed is every later run. Both must be clean, or the window would not move and the runs would differ.
  for (const [name, pool] of [['empty', empty], ['full', full]] as const) {
    const first = await reconcile(pool, TENANT);
    if (!first.ok) throw new Error(`growth: the ${name} schema's ledger is not clean: ${JSON.stringify(first.invariants.filter((v) => !v.ok))}`);
  }
  return fillSeconds;
}

export async function benchGrowth(): Promise<GrowthReport> {
  const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  const admin = new Pool({ connectionString: url, max: 1 });
  const kept = KEEP ? await keptFill(admin) : undefined;
  // A kept empty schema is made afresh at each run, and kept too (to compare plans with the full one's).
  if (KEEP) await admin.query(`DROP SCHEMA IF EXISTS ${KEPT_SCHEMA}_empty CASCADE`);
  const empty = await schemaPool(url, admin, KEEP ? `${KEPT_SCHEMA}_empty` : undefined);
  const full = await schemaPool(url, admin, KEEP ? KEPT_SCHEMA : undefined);
  try {
    const fillSeconds = await prepare(empty.pool, full.pool, full.schema, kept, admin);
    const lines = await measureBoth(empty.pool, full.pool);
    const worst = lines.reduce((a, b) => (b.ratio > a.ratio ? b : a));
    return { tasks: TASKS, events: TASKS * EVENTS, fillSeconds, lines, worst };
  } finally {
    await empty.pool.end();
    await full.pool.end();
    if (KEEP) log(`kept ${full.schema} and ${empty.schema} (a later BENCH_GROWTH_KEEP=1 run reuses the first; DROP SCHEMA … CASCADE when done)`);
    else await admin.query(`DROP SCHEMA ${empty.schema}, ${full.schema} CASCADE`);
    await admin.end();
  }
}

export function printGrowth(r: GrowthReport): void {
  console.log(`\ngrowth: ${r.tasks.toLocaleString('en')} tasks, ${r.events.toLocaleString('en')} events (filled in ${r.fillSeconds} s); p50 per call (median of ${ROUNDS} rounds), ratio: the rounds' median full / empty`);
  for (const l of r.lines) console.log(`growth: ${`${l.op} c=${l.concurrency}`.padEnd(48)} empty ${l.emptyP50Ms.toFixed(3).padStart(8)} ms  full ${l.fullP50Ms.toFixed(3).padStart(8)} ms  ratio ${l.ratio.toFixed(2)}`);
  console.log(`growth: worst ratio ${r.worst.ratio.toFixed(2)} (${r.worst.op} c=${r.worst.concurrency})`);
}
