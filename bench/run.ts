/**
 * `npm run bench`: blocking SendMessage latency and throughput, directly against an @a2a-js/sdk echo agent and
 * through Switchboard (Temporal + PostgreSQL), at concurrency 1 and 32; then streaming (bench/streaming.ts): time
 * to first event, events/s of a long stream, and its replay from the log. Prints tables, writes
 * .data/bench-latest.json, and reports (never enforces) the provisional targets.
 *
 * The tasks part also measures, on the same dev server in the same run, bare Temporal's floor for the gateway's
 * shape (bench/floor.ts), and reports Switchboard's latency above it, its CPU per task per thread group
 * (bench/threads.ts), and the workflow tasks each task took (counted from workflow history).
 *
 * Env: BENCH_N1 (calls at c=1, default 200), BENCH_N32 (calls at c=32, default 1000), BENCH_WARMUP (default 20),
 * BENCH_BUDGET_S (whole-run budget, default 600: scenarios stop early past it), BENCH_WORKER_OPTIONS (the in-process worker's settings, JSON: src/worker/worker.ts WorkerTuning), BENCH_ONLY (`tasks`, `timeline` (bench/timeline.ts: where c=1 latency goes, beside the floor; also part of tasks), `streaming`,
 * `search` (bench/search.ts, then hybrid search with embeddings on: bench/search-hybrid.ts, BENCH_HYBRID_AGENTS, BENCH_HYBRID_DIMS, BENCH_HYBRID_N; BENCH_EMBEDDINGS=0 skips it), `routing`, `auth`, `bindings`, `genesis`, `nanda`, `hub`, `fairness` (bench/fairness.ts: BENCH_FAIR_RATE, BENCH_FAIR_S, BENCH_FAIR_FLOODERS), `peer` (bench/peer.ts: beside the peer gateway TAG, in processes of their own; BENCH_PEER_ROUNDS, BENCH_PEER_N1, BENCH_PEER_N16, BENCH_TAG_DIR; part of a full run only when TAG is built, scripts/ensure-tag.sh), `paused` or `growth`: run only that part; growth is bench/growth.ts (BENCH_GROWTH_*, PostgreSQL only, not part of a full run); paused is bench/paused.ts, BENCH_PAUSED_N, not part of a full run; hub is bench/hub.ts, BENCH_HUB_N1/N8; nanda is bench/nanda.ts, BENCH_NANDA_N; routing is bench/routing.ts, BENCH_ROUTING_N; auth is bench/auth.ts, BENCH_AUTH_N; bindings is bench/bindings.ts, BENCH_BINDINGS_N1/N8; genesis is bench/genesis.ts, BENCH_GENESIS_N/EVENTS), the BENCH_STREAM_* knobs in bench/streaming.ts, BENCH_START_TPS (the c=32 tasks/s that the code at the start of issue 13, 0403cc2, measures on this box with its own `npm run bench`: the 3× target is reported against it), TEMPORAL_CLI, DATABASE_URL.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type Client, ClientFactory } from '@a2a-js/sdk/client';
import { benchRouting, printRouting, type RoutingReport } from './routing';
import { runSearchBench, type SearchBenchResult } from './search';
import { printHybrid, runHybridBench } from './search-hybrid';
import { benchStreaming, printStreaming, type StreamingReport } from './streaming';
import { type AuthReport, benchAuth, printAuth } from './auth';
import { type Timing, sendBlocking, timeCalls } from './measure';
import { type BindingsReport, benchBindings, printBindings } from './bindings';
import { type GenesisReport, benchGenesis, printGenesis } from './genesis';
import { type NandaReport, benchNanda, printNanda } from './nanda';
import { type HubReport, benchHub, printHub } from './hub';
import { type FairnessReport, benchFairness, printFairness } from './fairness';
import { type FloorReport, measureFloor, printFloor } from './floor';
import { THREAD_GROUPS, markBefore } from './threads';
import { type PausedReport, benchPaused, printPaused } from './paused';
import { instrumentWorkflowThreads } from './memory';
import { PHASES, type Phase, profilePhases } from './phases';
import { formatProcessCpu } from './processes';
import { cpuMeter } from './threads';
import { COMPILED, REPO_ROOT } from '../src/core/paths';
import { admissionOf, loadConfig } from '../src/core/config';
import { sqlMeter } from './sql-count';
import { measureTimeline, printTimeline, type TimelineReport } from './timeline';

// The repository root, from bench/ under tsx or dist/bench/ in the compiled build.
const ROOT = REPO_ROOT;
const int = (name: string, def: number) => (process.env[name] ? Number.parseInt(process.env[name]!, 10) : def);
const N1 = int('BENCH_N1', 200);
const N32 = int('BENCH_N32', 1000);
const WARMUP = int('BENCH_WARMUP', 20);
// growth fills 1M tasks first (10 minutes or more on a shared box): a budget of its own.
const BUDGET_MS = int('BENCH_BUDGET_S', process.env.BENCH_ONLY === 'growth' ? 2400 : 600) * 1000;
const TARGET_ADDED_P50_MS = 10;
const TARGET_GATEWAY_TPS = 100;
const TARGET_CPU_MS = 15;
/** The gateway's own node CPU per task at c=32 (issue 33): the whole process's less the direct call's. */
const TARGET_OWN_CPU_MS = 10;
const TARGET_ABOVE_FLOOR_MS = 10;
const TARGET_FLOOR_TPS_RATIO = 0.5;
/** Issue 13: c=32 throughput ≥ 3× the code at its start, measured on the same box (BENCH_START_TPS). */
const TARGET_START_TPS_RATIO = 3;
const START_TPS = Number(process.env.BENCH_START_TPS ?? NaN);
const ONLY = process.env.BENCH_ONLY ?? '';
/** BENCH_WORKER_OPTIONS: the worker's settings to measure (JSON, src/worker/worker.ts WorkerTuning), e.g. {"maxCachedWorkflows":1000}. */
const workerTuning = () => (process.env.BENCH_WORKER_OPTIONS ? { workerTuning: JSON.parse(process.env.BENCH_WORKER_OPTIONS) as Record<string, unknown> } : {});
const PARTS = ['tasks', 'timeline', 'streaming', 'search', 'routing', 'auth', 'bindings', 'genesis', 'nanda', 'hub', 'fairness', 'peer', 'paused', 'growth'];
if (ONLY && !PARTS.includes(ONLY)) throw new Error(`BENCH_ONLY=${ONLY}: expected one of ${PARTS.join(', ')}`);
const RUN_TASKS = ONLY === '' || ONLY === 'tasks';
const RUN_TIMELINE = ONLY === '' || ONLY === 'tasks' || ONLY === 'timeline';
const RUN_STREAMING = ONLY === '' || ONLY === 'streaming';
const RUN_SEARCH = ONLY === '' || ONLY === 'search';
const RUN_ROUTING = ONLY === '' || ONLY === 'routing';
const RUN_AUTH = ONLY === '' || ONLY === 'auth';
const RUN_BINDINGS = ONLY === '' || ONLY === 'bindings';
const RUN_GENESIS = ONLY === '' || ONLY === 'genesis';
const RUN_NANDA = ONLY === '' || ONLY === 'nanda';
const RUN_HUB = ONLY === '' || ONLY === 'hub';
const RUN_FAIRNESS = ONLY === '' || ONLY === 'fairness';
// 10,000 paused tasks take minutes: only on request.
const RUN_PAUSED = ONLY === 'paused';

process.env.LOG_LEVEL = 'silent';
process.env.DATABASE_URL ??= 'postgres://postgres@127.0.0.1:5432/test';
process.env.TEMPORAL_CLI ||= execFileSync('bash', [path.join(ROOT, 'scripts/ensure-temporal.sh')], { encoding: 'utf8' })
  .trim()
  .split('\n')
  .pop();

const started = Date.now();
const loadBefore = os.loadavg()[0]; // the box may be shared: a busy one skews everything below
const deadline = started + BUDGET_MS;
// Past the budget (plus a grace for shutdown) something hangs: give up loudly rather than run forever.
const watchdog = (ms: number, what: string) =>
  setTimeout(() => {
    console.error(`bench: ${what} still running ${ms / 1000}s after its start; aborting`);
    process.exit(2);
  }, ms).unref();
let hung = watchdog(BUDGET_MS + 120_000, 'the run');
/** The peer part (bench/peer.ts) runs its rounds to the end, outside the budget: a watchdog of its own. */
const PEER_WATCHDOG_MS = 1_800_000;

/** One scenario's timing (bench/measure.ts) at one concurrency. */
type Result = Timing & { scenario: string; concurrency: number };

/** Workflow history of a blocking single-turn task (the mean over the tasks sampled). */
interface Activations {
  tasks: number;
  workflowTasks: number;
  localActivities: number;
  activities: number;
  signals: number;
  /** History events per task, and of them search-attribute upserts and patch markers (patched()). */
  events: number;
  upserts: number;
  patchMarkers: number;
}

/** `n` blocking SendMessages from `concurrency` loops (bench/measure.ts), as the scenario `scenario`. */
async function measure(scenario: string, client: Client, concurrency: number, n: number): Promise<Result> {
  const t = await timeCalls(() => sendBlocking(client), { concurrency, n, warmup: WARMUP, deadline });
  const r: Result = { scenario, concurrency, ...t };
  console.error(`  ${scenario} c=${concurrency}: ${r.n} ok, ${r.errors} errors in ${t.seconds.toFixed(1)}s`);
  return r;
}

async function main() {
  if (ONLY === 'growth') {
    // PostgreSQL alone, on two schemas of its own (bench/growth.ts): no gateway, no Temporal.
    const { benchGrowth, printGrowth } = await import('./growth');
    printGrowth(await benchGrowth());
    return;
  }
  if (ONLY === 'peer') {
    // Its own dev server and gateways, each in a process of its own (bench/peer.ts): nothing of the in-process gateway.
    await peerPart();
    return;
  }
  // Imported here so the env above is in place first.
  const { startGateway, register, clientFactory } = await import('../test/helpers/harness');
  const { startEchoAgent } = await import('../test/agents');

  console.error('bench: starting Temporal dev server, PostgreSQL schema, worker, gateway and echo agents...');
  markBefore(); // the node threads that appear from here on are the worker's workflow threads
  if (RUN_PAUSED) instrumentWorkflowThreads(); // their heaps, for the memory breakdown (bench/memory.ts)
  const [gw, echo, echoBlocking] = await Promise.all([startGateway({ grpc: true, hub: {}, admission: admissionOf(loadConfig(process.env)), ...workerTuning() }), startEchoAgent(), startEchoAgent({ streaming: false })]);
  const results: Result[] = [];
  let floor: FloorReport | undefined;
  let activations: Activations | undefined;
  let paused: PausedReport | undefined;
  let phases: PhaseReport | undefined;
  let timeline: TimelineReport | undefined;
  let streaming: StreamingReport | undefined;
  let routing: RoutingReport | undefined;
  let auth: AuthReport | undefined;
  let bindings: BindingsReport | undefined;
  let genesis: GenesisReport | undefined;
  let nanda: NandaReport | undefined;
  let hub: HubReport | undefined;
  let fairness: FairnessReport | undefined;
  try {
    if (RUN_TASKS) {
      const factory = new ClientFactory();
      // Through the gateway as its tenant's client, with a key, as every caller must.
      const viaGateway = async (url: string) => clientFactory(gw.keys.client).createFromUrl(`${(await register(gw, url)).base}/.well-known/agent-card.json`, '');
      const direct = await factory.createFromUrl(echo.url);
      const gateway = await viaGateway(echo.url);
      const gatewayBlocking = await viaGateway(echoBlocking.url);

      results.push(await measure('direct', direct, 1, N1));
      results.push(await measure('gateway', gateway, 1, N1));
      activations = await activationsOf(gw, 20);
      // The forwarding activity calls a non-streaming agent with blocking sendMessage, a streaming one with sendMessageStream.
      results.push(await measure('gateway, non-streaming agent', gatewayBlocking, 1, N1));
      results.push(await measure('direct', direct, 32, N32));
      results.push(await measure('gateway', gateway, 32, N32));
      // Bare Temporal on the same server, same client, same process: the floor under the gateway's latency.
      console.error('  floor: bare Temporal, gateway shape...');
      floor = await measureFloor({ client: gw.temporal, nativeConnection: gw.env.nativeConnection }, { n: N1, n32: N32, warmup: WARMUP, shapes: 'gateway' });
      phases = await measurePhases(gateway, Math.ceil(N32 / 2));
    }
    if (RUN_TIMELINE) {
      console.error('  timeline: gateway and floor tasks at c=1, segment by segment...');
      const gateway = await clientFactory(gw.keys.client).createFromUrl(`${(await register(gw, echo.url)).base}/.well-known/agent-card.json`, '');
      timeline = await measureTimeline({ client: gw.temporal, nativeConnection: gw.env.nativeConnection }, gateway, { n: Math.min(N1, 100), warmup: WARMUP, tenant: 'default' });
    }
    if (RUN_PAUSED) paused = await benchPaused(gw, deadline);
    if (RUN_STREAMING) streaming = await benchStreaming(gw, deadline);
    // The front door (POST /a2a) against the agent's own endpoint (bench/routing.ts).
    if (RUN_ROUTING) routing = await benchRouting(gw, echoBlocking.url, deadline);
    if (RUN_AUTH) auth = await benchAuth(gw, echoBlocking.url, deadline);
    // Each client binding × agent binding against JSON-RPC → JSON-RPC (bench/bindings.ts).
    if (RUN_BINDINGS) bindings = await benchBindings(gw, deadline);
    // Envelope checks per message, and pub-sub deliveries/s to 10 subscribers (bench/genesis.ts).
    if (RUN_GENESIS) genesis = await benchGenesis(gw, echoBlocking.url, deadline);
    // NANDA action round trips against a plain message/send at the front door (bench/nanda.ts).
    if (RUN_NANDA) nanda = await benchNanda(gw, echoBlocking.url, deadline);
    // The same echo behaviour through the WebSocket hub and over HTTP (bench/hub.ts).
    if (RUN_HUB) hub = await benchHub(gw, deadline);
    // A light tenant's latency alone and beside a flooding tenant (bench/fairness.ts).
    if (RUN_FAIRNESS) fairness = await benchFairness(gw);
  } finally {
    await gw.close();
    await Promise.all([echo.close(), echoBlocking.close()]);
  }
  // Registry search over BENCH_AGENTS (10,000) cards, in a schema of its own (bench/search.ts).
  const search = RUN_SEARCH ? await runSearchBench() : undefined;
  // Hybrid search with embeddings on (bench/search-hybrid.ts: BENCH_HYBRID_AGENTS=10000,100000 for the growth ratio).
  const hybrid = RUN_SEARCH && process.env.BENCH_EMBEDDINGS !== '0' ? await runHybridBench() : undefined;
  report(results, streaming, search, routing, floor, activations, paused, phases, timeline);
  if (hybrid) printHybrid(hybrid);
  if (auth) printAuth(auth);
  if (bindings) printBindings(bindings);
  if (genesis) printGenesis(genesis);
  if (nanda) printNanda(nanda);
  if (hub) printHub(hub);
  if (fairness) printFairness(fairness);
  // Last, with everything above stopped: TAG beside Switchboard, when TAG is built (otherwise one line says so).
  if (ONLY === '') await peerPart();
}

async function peerPart(): Promise<void> {
  clearTimeout(hung);
  hung = watchdog(PEER_WATCHDOG_MS, 'the peer part');
  const { benchPeer, printPeer } = await import('./peer');
  const peer = await benchPeer();
  if (peer) printPeer(peer);
}

/** CPU per task by phase: the main thread's, split as a CPU profile of it shares it out; the other threads' as measured. */
interface PhaseReport {
  n: number;
  msPerTask: Record<Phase | 'workflow activations' | 'Temporal core (Rust)' | 'V8/libuv helpers', number>;
  /** SQL statements this process sent per task (bench/sql-count.ts), in all and by statement. */
  sqlPerTask: number;
  sqlByStatement: [string, number][];
}

/** `n` more gateway tasks at c=32 under the main thread's CPU profiler (bench/phases.ts), timed apart from the table. */
async function measurePhases(client: Client, n: number): Promise<PhaseReport> {
  console.error(`  phases: ${n} gateway tasks at c=32 under the CPU profiler...`);
  const cpu = cpuMeter();
  const sql = sqlMeter();
  let done = 0;
  const sampled = await profilePhases(async () => {
    const t = await timeCalls(() => sendBlocking(client), { concurrency: 32, n, warmup: 0, deadline });
    done = t.n;
  });
  const { main, workflow, other, 'temporal core': core } = cpu.stop();
  const statements = sql.stop();
  const sampledTotal = Object.values(sampled).reduce((a, b) => a + b, 0);
  const perTask = (ms: number) => ms / Math.max(1, done);
  const msPerTask = Object.fromEntries(PHASES.map((p) => [p, perTask((main * sampled[p]) / (sampledTotal || 1))])) as PhaseReport['msPerTask'];
  msPerTask['workflow activations'] = perTask(workflow);
  msPerTask['Temporal core (Rust)'] = perTask(core);
  msPerTask['V8/libuv helpers'] = perTask(other);
  const sqlPerTask = statements.total / Math.max(1, done);
  return { n: done, msPerTask, sqlPerTask, sqlByStatement: statements.byStatement.map(([k, n]) => [k, n / Math.max(1, done)]) };
}

/**
 * What the last `sample` tasks of the run cost in Temporal, from their workflow histories: workflow tasks
 * completed (each is at least one activation of the workflow), local activities (markers: each result is one
 * more activation inside a workflow task), activities and signals.
 */
async function activationsOf(gw: import('../test/helpers/harness').Gateway, sample: number): Promise<Activations> {
  const { workflowIdOf } = await import('../task/messages');
  // Event types (temporal.api.enums.v1.EventType).
  const WORKFLOW_TASK_COMPLETED = 7;
  const ACTIVITY_TASK_SCHEDULED = 10;
  const MARKER_RECORDED = 25;
  const SIGNALED = 26;
  const UPSERT_SEARCH_ATTRIBUTES = 40;
  const { rows } = await gw.db.pool.query<{ tenant: string; task_id: string }>('SELECT tenant, task_id FROM tasks ORDER BY created_at DESC LIMIT $1', [sample]);
  const sum: Activations = { tasks: 0, workflowTasks: 0, localActivities: 0, activities: 0, signals: 0, events: 0, upserts: 0, patchMarkers: 0 };
  for (const { tenant, task_id } of rows) {
    const handle = gw.temporal.workflow.getHandle(workflowIdOf(tenant, task_id));
    // A task's answer can leave before its workflow ends (it settles in a later workflow task): count whole histories.
    await handle.result().catch(() => undefined);
    const history = await handle.fetchHistory();
    const count = (type: number) => (history.events ?? []).filter((e) => e.eventType === type).length;
    sum.tasks++;
    sum.workflowTasks += count(WORKFLOW_TASK_COMPLETED);
    // Markers are local activities' results, or patches (patched()), which cost no activation.
    sum.localActivities += (history.events ?? []).filter((e) => e.eventType === MARKER_RECORDED && e.markerRecordedEventAttributes?.markerName !== 'core_patch').length;
    sum.activities += count(ACTIVITY_TASK_SCHEDULED);
    sum.signals += count(SIGNALED);
    sum.events += (history.events ?? []).length;
    sum.upserts += count(UPSERT_SEARCH_ATTRIBUTES);
    sum.patchMarkers += (history.events ?? []).filter((e) => e.markerRecordedEventAttributes?.markerName === 'core_patch').length;
  }
  const mean = (n: number) => (sum.tasks ? n / sum.tasks : NaN);
  return {
    tasks: sum.tasks,
    workflowTasks: mean(sum.workflowTasks),
    localActivities: mean(sum.localActivities),
    activities: mean(sum.activities),
    signals: mean(sum.signals),
    events: mean(sum.events),
    upserts: mean(sum.upserts),
    patchMarkers: mean(sum.patchMarkers),
  };
}

function printSearch(r: SearchBenchResult) {
  console.log(`
registry search over ${r.agents} agents (${r.runsPerQuery} runs per query), ms`);
  console.log(`${'query'.padEnd(28)}  matches  db p50  db p99  GET /agents p50  p99`);
  for (const q of r.queries) {
    console.log(`${q.query.slice(0, 28).padEnd(28)}  ${String(q.matches).padStart(7)}  ${q.dbP50Ms.toFixed(2).padStart(6)}  ${q.dbP99Ms.toFixed(2).padStart(6)}  ${q.httpP50Ms.toFixed(2).padStart(15)}  ${q.httpP99Ms.toFixed(2).padStart(5)}`);
  }
}

function report(results: Result[], streaming: StreamingReport | undefined, search?: SearchBenchResult, routing?: RoutingReport, floor?: FloorReport, activations?: Activations, paused?: PausedReport, phases?: PhaseReport, timeline?: TimelineReport) {
  const find = (s: string, c: number) => results.find((r) => r.scenario === s && r.concurrency === c);
  const addedP50 = (find('gateway', 1)?.p50 ?? NaN) - (find('direct', 1)?.p50 ?? NaN);
  // Above bare Temporal's floor for the same shape, less what the agent itself took (the direct call).
  const aboveFloorP50 = addedP50 - (floor?.gatewayP50 ?? NaN);
  const floorTpsRatio = (find('gateway', 32)?.tps ?? NaN) / (floor?.gatewayTpsC32 ?? NaN);
  // CPU the same way: less the bench's client and agent (the direct call's) and bare Temporal's for the shape.
  const cpuAboveFloor = (find('gateway', 32)?.cpuMs ?? NaN) - (find('direct', 32)?.cpuMs ?? NaN) - (floor?.cpuC32.total ?? NaN);
  const gatewayCpu = find('gateway', 32)?.cpuMs ?? NaN;
  // The gateway's own: less the bench's clients and agent, which the direct call's CPU is.
  const ownCpu = gatewayCpu - (find('direct', 32)?.cpuMs ?? NaN);
  const ratio = (find('gateway', 32)?.tps ?? NaN) / (find('direct', 32)?.tps ?? NaN);
  const gatewayTps = find('gateway', 32)?.tps ?? NaN;
  // `compiled`: `npm run bench` (plain node on dist/, as `npm start`); `tsx`: `npm run bench:tsx`.
  const machine = { node: process.version, code: COMPILED ? 'compiled' : 'tsx', cpus: os.cpus().length, model: os.cpus()[0]?.model.trim() ?? 'unknown', loadAvgBefore: loadBefore };

  const cols = ['scenario', 'concurrency', 'n', 'errors', 'p50 ms', 'p99 ms', 'tasks/s', 'node CPU ms/task', ...THREAD_GROUPS];
  const rows = results.map((r) => [
    r.scenario + (r.truncated ? ' (budget hit)' : ''),
    String(r.concurrency),
    String(r.n),
    String(r.errors),
    r.p50.toFixed(1),
    r.p99.toFixed(1),
    r.tps.toFixed(1),
    r.cpuMs.toFixed(1),
    ...THREAD_GROUPS.map((g) => r.cpuByThread[g].toFixed(1)),
  ]);
  const widths = cols.map((c, i) => Math.max(c.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  console.log(`\nSwitchboard bench — node ${machine.node} (${machine.code}), ${machine.cpus} CPUs (${machine.model}), load average before the run ${loadBefore.toFixed(1)}\n`);
  if (results.length) {
    console.log(line(cols));
    console.log(line(widths.map((w) => '-'.repeat(w))));
    for (const r of rows) console.log(line(r));
    console.log(`\nadded p50 latency at c=1 (gateway − direct): ${addedP50.toFixed(1)} ms`);
    console.log(`throughput ratio at c=32 (gateway / direct): ${ratio.toFixed(3)}`);
    console.log('(node CPU: all threads of this process, which also runs the bench clients and the agents; per thread group in the last columns: main = front door, activities, PostgreSQL client, clients and agents; workflow = workflow activations; temporal core = the SDK\'s Rust threads)');
    for (const s of ['direct', 'gateway']) {
      const r = find(s, 32);
      if (r) console.log(`the machine's CPU per task at c=32, ${s}: ${formatProcessCpu(r.cpuByProcess)}`);
    }
  }
  if (floor) {
    printFloor(floor);
    console.log(`gateway p50 above the floor at c=1 (gateway − direct − floor): ${aboveFloorP50.toFixed(1)} ms`);
    console.log(`  (above the floor of the earlier shape, the agent called by an activity: ${(addedP50 - floor.activityShapeP50).toFixed(1)} ms)`);
    console.log(`gateway throughput at c=32 / the floor's: ${floorTpsRatio.toFixed(3)}`);
    console.log(`  (/ Temporal's least, one workflow task: ${(gatewayTps / floor.oneWorkflowTaskTpsC32).toFixed(3)})`);
    console.log(`gateway node CPU per task at c=32 above the floor's (gateway − direct − floor): ${cpuAboveFloor.toFixed(1)} ms`);
  }
  if (phases) {
    console.log(`\nnode CPU per task by phase (${phases.n} more tasks at c=32 under the main thread's profiler), ms:`);
    for (const [phase, ms] of Object.entries(phases.msPerTask)) console.log(`  ${phase.padEnd(26)} ${ms.toFixed(1).padStart(6)}`);
    console.log(`SQL statements per task (same run): ${phases.sqlPerTask.toFixed(2)}`);
    for (const [statement, n] of phases.sqlByStatement.slice(0, 15)) console.log(`  ${n.toFixed(2).padStart(5)}  ${statement}`);
  }
  if (activations) {
    const a = activations;
    console.log(
      `\nper blocking single-turn task (workflow history of the last ${a.tasks}): ${a.workflowTasks.toFixed(1)} workflow tasks, ` +
        `${a.localActivities.toFixed(1)} local activities, ${a.activities.toFixed(1)} activities, ${a.signals.toFixed(1)} signals; ` +
        `${a.events.toFixed(1)} history events, of them ${a.upserts.toFixed(1)} search-attribute upserts and ${a.patchMarkers.toFixed(1)} patch markers`,
    );
  }
  if (streaming) printStreaming(streaming);
  if (search) printSearch(search);
  if (routing) printRouting(routing);
  if (paused) printPaused(paused);
  const met = (ok: boolean) => (ok ? 'met' : 'NOT met');
  console.log('\nprovisional targets:');
  if (results.length) {
    console.log(`  added p50 ≤ ${TARGET_ADDED_P50_MS} ms at c=1:        ${addedP50.toFixed(1)} ms — ${met(addedP50 <= TARGET_ADDED_P50_MS)}`);
    console.log(`  ≥ ${TARGET_GATEWAY_TPS} durable tasks/s at c=32:    ${gatewayTps.toFixed(1)} — ${met(gatewayTps >= TARGET_GATEWAY_TPS)}`);
    console.log(`  node CPU ≤ ${TARGET_CPU_MS} ms per task (c=32):  ${gatewayCpu.toFixed(1)} ms — ${met(gatewayCpu <= TARGET_CPU_MS)}`);
    console.log(`  the gateway's own node CPU ≤ ${TARGET_OWN_CPU_MS} ms per task (c=32, gateway − direct): ${ownCpu.toFixed(1)} ms — ${met(ownCpu <= TARGET_OWN_CPU_MS)}`);
  }
  if (floor) {
    console.log(`  p50 above the floor ≤ ${TARGET_ABOVE_FLOOR_MS} ms at c=1:  ${aboveFloorP50.toFixed(1)} ms — ${met(aboveFloorP50 <= TARGET_ABOVE_FLOOR_MS)}`);
    console.log(`  c=32 throughput ≥ ${TARGET_FLOOR_TPS_RATIO * 100} % of the floor's: ${(floorTpsRatio * 100).toFixed(1)} % — ${met(floorTpsRatio >= TARGET_FLOOR_TPS_RATIO)}`);
    if (Number.isFinite(START_TPS)) {
      const x = (tps: number) => `${(tps / START_TPS).toFixed(2)}×`;
      console.log(
        `  c=32 throughput ≥ ${TARGET_START_TPS_RATIO}× the start's (${START_TPS} tasks/s, BENCH_START_TPS): ${x(gatewayTps)} — ${met(gatewayTps >= TARGET_START_TPS_RATIO * START_TPS)}` +
          ` (bare Temporal: the gateway's shape ${x(floor.gatewayTpsC32)}, one workflow task ${x(floor.oneWorkflowTaskTpsC32)})`,
      );
    }
  }
  if (streaming) {
    const t = streaming.targets;
    console.log(`  added stream TTFE p50 ≤ ${t.addedTtfeP50Ms.target} ms:    ${t.addedTtfeP50Ms.value.toFixed(1)} ms — ${met(t.addedTtfeP50Ms.met)}`);
    console.log(`  stream events/s ≥ ${t.streamThroughputRatio.target * 100} % of direct: ${(t.streamThroughputRatio.value * 100).toFixed(1)} % — ${met(t.streamThroughputRatio.met)}`);
  }
  if (timeline) printTimeline(timeline);
  console.log(`\n(run took ${((Date.now() - started) / 1000).toFixed(0)} s)`);

  const out = path.join(ROOT, '.data/bench-latest.json');
  mkdirSync(path.dirname(out), { recursive: true });
  const targets = {
    ...(results.length
      ? {
          addedP50Ms: { target: TARGET_ADDED_P50_MS, met: addedP50 <= TARGET_ADDED_P50_MS },
          gatewayTasksPerSec: { target: TARGET_GATEWAY_TPS, met: gatewayTps >= TARGET_GATEWAY_TPS },
          cpuMsPerTask: { target: TARGET_CPU_MS, met: gatewayCpu <= TARGET_CPU_MS },
          ownCpuMsPerTask: { target: TARGET_OWN_CPU_MS, value: ownCpu, met: ownCpu <= TARGET_OWN_CPU_MS },
        }
      : {}),
    ...(floor
      ? {
          aboveFloorP50Ms: { target: TARGET_ABOVE_FLOOR_MS, met: aboveFloorP50 <= TARGET_ABOVE_FLOOR_MS },
          floorThroughputRatio: { target: TARGET_FLOOR_TPS_RATIO, met: floorTpsRatio >= TARGET_FLOOR_TPS_RATIO },
        }
      : {}),
    ...(streaming
      ? {
          streamAddedTtfeP50Ms: { target: streaming.targets.addedTtfeP50Ms.target, met: streaming.targets.addedTtfeP50Ms.met },
          streamThroughputRatio: { target: streaming.targets.streamThroughputRatio.target, met: streaming.targets.streamThroughputRatio.met },
        }
      : {}),
  };
  const json = {
    at: new Date().toISOString(),
    machine,
    warmup: WARMUP,
    results,
    ...(results.length ? { addedP50Ms: addedP50, throughputRatio: ratio } : {}),
    ...(floor ? { floor, aboveFloorP50Ms: aboveFloorP50, floorThroughputRatio: floorTpsRatio, cpuAboveFloorMs: cpuAboveFloor } : {}),
    ...(activations ? { activations } : {}),
    ...(paused ? { paused } : {}),
    ...(phases ? { phases } : {}),
    ...(timeline ? { timeline } : {}),
    ...(streaming ? { streaming } : {}),
    ...(search ? { search } : {}),
    ...(routing ? { routing } : {}),
    targets,
  };
  writeFileSync(out, JSON.stringify(json, null, 2) + '\n');
  console.log(`results: ${path.relative(process.cwd(), out)}`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
