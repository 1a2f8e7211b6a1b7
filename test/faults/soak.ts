/**
 * `npm run soak` (not in CI): a long run at a fixed rate with faults injected every few minutes, watching for
 * creeping memory, file descriptors, PostgreSQL connections and event-loop delay (reference/reliability-and-
 * security.md §4.3). Switchboard runs in this process (gateway + worker) against a Temporal dev server and the
 * local PostgreSQL; the load is blocking SendMessage to echo agents, a tenth of them to an agent that resets the
 * connection after doing the work (F6); every `SOAK_FAULT_EVERY_S` the worker is stopped and replaced (F1, as a
 * process would be after a crash) or the front door is replaced (F2).
 *
 * Env: SOAK_MINUTES (default 30), SOAK_RATE (tasks/s, default 4: half the knee measured on a 2-core box),
 * SOAK_FAULT_EVERY_S (default 180), SOAK_SAMPLE_S (default 10).
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';

const ROOT = path.resolve(__dirname, '../..');
process.env.LOG_LEVEL ??= 'silent';
process.env.DATABASE_URL ??= 'postgres://postgres@127.0.0.1:5432/test';
process.env.TEMPORAL_CLI ||= execFileSync('bash', [path.join(ROOT, 'scripts/ensure-temporal.sh')], { encoding: 'utf8' }).trim().split('\n').pop();

const MINUTES = Number(process.env.SOAK_MINUTES ?? 30);
const RATE = Number(process.env.SOAK_RATE ?? 4);
const FAULT_EVERY_S = Number(process.env.SOAK_FAULT_EVERY_S ?? 180);
const SAMPLE_S = Number(process.env.SOAK_SAMPLE_S ?? 10);

interface Sample {
  atS: number;
  rssMiB: number;
  heapMiB: number;
  fds: number;
  pgConnections: number;
  loopP99Ms: number;
  done: number;
  failed: number;
}

async function main() {
  const { startGateway, register, rpc } = await import('../helpers/harness');
  const { startEchoAgent } = await import('../agents');
  const { startFaultyAgent } = await import('../agents/faulty');
  const gw = await startGateway();
  let front = gw;
  const echo = await startEchoAgent();
  const resetting = await startFaultyAgent({ mode: 'reset-after', times: Number.MAX_SAFE_INTEGER });
  const echoRpc = (await register(gw, echo.url)).id;
  const resetRpc = (await register(gw, resetting.url, { retry: { maxAttempts: 2, initialIntervalMs: 200 } })).id;
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  const samples: Sample[] = [];
  const faults: string[] = [];
  let done = 0;
  let failed = 0;
  let inFlight = 0;
  const t0 = Date.now();
  const end = t0 + MINUTES * 60_000;

  const sample = async () => {
    const { rows } = await gw.db.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database()");
    const mem = process.memoryUsage();
    samples.push({
      atS: Math.round((Date.now() - t0) / 1000),
      rssMiB: Math.round(mem.rss / 2 ** 20),
      heapMiB: Math.round(mem.heapUsed / 2 ** 20),
      fds: readdirSync('/proc/self/fd').length,
      pgConnections: rows[0]!.n,
      loopP99Ms: Math.round(loop.percentile(99) / 1e6),
      done,
      failed,
    });
    loop.reset();
    const s = samples.at(-1)!;
    console.error(`soak ${s.atS}s: rss ${s.rssMiB} MiB, heap ${s.heapMiB} MiB, fds ${s.fds}, pg ${s.pgConnections}, loop p99 ${s.loopP99Ms} ms, done ${done}, failed ${failed}, in flight ${inFlight}`);
  };

  let nextFault = t0 + FAULT_EVERY_S * 1000;
  let faultKind = 0;
  let sampleAt = t0;
  let i = 0;
  while (Date.now() < end) {
    const due = t0 + (i * 1000) / RATE;
    if (Date.now() < due) await new Promise((r) => setTimeout(r, due - Date.now()));
    const agentId = i % 10 === 9 ? resetRpc : echoRpc;
    i++;
    inFlight++;
    void rpc(`${front.url}/agents/${agentId}/a2a`, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'soak' }] } } }, { 'A2A-Version': '1.0' })
      .then((r) => (r.json?.result?.task?.status?.state === 'TASK_STATE_COMPLETED' || r.json?.result?.task?.status?.state === 'TASK_STATE_FAILED' ? done++ : failed++))
      .catch(() => failed++)
      .finally(() => inFlight--);
    if (Date.now() >= sampleAt) {
      sampleAt += SAMPLE_S * 1000;
      await sample();
    }
    if (Date.now() >= nextFault) {
      nextFault += FAULT_EVERY_S * 1000;
      if (faultKind++ % 2 === 0) {
        faults.push(`${Math.round((Date.now() - t0) / 1000)}s: worker replaced`);
        await gw.stopWorker();
        await gw.startWorker();
      } else {
        faults.push(`${Math.round((Date.now() - t0) / 1000)}s: front door replaced`);
        const old = front;
        front = await startGateway({ db: gw.db, temporal: { env: gw.env, taskQueue: gw.taskQueue }, worker: false });
        if (old !== gw) await old.close();
      }
    }
  }
  while (inFlight > 0) await new Promise((r) => setTimeout(r, 200));
  await sample();
  const reconcile = (await (await gw.fetch(`${gw.url}/ledger/reconcile`, {}, 'operator')).json()) as { ok: boolean };
  if (front !== gw) await front.close();
  await Promise.all([echo.close(), resetting.close()]);
  await gw.close();

  const first = samples[Math.min(2, samples.length - 1)]!; // after warm-up
  const last = samples.at(-1)!;
  const max = (k: keyof Sample) => Math.max(...samples.map((s) => s[k] as number));
  const minutes = (last.atS - first.atS) / 60 || 1;
  console.log(`\nsoak: ${MINUTES} min at ${RATE} tasks/s, ${done} answered, ${failed} not, faults: ${faults.join('; ') || 'none'}`);
  console.log(`RSS ${first.rssMiB} → ${last.rssMiB} MiB (max ${max('rssMiB')}, ${((last.rssMiB - first.rssMiB) / minutes).toFixed(2)} MiB/min after warm-up); heap ${first.heapMiB} → ${last.heapMiB} MiB`);
  console.log(`file descriptors ${first.fds} → ${last.fds} (max ${max('fds')}); PostgreSQL connections ${first.pgConnections} → ${last.pgConnections} (max ${max('pgConnections')}); event-loop p99 max ${max('loopP99Ms')} ms`);
  console.log(`reconcile ok: ${reconcile.ok}`);
  console.log(`samples (s, RSS MiB): ${samples.map((s) => `${s.atS}:${s.rssMiB}`).join(' ')}`);
  process.exitCode = reconcile.ok && failed === 0 ? 0 : 1;
}

void main().then(() => process.exit());
