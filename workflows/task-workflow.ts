/**
 * One workflow per A2A task. It owns the task's state machine, and is the only place that settles the task:
 *   submitted → working → (input-required | auth-required ↔ working) → completed | failed | canceled | rejected
 * Client messages arrive as `sendMessage` updates (updateId = messageId) and each becomes a turn (`turn`): the agent
 * is called by the forwarding activities (a blocking turn's first exchange as a local activity, the rest as the
 * `forwardMessage` activity), which report the turn's outcome and write nothing but the turn's `working` change and
 * the events the agent streams. A cancel (`cancel`) ends the task canceled. Once terminal, `finish` records the final
 * state and settles the task exactly once. Deterministic: only @temporalio/workflow APIs, no I/O.
 */
import { ApplicationFailure, CancelledFailure, CancellationScope, allHandlersFinished, condition, continueAsNew, isCancellation, setHandler, sleep, uuid4, workflowInfo } from '@temporalio/workflow';
import type { TaskState, WireMessage, WireTask } from '../task/wire';
import { agentErrorOf, describeFailure, humanDuration, isTimeout, leftRunningAtAgent, lostToDatabase, lostToRestarts } from './failures';
import { Funding } from './funding';
import { forwardThroughHub, isHubAgent } from './hub';
import { Job } from './job';
import { atLevel, refuseRetiredLevel } from './levels';
import { FailureTypes, agentTaskQuery, agentTaskSignal, cancelUpdate, childTaskSignal, getTaskQuery, pushConfigSignal, sendMessageUpdate } from '../task/messages';
import { PushDelivery } from './push-delivery';
import { bookkeeping, firstExchanges, forwardingFor, NON_RETRYABLE_FORWARD_ERRORS } from './task-options';
import { cancelAtAgent, cancelLeftRunning } from './agent-cancel';
import { type FirstEnd, type FirstExchangeArgs, firstEndOf, firstExchangeArgs, firstRetryDelay } from './first-exchange';
import { TaskShown, textOf } from './task-shown';
import { isTerminal, ownCostOf, recordOf, refuseCancel, refuseMessage, settlementOf, stateLabel, statusOf, submittedTask, takeAnswer, viewTask } from '../task/rules';
import { type AgentRpcError, type AgentTaskRef, type FirstAnswer, type FirstExchange, type ForwardResult, agentTaskIsGatewayTask, followsByPush, type SendMessageArgs, type SettleAtAnswer, type SettlementRequest, type TaskInput, type TaskRecord, type TrustOutcome } from '../task/contracts';

export { NON_RETRYABLE_FORWARD_ERRORS } from './task-options';

/** The agent's task states that a client's cancel, requested before they arrived, overrides. */
const FAILED_AT_AGENT: TaskState[] = ['TASK_STATE_FAILED', 'TASK_STATE_REJECTED'];
/** The pause before a turn lost to the database runs again (doubling, up to the max). */
const DATABASE_RETRY_FIRST_MS = 1_000;
const DATABASE_RETRY_MAX_MS = 60_000;
/** How long a task whose agent linked child tasks waits for their links (their signals) before it settles anyway. */
const CHILD_LINKS_WAIT = '1 minute';
/** A run's history when its first workflow task starts: started, workflow task scheduled, workflow task started. */
const FIRST_WORKFLOW_TASK_EVENTS = 3;

type Outcome = (ForwardResult & FirstAnswer) | { failure: string; leftRunning?: string };
/** A turn's message and its request's metadata, as the forwarding activity's input carries them. */
type TurnMessage = { message: WireMessage; metadata?: Record<string, unknown> };

export async function taskWorkflow(input: TaskInput): Promise<WireTask> {
  refuseRetiredLevel(input);
  return new TaskMachine(input).run();
}

/** The task's state machine: its state, and the handlers for what clients, the gateway and the activities send it. */
class TaskMachine {
  private readonly task: WireTask;
  private readonly createdAt: string;
  private agentTaskId?: string;
  private agentContextId?: string;
  private costMinor?: number;
  /** Set when a terminal state has a more specific cause than its A2A state (see TrustOutcome). */
  private trustOutcome?: TrustOutcome;
  private version: number;
  /** Bumped once a change is committed to the event log: push deliveries wait on it for something new. */
  private logged: number;
  /** Messages not yet sent to the agent, whether their sender waits for the turn's end, and their request's metadata. */
  private readonly inbox: { message: WireMessage; blocking: boolean; metadata?: Record<string, unknown> }[] = [];
  /** Turn counters let a blocking sender wait for the end of *its* turn. */
  private turnsAccepted = 0;
  private turnsDone = 0;
  /** The agent's task of the current turn has ended (nothing to cancel there). */
  private agentTaskEnded = false;
  /** The agent's JSON-RPC error that ended a turn (by the turn's number in this run), for its blocking sender. */
  private turnError?: { turn: number; error: AgentRpcError };
  /** What the last turn's first exchange, when it answered, left the task's end to do (workflows/first-exchange.ts). */
  private firstEnd?: FirstEnd;
  /**
   * Level 7: this may rerun the workflow task that took the first message (its completion refused: a signal came), whose
   * first exchange may have finished the task. Until it has read so (SettleAtAnswer.again), a cancel and a further
   * message wait, and are answered as they would have been after that answer.
   */
  private firstLook: boolean;
  /** The scope turns run in: a cancel cancels it. */
  private readonly main = new CancellationScope();
  private readonly funding: Funding;
  private readonly job: Job;
  private readonly push: PushDelivery;
  private readonly shown: TaskShown;
  private readonly forwarding: ReturnType<typeof forwardingFor>;

  constructor(private readonly input: TaskInput) {
    const { carry } = input;
    this.task = carry?.task ?? submittedTask(input.taskId, input.contextId, input.submittedAt ?? new Date().toISOString());
    this.createdAt = carry?.createdAt ?? new Date().toISOString();
    this.agentTaskId = carry?.agentTaskId;
    this.agentContextId = carry?.agentContextId;
    this.costMinor = carry?.costMinor;
    this.version = carry?.version ?? 0;
    this.logged = this.version;
    this.funding = new Funding(input);
    this.job = new Job(input, this.task);
    this.shown = new TaskShown(input.tenant, this.task, Boolean(carry));
    this.push = new PushDelivery({
      tenant: input.tenant,
      taskId: this.task.id,
      retryInitialMs: input.pushRetryInitialMs,
      state: () => this.state,
      logged: () => this.logged,
      changed: () => this.showDetails(),
    });
    this.forwarding = forwardingFor(input.agent);
    this.firstLook = atLevel(input.patchLevel, 7) && !carry && workflowInfo().historyLength > FIRST_WORKFLOW_TASK_EVENTS;
    this.listen();
  }

  private get state(): TaskState {
    return this.task.status.state;
  }

  /**
   * Turns until a terminal state (or a cancel), then the task's end. A cancel requested through Temporal (Temporal
   * UI's Request Cancellation: the workflow's root scope, which `main` is a child of) is an A2A cancel: the agent
   * told, the task ended `canceled`, recorded and settled; at level 4 the workflow then ends Canceled.
   */
  async run(): Promise<WireTask> {
    const root = CancellationScope.current();
    try {
      await this.main.run(() => this.converse());
    } catch (err) {
      if (!isCancellation(err)) throw err;
      await CancellationScope.nonCancellable(() => this.cancel(root.consideredCancelled)); // cleanup must finish even though this scope was canceled
    }
    if (!atLevel(this.input.patchLevel, 4)) {
      await this.finish();
      return this.task;
    }
    // The task's end runs to its end whatever is canceled meanwhile: it is recorded, settled and delivered once.
    await CancellationScope.nonCancellable(() => this.finish());
    if (root.consideredCancelled && this.state === 'TASK_STATE_CANCELED') {
      throw new CancelledFailure('A2A task canceled through Temporal (its workflow cancel request); recorded and settled');
    }
    return this.task;
  }

  // ---- handlers: what clients, the gateway and the activities send the task ----

  private listen(): void {
    const { job, push } = this;
    setHandler(childTaskSignal, (c) => {
      job.childChanged(c);
      this.showDetails();
    });
    job.show();
    setHandler(pushConfigSignal, (id) => push.watch(id));
    for (const id of this.input.carry?.pushConfigIds ?? []) push.watch(id);
    setHandler(getTaskQuery, (historyLength?: number) => viewTask(this.task, historyLength));
    setHandler(agentTaskSignal, (ref) => this.knowAgentTask(ref));
    setHandler(agentTaskQuery, () => (this.agentTaskId ? { agentTaskId: this.agentTaskId, agentContextId: this.agentContextId } : undefined));
    setHandler(sendMessageUpdate, (m) => this.onMessage(m), {
      validator: ({ message }) => {
        const refusal = refuseMessage(this.task, this.state === 'TASK_STATE_SUBMITTED' && this.turnsAccepted === 0, message.contextId);
        if (refusal) throw ApplicationFailure.create({ ...refusal, nonRetryable: true });
      },
    });
    setHandler(cancelUpdate, () => this.onCancel(), {
      validator: () => {
        const refusal = refuseCancel(this.task);
        if (refusal) throw ApplicationFailure.create({ ...refusal, nonRetryable: true });
      },
    });
  }

  /** A client's message: queued for the next turn; a blocking sender is answered when its turn ends. */
  private async onMessage({ message, returnImmediately, historyLength, pushConfigIds, metadata }: SendMessageArgs): Promise<WireTask> {
    if (this.firstLook && this.turnsAccepted > 0) await this.afterFirstLook(() => refuseMessage(this.task, false, message.contextId));
    const turn = ++this.turnsAccepted;
    for (const id of pushConfigIds ?? []) this.push.watch(id);
    const own = { ...message, taskId: this.task.id, contextId: this.task.contextId };
    this.task.history = [...(this.task.history ?? []), own];
    this.inbox.push({ message: own, blocking: !returnImmediately, ...(metadata ? { metadata } : {}) });
    if (this.state !== 'TASK_STATE_SUBMITTED') this.setStatus('TASK_STATE_WORKING');
    // The first message is answered only once its hold is decided, so a client without the funds gets an
    // error instead of a task (the task itself ends rejected, and is settled like any other).
    // (Each condition costs the activation one more pass into the workflow sandbox: only wait when needed.) The
    // waits are not canceled by the workflow's cancel: the sender is answered with the task it ends as.
    if (this.funding.pending) await CancellationScope.nonCancellable(() => condition(() => !this.funding.pending || isTerminal(this.state)));
    const refusal = this.funding.refusal();
    if (refusal) throw refusal;
    if (!returnImmediately) await CancellationScope.nonCancellable(() => condition(() => this.turnsDone >= turn || isTerminal(this.state)));
    // The agent refused the turn (a new task's, or a follow-up's) with a JSON-RPC error: its client gets that error
    // (code and message), as it would calling the agent itself; the task has ended failed, saying the same.
    if (this.turnError?.turn === turn) {
      const e = this.turnError.error;
      throw ApplicationFailure.create({ type: FailureTypes.AgentError, message: e.message, details: [e], nonRetryable: true });
    }
    return viewTask(this.task, historyLength);
  }

  /** A client's cancel (A2A CancelTask): the turns' scope canceled, answered once the task has ended. */
  private async onCancel(): Promise<WireTask> {
    if (this.firstLook) await this.afterFirstLook(() => refuseCancel(this.task));
    if (!isTerminal(this.state)) {
      this.main.cancel();
      void this.job.cancelChildren();
      await CancellationScope.nonCancellable(() => condition(() => isTerminal(this.state)));
    }
    return viewTask(this.task);
  }

  /** A call on a rerun of the first workflow task (firstLook): it waits for the first exchange, then is refused as it would be after it. */
  private async afterFirstLook(refusalOf: () => ReturnType<typeof refuseCancel>): Promise<void> {
    await condition(() => !this.firstLook);
    const refusal = refusalOf();
    if (refusal) throw ApplicationFailure.create({ ...refusal, nonRetryable: true });
  }

  private knowAgentTask(ref: AgentTaskRef): void {
    this.agentTaskId = ref.agentTaskId;
    this.agentContextId = ref.agentContextId ?? this.agentContextId;
  }

  // ---- the state machine: turns, cancel, finish ----

  /** One turn after another: wait for a message, call the agent, record what it said; until the task is terminal. */
  private async converse(): Promise<void> {
    for (;;) {
      if (this.inbox.length === 0) {
        const arrived = await condition(() => this.inbox.length > 0, this.input.inputTimeoutMs);
        if (!arrived) {
          this.trustOutcome = 'expired';
          const why = `No message arrived within ${humanDuration(this.input.inputTimeoutMs)} while the task was ${stateLabel(this.state)}; the task expired`;
          this.setStatus('TASK_STATE_FAILED', this.gatewayMessage(why));
          return;
        }
      }
      const { message, blocking, metadata } = this.inbox.shift()!;
      const leftRunning = await this.turn(message, blocking, metadata);
      this.firstLook = false;
      this.turnsDone++;
      // The turn's last attempt was lost (its worker died: a timeout; or a retryable failure ran out of attempts)
      // with the agent's task running: canceled there, as the activity does with a task it gives up on, so runs do
      // not pile up at the agent. The client has its answer already (this activation completes its update).
      if (leftRunning) await cancelLeftRunning(this.input.agent, this.input.tenant, leftRunning);
      if (isTerminal(this.state)) return;
      await this.record();
      if (workflowInfo().continueAsNewSuggested) await this.continueAsNew();
    }
  }

  /**
   * One turn: the task funded (first turn), its `working` change, the agent called, its answer applied. Ends with the
   * task's new state set, not recorded. @returns the agent's task a failed turn left running there.
   */
  private async turn(message: WireMessage, blocking: boolean, metadata?: Record<string, unknown>): Promise<string | undefined> {
    const { input } = this;
    // Dequeued past its ttl (Date.now() is when this workflow task runs): not delivered, and not held against
    // the agent, which never saw it.
    if (!input.carry && this.turnsDone === 0 && input.expiresAt !== undefined && Date.now() >= input.expiresAt) {
      this.trustOutcome = 'expired';
      const why = `The envelope's ttl passed ${Date.now() - input.expiresAt} ms before the task left the queue; it was not delivered to the agent`;
      this.setStatus('TASK_STATE_REJECTED', this.gatewayMessage(why));
      return;
    }
    if (this.funding.pending) {
      const declined = await this.funding.reserve();
      if (declined !== undefined) {
        this.trustOutcome = 'unfunded';
        this.setStatus('TASK_STATE_REJECTED', this.gatewayMessage(declined));
        return;
      }
    }
    // A first exchange that answers ends the turn in this workflow task: only the answer's state is shown.
    this.shown.holdBack(this.runsFirstExchange(blocking));
    this.setStatus('TASK_STATE_WORKING');
    // Logged first, so it precedes everything the agent streams: a snapshot for a follow-up turn; for the first, a
    // status update (the gateway logged the submitted task as event 1). A fresh task's first turn has the forwarding
    // activity write it, while it calls the agent: one local activity fewer. (A snapshot, the whole task, is not put
    // in the activity's input, which history keeps.)
    const start = this.nextRecord(this.version > 0);
    const startByForwarding = start.version === 1 && !isHubAgent(input.agent);
    if (startByForwarding) this.logged = Math.max(this.logged, start.version); // push loops follow the log's live tail from here
    else await this.write(start);
    const outcome = await this.forward({ message, ...(metadata ? { metadata } : {}) }, startByForwarding ? start : undefined, blocking);
    // The client canceled while the agent's answer was on its way, and the agent's task failed (often because the
    // cancel reached its own child tasks first): the client's cancel wins, as it does over a failed call. The
    // agent's task has ended, so it is not asked to cancel. A completed task stands: the work was done.
    if (!('failure' in outcome) && this.main.consideredCancelled && FAILED_AT_AGENT.includes(outcome.state) && !this.firstEnd?.settled) {
      this.agentTaskEnded = true;
      throw new CancelledFailure(`canceled while the agent's task ended ${stateLabel(outcome.state)}`);
    }
    if ('failure' in outcome) {
      this.setStatus('TASK_STATE_FAILED', this.gatewayMessage(`The agent could not complete the task: ${outcome.failure}`));
      return outcome.leftRunning;
    }
    this.apply(outcome);
    return undefined;
  }

  /**
   * A canceled task: its open children canceled, the agent told, the task ended `canceled` saying what happened and
   * who asked: a CancelTask call, or a cancel request on the workflow (`fromTemporal`: Temporal UI, the CLI).
   */
  private async cancel(fromTemporal: boolean): Promise<void> {
    const { agent, tenant } = this.input;
    let note = fromTemporal ? 'Canceled from Temporal (a cancel request on its workflow, e.g. Temporal UI)' : 'Canceled by the client';
    const canceledChildren = await this.job.cancelChildren();
    if (canceledChildren) note += `; ${canceledChildren} child task(s) canceled`;
    // Level 6: a 0.1 or NEXUS agent's task id is the gateway's, known before its first answer (a blocking first call).
    const agentTaskId = this.agentTaskId ?? (atLevel(this.input.patchLevel, 6) && agentTaskIsGatewayTask(agent.endpoint) ? this.task.id : undefined);
    note += await cancelAtAgent(agent, tenant, this.task.id, this.agentTaskEnded ? undefined : agentTaskId);
    this.setStatus('TASK_STATE_CANCELED', this.gatewayMessage(note));
  }

  /**
   * The terminal task's end, the one place it is settled: its children's links and ends awaited, the final record
   * and the settlement written (one local activity), the parent told, webhooks delivered, and the workflow ended as
   * the task did (Failed for a failed or rejected task).
   */
  private async finish(): Promise<void> {
    const { input, job } = this;
    // (Level 5 counts the children in finishTask's statement instead: settle().)
    const end = this.firstEnd;
    if (end?.inWorkflowTask && end.childrenLinked > job.children.length) await this.childLinks(end.childrenLinked);
    const ownCostMinor = ownCostOf(this.state, this.costMinor, input.agent.priceMinor, this.funding.heldMinor);
    // The steps below that most tasks skip are not called then: the SDK captures a stack trace for every promise a
    // workflow makes (for Temporal UI's Stack Trace), and an async call that returns at once still makes some. Each
    // skipped one would resolve at once, so the workflow's commands are the same either way.
    if (job.children.length > 0) await job.childrenSettled();
    job.show(ownCostMinor);
    if (end?.settled) this.logged = Math.max(this.logged, ++this.version); // the first exchange wrote it (levels 3, 7)
    else await CancellationScope.nonCancellable(() => this.settle(ownCostMinor));
    if (this.firstEnd?.inWorkflowTask) await this.endsInOwnWorkflowTask();
    if (input.parentTaskId) await job.reportToParent(this.state, ownCostMinor);
    // The task is over; its webhooks still get every event (retried for up to a day).
    if (this.push.watching) await this.push.finished();
    if (!allHandlersFinished()) await condition(allHandlersFinished);
    // Operators read Temporal's execution status first: a task that failed, or that was rejected, ends its workflow
    // as Failed (settled and recorded like any other; the failure carries the task). Completed and canceled tasks
    // complete it. A2ATaskState names the exact state either way.
    const ending = this.state;
    if (ending === 'TASK_STATE_FAILED' || ending === 'TASK_STATE_REJECTED') {
      const m = this.task.status.message;
      throw ApplicationFailure.create({
        type: ending === 'TASK_STATE_FAILED' ? 'A2ATaskFailed' : 'A2ATaskRejected',
        message: `A2A task ${stateLabel(ending)}${m ? `: ${textOf(m)}` : ''}`,
        nonRetryable: true,
        details: [this.task],
      });
    }
  }

  /**
   * The final state and the settlement, in one local activity (one transaction). Level 5: with the events the first
   * exchange held back, and, when it answered terminal in this workflow task, the child tasks counted in the same
   * statement: one the workflow has not heard of yet holds the record and the settlement back (only the events are
   * logged), and the workflow waits for the links (childLinks) and the children's ends before it finishes again.
   */
  private async settle(ownCostMinor: number): Promise<void> {
    const settlement = settlementOf(this.recordBase(), this.task, {
      requester: this.input.requester,
      amountMinor: ownCostMinor,
      outcome: this.trustOutcome,
      endedAt: this.task.status.timestamp ?? new Date().toISOString(),
    });
    if (atLevel(this.input.patchLevel, 5)) await this.finishCounting(ownCostMinor, settlement);
    else await bookkeeping.finishTask(this.nextRecord(), settlement);
    this.logged = Math.max(this.logged, this.version);
  }

  /** Level 5's finishTask: the held-back events and the children's count in its statement (see settle). */
  private async finishCounting(ownCostMinor: number, settlement: SettlementRequest): Promise<void> {
    const { job } = this;
    const end = this.firstEnd;
    const count = end?.inWorkflowTask && end.countAtFinish;
    const opts = { ...(end?.relayed ? { relayed: end.relayed } : {}), ...(count ? { knownChildren: job.children.length } : {}) };
    const done = await bookkeeping.finishTask(this.nextRecord(), settlement, opts);
    if (end) end.relayed = undefined; // logged
    if (done.childrenLinked === undefined) return;
    this.version--; // not written: the next record takes its version
    await this.childLinks(done.childrenLinked);
    if (job.children.length > 0) await job.childrenSettled();
    job.show(ownCostMinor);
    await bookkeeping.finishTask(this.nextRecord(), settlement);
  }

  /**
   * The agent started child tasks the workflow has not heard of yet: their links (signals) come in a later workflow
   * task, and their costs belong in the settlement. Level 4 waits for the links themselves; level 3 waited a timer.
   */
  private async childLinks(linkedInPostgres: number): Promise<void> {
    const linked = () => this.job.children.length >= linkedInPostgres;
    if (atLevel(this.input.patchLevel, 4)) await condition(linked, CHILD_LINKS_WAIT);
    else await sleep(1);
    if (this.firstEnd) this.firstEnd.inWorkflowTask = false;
  }

  /**
   * Ends the workflow task that ran the first exchange before the workflow completes or continues as new (see
   * FirstEnd.inWorkflowTask): a durable timer is the one command that ends a workflow task and nothing else.
   */
  private async endsInOwnWorkflowTask(): Promise<void> {
    await sleep(1);
    if (this.firstEnd) this.firstEnd.inWorkflowTask = false;
  }

  private async continueAsNew(): Promise<never> {
    await condition(allHandlersFinished);
    if (this.firstEnd?.inWorkflowTask) await this.endsInOwnWorkflowTask();
    await this.push.stop(); // the next run starts them again; each resumes at its cursor
    const { task, agentTaskId, agentContextId, version, costMinor, createdAt, funding, job } = this;
    return continueAsNew<typeof taskWorkflow>({
      ...this.input,
      carry: {
        task, agentTaskId, agentContextId, version, costMinor, createdAt, pushConfigIds: this.push.configIds(), funded: true,
        heldMinor: funding.heldMinor, children: job.children,
      },
    });
  }

  // ---- calling the agent ----

  /**
   * The turn's outcome from the agent. A turn lost to Switchboard itself (PostgreSQL refused its writes, or its
   * attempts ran out to restarts: failures.ts) is not the agent's failure: it runs again after a pause, re-attaching.
   */
  private async forward(message: TurnMessage, start: TaskRecord | undefined, blocking: boolean): Promise<Outcome> {
    this.firstEnd = undefined;
    let lost = 0;
    for (;;) {
      const outcome = await this.forwardOnce(message, start, blocking, lost > 0);
      if (!('lostToSwitchboard' in outcome)) return outcome;
      await sleep(Math.min(DATABASE_RETRY_FIRST_MS * 2 ** lost++, DATABASE_RETRY_MAX_MS));
    }
  }

  private async forwardOnce(message: TurnMessage, start: TaskRecord | undefined, blocking: boolean, again: boolean): Promise<Outcome | { lostToSwitchboard: true }> {
    const { agent, tenant } = this.input;
    const { agentTaskId, agentContextId } = this;
    const { forwarding, laterAttempts } = this.forwarding;
    try {
      const args = {
        ...(start ? { record: start } : {}),
        endpoint: agent.endpoint,
        // The message, and its request's metadata when it had any (absent, the activity's input is as it always was).
        ...message,
        agentTaskId,
        agentContextId,
        tenant,
        agentId: agent.agentId,
        gatewayTaskId: this.task.id,
        gatewayContextId: this.task.contextId,
        retry: agent.retry,
      };
      // A hub agent's turn goes to the process holding its socket (workflows/hub.ts); every other agent is called over HTTP/gRPC.
      if (isHubAgent(agent)) return await forwardThroughHub(agent, args, NON_RETRYABLE_FORWARD_ERRORS);
      if (again) return await forwarding.forwardMessage({ ...args, ...(agentTaskId ? { attach: { agentTaskId, ...(agentContextId ? { agentContextId } : {}) } } : {}) });
      // A client waiting for the turn's end: its first exchange runs in this workflow task (no activity task and no
      // workflow task more for an agent that answers at once); the activity takes over what remains.
      const first = this.runsFirstExchange(blocking) ? await this.firstExchange(firstExchangeArgs(args, this.input.patchLevel, this.settleAtAnswer(start))) : undefined;
      this.firstLook = false;
      // An answer's state is shown as it is applied, `working` never; a turn that goes on shows `working` now.
      const answered = first !== undefined && 'answer' in first;
      this.shown.release(!answered);
      if (answered) return first.answer;
      const failedFirst = first !== undefined && 'failed' in first;
      const activity = failedFirst ? laterAttempts : forwarding;
      // (`record` again: the first exchange may have handed over before its write committed; a written one is a no-op.)
      return await activity.forwardMessage({ ...args, ...(first && 'handOver' in first ? first.handOver : {}), ...(failedFirst ? { attemptsBefore: 1 } : {}) });
    } catch (err) {
      this.shown.release(false); // the state the turn ends in is shown (canceled, failed), never `working`
      if (isCancellation(err)) throw err;
      if (!this.main.consideredCancelled && (lostToDatabase(err) || (!isHubAgent(agent) && lostToRestarts(err)))) {
        const beat = leftRunningAtAgent(err, this.agentTaskId); // a dead worker's last heartbeat names the agent's task
        if (beat) this.knowAgentTask({ agentTaskId: beat });
        return { lostToSwitchboard: true };
      }
      // The client canceled, and the call ended otherwise before it saw the cancel: above all, its worker died
      // first, so the attempt timed out (a timed-out attempt whose cancel was requested is not retried). The
      // client's cancel wins: the task ends canceled, not failed (found by `npm run cluster`).
      if (this.main.consideredCancelled) throw new CancelledFailure(`canceled while the agent call ended: ${describeFailure(err)}`);
      if (isTimeout(err)) this.trustOutcome = 'timeout';
      const agentError = agentErrorOf(err);
      if (agentError) this.turnError = { turn: this.turnsDone + 1, error: agentError };
      return { failure: describeFailure(err), leftRunning: isHubAgent(agent) ? undefined : leftRunningAtAgent(err, this.agentTaskId) };
    }
  }

  /**
   * The first exchange: the agent's answer; or the turn to hand to the activity, with the task the agent named
   * (which a cancel then reaches); or, when it failed as the activity's first attempt could (retrying may help),
   * `failed`, after the policy's first interval. A failure that retrying cannot help ends the turn, as the
   * activity's would; so does a retryable one when the policy allows one attempt.
   */
  private async firstExchange(args: FirstExchangeArgs): Promise<{ answer: ForwardResult & FirstAnswer } | { handOver: { attach?: AgentTaskRef; adopt?: string } } | { failed: true }> {
    let first: FirstExchange;
    try {
      first = await firstExchanges.forwardFirstExchange(args);
    } catch (err) {
      if (isCancellation(err)) throw err;
      await this.retryFirstExchange(err);
      return { failed: true };
    }
    if (!('handoff' in first)) {
      this.firstEnd = firstEndOf(first, args, this.input.patchLevel);
      return { answer: first };
    }
    if (first.handoff) this.knowAgentTask(first.handoff);
    return { handOver: { ...(first.handoff ? { attach: first.handoff } : {}), ...(first.adopt ? { adopt: first.adopt } : {}) } };
  }

  /** A failed first exchange: rethrown unless retrying may help; else the pause before the activity's next attempt. */
  private async retryFirstExchange(err: unknown): Promise<void> {
    const delay = firstRetryDelay(err, this.input.agent.retry);
    if (delay === undefined) throw err;
    this.shown.release(true); // before the backoff ends this workflow task
    await sleep(delay);
  }

  /** A fresh task's first turn, nothing else queued and no cancel: the terms its first exchange may settle it on. */
  private settleAtAnswer(start: TaskRecord | undefined): SettleAtAnswer | undefined {
    const { input, funding, job } = this;
    if (!start || this.inbox.length > 0 || this.main.consideredCancelled) return undefined;
    const settle = { requester: input.requester, priceMinor: input.agent.priceMinor, heldMinor: funding.heldMinor, knownChildren: job.children.length };
    return this.firstLook ? { ...settle, again: true } : settle;
  }

  /** Whether a turn's first exchange runs as a local activity (a hub agent's turn never gets this far). */
  private runsFirstExchange(blocking: boolean): boolean {
    const { agent } = this.input;
    return !isHubAgent(agent) && blocking && !followsByPush(agent.endpoint);
  }

  private apply(r: ForwardResult & FirstAnswer): void {
    this.agentTaskId = r.agentTaskId ?? this.agentTaskId;
    this.agentContextId = r.agentContextId ?? this.agentContextId;
    if (r.costMinor !== undefined) this.costMinor = r.costMinor;
    takeAnswer(this.task, r);
    this.setStatus(r.state, r.statusMessage, r.finish?.at); // (`finish`: a first exchange that finished the task)
  }

  // ---- the task's record ----

  private setStatus(next: TaskState, message?: WireMessage, at = new Date().toISOString()): void {
    if (isTerminal(this.state)) return; // exactly one terminal state, whatever races
    this.task.status = statusOf(next, at, message);
    this.shown.state();
    this.showDetails();
  }

  private showDetails(): void {
    this.shown.details(this.push, this.job);
  }

  /**
   * Writes the projection and logs the change as the task's next event: a whole-task snapshot when a turn
   * starts (a stream of that turn begins with it), a status update otherwise.
   */
  private async record(snapshot = false): Promise<void> {
    await this.write(this.nextRecord(snapshot));
  }

  private async write(rec: TaskRecord): Promise<void> {
    await bookkeeping.recordTask(rec);
    this.logged = Math.max(this.logged, rec.version);
  }

  /** The task's next version, as the projection row and the event log get it. */
  private nextRecord(snapshot = false): TaskRecord {
    return recordOf(this.recordBase(), this.task, ++this.version, snapshot);
  }

  private recordBase(): Omit<TaskRecord, 'task' | 'version' | 'event'> {
    const { tenant, agent, parentTaskId, depth } = this.input;
    return { tenant, agentId: agent.agentId, createdAt: this.createdAt, parentTaskId, depth };
  }

  private gatewayMessage(text: string): WireMessage {
    return { messageId: uuid4(), role: 'ROLE_AGENT', taskId: this.task.id, contextId: this.task.contextId, parts: [{ text }] };
  }
}
