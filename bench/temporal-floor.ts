/**
 * `npx tsx bench/temporal-floor.ts`: what bare Temporal round-trips cost on this machine (the same dev-server
 * binary as the bench, no A2A, no PostgreSQL), to tell Temporal's floor from Switchboard's own overhead.
 * Env: FLOOR_N (calls per shape, default 50), FLOOR_SERVER_ARGS (extra dev-server flags to try), e.g.
 *   FLOOR_SERVER_ARGS="--dynamic-config-value history.transferProcessorMaxPollRPS=10000
 *     --dynamic-config-value system.enableActivityEagerExecution=true"
 * (the dev server's defaults, 20 transfer-queue polls/s and no eager activities, put ~30 ms on every task dispatch).
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { WithStartWorkflowOperation } from '@temporalio/client';
import { bundleWorkflowCode, DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { turn } from './floor-workflows';

const N = Number(process.env.FLOOR_N ?? 50);
process.env.TEMPORAL_CLI ||= execFileSync('bash', [path.resolve(__dirname, '../scripts/ensure-temporal.sh')], { encoding: 'utf8' }).trim().split('\n').pop();

async function main() {
  Runtime.install({ logger: new DefaultLogger('WARN') });
  const extraArgs = (process.env.FLOOR_SERVER_ARGS ?? '').split(' ').filter(Boolean);
  const env = await TestWorkflowEnvironment.createLocal({ server: { executable: { type: 'existing-path', path: process.env.TEMPORAL_CLI! }, extraArgs } });
  const taskQueue = 'floor';
  const workflowBundle = await bundleWorkflowCode({ workflowsPath: require.resolve('./floor-workflows'), logger: new DefaultLogger('WARN') });
  const worker = await Worker.create({ connection: env.nativeConnection, taskQueue, workflowBundle, activities: { noop: async () => {} } });
  const running = worker.run();
  const wf = env.client.workflow;

  const shapes: Record<string, () => Promise<unknown>> = {
    'start + complete (no activity)': () => wf.execute('empty', { taskQueue, workflowId: randomUUID() }),
    'one local activity': () => wf.execute('oneLocalActivity', { taskQueue, workflowId: randomUUID() }),
    'one activity': () => wf.execute('oneActivity', { taskQueue, workflowId: randomUUID() }),
    'update-with-start, gateway shape': () =>
      wf.executeUpdateWithStart(turn, {
        updateId: randomUUID(),
        startWorkflowOperation: new WithStartWorkflowOperation('gatewayShape', { taskQueue, workflowId: randomUUID(), workflowIdConflictPolicy: 'FAIL' }),
      }),
  };
  for (const [name, call] of Object.entries(shapes)) {
    for (let i = 0; i < 10; i++) await call();
    const ms: number[] = [];
    for (let i = 0; i < N; i++) {
      const t = performance.now();
      await call();
      ms.push(performance.now() - t);
    }
    ms.sort((a, b) => a - b);
    console.log(`${name.padEnd(34)} p50 ${ms[Math.floor(N / 2)].toFixed(1).padStart(6)} ms   p99 ${ms[Math.floor(N * 0.99)].toFixed(1).padStart(6)} ms`);
  }
  worker.shutdown();
  await running;
  await env.teardown();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
