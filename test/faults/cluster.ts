/**
 * `npm run cluster`: Switchboard on a production-shaped Temporal, with a process of each kind killed mid-load.
 *
 * scripts/temporal-cluster.sh builds and starts the Temporal server (v1.29.1, history and visibility in
 * PostgreSQL, databases of the drill's own). On it: two `api` and two `worker` Switchboard processes
 * (SWITCHBOARD_ROLE) on one task queue and one database schema, and real A2A agents (@a2a-js/sdk). A mixed load
 * is spread over both api processes: blocking calls, streams, tasks that ask for input and are answered through
 * the other api process, and tasks canceled through the other api process. Mid-load, one worker and one api
 * process are killed with SIGKILL. Clients of the dead api process go on at the other: broken streams resume
 * there with Last-Event-ID, calls whose answer was lost are resent with the same messageId.
 *
 * Then: every task in the state it must end in (the client's view and GetTask), each stream's event ids
 * consecutive from 1 across the kill and its text whole, exactly one settlement per task for the right amount,
 * `GET /ledger/reconcile` clean, no workflow left running, and the figures (tasks, kills, lost, double settlements,
 * time to recover, throughput, latency p50/p99). Exit code 1 when a check fails.
 *
 * Not in `npm test`: a cold build of the Temporal server takes minutes (test/compose.test.ts checks the script
 * with stand-ins).
 *
 * Env: CLUSTER_ROUNDS (default 16; a round starts one task of each of the four kinds), CLUSTER_INTERVAL_MS (between
 * rounds, default 2000), CLUSTER_KILL_AFTER (rounds started before the kills, default half; CLUSTER_ROUNDS or more:
 * no kills, a baseline), TEMPORAL_CLUSTER_PORT
 * (default 7533), CLUSTER_TEMPORAL_ADDRESS (use that Temporal server instead, e.g. a dev server, to compare),
 * CLUSTER_KEEP=1 (leave the Temporal server, its databases and the schema for a look afterwards),
 * DATABASE_URL, TEMPORAL_CLI.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { chunkedText, startAskingAgent, startChunkyAgent, startSlowAgent, type TestAgent } from '../agents';
import { createTestDb, DATABASE_URL, rememberKeys, TEST_ADMIN_KEY, TEST_SECRETS_KEY } from '../helpers/harness';
import { freePort, startSwitchboard, type SwitchboardProcess } from '../helpers/process';
import { assembledText, sse, type SseEvent } from '../helpers/sse';
import { KeyStore } from '../../src/core/auth/keys';

const ROOT = path.resolve(__dirname, '../..');
process.env.LOG_LEVEL ??= 'silent';
process.env.TEMPORAL_CLI ||= execFileSync('bash', [path.join(ROOT, 'scripts/ensure-temporal.sh')], { encoding: 'utf8' }).trim().split('\n').pop();

const ROUNDS = Number(process.env.CLUSTER_ROUNDS ?? 16);
const INTERVAL_MS = Number(process.env.CLUSTER_INTERVAL_MS ?? 2000);
const KILL_AFTER = Number(process.env.CLUSTER_KILL_AFTER ?? Math.floor(ROUNDS / 2));
const KILLS = KILL_AFTER < ROUNDS;
const CLUSTER_PORT = process.env.TEMPORAL_CLUSTER_PORT ?? '7533';
const KEEP = process.env.CLUSTER_KEEP === '1';
const V1 = { 'A2A-Version': '1.0' };
const CHUNKS = 120;
const PRICES = { blocking: 5, stream: 3, ask: 2, cancel: 7 } as const;
const DEPOSIT = 1_000_000;

type Kind = keyof typeof PRICES;
const EXPECTED: Record<Kind, string> = { blocking: 'TASK_STATE_COMPLETED', stream: 'TASK_STATE_COMPLETED', ask: 'TASK_STATE_COMPLETED', cancel: 'TASK_STATE_CANCELED' };
const TERMINAL = new Set(['TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED']);

/** One task of the load, as its client saw it. */
interface Task {
  kind: Kind;
  round: number;
  /** The api process the client started on (0 or 1). */
  home: number;
  taskId?: string;
  sentAt: number;
  doneAt?: number;
  /** The state the client was last told. */
  state?: string;
  /** Requests that failed at the transport (the api process died) and were made again at the other. */
  failovers: number;
  problems: string[];
  /** Streams only: every event, across the kill, and when the stream was resumed at the other process. */
  events?: SseEvent[];
  resumedAfterMs?: number;
}

const userMessage = (text: string, extra: Record<string, unknown> = {}) => ({ messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...extra });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const stateOf = (e: SseEvent | undefined): string | undefined => e?.data?.result?.statusUpdate?.status?.state ?? e?.data?.result?.task?.status?.state;
const taskIdOf = (e: SseEvent | undefined): string | undefined => e?.data?.result?.task?.id ?? e?.data?.result?.statusUpdate?.taskId ?? e?.data?.result?.artifactUpdate?.taskId;

/** The p-th percentile (nearest rank); NaN when there are none. */
function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

class Drill {
  readonly tasks: Task[] = [];
  /** Which api processes are alive, as the clients learn it (a refused connection says so too). */
  readonly dead = new Set<number>();
  killedAt = 0;

  constructor(
    readonly apis: SwitchboardProcess[],
    readonly clientKey: string,
    readonly agents: Record<Kind, string>,
  ) {}

  /** The api process to use: `preferred` unless it is dead. */
  private base(preferred: number): { i: number; url: string } {
    const i = this.dead.has(preferred) ? 1 - preferred : preferred;
    return { i, url: this.apis[i].url };
  }

  /**
   * A JSON-RPC call at `preferred`, made again at the other process (same body: the same messageId) while the
   * transport fails. A JSON-RPC answer, error or not, is returned as is.
   */
  async call(task: Task, preferred: number, agentPath: string, method: string, params: unknown): Promise<any> {
    for (let attempt = 0; ; attempt++) {
      const { i, url } = this.base(preferred);
      try {
        const res = await fetch(`${url}${agentPath}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${this.clientKey}`, ...V1 },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
          signal: AbortSignal.timeout(180_000),
        });
        const json = (await res.json().catch(() => undefined)) as any;
        if (res.status === 503 || !json) throw new Error(`HTTP ${res.status}`);
        return json;
      } catch (err) {
        if (attempt >= 20) throw err;
        if (this.killedAt && i === 0) this.dead.add(0);
        task.failovers++;
        await sleep(250);
      }
    }
  }

  private rpcPath(kind: Kind): string {
    return `/agents/${this.agents[kind]}/a2a`;
  }

  private finish(task: Task, state: string | undefined): void {
    task.state = state;
    task.doneAt = Date.now();
    if (state !== EXPECTED[task.kind]) task.problems.push(`the client was told ${state}, expected ${EXPECTED[task.kind]}`);
  }

  /** Blocking SendMessage to an agent that works 2.5 s: the answer is the completed task. */
  async blocking(task: Task): Promise<void> {
    const json = await this.call(task, task.home, this.rpcPath('blocking'), 'SendMessage', { message: userMessage(`blocking ${task.round}`) });
    task.taskId = json.result?.task?.id;
    if (!task.taskId) task.problems.push(`no task: ${JSON.stringify(json).slice(0, 200)}`);
    this.finish(task, json.result?.task?.status?.state);
  }

  /** A task that asks for input, answered through the other api process. */
  async ask(task: Task): Promise<void> {
    const first = await this.call(task, task.home, this.rpcPath('ask'), 'SendMessage', { message: userMessage(`ask ${task.round}`) });
    task.taskId = first.result?.task?.id;
    if (first.result?.task?.status?.state !== 'TASK_STATE_INPUT_REQUIRED') {
      task.problems.push(`first turn: ${JSON.stringify(first).slice(0, 200)}`);
      return this.finish(task, first.result?.task?.status?.state);
    }
    const second = await this.call(task, 1 - task.home, this.rpcPath('ask'), 'SendMessage', { message: userMessage('Ada', { taskId: task.taskId }) });
    const text = second.result?.task?.artifacts?.[0]?.parts?.[0]?.text;
    if (second.result && text !== 'Hello, Ada!') task.problems.push(`answer ${JSON.stringify(text)}`);
    this.finish(task, second.result?.task?.status?.state ?? `error ${second.error?.code}`);
  }

  /** A task at an agent that works a minute, canceled through the other api process once the agent has it. */
  async cancel(task: Task, agent: TestAgent): Promise<void> {
    const message = userMessage(`cancel ${task.round}`);
    const started = await this.call(task, task.home, this.rpcPath('cancel'), 'SendMessage', { message, configuration: { returnImmediately: true } });
    task.taskId = started.result?.task?.id;
    if (!task.taskId) {
      task.problems.push(`no task: ${JSON.stringify(started).slice(0, 200)}`);
      return this.finish(task, undefined);
    }
    const deadline = Date.now() + 60_000;
    while (!agent.calls.some((c) => c.params?.message?.messageId === message.messageId) && Date.now() < deadline) await sleep(100);
    const canceled = await this.call(task, 1 - task.home, '/a2a', 'CancelTask', { id: task.taskId });
    this.finish(task, canceled.result?.status?.state ?? `error ${canceled.error?.code} ${canceled.error?.message}`);
  }

  /**
   * SendStreamingMessage to an agent streaming 120 chunks 25 ms apart. A stream that breaks before its terminal
   * event resumes at the other api process: SubscribeToTask with Last-Event-ID (or, with no event yet, the same
   * message again with Last-Event-ID: 0, which follows the task that message started, if any).
   */
  async stream(task: Task): Promise<void> {
    const message = userMessage(`stream ${task.round}`);
    task.events = [];
    let preferred = task.home;
    for (let attempt = 0; attempt < 20; attempt++) {
      const { i, url } = this.base(preferred);
      // The position to resume from: the last event with an id (an error frame the server ends a stream with has none).
      const lastId = Math.max(0, ...task.events.map((e) => e.id ?? 0));
      const resuming = attempt > 0;
      const t0 = Date.now();
      let firstAfterResume: number | undefined;
      const onEvent = (e: SseEvent) => {
        task.events!.push(e);
        if (resuming) firstAfterResume ??= Date.now() - t0;
      };
      const read = await (resuming && task.taskId
        ? sse(`${url}/a2a`, { method: 'SubscribeToTask', params: { id: task.taskId }, lastEventId: lastId, onEvent })
        : sse(`${url}${this.rpcPath('stream')}`, { method: 'SendStreamingMessage', params: { message }, lastEventId: resuming ? 0 : undefined, onEvent })
      ).catch((err: Error) => ({ status: 0, events: [], ended: false, error: err, json: undefined }));
      task.taskId ??= taskIdOf(task.events[0]);
      if (resuming && firstAfterResume !== undefined && this.killedAt) task.resumedAfterMs ??= Date.now() - this.killedAt;
      if (read.status === 200 && TERMINAL.has(stateOf(task.events.at(-1)) ?? '')) break;
      if ('json' in read && read.json?.error) {
        task.problems.push(`stream answered ${JSON.stringify(read.json.error).slice(0, 200)}`);
        break;
      }
      const unnumbered = read.events.filter((e) => e.id === undefined);
      if (unnumbered.length) task.problems.push(`a stream ended with ${JSON.stringify(unnumbered.at(-1)!.data).slice(0, 300)}`);
      // Broken (the process died, or refused the connection): go on at the other one.
      if (this.killedAt && i === 0) this.dead.add(0);
      task.failovers++;
      preferred = 1 - i;
      await sleep(250);
    }
    const ids = task.events.filter((e) => e.id !== undefined).map((e) => e.id);
    if (ids.some((id, k) => id !== k + 1)) task.problems.push(`event ids not consecutive from 1: ${ids.join(',')}`);
    if (assembledText(task.events) !== chunkedText(CHUNKS)) task.problems.push('the assembled text is not the whole answer, once');
    this.finish(task, stateOf(task.events.at(-1)));
  }
}

async function main(): Promise<void> {
  const t0 = Date.now();
  const problems: string[] = [];
  const suffix = randomBytes(3).toString('hex');
  const clusterDir = mkdtempSync(path.join(os.tmpdir(), 'sb-cluster-'));
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'sb-cluster-data-'));
  const clusterEnv = { ...process.env, TEMPORAL_CLUSTER_PORT: CLUSTER_PORT, TEMPORAL_CLUSTER_DB: `temporal_drill_${suffix}`, TEMPORAL_CLUSTER_DIR: clusterDir };
  const cluster = (cmd: string) => execFileSync('bash', [path.join(ROOT, 'scripts/temporal-cluster.sh'), cmd], { env: clusterEnv, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();

  const given = process.env.CLUSTER_TEMPORAL_ADDRESS;
  console.error(given ? `cluster: using the Temporal server at ${given}` : 'cluster: scripts/temporal-cluster.sh start (builds the server first if needed)...');
  const address = given ?? cluster('start').split('\n').pop()!;
  const clusterStartS = (Date.now() - t0) / 1000;
  const db = await createTestDb();
  const procs: SwitchboardProcess[] = [];
  const agents: TestAgent[] = [];
  let connection: Connection | undefined;
  try {
    const url = new URL(DATABASE_URL);
    url.searchParams.set('options', `-c search_path=${db.schema}`);
    const taskQueue = `cluster-${suffix}`;
    const sbEnv = {
      DATABASE_URL: url.toString(), TEMPORAL_ADDRESS: address, TEMPORAL_TASK_QUEUE: taskQueue, HOST: '127.0.0.1',
      SWITCHBOARD_ALLOW_PRIVATE_URLS: 'true', SWITCHBOARD_ADMIN_KEY: TEST_ADMIN_KEY, SWITCHBOARD_SECRETS_KEY: TEST_SECRETS_KEY,
      SWITCHBOARD_DATA_DIR: dataDir, LOG_LEVEL: 'warn', SWITCHBOARD_UNFUNDED_ACCOUNTS: 'enforce',
    };
    console.error(`cluster: Temporal at ${address}; starting 2 worker and 2 api Switchboard processes (task queue ${taskQueue}, schema ${db.schema})...`);
    const s0 = Date.now();
    // One at a time: each bundles the workflow code or loads the app on a small box.
    const workers: SwitchboardProcess[] = [];
    for (let k = 0; k < 2; k++) workers.push(await startSwitchboard({ ...sbEnv, SWITCHBOARD_ROLE: 'worker', PORT: String(await freePort()) }, { readyLine: /worker is running/, readyTimeoutMs: 180_000 }));
    const apis: SwitchboardProcess[] = [];
    for (let k = 0; k < 2; k++) apis.push(await startSwitchboard({ ...sbEnv, SWITCHBOARD_ROLE: 'api', PORT: String(await freePort()) }, { readyTimeoutMs: 180_000 }));
    procs.push(...workers, ...apis);
    const processesStartS = (Date.now() - s0) / 1000;

    const keys = new KeyStore(db.pool);
    const client = (await keys.create({ tenant: 'default', role: 'client', name: 'cluster drill' })).key;
    const operator = (await keys.create({ tenant: 'default', role: 'operator', name: 'cluster drill ops' })).key;
    for (const a of apis) rememberKeys(a.url, { admin: TEST_ADMIN_KEY, operator, client });
    const admin = { 'content-type': 'application/json', authorization: `Bearer ${TEST_ADMIN_KEY}` };
    const deposit = await fetch(`${apis[0].url}/accounts/requester:default/deposits`, {
      method: 'POST', headers: { ...admin, 'x-switchboard-tenant': 'default' }, body: JSON.stringify({ amountMinor: DEPOSIT, idempotencyKey: `drill-${suffix}` }),
    });
    if (deposit.status !== 201) throw new Error(`deposit: ${deposit.status} ${await deposit.text()}`);

    const [slow, chunky, asking, hanging] = await Promise.all([
      startSlowAgent({ ms: 2_500 }), startChunkyAgent({ chunks: CHUNKS, delayMs: 25 }), startAskingAgent(), startSlowAgent({ ms: 600_000 }),
    ]);
    agents.push(slow, chunky, asking, hanging);
    // Short attempts where the work is short, so a dead worker's attempt is given up on soon (the heartbeat
    // timeout is min(attemptTimeoutMs, 10 s)); the canceled tasks' agent works for minutes.
    const register = async (agentUrl: string, priceMinor: number, attemptTimeoutMs: number) => {
      const res = await fetch(`${apis[1].url}/agents`, {
        method: 'POST', headers: { ...admin, authorization: `Bearer ${operator}` },
        body: JSON.stringify({ url: agentUrl, priceMinor, retry: { attemptTimeoutMs, initialIntervalMs: 200, maxAttempts: 5 } }),
      });
      const body = (await res.json()) as { id: string };
      if (res.status !== 201) throw new Error(`registration: ${res.status} ${JSON.stringify(body)}`);
      return body.id;
    };
    const agentIds: Record<Kind, string> = {
      blocking: await register(slow.url, PRICES.blocking, 10_000),
      stream: await register(chunky.url, PRICES.stream, 15_000),
      ask: await register(asking.url, PRICES.ask, 10_000),
      cancel: await register(hanging.url, PRICES.cancel, 900_000),
    };

    const drill = new Drill(apis, client, agentIds);
    console.error(`cluster: load of ${ROUNDS} rounds × 4 kinds, one round every ${INTERVAL_MS} ms${KILLS ? `; kill -9 of a worker and an api process after round ${KILL_AFTER}` : ', no kills'}...`);
    const runs: Promise<void>[] = [];
    const loadStart = Date.now();
    let inFlightAtKill: Task[] = [];
    let killed: { worker: number; api: number } | undefined;
    for (let round = 0; round < ROUNDS; round++) {
      if (round === KILL_AFTER) {
        inFlightAtKill = drill.tasks.filter((t) => t.doneAt === undefined);
        killed = { worker: workers[0].child.pid!, api: apis[0].child.pid! };
        drill.killedAt = Date.now();
        await Promise.all([workers[0].kill(), apis[0].kill()]);
        drill.dead.add(0);
      }
      const due = loadStart + round * INTERVAL_MS;
      if (due > Date.now()) await sleep(due - Date.now());
      for (const kind of ['blocking', 'stream', 'ask', 'cancel'] as const) {
        const task: Task = { kind, round, home: round % 2, sentAt: Date.now(), failovers: 0, problems: [] };
        drill.tasks.push(task);
        const run = kind === 'blocking' ? drill.blocking(task) : kind === 'stream' ? drill.stream(task) : kind === 'ask' ? drill.ask(task) : drill.cancel(task, hanging);
        runs.push(run.catch((err: Error) => void task.problems.push(`client error: ${err.message}`)));
      }
    }
    await Promise.all(runs);
    const loadEnd = Date.now();

    // ---- the checks, at the surviving api process and in PostgreSQL and Temporal ----
    const alive = apis[1];
    const quietDeadline = Date.now() + 90_000;
    const finalState = new Map<Task, string | undefined>();
    const finalWhy = new Map<Task, string | undefined>();
    for (const t of drill.tasks) {
      if (!t.taskId) continue;
      for (;;) {
        const r = await drill.call(t, 1, '/a2a', 'GetTask', { id: t.taskId });
        const state = r.result?.status?.state as string | undefined;
        finalState.set(t, state);
        finalWhy.set(t, r.result?.status?.message?.parts?.map((p: { text?: string }) => p.text).join(' '));
        if (TERMINAL.has(state ?? '') || Date.now() > quietDeadline) break;
        await sleep(500);
      }
    }
    const lost = drill.tasks.filter((t) => !t.taskId || finalState.get(t) !== EXPECTED[t.kind]);
    for (const t of lost) t.problems.push(`GetTask says ${finalState.get(t)} (${finalWhy.get(t) ?? 'no status message'}), expected ${EXPECTED[t.kind]}`);

    // Exactly one settlement per task, for the agent's price when completed and 0 otherwise.
    const { rows: settlements } = await db.pool.query<{ task_id: string; n: string; amount: string; final_state: string }>(
      'SELECT task_id, count(*) AS n, sum(amount_minor) AS amount, max(final_state) AS final_state FROM settlements GROUP BY task_id',
    );
    const byTask = new Map(settlements.map((s) => [s.task_id, s]));
    let doubleSettlements = 0;
    let missingSettlements = 0;
    let wrongAmounts = 0;
    for (const t of drill.tasks) {
      const s = t.taskId ? byTask.get(t.taskId) : undefined;
      if (!s) {
        missingSettlements++;
        t.problems.push('no settlement');
        continue;
      }
      if (Number(s.n) > 1) {
        doubleSettlements++;
        t.problems.push(`${s.n} settlements`);
      }
      if (s.final_state !== EXPECTED[t.kind]) t.problems.push(`settled as ${s.final_state}`);
      const expected = EXPECTED[t.kind] === 'TASK_STATE_COMPLETED' ? PRICES[t.kind] : 0;
      if (Number(s.amount) !== expected) {
        wrongAmounts++;
        t.problems.push(`settled for ${s.amount}, expected ${expected}`);
      }
    }
    const { rows: dupEntries } = await db.pool.query('SELECT movement_key FROM ledger_entries GROUP BY movement_key, account HAVING count(*) > 1');
    const charged = drill.tasks.reduce((n, t) => n + (EXPECTED[t.kind] === 'TASK_STATE_COMPLETED' ? PRICES[t.kind] : 0), 0);
    const account = (await (await fetch(`${alive.url}/accounts/requester:default`, { headers: { authorization: `Bearer ${operator}` } })).json()) as { balanceMinor: number; heldMinor: number };
    if (account.balanceMinor !== DEPOSIT - charged || account.heldMinor !== 0) {
      problems.push(`requester account: balance ${account.balanceMinor} (expected ${DEPOSIT - charged}), held ${account.heldMinor} (expected 0)`);
    }
    // Settlements of tasks that ended in the last minute are listed as settling, not as violations; wait them out.
    let reconcile: { ok: boolean; [k: string]: unknown } | undefined;
    const reconcileDeadline = Date.now() + 90_000;
    for (;;) {
      reconcile = (await (await fetch(`${alive.url}/ledger/reconcile`, { headers: { authorization: `Bearer ${operator}` } })).json()) as typeof reconcile;
      const settling = (reconcile as { settling?: unknown[] }).settling ?? [];
      if (!reconcile!.ok || settling.length === 0 || Date.now() > reconcileDeadline) break;
      await sleep(2_000);
    }
    if (!reconcile?.ok) problems.push(`GET /ledger/reconcile: ${JSON.stringify(reconcile).slice(0, 600)}`);

    // No workflow of this task queue still running (visibility in PostgreSQL, with Switchboard's search attributes).
    connection = await Connection.connect({ address });
    const temporal = new Client({ connection, namespace: 'default' });
    let running = 0;
    for await (const wf of temporal.workflow.list({ query: `WorkflowType = "taskWorkflow" AND TaskQueue = "${taskQueue}" AND ExecutionStatus = "Running"` })) {
      running++;
      problems.push(`workflow ${wf.workflowId} still running`);
    }

    // ---- figures ----
    const streams = drill.tasks.filter((t) => t.kind === 'stream');
    const resumed = streams.filter((t) => t.resumedAfterMs !== undefined);
    const interrupted = inFlightAtKill;
    const recoverMs = interrupted.length ? Math.max(...interrupted.map((t) => (t.doneAt ?? Date.now()) - drill.killedAt)) : NaN;
    const firstDoneAfterKill = Math.min(...drill.tasks.filter((t) => t.doneAt && t.doneAt > drill.killedAt && t.state === EXPECTED[t.kind]).map((t) => t.doneAt! - drill.killedAt));
    const retriedAtAgent = [slow, chunky, asking, hanging].reduce((n, a) => {
      const seen = new Map<string, number>();
      for (const c of a.calls) {
        const id = c.params?.message?.messageId;
        if (typeof id === 'string' && /^(SendMessage|SendStreamingMessage|message\/send|message\/stream)$/.test(c.method)) seen.set(id, (seen.get(id) ?? 0) + 1);
      }
      return n + [...seen.values()].filter((k) => k > 1).length;
    }, 0);
    const withProblems = drill.tasks.filter((t) => t.problems.length);
    const completed = drill.tasks.filter((t) => t.state === EXPECTED[t.kind]).length;
    const loadS = (loadEnd - loadStart) / 1000;

    console.log(`\nSwitchboard on a Temporal cluster — Temporal server v1.29.1 on PostgreSQL (${address}), 2 api + 2 worker processes, node ${process.version}, ${os.cpus().length} CPUs, ${((Date.now() - t0) / 1000).toFixed(0)} s`);
    console.log(`cluster start ${clusterStartS.toFixed(0)} s (build included when cold); 4 Switchboard processes ready in ${processesStartS.toFixed(0)} s\n`);
    console.log(killed ? `kills: 2 (kill -9 of worker pid ${killed.worker} and api pid ${killed.api} after round ${KILL_AFTER} of ${ROUNDS}, ${interrupted.length} tasks in flight)` : 'kills: none (a baseline: CLUSTER_KILL_AFTER >= CLUSTER_ROUNDS)');
    console.log('\n| kind | tasks | ended as expected | client failovers | p50 | p99 |');
    console.log('| --- | --- | --- | --- | --- | --- |');
    for (const kind of ['blocking', 'stream', 'ask', 'cancel'] as const) {
      const ts = drill.tasks.filter((t) => t.kind === kind);
      const lat = ts.filter((t) => t.doneAt).map((t) => t.doneAt! - t.sentAt);
      const label = { blocking: 'blocking SendMessage (2.5 s agent)', stream: `SendStreamingMessage (${CHUNKS} chunks)`, ask: 'input-required, answered via the other api', cancel: 'CancelTask via the other api' }[kind];
      console.log(`| ${label} | ${ts.length} | ${ts.filter((t) => t.state === EXPECTED[t.kind] && finalState.get(t) === EXPECTED[t.kind]).length} | ${ts.reduce((n, t) => n + t.failovers, 0)} | ${percentile(lat, 50)} ms | ${percentile(lat, 99)} ms |`);
    }
    console.log(`\ntasks ${drill.tasks.length}, lost ${lost.length}, double settlements ${doubleSettlements}, missing settlements ${missingSettlements}, wrong amounts ${wrongAmounts}, duplicate ledger entries ${dupEntries.length}, workflows still running ${running}`);
    console.log(`ledger reconcile: ${reconcile?.ok ? 'clean' : 'NOT clean'}; requester charged ${DEPOSIT - account.balanceMinor} (expected ${charged})`);
    console.log(`streams: ${streams.length}, ${resumed.length} resumed at the other api process with Last-Event-ID (kill → first event from the other process, which waits for the dead worker's attempt to be retried when that worker had the call: ${resumed.map((t) => t.resumedAfterMs).sort((a, b) => a! - b!).join(', ')} ms), ids consecutive and text whole in ${streams.filter((t) => !t.problems.some((p) => /ids|text/.test(p))).length}`);
    console.log(`agent calls made again with the same messageId (attempts of the dead worker retried): ${retriedAtAgent}`);
    if (killed) console.log(`time to recover: first task completed after the kills ${firstDoneAfterKill} ms; every task in flight at the kills ended ${recoverMs} ms after them`);
    console.log(`throughput: ${completed} tasks in ${loadS.toFixed(1)} s of load = ${(completed / loadS).toFixed(2)} tasks/s (kills included)`);
    for (const t of withProblems.slice(0, 20)) console.log(`  problem: ${t.kind} round ${t.round} task ${t.taskId}: ${t.problems.join('; ')}`);
    for (const p of problems) console.log(`  problem: ${p}`);
    if (withProblems.length || problems.length || lost.length || doubleSettlements || missingSettlements || wrongAmounts || dupEntries.length || (KILLS && !resumed.length)) {
      if (KILLS && !resumed.length) console.log('  problem: no stream was interrupted by the kill (raise CLUSTER_ROUNDS or move CLUSTER_KILL_AFTER)');
      // What the Switchboard processes logged at warn and above, for the why.
      for (const [k, p] of procs.entries()) {
        const lines = p.output().split('\n').filter((l) => /"level":(40|50|60)/.test(l)).slice(-8);
        for (const l of lines) console.log(`  ${k < 2 ? 'worker' : 'api'} ${k % 2}: ${l.slice(0, 400)}`);
      }
      console.log('\ntargets missed');
      process.exitCode = 1;
    } else console.log('\nevery check passed');
  } finally {
    await Promise.all(procs.map((p) => p.kill()));
    await Promise.all(agents.map((a) => a.close()));
    await connection?.close();
    if (KEEP) console.error(`cluster: kept the Temporal server (${clusterDir}) and the schema ${db.schema}; stop with TEMPORAL_CLUSTER_DIR=${clusterDir} TEMPORAL_CLUSTER_PORT=${CLUSTER_PORT} TEMPORAL_CLUSTER_DB=temporal_drill_${suffix} scripts/temporal-cluster.sh destroy`);
    else {
      await db.drop();
      if (!given) cluster('destroy');
    }
    rmSync(dataDir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(),
  (err: Error) => {
    console.error(`cluster: ${err.stack}`);
    process.exit(1);
  },
);
