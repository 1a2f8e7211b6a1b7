// Minimal workflows for bench/floor.ts: the Temporal round-trips under a gateway task, without A2A or PostgreSQL.
import { condition, defineUpdate, proxyActivities, proxyLocalActivities, setHandler, sleep } from '@temporalio/workflow';

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
 * The gateway's shape for a blocking single-turn task (workflows/task-workflow.ts, patch level 7): update-with-start;
 * in its first workflow task the workflow calls the agent in one local activity (the first exchange, which writes the
 * task's final record and settlement when the workflow asks it to), the update's condition holds once it returns,
 * and the update's answer and the workflow's end leave with that workflow task.
 */
export async function gatewayShape(): Promise<void> {
  const turnDone = answersWhenDone();
  await local.noop();
  turnDone();
}

/**
 * The gateway's shape at patch level 6: the first exchange, then the workflow's own finishTask (a second local
 * activity), the update's answer with that workflow task, then a 1 ms timer and a second workflow task that ends the
 * workflow. Measured beside the gateway's shape: what level 7 saves bare Temporal.
 */
export async function oneLocalActivityShape(): Promise<void> {
  const turnDone = answersWhenDone();
  await local.noop();
  await local.noop();
  turnDone();
  await sleep(1);
}

/**
 * Temporal's least for a task that calls an agent: one local activity and no second workflow task, so the update's
 * answer and the workflow's end leave with the workflow task that ran the local activity. The gateway's shape since
 * patch level 7 (a rerun of a refused workflow task reads the first exchange's kept answer): measured as the bound.
 */
export async function oneWorkflowTaskShape(): Promise<void> {
  const turnDone = answersWhenDone();
  await local.noop();
  turnDone();
}

/**
 * The gateway's shape before that (and still the shape of a turn the first exchange hands over, or of a client
 * that does not wait): the agent is called by an activity, and a second workflow task takes its result.
 */
export async function gatewayShapeWithActivity(): Promise<void> {
  const turnDone = answersWhenDone();
  await acts.noop();
  turnDone();
  await local.noop();
}

/** The gateway shapes' update (the client's blocking send): answered once the turn is done. @returns what marks it done. */
function answersWhenDone(): () => void {
  let done = false;
  setHandler(turn, async () => {
    await condition(() => done);
    return 'ok';
  });
  return () => {
    done = true;
  };
}
