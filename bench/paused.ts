/**
 * `BENCH_ONLY=paused npm run bench`: many tasks paused in input-required. Creates BENCH_PAUSED_N (default 10,000)
 * tasks on an agent that asks a question, and reports how much this process's memory grew, where (bench/memory.ts:
 * the main thread's heap, the workflow threads' heaps, native), how it grew with the number of tasks, and how
 * long resuming one of them takes compared with resuming one of the first ten: one of the oldest (long evicted from
 * the worker's bounded workflow cache, replayed from its history on the normal task queue) and one of the newest
 * (still cached, on the sticky queue).
 */
import { fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { performance } from 'node:perf_hooks';
import { SendMessageRequest, Task } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import type { Gateway } from '../test/helpers/harness';
import { type MemoryBreakdown, memoryBreakdown } from './memory';

const N = Number(process.env.BENCH_PAUSED_N ?? 10_000);
const CONCURRENCY = Number(process.env.BENCH_PAUSED_CONCURRENCY ?? 16);
const RESUMES = 5;
/** RSS is sampled every this many tasks, to tell growth per task from a one-off plateau. */
const CHECKPOINTS = 5;

export interface PausedReport {
  paused: number;
  before: MemoryBreakdown;
  after: MemoryBreakdown;
  /** The same 10 s after the last task paused (what GC and the allocator give back). */
  settled: MemoryBreakdown;
  /** RSS growth (MB) over the tasks created so far, at CHECKPOINTS points. */
  growth: { tasks: number; rssMb: number }[];
  /** Resume latency p50 (ms): with ten tasks paused; the oldest of all (evicted); the newest (cached). */
  resumeOfTenP50: number;
  resumeOldestP50: number;
  resumeNewestP50: number;
  createSeconds: number;
  settings: string;
}

async function send(client: Client, text: string, taskId?: string): Promise<{ id: string; state: string }> {
  const reply = await client.sendMessage(
    SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...(taskId ? { taskId } : {}) }, configuration: { returnImmediately: false } }),
  );
  const t = Task.toJSON(reply as Task) as { id: string; status: { state: string } };
  return { id: t.id, state: t.status.state };
}

async function pause(client: Client): Promise<string> {
  const t = await send(client, 'hi');
  if (t.state !== 'TASK_STATE_INPUT_REQUIRED') throw new Error(`expected input-required, got ${t.state}`);
  return t.id;
}

/** Resumes each task (it completes) and returns the p50 latency. */
async function resumeP50(client: Client, taskIds: string[]): Promise<number> {
  const ms: number[] = [];
  for (const id of taskIds) {
    const t0 = performance.now();
    const t = await send(client, 'Ada', id);
    ms.push(performance.now() - t0);
    if (t.state !== 'TASK_STATE_COMPLETED') throw new Error(`expected completed, got ${t.state}`);
  }
  ms.sort((a, b) => a - b);
  return ms[Math.floor(ms.length / 2)];
}

/** The asking agent, in a child process (bench/agent-process.ts): its memory is not Switchboard's. */
async function startAgentProcess(): Promise<{ url: string; close(): Promise<void> }> {
  // require.resolve: agent-process.ts under tsx, dist/bench/agent-process.js in the compiled bench.
  const child = fork(require.resolve('./agent-process'), { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  const [msg] = (await once(child, 'message')) as [{ url: string }];
  return {
    url: msg.url,
    async close() {
      const exited = once(child, 'exit');
      child.disconnect();
      await exited;
    },
  };
}

const rssMb = () => process.memoryUsage.rss() / 2 ** 20;

export async function benchPaused(gw: Gateway, deadline: number): Promise<PausedReport> {
  const { register, clientFactory } = await import('../test/helpers/harness');
  const agent = await startAgentProcess();
  try {
    const client = await clientFactory(gw.keys.client).createFromUrl(`${(await register(gw, agent.url)).base}/.well-known/agent-card.json`, '');
    const ten: string[] = [];
    for (let i = 0; i < 10 + RESUMES; i++) ten.push(await pause(client));
    const resumeOfTenP50 = await resumeP50(client, ten.slice(0, RESUMES));
    const before = await memoryBreakdown();
    const growth: PausedReport['growth'] = [];
    const every = Math.max(1, Math.ceil((N - 10) / CHECKPOINTS));
    const all: string[] = [];
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        // The ten stay paused too: N in all, within the tenant's default openTasks quota (10,000).
        while (all.length < N - 10 && Date.now() < deadline) {
          const i = all.push('') - 1;
          all[i] = await pause(client);
          if ((i + 1) % every === 0) growth.push({ tasks: i + 1, rssMb: rssMb() - before.rssMb });
        }
      }),
    );
    const createSeconds = (performance.now() - t0) / 1000;
    const after = await memoryBreakdown();
    console.error(`  paused: ${all.length} tasks in input-required after ${createSeconds.toFixed(0)} s`);
    await new Promise((r) => setTimeout(r, 10_000));
    const settled = await memoryBreakdown();
    // The oldest ones: the longest out of the worker's cache; the newest: still in it.
    const resumeOldestP50 = await resumeP50(client, all.slice(0, RESUMES));
    const resumeNewestP50 = await resumeP50(client, all.slice(-RESUMES));
    const settings = ['MALLOC_ARENA_MAX', 'MALLOC_CONF', 'LD_PRELOAD', 'NODE_OPTIONS']
      .filter((k) => process.env[k])
      .map((k) => `${k}=${process.env[k]}`)
      .join(' ');
    return { paused: all.length + ten.length - RESUMES, before, after, settled, growth, resumeOfTenP50, resumeOldestP50, resumeNewestP50, createSeconds, settings };
  } finally {
    await agent.close();
  }
}

export function printPaused(r: PausedReport): void {
  const f = (n: number) => (Number.isNaN(n) ? '?' : n.toFixed(0));
  const d = (k: keyof MemoryBreakdown) => `${f(r.before[k])} → ${f(r.after[k])} → ${f(r.settled[k])} MB (${r.after[k] >= r.before[k] ? '+' : ''}${f(r.after[k] - r.before[k])}, settled ${r.settled[k] >= r.before[k] ? '+' : ''}${f(r.settled[k] - r.before[k])})`;
  console.log(`\n${r.paused} tasks paused in input-required (created in ${r.createSeconds.toFixed(0)} s)${r.settings ? `; ${r.settings}` : ''}`);
  console.log('  memory of this process (Switchboard and the bench client; the agent runs in a child process), before → after → 10 s later:');
  console.log(`    RSS                                   ${d('rssMb')}`);
  console.log(`    RssAnon (heaps, malloc, stacks)       ${d('rssAnonMb')}`);
  console.log(`    main thread's JS heap, used after GC   ${d('mainHeapUsedMb')}`);
  console.log(`    main thread's JS heap, committed       ${d('mainHeapTotalMb')}`);
  console.log(`    external (of which ArrayBuffers)       ${d('externalMb')} (${f(r.after.arrayBuffersMb)})`);
  console.log(`    ${r.after.workflowThreads} workflow thread(s)' heaps, used after GC ${d('workflowHeapUsedMb')}`);
  console.log(`    workflow threads' heaps, committed     ${d('workflowHeapTotalMb')}`);
  console.log(`    the rest (native: Rust core, malloc)   ${d('restMb')}`);
  console.log(`  RSS growth by tasks created: ${r.growth.map((g) => `${g.tasks}: +${g.rssMb.toFixed(0)} MB`).join(', ')}`);
  console.log(
    `  resume p50: ${r.resumeOfTenP50.toFixed(1)} ms with ten paused; with all of them ${r.resumeOldestP50.toFixed(1)} ms for the oldest (evicted, ratio ${(r.resumeOldestP50 / r.resumeOfTenP50).toFixed(2)}) and ${r.resumeNewestP50.toFixed(1)} ms for the newest (cached, ratio ${(r.resumeNewestP50 / r.resumeOfTenP50).toFixed(2)})`,
  );
}
