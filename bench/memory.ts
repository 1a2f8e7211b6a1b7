/**
 * Where this process's memory is: the main thread's V8 heap, the Temporal workflow threads' V8 heaps, and the
 * rest (native: the SDK's Rust core, malloc, code, thread stacks). The SDK starts its workflow threads itself
 * and offers no handle to their heaps (Node 20 has no `Worker.getHeapStatistics()`), so the bench wraps
 * `worker_threads.Worker` before the gateway starts: a workflow thread first loads a few lines that answer, on a
 * BroadcastChannel, with a full GC and `v8.getHeapStatistics()`, then the SDK's own thread module as usual.
 */
import { readFileSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import workerThreads, { BroadcastChannel } from 'node:worker_threads';

const CHANNEL = 'switchboard-bench-heap';
const MB = 2 ** 20;

setFlagsFromString('--expose-gc');
/** A full GC in this thread. */
export const gc = runInNewContext('gc') as () => void;

// Runs in each workflow thread ahead of the SDK's module; plain JS, no imports from this repo.
const PROBE = `{
const { BroadcastChannel, threadId } = require('node:worker_threads');
const v8 = require('node:v8');
const gc = require('node:vm').runInNewContext('gc');
const ch = new BroadcastChannel(${JSON.stringify(CHANNEL)});
ch.onmessage = (e) => {
  if (e.data !== 'stats') return;
  gc();
  const s = v8.getHeapStatistics();
  ch.postMessage({ threadId, used: s.used_heap_size, total: s.total_heap_size, external: s.external_memory, malloced: s.malloced_memory });
};
ch.unref();
}`;

let instrumented = false;

/** Call before the Temporal worker is created: its workflow threads then answer `workflowThreadHeaps()`. */
export function instrumentWorkflowThreads(): void {
  if (instrumented) return;
  instrumented = true;
  const Original = workerThreads.Worker;
  class Probed extends Original {
    constructor(filename: string | URL, options?: workerThreads.WorkerOptions) {
      const file = String(filename);
      if (file.includes('workflow-worker-thread')) super(`${PROBE}\nrequire(${JSON.stringify(file)});`, { ...options, eval: true });
      else super(filename, options);
    }
  }
  (workerThreads as { Worker: typeof Original }).Worker = Probed;
}

interface ThreadHeap {
  threadId: number;
  used: number;
  total: number;
  external: number;
  malloced: number;
}

/** Each workflow thread's heap after a full GC in it (empty when not instrumented). */
async function workflowThreadHeaps(waitMs = 500): Promise<ThreadHeap[]> {
  if (!instrumented) return [];
  const ch = new BroadcastChannel(CHANNEL);
  const got: ThreadHeap[] = [];
  ch.onmessage = (e) => got.push((e as MessageEvent).data as ThreadHeap);
  ch.postMessage('stats');
  await new Promise((r) => setTimeout(r, waitMs));
  ch.close();
  return got;
}

export interface MemoryBreakdown {
  rssMb: number;
  /** RssAnon of /proc/self/status: heaps, malloc, stacks (RssFile is the mapped code and libraries). */
  rssAnonMb: number;
  /** The main thread's V8 heap after a full GC: used, and committed (heapTotal). */
  mainHeapUsedMb: number;
  mainHeapTotalMb: number;
  /** Buffers and other memory outside the main heap that V8 objects own (process.memoryUsage().external). */
  externalMb: number;
  arrayBuffersMb: number;
  /** The workflow threads' V8 heaps after a full GC in each, summed (NaN when not instrumented). */
  workflowThreads: number;
  workflowHeapUsedMb: number;
  workflowHeapTotalMb: number;
  /** RSS less both heaps' committed size and external: native memory (Rust core, malloc, code, stacks). */
  restMb: number;
}

function rssAnonMb(): number {
  const m = /^RssAnon:\s+(\d+) kB/m.exec(readFileSync('/proc/self/status', 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

export async function memoryBreakdown(): Promise<MemoryBreakdown> {
  const threads = await workflowThreadHeaps();
  gc();
  const u = process.memoryUsage();
  const sum = (k: 'used' | 'total') => (instrumented ? threads.reduce((s, t) => s + t[k], 0) / MB : NaN);
  const workflowHeapTotalMb = sum('total');
  return {
    rssMb: u.rss / MB,
    rssAnonMb: rssAnonMb(),
    mainHeapUsedMb: u.heapUsed / MB,
    mainHeapTotalMb: u.heapTotal / MB,
    externalMb: u.external / MB,
    arrayBuffersMb: u.arrayBuffers / MB,
    workflowThreads: threads.length,
    workflowHeapUsedMb: sum('used'),
    workflowHeapTotalMb,
    restMb: (u.rss - u.heapTotal - u.external) / MB - (Number.isNaN(workflowHeapTotalMb) ? 0 : workflowHeapTotalMb),
  };
}
