/**
 * The peer bench's load (bench/peer.ts), the same for both gateways: A2A 0.3 JSON-RPC `message/send` over plain
 * fetch, a fresh messageId each, text "hello". An answer that is not terminal yet (TAG always answers `submitted`:
 * its tasks run on after the answer) is polled with `tasks/get` every 10 ms until it is; Switchboard answers a
 * blocking send with the finished task. Latency is send → terminal state seen by the client. A task counts only if
 * it completed with the echo in its artifacts.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';

export interface Target {
  name: 'TAG' | 'Switchboard';
  url: string;
  /** Bearer key (Switchboard's client key); TAG takes none. */
  key?: string;
}

export interface PhaseResult {
  n: number;
  errors: number;
  firstErrors: string[];
  seconds: number;
  tps: number;
  p50: number;
  p99: number;
  /** tasks/get calls per task (0 for a blocking send). */
  pollsPerTask: number;
  /** Ids of the last tasks that completed (for their Temporal histories). */
  lastTaskIds: string[];
}

const POLL_MS = 10;
const TIMEOUT_MS = 30_000;
const TERMINAL = new Set(['completed', 'failed', 'canceled', 'rejected']);
const KEEP_IDS = 20;
let seq = 0;
const run = `${process.pid}-${Date.now()}`;

interface WireTask {
  id: string;
  status?: { state?: string };
  artifacts?: unknown;
  result?: unknown;
}

async function rpc(t: Target, method: string, params: unknown): Promise<WireTask> {
  const res = await fetch(t.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(t.key ? { authorization: `Bearer ${t.key}` } : {}) },
    body: JSON.stringify({ jsonrpc: '2.0', id: ++seq, method, params }),
  });
  const body = (await res.json()) as { result?: WireTask; error?: { code: number; message: string } };
  if (body.error || !body.result) throw new Error(`${method}: ${body.error ? `${body.error.code} ${body.error.message}` : `HTTP ${res.status}, no result`}`);
  return body.result;
}

/** One task, send to terminal state: its latency (ms), tasks/get calls and id. */
async function oneTask(t: Target): Promise<{ ms: number; polls: number; id: string }> {
  const t0 = performance.now();
  const message = { kind: 'message', messageId: `${run}-${randomUUID()}`, role: 'user', parts: [{ kind: 'text', text: 'hello' }] };
  let task = await rpc(t, 'message/send', { message });
  let polls = 0;
  while (!TERMINAL.has(task.status?.state ?? '')) {
    if (performance.now() - t0 > TIMEOUT_MS) throw new Error(`timed out in state ${task.status?.state}`);
    await new Promise((r) => setTimeout(r, POLL_MS));
    task = await rpc(t, 'tasks/get', { id: task.id });
    polls++;
  }
  const ms = performance.now() - t0;
  if (task.status?.state !== 'completed') throw new Error(`ended ${task.status?.state}`);
  const text = JSON.stringify(task.artifacts ?? task.result ?? '');
  if (!/echo/i.test(text)) throw new Error(`no echo in ${text.slice(0, 200)}`);
  return { ms, polls, id: task.id };
}

/** `n` tasks from `c` loops (the last ones overlap less: each loop takes the next task until none is left). */
export async function runTasks(t: Target, c: number, n: number): Promise<PhaseResult> {
  let next = 0;
  const latencies: number[] = [];
  const errors: string[] = [];
  const ids: string[] = [];
  let polls = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: c }, async () => {
      while (next < n) {
        next++;
        try {
          const r = await oneTask(t);
          latencies.push(r.ms);
          polls += r.polls;
          ids.push(r.id);
        } catch (err) {
          errors.push(err instanceof Error ? err.message : String(err));
        }
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  latencies.sort((a, b) => a - b);
  const q = (p: number) => (latencies.length ? latencies[Math.min(latencies.length - 1, Math.ceil(p * latencies.length) - 1)] : NaN);
  return {
    n: latencies.length,
    errors: errors.length,
    firstErrors: [...new Set(errors)].slice(0, 3),
    seconds,
    tps: latencies.length / seconds,
    p50: q(0.5),
    p99: q(0.99),
    pollsPerTask: polls / (latencies.length || 1),
    lastTaskIds: ids.slice(-KEEP_IDS),
  };
}

/** `n` tasks/get calls for task `id` from `c` loops (what a TAG client's polls cost its gateway, bench/peer.ts). */
export async function getTaskCalls(t: Target, id: string, c: number, n: number): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: c }, async () => {
      while (next++ < n) await rpc(t, 'tasks/get', { id });
    }),
  );
}
