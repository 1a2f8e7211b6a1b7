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
 * The gateway's shape for a blocking single-turn task (workflows/task-workflow.ts) since the first exchange with the
 * agent finishes a task the agent completes at once: update-with-start; in its first workflow task the workflow
 * calls the agent in one local activity (which also records the task's `working` state before the call, and its final
 * record and settlement after), the update's condition holds once it returns, and the update's answer leaves with
 * that workflow task, after the task's last write; a 1 ms timer, and a second workflow task ends the workflow.
 */
export async function gatewayShape(): Promise<void> {
  const turnDone = answersWhenDone();
  await local.noop();
  turnDone();
  await sleep(1);
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
