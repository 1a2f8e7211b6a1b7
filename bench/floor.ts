/**
 * Bare Temporal's floor on a given server: the round-trips under a gateway task (bench/floor-workflows.ts) with a
 * worker of their own, no A2A and no PostgreSQL. bench/run.ts measures it on the gateway's own dev server, in the
 * same run, so Switchboard's latency above the floor is one subtraction; bench/temporal-floor.ts runs it alone.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { type Client, WithStartWorkflowOperation } from '@temporalio/client';
import { bundleWorkflowCode, DefaultLogger, type NativeConnection, Worker } from '@temporalio/worker';
import { workflowBundleOptions } from '../src/worker/worker';
import { turn } from './floor-workflows';
import { formatProcessCpu, type ProcessCpu, processMeter } from './processes';
import { cpuMeter, type GroupCpu } from './threads';

export interface FloorShape {
  shape: string;
  p50: number;
  p99: number;
}

export interface FloorReport {
  shapes: FloorShape[];
  /** The gateway shape's p50 at c=1 (ms) and throughput at c=32 (workflows/s). */
  gatewayP50: number;
  /** The earlier shape's p50 at c=1 (ms): the agent called by an activity. */
  activityShapeP50: number;
  gatewayTpsC32: number;
  /** Temporal's least shape for a task that calls an agent (one workflow task, bench/floor-workflows.ts): c=32 workflows/s. */
  oneWorkflowTaskTpsC32: number;
  /** The gateway's shape with one local activity instead of two (bench/floor-workflows.ts): c=32 workflows/s and node CPU. */
  oneLocalTpsC32: number;
  oneLocalCpuC32: GroupCpu & { total: number };
  /**
   * Node CPU per workflow at c=32, per thread group: what the SDK's client, worker, core and workflow threads cost
   * for the gateway's shape with nothing of Switchboard's in it (the bench's floor under the gateway's CPU).
   */
  cpuC32: GroupCpu & { total: number };
  /** The machine's CPU per workflow at c=32, by process: node (the bench), the Temporal server, PostgreSQL (idle here). */
  processCpuC32: ProcessCpu;
}

export const GATEWAY_SHAPE = 'update-with-start, gateway shape';
/** One workflow task: the answer and the workflow's end together (bench/floor-workflows.ts oneWorkflowTaskShape). */
export const ONE_TASK_SHAPE = 'update-with-start, one workflow task';
/** The gateway's shape before its first exchange with the agent became a local activity (bench/floor-workflows.ts). */
export const ACTIVITY_SHAPE = 'update-with-start, with an activity';
/** The gateway's shape at patch level 6: two local activities, a timer, a second workflow task (bench/floor-workflows.ts). */
export const ONE_LOCAL_SHAPE = 'update-with-start, level 6 shape';

export async function measureFloor(
  env: { client: Client; nativeConnection: NativeConnection },
  o: { n: number; n32: number; warmup: number; shapes?: 'all' | 'gateway' },
): Promise<FloorReport> {
  const taskQueue = `floor-${randomUUID().slice(0, 8)}`;
  // With the gateway's sandbox (workflows/sandbox.ts): the floor gets every worker setting the gateway has.
  const workflowBundle = await bundleWorkflowCode({ ...workflowBundleOptions(require.resolve('./floor-workflows')), logger: new DefaultLogger('WARN') });
  const worker = await Worker.create({ connection: env.nativeConnection, taskQueue, workflowBundle, activities: { noop: async () => {} } });
  const running = worker.run();
  const wf = env.client.workflow;
  const withStart = (workflow: string) => () =>
    wf.executeUpdateWithStart(turn, {
      updateId: randomUUID(),
      startWorkflowOperation: new WithStartWorkflowOperation(workflow, { taskQueue, workflowId: randomUUID(), workflowIdConflictPolicy: 'FAIL' }),
    });
  const gatewayShape = withStart('gatewayShape');
  const all: Record<string, () => Promise<unknown>> = {
    'start + complete (no activity)': () => wf.execute('empty', { taskQueue, workflowId: randomUUID() }),
    'one local activity': () => wf.execute('oneLocalActivity', { taskQueue, workflowId: randomUUID() }),
    'one activity': () => wf.execute('oneActivity', { taskQueue, workflowId: randomUUID() }),
    [GATEWAY_SHAPE]: gatewayShape,
    [ACTIVITY_SHAPE]: withStart('gatewayShapeWithActivity'),
    [ONE_TASK_SHAPE]: withStart('oneWorkflowTaskShape'),
    [ONE_LOCAL_SHAPE]: withStart('oneLocalActivityShape'),
  };
  const shapes: FloorShape[] = [];
  try {
    for (const [shape, call] of Object.entries(all)) {
      if (o.shapes === 'gateway' && ![GATEWAY_SHAPE, ACTIVITY_SHAPE, ONE_TASK_SHAPE, ONE_LOCAL_SHAPE].includes(shape)) continue;
      for (let i = 0; i < o.warmup; i++) await call();
      const ms: number[] = [];
      for (let i = 0; i < o.n; i++) {
        const t = performance.now();
        await call();
        ms.push(performance.now() - t);
      }
      ms.sort((a, b) => a - b);
      shapes.push({ shape, p50: ms[Math.floor(o.n / 2)], p99: ms[Math.min(o.n - 1, Math.floor(o.n * 0.99))] });
    }
    /** `o.n32` calls of `call`, 32 at a time: workflows/s. */
    const atC32 = async (call: () => Promise<unknown>): Promise<number> => {
      let next = 0;
      const t0 = performance.now();
      await Promise.all(
        Array.from({ length: 32 }, async () => {
          while (next++ < o.n32) await call();
        }),
      );
      return o.n32 / ((performance.now() - t0) / 1000);
    };
    /** `atC32(call)` under the node CPU meter: workflows/s and node CPU per workflow. */
    const meteredAtC32 = async (call: () => Promise<unknown>) => {
      const cpu = cpuMeter();
      const tps = await atC32(call);
      return { tps, cpu: Object.fromEntries(Object.entries(cpu.stop()).map(([k, ms]) => [k, ms / o.n32])) as GroupCpu & { total: number } };
    };
    const machine = processMeter();
    const gateway = await meteredAtC32(gatewayShape);
    const processCpuC32 = Object.fromEntries(Object.entries(machine.stop()).map(([k, ms]) => [k, ms / o.n32])) as ProcessCpu;
    const oneLocal = await meteredAtC32(all[ONE_LOCAL_SHAPE]);
    const oneWorkflowTaskTpsC32 = await atC32(all[ONE_TASK_SHAPE]);
    const p50Of = (name: string) => shapes.find((s) => s.shape === name)!.p50;
    return {
      shapes,
      gatewayP50: p50Of(GATEWAY_SHAPE),
      activityShapeP50: p50Of(ACTIVITY_SHAPE),
      gatewayTpsC32: gateway.tps,
      oneWorkflowTaskTpsC32,
      oneLocalTpsC32: oneLocal.tps,
      oneLocalCpuC32: oneLocal.cpu,
      cpuC32: gateway.cpu,
      processCpuC32,
    };
  } finally {
    worker.shutdown();
    await running;
  }
}

export function printFloor(f: FloorReport): void {
  console.log('\nbare Temporal on the same dev server (bench/floor.ts), ms');
  for (const s of f.shapes) console.log(`  ${s.shape.padEnd(34)} p50 ${s.p50.toFixed(1).padStart(6)}   p99 ${s.p99.toFixed(1).padStart(6)}`);
  console.log(`  ${GATEWAY_SHAPE} at c=32: ${f.gatewayTpsC32.toFixed(1)} workflows/s`);
  console.log(`  ${ONE_TASK_SHAPE} at c=32 (Temporal's least for a task that calls an agent): ${f.oneWorkflowTaskTpsC32.toFixed(1)} workflows/s`);
  const cpu = (c: GroupCpu & { total: number }) =>
    `${c.total.toFixed(1)} ms (main ${c.main.toFixed(1)}, workflow ${c.workflow.toFixed(1)}, temporal core ${c['temporal core'].toFixed(1)}, other ${c.other.toFixed(1)})`;
  console.log(`  its node CPU per workflow at c=32: ${cpu(f.cpuC32)}`);
  console.log(`  the machine's CPU per workflow at c=32: ${formatProcessCpu(f.processCpuC32)}`);
  console.log(`  ${ONE_LOCAL_SHAPE} (two local activities, a timer, two workflow tasks) at c=32: ${f.oneLocalTpsC32.toFixed(1)} workflows/s, node CPU per workflow ${cpu(f.oneLocalCpuC32)}`);
  console.log(`  what level 7 saves bare Temporal (level 6's shape less the gateway's): ${(f.oneLocalCpuC32.total - f.cpuC32.total).toFixed(1)} ms of node CPU per workflow`);
}
