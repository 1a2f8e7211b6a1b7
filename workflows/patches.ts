/**
 * The task workflow's patches, asked without leaving markers where that is safe.
 *
 * Each `patched(id)` a new workflow calls records a marker in its history and, with it, an upsert of the
 * TemporalChangeVersion search attribute: two events, a command each, for a step that can only go one way in a
 * workflow started by today's code. They exist for workflows started before a patch, which must replay the old way.
 * So the front door starts every task workflow with `patchLevel: PATCH_LEVEL` (task/contracts.ts TaskInput; PATCH_LEVEL is there too), and
 * such a workflow takes the paths of the patches its level covers without asking. A workflow without a level (started
 * before this) asks `patched()` for each, as before, and so does a workflow for a patch added after its level.
 *
 * Replay stays deterministic either way: the level is in the workflow's input, which never changes within a run (nor
 * across continue-as-new, which passes the input on). A patch added later is asked with `patched()` until a new level
 * covers it: add its id to a new level's set, bump PATCH_LEVEL (task/contracts.ts), keep the old sets. A change made for new workflows
 * only needs no patch at all: it is taken at a new level (`atLevel`), and workflows below it keep the old way.
 *
 * The levels:
 * 1. The patches in LEVEL_1 are taken without asking.
 * 2. The task's state search attribute is upserted only when it changes, and a blocking turn's `working` not while its
 *    first exchange runs: one that answers shows the answer's state alone, in the same workflow task (an upsert is a
 *    command, an event and a visibility update; `working` there was overwritten before anyone could see it).
 * 3. A turn lost because PostgreSQL refused its writes on every attempt runs again after a pause (re-attaching to the
 *    agent's task), instead of failing the task: a database outage is never the agent's failure.
 */
import { patched } from '@temporalio/workflow';

/** The patches level 1 takes without asking: every patch of the task workflow (and its Funding and Job) until then. */
const LEVEL_1 = new Set([
  'hold-before-forward',
  'multi-agent-jobs',
  'agent-error-to-client',
  'finish-in-one-local-activity',
  'turn-start-recorded-by-forwarding',
  'cancel-wins-over-a-failed-turn',
  'cancel-at-agent-after-a-lost-turn',
  'first-exchange-local',
  'cancel-wins-over-a-failed-call',
]);


/** Whether a workflow started at `level` takes the way of level `n` (see the levels above). */
export function atLevel(level: number | undefined, n: number): boolean {
  return (level ?? 0) >= n;
}

/** Whether the workflow takes patch `id`'s path: at once for a level that covers it, else as `patched()` says. */
export function patchedAt(level: number | undefined, id: string): boolean {
  return (atLevel(level, 1) && LEVEL_1.has(id)) || patched(id);
}
