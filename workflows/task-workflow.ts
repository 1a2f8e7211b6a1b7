/**
 * One workflow per A2A task. It owns the task's state machine:
 *   submitted → working → (input-required | auth-required ↔ working) → completed | failed | canceled | rejected
 * Client messages arrive as `sendMessage` updates (updateId = messageId), the agent is called by the
 * `forwardMessage` activity, every state change is written to the PostgreSQL projection, and a terminal
 * task is settled exactly once. Deterministic: only @temporalio/workflow APIs, no I/O.
 */
import {
  ActivityCancellationType,
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  TimeoutFailure,
  allHandlersFinished,
  condition,
  continueAsNew,
  isCancellation,
  getExternalWorkflowHandle,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setCurrentDetails,
  setHandler,
  upsertSearchAttributes,
  uuid4,
  workflowInfo,
} from '@temporalio/workflow';
import type { createActivities } from '../activities';
import { FailureTypes, SA_STATE, agentTaskSignal, cancelUpdate, childTaskSignal, getTaskQuery, pushConfigSignal, sendMessageUpdate, workflowIdOf } from './messages';
import { isInterrupted, isTerminal, stateLabel, viewTask } from './task-state';
import type { ChildTask, ForwardResult, TaskInput, TaskState, TrustOutcome, WireMessage, WireTask } from './types';

type Activities = ReturnType<typeof createActivities>;

/** Bookkeeping writes are short and must eventually succeed: local activities, retried until PostgreSQL answers. */
const bookkeeping = proxyLocalActivities<Activities>({
  startToCloseTimeout: '10 seconds',
  retry: { initialInterval: '200 milliseconds', backoffCoefficient: 2, maximumInterval: '30 seconds' },
});

/** Canceling at the agent is retried until the agent answers, for at most an hour. */
const agentControl = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  scheduleToCloseTimeout: '1 hour',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

/** Failures of the forwarding activity that retrying cannot fix (see activities/forward-message.ts). */
export const NON_RETRYABLE_FORWARD_ERRORS = ['AgentRejected', 'InvalidAgentResponse', 'AgentUnreachable'];

export async function taskWorkflow(input: TaskInput): Promise<WireTask> {
  const { carry, agent } = input;
  const task: WireTask = carry?.task ?? {
    id: input.taskId,
    contextId: input.contextId,
    status: { state: 'TASK_STATE_SUBMITTED', timestamp: new Date().toISOString() },
    artifacts: [],
    history: [],
  };
  const createdAt = carry?.createdAt ?? new Date().toISOString();
  let agentTaskId = carry?.agentTaskId;
  let agentContextId = carry?.agentContextId;
  let costMinor = carry?.costMinor;
  // The hold is decided once, before the first agent call. A run carried over from before holds existed
  // (no `funded` in its carry) counts as decided: it never reserved anything.
  const holdMinor = input.budgetMinor ?? agent.priceMinor;
  let heldMinor = carry?.heldMinor ?? 0;
  let funding: 'pending' | 'funded' | { declined: string; availableMinor: number } =
    carry ? (carry.funded === false ? 'pending' : 'funded') : holdMinor > 0 ? 'pending' : 'funded';
  // Set when a terminal state has a more specific cause than its A2A state (see TrustOutcome).
  let trustOutcome: TrustOutcome | undefined;
  let version = carry?.version ?? 0;
  // Bumped once a change is committed to the event log: push deliveries wait on it for something new.
  let logged = version;
  const inbox: WireMessage[] = [];
  // Turn counters let a blocking sender wait for the end of *its* turn.
  let turnsAccepted = 0;
  let turnsDone = 0;
  const state = (): TaskState => task.status.state;

  const forwarding = proxyActivities<Activities>({
    startToCloseTimeout: agent.retry.attemptTimeoutMs,
    heartbeatTimeout: Math.min(10_000, agent.retry.attemptTimeoutMs),
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    retry: {
      maximumAttempts: agent.retry.maxAttempts,
      initialInterval: agent.retry.initialIntervalMs,
      backoffCoefficient: agent.retry.backoffCoefficient,
      nonRetryableErrorTypes: NON_RETRYABLE_FORWARD_ERRORS,
    },
  });

  function setStatus(next: TaskState, message?: WireMessage): void {
    if (isTerminal(state())) return; // exactly one terminal state, whatever races
    task.status = { state: next, timestamp: new Date().toISOString(), ...(message ? { message } : {}) };
    upsertSearchAttributes([{ key: SA_STATE, value: stateLabel(next) }]);
    showDetails();
  }

  /** What Temporal UI shows for the task now: its state, and how each webhook's deliveries stand. */
  function showDetails(): void {
    const m = task.status.message;
    const lines = [`**${stateLabel(state())}**${m ? ` — ${textOf(m)}` : ''}`];
    for (const [id, p] of pushStatus) lines.push(`push \`${id}\`: delivered through event ${p.cursor}${p.note ? ` — ${p.note}` : ''}`);
    if (input.parentTaskId) lines.push(`parent task: ${workflowLink(input.parentTaskId)} (hop ${input.depth ?? 1})`);
    for (const c of children) lines.push(`child task: ${workflowLink(c.taskId)} → agent \`${c.agentId}\`${c.state ? ` — ${stateLabel(c.state)}` : ''}`);
    setCurrentDetails(lines.join('\n\n'));
  }

  /** A link Temporal UI renders to another task's workflow. */
  function workflowLink(taskId: string): string {
    const id = workflowIdOf(input.tenant, taskId);
    return `[${id}](/namespaces/${workflowInfo().namespace}/workflows/${encodeURIComponent(id)})`;
  }

  // ---- multi-agent jobs: the tasks this task's agent started through Switchboard ----
  const children: ChildTask[] = carry?.children ?? [];
  const childrenCost = () => children.reduce((sum, c) => sum + (c.totalCostMinor ?? 0), 0);
  /** GetTask shows the job: parent, hop count, children and their costs. */
  function showJob(ownCostMinor?: number): void {
    if (!input.parentTaskId && children.length === 0) return;
    const job: Record<string, unknown> = { depth: input.depth ?? 0, children };
    if (input.parentTaskId) job.parentTaskId = input.parentTaskId;
    if (ownCostMinor !== undefined) job.cost = { ownMinor: ownCostMinor, childrenMinor: childrenCost(), totalMinor: ownCostMinor + childrenCost() };
    task.metadata = { ...task.metadata, switchboard: { ...(task.metadata?.switchboard as object), job } };
  }
  /**
   * A canceled job cancels its open children (each of them cancels its own), started as soon as the cancel
   * arrives rather than after the agent call has wound down. @returns how many were open.
   */
  let childrenCanceled: Promise<number> | undefined;
  function cancelChildren(): Promise<number> {
    childrenCanceled ??= CancellationScope.nonCancellable(async () => {
      const open = children.filter((c) => !c.state);
      if (open.length === 0 || !patched('multi-agent-jobs')) return 0;
      await Promise.all(open.map((c) => agentControl.cancelChildTask({ tenant: input.tenant, taskId: c.taskId }).catch(() => undefined)));
      return open.length;
    });
    return childrenCanceled;
  }
  setHandler(childTaskSignal, (c) => {
    const i = children.findIndex((x) => x.taskId === c.taskId);
    if (i < 0) children.push(c);
    else children[i] = { ...children[i], ...c };
    showJob();
    showDetails();
  });
  showJob();

  function gatewayMessage(text: string): WireMessage {
    return { messageId: uuid4(), role: 'ROLE_AGENT', taskId: task.id, contextId: task.contextId, parts: [{ text }] };
  }

  /**
   * Writes the projection and logs the change as the task's next event: a whole-task snapshot when a turn
   * starts (a stream of that turn begins with it), a status update otherwise.
   */
  const record = (snapshot = false) => {
    const v = ++version;
    const event = snapshot
      ? { task: viewTask(task) }
      : { statusUpdate: { taskId: task.id, contextId: task.contextId, status: task.status } };
    return bookkeeping
      .recordTask({
        tenant: input.tenant,
        agentId: agent.agentId,
        task,
        version: v,
        createdAt,
        parentTaskId: input.parentTaskId,
        depth: input.depth,
        event: { key: `v${v}`, event },
      })
      .then(() => {
        logged = Math.max(logged, v);
      });
  };

  // ---- push notifications: one delivery loop per config, outside the task's cancellation scope ----
  const pushing = proxyActivities<Activities>({
    startToCloseTimeout: '10 minutes',
    heartbeatTimeout: '30 seconds',
    scheduleToCloseTimeout: '24 hours',
    retry: { initialInterval: input.pushRetryInitialMs ?? 1000, backoffCoefficient: 2, maximumInterval: '10 minutes' },
  });
  const pushScope = new CancellationScope();
  const pushLoops = new Map<string, Promise<void>>();
  const pushStatus = new Map<string, { cursor: number; note?: string }>();

  function watchPush(configId: string): void {
    if (pushLoops.has(configId)) return;
    pushStatus.set(configId, { cursor: 0 });
    pushLoops.set(configId, pushScope.run(() => deliverPushLoop(configId)));
  }

  /**
   * Delivers the task's events to one webhook, in order, until the config is deleted or the task has ended and
   * its last event was delivered. Each call of the activity sends what the log has (following the live tail
   * while the agent works); retries with backoff for up to a day are Temporal's, and the cursor is the
   * config's own, in PostgreSQL, so no event is sent twice after a success.
   */
  async function deliverPushLoop(configId: string): Promise<void> {
    for (;;) {
      const seen = logged;
      let closed = false;
      try {
        const r = await pushing.deliverPush({ tenant: input.tenant, taskId: task.id, configId, follow: state() === 'TASK_STATE_WORKING' });
        if (r.gone) {
          pushStatus.set(configId, { cursor: r.cursor, note: 'config deleted' });
          return;
        }
        closed = r.closed;
        pushStatus.set(configId, { cursor: r.cursor });
      } catch (err) {
        if (isCancellation(err)) throw err;
        pushStatus.set(configId, { cursor: pushStatus.get(configId)?.cursor ?? 0, note: `gave up: ${describeFailure(err)}` });
        showDetails();
        return;
      }
      showDetails();
      if (closed && isTerminal(state()) && logged === seen) return;
      // While the agent works, keep following; otherwise wait until the workflow logs something new.
      if (!(state() === 'TASK_STATE_WORKING' && !closed)) await condition(() => logged !== seen);
    }
  }

  setHandler(pushConfigSignal, watchPush);
  for (const id of carry?.pushConfigIds ?? []) watchPush(id);

  setHandler(getTaskQuery, (historyLength?: number) => viewTask(task, historyLength));
  setHandler(agentTaskSignal, (ref) => {
    agentTaskId = ref.agentTaskId;
    agentContextId = ref.agentContextId ?? agentContextId;
  });

  setHandler(
    sendMessageUpdate,
    async ({ message, returnImmediately, historyLength, pushConfigIds }) => {
      const turn = ++turnsAccepted;
      for (const id of pushConfigIds ?? []) watchPush(id);
      const own = { ...message, taskId: task.id, contextId: task.contextId };
      task.history = [...(task.history ?? []), own];
      inbox.push(own);
      if (state() !== 'TASK_STATE_SUBMITTED') setStatus('TASK_STATE_WORKING');
      // The first message is answered only once its hold is decided, so a client without the funds gets an
      // error instead of a task (the task itself ends rejected, and is settled like any other).
      await condition(() => funding !== 'pending' || isTerminal(state()));
      if (typeof funding === 'object') {
        throw ApplicationFailure.create({
          type: FailureTypes.InsufficientFunds,
          message: funding.declined,
          // Shown with the failed update in Temporal UI.
          details: [{ requiredMinor: holdMinor, availableMinor: funding.availableMinor, account: `requester:${input.requester}` }],
          nonRetryable: true,
        });
      }
      if (!returnImmediately) await condition(() => turnsDone >= turn || isTerminal(state()));
      return viewTask(task, historyLength);
    },
    {
      validator: ({ message }) => {
        if (isTerminal(state())) {
          throw ApplicationFailure.create({
            type: FailureTypes.TaskTerminal,
            message: `Task ${task.id} is ${stateLabel(state())}; a terminal task accepts no more messages (start a new task in the same context)`,
            nonRetryable: true,
          });
        }
        const firstMessage = state() === 'TASK_STATE_SUBMITTED' && turnsAccepted === 0;
        if (!firstMessage && !isInterrupted(state())) {
          throw ApplicationFailure.create({
            type: FailureTypes.TaskBusy,
            message: `Task ${task.id} is ${stateLabel(state())}; send the next message when it asks for input`,
            nonRetryable: true,
          });
        }
        if (message.contextId && message.contextId !== task.contextId) {
          throw ApplicationFailure.create({
            type: FailureTypes.ContextMismatch,
            message: `contextId ${message.contextId} does not match task ${task.id}'s context ${task.contextId}`,
            nonRetryable: true,
          });
        }
      },
    },
  );

  const main = new CancellationScope();

  setHandler(
    cancelUpdate,
    async () => {
      if (!isTerminal(state())) {
        main.cancel();
        void cancelChildren();
        await condition(() => isTerminal(state()));
      }
      return viewTask(task);
    },
    {
      validator: () => {
        if (isTerminal(state()) && state() !== 'TASK_STATE_CANCELED') {
          throw ApplicationFailure.create({
            type: FailureTypes.TaskNotCancelable,
            message: `Task ${task.id} is already ${stateLabel(state())} and cannot be canceled`,
            nonRetryable: true,
          });
        }
      },
    },
  );

  async function converse(): Promise<void> {
    for (;;) {
      if (inbox.length === 0) {
        const arrived = await condition(() => inbox.length > 0, input.inputTimeoutMs);
        if (!arrived) {
          trustOutcome = 'expired';
          setStatus(
            'TASK_STATE_FAILED',
            gatewayMessage(`No message arrived within ${humanDuration(input.inputTimeoutMs)} while the task was ${stateLabel(state())}; the task expired`),
          );
          return;
        }
      }
      const message = inbox.shift()!;
      if (funding === 'pending' && !(await reserve())) {
        turnsDone++;
        return;
      }
      setStatus('TASK_STATE_WORKING');
      // Logged before the agent is called, so it precedes everything the agent streams: a snapshot for a
      // follow-up turn; for the first, a status update (the gateway logged the submitted task as event 1).
      await record(version > 0);
      const outcome = await forward(message);
      if ('failure' in outcome) {
        setStatus('TASK_STATE_FAILED', gatewayMessage(`The agent could not complete the task: ${outcome.failure}`));
      } else {
        apply(outcome);
      }
      turnsDone++;
      if (isTerminal(state())) return;
      await record();
      if (workflowInfo().continueAsNewSuggested) {
        await condition(allHandlersFinished);
        await stopPushLoops(); // the next run starts them again; each resumes at its cursor
        await continueAsNew<typeof taskWorkflow>({
          ...input,
          carry: { task, agentTaskId, agentContextId, version, costMinor, createdAt, pushConfigIds: [...pushLoops.keys()], funded: true, heldMinor, children },
        });
      }
    }
  }

  /**
   * Reserves the task's hold before the agent is first called. The activity is idempotent (one hold row per
   * task) and runs to completion even if the task is canceled meanwhile, so a hold can never be committed after
   * the settlement that should release it. @returns false when the funds are not there: the task is rejected.
   */
  async function reserve(): Promise<boolean> {
    if (!patched('hold-before-forward')) {
      funding = 'funded';
      return true;
    }
    const r = await CancellationScope.nonCancellable(() =>
      bookkeeping.holdFunds({ tenant: input.tenant, taskId: task.id, agentId: agent.agentId, requester: input.requester, amountMinor: holdMinor }),
    );
    if (r.ok) {
      heldMinor = holdMinor;
      funding = 'funded';
      return true;
    }
    funding = { declined: r.reason, availableMinor: r.availableMinor };
    trustOutcome = 'unfunded';
    setStatus('TASK_STATE_REJECTED', gatewayMessage(r.reason));
    return false;
  }

  async function forward(message: WireMessage): Promise<ForwardResult | { failure: string }> {
    try {
      return await forwarding.forwardMessage({
        endpoint: agent.endpoint,
        message,
        agentTaskId,
        agentContextId,
        tenant: input.tenant,
        agentId: agent.agentId,
        gatewayTaskId: task.id,
        gatewayContextId: task.contextId,
      });
    } catch (err) {
      if (isCancellation(err)) throw err;
      if (err instanceof ActivityFailure && err.cause instanceof TimeoutFailure) trustOutcome = 'timeout';
      return { failure: describeFailure(err) };
    }
  }

  function apply(r: ForwardResult): void {
    agentTaskId = r.agentTaskId ?? agentTaskId;
    agentContextId = r.agentContextId ?? agentContextId;
    if (r.artifacts.length > 0) task.artifacts = r.artifacts;
    if (r.statusMessage) task.history = [...(task.history ?? []), r.statusMessage];
    if (r.costMinor !== undefined) costMinor = r.costMinor;
    setStatus(r.state, r.statusMessage);
  }

  try {
    await main.run(converse);
  } catch (err) {
    if (!isCancellation(err)) throw err;
    // Cleanup must finish even though this scope was canceled.
    await CancellationScope.nonCancellable(async () => {
      let note = 'Canceled by the client';
      const canceledChildren = await cancelChildren();
      if (canceledChildren) note += `; ${canceledChildren} child task(s) canceled`;
      if (agentTaskId) {
        try {
          await agentControl.cancelAtAgent({ endpoint: agent.endpoint, agentTaskId, tenant: input.tenant, agentId: agent.agentId });
        } catch (cancelErr) {
          note += `; the agent did not confirm the cancel (${describeFailure(cancelErr)})`;
        }
      }
      setStatus('TASK_STATE_CANCELED', gatewayMessage(note));
    });
  }

  const ownCostMinor = state() === 'TASK_STATE_COMPLETED' ? Math.min(costMinor ?? agent.priceMinor, heldMinor) : 0;
  // A child answers its caller at the end of its turn and reports its cost a moment later, when it settles.
  if (children.length) await condition(() => children.every((c) => c.state), '30 seconds');
  showJob(ownCostMinor);
  await CancellationScope.nonCancellable(async () => {
    await record();
    await bookkeeping.settleTask({
      tenant: input.tenant,
      taskId: task.id,
      agentId: agent.agentId,
      requester: input.requester,
      finalState: state(),
      // The settlement caps this by the hold it finds in PostgreSQL (heldMinor here is for humans reading history).
      amountMinor: ownCostMinor,
      outcome: trustOutcome ?? (stateLabel(state()) as TrustOutcome),
      startedAt: createdAt,
      endedAt: task.status.timestamp ?? new Date().toISOString(),
    });
  });
  // A child reports its end, with its whole cost, to its parent (which may have ended already).
  if (input.parentTaskId && patched('multi-agent-jobs')) {
    const report: ChildTask = { taskId: task.id, agentId: agent.agentId, state: state(), totalCostMinor: ownCostMinor + childrenCost() };
    await getExternalWorkflowHandle(workflowIdOf(input.tenant, input.parentTaskId))
      .signal(childTaskSignal, report)
      .catch(() => undefined);
  }
  // The task is over; its webhooks still get every event (retried for up to a day).
  await Promise.all(pushLoops.values());
  await condition(allHandlersFinished);
  return task;

  async function stopPushLoops(): Promise<void> {
    pushScope.cancel();
    await Promise.allSettled(pushLoops.values());
  }
}

function textOf(m: WireMessage): string {
  const text = m.parts.map((p) => p.text ?? '').join(' ').trim();
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}

/** The most specific reason Temporal recorded, e.g. the agent's JSON-RPC error or "timed out after 3 attempts". */
function describeFailure(err: unknown): string {
  if (err instanceof ActivityFailure && err.cause) {
    if (err.cause instanceof TimeoutFailure) return `the agent call timed out (${err.cause.timeoutType})`;
    return err.cause.message;
  }
  return err instanceof Error ? err.message : String(err);
}

function humanDuration(ms: number): string {
  if (ms % 86_400_000 === 0) return `${ms / 86_400_000} day(s)`;
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000} hour(s)`;
  if (ms % 60_000 === 0) return `${ms / 60_000} minute(s)`;
  return `${ms / 1000} second(s)`;
}
