/**
 * `BENCH_ONLY=fairness npm run bench` (issue 46): does one tenant flooding the gateway leave another its share?
 * A light tenant sends BENCH_FAIR_RATE (5) blocking tasks a second, on a schedule, for BENCH_FAIR_S (20) seconds:
 * alone, then while a second tenant floods with BENCH_FAIR_FLOODERS (48) clients in a process of their own, at the
 * default quotas. Reports the light tenant's p50 and p99 in both runs and their ratio (the target: within 2×), its
 * failed tasks, and the flooder's tasks/s. The echo agent runs in a process of its own too.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import type { Client } from '@a2a-js/sdk/client';
import { sendBlocking } from './measure';
import type { Gateway } from '../test/helpers/harness';

const int = (name: string, def: number) => (process.env[name] ? Number.parseInt(process.env[name]!, 10) : def);
const RATE = int('BENCH_FAIR_RATE', 5);
const SECONDS = int('BENCH_FAIR_S', 20);
const FLOODERS = int('BENCH_FAIR_FLOODERS', 48);
const TARGET_RATIO = 2;

export interface LightRun {
  n: number;
  failed: number;
  p50: number;
  p99: number;
}

export interface FairnessReport {
  alone: LightRun;
  flooded: LightRun;
  flood: { clients: number; tasksPerSecond: number; errors: number; firstError?: string };
}

/** `RATE` tasks a second for `SECONDS`, each sent on its schedule whether or not the earlier ones have ended. */
async function lightLoad(client: Client): Promise<LightRun> {
  const latencies: number[] = [];
  let failed = 0;
  const sends: Promise<void>[] = [];
  const t0 = performance.now();
  for (let i = 0; i < RATE * SECONDS; i++) {
    const at = t0 + (i * 1000) / RATE;
    await new Promise((r) => setTimeout(r, Math.max(0, at - performance.now())));
    const start = performance.now();
    sends.push(sendBlocking(client).then(() => void latencies.push(performance.now() - start), () => void failed++));
  }
  await Promise.all(sends);
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN;
  return { n: latencies.length, failed, p50: at(0.5), p99: at(0.99) };
}

/** A child process of this folder (agent-process.ts, flood-process.ts; compiled: dist/bench/), with IPC. */
function child(name: string, args: string[] = []): ChildProcess {
  return fork(require.resolve(`./${name}`), args, { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
}

const firstMessage = <T>(p: ChildProcess): Promise<T> => new Promise((resolve, reject) => {
  p.once('message', (m) => resolve(m as T));
  p.once('exit', (code) => reject(new Error(`child exited (${code}) before it answered`)));
});

export async function benchFairness(gw: Gateway): Promise<FairnessReport> {
  const { clientFactory, register } = await import('../test/helpers/harness');
  const agent = child('agent-process', ['echo']);
  try {
    const { url } = await firstMessage<{ url: string }>(agent);
    const admin = async (path: string, body: unknown, key = gw.keys.admin) => {
      const res = await fetch(`${gw.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` }, body: JSON.stringify(body) });
      if (res.status !== 201) throw new Error(`${path}: ${res.status} ${await res.text()}`);
      return (await res.json()) as Record<string, string>;
    };
    // The flooding tenant: its own operator registers the same agent, its own client key floods it.
    await admin('/tenants', { id: 'flood', name: 'Flooding tenant' });
    const operator = (await admin('/tenants/flood/keys', { role: 'operator', name: 'flood operator' })).key!;
    const floodKey = (await admin('/tenants/flood/keys', { role: 'client', name: 'flood client' })).key!;
    const floodAgent = (await admin('/agents', { url }, operator)).id!;
    const light = await clientFactory(gw.keys.client).createFromUrl(`${(await register(gw, url)).base}/.well-known/agent-card.json`, '');
    for (let i = 0; i < 20; i++) await sendBlocking(light); // warm up
    console.error(`  fairness: the light tenant alone, ${RATE} tasks/s for ${SECONDS} s...`);
    const alone = await lightLoad(light);
    console.error(`  fairness: again while another tenant floods with ${FLOODERS} clients...`);
    const flooder = child('flood-process');
    try {
      flooder.send({ cardUrl: `${gw.url}/agents/${floodAgent}/.well-known/agent-card.json`, key: floodKey, concurrency: FLOODERS });
      await firstMessage(flooder);
      await new Promise((r) => setTimeout(r, 3_000)); // the flood at its full rate first
      const t0 = performance.now();
      const flooded = await lightLoad(light);
      const seconds = (performance.now() - t0) / 1000;
      const stopped = firstMessage<{ ok: number; errors: number; firstError?: string }>(flooder);
      flooder.send('stop');
      const f = await stopped;
      // The flood ran 3 s before the light load and a moment after it: its rate over the whole time is near enough.
      return { alone, flooded, flood: { clients: FLOODERS, tasksPerSecond: f.ok / (seconds + 3), errors: f.errors, firstError: f.firstError } };
    } finally {
      flooder.kill();
    }
  } finally {
    agent.disconnect();
  }
}

export function printFairness(r: FairnessReport): void {
  const row = (name: string, l: LightRun) => `| ${name} | ${l.n} | ${l.failed} | ${l.p50.toFixed(1)} | ${l.p99.toFixed(1)} |`;
  console.log(`\n## Fairness: a light tenant (${RATE} tasks/s) alone and beside a flooding tenant (${r.flood.clients} clients)\n`);
  console.log('| light tenant | tasks | failed | p50 ms | p99 ms |');
  console.log('| --- | --- | --- | --- | --- |');
  console.log(row('alone', r.alone));
  console.log(row('beside the flood', r.flooded));
  const ratio = r.flooded.p50 / r.alone.p50;
  console.log(`\nlight tenant p50 with the flood / alone: ${ratio.toFixed(2)}× (target ≤ ${TARGET_RATIO}×: ${ratio <= TARGET_RATIO ? 'met' : 'NOT met'})`);
  console.log(`flooding tenant: ${r.flood.tasksPerSecond.toFixed(1)} tasks/s, ${r.flood.errors} errors${r.flood.firstError ? ` (first: ${r.flood.firstError})` : ''}`);
}
