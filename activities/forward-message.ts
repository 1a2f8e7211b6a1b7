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
import { ApplicationFailure, Context } from '@temporalio/activity';
import { childTasksLinked } from '../src/core/db/task-store';
import { finalOfFirstTurn, isTerminal } from '../task/rules';
import { DEFAULT_RETRY, FIRST_EXCHANGE_MS, type FirstExchange, type ForwardResult, type NewEvent, type TaskRecord } from '../task/contracts';
import { EventSink } from '../src/core/events/event-sink';
import { answeredBefore, finishTask, recordTask } from './bookkeeping';
import { tasksStarted } from '../src/core/metrics';
import type { ForwardArgs, ForwardDeps } from './forwarding/args';
import { classify, writeFailed } from './forwarding/classify';
import { voidPreviousAttempt } from './forwarding/results';
import { HANDED_OVER, MAX_TIMER_MS, Turn, prefetched } from './forwarding/turn';

export type { ForwardArgs, ForwardDeps } from './forwarding/args';
export { classify } from './forwarding/classify';


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
 * attempt: the workflow makes the others with forwardMessage, by the agent's policy. It never finishes the task:
 * the workflow records the turn's outcome and settles a terminal task (workflows/task-workflow.ts), whichever
 * activity ran the turn.
 */
export async function forwardFirstExchange(deps: ForwardDeps, args: ForwardArgs): Promise<FirstExchange> {
  const ctx = Context.current();
  // A rerun of the workflow task that finished the task here: the answer it finished with, not a second call.
  if (args.settle?.again) {
    const before = await answeredBefore(deps.pool, args.tenant, args.gatewayTaskId, args.message.messageId);
    if (before) return before as FirstExchange;
  }
  const turn = startTurn(ctx, deps, args, true);
  // The events the agent relays are held for a moment, and so is a fresh task's `working` change (startTurn): a turn
  // that ends in that time, terminal, hands them to the workflow, whose finishTask logs them with the final state
  // (one statement, or two, fewer). See ForwardArgs.atFinish.
  if (args.atFinish) turn.sink.holdEvents(FINISH_HOLD_MS, FIRST_EXCHANGE_MS);
  return firstExchange(ctx, deps, args, turn);
}

/**
 * How long a first exchange holds the events its agent relays, from the first, and a fresh task's `working` change,
 * from the start (ForwardArgs.atFinish): readers of the log see them that much later at most (a turn that ends
 * meanwhile: when the workflow has finished the task), and so does a child task's front door the task's first row.
 */
const FINISH_HOLD_MS = 100;
/** The most relayed events a first exchange's result carries (they go into workflow history): past it, it logs them. */
const RELAYED_IN_RESULT_BYTES = 64 * 1024;

async function firstExchange(ctx: Context, deps: ForwardDeps, args: ForwardArgs, turn: StartedTurn): Promise<FirstExchange> {
  // The workflow settles a terminal answer at once: it must know of the child tasks the agent started meanwhile.
  // They are counted as soon as the answer is in, while the turn's last events are being logged (at level 5 the
  // workflow's finishTask counts them: args.atFinish).
  let waiting = !args.atFinish; // false once the turn is handed over: its activity reports the answer then
  const children = turn.answered.then((state) =>
    waiting && isTerminal(state) ? childTasksLinked(deps.pool, args.tenant, args.gatewayTaskId) : undefined,
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
        if (!args.atFinish || !isTerminal(r.state)) await turn.sink.flush(); // a terminal answer's: heldBack()
        return r;
      });
      result = await finish(ctx, turn, logged, false);
    } catch (err) {
      if (!(err instanceof ApplicationFailure) || err.nonRetryable) throw err;
      // A failure retrying may help, with the agent's task named: the activity follows that task (a local activity
      // has no heartbeat details for its next attempt to re-attach with).
      if (turn.ref) return { handoff: turn.ref, why: `the first exchange failed: ${err.message}` };
      // Its worker is stopping before the agent named a task: the activity's first attempt sends the message (again).
      if (err.type === HANDED_OVER) return { handoff: null, why: err.message };
      // A local activity's failure reaches the workflow without its nextRetryDelay: the agent's Retry-After goes in the details.
      if (typeof err.nextRetryDelay === 'number') throw ApplicationFailure.create({ message: err.message, type: err.type ?? undefined, details: [{ retryAfterMs: err.nextRetryDelay }] });
      throw err;
    }
    if (!isTerminal(result.state)) return result;
    if (args.atFinish) {
      const held = await heldBack(turn, args.record);
      if ('handoff' in held) return held;
      return args.settle ? settleHere(ctx, deps, args, result, held.relayed) : { ...result, ...held };
    }
    const childrenLinked = (await children) ?? (await childTasksLinked(deps.pool, args.tenant, args.gatewayTaskId));
    return { ...result, childrenLinked };
  }
  waiting = false;
  turn.sink.release(); // a turn handed over logs what it relays as usual
  const key = turn.sink.keyPrefix;
  parkedTurns.park(key, turn);
  return { handoff: turn.handOver() ?? null, why: `still running after ${FIRST_EXCHANGE_MS} ms`, adopt: key };
}

/**
 * The events a terminal turn relayed while its sink held them (ForwardArgs.atFinish), for the workflow's finishTask to
 * log before the final state, led by the fresh task's `working` change (`start`) when it was held too; none when the
 * hold ended first (the sink logged them), or when they are too big for the result (logged now). Events that could
 * not be logged are the turn's failure, which a named agent task turns into a hand-over (the activity reads the
 * agent's task again and logs it), as a failed first exchange does.
 */
async function heldBack(turn: StartedTurn, start: TaskRecord | undefined): Promise<{ relayed?: NewEvent[] } | HandOff> {
  const taken = turn.sink.take();
  const relayed = taken ? [...(taken.first && start?.event ? [start.event] : []), ...taken.events] : [];
  try {
    if (taken && relayed.length > 0 && Buffer.byteLength(JSON.stringify(relayed)) <= RELAYED_IN_RESULT_BYTES) {
      await taken.after; // the `working` change, when its hold ended before the turn: committed before the rest is logged
      if (taken.first) tasksStarted.inc({ agent: start!.agentId }); // as logging the change would have
      return { relayed };
    }
    if (taken) turn.sink.giveBack(taken);
    await turn.sink.flush();
    return {};
  } catch (err) {
    const failure = writeFailed("the agent's answer could not be logged", err);
    if (turn.ref) return { handoff: turn.ref, why: `the first exchange failed: ${failure.message}` };
    throw failure;
  }
}

/** The largest answer a first exchange finishes its task with (it is kept with the claim, and is in history already). */
const ANSWER_KEPT_BYTES = 64 * 1024;

/**
 * A fresh task its agent ended at once is finished here (ForwardArgs.settle, patch level 7): its relayed events, its
 * final record and its settlement, as the workflow would write them next (task/rules.ts finalOfFirstTurn), in
 * finishTask's one statement, with the answer kept for a rerun of this workflow task (SettleAtAnswer.again). The
 * workflow, told so (`finish.written`), writes nothing more and may end in the workflow task that ran this: the
 * task costs one workflow task and one local activity. The statement counts the child tasks the agent started
 * meanwhile: with more than the workflow knows it logs the events only, and the workflow finishes the task once it
 * has their links. A statement that failed, or an answer too big to keep, leaves the task to the workflow's
 * finishTask (idempotent: a statement that committed after all is not written twice), never a reason to call the
 * agent again.
 */
async function settleHere(ctx: Context, deps: ForwardDeps, args: ForwardArgs, answer: ForwardResult, relayed?: NewEvent[]): Promise<FirstExchange> {
  const left: FirstExchange = { ...answer, ...(relayed ? { relayed } : {}) };
  const at = new Date().toISOString();
  const finished: FirstExchange = { ...answer, finish: { at, written: true } };
  const json = JSON.stringify(finished); // serialised once: measured here, kept by the statement
  if (!deps.unfunded || !args.record || Buffer.byteLength(json) > ANSWER_KEPT_BYTES) return left;
  const s = args.settle!;
  const { record, settlement } = finalOfFirstTurn(args.record, answer, at, s);
  try {
    const done = await finishTask(deps.pool, deps.hub, deps.unfunded, record, settlement, {
      ...(relayed ? { relayed } : {}),
      knownChildren: s.knownChildren,
      answer: { messageId: args.message.messageId, json },
    });
    return done.childrenLinked === undefined ? finished : { ...answer, childrenLinked: done.childrenLinked };
  } catch (err) {
    ctx.log.warn('the first exchange could not finish its task; the workflow finishes it', { taskId: args.gatewayTaskId, error: String(err) });
    return left;
  }
}

/** A first exchange that hands its turn over to the forwarding activity. */
type HandOff = Extract<FirstExchange, { handoff: unknown }>;

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
    // Its failure is the adopting attempt's; but its worker stopping before any adopted it, the workflow is told the
    // task the agent named since the hand-over, for the attempt that runs elsewhere (Turn.resume asks for it).
    turn.started.catch(() => (turn.handingOver && this.turns.get(key)?.turn === turn ? turn.handOff().catch(() => undefined) : undefined));
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
 * A turn begun: its `working` change written (on a first attempt, while the agent is called), an earlier attempt's
 * output voided, the agent called (`started`).
 */
type StartedTurn = Turn & { started: Promise<ForwardResult> };

function startTurn(ctx: Context, deps: ForwardDeps, args: ForwardArgs, firstExchange: boolean): StartedTurn {
  const { workflowExecution, activityId, attempt } = ctx.info;
  const attemptKey = (n: number) => `fwd/${workflowExecution?.runId}/${activityId}/${n}/`;
  const sink = new EventSink(deps.pool, deps.hub, args.tenant, args.gatewayTaskId, attemptKey(attempt), writeFailed);
  // The agent's credential is read while the turn's `working` change is written. A first attempt calls the agent
  // meanwhile: what the agent streams waits for that change in the sink (it precedes them in the log), the turn's
  // result waits for its commit, and a task the agent starts through Switchboard meanwhile, naming this one as its
  // parent, waits at the front door until the parent is recorded (task-intake.ts parentOf). A later attempt writes
  // it (a no-op once written) before it voids the last attempt's output and calls again.
  const turn = new Turn(ctx, { ...deps, link: prefetched(deps.link) }, args, sink, firstExchange);
  const record = (rec: TaskRecord) =>
    recordTask(deps.pool, deps.hub, rec).catch((err: unknown) => {
      throw writeFailed("the task's working change could not be recorded", err);
    });
  // A fresh task's first turn sent here at once (a stream's, or a send with returnImmediately) writes its `working` row
  // now, but logs the change only once the agent has named its task (Turn.named) or the turn ends: an agent that
  // answers with a Message makes no task, and the log shows none (submitted → completed), so a stream of the exchange
  // can be that Message alone (src/api/a2a/task-stream.ts followExchange). Its first answer is due within the attempt
  // timeout: the hold's backstop.
  turn.holdsStart = !firstExchange && attempt === 1 && args.record?.version === 1 && !args.attach && !args.adopt && !args.attemptsBefore;
  if (args.record && turn.holdsStart) {
    const rec = args.record;
    sink.hold(Math.min((args.retry?.attemptTimeoutMs ?? DEFAULT_RETRY.attemptTimeoutMs) + 1_000, MAX_TIMER_MS), () => record(rec));
  }
  // A fresh task's first exchange that holds its events for finishTask (atFinish) holds the `working` change with
  // them, for FINISH_HOLD_MS at most: an agent that answers terminal meanwhile has it logged by finishTask, whose
  // statement writes the task's first row (heldBack). Otherwise the sink makes it when the hold ends or it writes.
  const heldStart = firstExchange && args.atFinish === true && attempt === 1 && args.record?.version === 1 && args.record.event !== undefined;
  if (args.record && heldStart) {
    const rec = args.record;
    sink.holdFirst(() => record(rec), FINISH_HOLD_MS);
  }
  const started = (async () => {
    const write = heldStart ? undefined : turn.holdsStart ? { ...args.record!, event: undefined } : args.record;
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
    await turn.sink.flush().catch(() => undefined); // what was relayed stays in the log; a retry voids it
    if (ctx.cancellationSignal.aborted) {
      if (turn.ref) turn.heartbeat();
      // The workflow passes the cancel on to the agent's task once this call has ended: it must know the task.
      await turn.announce().catch(() => undefined);
      await ctx.cancelled; // report the cancellation, not the abort it caused
    }
    if (turn.handingOver) throw await turn.handOff();
    const failure = turn.counted(classify(err, turn.trace));
    // A failed attempt leaves the agent's task, and the agent's failures, in its heartbeat details at once: the next
    // attempt re-attaches to the task and goes on counting.
    turn.heartbeat();
    await turn.abandon(failure);
    throw failure;
  } finally {
    clearInterval(beat);
    turn.ended();
  }
}
