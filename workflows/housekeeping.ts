/**
 * Housekeeping as one long-lived workflow per job (issue 34): a Temporal Schedule started a run per tick, 120 rows
 * an hour in Temporal UI's list among the A2A tasks. Here one run works a round every `everyMs` (a timer), and
 * continues as new after `runsPerExecution` rounds or when Temporal suggests it, so its history stays short and
 * the list shows one running row per job (and one closed row per continue-as-new, hours apart).
 *
 * It answers the `configure` signal (new arguments from the next round on: a changed interval at start-up) and the
 * `runNow` update (a round now, completing with its result). Started, and kept to one per job, by
 * src/core/temporal/housekeeping.ts.
 */
import { allHandlersFinished, condition, makeContinueAsNewFunc, setHandler, workflowInfo } from '@temporalio/workflow';
import type { HousekeepingArgs } from '../task/contracts';
import { housekeepingConfigureSignal, housekeepingRunNowUpdate } from '../task/messages';

/** Rounds per run: at one a minute about 7 hours, some 5,000 events (each round is ten or so). */
export const HOUSEKEEPING_RUNS_PER_EXECUTION = 500;

/**
 * Works `round` every `args.everyMs` until it is time to continue as new, then does so with the arguments as they
 * are by then (and the run's memo, which the start-up check reads).
 */
export async function housekeep<A extends HousekeepingArgs, R>(args: A, round: (args: A) => Promise<R>): Promise<never> {
  let current = args;
  let changed = false;
  let requested = 0; // runNow updates received
  let served = 0; // of those, the ones a finished round started after
  let last: R | undefined;
  setHandler(housekeepingConfigureSignal, (next) => {
    current = { ...current, ...(next as Partial<A>) };
    changed = true;
  });
  setHandler(housekeepingRunNowUpdate, async () => {
    const mine = ++requested;
    await condition(() => served >= mine);
    return last;
  });
  const limit = () => current.runsPerExecution ?? HOUSEKEEPING_RUNS_PER_EXECUTION;
  for (let rounds = 1; ; rounds++) {
    const covered = requested;
    const startedAt = Date.now();
    last = await round(current);
    served = covered;
    if (requested === served && (rounds >= limit() || workflowInfo().continueAsNewSuggested)) break;
    // Until the next round is due, or asked for now; a new interval counts from the last round's start.
    for (;;) {
      changed = false;
      const left = startedAt + current.everyMs - Date.now();
      if (requested > served || left <= 0) break;
      if (!(await condition(() => requested > served || changed, left)) && !changed) break;
    }
  }
  await condition(allHandlersFinished);
  return makeContinueAsNewFunc<(a: A) => Promise<never>>({ memo: workflowInfo().memo })(current);
}
