/**
 * The forwarding activity: one client message to the agent, in the agent's dialect, until the agent's task is
 * terminal or interrupted. Every attempt sends the same messageId, so an agent that deduplicates sees one message.
 *
 * The agent's retry policy bounds each exchange with the agent (the send, a GetTask, a stream's first answer:
 * `retry.attemptTimeoutMs`), not the agent's work. The message goes as a stream to agents that stream, else as a
 * non-blocking send (1.0 `returnImmediately`, 0.3 `blocking: false`), so the agent names its task before the
 * gateway waits (a cancel can then reach it). From then on the activity follows that task for as long as it runs
 * (up to `retry.taskTimeoutMs`), heartbeating: over the stream, re-attached with SubscribeToTask when it breaks or
 * stays silent past `retry.streamIdleTimeoutMs`; else by the agent's push notifications when its card declares
 * them (the send carries a push config for Switchboard's webhook; a push that may settle the task wakes a GetTask,
 * and a slow poll covers lost pushes: activities/push-follow.ts); else by polling GetTask. A failed exchange is retried here with
 * the policy's attempts and backoff, and a later attempt of the activity (its worker died) re-attaches to the task
 * named in the heartbeat details (or, failing those, told to the workflow): the message is never sent twice to a
 * task the agent has named. A task the activity gives up on is canceled at the agent, so runs do not pile up there.
 * An agent that answers at once (a terminal task or a message) costs one exchange, as before.
 *
 * What the agent streams on the way (artifact chunks, progress) goes to the task's event log as it arrives,
 * not into workflow history: the result holds only the turn's outcome. A retried attempt first logs an event
 * that voids the previous attempt's partial output, so readers drop it instead of seeing it twice.
 */
import { A2AError, isJsonRpcError } from '@a2a-js/sdk/errors';
import { Message, SendMessageRequest, Task, TaskArtifactUpdateEvent, TaskStatusUpdateEvent, type StreamResponse } from '@a2a-js/sdk';
import type { Client, RequestOptions } from '@a2a-js/sdk/client';
import { setTimeout as delay } from 'node:timers/promises';
import { ApplicationFailure, Context } from '@temporalio/activity';
import { agentTaskQuery, agentTaskSignal } from '../task/messages';
import { DatabaseError, type Pool } from 'pg';
import { seqRangeOf } from '../src/events/event-log';
import { childTasksLinked } from '../src/db/task-store';
import { finishedFirstTurn, isTerminal } from '../task/rules';
import type { EventHub } from '../src/events/hub';
import { OutboundError } from '../src/http/outbound';
import { DEFAULT_RETRY } from '../src/agents/registry';
import { FIRST_EXCHANGE_MS, followsByPush, type AgentEndpoint, type AgentRetryPolicy, type AgentRpcError, type AgentTaskRef, type FirstAnswer, type FirstExchange, type ForwardResult, type SettlementRequest, type TaskRecord, type TurnFinish } from '../task/contracts';
import type { TaskState, WireArtifact, WireArtifactUpdate, WireMessage, WireStatusUpdate, WireTask } from '../task/wire';
import * as grpc from '@grpc/grpc-js';
import { PARENT_TASK_HEADER, agentAnswered, agentClient, type AgentLink, type HttpTrace } from '../src/agents/agent-client';
import { EventSink, writeFailed } from '../src/events/event-sink';
import { heldRows } from '../src/events/held-rows';
import type { NewEvent } from '../src/events/event-log';
import { costOf } from '../src/agents/agent-cost';
import { compactArtifact, withinBudget } from '../task/artifacts';
import { recordTask } from './bookkeeping';
import { tasksStarted } from '../src/metrics';
import { type AgentPushDeps, PushFollow } from './push-follow';
import type { PushReach } from '../src/push/push-reach';

export interface ForwardArgs {
  endpoint: AgentEndpoint;
  message: WireMessage;
  /** The agent's own ids for this conversation, once known (a follow-up continues the agent's task). */
  agentTaskId?: string;
  agentContextId?: string;
  tenant: string;
  /** The agent called: its outbound credential is looked up by (tenant, agentId) in the activity, never passed in. */
  agentId?: string;
  gatewayTaskId: string;
  gatewayContextId: string;
  /** The agent's retry policy (absent in workflows started before it was passed: the defaults). */
  retry?: AgentRetryPolicy;
  /**
   * The task's change that starts the turn (state working), written here instead of by a local activity of its own:
   * one workflow activation fewer per task. A first attempt writes it while it calls the agent (startTurn), a later
   * one before. Every attempt writes it (a no-op once written: its version and event key make it idempotent).
   */
  record?: TaskRecord;
  /**
   * The turn's message was delivered by its first exchange (forwardFirstExchange) and the agent runs it as this
   * task: the activity follows it instead of sending the message again.
   */
  attach?: AgentTaskRef;
  /** The first exchange's turn, parked in the process that ran it (its event-sink key): adopted when this attempt runs there. */
  adopt?: string;
  /** The turn's attempts made before this activity's first (the first exchange's, when it failed): for the retry count. */
  attemptsBefore?: number;
  /** A fresh task's first exchange finishes the task itself when the agent completes it at once (finishHere). */
  finish?: TurnFinish;
}

export interface ForwardDeps {
  /** The guarded transports, with this agent's credential. */
  link: AgentLink;
  pool: Pool;
  hub: EventHub;
  /** Following agents' tasks by their push notifications; unset: agents are polled. */
  push?: AgentPushDeps;
  /**
   * Logs a first turn's `working` change (when it was held back) and relayed events and, unless children were linked
   * meanwhile, writes the task's final record and its settlement, in one statement (bookkeeping.ts finishFirstTurn):
   * for a first exchange that finishes its task.
   */
  finishFirstTurn?: (rec: TaskRecord, req: SettlementRequest, relayed: NewEvent[], working?: TaskRecord) => Promise<{ childrenLinked: number }>;
}

/**
 * How long a first exchange that may finish its task holds its `working` change and the events its agent streams
 * (EventSink.hold), so that they go in the statement that finishes the task: readers of the log and the projection
 * see them that much later at most.
 */
const FINISH_HOLD_MS = 100;

/** The longest Retry-After an agent's answer may impose on the next attempt. */
const MAX_RETRY_AFTER_MS = 5 * 60_000;
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
const MAX_TIMER_MS = 2 ** 31 - 1;

export async function forwardMessage(deps: ForwardDeps, args: ForwardArgs): Promise<ForwardResult> {
  const ctx = Context.current();
  // The turn the first exchange handed over, still running in this process: this attempt carries it on.
  const parked = args.adopt && ctx.info.attempt === 1 ? parkedTurns.take(args.adopt) : undefined;
  if (parked) {
    parked.adopt(ctx);
    return finish(ctx, parked, parked.started);
  }
  const turn = startTurn(ctx, deps, args, false);
  return finish(ctx, turn, turn.started);
}

/**
 * A blocking turn's first exchange, run as a local activity in the workflow task that starts the turn: no activity
 * task to queue and no second workflow task for its result. It is the turn itself (the `working` change, the send,
 * following the agent's task) for up to FIRST_EXCHANGE_MS, so an agent that answers at once ends the turn here.
 * A turn still running then is handed over: it is parked in this process and the workflow schedules forwardMessage,
 * which carries it on when it runs here (`adopt`; with eager activity dispatch it does), or else follows the task
 * the agent named (`attach`), or sends the message again when the agent named none (the same messageId). While
 * this runs the workflow can take no cancel and answer no query: hence the short limit. (The workflow sends agents
 * followed by push to the activity directly: the pushes are addressed to it.) A failure is the turn's first
 * attempt: the workflow makes the others with forwardMessage, by the agent's policy. A fresh task the agent
 * completes at once is finished here too (finishHere): the whole task is then one local activity.
 */
export async function forwardFirstExchange(deps: ForwardDeps, args: ForwardArgs): Promise<FirstExchange> {
  const ctx = Context.current();
  // A completed answer may finish the task here (finishHere), with the turn's `working` change and its relayed events
  // in the same statement: the sink holds them meanwhile. Any other answer's are logged as the turn ends.
  const turn = startTurn(ctx, deps, args, true, finishable(deps, args) && ctx.info.attempt === 1 ? FINISH_HOLD_MS : undefined);
  try {
    return await firstExchange(ctx, deps, args, turn);
  } finally {
    turn.forgetHeldRow();
  }
}

async function firstExchange(ctx: Context, deps: ForwardDeps, args: ForwardArgs, turn: StartedTurn): Promise<FirstExchange> {
  const finishing = (state: TaskState) => state === 'TASK_STATE_COMPLETED' && finishable(deps, args);
  // The workflow settles a terminal answer at once: it must know of the child tasks the agent started meanwhile.
  // They are counted as soon as the answer is in, while the turn's last events are being logged (finishHere counts
  // them in its own statement).
  let waiting = true; // false once the turn is handed over: its activity reports the answer then
  const children = turn.answered.then((state) =>
    waiting && isTerminal(state) && !finishing(state) ? childTasksLinked(deps.pool, args.tenant, args.gatewayTaskId) : undefined,
  );
  children.catch(() => undefined); // awaited below when the turn ends here
  let timer: ReturnType<typeof setTimeout> | undefined;
  const ran = await Promise.race([
    turn.started.then(
      () => 'settled',
      () => 'settled',
    ),
    new Promise<'running'>((resolve) => (timer = setTimeout(resolve, FIRST_EXCHANGE_MS, 'running'))),
  ]);
  clearTimeout(timer);
  if (ran === 'settled') {
    let result: ForwardResult;
    try {
      const logged = turn.started.then(async (r) => {
        if (!finishing(r.state)) await turn.sink.flush();
        return r;
      });
      result = await finish(ctx, turn, logged, false);
    } catch (err) {
      if (!(err instanceof ApplicationFailure) || err.nonRetryable) throw err;
      // A failure retrying may help, with the agent's task named: the activity follows that task (a local activity
      // has no heartbeat details for its next attempt to re-attach with).
      if (turn.ref) return { handoff: turn.ref, why: `the first exchange failed: ${err.message}` };
      // A local activity's failure reaches the workflow without its nextRetryDelay: the agent's Retry-After goes in the details.
      if (typeof err.nextRetryDelay === 'number') throw ApplicationFailure.create({ message: err.message, type: err.type ?? undefined, details: [{ retryAfterMs: err.nextRetryDelay }] });
      throw err;
    }
    if (!isTerminal(result.state)) return result;
    if (finishing(result.state)) {
      const finished = await finishHere(ctx, deps, args, turn, result);
      return 'handoff' in finished ? finished : { ...result, ...finished };
    }
    const childrenLinked = (await children) ?? (await childTasksLinked(deps.pool, args.tenant, args.gatewayTaskId));
    return { ...result, childrenLinked };
  }
  waiting = false;
  const key = turn.sink.keyPrefix;
  parkedTurns.park(key, turn);
  return { handoff: turn.handOver() ?? null, why: `still running after ${FIRST_EXCHANGE_MS} ms`, adopt: key };
}

/** A first exchange that hands its turn over to the forwarding activity. */
type HandOff = Extract<FirstExchange, { handoff: unknown }>;

/** Whether a first exchange may finish its task: a fresh task (`args.finish`), and the statement to do it with. */
function finishable(deps: ForwardDeps, args: ForwardArgs): boolean {
  return Boolean(args.finish && args.record && deps.finishFirstTurn);
}

/**
 * A fresh task that the agent completed at once is finished by its first exchange (`args.finish`): the turn's relayed
 * events, then the final record and the settlement the workflow would write next (task-state.ts finishedFirstTurn,
 * the workflow's own steps), in one statement, so the workflow task that took the message costs one local activity
 * and one activation fewer, and the task one statement. The statement counts the child tasks the agent started
 * meanwhile too: with any, it logs the events only, and the workflow finishes the task. Only a completed task: a
 * client's cancel, which the workflow reads only once this has returned, may turn a failed answer into a canceled
 * task, never a completed one. A statement that failed leaves the record and the settlement to the workflow (its
 * retried local activity; both are idempotent), never a reason to call the agent again: the events are logged as
 * usual, and the children counted.
 */
async function finishHere(ctx: Context, deps: ForwardDeps, args: ForwardArgs, turn: Turn, answer: ForwardResult): Promise<FirstAnswer | HandOff> {
  const at = new Date().toISOString();
  const { record, settlement } = finishedFirstTurn(args.record!, answer, at, args.finish!);
  try {
    // Held while the turn ran, with the `working` change; one that outlived the hold has logged them (they must
    // precede the final state).
    const held = turn.sink.take() ?? (await turn.sink.flush(), { events: [] });
    try {
      const working = held.first ? args.record : undefined;
      const { childrenLinked } = await deps.finishFirstTurn!(record, settlement, held.events, working);
      return { childrenLinked, ...(childrenLinked === 0 ? { finish: { at, written: true } } : {}) };
    } catch (err) {
      ctx.log.warn('the first exchange could not finish the task; the workflow finishes it', { taskId: args.gatewayTaskId, error: String(err) });
      turn.sink.giveBack(held);
    }
    await turn.sink.flush();
    const childrenLinked = await childTasksLinked(deps.pool, args.tenant, args.gatewayTaskId);
    return { childrenLinked, ...(childrenLinked === 0 ? { finish: { at, written: false } } : {}) };
  } catch (err) {
    // The agent's answer is in but could not be logged: the activity reads the agent's task again and logs it then.
    const failure = writeFailed("the agent's answer could not be logged", err);
    if (turn.ref) return { handoff: turn.ref, why: `the first exchange failed: ${failure.message}` };
    throw failure;
  }
}

/**
 * Turns the first exchange handed over, by its event-sink key, until forwardMessage adopts them. One not adopted
 * within PARKED_MS (the activity ran in another process, or never: the task was canceled) is stopped: its activity
 * follows the agent's task on its own.
 */
const PARKED_MS = 60_000;
const parkedTurns = {
  turns: new Map<string, { turn: StartedTurn; timer: ReturnType<typeof setTimeout> }>(),
  park(key: string, turn: StartedTurn): void {
    const timer = setTimeout(() => {
      this.turns.delete(key);
      turn.stop('not adopted: its activity ran elsewhere, or not at all');
    }, PARKED_MS);
    timer.unref();
    turn.started.catch(() => undefined); // its failure is the adopting attempt's
    this.turns.set(key, { turn, timer });
  },
  take(key: string): StartedTurn | undefined {
    const parked = this.turns.get(key);
    if (!parked) return undefined;
    this.turns.delete(key);
    clearTimeout(parked.timer);
    return parked.turn;
  },
};

/**
 * A turn begun: its `working` change written (on a first attempt, while the agent is called; held back with `holdMs`),
 * an earlier attempt's output voided, the agent called (`started`).
 */
type StartedTurn = Turn & { started: Promise<ForwardResult> };

function startTurn(ctx: Context, deps: ForwardDeps, args: ForwardArgs, firstExchange: boolean, holdMs?: number): StartedTurn {
  const { workflowExecution, activityId, attempt } = ctx.info;
  const attemptKey = (n: number) => `fwd/${workflowExecution?.runId}/${activityId}/${n}/`;
  const sink = new EventSink(deps.pool, deps.hub, args.tenant, args.gatewayTaskId, attemptKey(attempt));
  // The agent's credential is read while the turn's `working` change is written. A first attempt calls the agent
  // meanwhile: what the agent streams waits for that change in the sink (it precedes them in the log), the turn's
  // result waits for its commit, and a task the agent starts through Switchboard meanwhile, naming this one as its
  // parent, waits at the front door until the parent is recorded (task-intake.ts parentOf). A first exchange that
  // holds the change back (below) returns without waiting for it: it writes it itself, or the sink does, first. A
  // later attempt writes it (a no-op once written) before it voids the last attempt's output and calls again.
  const turn = new Turn(ctx, { ...deps, link: prefetched(deps.link) }, args, sink, firstExchange);
  const record = (rec: TaskRecord) =>
    recordTask(deps.pool, deps.hub, rec).catch((err: unknown) => {
      throw writeFailed("the task's working change could not be recorded", err);
    });
  if (args.record && holdMs !== undefined) {
    // A first exchange that may finish its task holds its `working` change back with the events it relays: when the
    // agent completes the task within the hold, finishHere writes it with the final one (one statement fewer); else
    // the sink writes it when the hold ends, before the events. A child task's front door that waits for this task's
    // row (task-intake.ts parentBeingRecorded) ends the hold at once.
    const rec = args.record;
    turn.forgetHeldRow = heldRows.hold(args.tenant, args.gatewayTaskId, () => sink.release());
    sink.hold(holdMs, () => record(rec));
  }
  // A fresh task's first turn sent here at once (a stream's, or a send with returnImmediately) writes its `working` row
  // now, but logs the change only once the agent has named its task (Turn.named) or the turn ends: an agent that
  // answers with a Message makes no task, and the log shows none (submitted → completed), so a stream of the exchange
  // can be that Message alone (src/a2a/task-stream.ts followExchange). Its first answer is due within the attempt
  // timeout: the hold's backstop.
  turn.holdsStart = !firstExchange && attempt === 1 && args.record?.version === 1 && !args.attach && !args.adopt && !args.attemptsBefore;
  if (args.record && turn.holdsStart) {
    const rec = args.record;
    sink.hold(Math.min((args.retry?.attemptTimeoutMs ?? DEFAULT_RETRY.attemptTimeoutMs) + 1_000, MAX_TIMER_MS), () => record(rec));
  }
  const started = (async () => {
    const write = holdMs !== undefined ? undefined : turn.holdsStart ? { ...args.record!, event: undefined } : args.record;
    const recorded = write ? record(write) : undefined;
    if (recorded && attempt === 1) {
      recorded.catch(() => undefined); // awaited below, once the agent has answered
      sink.after(recorded);
    } else {
      await recorded;
    }
    await turn.resume();
    if (attempt > 1) {
      // The first attempt's output may be under the first exchange's key (it adopted that turn).
      const previous = [attemptKey(attempt - 1), ...(attempt === 2 && args.adopt ? [args.adopt] : [])];
      for (const key of previous) await voidPreviousAttempt(deps.pool, sink, args, key, attempt, turn.ref !== undefined);
    }
    let result: ForwardResult;
    try {
      result = await turn.run();
    } catch (err) {
      await recorded?.catch(() => undefined); // committed (or failed) before the turn's failure is reported: never after what follows it
      throw err;
    }
    await recorded;
    return result;
  })();
  return Object.assign(turn, { started });
}

/**
 * Waits for a turn's end under the attempt `ctx` runs, and for its events to be logged (unless `flush` is false: the
 * first exchange logs them itself): heartbeating, and classifying its failure.
 */
async function finish(ctx: Context, turn: Turn, work: Promise<ForwardResult>, flush = true): Promise<ForwardResult> {
  const beat = setInterval(() => turn.heartbeat(), 1_000);
  try {
    const result = await work;
    if (flush) await turn.sink.flush();
    return result;
  } catch (err) {
    // A failed attempt leaves the agent's task in its heartbeat details at once, so the next one re-attaches to it.
    if (turn.ref) turn.heartbeat();
    await turn.sink.flush().catch(() => undefined); // what was relayed stays in the log; a retry voids it
    if (ctx.cancellationSignal.aborted) {
      // The workflow passes the cancel on to the agent's task once this call has ended: it must know the task.
      await turn.announce().catch(() => undefined);
      await ctx.cancelled; // report the cancellation, not the abort it caused
    }
    const failure = classify(err, turn.trace);
    await turn.abandon(failure);
    throw failure;
  } finally {
    clearInterval(beat);
    turn.ended();
  }
}

/** The link with its credential already being read: the first exchange takes that read, later ones read afresh (a 401 may have replaced an OAuth token). */
function prefetched(link: AgentLink): AgentLink {
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
class Turn {
  readonly trace: HttpTrace = {};
  /** The agent's task this turn runs as, once the agent has named it. */
  ref?: AgentTaskRef;
  /** Aborted when the attempt running the turn is canceled (after a hand-over: the adopting one), or the turn is stopped. */
  private readonly canceled = new AbortController();
  /** The task the first exchange told the workflow about when it handed the turn over. */
  private handedOver?: AgentTaskRef;
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
  /** Resolves with the state of the agent's answer once it is in, before its last events are logged. */
  readonly answered: Promise<TaskState>;
  private answer!: (state: TaskState) => void;
  /** Ends the entry of a first exchange's held `working` change in heldRows (startTurn). */
  forgetHeldRow: () => void = () => undefined;
  /** The turn's `working` change waits for the agent to name its task (startTurn): a Message answer logs none. */
  holdsStart = false;

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
    // An earlier attempt's heartbeat names the task the agent already runs for this turn (or the first exchange did).
    const saved = ctx.info.heartbeatDetails as AgentTaskRef | undefined;
    if (saved?.agentTaskId) this.ref = saved;
    else if (args.attach) this.ref = args.attach;
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

  /** Heartbeats with the agent's task as details (a retried attempt re-attaches to it). */
  heartbeat(): void {
    if (!this.firstExchange) this.ctx.heartbeat(this.ref);
  }

  private cancelWith(ctx: Context): void {
    const cancel = () => this.canceled.abort(ctx.cancellationSignal.reason);
    if (ctx.cancellationSignal.aborted) cancel();
    else ctx.cancellationSignal.addEventListener('abort', cancel, { once: true });
  }

  /** The first exchange hands the turn over: the task the workflow will know from its result. */
  handOver(): AgentTaskRef | undefined {
    this.handedOver = this.ref;
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
    if (this.ref || this.ctx.info.attempt === 1 || this.args.agentTaskId) return;
    const workflowId = this.ctx.info.workflowExecution?.workflowId;
    if (!workflowId) return;
    this.ref = await this.ctx.client.workflow.getHandle(workflowId).query(agentTaskQuery);
    this.heartbeat();
  }

  async run(): Promise<ForwardResult> {
    let task: WireTask | undefined;
    let broken: unknown;
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
    return taskResult(task, this.args);
  }

  /** Tells the workflow the agent's task (once), so a cancel during the call reaches it. */
  announce(): Promise<void> {
    const ref = this.ref;
    const workflowId = this.ctx.info.workflowExecution?.workflowId;
    // The workflow knows the task already: an earlier turn's, or the one the first exchange handed over; a first
    // exchange hands its task over with its result (a signal would come after it, in a workflow task of its own).
    const known = ref && [this.args.agentTaskId, this.args.attach?.agentTaskId, this.handedOver?.agentTaskId].includes(ref.agentTaskId);
    if (!ref || known || this.firstExchange || !workflowId) return Promise.resolve();
    this.announcing ??= this.ctx.client.workflow.getHandle(workflowId).signal(agentTaskSignal, ref);
    return this.announcing;
  }

  /** Announces the task unless the turn ends within ANNOUNCE_AFTER_MS (awaited at the end of run()). */
  private announceSoon(): void {
    this.announceTimer ??= setTimeout(() => void this.announce().catch(() => undefined), ANNOUNCE_AFTER_MS);
  }

  /** The turn is over: a pending announcement is not needed, nor pushes. */
  ended(): void {
    clearTimeout(this.announceTimer);
    clearTimeout(this.heartbeatTimer);
    this.push?.close();
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
    const switchboard = { ...(this.args.message.metadata?.switchboard as object), parentTaskId: this.args.gatewayTaskId };
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
        } else if (polls > 0) await delay(pollDelay, undefined, { signal: this.canceled.signal });
        polls++;
        task = Task.toJSON(await this.exchange('GetTask', (o) => calls.getTask({ tenant: '', id }, o))) as WireTask;
        failures = 0;
        if (!SETTLED(task.status.state)) await this.named(task).announce();
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

/** An exchange with the agent that ran out of time: retried like network trouble, reported as a timeout. */
function timedOut(what: string, ms: number): ApplicationFailure {
  return ApplicationFailure.retryable(`the agent call timed out: no answer to ${what} within ${ms} ms (retry.attemptTimeoutMs)`, 'AgentTimeout');
}

/** The last failure of a task followed until the retry policy ran out: final, whatever its kind. */
function gaveUp(failure: ApplicationFailure, agentTaskId: string, failures: number): ApplicationFailure {
  const why = failure.nonRetryable ? '' : ` (${failures} exchanges in a row failed)`;
  return ApplicationFailure.create({
    message: `${failure.message}; gave up following the agent's task ${agentTaskId}${why}`,
    type: failure.type ?? undefined,
    nonRetryable: true,
    details: failure.details ?? undefined,
  });
}

/** Folds a stream of 1.0 StreamResponse events into the agent's latest task. */
class StreamAccumulator {
  task?: WireTask;
  private reply?: WireMessage;
  private artifacts = new Map<string, WireArtifact>();

  add(event: StreamResponse): void {
    const p = event.payload;
    if (!p) return;
    if (p.$case === 'task') {
      this.task = Task.toJSON(p.value) as WireTask;
      for (const a of this.task.artifacts ?? []) this.artifacts.set(a.artifactId, a);
    } else if (p.$case === 'message') {
      this.reply = Message.toJSON(p.value) as WireMessage;
    } else if (p.$case === 'statusUpdate') {
      const u = TaskStatusUpdateEvent.toJSON(p.value) as WireStatusUpdate;
      // A stream may start with an update instead of the task (the coding-agent seed's does): it names the task.
      this.task ??= { id: u.taskId, contextId: u.contextId, status: u.status };
      this.task.status = u.status;
      if (u.metadata) this.task.metadata = { ...this.task.metadata, ...u.metadata };
    } else if (p.$case === 'artifactUpdate') {
      const u = TaskArtifactUpdateEvent.toJSON(p.value) as WireArtifactUpdate;
      this.task ??= { id: u.taskId, contextId: u.contextId, status: { state: 'TASK_STATE_WORKING' } };
      const prev = this.artifacts.get(u.artifact.artifactId);
      if (u.append && prev) prev.parts.push(...u.artifact.parts); // in place: long streams append thousands of chunks
      else this.artifacts.set(u.artifact.artifactId, { ...u.artifact, parts: [...u.artifact.parts] });
    }
    if (this.task) this.task.artifacts = [...this.artifacts.values()];
  }

  /** The agent's message, for a stream that carried no task. */
  message(): WireMessage {
    if (!this.reply) throw ApplicationFailure.nonRetryable('the agent closed the stream without a task or a message', 'InvalidAgentResponse');
    return this.reply;
  }
}

/**
 * Turns the agent's stream events into the gateway task's events: artifact chunks (append/lastChunk kept)
 * and progress updates (state working), with the agent's ids replaced by the gateway's. The turn's outcome
 * (input-required, completed, failed…) is not relayed: the workflow logs it once it has applied it.
 */
class Relay {
  /** Parts relayed per artifact id, to tell a complete stream from one that broke off. */
  private readonly relayed = new Map<string, number>();

  constructor(
    private readonly sink: EventSink,
    private readonly args: ForwardArgs,
  ) {}

  async event(event: StreamResponse): Promise<void> {
    const p = event.payload;
    const ids = { taskId: this.args.gatewayTaskId, contextId: this.args.gatewayContextId };
    if (p?.$case === 'artifactUpdate') {
      const u = TaskArtifactUpdateEvent.toJSON(p.value) as WireArtifactUpdate;
      const before = u.append ? (this.relayed.get(u.artifact.artifactId) ?? 0) : 0;
      this.relayed.set(u.artifact.artifactId, before + u.artifact.parts.length);
      await this.sink.push({ artifactUpdate: { ...u, ...ids } });
    } else if (p?.$case === 'statusUpdate') {
      const u = TaskStatusUpdateEvent.toJSON(p.value) as WireStatusUpdate;
      if (u.status.state !== 'TASK_STATE_WORKING') return;
      const message = u.status.message && { ...u.status.message, ...ids };
      await this.sink.push({ statusUpdate: { ...u, ...ids, status: { ...u.status, ...(message ? { message } : {}) } } });
    }
  }

  /**
   * Logs, whole, each artifact of the final answer that did not stream completely: one that arrived in a
   * blocking answer or a task snapshot, or whose stream broke off before the agent's task settled (it is
   * then sent with append: false, replacing the partial one).
   */
  async remaining(artifacts: WireArtifact[], { lastChunk = true, all = false } = {}): Promise<void> {
    const ids = { taskId: this.args.gatewayTaskId, contextId: this.args.gatewayContextId };
    for (const artifact of artifacts) {
      if (!all && this.relayed.get(artifact.artifactId) === artifact.parts.length) continue;
      this.relayed.set(artifact.artifactId, artifact.parts.length);
      await this.sink.push({ artifactUpdate: { ...ids, artifact, append: false, lastChunk } });
    }
  }

  /** A re-attached stream starts with the task so far: its artifacts replace what was relayed of them. */
  snapshot(artifacts: WireArtifact[]): Promise<void> {
    return this.remaining(artifacts, { lastChunk: false });
  }
}

/**
 * The first event of a retried attempt: it names the events of the failed attempt so a reader can drop them
 * (metadata `switchboard.void = {attempt, fromSeq, toSeq}`): the agent is asked again from the start, or its task
 * re-attached (`resumed`), whose snapshot brings the output so far again.
 */
async function voidPreviousAttempt(pool: Pool, sink: EventSink, args: ForwardArgs, previousKey: string, attempt: number, resumed: boolean): Promise<void> {
  const range = await seqRangeOf(pool, args.tenant, args.gatewayTaskId, previousKey);
  if (!range) return;
  const next = resumed ? `Following the agent's task again (attempt ${attempt}).` : `Asking the agent again (attempt ${attempt}).`;
  const text = `Attempt ${attempt - 1} of the agent call failed; its partial output (events ${range.from}-${range.to}) is void. ${next}`;
  const ids = { taskId: args.gatewayTaskId, contextId: args.gatewayContextId };
  await sink.push(
    {
      statusUpdate: {
        ...ids,
        status: {
          state: 'TASK_STATE_WORKING',
          timestamp: new Date().toISOString(),
          message: { messageId: `${sink.keyPrefix}void`, role: 'ROLE_AGENT', ...ids, parts: [{ text }] },
        },
        metadata: { switchboard: { void: { attempt: attempt - 1, fromSeq: range.from, toSeq: range.to } } },
      },
    },
    `${sink.keyPrefix}void`,
  );
  await sink.flush();
}

/** A message-only reply (no task at the agent) completes the gateway's task with that message; its client gets the message. */
function messageResult(reply: WireMessage, args: ForwardArgs): ForwardResult {
  return {
    agentContextId: reply.contextId || undefined,
    state: 'TASK_STATE_COMPLETED',
    statusMessage: { ...reply, taskId: args.gatewayTaskId, contextId: args.gatewayContextId },
    artifacts: [],
    costMinor: costOf(reply.metadata),
    message: { kind: 'message', inTask: Boolean(reply.taskId), inReplyTo: args.message.messageId },
  };
}

function taskResult(task: WireTask, args: ForwardArgs): ForwardResult {
  const m = task.status.message;
  return {
    agentTaskId: task.id,
    agentContextId: task.contextId || undefined,
    state: task.status.state,
    statusMessage: m ? { ...m, taskId: args.gatewayTaskId, contextId: args.gatewayContextId } : undefined,
    artifacts: withinBudget((task.artifacts ?? []).map(compactArtifact)),
    costMinor: costOf(task.metadata) ?? costOf(m?.metadata),
    metadata: agentMetadata(task.metadata),
  };
}

/** The most of the agent's task metadata a turn carries into the workflow (it is the client's to read, not a store). */
export const AGENT_METADATA_BUDGET_BYTES = 64 * 1024;

/**
 * The agent's task metadata as the gateway task keeps it: without `switchboard` (the gateway's own key), and
 * replaced by a note when it is over AGENT_METADATA_BUDGET_BYTES.
 */
function agentMetadata(metadata: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (!metadata) return undefined;
  const { switchboard: _own, ...rest } = metadata;
  if (Object.keys(rest).length === 0) return undefined;
  const size = Buffer.byteLength(JSON.stringify(rest));
  return size <= AGENT_METADATA_BUDGET_BYTES ? rest : { agentMetadataDropped: `${size} bytes, over the ${AGENT_METADATA_BUDGET_BYTES}-byte budget` };
}

/**
 * Sorts a failure into "retrying may help" (network trouble, 5xx, 408/429; gRPC UNAVAILABLE and the like) and
 * "it cannot succeed" (a JSON-RPC error, another 4xx, an unreadable answer, a refused address; gRPC
 * INVALID_ARGUMENT and the like). The non-retryable types are listed in NON_RETRYABLE_FORWARD_ERRORS in the workflow.
 */
export function classify(err: unknown, trace: HttpTrace): ApplicationFailure {
  if (err instanceof ApplicationFailure) return err; // already classified here (e.g. a stream that ended without a task)
  // A PostgreSQL error met while the agent's answer was being handled is the gateway's, never the agent's.
  if (databaseError(err)) return writeFailed('PostgreSQL failed while the turn was handled', err);
  const outbound = findOutboundError(err);
  if (outbound) {
    const transient = outbound.code === 'TIMEOUT' || outbound.code === 'NETWORK';
    return ApplicationFailure.create({ message: outbound.message, type: transient ? 'AgentUnavailable' : 'AgentUnreachable', nonRetryable: !transient });
  }
  const message = err instanceof Error ? err.message : String(err);
  // OK: the call itself succeeded, and what failed was reading its answer (as after an HTTP 200, below).
  if (trace.grpcCode !== undefined && trace.grpcCode !== grpc.status.OK) return classifyGrpc(trace.grpcCode, trace.grpcDetails ?? message);
  // A connection cut mid-answer (often mid-stream, after a 200) is network trouble, not a bad answer.
  if (connectionLost(err)) return ApplicationFailure.retryable(`the connection to the agent was lost: ${message}`, 'AgentUnavailable');
  if (trace.grpcCode === grpc.status.OK) return ApplicationFailure.nonRetryable(`the agent's answer is not a valid A2A response: ${message}`, 'InvalidAgentResponse');
  if (trace.lastStatus !== undefined && trace.lastStatus < 300 && (err instanceof A2AError || jsonRpcErrorOf(err))) {
    // The agent's own JSON-RPC error (in a stream, wrapped by the SDK), kept whole: the workflow passes it to
    // the client of a new task as is.
    const rpc = jsonRpcErrorOf(err);
    return ApplicationFailure.create({
      message: `the agent answered with an error: ${rpc ? `${rpc.message} (JSON-RPC ${rpc.code})` : message}`,
      type: 'AgentRejected',
      nonRetryable: true,
      ...(rpc ? { details: [{ agentError: rpc }] } : {}),
    });
  }
  const status = trace.lastStatus;
  if (status === undefined) return ApplicationFailure.retryable(`the agent could not be reached: ${message}`, 'AgentUnavailable');
  if (status >= 500 || status === 408 || status === 429) {
    // The agent says when to come back (429, 503): the next attempt waits that long instead of the backoff's
    // interval, within reason (an agent cannot park a task for a day with one header).
    const wait = trace.retryAfterMs;
    return ApplicationFailure.create({
      message: `the agent answered HTTP ${status}${wait !== undefined ? ` (Retry-After ${Math.round(wait / 1000)} s)` : ''}`,
      type: 'AgentUnavailable',
      ...(wait !== undefined ? { nextRetryDelay: Math.min(wait, MAX_RETRY_AFTER_MS) } : {}),
    });
  }
  if (status >= 400) return ApplicationFailure.nonRetryable(`the agent refused the request with HTTP ${status}: ${message}`, 'AgentRejected');
  return ApplicationFailure.nonRetryable(`the agent's answer is not a valid A2A response: ${message}`, 'InvalidAgentResponse');
}

/**
 * gRPC status codes that mean "try again" (the gRPC counterparts of network trouble, 5xx, 408 and 429):
 * the server could not take the call now, did not finish it in time, or failed inside (UNKNOWN is what a
 * handler's uncaught exception becomes, INTERNAL a broken frame). Every other code is an answer about the
 * request itself (INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION, PERMISSION_DENIED, UNAUTHENTICATED,
 * UNIMPLEMENTED…) and is not retried.
 */
const RETRYABLE_GRPC = new Set<number>([
  grpc.status.CANCELLED, grpc.status.UNKNOWN, grpc.status.DEADLINE_EXCEEDED, grpc.status.RESOURCE_EXHAUSTED,
  grpc.status.ABORTED, grpc.status.INTERNAL, grpc.status.UNAVAILABLE,
]);

function classifyGrpc(code: number, details: string): ApplicationFailure {
  const name = grpc.status[code] ?? String(code);
  // grpc-js's own limit on what it reads (the outbound size cap), not the agent's: as an HTTP body over the cap.
  if (code === grpc.status.RESOURCE_EXHAUSTED && /larger than max/i.test(details)) {
    return ApplicationFailure.nonRetryable(`the agent's answer exceeds the size limit: ${details}`, 'AgentUnreachable');
  }
  if (RETRYABLE_GRPC.has(code)) return ApplicationFailure.retryable(`the agent answered gRPC ${name}: ${details}`, 'AgentUnavailable');
  return ApplicationFailure.nonRetryable(`the agent refused the request with gRPC ${name}: ${details}`, 'AgentRejected');
}

const LOST_CONNECTION_CODES = new Set(['UND_ERR_SOCKET', 'UND_ERR_CLOSED', 'ECONNRESET', 'EPIPE', 'ECONNABORTED']);

function connectionLost(err: unknown): boolean {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (LOST_CONNECTION_CODES.has((e as { code?: string }).code ?? '')) return true;
    if (e instanceof TypeError && e.message === 'terminated') return true; // undici's body stream, cut
  }
  return false;
}

/** The agent's JSON-RPC error (code and message) behind a failure, also when a stream wrapped it. */
function jsonRpcErrorOf(err: unknown): AgentRpcError | undefined {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (isJsonRpcError(e)) return { code: e.envelopeCode, message: e.message };
  }
  return undefined;
}

/** pg's connection-level failures (its own words: a server error is a DatabaseError). */
const PG_CLIENT_FAILURE = /^(Connection terminated|Client has encountered a connection error|timeout exceeded when trying to connect|Client was closed and is not queryable)/;

/** Whether `err` (or what it wraps) came from PostgreSQL or the pg client rather than from the agent. */
function databaseError(err: unknown): boolean {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof DatabaseError) return true;
    if (e instanceof Error && PG_CLIENT_FAILURE.test(e.message)) return true;
  }
  return false;
}

function findOutboundError(err: unknown): OutboundError | undefined {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof OutboundError) return e;
  }
  return undefined;
}
