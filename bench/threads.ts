/**
 * CPU time of this process per thread, from /proc/self/task (Linux; elsewhere only the process total from
 * process.cpuUsage). The bench runs everything in one process, so threads are what tell the costs apart:
 * - main: the front door, the activities, the PostgreSQL client, the bench's clients and agents;
 * - workflow: the SDK's workflow threads (workflow activations), told apart as the `node` threads that appeared
 *   while the worker started (see `markBefore`);
 * - temporal core: the SDK's Rust threads (gRPC to the server, the worker's state machines);
 * - other: V8's platform threads (GC, compilation) and libuv's pool.
 */
import { readdirSync, readFileSync } from 'node:fs';

export type ThreadGroup = 'main' | 'workflow' | 'temporal core' | 'other';
export const THREAD_GROUPS: ThreadGroup[] = ['main', 'workflow', 'temporal core', 'other'];

const TICK_MS = 10; // USER_HZ is 100 on Linux
let before: Set<string> | undefined;

function threads(): Map<string, { name: string; ms: number }> {
  const out = new Map<string, { name: string; ms: number }>();
  let tids: string[];
  try {
    tids = readdirSync('/proc/self/task');
  } catch {
    return out;
  }
  for (const tid of tids) {
    try {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
      const close = stat.lastIndexOf(')');
      const name = stat.slice(stat.indexOf('(') + 1, close);
      const fields = stat.slice(close + 2).split(' '); // fields[0] is field 3 (state)
      out.set(tid, { name, ms: (Number(fields[11]) + Number(fields[12])) * TICK_MS });
    } catch {
      // the thread ended meanwhile
    }
  }
  return out;
}

/** Call before the worker starts: `node` threads that appear after this are its workflow threads. */
export function markBefore(): void {
  before = new Set(threads().keys());
}

function groupOf(tid: string, name: string): ThreadGroup {
  if (tid === String(process.pid)) return 'main';
  if (/^(tokio|workflow-proces|temporal)/.test(name)) return 'temporal core';
  if (name === 'node' && before && !before.has(tid)) return 'workflow';
  return 'other';
}

export type GroupCpu = Record<ThreadGroup, number>;

/** CPU ms per thread group since `start()`; `total` is process.cpuUsage's (all threads). */
export function cpuMeter(): { stop(): GroupCpu & { total: number } } {
  const t0 = threads();
  const c0 = process.cpuUsage();
  return {
    stop() {
      const t1 = threads();
      const c = process.cpuUsage(c0);
      const g: GroupCpu & { total: number } = { main: 0, workflow: 0, 'temporal core': 0, other: 0, total: (c.user + c.system) / 1000 };
      for (const [tid, { name, ms }] of t1) g[groupOf(tid, name)] += ms - (t0.get(tid)?.ms ?? 0);
      return g;
    },
  };
}
