/**
 * `BENCH_ONLY=paused npm run bench`: many tasks paused in input-required. Creates BENCH_PAUSED_N (default 10,000)
 * tasks on an agent that asks a question, and reports how much this process's RSS grew, and how long resuming
 * one of them takes compared with resuming one of the first ten (the worker keeps a bounded cache of workflows;
 * an evicted one is replayed from its history on the normal task queue).
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { SendMessageRequest, Task } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import type { Gateway } from '../test/helpers/harness';

const N = Number(process.env.BENCH_PAUSED_N ?? 10_000);
const CONCURRENCY = 16;
const RESUMES = 5;

export interface PausedReport {
  paused: number;
  rssBeforeMb: number;
  rssAfterMb: number;
  rssGrowthMb: number;
  /** This thread's JS heap after a full GC, before and after: what the tasks hold on the main thread. */
  heapBeforeMb: number;
  heapAfterMb: number;
  /** Resume latency p50 (ms) with ten tasks paused, and with all of them. */
  resumeOfTenP50: number;
  resumeOfAllP50: number;
  createSeconds: number;
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

const rssMb = () => process.memoryUsage().rss / 2 ** 20;
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const heapMb = () => {
  gc();
  return process.memoryUsage().heapUsed / 2 ** 20;
};

export async function benchPaused(gw: Gateway, deadline: number): Promise<PausedReport> {
  const { register, clientFactory } = await import('../test/helpers/harness');
  const { startAskingAgent } = await import('../test/agents');
  const agent = await startAskingAgent();
  try {
    const client = await clientFactory(gw.keys.client).createFromUrl(`${(await register(gw, agent.url)).base}/.well-known/agent-card.json`, '');
    const ten: string[] = [];
    for (let i = 0; i < 10 + RESUMES; i++) ten.push(await pause(client));
    const resumeOfTenP50 = await resumeP50(client, ten.slice(0, RESUMES));
    const heapBeforeMb = heapMb();
    const rssBeforeMb = rssMb();
    const all: string[] = [];
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (all.length < N && Date.now() < deadline) {
          const i = all.push('') - 1;
          all[i] = await pause(client);
        }
      }),
    );
    const createSeconds = (performance.now() - t0) / 1000;
    const heapAfterMb = heapMb();
    const rssAfterMb = rssMb();
    console.error(`  paused: ${all.length} tasks in input-required after ${createSeconds.toFixed(0)} s`);
    // The oldest ones: the longest out of the worker's cache.
    const resumeOfAllP50 = await resumeP50(client, all.slice(0, RESUMES));
    return { paused: all.length + ten.length - RESUMES, rssBeforeMb, rssAfterMb, rssGrowthMb: rssAfterMb - rssBeforeMb, heapBeforeMb, heapAfterMb, resumeOfTenP50, resumeOfAllP50, createSeconds };
  } finally {
    await agent.close();
  }
}

export function printPaused(r: PausedReport): void {
  console.log(`\n${r.paused} tasks paused in input-required (created in ${r.createSeconds.toFixed(0)} s)`);
  console.log(`  RSS of this process: ${r.rssBeforeMb.toFixed(0)} MB → ${r.rssAfterMb.toFixed(0)} MB (+${r.rssGrowthMb.toFixed(0)} MB; it also holds the agent's own tasks)`);
  console.log(`  main thread's JS heap after GC: ${r.heapBeforeMb.toFixed(0)} MB → ${r.heapAfterMb.toFixed(0)} MB (the workflow cache lives in the workflow thread and in the SDK's Rust core)`);
  console.log(`  resume p50: ${r.resumeOfTenP50.toFixed(1)} ms with ten paused, ${r.resumeOfAllP50.toFixed(1)} ms with all of them (ratio ${(r.resumeOfAllP50 / r.resumeOfTenP50).toFixed(2)})`);
}
