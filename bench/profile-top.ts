/**
 * `npx tsx bench/profile-top.ts <file.cpuprofile> [tasks] [top]`: the main thread's profile (BENCH_CPUPROFILE in
 * bench/phases.ts) read two ways, in ms per task when `tasks` is given: by self time (the leaf function), and by
 * Switchboard's own frames (the innermost frame in src/, activities/ or workflows/ on each sample's stack, so a
 * library's work is charged to the line of ours that asked for it).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

const [file, tasksArg, topArg] = process.argv.slice(2);
if (!file) throw new Error('usage: bench/profile-top.ts <file.cpuprofile> [tasks] [top]');
const tasks = Number(tasksArg ?? 1) || 1;
const top = Number(topArg ?? 30) || 30;
const profile = JSON.parse(readFileSync(file, 'utf8')) as { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[] };
const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const ROOT = path.resolve(__dirname, '..') + '/';
const OURS = /\/(src|activities|workflows)\//;

const label = (n: ProfileNode) => {
  const url = n.callFrame.url.replace('file://', '').replace(ROOT, '').replace(/.*node_modules\//, '~/');
  return `${n.callFrame.functionName || '(anonymous)'} ${url}:${n.callFrame.lineNumber + 1}`;
};
const ours = (id: number): string => {
  for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
    const n = nodes.get(at)!;
    if (OURS.test(n.callFrame.url) && !n.callFrame.url.includes('node_modules')) return label(n);
  }
  return '(not under our frames)';
};

const self = new Map<string, number>();
const byOurs = new Map<string, number>();
let busy = 0;
profile.samples.forEach((id, i) => {
  const n = nodes.get(id)!;
  if (n.callFrame.functionName === '(idle)') return;
  const ms = (profile.timeDeltas[i] ?? 0) / 1000;
  busy += ms;
  self.set(label(n), (self.get(label(n)) ?? 0) + ms);
  const o = ours(id);
  byOurs.set(o, (byOurs.get(o) ?? 0) + ms);
});

const print = (title: string, m: Map<string, number>) => {
  console.log(`\n${title}`);
  for (const [k, ms] of [...m].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${(ms / tasks).toFixed(3).padStart(8)}  ${k}`);
};
console.log(`busy ${(busy / tasks).toFixed(2)} ms per task over ${tasks} tasks`);
print('self time, ms per task', self);
print('by innermost Switchboard frame, ms per task', byOurs);
