/**
 * One workflow per A2A task. It owns the task's state machine:
 *   submitted → working → (input-required | auth-required ↔ working) → completed | failed | canceled | rejected
 * Client messages arrive as `sendMessage` updates (updateId = messageId), the agent is called by the
 * `forwardMessage` activity, every state change is written to the PostgreSQL projection, and a terminal
 * task is settled exactly once. Deterministic: only @temporalio/workflow APIs, no I/O.
 */
import {
  ActivityCancellationType,
  ApplicationFailure,
  CancelledFailure,
  CancellationScope,
  allHandlersFinished,
  condition,
  continueAsNew,
  isCancellation,
  proxyActivities,
  proxyLocalActivities,
  setCurrentDetails,
  setHandler,
  sleep,
  TimeoutFailure,
  upsertSearchAttributes,
  uuid4,
  workflowInfo,
} from '@temporalio/workflow';
import type { createActivities } from '../activities';
import type { TaskState, WireMessage, WireTask } from '../task/wire';
import { agentErrorOf, causeOf, describeFailure, humanDuration, isTimeout, leftRunningAtAgent, lostToDatabase } from './failures';
import { Funding } from './funding';
import { cancelThroughHub, forwardThroughHub, isHubAgent } from './hub';
import { Job } from './job';
import { FailureTypes, SA_STATE, agentTaskQuery, agentTaskSignal, cancelUpdate, childTaskSignal, getTaskQuery, pushConfigSignal, sendMessageUpdate, workflowIdOf } from '../task/messages';
import { atLevel, patchedAt } from './patches';
import { PushDelivery } from './push-delivery';
import { isTerminal, ownCostOf, recordOf, refuseCancel, refuseMessage, settlementOf, stateLabel, statusOf, submittedTask, takeAnswer, viewTask } from '../task/rules';
import { type AgentRpcError, type AgentTaskRef, DEFAULT_TASK_TIMEOUT_MS, FIRST_EXCHANGE_MS, type FirstAnswer, type ForwardResult, followsByPush, type TaskInput, type TaskRecord, type TrustOutcome, type TurnFinish } from '../task/contracts';

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

/** After a lost turn the agent is asked to cancel for a minute at most: the task's settlement waits for it. */
const agentControlAfterFailure = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  scheduleToCloseTimeout: '1 minute',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '10 seconds' },
});

/**
 * A blocking turn's first exchange with the agent, inside the workflow task that starts the turn (see
 * forwardFirstExchange): one attempt, which ends within FIRST_EXCHANGE_MS (plus a PostgreSQL write in flight) with
 * the agent's answer or a hand-over; the timeout is a backstop. A failure is the turn's first attempt (forward()).
 */
const firstExchanges = proxyLocalActivities<Activities>({
  startToCloseTimeout: 3 * FIRST_EXCHANGE_MS + 15_000,
  retry: { maximumAttempts: 1 },
  cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
});

/** The agent's task states that a client's cancel, requested before they arrived, overrides. */
const FAILED_AT_AGENT: TaskState[] = ['TASK_STATE_FAILED', 'TASK_STATE_REJECTED'];

/** Failures of the forwarding activity that retrying cannot fix (see activities/forward-message.ts). */
export const NON_RETRYABLE_FORWARD_ERRORS = ['AgentRejected', 'InvalidAgentResponse', 'AgentUnreachable'];
/** The pause before a turn lost to the database runs again (doubling, up to the max). */
const DATABASE_RETRY_FIRST_MS = 1_000;
const DATABASE_RETRY_MAX_MS = 60_000;

export async function taskWorkflow(input: TaskInput): Promise<WireTask> {
  const { carry, agent } = input;
  // ---- the task and what the workflow knows beside it ----
  const task: WireTask = carry?.task ?? submittedTask(input.taskId, input.contextId, input.submittedAt ?? new Date().toISOString());
  const createdAt = carry?.createdAt ?? new Date().toISOString();
  let agentTaskId = carry?.agentTaskId;
  let agentContextId = carry?.agentContextId;
  let costMinor = carry?.costMinor;
  // Set when a terminal state has a more specific cause than its A2A state (see TrustOutcome).
  let trustOutcome: TrustOutcome | undefined;
  let version = carry?.version ?? 0;
  // Bumped once a change is committed to the event log: push deliveries wait on it for something new.
  let logged = version;
  /** Messages not yet sent to the agent, and whether their sender waits for the turn's end. */
  const inbox: { message: WireMessage; blocking: boolean }[] = [];
  // Turn counters let a blocking sender wait for the end of *its* turn.
  let turnsAccepted = 0;
  let turnsDone = 0;
  /** The agent's task of the current turn has ended (nothing to cancel there). */
  let agentTaskEnded = false;
  /** The agent's JSON-RPC error that ended the first turn, for its sender. */
  let firstTurnError: AgentRpcError | undefined;
  /**
   * The last turn ended in the workflow task that started it (its first exchange answered). Signals sent meanwhile
   * (a child task the agent started through Switchboard, linked) reach the workflow only in its next workflow task,
   * so the workflow never ends in this one: completing with a signal pending, the server would refuse the workflow
   * task, and the first exchange (the agent call) would run again. The task is settled in it all the same, so its
   * answer leaves after its last write, unless the agent linked children this workflow has not heard of yet
   * (`childrenLinked`, read by the first exchange): their costs belong in the settlement.
   */
  let answeredInWorkflowTask = false;
  /**
   * Level 2 (workflows/patches.ts): the A2ATaskState value last upserted (the front door starts the task `submitted`;
   * a continued run shows its first change), and whether a first exchange running holds `working` back.
   */
  let shownState: TaskState | undefined = carry ? undefined : 'TASK_STATE_SUBMITTED';
  let stateHeldBack = false;
  let childrenLinked = 0;
  /** The first exchange wrote the task's final record and its settlement (activities/forward-message.ts finishHere). */
  let finishedByFirstExchange = false;
  const state = (): TaskState => task.status.state;

  const funding = new Funding(input);
  const job = new Job(input, task);
  const push = new PushDelivery({
    tenant: input.tenant,
    taskId: task.id,
    retryInitialMs: input.pushRetryInitialMs,
    state,
    logged: () => logged,
    changed: showDetails,
  });
  // The retry policy bounds each exchange with the agent inside the activity, not the agent's work: an attempt
  // follows the agent's task for up to taskTimeoutMs (the activity ends itself then, canceling it at the agent;
  // Temporal's timeout is the backstop), and a dead worker is noticed by the heartbeat timeout.
  const forwardingOptions = {
    startToCloseTimeout: (agent.retry.taskTimeoutMs ?? DEFAULT_TASK_TIMEOUT_MS) + 2 * agent.retry.attemptTimeoutMs + 10_000,
    heartbeatTimeout: Math.min(10_000, agent.retry.attemptTimeoutMs),
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    retry: {
      maximumAttempts: agent.retry.maxAttempts,
      initialInterval: agent.retry.initialIntervalMs,
      backoffCoefficient: agent.retry.backoffCoefficient,
      nonRetryableErrorTypes: NON_RETRYABLE_FORWARD_ERRORS,
    },
  };
  const forwarding = proxyActivities<Activities>(forwardingOptions);
  /** The attempts after a first exchange that failed (it was attempt 1): the policy's, one fewer, backoff from its second interval. */
  const laterAttempts = proxyActivities<Activities>({
    ...forwardingOptions,
    retry: {
      ...forwardingOptions.retry,
      maximumAttempts: agent.retry.maxAttempts - 1,
      initialInterval: agent.retry.initialIntervalMs * agent.retry.backoffCoefficient,
      maximumInterval: 100 * agent.retry.initialIntervalMs, // Temporal's default for the policy itself
    },
  });

  // ---- handlers: what clients, the gateway and the activities send the task ----
  setHandler(childTaskSignal, (c) => {
    job.childChanged(c);
    showDetails();
  });
  job.show();
  setHandler(pushConfigSignal, (id) => push.watch(id));
  for (const id of carry?.pushConfigIds ?? []) push.watch(id);
  setHandler(getTaskQuery, (historyLength?: number) => viewTask(task, historyLength));
  setHandler(agentTaskSignal, (ref) => {
    agentTaskId = ref.agentTaskId;
    agentContextId = ref.agentContextId ?? agentContextId;
  });
  setHandler(agentTaskQuery, () => (agentTaskId ? { agentTaskId, agentContextId } : undefined));

  setHandler(
    sendMessageUpdate,
    async ({ message, returnImmediately, historyLength, pushConfigIds }) => {
      const turn = ++turnsAccepted;
      for (const id of pushConfigIds ?? []) push.watch(id);
      const own = { ...message, taskId: task.id, contextId: task.contextId };
      task.history = [...(task.history ?? []), own];
      inbox.push({ message: own, blocking: !returnImmediately });
      if (state() !== 'TASK_STATE_SUBMITTED') setStatus('TASK_STATE_WORKING');
      // The first message is answered only once its hold is decided, so a client without the funds gets an
      // error instead of a task (the task itself ends rejected, and is settled like any other).
      // (Each condition costs the activation one more pass into the workflow sandbox: only wait when needed.)
      if (funding.pending) await condition(() => !funding.pending || isTerminal(state()));
      const refusal = funding.refusal();
      if (refusal) throw refusal;
      if (!returnImmediately) await condition(() => turnsDone >= turn || isTerminal(state()));
      // The agent refused a new task with a JSON-RPC error: its client gets that error (code and message), as it
      // would calling the agent itself; the task has ended failed, saying the same.
      if (turn === 1 && firstTurnError && patchedAt(input.patchLevel, 'agent-error-to-client')) {
        throw ApplicationFailure.create({ type: FailureTypes.AgentError, message: firstTurnError.message, details: [firstTurnError], nonRetryable: true });
      }
      return viewTask(task, historyLength);
    },
    {
      validator: ({ message }) => {
        const refusal = refuseMessage(task, state() === 'TASK_STATE_SUBMITTED' && turnsAccepted === 0, message.contextId);
        if (refusal) throw ApplicationFailure.create({ ...refusal, nonRetryable: true });
      },
    },
  );

  const main = new CancellationScope();

  setHandler(
    cancelUpdate,
    async () => {
      if (!isTerminal(state())) {
        main.cancel();
        void job.cancelChildren();
        await condition(() => isTerminal(state()));
      }
      return viewTask(task);
    },
    {
      validator: () => {
        const refusal = refuseCancel(task);
        if (refusal) throw ApplicationFailure.create({ ...refusal, nonRetryable: true });
      },
    },
  );

  // ---- the state machine: turns until a terminal state, then settlement ----
  try {
    await main.run(converse);
  } catch (err) {
    if (!isCancellation(err)) throw err;
    await CancellationScope.nonCancellable(cancel); // cleanup must finish even though this scope was canceled
  }

  if (answeredInWorkflowTask && childrenLinked > job.children.length) {
    await sleep(1); // the children's links arrive with the next workflow task (see answeredInWorkflowTask)
    answeredInWorkflowTask = false;
  }
  const ownCostMinor = ownCostOf(state(), costMinor, agent.priceMinor, funding.heldMinor);
  // The steps below that most tasks skip are not called then: the SDK captures a stack trace for every promise a
  // workflow makes (for Temporal UI's Stack Trace), and an async call that returns at once still makes some. Each
  // skipped one would resolve at once, so the workflow's commands are the same either way.
  if (job.children.length > 0) await job.childrenSettled();
  job.show(ownCostMinor);
  // The first exchange may have written the final record and the settlement already: the same record (the task's
  // next version) and settlement, from the same steps (task-state.ts finishedFirstTurn).
  if (finishedByFirstExchange) logged = Math.max(logged, ++version);
  else await CancellationScope.nonCancellable(() => recordAndSettle(ownCostMinor));
  if (answeredInWorkflowTask) await sleep(1); // the workflow ends in a workflow task of its own (see answeredInWorkflowTask)
  if (input.parentTaskId) await job.reportToParent(state(), ownCostMinor);
  // The task is over; its webhooks still get every event (retried for up to a day).
  if (push.watching) await push.finished();
  if (!allHandlersFinished()) await condition(allHandlersFinished);
  // Operators read Temporal's execution status first: a task that failed, or that was rejected, ends its workflow
  // as Failed (settled and recorded like any other; the failure carries the task). Completed and canceled tasks
  // complete it. A2ATaskState names the exact state either way.
  const ending = state();
  if (ending === 'TASK_STATE_FAILED' || ending === 'TASK_STATE_REJECTED') {
    const m = task.status.message;
    throw ApplicationFailure.create({
      type: ending === 'TASK_STATE_FAILED' ? 'A2ATaskFailed' : 'A2ATaskRejected',
      message: `A2A task ${stateLabel(ending)}${m ? `: ${textOf(m)}` : ''}`,
      nonRetryable: true,
      details: [task],
    });
  }
  return task;

  /** The final state and the settlement, in one local activity (one transaction); runs recorded before that replay their two. */
  async function recordAndSettle(ownCostMinor: number): Promise<void> {
    const settlement = settlementOf(recordBase(), task, {
      requester: input.requester,
      amountMinor: ownCostMinor,
      outcome: trustOutcome,
      endedAt: task.status.timestamp ?? new Date().toISOString(),
    });
    if (patchedAt(input.patchLevel, 'finish-in-one-local-activity')) {
      await bookkeeping.finishTask(nextRecord(), settlement);
      logged = Math.max(logged, version);
    } else {
      await record();
      await bookkeeping.settleTask(settlement);
    }
  }

  /** One turn after another: wait for a message, fund the task once, call the agent, record what it said. */
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
      const { message, blocking } = inbox.shift()!;
      // Dequeued past its ttl (Date.now() is when this workflow task runs): not delivered, and not held against
      // the agent, which never saw it.
      if (!carry && turnsDone === 0 && input.expiresAt !== undefined && Date.now() >= input.expiresAt) {
        trustOutcome = 'expired';
        setStatus('TASK_STATE_REJECTED', gatewayMessage(`The envelope's ttl passed ${Date.now() - input.expiresAt} ms before the task left the queue; it was not delivered to the agent`));
        turnsDone++;
        return;
      }
      if (funding.pending) {
        const declined = await funding.reserve();
        if (declined !== undefined) {
          trustOutcome = 'unfunded';
          setStatus('TASK_STATE_REJECTED', gatewayMessage(declined));
          turnsDone++;
          return;
        }
      }
      // (Level 2: a first exchange that answers ends the turn in this workflow task: only the answer's state is shown.)
      stateHeldBack = atLevel(input.patchLevel, 2) && runsFirstExchange(blocking);
      setStatus('TASK_STATE_WORKING');
      // Logged first, so it precedes everything the agent streams (a fresh task's first exchange writes it while it
      // calls the agent, whose events wait for it): a snapshot for a follow-up turn; for the first, a status update
      // (the gateway logged the submitted task as event 1).
      const start = nextRecord(version > 0);
      // A fresh task's first turn has the forwarding activity write it first: one local activity (one activation)
      // fewer. A snapshot (the whole task, artifacts and all) is not put in the activity's input, which history keeps.
      const startByForwarding = start.version === 1 && !isHubAgent(agent) && patchedAt(input.patchLevel, 'turn-start-recorded-by-forwarding');
      if (startByForwarding) logged = Math.max(logged, start.version); // push loops follow the log's live tail from here
      else await write(start);
      const outcome = await forward(message, startByForwarding ? start : undefined, blocking);
      // The client canceled while the agent's answer was on its way, and the agent's task failed (often because the
      // cancel reached its own child tasks first): the client's cancel wins, as it does over a failed call. The
      // agent's task has ended, so it is not asked to cancel. A completed task stands: the work was done.
      if (!('failure' in outcome) && main.consideredCancelled && FAILED_AT_AGENT.includes(outcome.state) && patchedAt(input.patchLevel, 'cancel-wins-over-a-failed-turn')) {
        agentTaskEnded = true;
        throw new CancelledFailure(`canceled while the agent's task ended ${stateLabel(outcome.state)}`);
      }
      if ('failure' in outcome) {
        setStatus('TASK_STATE_FAILED', gatewayMessage(`The agent could not complete the task: ${outcome.failure}`));
      } else {
        apply(outcome);
      }
      turnsDone++;
      // The turn's last attempt was lost (its worker died: a timeout; or a retryable failure ran out of attempts)
      // with the agent's task running: canceled there, as the activity does with a task it gives up on, so runs do
      // not pile up at the agent. The client has its answer already (this activation completes its update).
      if ('failure' in outcome && outcome.leftRunning && patchedAt(input.patchLevel, 'cancel-at-agent-after-a-lost-turn')) await cancelLeftRunning(outcome.leftRunning);
      if (isTerminal(state())) return;
      await record();
      if (workflowInfo().continueAsNewSuggested) {
        await condition(allHandlersFinished);
        if (answeredInWorkflowTask) await sleep(1); // as before completing: see answeredInWorkflowTask
        await push.stop(); // the next run starts them again; each resumes at its cursor
        await continueAsNew<typeof taskWorkflow>({
          ...input,
          carry: {
            task, agentTaskId, agentContextId, version, costMinor, createdAt, pushConfigIds: push.configIds(), funded: true,
            heldMinor: funding.heldMinor, children: job.children,
          },
        });
      }
    }
  }

  /** A canceled task: its open children canceled, the agent told, the task ended `canceled` saying what happened. */
  async function cancel(): Promise<void> {
    let note = 'Canceled by the client';
    const canceledChildren = await job.cancelChildren();
    if (canceledChildren) note += `; ${canceledChildren} child task(s) canceled`;
    if (isHubAgent(agent)) {
      const untold = await cancelThroughHub(agent, input.tenant, task.id);
      if (untold) note += `; ${untold}`;
    } else if (agentTaskId && !agentTaskEnded) {
      try {
        await agentControl.cancelAtAgent({ endpoint: agent.endpoint, agentTaskId, tenant: input.tenant, agentId: agent.agentId });
      } catch (cancelErr) {
        note += `; the agent did not confirm the cancel (${describeFailure(cancelErr)})`;
      }
    }
    setStatus('TASK_STATE_CANCELED', gatewayMessage(note));
  }

  /** Cancels the agent's task of a failed turn, for a minute at most (the settlement waits); the task has failed either way. */
  async function cancelLeftRunning(id: string): Promise<void> {
    try {
      await agentControlAfterFailure.cancelAtAgent({ endpoint: agent.endpoint, agentTaskId: id, tenant: input.tenant, agentId: agent.agentId });
    } catch (cancelErr) {
      if (isCancellation(cancelErr)) throw cancelErr;
    }
  }

  async function forward(message: WireMessage, start: TaskRecord | undefined, blocking: boolean): Promise<(ForwardResult & FirstAnswer) | { failure: string; leftRunning?: string }> {
    answeredInWorkflowTask = false;
    // Level 3: a turn lost because PostgreSQL refused its writes (every attempt) is not the agent's failure: it runs
    // again after a pause, re-attaching to the agent's task when it is known, for as long as the database is down.
    let lostToDatabase = 0;
    for (;;) {
      const outcome = await forwardOnce(message, start, blocking, lostToDatabase > 0);
      if (!('lostToDatabase' in outcome)) return outcome;
      await sleep(Math.min(DATABASE_RETRY_FIRST_MS * 2 ** lostToDatabase++, DATABASE_RETRY_MAX_MS));
    }
  }

  async function forwardOnce(
    message: WireMessage,
    start: TaskRecord | undefined,
    blocking: boolean,
    again: boolean,
  ): Promise<(ForwardResult & FirstAnswer) | { failure: string; leftRunning?: string } | { lostToDatabase: true }> {
    try {
      const args = {
        ...(start ? { record: start } : {}),
        endpoint: agent.endpoint,
        message,
        agentTaskId,
        agentContextId,
        tenant: input.tenant,
        agentId: agent.agentId,
        gatewayTaskId: task.id,
        gatewayContextId: task.contextId,
        retry: agent.retry,
      };
      // A hub agent's turn goes to the process holding its socket (workflows/hub.ts); every other agent is called over HTTP/gRPC.
      if (isHubAgent(agent)) return await forwardThroughHub(agent, args, NON_RETRYABLE_FORWARD_ERRORS);
      if (again) return await forwarding.forwardMessage({ ...args, ...(agentTaskId ? { attach: { agentTaskId, ...(agentContextId ? { agentContextId } : {}) } } : {}) });
      // A client waiting for the turn's end: its first exchange runs in this workflow task (no activity task and no
      // workflow task more for an agent that answers at once); the activity takes over what remains.
      const first = runsFirstExchange(blocking) ? await firstExchange({ ...args, ...finishable(start) }) : undefined;
      // An answer's state is shown as it is applied, `working` never; a turn that goes on shows `working` now.
      const answered = first !== undefined && 'answer' in first;
      releaseHeldState(!answered);
      if (answered) return first.answer;
      const failedFirst = first !== undefined && 'failed' in first;
      const activity = failedFirst ? laterAttempts : forwarding;
      // (`record` again: the first exchange may have handed over before its write committed; a written one is a no-op.)
      return await activity.forwardMessage({ ...args, ...(first && 'handOver' in first ? first.handOver : {}), ...(failedFirst ? { attemptsBefore: 1 } : {}) });
    } catch (err) {
      releaseHeldState(false); // the state the turn ends in is shown (canceled, failed), never `working`
      if (isCancellation(err)) throw err;
      if (atLevel(input.patchLevel, 3) && !main.consideredCancelled && lostToDatabase(err)) return { lostToDatabase: true };
      // The client canceled, and the call ended otherwise before it saw the cancel: above all, its worker died
      // first, so the attempt timed out (a timed-out attempt whose cancel was requested is not retried). The
      // client's cancel wins: the task ends canceled, not failed (found by `npm run cluster`).
      if (main.consideredCancelled && patchedAt(input.patchLevel, 'cancel-wins-over-a-failed-call')) throw new CancelledFailure(`canceled while the agent call ended: ${describeFailure(err)}`);
      if (isTimeout(err)) trustOutcome = 'timeout';
      if (turnsDone === 0) firstTurnError = agentErrorOf(err);
      return { failure: describeFailure(err), leftRunning: isHubAgent(agent) ? undefined : leftRunningAtAgent(err, agentTaskId) };
    }
  }

  /**
   * The first exchange: the agent's answer; or the turn to hand to the activity, with the task the agent named
   * (which a cancel then reaches); or, when it failed as the activity's first attempt could (retrying may help),
   * `failed`, after the policy's first interval. A failure that retrying cannot help ends the turn, as the
   * activity's would; so does a retryable one when the policy allows one attempt.
   */
  async function firstExchange(
    args: Parameters<Activities['forwardFirstExchange']>[0],
  ): Promise<{ answer: ForwardResult & FirstAnswer } | { handOver: { attach?: AgentTaskRef; adopt?: string } } | { failed: true }> {
    try {
      const first = await firstExchanges.forwardFirstExchange(args);
      if (!('handoff' in first)) {
        answeredInWorkflowTask = true;
        childrenLinked = first.childrenLinked ?? 0;
        return { answer: first };
      }
      if (first.handoff) {
        agentTaskId = first.handoff.agentTaskId;
        agentContextId = first.handoff.agentContextId ?? agentContextId;
      }
      return { handOver: { ...(first.handoff ? { attach: first.handoff } : {}), ...(first.adopt ? { adopt: first.adopt } : {}) } };
    } catch (err) {
      if (isCancellation(err)) throw err;
      const cause = causeOf(err);
      const retryable =
        cause instanceof TimeoutFailure ||
        (cause instanceof ApplicationFailure && !cause.nonRetryable && !NON_RETRYABLE_FORWARD_ERRORS.includes(cause.type ?? ''));
      if (!retryable || agent.retry.maxAttempts <= 1) throw err;
      releaseHeldState(true); // before the backoff ends this workflow task
      // The agent's Retry-After (a local activity's failure carries it in its details: forwardFirstExchange).
      const retryAfter = cause instanceof ApplicationFailure ? (cause.details?.[0] as { retryAfterMs?: number } | undefined)?.retryAfterMs : undefined;
      await sleep(typeof retryAfter === 'number' ? retryAfter : agent.retry.initialIntervalMs);
      return { failed: true };
    }
  }

  /**
   * What a fresh task's first exchange needs to finish the task when the agent completes it at once (its final record
   * and settlement: see FirstAnswer.finish). Not a child task, nor one with children: the job's costs go into the
   * final record. No patch: the exchange's recorded result decides, and an earlier run's result has no `finish`.
   */
  function finishable(start: TaskRecord | undefined): { finish?: TurnFinish } {
    if (!start || input.parentTaskId || job.children.length > 0) return {};
    return { finish: { requester: input.requester, priceMinor: agent.priceMinor, heldMinor: funding.heldMinor } };
  }

  function apply(r: ForwardResult & FirstAnswer): void {
    agentTaskId = r.agentTaskId ?? agentTaskId;
    agentContextId = r.agentContextId ?? agentContextId;
    if (r.costMinor !== undefined) costMinor = r.costMinor;
    takeAnswer(task, r);
    setStatus(r.state, r.statusMessage, r.finish?.at);
    finishedByFirstExchange = r.finish?.written === true;
  }

  function setStatus(next: TaskState, message?: WireMessage, at = new Date().toISOString()): void {
    if (isTerminal(state())) return; // exactly one terminal state, whatever races
    task.status = statusOf(next, at, message);
    if (atLevel(input.patchLevel, 2)) showState();
    else upsertSearchAttributes([{ key: SA_STATE, value: stateLabel(next) }]);
    showDetails();
  }

  /** Level 2: the state search attribute, upserted when it differs from the one shown, unless held back. */
  function showState(): void {
    if (stateHeldBack || shownState === state()) return;
    shownState = state();
    upsertSearchAttributes([{ key: SA_STATE, value: stateLabel(shownState) }]);
  }

  /** Ends a first exchange's hold on `working`: shown now when `show` (the turn goes on), else superseded. */
  function releaseHeldState(show: boolean): void {
    if (!stateHeldBack) return;
    stateHeldBack = false;
    if (show) showState();
  }

  /** Whether a turn's first exchange runs as a local activity (a hub agent's turn never gets this far). */
  function runsFirstExchange(blocking: boolean): boolean {
    return !isHubAgent(agent) && blocking && !followsByPush(agent.endpoint) && patchedAt(input.patchLevel, 'first-exchange-local');
  }

  /**
   * Writes the projection and logs the change as the task's next event: a whole-task snapshot when a turn
   * starts (a stream of that turn begins with it), a status update otherwise.
   */
  async function record(snapshot = false): Promise<void> {
    await write(nextRecord(snapshot));
  }

  async function write(rec: TaskRecord): Promise<void> {
    await bookkeeping.recordTask(rec);
    logged = Math.max(logged, rec.version);
  }

  /** The task's next version, as the projection row and the event log get it. */
  function nextRecord(snapshot = false): TaskRecord {
    return recordOf(recordBase(), task, ++version, snapshot);
  }

  function recordBase(): Omit<TaskRecord, 'task' | 'version' | 'event'> {
    return { tenant: input.tenant, agentId: agent.agentId, createdAt, parentTaskId: input.parentTaskId, depth: input.depth };
  }

  function gatewayMessage(text: string): WireMessage {
    return { messageId: uuid4(), role: 'ROLE_AGENT', taskId: task.id, contextId: task.contextId, parts: [{ text }] };
  }

  /** What Temporal UI shows for the task now: its state, how each webhook's deliveries stand, the job. */
  function showDetails(): void {
    const m = task.status.message;
    const lines = [`**${stateLabel(state())}**${m ? ` — ${textOf(m)}` : ''}`];
    for (const [id, p] of push.status) lines.push(`push \`${id}\`: delivered through event ${p.cursor}${p.note ? ` — ${p.note}` : ''}`);
    lines.push(...job.details(workflowLink));
    setCurrentDetails(lines.join('\n\n'));
  }

  /** A link Temporal UI renders to another task's workflow. */
  function workflowLink(taskId: string): string {
    const id = workflowIdOf(input.tenant, taskId);
    return `[${id}](/namespaces/${workflowInfo().namespace}/workflows/${encodeURIComponent(id)})`;
  }
}

function textOf(m: WireMessage): string {
  const text = m.parts.map((p) => p.text ?? '').join(' ').trim();
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}
