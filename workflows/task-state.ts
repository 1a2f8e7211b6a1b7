/** The A2A task state machine's pure parts (§4 of reference/a2a-protocol.md): classes of states and views of a task. */
import type { TaskState, WireTask } from './types';

const TERMINAL: ReadonlySet<TaskState> = new Set([
  'TASK_STATE_COMPLETED',
  'TASK_STATE_FAILED',
  'TASK_STATE_CANCELED',
  'TASK_STATE_REJECTED',
]);
const INTERRUPTED: ReadonlySet<TaskState> = new Set(['TASK_STATE_INPUT_REQUIRED', 'TASK_STATE_AUTH_REQUIRED']);

/** Terminal states are final: "a task cannot restart" (§3.1). */
export const isTerminal = (s: TaskState): boolean => TERMINAL.has(s);
/** Interrupted states wait for the client's next message. */
export const isInterrupted = (s: TaskState): boolean => INTERRUPTED.has(s);

/** `TASK_STATE_INPUT_REQUIRED` → `input-required`: the spelling operators see in Temporal UI and the 0.3 dialect uses. */
export function stateLabel(s: TaskState): string {
  return s.slice('TASK_STATE_'.length).toLowerCase().replace(/_/g, '-');
}

/**
 * A copy of the task as a client asked to see it. §3.2.4 historyLength: unset = everything,
 * 0 = no history, N = the N most recent messages.
 */
export function viewTask(task: WireTask, historyLength?: number, includeArtifacts = true): WireTask {
  const view: WireTask = { ...task, status: { ...task.status } };
  const history = task.history ?? [];
  if (historyLength === 0) delete view.history;
  else view.history = historyLength === undefined ? [...history] : history.slice(-historyLength);
  if (!includeArtifacts) delete view.artifacts;
  else view.artifacts = [...(task.artifacts ?? [])];
  return view;
}
