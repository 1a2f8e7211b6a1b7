// Minimal workflows for bench/floor.ts: the Temporal round-trips under a gateway task, without A2A or PostgreSQL.
import { condition, defineUpdate, proxyActivities, proxyLocalActivities, setHandler } from '@temporalio/workflow';

interface Acts {
  noop(): Promise<void>;
}
const acts = proxyActivities<Acts>({ startToCloseTimeout: '10 seconds' });
const local = proxyLocalActivities<Acts>({ startToCloseTimeout: '10 seconds' });
export const turn = defineUpdate<string>('turn');

export async function empty(): Promise<void> {}

export async function oneActivity(): Promise<void> {
  await acts.noop();
}

export async function oneLocalActivity(): Promise<void> {
  await local.noop();
}

/**
 * The gateway's shape for a blocking single-turn task (workflows/task-workflow.ts): update-with-start; the
 * workflow calls the agent (an activity, which records the task's `working` state itself), the update's
 * condition holds once it returns, and the workflow records and settles the task (one local activity,
 * `finishTask`) in the same activation, so the update's answer leaves with that workflow task.
 */
export async function gatewayShape(): Promise<void> {
  let done = false;
  setHandler(turn, async () => {
    await condition(() => done);
    return 'ok';
  });
  await acts.noop();
  done = true;
  await local.noop();
}
