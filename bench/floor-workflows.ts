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
 * workflow records the task (a local activity), calls the agent (an activity), then records and settles it (one
 * more local activity), and the update returns then.
 */
export async function gatewayShape(): Promise<void> {
  let done = false;
  setHandler(turn, async () => {
    await condition(() => done);
    return 'ok';
  });
  await local.noop();
  await acts.noop();
  await local.noop();
  done = true;
}
