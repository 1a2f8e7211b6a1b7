/**
 * Every message a task workflow answers, defined once and imported by the workflow and by
 * src/core/temporal/task-gateway.ts (the only client-side user), and the housekeeping workflows' two (src/core/temporal/housekeeping.ts).
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import type { AgentTaskRef, ChildTask, SendMessageArgs } from './contracts';
import type { WireTask } from './wire';

/** Multi-agent jobs: the header that tells an agent which Switchboard task it is working for. */
export const PARENT_TASK_HEADER = 'x-switchboard-parent-task';

/** Workflow id of a task: scoped by tenant, so one tenant can never address another's task. */
export const workflowIdOf = (tenant: string, taskId: string) => `a2a:${tenant}:${taskId}`;

/** Delivers one client message; its updateId is the A2A messageId, so a retried message is applied once. */
export const sendMessageUpdate = defineUpdate<WireTask, [SendMessageArgs]>('sendMessage');
/** Cancels the task; rejected (TaskNotCancelable) when it already ended in another terminal state. */
export const cancelUpdate = defineUpdate<WireTask, []>('cancel');
/**
 * Sent by the forwarding activity as soon as the agent names its task, so that a cancel arriving while the
 * call is still running can be passed on to the agent.
 */
export const agentTaskSignal = defineSignal<[AgentTaskRef]>('agentTask');
/** The agent's task as the workflow last heard it: a retried forwarding attempt re-attaches to it. */
export const agentTaskQuery = defineQuery<AgentTaskRef | undefined>('agentTask');
/** A push-notification config was created for the task: deliver its events to it (see deliverPushLoop). */
export const pushConfigSignal = defineSignal<[string]>('pushConfigAdded');
/** Multi-agent jobs: a child task was started for this task (by the gateway), or has ended (by the child). */
export const childTaskSignal = defineSignal<[ChildTask]>('childTask');
/** A housekeeping workflow's new arguments (a changed interval at start-up): taken from its next round on. */
export const housekeepingConfigureSignal = defineSignal<[object]>('configure');
/** Runs a housekeeping workflow's round now; completes with that round's result (an operator's or a test's "now"). */
export const housekeepingRunNowUpdate = defineUpdate<unknown, []>('runNow');
/** The current task; `historyLength` as in A2A GetTask (§3.2.4). */
export const getTaskQuery = defineQuery<WireTask, [number?]>('getTask');

/** Search attributes an operator filters tasks by in Temporal UI (all Keyword). */
export const SA_STATE = defineSearchAttributeKey('A2ATaskState', SearchAttributeType.KEYWORD);
export const SA_AGENT = defineSearchAttributeKey('A2AAgentId', SearchAttributeType.KEYWORD);
export const SA_CONTEXT = defineSearchAttributeKey('A2AContextId', SearchAttributeType.KEYWORD);
export const SA_TENANT = defineSearchAttributeKey('A2ATenant', SearchAttributeType.KEYWORD);
/**
 * The level of the task workflow's code that started it (TaskInput.patchLevel, workflows/levels.ts), set at start:
 * which levels open tasks are on (`switchboard tasks versions`), so an upgrade knows which it may retire.
 */
export const SA_LEVEL = defineSearchAttributeKey('A2APatchLevel', SearchAttributeType.KEYWORD);
export const SEARCH_ATTRIBUTES = {
  A2ATaskState: 'Keyword',
  A2AAgentId: 'Keyword',
  A2AContextId: 'Keyword',
  A2ATenant: 'Keyword',
  A2APatchLevel: 'Keyword',
} as const;

/** Failure types the workflow raises; the gateway maps each to an A2A error (src/api/a2a/errors.ts). */
export const FailureTypes = {
  TaskTerminal: 'TaskTerminal',
  TaskBusy: 'TaskBusy',
  ContextMismatch: 'ContextMismatch',
  TaskNotCancelable: 'TaskNotCancelable',
  /** The requester's account cannot cover the task's hold; the task ends rejected before the agent is called. */
  InsufficientFunds: 'InsufficientFunds',
  /** The agent answered a new task's first message with a JSON-RPC error (details: {code, message}); passed on as is. */
  AgentError: 'AgentError',
} as const;
