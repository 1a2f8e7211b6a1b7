/**
 * Switchboard's housekeeping in Temporal (the orphan sweep, the agent-refresh sweep): one long-lived workflow per job
 * and deployment, with a fixed id (workflows/housekeeping.ts runs it: timers, and continue-as-new every few hundred
 * rounds). It replaced a Temporal Schedule per job, which started a run per tick: 120 rows an hour in Temporal UI's
 * list, among the A2A tasks an operator looks for. Now the list shows one running row per job.
 *
 * Started at start-up by every process that runs a worker, idempotently: signal-with-start on the fixed id starts
 * the workflow when no run is open, and otherwise hands the running one its (possibly changed) arguments, so
 * several processes never make two. The former Schedule is deleted on the way.
 *
 * A run sealed under a payload key that SWITCHBOARD_PAYLOAD_KEY no longer holds cannot go on (its worker cannot
 * read its history): its memo, sealed with it, does not decode either, so start-up finds it, terminates it with a
 * warning naming the key id, and starts a fresh one (issue 32, as the Schedules were recreated).
 *
 * A new periodic job follows the same pattern: a workflow that calls `housekeep(args, round)`, an id of the form
 * `<job>:<task queue>` (not `a2a:`, `certification:` or `genesis-event:`, so its payloads are `system`'s), and a
 * call to ensureHousekeeping at start-up beside the others.
 */
import { type Client, ScheduleNotFoundError, WorkflowExecutionAlreadyStartedError, WorkflowIdReusePolicy, WorkflowNotFoundError } from '@temporalio/client';
import type { HousekeepingArgs } from '../../../task/contracts';
import { housekeepingConfigureSignal, housekeepingRunNowUpdate } from '../../../task/messages';
import { payloadKeyErrorIn } from './encryption-codec';

export interface HousekeepingLog {
  warn(obj: object, msg: string): void;
}

export interface HousekeepingJob {
  /** Fixed per job and deployment, e.g. `switchboard-orphan-sweep:<task queue>`. */
  workflowId: string;
  workflowType: string;
  taskQueue: string;
  args: HousekeepingArgs;
  /** What the job does, shown in Temporal UI. */
  summary: string;
  /** The id of the Temporal Schedule that ran this job before: deleted when it is there. */
  formerScheduleId?: string;
}

/** The memo every housekeeping run carries (and passes on at continue-as-new): read at start-up to check its key. */
const MEMO = { switchboard: 'housekeeping' };

/**
 * Makes sure the job's workflow runs with `job.args`.
 * @returns `started` (no run was open), `running` (one was: it takes the arguments from its next round on), or
 * `restarted` (the open run was sealed under a payload key no longer held: terminated, and started again).
 * @throws what Temporal throws for anything else (unreachable, refused).
 */
export async function ensureHousekeeping(client: Client, job: HousekeepingJob, log?: HousekeepingLog): Promise<'started' | 'running' | 'restarted'> {
  if (job.formerScheduleId) {
    await client.schedule
      .getHandle(job.formerScheduleId)
      .delete()
      .catch((err: unknown) => {
        if (!(err instanceof ScheduleNotFoundError)) throw err;
      });
  }
  const handle = client.workflow.getHandle(job.workflowId);
  let open = false;
  let restarted = false;
  try {
    open = (await handle.describe()).status.name === 'RUNNING';
  } catch (err) {
    const sealed = payloadKeyErrorIn(err);
    if (sealed) {
      log?.warn(
        { workflowId: job.workflowId, keyId: sealed.keyId, reason: sealed.message },
        `housekeeping workflow ${job.workflowId} is sealed under payload key ${sealed.keyId}, which SWITCHBOARD_PAYLOAD_KEY no longer holds: starting it again`,
      );
      await handle.terminate(`sealed under payload key ${sealed.keyId}, no longer held: started again`).catch((e: unknown) => {
        if (!(e instanceof WorkflowNotFoundError)) throw e;
      });
      restarted = true;
    } else if (!(err instanceof WorkflowNotFoundError)) {
      throw err;
    }
  }
  try {
    await client.workflow.signalWithStart(job.workflowType, {
      workflowId: job.workflowId,
      taskQueue: job.taskQueue,
      args: [job.args],
      signal: housekeepingConfigureSignal,
      signalArgs: [job.args],
      memo: MEMO,
      workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
      staticSummary: job.summary,
    });
  } catch (err) {
    // Another process terminated and restarted it meanwhile: that one is running.
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
  return restarted ? 'restarted' : open ? 'running' : 'started';
}

/** Runs a round of the job now and waits for its result (tests; operators: `temporal workflow update execute --name runNow`). */
export async function runHousekeepingNow<R>(client: Client, workflowId: string): Promise<R> {
  return (await client.workflow.getHandle(workflowId).executeUpdate(housekeepingRunNowUpdate)) as R;
}
