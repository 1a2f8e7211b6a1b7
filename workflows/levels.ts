/**
 * The task workflow's levels: which way a workflow takes where today's code differs from the code that started it.
 *
 * The front door starts every task workflow with `patchLevel: PATCH_LEVEL` (task/contracts.ts TaskInput), so a
 * workflow's level is in its input, which never changes within a run (nor across continue-as-new): replay stays
 * deterministic, with no `patched()` markers. A change to the commands a task workflow issues bumps PATCH_LEVEL and
 * is taken at the new level (`atLevel`); workflows started below it keep the old way until none is running.
 *
 * The levels this code runs:
 * 3. Started by code that let a fresh task's first exchange finish the task (its final record and settlement): its
 *    recorded result says whether it did, and the workflow does not write them again. The workflow waited a timer
 *    for the links of child tasks it had not heard of yet.
 * 4. Exactly one owner: the workflow records and settles every task. It waits for child tasks' links themselves
 *    (their signals), not a timer; a cancel requested through Temporal (Temporal UI's Request Cancellation) is an A2A
 *    cancel, and the workflow it canceled ends Canceled (the task's end runs in a non-cancellable scope).
 * 5. The task's last statement does more: a first exchange that answers terminal neither counts the task's child tasks
 *    nor logs the events it relayed while holding them (ForwardArgs.atFinish); the workflow's finishTask counts the
 *    children and logs the events in its statement, and writes the final record and the settlement only when it knew
 *    every child (else it waits for their links, as level 4, and finishes again). Two statements fewer per task.
 * 6. A cancel tells a 0.1 or NEXUS agent `tasks/cancel` with the gateway task's id (the id it was sent the task with)
 *    even before the agent has answered the first call (a blocking first turn); below 6 only a task id the agent named.
 * 7. A simple task in one workflow task: a fresh task's first exchange, asked by the workflow (ForwardArgs.settle),
 *    writes the final record and the settlement of an answer that ends the task in finishTask's statement, and keeps
 *    the answer with the task's claim; the workflow, told so (`finish.written`), ends in that workflow task, with no
 *    timer. A rerun of that workflow task (the server refused the completion: a signal came) reads the kept answer
 *    instead of calling the agent again, and a cancel or a message that came meanwhile waits for it (firstLook).
 *
 * Levels 0–2 (workflows started before the level-3 release) are retired: their patches and ways were removed, and a
 * worker refuses their workflow tasks with RETIRED_LEVEL (docs/operations.md: drain them before upgrading).
 */
import { OLDEST_LEVEL, type TaskInput } from '../task/contracts';

/**
 * The one `patched()` marker, for a change that must reach workflows already running at every level: a turn whose
 * forwarding activity was scheduled by a release that counted restarts as attempts, and ran out of them to restarts,
 * runs again instead of failing the task (task-workflow.ts forward). Today's activities never end so (they retry
 * without a count), so only those workflows ever record it; a history without the marker replays as it ran.
 */
export const RESTARTS_ARE_NOT_THE_AGENTS = 'restarts-are-not-the-agents';

export { OLDEST_LEVEL };

/** Whether a workflow started at `level` takes the way of level `n`. */
export function atLevel(level: number | undefined, n: number): boolean {
  return (level ?? 0) >= n;
}

/** The failure type a retired level's workflow task fails with (the workflow itself stays open: roll back to drain it). */
export const RETIRED_LEVEL = 'RetiredPatchLevel';

/**
 * Refuses a workflow started below OLDEST_LEVEL: an Error (not an ApplicationFailure) fails the workflow task, not the
 * workflow, so it stays open for a worker that still runs its level. The message says what to do.
 */
export function refuseRetiredLevel(input: TaskInput): void {
  if (atLevel(input.patchLevel, OLDEST_LEVEL)) return;
  const err = new Error(
    `task ${input.taskId} was started at patch level ${input.patchLevel ?? 0}; this Switchboard runs task workflows from level ${OLDEST_LEVEL} on. ` +
      'Run the previous release until such tasks have ended (finished or canceled), then upgrade: see docs/operations.md, "Upgrading".',
  );
  err.name = RETIRED_LEVEL;
  throw err;
}
