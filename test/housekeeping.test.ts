// Temporal UI's list shows tasks, not housekeeping (issue 34): the orphan sweep and the agent-refresh sweep each run
// as one long-lived workflow. After many rounds (short intervals stand in for minutes), and start-ups of several
// processes, each has one execution; continue-as-new keeps the workflow id and goes on sweeping. Real Temporal dev
// server, PostgreSQL, the gateway's worker.
// Run: TEMPORAL_CLI=$PWD/.tools/bin/temporal npx tsx --test test/housekeeping.test.ts
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Gateway, eventually, startGateway } from './helpers/harness';
import { ensureOrphanSweep, orphanSweepId } from '../src/core/temporal/orphan-sweep';
import { RefreshScheduler } from '../src/core/agents/refresh-schedules';

let gw: Gateway;

before(async () => {
  gw = await startGateway();
});
after(async () => {
  await gw?.close();
});

/** The activities a run's rounds completed (its history, read without decoding a payload). */
async function roundsOf(workflowId: string): Promise<number> {
  const history = await gw.env.client.workflow.getHandle(workflowId).fetchHistory();
  return (history.events ?? []).filter((e) => e.activityTaskCompletedEventAttributes).length;
}

/** Every execution with this id as Temporal's list shows it (what an operator sees), once the list has `atLeast`. */
async function executions(workflowId: string, atLeast = 1): Promise<string[]> {
  return eventually(async () => {
    const found: string[] = [];
    for await (const wf of gw.env.client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) found.push(wf.status.name);
    return found.length >= atLeast ? found.sort() : undefined;
  }, 20_000, `${atLeast} execution(s) of ${workflowId} in the list`);
}

describe('housekeeping in Temporal', () => {
  test('many rounds of both sweeps, and three start-ups, make one workflow execution each; continue-as-new keeps the id and the pace', async () => {
    const scheduler = new RefreshScheduler({ client: gw.env.client, taskQueue: gw.taskQueue, intervalMs: 1_000 });
    const orphans = orphanSweepId(gw.taskQueue);
    try {
      // Three processes starting (each runs a worker, so each ensures the housekeeping).
      for (let i = 0; i < 3; i++) {
        await ensureOrphanSweep(gw.env.client, gw.taskQueue, 100);
        await scheduler.reconcile(gw.db.pool);
      }
      // A Schedule made a run per round: 20 rounds were 20 rows. Here they are one run's rounds.
      await eventually(async () => ((await roundsOf(orphans)) >= 20 ? true : undefined), 60_000, '20 orphan sweeps');
      await eventually(async () => ((await roundsOf(scheduler.sweepId)) >= 3 ? true : undefined), 60_000, '3 refresh sweeps');
      assert.deepEqual(await executions(orphans), ['RUNNING']);
      assert.deepEqual(await executions(scheduler.sweepId), ['RUNNING']);
      let housekeeping = 0;
      for await (const wf of gw.env.client.workflow.list({ query: `TaskQueue = '${gw.taskQueue}' AND WorkflowType != 'taskWorkflow'` })) housekeeping += wf.workflowId === orphans || wf.workflowId === scheduler.sweepId ? 1 : 0;
      assert.equal(housekeeping, 2, 'two housekeeping rows in the task queue, whatever the rounds');

      // Three rounds per run from now on (handed to the running sweep, as a changed setting is at start-up).
      assert.equal(await ensureOrphanSweep(gw.env.client, gw.taskQueue, 100, undefined, 3), 'running');
      const continued = await executions(orphans, 2);
      assert.ok(continued.includes('CONTINUED_AS_NEW') && continued.filter((s) => s === 'RUNNING').length <= 1, continued.join());
      // The new run sweeps on, at the pace it was handed.
      await eventually(async () => ((await roundsOf(orphans)) >= 2 ? true : undefined), 30_000, 'sweeps of the continued run');
      const latest = await gw.env.client.workflow.getHandle(orphans).describe();
      assert.equal(latest.type, 'orphanSweepWorkflow');
      assert.deepEqual(latest.memo, { switchboard: 'housekeeping' }, 'the memo the start-up check reads is passed on');
    } finally {
      for (const id of [orphans, scheduler.sweepId]) await gw.env.client.workflow.getHandle(id).terminate('test done').catch(() => undefined);
    }
  });
});
