/**
 * Where the main thread's CPU goes, by phase: a sampling CPU profile (node:inspector) of this thread while the
 * gateway runs tasks, each sample charged to the innermost frame that says whose work it is (leaf first):
 * PostgreSQL (the pg client), activities (activities/), the Temporal SDK (client and worker bridge), the front door
 * (src/, fastify), the bench's own clients and agents (bench/, test/agents, express). Frames of shared libraries
 * (@a2a-js/sdk, undici, Node internals) are passed over to their caller. Workflow activations run on the workflow
 * threads (bench/threads.ts measures those).
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';

export type Phase = 'front door' | 'activities' | 'PostgreSQL client' | 'Temporal SDK' | 'bench clients and agents' | 'GC' | 'other';
export const PHASES: Phase[] = ['front door', 'activities', 'PostgreSQL client', 'Temporal SDK', 'bench clients and agents', 'GC', 'other'];

const RULES: [RegExp, Phase][] = [
  [/node_modules\/(pg|pg-protocol|pg-pool|pg-types)\//, 'PostgreSQL client'],
  [/\/activities\//, 'activities'],
  [/node_modules\/@temporalio\//, 'Temporal SDK'],
  [/\/bench\/|\/test\/agents\/|node_modules\/(express|body-parser|router)\//, 'bench clients and agents'],
  [/\/src\/|node_modules\/(fastify|@fastify|find-my-way|avvio|light-my-request|fast-json-stringify|ajv)\//, 'front door'],
];

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}

/** Runs `work` under the profiler; returns the sampled busy ms per phase (idle excluded). */
export async function profilePhases(work: () => Promise<void>): Promise<Record<Phase, number>> {
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 1000 });
  await session.post('Profiler.start');
  try {
    await work();
  } catch (err) {
    await session.post('Profiler.stop');
    session.disconnect();
    throw err;
  }
  const { profile } = await session.post('Profiler.stop');
  session.disconnect();
  // BENCH_CPUPROFILE=<file>: keep the profile itself (a .cpuprofile, for DevTools or bench/profile-top.ts).
  if (process.env.BENCH_CPUPROFILE) writeFileSync(process.env.BENCH_CPUPROFILE, JSON.stringify(profile));
  const nodes = new Map<number, ProfileNode>(profile.nodes.map((n: ProfileNode) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of nodes.values()) for (const c of n.children ?? []) parent.set(c, n.id);
  const phaseOf = new Map<number, Phase | undefined>();
  const classify = (id: number): Phase | undefined => {
    if (phaseOf.has(id)) return phaseOf.get(id);
    const { functionName, url } = nodes.get(id)!.callFrame;
    let phase: Phase | undefined;
    if (functionName === '(idle)') phase = undefined;
    else if (functionName === '(garbage collector)') phase = 'GC';
    else {
      phase = RULES.find(([re]) => re.test(url))?.[1];
      if (!phase) {
        const up = parent.get(id);
        phase = up === undefined ? 'other' : (classify(up) ?? 'other');
      }
    }
    phaseOf.set(id, phase);
    return phase;
  };
  const ms = Object.fromEntries(PHASES.map((p) => [p, 0])) as Record<Phase, number>;
  const deltas = profile.timeDeltas ?? [];
  (profile.samples ?? []).forEach((id: number, i: number) => {
    const phase = classify(id);
    if (phase) ms[phase] += (deltas[i] ?? 0) / 1000;
  });
  return ms;
}
