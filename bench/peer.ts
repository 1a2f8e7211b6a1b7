/**
 * `BENCH_ONLY=peer npm run bench` (issue 40, point 4): Switchboard beside the peer gateway TAG
 * (github.com/sratomun/temporal-a2a-gateway, Go: every A2A task a Temporal workflow too), in one run, on one Temporal
 * dev server, each with its echo agent (bench/peer-stack.ts starts them all). Interleaved rounds (BENCH_PEER_ROUNDS,
 * default 3; which gateway goes first alternates): each round measures both at c=1 (BENCH_PEER_N1 tasks, default
 * 100: p50, p99) and then both at c=16 (BENCH_PEER_N16, default 400: tasks/s, and CPU per task from /proc: TAG's
 * gateway and echo worker processes, Switchboard's process, all threads), each phase after a warm-up of its own. The
 * load (bench/peer-load.ts) is A2A 0.3 `message/send`, TAG's tasks polled with tasks/get every 10 ms. Per round the
 * ratios Switchboard/TAG, and their medians over the rounds; at the end the history events per task of the last 20
 * tasks of each. Part of a full run only when TAG's gateway binary is in BENCH_TAG_DIR (scripts/ensure-tag.sh).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { temporal as proto } from '@temporalio/proto';
import type { Client } from '@temporalio/client';
import { REPO_ROOT } from '../src/core/paths';
import { workflowIdOf } from '../task/messages';
import { getTaskCalls, type PhaseResult, runTasks, type Target } from './peer-load';
import { type PeerStack, startPeerStack, tagBinaries, tagDir } from './peer-stack';
import { cpuMsOf, machineBusyMs, temporalServerPids } from './processes';

/** Issue 40's targets for a simple task (reported, never enforced): Switchboard's node CPU at c=16, its history events. */
const TARGET_CPU_MS = 8;
const TARGET_EVENTS = 11;
const int = (name: string, def: number) => (process.env[name] ? Number.parseInt(process.env[name]!, 10) : def);
const ROUNDS = int('BENCH_PEER_ROUNDS', 3);
const N1 = int('BENCH_PEER_N1', 100);
const N16 = int('BENCH_PEER_N16', 400);
const WARMUP1 = 10;
const WARMUP16 = 32;
const HISTORIES = 20;
/** tasks/get calls that price one of TAG's polls (its gateway's CPU per call), after each round's c=16 phase. */
const POLL_CALLS = 1_000;

type Name = Target['name'];
/** CPU ms per task of a c=16 phase, by process (or group of processes). */
type Cpu = Record<string, number>;

export interface PeerRound {
  round: number;
  order: Name[];
  c1: Record<Name, PhaseResult>;
  c16: Record<Name, PhaseResult & { cpu: Cpu }>;
  /** TAG: gateway + echo worker; Switchboard: its process. */
  cpuPerTask: Record<Name, number>;
  /** TAG's gateway CPU per tasks/get call (ms), and TAG's CPU per task at c=16 less its client's polls. */
  tagPollMs: number;
  tagCpuWithoutPolls: number;
  ratios: { p50: number; tps: number; cpu: number; cpuWithoutPolls: number };
  loadAverage: number;
}

export interface HistoryFigures {
  workflows: number;
  median: number;
  min: number;
  max: number;
  /** Mean events of each type per workflow, most frequent first. */
  byType: [string, number][];
}

export interface PeerReport {
  rounds: PeerRound[];
  medians: { p50: number; tps: number; cpu: number; cpuWithoutPolls: number };
  histories: Record<Name, HistoryFigures>;
  settings: { rounds: number; n1: number; n16: number; warmup1: number; warmup16: number };
}

const median = (xs: number[]) => {
  const s = xs.filter(Number.isFinite).sort((a, b) => a - b);
  if (!s.length) return NaN;
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** CPU ms so far of the processes that matter to each target, by role. */
async function snapshot(stack: PeerStack): Promise<{ machine: number; roles: Record<string, number[]>; ms: Map<number, number> }> {
  const roles: Record<string, number[]> = {
    'TAG gateway': [stack.tag.gatewayPid],
    'TAG echo worker': [stack.tag.workerPid],
    'TAG Redis': [stack.tag.redisPid],
    Switchboard: [stack.sb.pid],
    "Switchboard's PostgreSQL backends": await stack.sbBackends(),
    'echo agent (Switchboard calls it)': [stack.echoPid],
    'Temporal server': temporalServerPids(),
  };
  return { machine: machineBusyMs(), roles, ms: cpuMsOf(Object.values(roles).flat()) };
}

/** CPU ms per task by role between two snapshots (a process that started meanwhile counts from zero). */
function cpuBetween(a: Awaited<ReturnType<typeof snapshot>>, b: Awaited<ReturnType<typeof snapshot>>, tasks: number): Cpu {
  const out: Cpu = {};
  for (const [role, pids] of Object.entries(b.roles)) {
    const all = [...new Set([...pids, ...(a.roles[role] ?? [])])];
    out[role] = all.reduce((sum, pid) => sum + (b.ms.has(pid) ? b.ms.get(pid)! - (a.ms.get(pid) ?? 0) : 0), 0) / Math.max(1, tasks);
  }
  out['the whole machine'] = (b.machine - a.machine) / Math.max(1, tasks);
  return out;
}

/** Warm-up, then the measured phase; with `meter`, the processes' CPU around the measured phase. */
async function phase(stack: PeerStack, t: Target, c: number, n: number, warmup: number, meter: boolean): Promise<PhaseResult & { cpu: Cpu }> {
  await runTasks(t, c, warmup);
  const before = meter ? await snapshot(stack) : undefined;
  const r = await runTasks(t, c, n);
  const cpu = before ? cpuBetween(before, await snapshot(stack), r.n) : {};
  const err = r.errors ? `, ${r.errors} errors (${r.firstErrors.join('; ')})` : '';
  console.error(`  peer: ${t.name} c=${c}: ${r.n} tasks, p50 ${r.p50.toFixed(1)} ms, ${r.tps.toFixed(1)} tasks/s${err}`);
  return { ...r, cpu };
}

/**
 * What one of TAG's polls costs its gateway: CPU ms per tasks/get, from POLL_CALLS calls at c=16 for a completed task
 * (a completed task's answer carries its artifacts: a little more than a poll of a working one).
 */
async function tagPollMs(stack: PeerStack, t: Target, id: string): Promise<number> {
  const pid = stack.tag.gatewayPid;
  const before = cpuMsOf([pid]).get(pid) ?? NaN;
  await getTaskCalls(t, id, 16, POLL_CALLS);
  return ((cpuMsOf([pid]).get(pid) ?? NaN) - before) / POLL_CALLS;
}

/** Event counts of the Temporal histories of `workflowIds` (each waited for to close first, at most 10 s). */
async function histories(client: Client, workflowIds: string[]): Promise<HistoryFigures> {
  const lengths: number[] = [];
  const types = new Map<string, number>();
  for (const id of workflowIds) {
    const handle = client.workflow.getHandle(id);
    await Promise.race([handle.result().catch(() => undefined), new Promise((r) => setTimeout(r, 10_000))]);
    const events = (await handle.fetchHistory()).events ?? [];
    lengths.push(events.length);
    for (const e of events) {
      const type = (proto.api.enums.v1.EventType[e.eventType ?? 0] ?? String(e.eventType)).replace(/^EVENT_TYPE_/, '');
      types.set(type, (types.get(type) ?? 0) + 1);
    }
  }
  const byType = [...types].map(([k, v]) => [k, v / Math.max(1, lengths.length)] as [string, number]).sort((a, b) => b[1] - a[1]);
  return { workflows: lengths.length, median: median(lengths), min: Math.min(...lengths), max: Math.max(...lengths), byType };
}

async function measure(stack: PeerStack): Promise<PeerReport> {
  const targets: Record<Name, Target> = {
    TAG: { name: 'TAG', url: stack.tag.url },
    Switchboard: { name: 'Switchboard', url: stack.sb.url, key: stack.sb.key },
  };
  const rounds: PeerRound[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    const order: Name[] = round % 2 ? ['TAG', 'Switchboard'] : ['Switchboard', 'TAG'];
    console.error(`  peer: round ${round} of ${ROUNDS} (${order.join(' first, then ')}), load average ${os.loadavg()[0].toFixed(1)}`);
    const c1 = {} as PeerRound['c1'];
    const c16 = {} as PeerRound['c16'];
    for (const name of order) c1[name] = await phase(stack, targets[name], 1, N1, WARMUP1, false);
    for (const name of order) c16[name] = await phase(stack, targets[name], 16, N16, WARMUP16, true);
    const cpuPerTask = { TAG: c16.TAG.cpu['TAG gateway'] + c16.TAG.cpu['TAG echo worker'], Switchboard: c16.Switchboard.cpu.Switchboard };
    const pollMs = await tagPollMs(stack, targets.TAG, c16.TAG.lastTaskIds[c16.TAG.lastTaskIds.length - 1]);
    const tagCpuWithoutPolls = cpuPerTask.TAG - c16.TAG.pollsPerTask * pollMs;
    rounds.push({
      round,
      order,
      c1,
      c16,
      cpuPerTask,
      tagPollMs: pollMs,
      tagCpuWithoutPolls,
      ratios: {
        p50: c1.Switchboard.p50 / c1.TAG.p50,
        tps: c16.Switchboard.tps / c16.TAG.tps,
        cpu: cpuPerTask.Switchboard / cpuPerTask.TAG,
        cpuWithoutPolls: cpuPerTask.Switchboard / tagCpuWithoutPolls,
      },
      loadAverage: os.loadavg()[0],
    });
  }
  const last = rounds[rounds.length - 1];
  console.error(`  peer: history events of the last ${HISTORIES} tasks of each...`);
  const client = stack.temporal.client;
  const report: PeerReport = {
    rounds,
    medians: {
      p50: median(rounds.map((r) => r.ratios.p50)),
      tps: median(rounds.map((r) => r.ratios.tps)),
      cpu: median(rounds.map((r) => r.ratios.cpu)),
      cpuWithoutPolls: median(rounds.map((r) => r.ratios.cpuWithoutPolls)),
    },
    histories: {
      TAG: await histories(client, last.c16.TAG.lastTaskIds),
      Switchboard: await histories(client, last.c16.Switchboard.lastTaskIds.map((id) => workflowIdOf(stack.sb.tenant, id))),
    },
    settings: { rounds: ROUNDS, n1: N1, n16: N16, warmup1: WARMUP1, warmup16: WARMUP16 },
  };
  return report;
}

/**
 * The peer part: undefined, after one line saying how to get TAG, when its gateway is not in BENCH_TAG_DIR (the
 * default ~/.cache/switchboard/tag); otherwise starts everything, measures, stops everything.
 */
export async function benchPeer(): Promise<PeerReport | undefined> {
  const bin = tagBinaries();
  if (!bin) {
    console.log(`peer (BENCH_ONLY=peer): skipped, TAG is not built: no tag-gateway and tag-echo-worker in ${tagDir()} (BENCH_TAG_DIR); scripts/ensure-tag.sh and docs/benchmark.md ("Against TAG") say what goes there`);
    return undefined;
  }
  console.error(`bench: peer: starting a Temporal dev server, the echo agent, Switchboard (a process of its own) and TAG (gateway, Redis, echo worker)...`);
  const stack = await startPeerStack(bin);
  try {
    const report = await measure(stack);
    const out = path.join(REPO_ROOT, '.data/bench-peer.json');
    mkdirSync(path.dirname(out), { recursive: true });
    writeFileSync(out, JSON.stringify({ at: new Date().toISOString(), cpus: os.cpus().length, ...report }, null, 2) + '\n');
    return report;
  } finally {
    await stack.close();
  }
}

const f1 = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : '–');
const f2 = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : '–');

export function printPeer(r: PeerReport): void {
  const s = r.settings;
  console.log(`\n## Against TAG: ${s.rounds} interleaved rounds, one Temporal dev server (c=1: ${s.n1} tasks each, c=16: ${s.n16} each; ${os.cpus().length} CPUs)\n`);
  console.log('| round | first | c=1 p50 ms TAG / SB | c=1 p99 ms TAG / SB | c=16 tasks/s TAG / SB | CPU ms/task c=16 TAG / SB | p50 SB/TAG | tasks/s SB/TAG | CPU SB/TAG | load |');
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const x of r.rounds) {
    console.log(
      `| ${x.round} | ${x.order[0]} | ${f1(x.c1.TAG.p50)} / ${f1(x.c1.Switchboard.p50)} | ${f1(x.c1.TAG.p99)} / ${f1(x.c1.Switchboard.p99)} | ` +
        `${f1(x.c16.TAG.tps)} / ${f1(x.c16.Switchboard.tps)} | ${f1(x.cpuPerTask.TAG)} / ${f1(x.cpuPerTask.Switchboard)} | ` +
        `${f2(x.ratios.p50)} | ${f2(x.ratios.tps)} | ${f2(x.ratios.cpu)} | ${f1(x.loadAverage)} |`,
    );
  }
  console.log(`\nmedians of the rounds, Switchboard / TAG: c=1 p50 ${f2(r.medians.p50)}×, c=16 tasks/s ${f2(r.medians.tps)}×, CPU per task at c=16 ${f2(r.medians.cpu)}×`);
  console.log('(CPU: TAG = its gateway process + its echo worker process; SB = Switchboard\'s process, all threads. Load: 1-minute load average after the round)');
  const roles = (name: Name) => Object.keys(r.rounds[0]?.c16[name].cpu ?? {}).filter((k) => (name === 'TAG' ? !/Switchboard|echo agent/.test(k) : !/^TAG/.test(k)));
  console.log('\nCPU ms per task at c=16, by process, median of the rounds:');
  for (const name of ['TAG', 'Switchboard'] as Name[]) {
    console.log(`  ${name.padEnd(11)} ${roles(name).map((k) => `${k} ${f1(median(r.rounds.map((x) => x.c16[name].cpu[k])))}`).join(' | ')}`);
  }
  const polls = r.rounds.map((x) => f1(x.c16.TAG.pollsPerTask)).join(', ');
  const pollMs = r.rounds.map((x) => f2(x.tagPollMs)).join(', ');
  console.log(`\nTAG answers message/send with a submitted task: its client polled tasks/get ${polls} times per task at c=16 (round by round),`);
  console.log(`${r.rounds.map((x) => f1(x.c1.TAG.pollsPerTask)).join(', ')} at c=1; each poll cost TAG's gateway ${pollMs} ms of CPU (${POLL_CALLS} calls at c=16 after the round).`);
  console.log(
    `TAG's CPU per task at c=16 less its client's polls: ${r.rounds.map((x) => f1(x.tagCpuWithoutPolls)).join(', ')} ms; ` +
      `Switchboard / that: ${r.rounds.map((x) => f2(x.ratios.cpuWithoutPolls)).join(', ')}, median ${f2(r.medians.cpuWithoutPolls)}×`,
  );
  console.log(`\nTemporal history events per task (the last ${HISTORIES} tasks of each):`);
  for (const name of ['TAG', 'Switchboard'] as Name[]) {
    const h = r.histories[name];
    console.log(`  ${name}: ${h.workflows} workflows, median ${f1(h.median)} events (min ${h.min}, max ${h.max}): ${h.byType.map(([k, v]) => `${k} ${f1(v)}`).join(', ')}`);
  }
  // Issue 40's targets, reported, never enforced: Switchboard's own process at c=16 and its history, and TAG's figures.
  const sbCpu = median(r.rounds.map((x) => x.c16.Switchboard.cpu.Switchboard));
  const sbEvents = r.histories.Switchboard.median;
  console.log('\ntargets (medians of the rounds):');
  console.log(`  Switchboard's process, node CPU per task at c=16 ≤ ${TARGET_CPU_MS} ms: ${f1(sbCpu)} ms — ${sbCpu <= TARGET_CPU_MS ? 'met' : 'not met'}`);
  console.log(`  history events per task ≤ ${TARGET_EVENTS}: ${f1(sbEvents)} — ${sbEvents <= TARGET_EVENTS ? 'met' : 'not met'}`);
  console.log(`  c=1 p50 ≤ TAG's: ${f2(r.medians.p50)}× — ${r.medians.p50 <= 1 ? 'met' : 'not met'}; c=16 tasks/s ≥ TAG's: ${f2(r.medians.tps)}× — ${r.medians.tps >= 1 ? 'met' : 'not met'}`);
  const errors = r.rounds.flatMap((x) => [...Object.values(x.c1), ...Object.values(x.c16)]).reduce((n, p) => n + p.errors, 0);
  if (errors) console.log(`\n${errors} tasks failed in the measured phases (see the lines above)`);
}
