/**
 * `npm run faults`: fault drills on real processes, on loopback (reference/reliability-and-security.md §4.2), each
 * followed by a quiet period and a check of the §4.5 figures. Drills so far:
 *  - F1  kill -9 of the Switchboard process (front door + worker) with tasks in flight, restarted on the same data;
 *  - F2  kill -9 of a front door with 100 open SSE streams, the clients resubscribing at another with Last-Event-ID;
 *  - F3  SIGKILL of the Temporal server, restarted on the same database file;
 *  - F8  immediate stop of PostgreSQL (a cluster the drill creates and drops), then start;
 *  - F4–F7 an agent that hangs, answers 5xx or 429 with Retry-After, resets before or after doing the work,
 *    answers garbage, 50 MB or a malformed event stream, or redirects to an internal address; and a cancel of a
 *    hanging call;
 *  - fuzz of the JSON-RPC front door (10,000 cases on a pinned seed: structure, values, headers);
 *  - F10 the SSRF corpus of §4.4 against the guarded outbound client, at connect time, and DNS rebinding (a
 *    resolver answering public, then private, in turn).
 * Each kill drill runs the same workload: slow tasks in flight, tasks waiting for input, and new messages sent
 * during the outage (refused with 503, then resent with the same messageId). Exit code 1 when a target is missed.
 *
 *  - rolling: long tasks of every kind through graceful restarts of one process (upgraded from an earlier build in the
 *    middle) and of a split cluster (test/faults/rolling.ts).
 * Env: FAULTS_ONLY (comma-separated: f1,f2,f3,f8,agents,fuzz,ssrf,isolation,load,rolling), FAULTS_STREAMS (default 100), FAULTS_SEED (default 8), FAULTS_FUZZ_N (default 10000),
 * TEMPORAL_CLI, DATABASE_URL.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';

const ROOT = path.resolve(__dirname, '../..');
process.env.LOG_LEVEL ??= 'silent';
process.env.DATABASE_URL ??= 'postgres://postgres@127.0.0.1:5432/test';
process.env.TEMPORAL_CLI ||= execFileSync('bash', [path.join(ROOT, 'scripts/ensure-temporal.sh')], { encoding: 'utf8' }).trim().split('\n').pop();

const ONLY = new Set((process.env.FAULTS_ONLY ?? 'f1,f2,f3,f8,agents,fuzz,ssrf,isolation,load,rolling').split(',').map((s) => s.trim()).filter(Boolean));
const SEED = Number(process.env.FAULTS_SEED ?? 8);
const FUZZ_N = Number(process.env.FAULTS_FUZZ_N ?? 10_000);
const V1 = { 'A2A-Version': '1.0' };

interface Figures {
  drill: string;
  acknowledged: number;
  tasksLost: number;
  duplicateSettlements: number;
  ledgerConserved: boolean | 'n/a';
  downstreamDuplicatesAbsorbed: number;
  stuckWorkflows: number;
  refusedDuringOutage: number;
  fakeSuccesses: number;
  recoveryMs: number | 'n/a';
  notes: string[];
}

const results: Figures[] = [];
const userMessage = (text: string, extra: Record<string, unknown> = {}) => ({ messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...extra });

async function call(url: string, key: string, method: string, params: unknown): Promise<{ status: number; json: any }> {
  try {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, ...V1 },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
      signal: AbortSignal.timeout(15_000),
    });
    return { status: res.status, json: await res.json().catch(() => undefined) };
  } catch (err) {
    return { status: 0, json: { error: { message: (err as Error).message } } };
  }
}

const until = async <T>(ms: number, f: () => Promise<T | undefined>): Promise<T | undefined> => {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > end) return undefined;
    await new Promise((r) => setTimeout(r, 250));
  }
};

/** The workload every kill drill runs: in flight, waiting for input, and new messages during the outage. */
class Workload {
  readonly acked = new Map<string, { messageId: string; kind: 'slow' | 'ask' | 'echo' }>();
  readonly refused: { message: Record<string, unknown> }[] = [];
  /** Tasks whose message was accepted while the dependency was down: each must really exist and end. */
  readonly acceptedDuringOutage = new Set<string>();

  constructor(
    private readonly base: string,
    private readonly key: string,
    private readonly agents: { slow: string; ask: string; echo: string },
  ) {}

  private rpc(agentId: string) {
    return `${this.base}/agents/${agentId}/a2a`;
  }

  async before(nSlow: number, nAsk: number): Promise<void> {
    await Promise.all([
      ...Array.from({ length: nSlow }, async (_, i) => {
        const m = userMessage(`slow ${i}`);
        const r = await call(this.rpc(this.agents.slow), this.key, 'SendMessage', { message: m, configuration: { returnImmediately: true } });
        if (r.json?.result?.task?.id) this.acked.set(r.json.result.task.id, { messageId: m.messageId, kind: 'slow' });
      }),
      ...Array.from({ length: nAsk }, async (_, i) => {
        const m = userMessage(`ask ${i}`);
        const r = await call(this.rpc(this.agents.ask), this.key, 'SendMessage', { message: m });
        if (r.json?.result?.task?.id) this.acked.set(r.json.result.task.id, { messageId: m.messageId, kind: 'ask' });
      }),
    ]);
  }

  /** Messages sent while the dependency is down: each must be refused (or, if accepted, really be a task). */
  async during(n: number): Promise<void> {
    for (let i = 0; i < n; i++) {
      const message = userMessage(`during ${i}`);
      const r = await call(this.rpc(this.agents.echo), this.key, 'SendMessage', { message });
      if (r.json?.result?.task?.id) {
        this.acked.set(r.json.result.task.id, { messageId: message.messageId, kind: 'echo' });
        this.acceptedDuringOutage.add(r.json.result.task.id);
      } else this.refused.push({ message });
    }
  }

  /** After recovery: the refused messages again (same messageId), the waiting tasks continued. @returns ms to the first success. */
  async after(t0: number): Promise<number> {
    let first = Number.NaN;
    for (const { message } of this.refused) {
      const r = await until(60_000, async () => {
        const x = await call(this.rpc(this.agents.echo), this.key, 'SendMessage', { message });
        return x.json?.result?.task?.id ? x : undefined;
      });
      if (r) {
        if (Number.isNaN(first)) first = Date.now() - t0;
        this.acked.set(r.json.result.task.id, { messageId: message.messageId as string, kind: 'echo' });
      }
    }
    for (const [taskId, a] of this.acked) {
      if (a.kind !== 'ask') continue;
      await until(60_000, async () => {
        const x = await call(this.rpc(this.agents.ask), this.key, 'SendMessage', { message: userMessage('Ada', { taskId }) });
        if (Number.isNaN(first) && x.json?.result) first = Date.now() - t0;
        return x.json?.result || x.json?.error?.code === -32004 ? true : undefined;
      });
    }
    return first;
  }

  /** Tasks acknowledged but not terminal (or not found) after the quiet period. */
  async lost(quietMs: number): Promise<string[]> {
    const terminal = new Set(['TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED']);
    const open = new Set(this.acked.keys());
    await until(quietMs, async () => {
      for (const id of [...open]) {
        const r = await call(`${this.base}/a2a`, this.key, 'GetTask', { id });
        if (terminal.has(r.json?.result?.status?.state)) open.delete(id);
      }
      return open.size === 0 ? true : undefined;
    });
    return [...open];
  }
}

async function ledgerFigures(pool: import('pg').Pool, base: string, operatorKey: string) {
  const dup = await pool.query(`SELECT tenant, task_id FROM settlements GROUP BY 1, 2 HAVING count(*) > 1
                                UNION ALL SELECT tenant, movement_key FROM ledger_entries GROUP BY tenant, movement_key, account HAVING count(*) > 1`);
  const reconcile = (await (await fetch(`${base}/ledger/reconcile`, { headers: { authorization: `Bearer ${operatorKey}` } })).json()) as { ok: boolean };
  return { duplicateSettlements: dup.rowCount ?? 0, ledgerConserved: reconcile.ok };
}

function downstreamDuplicates(calls: { params: any }[]): number {
  const seen = new Map<string, number>();
  for (const c of calls) {
    const id = c.params?.message?.messageId;
    if (typeof id === 'string') seen.set(id, (seen.get(id) ?? 0) + 1);
  }
  return [...seen.values()].filter((n) => n > 1).length;
}

async function stuck(client: import('@temporalio/client').Client, taskQueue: string): Promise<number> {
  let n = 0;
  for await (const wf of client.workflow.list({ query: `WorkflowType = "taskWorkflow" AND TaskQueue = "${taskQueue}" AND ExecutionStatus = "Running" AND A2ATaskState IN ("submitted", "working")` })) {
    void wf;
    n++;
  }
  return n;
}


/** The §4.5 figures of one kill drill, once its quiet period is over. */
async function figuresOf(
  drill: string,
  w: Workload,
  agents: { slow: { calls: { params: any }[] }; ask: { calls: { params: any }[] }; echo: { calls: { params: any }[] } },
  where: { pool: import('pg').Pool; base: string; operatorKey: string; client: import('@temporalio/client').Client; taskQueue: string },
  recoveryMs: number,
): Promise<Figures> {
  const lost = await w.lost(90_000);
  return {
    drill,
    acknowledged: w.acked.size,
    tasksLost: lost.length,
    ...(await ledgerFigures(where.pool, where.base, where.operatorKey)),
    downstreamDuplicatesAbsorbed: downstreamDuplicates([...agents.slow.calls, ...agents.ask.calls, ...agents.echo.calls]),
    stuckWorkflows: await stuck(where.client, where.taskQueue),
    refusedDuringOutage: w.refused.length,
    fakeSuccesses: lost.filter((id) => w.acceptedDuringOutage.has(id)).length,
    recoveryMs,
    notes: lost.length ? [`not terminal: ${lost.join(', ')}`] : [],
  };
}

// ---- the drills ----

async function withAgents<T>(f: (a: { slow: any; ask: any; echo: any }) => Promise<T>): Promise<T> {
  const { startSlowAgent, startAskingAgent, startEchoAgent } = await import('../agents');
  const [slow, ask, echo] = await Promise.all([startSlowAgent({ ms: 3_000 }), startAskingAgent(), startEchoAgent()]);
  try {
    return await f({ slow, ask, echo });
  } finally {
    await Promise.all([slow.close(), ask.close(), echo.close()]);
  }
}

async function drillTemporal(): Promise<void> {
  const { startGateway, register } = await import('../helpers/harness');
  const { startDevServer } = await import('../../src/embedded/temporal');
  const { TestWorkflowEnvironment } = await import('@temporalio/testing');
  const { SEARCH_ATTRIBUTES } = await import('../../task/messages');
  const { freePort } = await import('../helpers/process');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sb-f3-'));
  const ports = { port: await freePort(), uiPort: await freePort() };
  const start = () => startDevServer({ binary: process.env.TEMPORAL_CLI!, dbFilename: path.join(dir, 't.sqlite'), ...ports, searchAttributes: SEARCH_ATTRIBUTES, log: () => {} });
  let server = await start();
  const env = await TestWorkflowEnvironment.createFromExistingServer({ address: server.address });
  const taskQueue = `f3-${randomBytes(3).toString('hex')}`;
  const gw = await startGateway({ temporal: { env, taskQueue } });
  try {
    await withAgents(async (agents) => {
      const ids = { slow: (await register(gw, agents.slow.url)).id, ask: (await register(gw, agents.ask.url)).id, echo: (await register(gw, agents.echo.url)).id };
      const w = new Workload(gw.url, gw.keys.client, ids);
      await w.before(10, 10);
      await server.kill();
      await until(10_000, async () => ((await fetch(`${gw.url}/readyz`)).status === 503 ? true : undefined));
      await w.during(5);
      server = await start();
      const t0 = Date.now();
      const recoveryMs = await w.after(t0);
      results.push(await figuresOf('F3 Temporal SIGKILL + restart', w, agents, { pool: gw.db.pool, base: gw.url, operatorKey: gw.keys.operator, client: env.client, taskQueue }, recoveryMs));
    });
  } finally {
    await gw.close();
    await env.teardown();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function drillPostgres(): Promise<void> {
  const { startGateway, register } = await import('../helpers/harness');
  const { startPrivatePostgres } = await import('../helpers/private-postgres');
  const { createPool } = await import('../../src/core/db/pool');
  const { migrate } = await import('../../src/core/db/migrate');
  const pg = await startPrivatePostgres();
  const pool = createPool({ connectionString: pg.url, max: 10 });
  await migrate(pool);
  const gw = await startGateway({ db: { pool, schema: 'public', drop: async () => {} } });
  try {
    await withAgents(async (agents) => {
      const ids = { slow: (await register(gw, agents.slow.url)).id, ask: (await register(gw, agents.ask.url)).id, echo: (await register(gw, agents.echo.url)).id };
      const w = new Workload(gw.url, gw.keys.client, ids);
      await w.before(10, 10);
      pg.crash(); // the slow tasks are mid-call: their events, projection writes and settlements hit a dead database
      await until(10_000, async () => ((await fetch(`${gw.url}/readyz`)).status === 503 ? true : undefined));
      await w.during(5);
      await new Promise((r) => setTimeout(r, 3_000)); // long enough for the slow agent to answer into the outage
      pg.start();
      const t0 = Date.now();
      const recoveryMs = await w.after(t0);
      results.push(await figuresOf('F8 PostgreSQL immediate stop + start', w, agents, { pool, base: gw.url, operatorKey: gw.keys.operator, client: gw.env.client, taskQueue: gw.taskQueue }, recoveryMs));
    });
  } finally {
    await gw.close();
    await pool.end();
    pg.destroy();
  }
}

/**
 * F1 at three points of the slow calls (3 s at the agent): right after the messages were accepted (before the
 * agent is called), while the agent works (it has the message; the answer is not back), and as the answers come
 * back (the results, projection writes and settlements in flight); plus one seeded random point.
 */
async function drillProcessAtPoints(): Promise<void> {
  const random = fc.sample(fc.integer({ min: 0, max: 3500 }), { seed: SEED, numRuns: 1 })[0]!;
  for (const [point, offset] of [['before the agent call', 0], ['while the agent works', 1500], ['as answers and settlements land', 2980], ['seeded random point', random]] as const) {
    await drillProcess(point, offset);
  }
}

async function drillProcess(point: string, offset: number): Promise<void> {
  const { createTestDb, startTemporal, DATABASE_URL, TEST_ADMIN_KEY } = await import('../helpers/harness');
  const { freePort, startSwitchboard } = await import('../helpers/process');
  const { KeyStore } = await import('../../src/core/auth/keys');
  const [env, db] = await Promise.all([startTemporal(), createTestDb()]);
  const url = new URL(DATABASE_URL);
  url.searchParams.set('options', `-c search_path=${db.schema}`);
  const taskQueue = `f1-${randomBytes(3).toString('hex')}`;
  const sbEnv = {
    DATABASE_URL: url.toString(), TEMPORAL_ADDRESS: env.address, TEMPORAL_TASK_QUEUE: taskQueue, HOST: '127.0.0.1',
    PORT: String(await freePort()), SWITCHBOARD_ALLOW_PRIVATE_URLS: 'true', SWITCHBOARD_ADMIN_KEY: TEST_ADMIN_KEY,
    SWITCHBOARD_DATA_DIR: mkdtempSync(path.join(os.tmpdir(), 'sb-f1-')), LOG_LEVEL: 'warn', SWITCHBOARD_UNFUNDED_ACCOUNTS: 'unlimited',
  };
  let sb = await startSwitchboard(sbEnv);
  const keys = new KeyStore(db.pool);
  const client = (await keys.create({ tenant: 'default', role: 'client', name: 'f1' })).key;
  const operator = (await keys.create({ tenant: 'default', role: 'operator', name: 'f1 ops' })).key;
  try {
    await withAgents(async (agents) => {
      const reg = async (u: string, price = 0) =>
        ((await (await fetch(`${sb.url}/agents`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${operator}` }, body: JSON.stringify({ url: u, priceMinor: price }) })).json()) as { id: string }).id;
      const ids = { slow: await reg(agents.slow.url, 7), ask: await reg(agents.ask.url, 3), echo: await reg(agents.echo.url) };
      const w = new Workload(sb.url, client, ids);
      await w.before(10, 10);
      await new Promise((r) => setTimeout(r, offset));
      await sb.kill();
      await w.during(3); // nobody listens: refused at the socket, resent after the restart
      sb = await startSwitchboard(sbEnv);
      const t0 = Date.now();
      const recoveryMs = await w.after(t0);
      results.push(await figuresOf(`F1 kill -9 of the Switchboard process: ${point} (${offset} ms)`, w, agents, { pool: db.pool, base: sb.url, operatorKey: operator, client: env.client, taskQueue }, recoveryMs));
    });
  } finally {
    await sb.kill();
    await env.teardown();
    await db.drop();
    rmSync(sbEnv.SWITCHBOARD_DATA_DIR, { recursive: true, force: true });
  }
}


interface AgentFaultRow {
  mode: string;
  expected: string;
  state: string;
  requests: number;
  ms: number;
  ok: boolean;
  detail: string;
}
const agentFaults: AgentFaultRow[] = [];

/** F4–F7: an agent that hangs, fails, throttles, resets, answers garbage or redirects, once or twice, then works. */
async function drillAgentFaults(): Promise<void> {
  const { startGateway, register } = await import('../helpers/harness');
  const { startFaultyAgent } = await import('../agents/faulty');
  let internalHits = 0;
  const internal = http.createServer((_req, res) => {
    internalHits++;
    res.end('{}');
  });
  await new Promise<void>((r) => internal.listen(0, '127.0.0.1', r));
  const internalUrl = `http://127.0.0.1:${(internal.address() as AddressInfo).port}/a2a/jsonrpc`;
  const gw = await startGateway();
  const retry = { maxAttempts: 3, initialIntervalMs: 200, backoffCoefficient: 2, attemptTimeoutMs: 2_000 };
  const cases: { mode: import('../agents/faulty').FaultMode; times: number; expected: 'TASK_STATE_COMPLETED' | 'TASK_STATE_FAILED'; check?: (a: { arrivals: number[]; calls: { method: string; params: any }[] }, ms: number) => string | undefined }[] = [
    { mode: 'hang', times: 1, expected: 'TASK_STATE_COMPLETED', check: (_a, ms) => (ms >= 2_000 ? undefined : `answered in ${ms} ms, before the attempt timeout`) },
    { mode: 'http500', times: 2, expected: 'TASK_STATE_COMPLETED', check: (a) => (a.calls.filter((c) => c.method === 'SendMessage').length === 3 ? undefined : `${a.arrivals.length} requests, expected 3 sends`) },
    {
      mode: 'http429', times: 1, expected: 'TASK_STATE_COMPLETED',
      check: (a) => (a.arrivals.length >= 2 && a.arrivals[1]! - a.arrivals[0]! >= 1_900 ? undefined : `retried after ${a.arrivals[1]! - a.arrivals[0]!} ms despite Retry-After: 2`),
    },
    { mode: 'reset-before', times: 1, expected: 'TASK_STATE_COMPLETED' },
    {
      mode: 'reset-after', times: 1, expected: 'TASK_STATE_COMPLETED',
      check: (a) => {
        const ids = a.calls.map((c) => c.params?.message?.messageId).filter(Boolean);
        return ids.length >= 2 && new Set(ids).size === 1 ? undefined : `the retry carried other messageIds: ${ids.join(', ')}`;
      },
    },
    { mode: 'invalid-json', times: 1, expected: 'TASK_STATE_FAILED' },
    { mode: 'result-and-error', times: 1, expected: 'TASK_STATE_FAILED' },
    { mode: 'wrong-id', times: 1, expected: 'TASK_STATE_FAILED' },
    { mode: 'huge', times: 1, expected: 'TASK_STATE_FAILED', check: (_a, _ms) => undefined },
    { mode: 'redirect-internal', times: 1, expected: 'TASK_STATE_FAILED', check: () => (internalHits === 0 ? undefined : `${internalHits} requests reached the redirect target`) },
    // Malformed event streams: an invalid answer ends the task with the reason (never a hang or a crash); a stream
    // the agent ends before one whole event is such an answer, not network trouble.
    { mode: 'sse-unterminated', times: 1, expected: 'TASK_STATE_FAILED' },
    { mode: 'sse-garbage', times: 1, expected: 'TASK_STATE_FAILED' },
    { mode: 'sse-out-of-order', times: 1, expected: 'TASK_STATE_FAILED' },
  ];
  try {
    for (const c of cases) {
      const agent = await startFaultyAgent({ mode: c.mode, times: c.times, retryAfterS: 2, redirectTo: internalUrl });
      try {
        const { rpc: url } = await register(gw, agent.url, { retry });
        const t0 = Date.now();
        const r = await call(url, gw.keys.client, 'SendMessage', { message: userMessage(`fault ${c.mode}`) });
        const ms = Date.now() - t0;
        const state = r.json?.result?.task?.status?.state ?? `error ${r.json?.error?.code ?? r.status}`;
        const why = JSON.stringify(r.json?.result?.task?.status?.message?.parts?.[0]?.text ?? r.json?.error?.message ?? '').slice(0, 140);
        const problem = state !== c.expected ? `ended ${state}` : c.check?.({ arrivals: agent.arrivals, calls: agent.calls }, ms);
        agentFaults.push({ mode: `${c.mode} ×${c.times}`, expected: c.expected.replace('TASK_STATE_', '').toLowerCase(), state: String(state).replace('TASK_STATE_', '').toLowerCase(), requests: agent.arrivals.length, ms, ok: !problem, detail: problem ?? why });
      } finally {
        await agent.close();
      }
    }
    // A cancel reaches a call that hangs within about one heartbeat.
    const hanging = await startFaultyAgent({ mode: 'hang', times: 1 });
    try {
      const { rpc: url } = await register(gw, hanging.url, { retry: { ...retry, attemptTimeoutMs: 60_000 } });
      const started = await call(url, gw.keys.client, 'SendMessage', { message: userMessage('hang, then cancel'), configuration: { returnImmediately: true } });
      await until(10_000, async () => (hanging.arrivals.length ? true : undefined));
      const t0 = Date.now();
      const canceled = await call(url, gw.keys.client, 'CancelTask', { id: started.json.result.task.id });
      const ms = Date.now() - t0;
      const state = String(canceled.json?.result?.status?.state).replace('TASK_STATE_', '').toLowerCase();
      agentFaults.push({ mode: 'hang, then CancelTask', expected: 'canceled', state, requests: hanging.arrivals.length, ms, ok: state === 'canceled' && ms < 5_000, detail: `canceled ${ms} ms after the request` });
    } finally {
      await hanging.close();
    }
    const health = await fetch(`${gw.url}/healthz`);
    if (health.status !== 200) agentFaults.push({ mode: 'process', expected: 'up', state: 'down', requests: 0, ms: 0, ok: false, detail: 'the gateway stopped answering' });
  } finally {
    await gw.close();
    internal.close();
  }
}


let streamsFigures:
  | {
      streams: number; killedAfterEvents: number; terminalMissed: number; orderViolations: number; textMismatches: number;
      reconnectP50Ms: number; reconnectP99Ms: number; ttfeP50Ms: number; ttfeP99Ms: number; lagP99Ms: number;
      rssPerStreamKiB: number; fdsPerStream: number;
    }
  | undefined;

/**
 * F2: kill -9 of a front door with 100 open streams. Another Switchboard process on the same database and task
 * queue (its worker keeps the workflows going) takes the clients: each resubscribes there with Last-Event-ID.
 */
interface ProcessFigures {
  rssKiB: number;
  fds: number;
}
/** A process's resident memory and open file descriptors, from /proc (Linux). */
function processFigures(pid: number): ProcessFigures | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    return { rssKiB: Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN), fds: readdirSync(`/proc/${pid}/fd`).length };
  } catch {
    return undefined;
  }
}

/** The p-th percentile of `values` (nearest rank); NaN when there are none. */
function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

async function drillStreams(): Promise<void> {
  const { createTestDb, startTemporal, DATABASE_URL, TEST_ADMIN_KEY, startGateway, rememberKeys } = await import('../helpers/harness');
  const { freePort, startSwitchboard } = await import('../helpers/process');
  const { KeyStore } = await import('../../src/core/auth/keys');
  const { startChunkyAgent, chunkedText } = await import('../agents');
  const { sse, assembledText } = await import('../helpers/sse');
  const N = Number(process.env.FAULTS_STREAMS ?? 100);
  const CHUNKS = 200;
  const [env, db] = await Promise.all([startTemporal(), createTestDb()]);
  const url = new URL(DATABASE_URL);
  url.searchParams.set('options', `-c search_path=${db.schema}`);
  const taskQueue = `f2-${randomBytes(3).toString('hex')}`;
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'sb-f2-'));
  const sb = await startSwitchboard({
    DATABASE_URL: url.toString(), TEMPORAL_ADDRESS: env.address, TEMPORAL_TASK_QUEUE: taskQueue, HOST: '127.0.0.1', PORT: String(await freePort()),
    SWITCHBOARD_ALLOW_PRIVATE_URLS: 'true', SWITCHBOARD_ADMIN_KEY: TEST_ADMIN_KEY, SWITCHBOARD_DATA_DIR: dataDir, LOG_LEVEL: 'warn', SWITCHBOARD_UNFUNDED_ACCOUNTS: 'unlimited',
    SWITCHBOARD_MAX_STREAMS_PER_TASK: '10',
  });
  const other = await startGateway({ db, temporal: { env, taskQueue } });
  const client = (await new KeyStore(db.pool).create({ tenant: 'default', role: 'client', name: 'f2' })).key;
  rememberKeys(sb.url, { admin: TEST_ADMIN_KEY, operator: TEST_ADMIN_KEY, client });
  const chunky = await startChunkyAgent({ chunks: CHUNKS, delayMs: 25 });
  try {
    const agentId = ((await (await fetch(`${sb.url}/agents`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${TEST_ADMIN_KEY}` }, body: JSON.stringify({ url: chunky.url, retry: { attemptTimeoutMs: 15_000, initialIntervalMs: 200, maxAttempts: 5 } }) })).json()) as { id: string }).id;
    const seen: { events: { id?: number; data: any }[]; sentAt: number; at: number[] }[] = Array.from({ length: N }, () => ({ events: [], sentAt: 0, at: [] }));
    const before = processFigures(sb.child.pid!);
    let atN: ProcessFigures | undefined;
    let open = 0;
    let killed: Promise<string> | undefined;
    let onKilled!: (how: Promise<string>) => void;
    const killing = new Promise<Promise<string>>((r) => (onKilled = r));
    const kill = () => {
      atN ??= processFigures(sb.child.pid!);
      if (!killed) onKilled((killed = sb.kill()));
    };
    const streams = seen.map((s, i) => {
      s.sentAt = Date.now();
      return sse(`${sb.url}/agents/${agentId}/a2a`, {
        method: 'SendStreamingMessage',
        params: { message: userMessage(`stream ${i}`) },
        onEvent(e) {
          s.events.push(e);
          s.at.push(Date.now());
          if (s.events.length === 5 && ++open === N) kill();
        },
      }).catch(() => undefined);
    });
    setTimeout(kill, 20_000).unref(); // if some stream never got going, kill anyway
    await (await killing);
    await Promise.all(streams);
    const killedAfterEvents = Math.round(seen.reduce((n, s) => n + s.events.length, 0) / N);
    const reconnects: number[] = [];
    let terminalMissed = 0;
    let orderViolations = 0;
    let textMismatches = 0;
    await Promise.all(
      seen.map(async (s) => {
        const first = s.events[0]?.data?.result;
        const taskId = first?.task?.id ?? first?.statusUpdate?.taskId;
        if (!taskId) {
          terminalMissed++;
          return;
        }
        const t0 = Date.now();
        const rest = await sse(`${other.url}/a2a`, { method: 'SubscribeToTask', params: { id: taskId }, lastEventId: s.events.at(-1)!.id }).catch(() => undefined);
        reconnects.push(Date.now() - t0);
        const all = [...s.events, ...(rest?.events ?? [])];
        if (all.some((e, k) => e.id !== k + 1)) orderViolations++;
        const last = all.at(-1)?.data?.result;
        const state = last?.statusUpdate?.status?.state ?? last?.task?.status?.state;
        const truth = await call(`${other.url}/a2a`, client, 'GetTask', { id: taskId });
        if (state !== 'TASK_STATE_COMPLETED' || truth.json?.result?.status?.state !== 'TASK_STATE_COMPLETED') terminalMissed++;
        if (assembledText(all) !== chunkedText(CHUNKS)) textMismatches++;
      }),
    );
    const ttfe = seen.filter((s) => s.at.length).map((s) => s.at[0] - s.sentAt);
    const lags = seen.flatMap((s) => s.at.slice(1).map((t, k) => t - s.at[k]));
    streamsFigures = {
      streams: N, killedAfterEvents, terminalMissed, orderViolations, textMismatches,
      reconnectP50Ms: percentile(reconnects, 50), reconnectP99Ms: percentile(reconnects, 99),
      ttfeP50Ms: percentile(ttfe, 50), ttfeP99Ms: percentile(ttfe, 99), lagP99Ms: percentile(lags, 99),
      rssPerStreamKiB: atN && before ? Math.round((atN.rssKiB - before.rssKiB) / N) : NaN,
      fdsPerStream: atN && before ? (atN.fds - before.fds) / N : NaN,
    };
  } finally {
    await chunky.close();
    await sb.kill();
    await other.close();
    await env.teardown();
    await db.drop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

let isolation: { probes: number; leaks: string[] } | undefined;

/**
 * Cross-tenant isolation (§4.5): tenant B, with its own client and operator keys, tries every way of reaching
 * tenant A's tasks, agents and account. Each answer must be exactly the answer for an id nobody has (status, code and message, with
 * the id itself masked), and B's lists must hold none of A's.
 */
async function drillIsolation(): Promise<void> {
  const { startGateway, register } = await import('../helpers/harness');
  const { startEchoAgent, startAskingAgent } = await import('../agents');
  const gw = await startGateway();
  const [echo, asking] = await Promise.all([startEchoAgent(), startAskingAgent()]);
  try {
    const rest = async (key: string, method: string, p: string, body?: unknown) => {
      const res = await fetch(`${gw.url}${p}`, {
        method,
        headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, json: (await res.json().catch(() => undefined)) as any };
    };
    const admin = gw.keys.admin;
    await rest(admin, 'POST', '/tenants', { id: 'tenant-b', name: 'B' });
    const b = (await rest(admin, 'POST', '/tenants/tenant-b/keys', { role: 'client', name: 'b' })).json.key as string;
    const bOperator = (await rest(admin, 'POST', '/tenants/tenant-b/keys', { role: 'operator', name: 'b-op' })).json.key as string;
    const echoAgent = await register(gw, echo.url);
    const askAgent = await register(gw, asking.url);
    const done = (await call(echoAgent.rpc, gw.keys.client, 'SendMessage', { message: userMessage('a') })).json.result.task.id as string;
    const waiting = (await call(askAgent.rpc, gw.keys.client, 'SendMessage', { message: userMessage('b') })).json.result.task.id as string;

    const mask = (v: unknown, id: string) => JSON.stringify(v ?? null).split(id).join('<id>');
    const answerOf = (r: { status: number; json: any }, id: string) => mask({ status: r.status, code: r.json?.error?.code, message: r.json?.error?.message ?? r.json?.error }, id);
    const front = `${gw.url}/a2a`;
    const probes: [string, (id: string) => Promise<{ status: number; json: any }>][] = [
      ['GetTask', (id) => call(front, b, 'GetTask', { id })],
      ['CancelTask', (id) => call(front, b, 'CancelTask', { id })],
      ['SubscribeToTask', (id) => call(front, b, 'SubscribeToTask', { id })],
      ['follow-up SendMessage', (id) => call(front, b, 'SendMessage', { message: userMessage('mine now', { taskId: id }) })],
      ['CreateTaskPushNotificationConfig', (id) => call(front, b, 'CreateTaskPushNotificationConfig', { taskId: id, url: 'https://hooks.example/x' })],
      ['ListTaskPushNotificationConfigs', (id) => call(front, b, 'ListTaskPushNotificationConfigs', { taskId: id })],
      ['0.3 tasks/get', (id) => call(front, b, 'tasks/get', { id })],
      ['GET /tasks/:id/route', (id) => rest(b, 'GET', `/tasks/${id}/route`)],
      ["A's agent endpoint", (id) => call(`${gw.url}/agents/${id}/a2a`, b, 'GetTask', { id: done })],
      ["A's agent", (id) => rest(bOperator, 'GET', `/agents/${id}`)],
      // Not probed: an agent's gateway card, public by the identity rules (a discovery document, as the agent's
      // own card is); it shows what the agent publishes itself, and using it needs a key of the agent's tenant,
      // which the endpoint probe above checks.
    ];
    const leaks: string[] = [];
    let n = 0;
    for (const [name, probe] of probes) {
      const targets = name.startsWith("A's agent") ? [echoAgent.id, askAgent.id] : [done, waiting];
      const unknown = name.startsWith("A's agent") ? `agent-${randomUUID().slice(0, 8)}` : randomUUID();
      const expected = answerOf(await probe(unknown), unknown);
      for (const id of targets) {
        n++;
        const got = answerOf(await probe(id), id);
        if (got !== expected) leaks.push(`${name}: ${got} (unknown id: ${expected})`);
      }
    }
    // Lists and search hold nothing of A's.
    const listed = JSON.stringify((await call(front, b, 'ListTasks', {})).json);
    const agents = JSON.stringify((await rest(bOperator, 'GET', '/agents')).json);
    const searched = JSON.stringify((await rest(bOperator, 'GET', '/agents?q=echo')).json);
    for (const [name, text, ids] of [['ListTasks', listed, [done, waiting]], ['GET /agents', agents, [echoAgent.id, askAgent.id]], ['agent search', searched, [echoAgent.id, askAgent.id]]] as const) {
      n++;
      if (ids.some((id) => text.includes(id))) leaks.push(`${name} shows tenant A's ids`);
    }
    // A's account: B's operator reads as for an account that does not exist.
    n++;
    const account = answerOf(await rest(bOperator, 'GET', '/accounts/requester:default'), 'default');
    const none = answerOf(await rest(bOperator, 'GET', '/accounts/requester:nobody-here'), 'nobody-here');
    if (account !== none) leaks.push(`account: ${account} (unknown: ${none})`);
    isolation = { probes: n, leaks };
  } finally {
    await Promise.all([echo.close(), asking.close()]);
    await gw.close();
  }
}

interface LoadRow {
  agent: string;
  path: 'direct' | 'gateway';
  sent: number;
  ok: number;
  refused503: number;
  p50Ms: number;
  p99Ms: number;
}
let load: { ratePerS: number; seconds: number; rows: LoadRow[]; loopP99Ms: number } | undefined;

/**
 * Non-streaming SendMessage at a fixed arrival rate (open loop: a request every 1/R s whether or not earlier ones
 * have answered, so a slow gateway cannot slow the load down and hide its own latency), against an agent that
 * answers at once and one that takes 200 ms; each also called directly in the same run. The gateway's event-loop
 * delay is sampled throughout (it runs in this process).
 */
async function drillLoad(): Promise<void> {
  const { startGateway, register } = await import('../helpers/harness');
  const { startEchoAgent, startSlowAgent, RPC_PATH } = await import('../agents');
  const RATE = Number(process.env.FAULTS_LOAD_RATE ?? 4);
  const SECONDS = Number(process.env.FAULTS_LOAD_SECONDS ?? 15);
  const gw = await startGateway();
  const [echo, slow] = await Promise.all([startEchoAgent(), startSlowAgent({ ms: 200 })]);
  const loop = monitorEventLoopDelay({ resolution: 10 });
  try {
    const rows: LoadRow[] = [];
    const run = async (agent: string, path: LoadRow['path'], url: string, key: string | undefined): Promise<void> => {
      const latencies: number[] = [];
      let ok = 0;
      let refused503 = 0;
      const sent = RATE * SECONDS;
      const calls: Promise<void>[] = [];
      const t0 = Date.now();
      for (let i = 0; i < sent; i++) {
        const due = t0 + (i * 1000) / RATE;
        if (due > Date.now()) await new Promise((r) => setTimeout(r, due - Date.now()));
        calls.push(
          (async () => {
            const s = performance.now();
            const r = await (key ? call(url, key, 'SendMessage', { message: userMessage(`load ${i}`) }) : rawCall(url, { message: userMessage(`load ${i}`) }));
            latencies.push(performance.now() - s);
            if (r.status === 503) refused503++;
            const state = r.json?.result?.task?.status?.state ?? r.json?.result?.status?.state;
            if (state === 'TASK_STATE_COMPLETED') ok++;
          })(),
        );
      }
      await Promise.all(calls);
      rows.push({ agent, path, sent, ok, refused503, p50Ms: round1(percentile(latencies, 50)), p99Ms: round1(percentile(latencies, 99)) });
    };
    for (const [name, agent] of [['answers at once', echo], ['takes 200 ms', slow]] as const) {
      await run(name, 'direct', `${agent.url}${RPC_PATH}`, undefined);
      const { rpc } = await register(gw, agent.url);
      loop.enable();
      await run(name, 'gateway', rpc, gw.keys.client);
      loop.disable();
    }
    load = { ratePerS: RATE, seconds: SECONDS, rows, loopP99Ms: round1(loop.percentile(99) / 1e6) };
  } finally {
    await Promise.all([echo.close(), slow.close()]);
    await gw.close();
  }
}

const round1 = (n: number) => Math.round(n * 10) / 10;

/** A JSON-RPC SendMessage straight to an agent (the direct baseline: no gateway, no key). */
async function rawCall(url: string, params: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...V1 },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params }),
    signal: AbortSignal.timeout(15_000),
  });
  return { status: res.status, json: await res.json().catch(() => undefined) };
}

interface FuzzFigures {
  cases: number;
  fiveXx: number;
  crashes: number;
  byStatus: Record<string, number>;
}
let fuzz: FuzzFigures | undefined;

async function drillFuzz(): Promise<void> {
  const { startGateway, register } = await import('../helpers/harness');
  const { startEchoAgent } = await import('../agents');
  const gw = await startGateway();
  const echo = await startEchoAgent();
  try {
    const { id } = await register(gw, echo.url);
    const url = `${gw.url}/agents/${id}/a2a`;
    const methods = ['SendMessage', 'GetTask', 'CancelTask', 'ListTasks', 'SubscribeToTask', 'message/send', 'tasks/get', 'tasks/cancel', 'Nope', '__proto__'];
    const hostile = [
      '{"__proto__":{"x":1}}', '{"constructor":{"prototype":{}}}', `${'['.repeat(100_000)}${']'.repeat(100_000)}`, 'x'.repeat(1024 * 1024 + 1),
      JSON.stringify(Array.from({ length: 10_000 }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'GetTask', params: { id: 'x' } }))),
      '{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"a"}}', '\u00ff\u00fe\u0000', '{"jsonrpc":"2.0","id":1e309,"method":"GetTask"}',
      '{"jsonrpc":"1.0","id":1,"method":"GetTask","params":{}}', `{"jsonrpc":"2.0","id":"${'9'.repeat(5000)}","method":"GetTask","params":{}}`,
    ];
    const body = fc.oneof(
      { weight: 3, arbitrary: fc.record({ jsonrpc: fc.constantFrom('2.0', '1.0', 2), id: fc.oneof(fc.integer(), fc.string(), fc.constant(null)), method: fc.constantFrom(...methods), params: fc.jsonValue({ maxDepth: 4 }) }).map((o) => JSON.stringify(o)) },
      { weight: 2, arbitrary: fc.record({ jsonrpc: fc.constant('2.0'), id: fc.nat(), method: fc.constant('SendMessage'), params: fc.record({ message: fc.record({ messageId: fc.string(), role: fc.constantFrom('ROLE_USER', 'ROLE_AGENT', 'x'), parts: fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 3 }), taskId: fc.option(fc.string(), { nil: undefined }) }, { requiredKeys: [] }) }, { requiredKeys: [] }) }).map((o) => JSON.stringify(o)) },
      { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 5 }).map((v) => JSON.stringify(v)) },
      { weight: 1, arbitrary: fc.string({ maxLength: 200 }) },
      { weight: 1, arbitrary: fc.constantFrom(...hostile) },
    );
    const headers = fc.record({
      'content-type': fc.constantFrom('application/json', 'text/plain', 'application/x-www-form-urlencoded', 'application/json; charset=latin1'),
      'a2a-version': fc.constantFrom('1.0', '0.3', '9.9', 'x', ''),
      'a2a-extensions': fc.constantFrom('', 'urn:x', 'a'.repeat(2000)),
      'last-event-id': fc.constantFrom('', '0', '-1', 'abc', '99999999999999999999'),
    });
    const figures: FuzzFigures = { cases: 0, fiveXx: 0, crashes: 0, byStatus: {} };
    const cases = fc.sample(fc.tuple(body, headers), { seed: SEED, numRuns: FUZZ_N });
    for (const [raw, h] of cases) {
      figures.cases++;
      const hs = Object.fromEntries(Object.entries(h).filter(([, v]) => v !== '')) as Record<string, string>;
      try {
        const res = await fetch(url, { method: 'POST', headers: { ...hs, authorization: `Bearer ${gw.keys.client}` }, body: raw, signal: AbortSignal.timeout(10_000) });
        await res.arrayBuffer();
        figures.byStatus[res.status] = (figures.byStatus[res.status] ?? 0) + 1;
        if (res.status >= 500) figures.fiveXx++;
      } catch {
        figures.crashes++; // no answer at all: the connection died or it hung
      }
    }
    if ((await fetch(`${gw.url}/healthz`).catch(() => undefined))?.status !== 200) figures.crashes++;
    fuzz = figures;
  } finally {
    await echo.close();
    await gw.close();
  }
}

let ssrf: { corpus: number; blocked: number; reachedInternal: number; leaks: string[]; rebinding: { privateAnswers: number; refused: number } } | undefined;

async function drillSsrf(): Promise<void> {
  const { createOutbound } = await import('../../src/core/http/outbound');
  let reached = 0;
  const internal = http.createServer((_req, res) => {
    reached++;
    res.end('internal');
  });
  await new Promise<void>((r) => internal.listen(0, '127.0.0.1', r));
  const port = (internal.address() as AddressInfo).port;
  const hosts = ['127.0.0.1', '127.1', '0x7f.1', '2130706433', '017700000001', '[::]', '[::1]', '[::ffff:127.0.0.1]', '[::ffff:7f00:1]', '[64:ff9b::7f00:1]', '[fd00::1]',
    '169.254.169.254', '100.64.0.1', '0.0.0.0', 'localhost', 'localhost.', '10.0.0.1', '192.168.1.1', '172.16.0.1'];
  const urls = [
    ...hosts.map((h) => `http://${h}:${port}/`),
    `http://user:pass@127.0.0.1:${port}/`,
    `http://a@127.0.0.1:${port}#@good.example`,
    `file:///etc/passwd`,
    `gopher://127.0.0.1:${port}/`,
  ];
  const outbound = createOutbound({ allowPrivate: false, connectTimeoutMs: 1_000 });
  const leaks: string[] = [];
  let blocked = 0;
  for (const u of urls) {
    try {
      const res = await outbound.fetch(u, { signal: AbortSignal.timeout(3_000) });
      await res.arrayBuffer();
      leaks.push(u);
    } catch {
      blocked++;
    }
  }
  // A redirect from a public-looking answer to the internal address is refused too (no redirects are followed).
  const redirector = http.createServer((_req, res) => res.writeHead(302, { location: `http://127.0.0.1:${port}/` }).end());
  await new Promise<void>((r) => redirector.listen(0, '127.0.0.1', r));
  const permissive = createOutbound({ allowPrivate: true });
  try {
    await permissive.fetch(`http://127.0.0.1:${(redirector.address() as AddressInfo).port}/`);
    leaks.push('redirect followed');
  } catch {
    blocked++;
  }
  // DNS rebinding: a host whose resolver answers public, then private, in turn (what a pre-check would see,
  // then what the connect would use). Every private answer must be refused at connect.
  let lookups = 0;
  const rebindingLookup = ((_host: string, _opts: unknown, cb: (err: null, a: { address: string; family: number }[]) => void) => {
    const address = lookups++ % 2 === 0 ? '8.8.8.8' : '127.0.0.1';
    setImmediate(() => cb(null, [{ address, family: 4 }]));
  }) as unknown as typeof import('node:dns').lookup;
  const rebinder = createOutbound({ allowPrivate: false, lookup: rebindingLookup, connectTimeoutMs: 300 });
  let refused = 0;
  for (let i = 0; i < 20; i++) {
    try {
      await rebinder.fetch(`http://rebind.test:${port}/`, { signal: AbortSignal.timeout(3_000) });
      leaks.push('rebind.test');
    } catch (err) {
      if ((err as { code?: string }).code === 'BLOCKED_ADDRESS') refused++;
    }
  }
  await Promise.all([outbound.close(), permissive.close(), rebinder.close()]);
  internal.close();
  redirector.close();
  ssrf = { corpus: urls.length + 1, blocked, reachedInternal: reached, leaks, rebinding: { privateAnswers: Math.floor(lookups / 2), refused } };
}

const rolling: import('./rolling').RollingFigures[] = [];

async function main() {
  const t0 = Date.now();
  const drills: [string, () => Promise<void>][] = [
    ['ssrf', drillSsrf],
    ['f3', drillTemporal],
    ['f8', drillPostgres],
    ['f1', drillProcessAtPoints],
    ['agents', drillAgentFaults],
    ['f2', drillStreams],
    ['fuzz', drillFuzz],
    ['isolation', drillIsolation],
    ['load', drillLoad],
    ['rolling', async () => void rolling.push(...(await (await import('./rolling')).drillRolling()))],
  ];
  for (const [name, run] of drills) {
    if (!ONLY.has(name)) continue;
    const s = Date.now();
    console.error(`faults: ${name}...`);
    try {
      await run();
    } catch (err) {
      console.error(`faults: ${name} failed to run: ${(err as Error).stack}`);
      process.exitCode = 1;
    }
    console.error(`faults: ${name} took ${((Date.now() - s) / 1000).toFixed(0)} s`);
  }

  console.log(`\nSwitchboard fault drills — node ${process.version}, ${os.cpus().length} CPUs, seed ${SEED}, ${((Date.now() - t0) / 1000).toFixed(0)} s\n`);
  if (results.length) {
    console.log('| drill | acknowledged | tasks lost | duplicate settlements | ledger conserved | downstream duplicates absorbed | stuck workflows | refused during outage | fake successes | recovery (restart → first progress) |');
    console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
    for (const r of results) {
      console.log(`| ${r.drill} | ${r.acknowledged} | ${r.tasksLost} | ${r.duplicateSettlements} | ${r.ledgerConserved} | ${r.downstreamDuplicatesAbsorbed} | ${r.stuckWorkflows} | ${r.refusedDuringOutage} | ${r.fakeSuccesses} | ${typeof r.recoveryMs === 'number' ? `${r.recoveryMs} ms` : r.recoveryMs} |`);
      for (const n of r.notes) console.log(`  note: ${n}`);
    }
  }
  if (agentFaults.length) {
    console.log('\n| F4–F7 agent fault | expected | ended | requests to the agent | ms | ok | detail |');
    console.log('| --- | --- | --- | --- | --- | --- | --- |');
    for (const r of agentFaults) console.log(`| ${r.mode} | ${r.expected} | ${r.state} | ${r.requests} | ${r.ms} | ${r.ok ? 'yes' : 'NO'} | ${r.detail.replace(/\|/g, '/')} |`);
  }
  if (streamsFigures) {
    const f = streamsFigures;
    console.log(`\nF2 kill -9 of a front door with ${f.streams} open streams (~${f.killedAfterEvents} events each at the kill), resubscribed at another: terminal states missed ${f.terminalMissed}, ordering violations ${f.orderViolations}, assembled texts wrong ${f.textMismatches}, resubscribe-to-end p50 ${f.reconnectP50Ms} ms, p99 ${f.reconnectP99Ms} ms`);
    console.log(`Streams: ${f.streams} concurrent on one front door; time to first event p50 ${f.ttfeP50Ms} ms, p99 ${f.ttfeP99Ms} ms; inter-event lag p99 ${f.lagP99Ms} ms (the agent paces chunks 25 ms apart); per stream ${f.rssPerStreamKiB} KiB RSS and ${f.fdsPerStream.toFixed(2)} file descriptors`);
  }
  if (fuzz) console.log(`\nfuzz: ${fuzz.cases} cases, ${fuzz.fiveXx} 5xx, ${fuzz.crashes} crashes/hangs; statuses ${JSON.stringify(fuzz.byStatus)}`);
  if (ssrf) {
    console.log(`SSRF corpus: ${ssrf.blocked}/${ssrf.corpus} blocked, ${ssrf.reachedInternal} requests reached the internal target${ssrf.leaks.length ? `; LEAKS: ${ssrf.leaks.join(', ')}` : ''}`);
    console.log(`DNS rebinding (public, then private answers): ${ssrf.rebinding.refused}/${ssrf.rebinding.privateAnswers} private answers refused at connect`);
  }

  if (isolation) {
    console.log(`Cross-tenant isolation: ${isolation.probes} probes of tenant A's tasks, agents and account by tenant B, ${isolation.leaks.length} leaks${isolation.leaks.length ? `: ${isolation.leaks.join('; ')}` : ' (each answered exactly as for an id nobody has)'}`);
  }
  if (load) {
    console.log(`\nNon-streaming SendMessage at a fixed ${load.ratePerS}/s for ${load.seconds} s (open loop), direct to the agent and through the gateway:\n`);
    console.log('| agent | path | sent | completed | 503 | p50 | p99 |');
    console.log('| --- | --- | --- | --- | --- | --- | --- |');
    for (const r of load.rows) console.log(`| ${r.agent} | ${r.path} | ${r.sent} | ${r.ok} | ${r.refused503} | ${r.p50Ms} ms | ${r.p99Ms} ms |`);
    for (const agent of new Set(load.rows.map((r) => r.agent))) {
      const d = load.rows.find((r) => r.agent === agent && r.path === 'direct');
      const g = load.rows.find((r) => r.agent === agent && r.path === 'gateway');
      if (d && g) console.log(`gateway overhead (${agent}): p50 +${round1(g.p50Ms - d.p50Ms)} ms, p99 +${round1(g.p99Ms - d.p99Ms)} ms`);
    }
    console.log(`gateway event-loop delay p99 under this load: ${load.loopP99Ms} ms`);
  }

  if (rolling.length) for (const line of (await import('./rolling')).reportRolling(rolling)) console.log(line);

  const missed = [
    ...rolling.filter((await import('./rolling')).rollingMissed).map((f) => `rolling: ${f.phase}`),
    ...results.filter((r) => r.tasksLost || r.duplicateSettlements || r.ledgerConserved !== true || r.stuckWorkflows || r.fakeSuccesses).map((r) => r.drill),
    ...agentFaults.filter((r) => !r.ok).map((r) => `agent fault ${r.mode}`),
    ...(streamsFigures && (streamsFigures.terminalMissed || streamsFigures.orderViolations || streamsFigures.textMismatches) ? ['F2 streams'] : []),
    ...(fuzz && (fuzz.fiveXx || fuzz.crashes) ? ['fuzz'] : []),
    ...(isolation?.leaks.length ? ['isolation'] : []),
    ...(load?.rows.some((r) => r.ok !== r.sent) ? ['load (a task did not complete)'] : []),
    ...(ssrf && (ssrf.leaks.length || ssrf.reachedInternal || ssrf.rebinding.refused !== ssrf.rebinding.privateAnswers) ? ['ssrf'] : []),
  ];
  if (missed.length) {
    console.log(`\ntargets missed: ${missed.join('; ')}`);
    process.exitCode = 1;
  } else console.log('\nevery target met');
}

void main().then(() => process.exit());
