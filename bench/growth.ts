/**
 * `BENCH_ONLY=growth npm run bench`: does a task's cost stay flat as the tables grow? Two fresh schemas of
 * DATABASE_URL get the same working set for the measured tenant (`default`: 2,000 tasks in 20 contexts, one task
 * of 1,000 events, 1,000 agents); the second also gets, in bulk (generate_series INSERTs), BENCH_GROWTH_TASKS
 * tasks (default 1,000,000) with BENCH_GROWTH_EVENTS events each (default 10) and their claims over 100 other
 * tenants and 1,000 agents, the measured tenant's history as retention leaves it (settlements, ledger entries,
 * trust events and tombstones of BENCH_GROWTH_TASKS / 5 purged tasks), and a registry of 100,000 agents. Then each
 * hot statement is timed through the code that runs it, at c=1 and c=16, in both: GetTask's projection read,
 * ListTasks (first page and the 20th, by state and by context), SubscribeToTask's replay from event 0, a new
 * task's claim and submit, search (a selective query), the quota counts, and incremental reconcile.
 * Prints one line per operation and `growth: worst ratio X.XX (<op>)` (full p50 / empty p50).
 *
 * Env: DATABASE_URL, BENCH_GROWTH_TASKS, BENCH_GROWTH_EVENTS, BENCH_GROWTH_N (timed calls per op at c=1, default
 * 200; c=16 makes 16 × N/4), BENCH_GROWTH_KEEP=1 (leave the full schema, printed, for EXPLAIN).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Pool, type PoolClient } from 'pg';
import { migrate } from '../src/db/migrate';
import { findTask, listTasks } from '../src/db/task-store';
import { readEvents } from '../src/events/event-log';
import { claimWithinQuota } from '../src/auth/quotas';
import { reconcile } from '../src/ledger/reconcile';
import { AgentRegistry } from '../src/agents/registry';
import { createOutbound } from '../src/http/outbound';
import { insertAgents } from './search';

const int = (name: string, def: number) => (process.env[name] ? Number.parseInt(process.env[name]!, 10) : def);
const TASKS = int('BENCH_GROWTH_TASKS', 1_000_000);
const EVENTS = int('BENCH_GROWTH_EVENTS', 10);
const N = int('BENCH_GROWTH_N', 200);
const TENANT = 'default';
const TERMINAL = `('TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED')`;
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

/** The measured tenant's working set, the same in both schemas. */
async function workingSet(pool: Pool): Promise<void> {
  await pool.query(
    `INSERT INTO tasks (tenant, task_id, context_id, agent_id, state, status_timestamp, version, task, created_at, updated_at)
     SELECT $1, 'bt' || i, 'bc' || (i % 20), 'agent-' || (i % 50), st, ts, 3,
            jsonb_build_object('id', 'bt' || i, 'contextId', 'bc' || (i % 20), 'kind', 'task', 'status', jsonb_build_object('state', st, 'timestamp', ts)), ts, ts
       FROM generate_series(1, 2000) i,
            LATERAL (SELECT (ARRAY['TASK_STATE_COMPLETED', 'TASK_STATE_COMPLETED', 'TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_INPUT_REQUIRED'])[1 + i % 5] AS st,
                            now() - i * interval '10 seconds' AS ts) x`,
    [TENANT],
  );
  await pool.query(
    `INSERT INTO tasks (tenant, task_id, context_id, agent_id, state, status_timestamp, version, task, created_at)
     VALUES ($1, 'bt-big', 'bc-big', 'agent-1', 'TASK_STATE_COMPLETED', now(), 3, '{"id":"bt-big","contextId":"bc-big","kind":"task","status":{"state":"TASK_STATE_COMPLETED"}}', now())`,
    [TENANT],
  );
  await pool.query(
    `INSERT INTO task_events (tenant, task_id, seq, event_key, kind, event)
     SELECT $1, 'bt-big', s, 'k' || s, 'artifactUpdate',
            jsonb_build_object('artifactUpdate', jsonb_build_object('taskId', 'bt-big', 'contextId', 'bc-big', 'append', true,
              'artifact', jsonb_build_object('artifactId', 'a', 'parts', jsonb_build_array(jsonb_build_object('text', repeat('x', 40) || s)))))
       FROM generate_series(1, 1000) s`,
    [TENANT],
  );
  await pool.query(`INSERT INTO task_event_heads (tenant, task_id, last_seq) VALUES ($1, 'bt-big', 1000)`, [TENANT]);
  await insertAgents(pool, 1000);
}

/** Everything else a year of traffic leaves, in bulk. */
async function fill(pool: Pool): Promise<void> {
  await pool.query(`INSERT INTO tenants (id, name) SELECT 'g' || lpad(i::text, 3, '0'), 'growth ' || i FROM generate_series(0, 99) i`);
  // Bulk rows are written whole (claims recorded, as the triggers of 020 would leave them): the triggers' per-row
  // statements, planned while the tables were empty, would otherwise scan every claim for each task.
  const client = await pool.connect();
  try {
    await client.query(`SET session_replication_role = replica`);
    await fillTasks(client);
  } finally {
    await client.query(`RESET session_replication_role`);
    client.release();
  }
  // The measured tenant's past as retention leaves it: the tasks are gone, the ledger of them is not.
  const purged = Math.floor(TASKS / 5);
  await pool.query(
    `INSERT INTO settlements (tenant, task_id, agent_id, requester, final_state, amount_minor, created_at)
     SELECT $1, 'ht' || i, 'agent-' || (i % 50), $1, 'TASK_STATE_COMPLETED', 10, now() - interval '2 days' - (i % 5000000) * interval '1 second'
       FROM generate_series(1, $2::int) i`,
    [TENANT, purged],
  );
  await pool.query(
    `INSERT INTO ledger_entries (settlement_id, tenant, account, amount_minor, movement_key, kind, task_id, created_at)
     SELECT s.id, s.tenant, a.account, CASE WHEN a.account LIKE 'requester:%' THEN -10 ELSE 10 END, 'settle:' || s.task_id, 'capture', s.task_id, s.created_at
       FROM settlements s, LATERAL (VALUES ('requester:' || s.tenant), ('agent:' || s.agent_id)) a(account)
      WHERE s.tenant = $1 AND s.task_id LIKE 'ht%'`,
    [TENANT],
  );
  await pool.query(
    `INSERT INTO trust_events (tenant, task_id, agent_id, outcome, started_at, ended_at)
     SELECT tenant, task_id, agent_id, 'completed', created_at, created_at FROM settlements WHERE tenant = $1 AND task_id LIKE 'ht%'`,
    [TENANT],
  );
  await pool.query(
    `INSERT INTO purged_tasks (tenant, task_id, state, ended_at) SELECT tenant, task_id, final_state, created_at FROM settlements WHERE tenant = $1 AND task_id LIKE 'ht%'`,
    [TENANT],
  );
  await pool.query(
    `INSERT INTO accounts (tenant, account, kind, balance_minor, unlimited)
     SELECT $1, account, split_part(account, ':', 1), sum(amount_minor), true FROM ledger_entries WHERE tenant = $1 GROUP BY account`,
    [TENANT],
  );
  log(`filled the measured tenant's ledger history (${purged} purged tasks)`);
  // The registry: 100,000 agents (the working set's first 1,000 are the same cards).
  await pool.query(`DELETE FROM agents WHERE tenant = $1`, [TENANT]);
  await insertAgents(pool, 100_000);
  log('filled 100,000 agents');
}

/** The 1M tasks, their events, heads and claims, in chunks of 100,000. */
async function fillTasks(client: PoolClient): Promise<void> {
  const chunk = 100_000;
  for (let from = 1; from <= TASKS; from += chunk) {
    const to = Math.min(TASKS, from + chunk - 1);
    const t0 = performance.now();
    await client.query(
      `INSERT INTO tasks (tenant, task_id, context_id, agent_id, state, status_timestamp, version, task, created_at, updated_at)
       SELECT 'g' || lpad((i % 100)::text, 3, '0'), 'gt' || i, 'gc' || (i / 5), 'ga' || (i % 1000), st, ts, 3,
              jsonb_build_object('id', 'gt' || i, 'contextId', 'gc' || (i / 5), 'kind', 'task', 'status', jsonb_build_object('state', st, 'timestamp', ts)), ts, ts
         FROM generate_series($1::int, $2::int) i,
              LATERAL (SELECT (ARRAY['TASK_STATE_COMPLETED', 'TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED'])[1 + i % 4] AS st,
                              now() - interval '1 day' - (i % 2592000) * interval '1 second' AS ts) x`,
      [from, to],
    );
    await client.query(
      `INSERT INTO task_events (tenant, task_id, seq, event_key, kind, event, created_at)
       SELECT 'g' || lpad((i % 100)::text, 3, '0'), 'gt' || i, s, 'k' || s, 'statusUpdate',
              jsonb_build_object('statusUpdate', jsonb_build_object('taskId', 'gt' || i, 'contextId', 'gc' || (i / 5), 'status', jsonb_build_object('state', 'TASK_STATE_WORKING'))),
              now() - interval '1 day'
         FROM generate_series($1::int, $2::int) i, generate_series(1, $3::int) s`,
      [from, to, EVENTS],
    );
    await client.query(
      `INSERT INTO task_event_heads (tenant, task_id, last_seq) SELECT 'g' || lpad((i % 100)::text, 3, '0'), 'gt' || i, $3 FROM generate_series($1::int, $2::int) i`,
      [from, to, EVENTS],
    );
    await client.query(
      `INSERT INTO message_tasks (tenant, message_id, task_id, agent_id, created_at, recorded)
       SELECT 'g' || lpad((i % 100)::text, 3, '0'), 'gm' || i, 'gt' || i, 'ga' || (i % 1000), now() - interval '1 day', true FROM generate_series($1::int, $2::int) i`,
      [from, to],
    );
    log(`filled tasks ${from}–${to} (${round((performance.now() - t0) / 1000, 1)} s)`);
  }
}

type Op = { name: string; run: () => Promise<unknown>; n1?: number };

function ops(pool: Pool, registry: AgentRegistry, deepToken: { state: string; context: string }): Op[] {
  let k = 0;
  return [
    { name: 'GetTask', run: () => findTask(pool, TENANT, `bt${1 + (k++ % 2000)}`) },
    { name: 'ListTasks first page (state)', run: () => listTasks(pool, TENANT, undefined, { status: 'TASK_STATE_COMPLETED' as never, pageSize: 50 }) },
    { name: 'ListTasks first page (context)', run: () => listTasks(pool, TENANT, undefined, { contextId: `bc${k++ % 20}`, pageSize: 50 }) },
    { name: 'ListTasks page 20 (state)', run: () => listTasks(pool, TENANT, undefined, { status: 'TASK_STATE_COMPLETED' as never, pageSize: 50, pageToken: deepToken.state }) },
    { name: 'ListTasks page 20 (context)', run: () => listTasks(pool, TENANT, undefined, { contextId: 'bc1', pageSize: 5, pageToken: deepToken.context }) },
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
    },
    { name: 'search (selective, 1k vs 100k agents)', run: () => registry.search(TENANT, { q: 'zq1x' }) },
    {
      name: 'quota counts',
      run: () =>
        pool.query(
          `SELECT (SELECT count(*) FROM tasks t WHERE t.tenant = $1 AND t.state NOT IN ${TERMINAL})
                + (SELECT count(*) FROM message_tasks m WHERE m.tenant = $1 AND NOT m.recorded AND m.created_at > now() - interval '5 minutes') AS open,
                  (SELECT count FROM tenant_daily_tasks WHERE tenant = $1 AND day = (now() AT TIME ZONE 'UTC')::date) AS today`,
          [TENANT],
        ),
    },
    { name: 'reconcile (incremental)', run: () => reconcile(pool, TENANT), n1: Math.ceil(N / 4) },
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

async function schemaPool(url: string, admin: Pool): Promise<{ pool: Pool; schema: string }> {
  const schema = `sb_growth_${randomBytes(4).toString('hex')}`;
  await admin.query(`CREATE SCHEMA ${schema}`);
  const pool = new Pool({ connectionString: url, max: 20, options: `-c search_path=${schema}` });
  await migrate(pool);
  return { pool, schema };
}

/**
 * Each operation on both schemas, alternated (empty, full, empty, full): whichever ran first would otherwise pay
 * the warm-up. The lower p50 of each side's two rounds is kept.
 */
async function measureBoth(empty: Pool, full: Pool): Promise<GrowthLine[]> {
  const sides = await Promise.all([empty, full].map(async (pool) => ({ pool, registry: new AgentRegistry(pool, createOutbound({ allowPrivate: false })), tokens: await deepTokens(pool) })));
  const [e, f] = sides.map((s) => ops(s.pool, s.registry, s.tokens)) as [Op[], Op[]];
  const lines: GrowthLine[] = [];
  for (let i = 0; i < e.length; i++) {
    for (const c of [1, 16]) {
      const emptyP50 = await timeOp(e[i]!, c);
      const fullP50 = await timeOp(f[i]!, c);
      const emptyAgain = Math.min(emptyP50, await timeOp(e[i]!, c));
      const fullAgain = Math.min(fullP50, await timeOp(f[i]!, c));
      lines.push({ op: e[i]!.name, concurrency: c, emptyP50Ms: round(emptyAgain, 3), fullP50Ms: round(fullAgain, 3), ratio: round(fullAgain / emptyAgain) });
    }
    log(`measured ${e[i]!.name}`);
  }
  return lines;
}

export async function benchGrowth(): Promise<GrowthReport> {
  const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  const admin = new Pool({ connectionString: url, max: 1 });
  const empty = await schemaPool(url, admin);
  const full = await schemaPool(url, admin);
  try {
    await workingSet(empty.pool);
    await empty.pool.query('VACUUM ANALYZE');
    log(`empty schema ready; filling ${TASKS} tasks × ${EVENTS} events into ${full.schema}`);
    const t0 = performance.now();
    await workingSet(full.pool);
    await fill(full.pool);
    await full.pool.query('VACUUM ANALYZE');
    const fillSeconds = round((performance.now() - t0) / 1000, 0);
    log(`filled in ${fillSeconds} s`);
    // The first reconcile sums the tenant's whole ledger once (reconcile_sums); what is timed is every later run.
    await reconcile(empty.pool, TENANT);
    await reconcile(full.pool, TENANT);
    const lines = await measureBoth(empty.pool, full.pool);
    const worst = lines.reduce((a, b) => (b.ratio > a.ratio ? b : a));
    return { tasks: TASKS, events: TASKS * EVENTS, fillSeconds, lines, worst };
  } finally {
    await empty.pool.end();
    await full.pool.end();
    await admin.query(`DROP SCHEMA ${empty.schema} CASCADE`);
    if (process.env.BENCH_GROWTH_KEEP === '1') log(`kept ${full.schema} (DROP SCHEMA ${full.schema} CASCADE when done)`);
    else await admin.query(`DROP SCHEMA ${full.schema} CASCADE`);
    await admin.end();
  }
}

export function printGrowth(r: GrowthReport): void {
  console.log(`\ngrowth: ${r.tasks.toLocaleString('en')} tasks, ${r.events.toLocaleString('en')} events (filled in ${r.fillSeconds} s); p50 per call, full / empty`);
  for (const l of r.lines) console.log(`growth: ${`${l.op} c=${l.concurrency}`.padEnd(48)} empty ${l.emptyP50Ms.toFixed(3).padStart(8)} ms  full ${l.fullP50Ms.toFixed(3).padStart(8)} ms  ratio ${l.ratio.toFixed(2)}`);
  console.log(`growth: worst ratio ${r.worst.ratio.toFixed(2)} (${r.worst.op} c=${r.worst.concurrency})`);
}
