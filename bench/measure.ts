/**
 * What the bench parts share: one blocking SendMessage, and the timed loop that runs it from `concurrency` loops
 * and reports latency percentiles, throughput and CPU per call.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { SendMessageRequest, Task } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import { type ProcessCpu, processMeter } from './processes';
import { cpuMeter, type GroupCpu } from './threads';

/** One blocking SendMessage with a fresh messageId; throws unless the task completed. */
export async function sendBlocking(client: Client): Promise<void> {
  const req = SendMessageRequest.fromJSON({
    message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hi' }] },
    configuration: { returnImmediately: false },
  });
  const reply = await client.sendMessage(req);
  const state = 'id' in reply ? (Task.toJSON(reply as Task) as { status: { state: string } }).status.state : 'message';
  if (state !== 'TASK_STATE_COMPLETED') throw new Error(`task ended ${state}`);
}

export interface Timing {
  n: number;
  errors: number;
  p50: number;
  p99: number;
  tps: number;
  /** CPU time of this whole process (bench client + agent + gateway + worker) per successful call. */
  cpuMs: number;
  /** The same per thread group (bench/threads.ts), per successful call. */
  cpuByThread: GroupCpu;
  /** The machine's CPU per successful call, by process (bench/processes.ts). */
  cpuByProcess: ProcessCpu;
  seconds: number;
  /** The deadline stopped it before `n` calls. */
  truncated: boolean;
}

/**
 * `warmup` untimed calls (connections, JIT, caches), then `n` calls of `call` from `concurrency` loops; latencies
 * of successful calls only. Stops launching at `deadline`.
 */
export async function timeCalls(call: () => Promise<void>, o: { concurrency: number; n: number; warmup: number; deadline: number }): Promise<Timing> {
  let warm = 0;
  await Promise.all(
    Array.from({ length: o.concurrency }, async () => {
      while (warm++ < o.warmup) await call();
    }),
  );
  const latencies: number[] = [];
  let next = 0;
  let errors = 0;
  const cpu = cpuMeter();
  const machine = processMeter();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: o.concurrency }, async () => {
      while (next < o.n && Date.now() < o.deadline) {
        next++;
        const s = performance.now();
        try {
          await call();
          latencies.push(performance.now() - s);
        } catch {
          errors++;
        }
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  const { total, ...byThread } = cpu.stop();
  const byProcess = machine.stop();
  latencies.sort((a, b) => a - b);
  const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? NaN;
  return {
    n: latencies.length,
    errors,
    p50: pct(50),
    p99: pct(99),
    tps: latencies.length / seconds,
    cpuMs: total / latencies.length,
    cpuByThread: Object.fromEntries(Object.entries(byThread).map(([k, ms]) => [k, ms / latencies.length])) as GroupCpu,
    cpuByProcess: Object.fromEntries(Object.entries(byProcess).map(([k, ms]) => [k, ms / latencies.length])) as ProcessCpu,
    seconds,
    truncated: next < o.n,
  };
}
