// Minimal workflows for bench/temporal-floor.ts: the Temporal round-trips under a gateway task, without A2A or PostgreSQL.
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

/** The gateway's shape: update-with-start; the update returns after a local + a remote activity, then one more local. */
export async function gatewayShape(): Promise<void> {
  let done = false;
  setHandler(turn, async () => {
    await condition(() => done);
    return 'ok';
  });
  await Promise.all([local.noop(), acts.noop()]);
  done = true;
  await local.noop();
}
