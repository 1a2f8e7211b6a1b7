/**
 * The A2A task state machine's pure parts (§4 of reference/a2a-protocol.md), each stated once and used by the
 * workflow, the gateway, the event log and the streams: classes of states, when a turn ends, the submitted
 * task, the hold, and views of a task.
 */
import type { StreamEvent, TaskState, WireMessage, WireTask } from './wire';
import type { FailureTypes } from './messages';
import type { ForwardResult, MessageAnswer, SettleAtAnswer, SettlementRequest, TaskInput, TaskRecord, TrustOutcome } from './contracts';

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
/**
 * A turn (one client message and the agent's work on it) has ended: the task is terminal or waits for input.
 * A blocking send answers then, a stream closes (0.3 marks that event `final`).
 */
export const endsTurn = (s: TaskState): boolean => isTerminal(s) || isInterrupted(s);

/** A new task as its first event shows it (the gateway logs it; the workflow starts from the same). */
export function submittedTask(taskId: string, contextId: string, timestamp: string): WireTask {
  return { id: taskId, contextId, status: { state: 'TASK_STATE_SUBMITTED', timestamp }, artifacts: [], history: [] };
}

/** What a task reserves on its requester's account before the agent is called: the client's budget, else the price. */
export const holdOf = (input: Pick<TaskInput, 'budgetMinor' | 'agent'>): number => input.budgetMinor ?? input.agent.priceMinor;

/** A task's status: its state since `timestamp`, with the message that says why (the agent's, or the gateway's). */
export function statusOf(state: TaskState, timestamp: string, message?: WireMessage): WireTask['status'] {
  return { state, timestamp, ...(message ? { message } : {}) };
}

/**
 * The agent's answer to a turn, taken into the task: its artifacts replace the list, its status message joins the
 * history, its task metadata is the client's to read (`switchboard` stays the gateway's own). The status is set
 * apart (statusOf), since a task's first terminal state is its last. Reassigns, never mutates, what it changes.
 */
export function takeAnswer(task: WireTask, r: ForwardResult): void {
  if (r.artifacts.length > 0) task.artifacts = r.artifacts;
  if (r.statusMessage) task.history = [...(task.history ?? []), r.statusMessage];
  if (r.metadata) task.metadata = { ...task.metadata, ...r.metadata, ...(task.metadata?.switchboard ? { switchboard: task.metadata.switchboard } : {}) };
  // A Message answer (§3.1.1): marked, so its client is given the Message, not this task (directAnswerOf).
  if (r.message) task.metadata = { ...task.metadata, switchboard: { ...(task.metadata?.switchboard as object), answer: r.message } };
  // The agent keeps its stream open while the task waits (0.x `final: false`): marked until its next answer.
  const own = task.metadata?.switchboard as Record<string, unknown> | undefined;
  if (r.streamOpen || own?.streamOpen) {
    const { streamOpen: _, ...rest } = own ?? {};
    task.metadata = { ...task.metadata, switchboard: { ...rest, ...(r.streamOpen ? { streamOpen: true } : {}) } };
  }
}

/**
 * The task's change at `version`, as the projection row and the event log get it: a whole-task snapshot, or a status
 * update (which carries the Message-answer mark, for a stream of the exchange: directAnswerOfEvent).
 */
export function recordOf(base: Omit<TaskRecord, 'task' | 'version' | 'event'>, task: WireTask, version: number, snapshot = false): TaskRecord {
  const answer = answerMarkOf(task.metadata);
  const streamOpen = isInterrupted(task.status.state) && (task.metadata?.switchboard as { streamOpen?: boolean } | undefined)?.streamOpen === true;
  const mark = answer || streamOpen ? { metadata: { switchboard: { ...(answer ? { answer } : {}), ...(streamOpen ? { streamOpen } : {}) } } } : {};
  const event = snapshot ? { task: viewTask(task) } : { statusUpdate: { taskId: task.id, contextId: task.contextId, status: task.status, ...mark } };
  return { ...base, task, version, event: { key: `v${version}`, event } };
}

/**
 * The agent answered the client's message `messageId` with a Message and made no task (A2A §3.1.1): that message as
 * its client gets it, instead of the task Switchboard keeps of the exchange. It has the gateway's context (a new
 * message in it goes on with the same conversation), and no taskId unless the agent's message named its task (then
 * the gateway's).
 */
export function directAnswerOf(task: WireTask, messageId: string): WireMessage | undefined {
  const answer = answerMarkOf(task.metadata);
  return answer?.inReplyTo === messageId ? replyOf(task.status.message, answer) : undefined;
}

/**
 * An interruption whose agent keeps its stream open (ForwardResult.streamOpen, marked by recordOf): a stream whose
 * dialect says `final` (0.x) stays open past it, as the agent's own would.
 */
export function keepsStreamOpen(e: StreamEvent): boolean {
  return 'statusUpdate' in e && isInterrupted(e.statusUpdate.status.state) && (e.statusUpdate.metadata?.switchboard as { streamOpen?: boolean } | undefined)?.streamOpen === true;
}

/** The same from the log: the task's final status update, which carries the mark (recordOf), answering the turn it ends. */
export function directAnswerOfEvent(e: StreamEvent): WireMessage | undefined {
  return 'statusUpdate' in e ? replyOf(e.statusUpdate.status.message, answerMarkOf(e.statusUpdate.metadata)) : undefined;
}

function answerMarkOf(metadata: Record<string, unknown> | undefined): MessageAnswer | undefined {
  const answer = (metadata?.switchboard as { answer?: MessageAnswer } | undefined)?.answer;
  return answer?.kind === 'message' ? answer : undefined;
}

function replyOf(message: WireMessage | undefined, answer: MessageAnswer | undefined): WireMessage | undefined {
  if (!message || !answer) return undefined;
  const { taskId, ...rest } = message;
  return answer.inTask ? { ...rest, taskId } : rest;
}

/** What a task that ended in `state` costs its requester: the agent's reported cost, else its price, capped by the hold; nothing unless completed. */
export function ownCostOf(state: TaskState, costMinor: number | undefined, priceMinor: number, heldMinor: number): number {
  return state === 'TASK_STATE_COMPLETED' ? Math.min(costMinor ?? priceMinor, heldMinor) : 0;
}

/** A terminal task's settlement: what it costs (ownCostOf), and its outcome for the agent's trust record (its state's, unless finer). */
export function settlementOf(
  rec: Pick<TaskRecord, 'tenant' | 'agentId' | 'createdAt'>,
  task: WireTask,
  p: { requester: string; amountMinor: number; outcome?: TrustOutcome; endedAt: string },
): SettlementRequest {
  const finalState = task.status.state;
  return {
    tenant: rec.tenant,
    taskId: task.id,
    agentId: rec.agentId,
    requester: p.requester,
    finalState,
    // The settlement caps this by the hold it finds in PostgreSQL (the workflow's heldMinor is for humans reading history).
    amountMinor: p.amountMinor,
    outcome: p.outcome ?? (stateLabel(finalState) as TrustOutcome),
    startedAt: rec.createdAt,
    endedAt: p.endedAt,
  };
}

/**
 * A fresh task ended by its first answer, as the workflow will hold it (TaskMachine.apply, then finish): the turn's
 * start record's task with the answer taken and the terminal status at `at`, its final record (the next version) and
 * its settlement. The first exchange that finishes the task (ForwardArgs.settle) writes these; the workflow, applying
 * the same answer with the same time, ends with the same task.
 */
export function finalOfFirstTurn(start: TaskRecord, answer: ForwardResult, at: string, s: SettleAtAnswer): { record: TaskRecord; settlement: SettlementRequest } {
  const task: WireTask = { ...start.task, status: { ...start.task.status } };
  takeAnswer(task, answer);
  task.status = statusOf(answer.state, at, answer.statusMessage);
  const base = { tenant: start.tenant, agentId: start.agentId, createdAt: start.createdAt, parentTaskId: start.parentTaskId, depth: start.depth };
  const amountMinor = ownCostOf(answer.state, answer.costMinor, s.priceMinor, s.heldMinor);
  return { record: recordOf(base, task, start.version + 1), settlement: settlementOf(base, task, { requester: s.requester, amountMinor, endedAt: at }) };
}

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

/** Why a task refuses a call now: a failure type (src/api/a2a/errors.ts maps each to an A2A error) and the reason. */
export interface Refusal {
  type: keyof typeof FailureTypes;
  message: string;
}

/**
 * Whether the task takes a client message now: only its first one, or the next one while it waits for input,
 * and only in its own context. The workflow's validator asks; so does the gateway for a task whose workflow
 * has gone (it answers from the projection), so both say the same.
 */
export function refuseMessage(task: WireTask, firstMessage: boolean, contextId?: string): Refusal | undefined {
  const { state } = task.status;
  if (isTerminal(state)) {
    return { type: 'TaskTerminal', message: `Task ${task.id} is ${stateLabel(state)}; a terminal task accepts no more messages (start a new task in the same context)` };
  }
  if (!firstMessage && !isInterrupted(state)) {
    return { type: 'TaskBusy', message: `Task ${task.id} is ${stateLabel(state)}; send the next message when it asks for input` };
  }
  if (contextId && contextId !== task.contextId) {
    return { type: 'ContextMismatch', message: `contextId ${contextId} does not match task ${task.id}'s context ${task.contextId}` };
  }
  return undefined;
}

/** Whether the task can be canceled: anything but a terminal state other than canceled (canceling twice is fine). */
export function refuseCancel(task: WireTask): Refusal | undefined {
  const { state } = task.status;
  if (isTerminal(state) && state !== 'TASK_STATE_CANCELED') {
    return { type: 'TaskNotCancelable', message: `Task ${task.id} is already ${stateLabel(state)} and cannot be canceled` };
  }
  return undefined;
}
