/**
 * One turn with the agent (Turn): the send, then following the agent's task until it settles, over its stream
 * (re-attached with SubscribeToTask), by its push notifications, or by polling GetTask; each exchange within the
 * attempt timeout, failed exchanges retried with the policy's backoff. See activities/forward-message.ts.
 */
import { Message, SendMessageRequest, Task, type StreamResponse } from '@a2a-js/sdk';
import type { Client, RequestOptions } from '@a2a-js/sdk/client';
import { setTimeout as delay } from 'node:timers/promises';
import { ApplicationFailure, type Context } from '@temporalio/activity';
import { agentTaskQuery, agentTaskSignal } from '../../task/messages';
import { DEFAULT_RETRY, followsByPush, type AgentRetryPolicy, type AgentTaskRef, type ForwardResult } from '../../task/contracts';
import type { TaskState, WireMessage, WireTask } from '../../task/wire';
import { PARENT_TASK_HEADER, agentAnswered, agentClient, type AgentLink, type HttpTrace } from '../../src/core/agents/agent-client';
import type { EventSink } from '../../src/core/events/event-sink';
import { tasksStarted } from '../../src/core/metrics';
import { PushFollow, Wake } from '../push-follow';
import type { PushReach } from '../../src/core/push/push-reach';
import type { ForwardArgs, ForwardDeps } from './args';
import { classify, gaveUp, timedOut } from './classify';
import { Relay, StreamAccumulator, messageResult, taskResult } from './results';

const SETTLED = (s: TaskState) => s !== 'TASK_STATE_SUBMITTED' && s !== 'TASK_STATE_WORKING';
const INTERRUPTED = (s: TaskState) => s === 'TASK_STATE_INPUT_REQUIRED' || s === 'TASK_STATE_AUTH_REQUIRED';
/** Polling an agent's task: the first GetTask at once (an agent that works for milliseconds is done), then 250 ms doubling to 5 s. */
const POLL_FIRST_MS = 250;
const POLL_MAX_MS = 5_000;
/**
 * How long a stream that named the agent's task may take to settle before the workflow is told the task (a signal,
 * one more workflow task): an agent that answers at once costs no signal, its ids come back with the result. A
 * cancel meanwhile still tells the workflow first (forwardMessage's catch), and a later attempt finds the task in
 * the heartbeat details.
 */
const ANNOUNCE_AFTER_MS = POLL_FIRST_MS;
/** How long a canceled send still waits for the answer that names the agent's task, so the cancel can reach it. */
const CANCEL_GRACE_MS = 2_000;
/** The longest delay setTimeout keeps (2^31 - 1 ms, ~24.8 days). */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * What an attempt of a turn leaves in its heartbeat details for the next one: the agent's task, once the agent has
 * named it (the next attempt re-attaches to it), and how many attempts the agent itself failed (`agentFailures`:
 * the agent's `maxAttempts` counts those only, never an attempt Switchboard handed over or lost with its worker).
 */
export type TurnProgress = Partial<AgentTaskRef> & { agentFailures?: number };

/** The failure type of an attempt handed over because its worker is stopping (see Turn.handOff). */
export const HANDED_OVER = 'HandedOver';
/** How soon the attempt after a hand-over may start (on another worker, or this process once it is back). */
const HAND_OVER_RETRY_MS = 100;
/** How long a hand-over waits to tell the workflow the agent's task before it ends the attempt anyway. */
const HAND_OVER_ANNOUNCE_MS = 2_000;
/** Failures of the turn that are not the agent's, and so never count against its maxAttempts. */
const NOT_THE_AGENTS = ['DatabaseUnavailable', HANDED_OVER];

/** The link with its credential already being read: the first exchange takes that read, later ones read afresh (a 401 may have replaced an OAuth token). */
export function prefetched(link: AgentLink): AgentLink {
  if (!link.credentials) return link;
  const read = link.credentials;
  let first: Promise<Record<string, string>> | undefined = read();
  first.catch(() => undefined); // the first exchange gets the failure
  return {
    ...link,
    credentials: () => {
      const headers = first ?? read();
      first = undefined;
      return headers;
    },
  };
}

/** One turn with the agent: the send, then following the agent's task until it settles. */
export class Turn {
  readonly trace: HttpTrace = {};
  /** The agent's stream said `final: false` where the task became interrupted: it would have stayed open. */
  private keptOpen = false;
  /** The agent's task this turn runs as, once the agent has named it. */
  ref?: AgentTaskRef;
  /** Aborted when the attempt running the turn is canceled (after a hand-over: the adopting one), or the turn is stopped. */
  private readonly canceled = new AbortController();
  /** The task the first exchange told the workflow about when it handed the turn over. */
  private handedOver?: AgentTaskRef;
  /** The first exchange handed the turn over (it runs on, parked, until an attempt adopts it). */
  private parked = false;
  private readonly policy: Required<AgentRetryPolicy>;
  private readonly relay: Relay;
  private clients?: { calls: Client; streams: Client };
  private announcing?: Promise<void>;
  private announceTimer?: ReturnType<typeof setTimeout>;
  private heartbeatTimer?: ReturnType<typeof setTimeout>;
  /** A stream was re-attached (SubscribeToTask): the final artifacts are taken from the agent's finished task. */
  private reattached = false;
  /** The agent's pushes, when this turn is followed by them. */
  private readonly push?: PushFollow;
  /** A Genesis agent's recorded RESPONSEs, once the turn polls for one. */
  private responses?: { wake: Wake; stop: () => void };
  /** Resolves with the state of the agent's answer once it is in, before its last events are logged. */
  readonly answered: Promise<TaskState>;
  private answer!: (state: TaskState) => void;
  /** The turn's `working` change waits for the agent to name its task (startTurn): a Message answer logs none. */
  holdsStart = false;
  /** The attempts of this turn the agent failed, this one's included once it fails (TurnProgress). */
  private agentFailures: number;
  /** The worker is stopping (ForwardDeps.drain): the turn ends its attempt and leaves the agent's task to the next. */
  handingOver = false;
  private readonly onDrain = () => {
    this.handingOver = true;
    this.canceled.abort(new Error('Switchboard is stopping: the turn is handed over'));
  };

  constructor(
    private ctx: Context,
    private readonly deps: ForwardDeps,
    private readonly args: ForwardArgs,
    readonly sink: EventSink,
    /** Run by the turn's first exchange (a local activity: no heartbeats; the workflow learns the task from its result). */
    private firstExchange = false,
  ) {
    this.cancelWith(ctx);
    this.answered = new Promise((resolve) => (this.answer = resolve));
    this.policy = { ...DEFAULT_RETRY, ...args.retry };
    this.relay = new Relay(sink, args);
    // An earlier attempt's heartbeat names the task the agent already runs for this turn (or the first exchange did),
    // and how many attempts the agent failed so far (before the first heartbeat: the first exchange's, if it failed).
    const saved = ctx.info.heartbeatDetails as TurnProgress | undefined;
    if (saved?.agentTaskId) this.ref = { agentTaskId: saved.agentTaskId, ...(saved.agentContextId ? { agentContextId: saved.agentContextId } : {}) };
    else if (args.attach) this.ref = args.attach;
    this.agentFailures = typeof saved?.agentFailures === 'number' ? saved.agentFailures : (args.attemptsBefore ?? 0);
    if (deps.drain?.aborted) this.onDrain();
    else deps.drain?.addEventListener('abort', this.onDrain, { once: true });
    const base = deps.push?.baseUrl();
    const { workflowExecution, activityId, scheduledTimestampMs } = ctx.info;
    if (deps.push && base && workflowExecution && followsByPush(args.endpoint)) {
      // Every attempt of the turn makes the same URL and token: a re-attached attempt gets the pushes the agent
      // was told to send with the message.
      const turn = { ...workflowExecution, activityId, expiresAtMs: scheduledTimestampMs + this.policy.taskTimeoutMs };
      this.push = new PushFollow(deps.hub, deps.push, base, turn);
      const known = this.ref?.agentTaskId ?? args.agentTaskId;
      if (known) this.push.following(known);
    }
  }

  /** Heartbeats with the agent's task and the agent's failures as details (a retried attempt re-attaches to it). */
  heartbeat(): void {
    if (!this.firstExchange) this.ctx.heartbeat({ ...this.ref, agentFailures: this.agentFailures } satisfies TurnProgress);
  }

  /**
   * Counts a failure that retrying may help against the agent's maxAttempts, unless it is not the agent's (PostgreSQL,
   * a hand-over): the attempt that reaches maxAttempts fails for good. Temporal retries every other attempt with the
   * policy's backoff, however many times a worker stopped or died (workflows/task-options.ts forwardingFor).
   */
  counted(failure: ApplicationFailure): ApplicationFailure {
    if (failure.nonRetryable || NOT_THE_AGENTS.includes(failure.type ?? '')) return failure;
    const failures = ++this.agentFailures;
    if (failures < this.policy.maxAttempts) return failure;
    return ApplicationFailure.create({
      message: `${failure.message} (attempt ${failures} of ${this.policy.maxAttempts}: retry.maxAttempts reached)`,
      type: failure.type ?? undefined,
      nonRetryable: true,
      details: failure.details ?? undefined,
    });
  }

  /**
   * The worker is stopping: this attempt ends now and the next one (another worker, or this process once it is
   * back) carries the turn on. The heartbeat leaves it the agent's task, which it re-attaches to (SubscribeToTask or
   * GetTask, never a second send), and the workflow is told the task too (a first exchange has no heartbeat). An
   * agent that had not named its task yet is sent the message again, with the same messageId. Not the agent's
   * failure: not counted, nothing canceled at the agent.
   */
  async handOff(): Promise<ApplicationFailure> {
    this.heartbeat();
    let timer: ReturnType<typeof setTimeout> | undefined;
    // (A first exchange that has not handed over returns the task with its outcome: no signal needed.)
    const told = (!this.firstExchange || this.parked ? this.announce(true) : Promise.resolve()).catch(() => undefined);
    await Promise.race([told, new Promise((r) => (timer = setTimeout(r, HAND_OVER_ANNOUNCE_MS)))]);
    clearTimeout(timer);
    const where = this.ref ? `re-attaches to the agent's task ${this.ref.agentTaskId}` : 'sends the message again (the same messageId): the agent had not named its task';
    return ApplicationFailure.create({
      type: HANDED_OVER,
      message: `Switchboard is stopping: the turn is handed over; the next attempt ${where}`,
      nextRetryDelay: HAND_OVER_RETRY_MS,
    });
  }

  private cancelWith(ctx: Context): void {
    const cancel = () => this.canceled.abort(ctx.cancellationSignal.reason);
    if (ctx.cancellationSignal.aborted) cancel();
    else ctx.cancellationSignal.addEventListener('abort', cancel, { once: true });
  }

  /** The first exchange hands the turn over: the task the workflow will know from its result. */
  handOver(): AgentTaskRef | undefined {
    this.handedOver = this.ref;
    this.parked = true;
    return this.ref;
  }

  /**
   * The forwarding activity carries on the turn its first exchange handed over: its cancel, heartbeats and signals
   * from now on. A task the agent named after the hand-over is heartbeated and told to the workflow at once.
   */
  adopt(ctx: Context): void {
    this.ctx = ctx;
    this.firstExchange = false;
    this.cancelWith(ctx);
    if (this.ref) {
      this.heartbeat();
      void this.announce().catch(() => undefined);
    }
  }

  /** Stops a parked turn nobody adopted (see parkedTurns). */
  stop(why: string): void {
    this.canceled.abort(new Error(why));
    this.ended();
  }

  /**
   * Heartbeats unless the turn ends within ANNOUNCE_AFTER_MS. An attempt's completion waits for its heartbeat in
   * flight (about one round trip to Temporal), so an agent that answers at once would pay one for details that
   * only a later attempt reads, and its result carries them anyway. The interval heartbeat keeps the activity alive.
   */
  private heartbeatSoon(): void {
    this.heartbeatTimer ??= setTimeout(() => this.heartbeat(), ANNOUNCE_AFTER_MS);
  }

  /**
   * A first turn's retry without heartbeat details (its worker died before they were sent) asks the workflow,
   * which the earlier attempt told as soon as the agent named its task.
   */
  async resume(): Promise<void> {
    // (A first attempt adopting a turn its first exchange parked in another process: that exchange may have told it.)
    if (this.ref || (this.ctx.info.attempt === 1 && !this.args.adopt) || this.args.agentTaskId) return;
    const workflowId = this.ctx.info.workflowExecution?.workflowId;
    if (!workflowId) return;
    this.ref = await this.ctx.client.workflow.getHandle(workflowId).query(agentTaskQuery);
    this.heartbeat();
  }

  async run(): Promise<ForwardResult> {
    let task: WireTask | undefined;
    let broken: unknown;
    // Begun while its worker stops (a first exchange in the worker's last workflow task): the next attempt sends it.
    if (this.handingOver && !this.ref) throw this.canceled.signal.reason;
    if (!this.ref) {
      // Before the agent names its task a failure goes to Temporal's retries: there is nothing to re-attach to.
      const answer = await this.send();
      if ('messageId' in answer) {
        // No task at the agent: the task's held `working` change is not logged (startTurn), what was queued is.
        const held = this.holdsStart ? this.sink.take() : undefined;
        if (held?.events.length) this.sink.giveBack({ events: held.events });
        if (held?.first) tasksStarted.inc({ agent: this.args.record!.agentId }); // as logging the change would have
        const result = messageResult(answer, this.args);
        this.answer(result.state);
        return result;
      }
      ({ task, broken } = answer);
      if (this.canceled.signal.aborted) throw this.canceled.signal.reason; // finish() reports the cancel
    }
    task = await this.follow(task, broken);
    this.answer(task.status.state);
    this.ended(); // settled: the result carries the ids, no signal needed any more
    await this.announcing;
    // Artifacts that arrived whole (a task snapshot) or whose stream broke off are logged now; after a re-attached
    // stream, every artifact (its live events may have overlapped the snapshot it started with).
    await this.relay.remaining(task.artifacts ?? [], { all: this.reattached });
    const result = taskResult(task, this.args);
    return this.keptOpen && INTERRUPTED(task.status.state) ? { ...result, streamOpen: true } : result;
  }

  /**
   * Tells the workflow the agent's task (once), so a cancel during the call reaches it. `handingOver`: from a first
   * exchange too, whose next attempt asks the workflow for it (resume).
   */
  announce(handingOver = false): Promise<void> {
    const ref = this.ref;
    const workflowId = this.ctx.info.workflowExecution?.workflowId;
    // The workflow knows the task already: an earlier turn's, or the one the first exchange handed over; a first
    // exchange hands its task over with its result (a signal would come after it, in a workflow task of its own).
    const known = ref && [this.args.agentTaskId, this.args.attach?.agentTaskId, this.handedOver?.agentTaskId].includes(ref.agentTaskId);
    if (!ref || known || (this.firstExchange && !handingOver) || !workflowId) return Promise.resolve();
    this.announcing ??= this.ctx.client.workflow.getHandle(workflowId).signal(agentTaskSignal, ref);
    return this.announcing;
  }

  /** Announces the task unless the turn ends within ANNOUNCE_AFTER_MS (awaited at the end of run()). */
  private announceSoon(): void {
    this.announceTimer ??= setTimeout(() => void this.announce().catch(() => undefined), ANNOUNCE_AFTER_MS);
  }

  /** The turn is over: a pending announcement is not needed, nor pushes. */
  ended(): void {
    this.deps.drain?.removeEventListener('abort', this.onDrain);
    clearTimeout(this.announceTimer);
    clearTimeout(this.heartbeatTimer);
    this.push?.close();
    this.responses?.stop();
  }

  /** For a Genesis agent: wake-ups when its RESPONSE to envelope `id` is recorded (subscribed on the first look). */
  private answers(id: string): Wake | undefined {
    const genesis = this.deps.link.genesis;
    if (this.args.endpoint.protocolVersion !== 'genesis' || !genesis) return undefined;
    if (!this.responses) {
      const wake = new Wake();
      this.responses = { wake, stop: genesis.onResponse(id, () => wake.notice()) };
    }
    return this.responses.wake;
  }

  /** A turn given up on (not canceled: the workflow cancels then) leaves no run behind at the agent. */
  async abandon(failure: ApplicationFailure): Promise<void> {
    if (!this.ref || this.canceled.signal.aborted || !failure.nonRetryable) return;
    const id = this.ref.agentTaskId;
    const { calls } = await this.agent();
    await this.exchange('CancelTask', (o) => calls.cancelTask({ tenant: '', id, metadata: undefined }, o)).catch(() => undefined);
  }

  /**
   * Sends the message: as a stream to an agent that streams (its first event names the task), else non-blocking.
   * @returns the agent's message, or its task (and, when the stream broke after the task was named, why).
   */
  private async send(): Promise<WireMessage | { task?: WireTask; broken?: unknown }> {
    const { calls, streams } = await this.agent();
    const switchboard = { ...(this.args.message.metadata?.switchboard as object), taskId: this.args.gatewayTaskId };
    const request = SendMessageRequest.fromJSON({
      // The agent knows its task by its own ids, never by the gateway's.
      message: {
        ...this.args.message,
        taskId: this.args.agentTaskId,
        // Until the agent has named a context, the gateway task's (the client's contextId / sessionId when it
        // gave one) is the context.
        contextId: this.args.agentContextId ?? this.args.gatewayContextId,
        metadata: { ...this.args.message.metadata, switchboard },
      },
      configuration: {
        returnImmediately: !this.args.endpoint.streaming,
        // §1.12: the agent pushes the task's events to this URL with this token (the 0.3 transport sends it as
        // pushNotificationConfig); a follow-up turn's config replaces the previous one (the same config id).
        ...(this.push ? { taskPushNotificationConfig: this.push.config } : {}),
      },
      // The client request's metadata, as the request's (a 0.1 agent reads it as `params.metadata`).
      ...(this.args.metadata ? { metadata: this.args.metadata } : {}),
    });
    if (this.args.endpoint.streaming) {
      const acc = new StreamAccumulator();
      try {
        await this.consume('SendStreamingMessage', (o) => streams.sendMessageStream(request, o), acc, false);
      } catch (err) {
        if (!this.ref || this.canceled.signal.aborted) throw err;
        return { task: acc.task, broken: err }; // re-attached to below
      }
      if (acc.task) return { task: acc.task };
      return acc.message();
    }
    const reply = await this.exchange('SendMessage', (o) => calls.sendMessage(request, o), this.graceSignal());
    if ('messageId' in reply) return Message.toJSON(reply) as WireMessage;
    const task = Task.toJSON(reply) as WireTask;
    if (!SETTLED(task.status.state)) {
      this.named(task);
      await this.relay.progress(task);
      // Followed by push, the task is not read at once: the workflow is told it if it has not settled shortly.
      if (this.push) this.announceSoon();
    }
    return { task };
  }

  /**
   * Follows the agent's task until it settles: its stream (re-attached with SubscribeToTask), or GetTask polls.
   * A failed exchange is retried with the policy's attempts and backoff, counted afresh after each success.
   */
  private async follow(task: WireTask | undefined, broken?: unknown): Promise<WireTask> {
    const { calls, streams } = await this.agent();
    const id = this.ref?.agentTaskId ?? task?.id;
    if (!id) throw ApplicationFailure.nonRetryable('the agent named no task', 'InvalidAgentResponse');
    let subscribe = this.args.endpoint.streaming;
    let failures = 0;
    let polls = 0;
    let failed = broken;
    this.push?.following(id);
    this.answers(id); // subscribed before the first look: a RESPONSE recorded after it wakes the next one
    // Followed by push: the next GetTask waits for a push or the fallback poll, except right after a failed
    // exchange (its backoff was the wait) and when nothing has been read yet (a re-attached attempt looks at once).
    let immediate = task === undefined;
    // How the last GetTask came about, for a task followed by push: woken by a push, the fallback poll, or neither.
    let looked: 'push' | 'fallback' | 'other' = 'other';
    for (;;) {
      if (task && SETTLED(task.status.state)) {
        this.pushReached(looked);
        if (!this.reattached) return task;
        // A re-attached stream may repeat an event its first snapshot already holds (the agent's SDK attaches the
        // live events before it reads the task): the agent's own copy of the finished task is the one to keep.
        const settled = task;
        return this.exchange('GetTask', (o) => calls.getTask({ tenant: '', id }, o)).then(
          (t) => Task.toJSON(t) as WireTask,
          () => settled,
        );
      }
      if (failed !== undefined) {
        const failure = classify(failed, this.trace);
        const answered = agentAnswered(failed, this.trace);
        failed = undefined;
        if (subscribe && answered) {
          subscribe = false; // the agent cannot re-attach a stream (not supported, or the task ended meanwhile): poll
        } else {
          if (failure.nonRetryable || ++failures >= this.policy.maxAttempts) throw gaveUp(failure, id, failures);
          await delay(this.policy.initialIntervalMs * this.policy.backoffCoefficient ** (failures - 1), undefined, { signal: this.canceled.signal });
          immediate = true;
        }
      }
      this.checkDeadline();
      try {
        if (subscribe) {
          const acc = new StreamAccumulator();
          try {
            await this.consume('SubscribeToTask', (o) => streams.resubscribeTask({ tenant: '', id }, o), acc, true);
          } finally {
            // A stream that re-attached (its first event is the task) was a successful exchange, even if it broke
            // or went silent later: only the failures since then count.
            if (acc.task) (task = acc.task), (failures = 0), (this.reattached = true);
          }
          if (task && SETTLED(task.status.state)) continue;
          // The stream ended with the task still running: look, and re-attach after a pause.
        }
        const pollDelay = Math.min(POLL_FIRST_MS * 2 ** (polls - 1), POLL_MAX_MS);
        if (this.push) {
          // An agent whose pushes are lost is polled as if it did not push; a push still wakes the turn at once.
          const lost = this.reach()?.isLost(this.args.tenant, this.args.agentId!) ?? false;
          if (immediate || (lost && polls === 0)) looked = 'other';
          else looked = (await this.push.next(this.untilDeadline(lost ? pollDelay : this.push.fallbackPollMs), this.canceled.signal)) ? 'push' : lost ? 'other' : 'fallback';
          immediate = false;
        } else if (polls > 0) {
          // A Genesis agent's later RESPONSE is recorded by the gateway itself: that wakes the look at once.
          const answers = this.answers(id);
          if (answers) await answers.next(pollDelay, this.canceled.signal);
          else await delay(pollDelay, undefined, { signal: this.canceled.signal });
        }
        polls++;
        task = Task.toJSON(await this.exchange('GetTask', (o) => calls.getTask({ tenant: '', id }, o))) as WireTask;
        failures = 0;
        if (!SETTLED(task.status.state)) await Promise.all([this.named(task).announce(), this.relay.progress(task)]);
      } catch (err) {
        if (this.canceled.signal.aborted) throw err;
        failed = err;
      }
    }
  }

  /**
   * A task followed by push has settled: the agent's pushes arrive when a push woke the look that saw it, and are
   * lost when the fallback poll saw it first (PushReach: its next turns are polled).
   */
  private pushReached(looked: 'push' | 'fallback' | 'other'): void {
    const reach = this.push && this.reach();
    if (!reach || looked === 'other') return;
    if (looked === 'push') reach.arrived(this.args.tenant, this.args.agentId!);
    else reach.missed(this.args.tenant, this.args.agentId!);
  }

  /** Which agents' pushes reach this process, for a turn of a known agent. */
  private reach(): PushReach | undefined {
    return this.args.agentId ? this.deps.push?.reach : undefined;
  }

  /** `ms`, or less when the task's deadline comes sooner. */
  private untilDeadline(ms: number): number {
    return Math.max(0, Math.min(ms, this.ctx.info.scheduledTimestampMs + this.policy.taskTimeoutMs - Date.now() + 1));
  }

  /**
   * The agent's task has run past retry.taskTimeoutMs (counted from the turn's first attempt): the turn fails
   * (a final failure: follow() gives up on it at once, and the task is canceled at the agent).
   */
  private checkDeadline(): void {
    if (Date.now() <= this.ctx.info.scheduledTimestampMs + this.policy.taskTimeoutMs) return;
    const limit = this.policy.taskTimeoutMs;
    throw ApplicationFailure.nonRetryable(`the agent call timed out: the agent's task ran longer than retry.taskTimeoutMs (${limit} ms)`, 'AgentTimeout');
  }

  /**
   * Reads a stream into `acc`, relaying its events. Its first event must come within the attempt timeout; after
   * that, silence is bounded by the stream idle limit (the outbound body timeout: keep-alives count).
   */
  private async consume(
    what: string,
    open: (options: RequestOptions) => AsyncGenerator<StreamResponse>,
    acc: StreamAccumulator,
    snapshots: boolean,
  ): Promise<void> {
    const first = new AbortController();
    const timer = setTimeout(() => first.abort(), this.policy.attemptTimeoutMs);
    // A silent stream is cut at the task's deadline too (timers hold at most ~24.8 days: a longer one re-attaches then).
    const overdue = new AbortController();
    const left = this.ctx.info.scheduledTimestampMs + this.policy.taskTimeoutMs - Date.now();
    const deadline = setTimeout(() => overdue.abort(), Math.max(0, Math.min(left, MAX_TIMER_MS)));
    // The grace matters only until the agent names its task (a re-attach knows it: no listener per re-attach).
    const cancel = this.ref ? this.canceled.signal : this.graceSignal();
    // Closed once the agent's task is interrupted: an agent may keep its stream open then (below).
    const interrupted = new AbortController();
    this.trace.openAtInterruption = undefined;
    try {
      for await (const event of open({ signal: AbortSignal.any([first.signal, overdue.signal, cancel, interrupted.signal]) })) {
        clearTimeout(timer);
        this.checkDeadline();
        acc.add(event);
        if (acc.task && !this.ref) this.named(acc.task).announceSoon();
        if (snapshots && event.payload?.$case === 'task') await this.relay.snapshot(acc.task?.artifacts ?? []);
        else await this.relay.event(event);
        // Canceled: once the task is named the workflow passes the cancel on; nothing more to read.
        if (this.canceled.signal.aborted && this.ref) return;
        // input-required with the stream left open (the coding-agent seed: "Not final; stream stays open"): the
        // turn ends here for the client, and the answer goes to the same agent task as a new message.
        if (acc.task && INTERRUPTED(acc.task.status.state)) {
          // Its 0.x clients' streams stay open as the agent's would have (ForwardResult.streamOpen).
          this.keptOpen = this.trace.openAtInterruption === true;
          interrupted.abort(); // an agent that keeps the stream open gets it closed
          return;
        }
      }
    } catch (err) {
      if (this.canceled.signal.aborted) throw err;
      if (overdue.signal.aborted) {
        this.checkDeadline();
        throw ApplicationFailure.retryable(`${what}: the stream was open for ${MAX_TIMER_MS} ms; re-attaching`, 'AgentUnavailable');
      }
      if (first.signal.aborted) throw timedOut(what, this.policy.attemptTimeoutMs);
      throw err;
    } finally {
      clearTimeout(timer);
      clearTimeout(deadline);
    }
  }

  /** One request and its answer, within the attempt timeout. */
  private async exchange<T>(what: string, call: (options: RequestOptions) => Promise<T>, cancel = this.canceled.signal): Promise<T> {
    const deadline = AbortSignal.timeout(this.policy.attemptTimeoutMs);
    try {
      return await call({ signal: AbortSignal.any([deadline, cancel]) });
    } catch (err) {
      if (deadline.aborted && !this.canceled.signal.aborted) throw timedOut(what, this.policy.attemptTimeoutMs);
      throw err;
    }
  }

  /**
   * Aborts on the activity's cancel, but while the agent has not named its task only CANCEL_GRACE_MS later: the
   * answer that names it may still come, and the cancel then reaches the agent.
   */
  private graceSignal(): AbortSignal {
    const cancel = this.canceled.signal;
    const controller = new AbortController();
    const abort = () => controller.abort(cancel.reason);
    const onCancel = () => (this.ref ? abort() : setTimeout(abort, CANCEL_GRACE_MS).unref());
    if (cancel.aborted) onCancel();
    else cancel.addEventListener('abort', onCancel, { once: true });
    return controller.signal;
  }

  /** The agent has named its task: remembered in the heartbeat details (and the task's held `working` change logged). */
  private named(task: WireTask): this {
    if (this.holdsStart) this.sink.release();
    this.ref ??= { agentTaskId: task.id, agentContextId: task.contextId || undefined };
    this.heartbeatSoon();
    return this;
  }

  /**
   * The agent's clients: `calls` for single exchanges (each within the attempt timeout; gRPC deadline the same),
   * `streams` for streams (headers within the attempt timeout, then silence up to the idle limit; no deadline).
   */
  private async agent(): Promise<{ calls: Client; streams: Client }> {
    if (this.clients) return this.clients;
    const { attemptTimeoutMs, streamIdleTimeoutMs } = this.policy;
    // How the agent calls back: a task it starts through Switchboard with this id becomes this task's child.
    const headers = { [PARENT_TASK_HEADER]: this.args.gatewayTaskId };
    // Dialects where the client names tasks (0.1, NEXUS) send a new task under the gateway task's id.
    const newTaskId = this.args.gatewayTaskId;
    // undici's own timers a little later than the exchange's deadline, so a slow answer is named as one.
    const exchange = { headersTimeoutMs: attemptTimeoutMs + 1_000, bodyTimeoutMs: attemptTimeoutMs + 1_000 };
    const [calls, streams] = await Promise.all([
      agentClient(this.args.endpoint, this.deps.link, this.trace, { headers, callTimeoutMs: attemptTimeoutMs, timeouts: exchange, newTaskId }),
      agentClient(this.args.endpoint, this.deps.link, this.trace, {
        headers,
        newTaskId,
        timeouts: { headersTimeoutMs: exchange.headersTimeoutMs, bodyTimeoutMs: streamIdleTimeoutMs },
      }),
    ]);
    this.clients = { calls, streams };
    return this.clients;
  }
}
