/**
 * Where a blocking task's latency goes, segment by segment, at c=1: the client's clock around the call, the
 * front door's around its one Temporal call (TaskGateway.start), and the times Temporal wrote on the workflow's
 * history events (the same machine's clock). The same segments of bare Temporal's gateway shape
 * (bench/floor-workflows.ts) run beside them, so each segment's cost above the floor is one subtraction.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { SendMessageRequest, Task } from '@a2a-js/sdk';
import type { Client as A2AClient } from '@a2a-js/sdk/client';
import { type Client, WithStartWorkflowOperation } from '@temporalio/client';
import { bundleWorkflowCode, DefaultLogger, type NativeConnection, Worker } from '@temporalio/worker';
import { TaskGateway } from '../src/core/temporal/task-gateway';
import { workflowBundleOptions } from '../src/worker/worker';
import { workflowIdOf } from '../task/messages';
import { turn } from './floor-workflows';

/** Segment names, in order; each is the time from the previous mark to its own. */
export const SEGMENTS = [
  'front door, before Temporal',
  'update-with-start → workflow started',
  'workflow task 1 queued',
  'workflow task 1 on the worker (incl. first exchange)',
  'activity queued',
  'activity (agent call + its writes)',
  'workflow task 2 queued',
  'workflow task 2 on the worker (local activity)',
  'update result → front door',
  'front door, after Temporal',
] as const;
export type Segment = (typeof SEGMENTS)[number];

export interface TimelineReport {
  n: number;
  /** Median ms per segment, the gateway's and the floor's (the floor has no front door: 0 there). */
  gateway: Record<Segment, number>;
  floor: Record<Segment, number>;
  gatewayTotal: number;
  floorTotal: number;
}

// Event types (temporal.api.enums.v1.EventType).
const EV = { started: 1, wftScheduled: 5, wftStarted: 6, wftCompleted: 7, actScheduled: 10, actStarted: 11, actCompleted: 12 } as const;

const now = () => performance.timeOrigin + performance.now();
const msOf = (t: { seconds?: unknown; nanos?: number | null } | null | undefined) => Number(t?.seconds ?? 0) * 1000 + (t?.nanos ?? 0) / 1e6;

/**
 * The marks between the two front-door marks, from the workflow's history (epoch ms). A task whose first
 * exchange answered has no activity, and its answer leaves with workflow task 1 (the agent call is in it): the
 * activity's and workflow task 2's segments are 0 (its second workflow task, which only ends it, comes after the answer).
 */
async function historyMarks(client: Client, workflowId: string): Promise<number[]> {
  const events = (await client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
  const at = (type: number, nth = 0) => msOf(events.filter((e) => e.eventType === type)[nth]?.eventTime) || undefined;
  const activity = events.some((e) => e.eventType === EV.actScheduled);
  const marks = [
    at(EV.started),
    at(EV.wftStarted, 0),
    at(EV.wftCompleted, 0),
    activity ? at(EV.actStarted) : undefined,
    activity ? at(EV.actCompleted) : undefined,
    activity ? at(EV.wftStarted, 1) : undefined,
    activity ? at(EV.wftCompleted, 1) : undefined,
  ];
  return marks.map((m, i) => m ?? marks.slice(0, i).reduce<number>((last, x) => x ?? last, NaN));
}

/** Medians per segment over samples of 11 marks each (client send … client answer). */
function medians(samples: number[][]): Record<Segment, number> {
  const out = {} as Record<Segment, number>;
  SEGMENTS.forEach((s, i) => {
    const d = samples.map((m) => m[i + 1] - m[i]).sort((a, b) => a - b);
    out[s] = d[Math.floor(d.length / 2)] ?? NaN;
  });
  return out;
}

const total = (r: Record<Segment, number>) => Object.values(r).reduce((a, b) => a + b, 0);

/**
 * `n` blocking tasks through the gateway (`gateway`, a client of `o.tenant`) and `n` of bare Temporal's gateway
 * shape on the same server, alternated, after `warmup` of each.
 */
export async function measureTimeline(
  env: { client: Client; nativeConnection: NativeConnection },
  gateway: A2AClient,
  o: { n: number; warmup: number; tenant: string },
): Promise<TimelineReport> {
  // The front door's one Temporal call, timed per task.
  const around = new Map<string, [number, number]>();
  const original = TaskGateway.prototype.start;
  TaskGateway.prototype.start = async function (this: TaskGateway, ...args: Parameters<typeof original>) {
    const t = now();
    const task = await original.apply(this, args);
    around.set(args[0].taskId, [t, now()]);
    return task;
  };
  const taskQueue = `timeline-${randomUUID().slice(0, 8)}`;
  // With the gateway's sandbox (workflows/sandbox.ts): the floor gets every worker setting the gateway has.
  const workflowBundle = await bundleWorkflowCode({ ...workflowBundleOptions(require.resolve('./floor-workflows')), logger: new DefaultLogger('WARN') });
  const worker = await Worker.create({ connection: env.nativeConnection, taskQueue, workflowBundle, activities: { noop: async () => {} } });
  const running = worker.run();
  const viaGateway = async (): Promise<number[]> => {
    const req = SendMessageRequest.fromJSON({
      message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hi' }] },
      configuration: { returnImmediately: false },
    });
    const t0 = now();
    const reply = await gateway.sendMessage(req);
    const t1 = now();
    const task = Task.toJSON(reply as Task) as { id: string; status: { state: string } };
    if (task.status.state !== 'TASK_STATE_COMPLETED') throw new Error(`task ended ${task.status.state}`);
    const [s, e] = around.get(task.id) ?? [NaN, NaN];
    return [t0, s, ...(await historyMarks(env.client, workflowIdOf(o.tenant, task.id))), e, t1];
  };
  const viaFloor = async (): Promise<number[]> => {
    const workflowId = randomUUID();
    const t0 = now();
    await env.client.workflow.executeUpdateWithStart(turn, {
      updateId: randomUUID(),
      startWorkflowOperation: new WithStartWorkflowOperation('gatewayShape', { taskQueue, workflowId, workflowIdConflictPolicy: 'FAIL' }),
    });
    const t1 = now();
    return [t0, t0, ...(await historyMarks(env.client, workflowId)), t1, t1];
  };
  try {
    for (let i = 0; i < o.warmup; i++) await Promise.all([viaGateway(), viaFloor()].map((p) => p.catch(() => undefined)));
    const g: number[][] = [];
    const f: number[][] = [];
    for (let i = 0; i < o.n; i++) {
      g.push(await viaGateway());
      f.push(await viaFloor());
    }
    const gateway = medians(g);
    const floor = medians(f);
    return { n: o.n, gateway, floor, gatewayTotal: total(gateway), floorTotal: total(floor) };
  } finally {
    TaskGateway.prototype.start = original;
    worker.shutdown();
    await running;
  }
}

export function printTimeline(r: TimelineReport): void {
  console.log(`\nwhere a blocking task's latency goes at c=1 (bench/timeline.ts, medians of ${r.n}, alternated with the floor), ms`);
  console.log(`  ${'segment'.padEnd(48)} gateway   floor   above`);
  for (const s of SEGMENTS) {
    console.log(`  ${s.padEnd(48)} ${r.gateway[s].toFixed(1).padStart(7)} ${r.floor[s].toFixed(1).padStart(7)} ${(r.gateway[s] - r.floor[s]).toFixed(1).padStart(7)}`);
  }
  console.log(`  ${'sum of medians'.padEnd(48)} ${r.gatewayTotal.toFixed(1).padStart(7)} ${r.floorTotal.toFixed(1).padStart(7)} ${(r.gatewayTotal - r.floorTotal).toFixed(1).padStart(7)}`);
}
