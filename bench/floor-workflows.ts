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
 * The gateway's shape for a blocking single-turn task (workflows/task-workflow.ts): update-with-start; in its first
 * workflow task the workflow calls the agent in one local activity (the first exchange), then writes the task's final
 * record and settlement in a second (its `finishTask`: the workflow is the task's one settler); the update's condition
 * holds once they return, and the update's answer leaves with that workflow task, after the task's last write; a
 * 1 ms timer, and a second workflow task ends the workflow.
 */
export async function gatewayShape(): Promise<void> {
  const turnDone = answersWhenDone();
  await local.noop();
  await local.noop();
  turnDone();
  await sleep(1);
}

/**
 * The gateway's shape with one local activity: the first exchange writing the final record and the settlement itself,
 * as the gateway did before the workflow became the task's one settler. Measured beside the gateway's shape: what
 * that second local activity costs bare Temporal.
 */
export async function oneLocalActivityShape(): Promise<void> {
  const turnDone = answersWhenDone();
  await local.noop();
  turnDone();
  await sleep(1);
}

/**
 * Temporal's least for a task that calls an agent: one local activity and no second workflow task, so the update's
 * answer and the workflow's end leave with the workflow task that ran the local activity. The gateway does not end a
 * task this way: a signal that arrives while that workflow task runs (a child task's link) makes the server refuse a
 * completion that ends the workflow, which fails the client's update-with-start and runs the local activity (the
 * agent call) again. Measured beside the gateway's shape, as the bound on what any gateway on Temporal could reach.
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
