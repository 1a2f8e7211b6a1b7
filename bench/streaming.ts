/**
 * The streaming part of `npm run bench`: an @a2a-js/sdk streaming agent (test/agents/chunky.ts) called directly
 * and through Switchboard, in the same process, measuring
 *  1. time to first event (TTFE) and to first artifact chunk of a small stream (SendStreamingMessage), p50/p99;
 *  2. events/s of one long stream (10,000 chunks by default);
 *  3. replay: a reconnecting client's SubscribeToTask with `Last-Event-ID: 0` on the completed long task, which
 *     reads every logged event back from PostgreSQL.
 * Clients: the SDK client (`sendMessageStream`) against the agent's own card and against the gateway's card for
 * it, and a lean raw SSE reader (fetch + JSON.parse per event) against the gateway, to separate the SDK's own
 * parsing cost from the gateway's. Targets are reported, never enforced.
 *
 * Env: BENCH_STREAM_RUNS (small streams per client, default 50), BENCH_STREAM_SMALL_CHUNKS (default 5),
 * BENCH_STREAM_CHUNKS (chunks of the long stream, default 10000), BENCH_STREAM_LONG_RUNS (long streams per
 * client, default 3; each long path is warmed once first unless BENCH_STREAM_WARMUP=0), BENCH_STREAM_REPLAYS (default 3), BENCH_STREAM_WARMUP (default 5).
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { SendMessageRequest, TaskState } from '@a2a-js/sdk';
import { type Client, ClientFactory } from '@a2a-js/sdk/client';
import type { Gateway } from '../test/helpers/harness';

const int = (name: string, def: number) => (process.env[name] ? Number.parseInt(process.env[name]!, 10) : def);
export const STREAM_RUNS = int('BENCH_STREAM_RUNS', 50);
export const STREAM_SMALL_CHUNKS = int('BENCH_STREAM_SMALL_CHUNKS', 5);
export const STREAM_CHUNKS = int('BENCH_STREAM_CHUNKS', 10_000);
export const STREAM_LONG_RUNS = int('BENCH_STREAM_LONG_RUNS', 3);
export const STREAM_REPLAYS = int('BENCH_STREAM_REPLAYS', 3);
export const STREAM_WARMUP = int('BENCH_STREAM_WARMUP', 5);
export const TARGET_ADDED_TTFE_MS = 10;
export const TARGET_THROUGHPUT_RATIO = 0.5;

/** One stream as a client saw it. Times in ms from the call. */
interface StreamRun {
  ttfe: number;
  /** First artifactUpdate. */
  ttfc: number;
  total: number;
  /** The last event. */
  lastAt: number;
  events: number;
  chunks: number;
  taskId?: string;
  /** The last event's seq (raw SSE reader only: the SSE `id:`). */
  lastId?: number;
}

export interface LatencyRow {
  scenario: string;
  n: number;
  errors: number;
  ttfeP50: number;
  ttfeP99: number;
  ttfcP50: number;
  ttfcP99: number;
  totalP50: number;
  totalP99: number;
  truncated: boolean;
}

export interface ThroughputRow {
  scenario: string;
  runs: number;
  errors: number;
  /** Events received per stream (the task, the chunks, the final status). */
  events: number;
  /** Median over runs. */
  seconds: number;
  eventsPerSec: number;
  /** Events after the first ÷ time from the first event to the last: the pipeline's rate once it flows. */
  flowingEventsPerSec: number;
  ttfeMs: number;
  /** CPU time of this whole process (client + agent + gateway + worker) per 1,000 events. */
  cpuMsPer1kEvents: number;
}

export interface StreamingReport {
  settings: { runs: number; smallChunks: number; chunks: number; longRuns: number; replays: number; warmup: number };
  latency: LatencyRow[];
  throughput: ThroughputRow[];
  /** gateway (SDK) − direct (SDK), p50. */
  addedTtfeP50Ms: number;
  addedTtfeP99Ms: number;
  addedTtfcP50Ms: number;
  /** gateway (SDK) events/s ÷ direct (SDK) events/s for the long stream. */
  throughputRatio: number;
  /** The same with the raw SSE reader as the gateway's client. */
  throughputRatioRawSse: number;
  replayEventsPerSec: number;
  replayRatio: number;
  targets: {
    addedTtfeP50Ms: { target: number; value: number; met: boolean };
    streamThroughputRatio: { target: number; value: number; met: boolean };
  };
}

const userMessage = () => ({ messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'go' }] });

/** A streaming call through the SDK client; resolves when the stream ends. Throws unless the task completed. */
async function sdkStream(client: Client): Promise<StreamRun> {
  const t0 = performance.now();
  const run: StreamRun = { ttfe: NaN, ttfc: NaN, total: NaN, lastAt: NaN, events: 0, chunks: 0 };
  let state: TaskState | undefined;
  for await (const e of client.sendMessageStream(SendMessageRequest.fromJSON({ message: userMessage() }))) {
    run.lastAt = performance.now() - t0;
    if (run.events++ === 0) run.ttfe = run.lastAt;
    const p = e.payload;
    if (p?.$case === 'artifactUpdate') {
      if (run.chunks++ === 0) run.ttfc = performance.now() - t0;
    } else if (p?.$case === 'statusUpdate') state = p.value.status?.state;
    else if (p?.$case === 'task') {
      run.taskId ??= p.value.id;
      state = p.value.status?.state;
    }
  }
  run.total = performance.now() - t0;
  if (state !== TaskState.TASK_STATE_COMPLETED) throw new Error(`stream ended in state ${state}`);
  return run;
}

/**
 * A lean SSE reader: fetch, split on blank lines, JSON.parse each `data:` (as any real client must), keep
 * nothing but counts. Throws on a JSON-RPC error event or an answer that is not a stream.
 */
/** The client key of the test gateway at `url` (undefined for an agent called directly); set by benchStreaming. */
let gatewayKey: (url: string) => string | undefined = () => undefined;

async function rawStream(url: string, method: string, params: unknown, lastEventId?: number): Promise<StreamRun> {
  const t0 = performance.now();
  const run: StreamRun = { ttfe: NaN, ttfc: NaN, total: NaN, lastAt: NaN, events: 0, chunks: 0 };
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'text/event-stream',
      'A2A-Version': '1.0',
      ...(gatewayKey(url) ? { authorization: `Bearer ${gatewayKey(url)}` } : {}),
      ...(lastEventId !== undefined ? { 'Last-Event-ID': String(lastEventId) } : {}),
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  if (!(res.headers.get('content-type') ?? '').startsWith('text/event-stream')) throw new Error(`not a stream: ${res.status} ${await res.text()}`);
  let state: string | undefined;
  let buffer = '';
  const decoder = new TextDecoder();
  for await (const bytes of res.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(bytes, { stream: true });
    let start = 0;
    let cut: number;
    while ((cut = buffer.indexOf('\n\n', start)) >= 0) {
      const block = buffer.slice(start, cut);
      start = cut + 2;
      let data: string | undefined;
      for (const line of block.split('\n')) {
        if (line.startsWith('data:')) data = line.slice(5);
        else if (line.startsWith('id:')) run.lastId = Number(line.slice(3));
      }
      if (data === undefined) continue; // a heartbeat comment
      const msg = JSON.parse(data);
      if (msg.error) throw new Error(`stream error: ${JSON.stringify(msg.error)}`);
      const r = msg.result;
      run.lastAt = performance.now() - t0;
      if (run.events++ === 0) run.ttfe = run.lastAt;
      if (r.artifactUpdate) {
        if (run.chunks++ === 0) run.ttfc = performance.now() - t0;
      } else if (r.statusUpdate) state = r.statusUpdate.status.state;
      else if (r.task) {
        run.taskId ??= r.task.id;
        state = r.task.status.state;
      }
    }
    buffer = buffer.slice(start);
  }
  run.total = performance.now() - t0;
  if (state !== 'TASK_STATE_COMPLETED') throw new Error(`stream ended in state ${state}`);
  return run;
}

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
const median = (xs: number[]) => pct(sorted(xs), 50);

/** A warm-up call: a failure is logged (the measured calls count errors), not thrown. */
async function warm(scenario: string, call: () => Promise<StreamRun>, log: (s: string) => void): Promise<void> {
  try {
    await call();
  } catch (err) {
    log(`    warm-up of ${scenario} failed: ${(err as Error).message}`);
  }
}

async function latency(scenario: string, call: () => Promise<StreamRun>, deadline: number, log: (s: string) => void): Promise<LatencyRow> {
  for (let i = 0; i < STREAM_WARMUP; i++) await warm(scenario, call, log);
  const runs: StreamRun[] = [];
  let errors = 0;
  let next = 0;
  const t0 = performance.now();
  while (next < STREAM_RUNS && Date.now() < deadline) {
    next++;
    try {
      runs.push(await call());
    } catch (err) {
      if (errors++ === 0) log(`    first error: ${(err as Error).message}`);
    }
  }
  const ttfe = sorted(runs.map((r) => r.ttfe));
  const ttfc = sorted(runs.map((r) => r.ttfc));
  const total = sorted(runs.map((r) => r.total));
  log(`  stream TTFE ${scenario}: ${runs.length} ok, ${errors} errors in ${((performance.now() - t0) / 1000).toFixed(1)}s`);
  return {
    scenario,
    n: runs.length,
    errors,
    ttfeP50: pct(ttfe, 50),
    ttfeP99: pct(ttfe, 99),
    ttfcP50: pct(ttfc, 50),
    ttfcP99: pct(ttfc, 99),
    totalP50: pct(total, 50),
    totalP99: pct(total, 99),
    truncated: next < STREAM_RUNS,
  };
}

async function throughput(
  scenario: string,
  runsWanted: number,
  call: () => Promise<StreamRun>,
  log: (s: string) => void,
  expectEvents?: number,
): Promise<{ row: ThroughputRow; last?: StreamRun }> {
  const runs: StreamRun[] = [];
  const cpu: number[] = [];
  let errors = 0;
  for (let i = 0; i < runsWanted; i++) {
    const cpu0 = process.cpuUsage();
    try {
      const r = await call();
      if (expectEvents !== undefined && r.events !== expectEvents) throw new Error(`${r.events} events, expected ${expectEvents}`);
      runs.push(r);
      const c = process.cpuUsage(cpu0);
      cpu.push((c.user + c.system) / 1000 / (r.events / 1000));
    } catch (err) {
      if (errors++ === 0) log(`    first error: ${(err as Error).message}`);
    }
  }
  const seconds = median(runs.map((r) => r.total)) / 1000;
  const events = median(runs.map((r) => r.events));
  const row: ThroughputRow = {
    scenario,
    runs: runs.length,
    errors,
    events,
    seconds,
    eventsPerSec: median(runs.map((r) => r.events / (r.total / 1000))),
    flowingEventsPerSec: median(runs.map((r) => (r.events - 1) / ((r.lastAt - r.ttfe) / 1000))),
    ttfeMs: median(runs.map((r) => r.ttfe)),
    cpuMsPer1kEvents: median(cpu),
  };
  log(`  ${scenario}: ${runs.length} ok, ${errors} errors, ${row.eventsPerSec.toFixed(0)} events/s`);
  return { row, last: runs.at(-1) };
}

/** Runs the streaming scenarios against `gw` with its own chunky agents; `deadline` (epoch ms) cuts the latency loops short. */
export async function benchStreaming(gw: Gateway, deadline: number, log: (s: string) => void = console.error): Promise<StreamingReport> {
  const { register, clientFactory, keysFor } = await import('../test/helpers/harness');
  gatewayKey = (url) => keysFor(url)?.client;
  const { startChunkyAgent } = await import('../test/agents');
  const [small, long] = await Promise.all([startChunkyAgent({ chunks: STREAM_SMALL_CHUNKS }), startChunkyAgent({ chunks: STREAM_CHUNKS })]);
  try {
    const factory = new ClientFactory();
    const viaGateway = clientFactory(gw.keys.client);
    const [smallReg, longReg] = await Promise.all([register(gw, small.url), register(gw, long.url)]);
    const card = (base: string) => `${base}/.well-known/agent-card.json`;
    const [smallDirect, smallGateway, longDirect, longGateway] = await Promise.all([
      factory.createFromUrl(small.url),
      viaGateway.createFromUrl(card(smallReg.base), ''),
      factory.createFromUrl(long.url),
      viaGateway.createFromUrl(card(longReg.base), ''),
    ]);
    const send = (rpc: string) => () => rawStream(rpc, 'SendStreamingMessage', { message: userMessage() });

    const latencyRows = [
      await latency('direct (SDK client)', () => sdkStream(smallDirect), deadline, log),
      await latency('gateway (SDK client)', () => sdkStream(smallGateway), deadline, log),
      await latency('gateway (raw SSE reader)', send(smallReg.rpc), deadline, log),
    ];

    // The long stream: the task event, every chunk, the completed status.
    const expect = STREAM_CHUNKS + 2;
    if (STREAM_WARMUP > 0) {
      // Warm each long path once (JIT, batch sizes, connections); not measured.
      await warm('long, direct', () => sdkStream(longDirect), log);
      await warm('long, gateway', () => sdkStream(longGateway), log);
      await warm('long, gateway raw', () => rawStream(longReg.rpc, 'SendStreamingMessage', { message: userMessage() }), log);
    }
    const direct = await throughput('direct (SDK client)', STREAM_LONG_RUNS, () => sdkStream(longDirect), log, expect);
    const gateway = await throughput('gateway (SDK client)', STREAM_LONG_RUNS, () => sdkStream(longGateway), log);
    const gatewayRaw = await throughput('gateway (raw SSE reader)', STREAM_LONG_RUNS, send(longReg.rpc), log);
    const logged = gatewayRaw.last;
    const rows = [direct.row, gateway.row, gatewayRaw.row];
    let replayEps = NaN;
    if (logged?.taskId && logged.lastId) {
      const replay = await throughput(
        'replay, Last-Event-ID: 0 (raw SSE reader)',
        STREAM_REPLAYS,
        () => rawStream(longReg.rpc, 'SubscribeToTask', { id: logged.taskId }, 0),
        log,
        logged.lastId,
      );
      rows.push(replay.row);
      replayEps = replay.row.eventsPerSec;
    } else {
      log('  replay skipped: the raw SSE long stream did not complete');
    }

    const dSdk = latencyRows[0];
    const gSdk = latencyRows[1];
    const addedTtfeP50Ms = gSdk.ttfeP50 - dSdk.ttfeP50;
    const throughputRatio = gateway.row.eventsPerSec / direct.row.eventsPerSec;
    return {
      settings: { runs: STREAM_RUNS, smallChunks: STREAM_SMALL_CHUNKS, chunks: STREAM_CHUNKS, longRuns: STREAM_LONG_RUNS, replays: STREAM_REPLAYS, warmup: STREAM_WARMUP },
      latency: latencyRows,
      throughput: rows,
      addedTtfeP50Ms,
      addedTtfeP99Ms: gSdk.ttfeP99 - dSdk.ttfeP99,
      addedTtfcP50Ms: gSdk.ttfcP50 - dSdk.ttfcP50,
      throughputRatio,
      throughputRatioRawSse: gatewayRaw.row.eventsPerSec / direct.row.eventsPerSec,
      replayEventsPerSec: replayEps,
      replayRatio: replayEps / direct.row.eventsPerSec,
      targets: {
        addedTtfeP50Ms: { target: TARGET_ADDED_TTFE_MS, value: addedTtfeP50Ms, met: addedTtfeP50Ms <= TARGET_ADDED_TTFE_MS },
        streamThroughputRatio: { target: TARGET_THROUGHPUT_RATIO, value: throughputRatio, met: throughputRatio >= TARGET_THROUGHPUT_RATIO },
      },
    };
  } finally {
    await Promise.all([small.close(), long.close()]);
  }
}

function table(cols: string[], rows: string[][]): string {
  const widths = cols.map((c, i) => Math.max(c.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  return [line(cols), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

export function printStreaming(r: StreamingReport): void {
  const f = (x: number, d = 1) => (Number.isFinite(x) ? x.toFixed(d) : '—');
  const s = r.settings;
  console.log(`\nstreaming: ${s.smallChunks}-chunk streams (${s.runs} per client after ${s.warmup} warm-up), times from the call in ms\n`);
  console.log(
    table(
      ['client', 'n', 'errors', 'TTFE p50', 'TTFE p99', '1st chunk p50', '1st chunk p99', 'whole p50', 'whole p99'],
      r.latency.map((l) => [
        l.scenario + (l.truncated ? ' (budget hit)' : ''),
        String(l.n),
        String(l.errors),
        f(l.ttfeP50),
        f(l.ttfeP99),
        f(l.ttfcP50),
        f(l.ttfcP99),
        f(l.totalP50),
        f(l.totalP99),
      ]),
    ),
  );
  console.log(`\nstreaming: one ${s.chunks}-chunk stream (median of ${s.longRuns}; replay median of ${s.replays})\n`);
  const direct = r.throughput[0].eventsPerSec;
  console.log(
    table(
      ['client', 'runs', 'errors', 'events', 'seconds', 'events/s', 'vs direct', 'TTFE ms', 'events/s after 1st', 'node CPU ms/1k events'],
      r.throughput.map((t) => [
        t.scenario,
        String(t.runs),
        String(t.errors),
        String(t.events),
        f(t.seconds, 2),
        f(t.eventsPerSec, 0),
        f(t.eventsPerSec / direct, 3),
        f(t.ttfeMs),
        f(t.flowingEventsPerSec, 0),
        f(t.cpuMsPer1kEvents),
      ]),
    ),
  );
  console.log(`\nadded TTFE (gateway − direct, SDK clients): p50 ${f(r.addedTtfeP50Ms)} ms, p99 ${f(r.addedTtfeP99Ms)} ms; first chunk p50 ${f(r.addedTtfcP50Ms)} ms`);
  console.log(`stream throughput ratio (gateway / direct): SDK client ${f(r.throughputRatio, 3)}, raw SSE reader ${f(r.throughputRatioRawSse, 3)}`);
  console.log('(events/s: all events ÷ time from the call to the last event; "after 1st": from the first event to the last)');
  console.log(`replay of ${s.chunks + 2} logged events: ${f(r.replayEventsPerSec, 0)} events/s (${f(r.replayRatio, 3)} × direct live stream)`);
}
