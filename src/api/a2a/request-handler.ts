/**
 * The A2A request handler of one registered agent: the 1.0 methods on the wire form (task/wire.ts), with the params
 * the RPC core validated, handing the work to the task intake (task-intake.ts: whose task, new-task rules), the
 * task's workflow (TaskGateway), its event log (task-stream.ts) or the projection. The SDK's 0.3 transport calls
 * it through engine.ts's SdkFacing.
 */
import type { Release } from './fair-gate';
import type { z } from 'zod';
import { gatewayCard } from '../../core/agents/gateway-card';
import type { Agent } from '../../core/agents/registry';
import type { Caller } from '../../core/auth/caller';
import { listTasks, taskOfMessage } from '../../core/db/task-store';
import { directAnswerOf, endsTurn, holdOf, isTerminal, stateLabel } from '../../../task/rules';
import type { SendMessageArgs } from '../../../task/contracts';
import type { CallIntent } from './dialects';
import { a2aError } from './errors';
import type * as S from './schemas';
import type { ListTasksQuery } from './schemas';
import { type IntakeDeps, TaskIntake } from './task-intake';
import { type ExchangeEvent, type StreamCursor, type StreamEnd, type TaskStreamDeps, checkStreamCap, followExchange, followTask, logHead, requireTask, taskAtHead } from './task-stream';
import type { Dialect, WireMessage, WireTask } from '../../../task/wire';

/** What the handler needs: the intake's dependencies and the streams'. */
export type HandlerDeps = IntakeDeps & TaskStreamDeps;

/** What a call carries beyond its params: the translation's intent (a channel no client writes to) and the request's headers. */
export interface CallExtras {
  intent?: CallIntent;
  headers?: Record<string, string | string[] | undefined>;
  /** Aborted when the client has gone (a unary call's; a stream has its cursor's). */
  signal?: AbortSignal;
}

/** SendMessage / SendStreamingMessage params, validated (src/api/a2a/schemas.ts): already the wire form. */
export type SendParams = z.infer<typeof S.SendMessageParams>;
/** The answer of SendMessage: the task, or the agent's Message when it made no task (§3.1.1). */
export type SendAnswer = { task: WireTask } | { message: WireMessage };
/** A page of ListTasks. */
export type TaskList = Awaited<ReturnType<typeof listTasks>>;

/**
 * The handler's work is done on the wire form (task/wire.ts), the params as the method's zod schema passed them:
 * nothing is decoded twice. What it throws is raw (task errors, outages, A2A errors): the RPC core renders it.
 */
export class AgentRequestHandler {
  protected readonly intake: TaskIntake;
  private readonly tenant: string;
  /** Where a streaming send's stream ends: 0.x streams say `final`, and stay open where the agent's did (StreamEnd). */
  private readonly turnEnd: Exclude<StreamEnd, 'task'>;

  /**
   * @param agent the agent of the endpoint; the front door's stand-in (id '') serves every agent's tasks.
   * @param caller who is calling (src/core/auth/plugin.ts authenticated them); the handler acts in their tenant.
   */
  constructor(
    private readonly agent: Agent,
    caller: Caller,
    private readonly rpcUrl: string,
    private readonly deps: HandlerDeps,
    private readonly stream?: StreamCursor,
    dialect: Dialect = '1.0',
  ) {
    this.tenant = caller.tenant;
    this.intake = new TaskIntake(agent, caller, deps, dialect);
    this.turnEnd = dialect === '1.0' ? 'turn' : 'final';
  }

  /** The card of this endpoint. */
  async card(): Promise<Record<string, unknown>> {
    return gatewayCard(this.agent.card, { jsonRpc: this.rpcUrl }) as Record<string, unknown>;
  }

  /** SendMessage: a new task, or the next turn of an interrupted one, once the tenant has its share (admitted). */
  async send(params: SendParams, extras: CallExtras = {}): Promise<SendAnswer> {
    const { message, args } = sendArgs(params);
    if (message.taskId && extras.intent?.resend) return { task: await this.resent(message.taskId, args.historyLength, extras.signal) };
    const release = await this.admitted(extras.signal);
    try {
      return await this.deliver(params, extras);
    } finally {
      release();
    }
  }

  private async deliver(params: SendParams, extras: CallExtras): Promise<SendAnswer> {
    const { message, args, push } = sendArgs(params);
    if (message.taskId) {
      await this.intake.ownTask(message.taskId);
      const pushConfigIds = await this.intake.inlinePush(message.taskId, push, extras.intent?.pushDialect);
      return { task: await this.deps.gateway.continue(this.tenant, message.taskId, { ...args, message: await this.intake.followUp(message), pushConfigIds }) };
    }
    const prepared = await this.intake.prepare(message, args, push, extras.headers, extras.intent);
    const task = await this.deps.gateway.start(prepared.input, prepared.args, { resent: prepared.resent });
    // The agent answered with a Message and made no task (§3.1.1): its client gets that, as it would from the agent.
    const reply = answersWithMessages(extras.intent) ? directAnswerOf(task, message.messageId) : undefined;
    return reply ? { message: reply } : { task };
  }

  async get(params: { id: string; historyLength?: number }): Promise<WireTask> {
    await this.intake.ownTask(params.id);
    return this.deps.gateway.get(this.tenant, params.id, params.historyLength);
  }

  async cancel(params: { id: string }): Promise<WireTask> {
    await this.intake.ownTask(params.id);
    return this.deps.gateway.cancel(this.tenant, params.id);
  }

  async list(params: ListTasksQuery): Promise<TaskList> {
    return listTasks(this.deps.pool, this.tenant, this.agent.id, listQuery(params));
  }

  /**
   * SendStreamingMessage / message/stream: delivers the message (a new task, or the next turn of an
   * interrupted one) and streams the task's events from the log until the turn ends (terminal or interrupted:
   * §11.7, as SDK agents do); a new exchange the agent answers with a Message is that Message alone (followExchange).
   * With Last-Event-ID (a reconnect of a stream whose task is known) the message is not sent again: the stream
   * replays the events after that id, then follows the live tail.
   */
  async *sendStream(params: SendParams, extras: CallExtras = {}): AsyncGenerator<ExchangeEvent, void, undefined> {
    const stream = this.requireStream();
    const { message } = sendArgs(params);
    const known = message.taskId ?? (stream.lastEventId !== undefined ? await taskOfMessage(this.deps.pool, this.tenant, message.messageId) : undefined);
    if (known) await this.intake.ownTask(known);
    if (known && stream.lastEventId !== undefined) {
      await requireTask(this.deps, this.tenant, known);
      yield* this.follow(known, stream.lastEventId, this.turnEnd);
      return;
    }
    if (message.taskId && extras.intent?.resend) {
      yield* this.resentStream(message.taskId);
      return;
    }
    const release = await this.admitted(stream.signal);
    try {
      yield* this.deliverStream(params, extras);
    } finally {
      release();
    }
  }

  private async *deliverStream(params: SendParams, extras: CallExtras): AsyncGenerator<ExchangeEvent, void, undefined> {
    const { message, args, push } = sendArgs(params);
    if (message.taskId) {
      // The turn's events are the ones after the current head: the update is only accepted while the task
      // waits for input, so nothing else is logged in between.
      const after = await logHead(this.deps, this.tenant, message.taskId);
      const pushConfigIds = await this.intake.inlinePush(message.taskId, push, extras.intent?.pushDialect);
      await this.deps.gateway.continue(this.tenant, message.taskId, { ...args, returnImmediately: true, message: await this.intake.followUp(message), pushConfigIds });
      yield* this.follow(message.taskId, after, this.turnEnd);
      return;
    }
    const prepared = await this.intake.prepare(message, { ...args, returnImmediately: true }, push, extras.headers, extras.intent);
    const { taskId } = prepared.input;
    // 0.1 and NEXUS have no Message answer: their streams are the task's.
    const exchange = (stop?: AbortSignal) => (answersWithMessages(extras.intent) ? this.followExchange(taskId, stop) : this.follow(taskId, 0, this.turnEnd, stop));
    if (holdOf(prepared.input) > 0) {
      // A paid task is answered once its hold is decided: a client without the funds gets a plain -32050.
      await this.deps.gateway.start(prepared.input, prepared.args, { resent: prepared.resent });
      yield* exchange();
      return;
    }
    // A free task has nothing left to refuse: its first event streams while Temporal starts the workflow.
    const starting = new AbortController();
    let failure: unknown;
    const started = this.deps.gateway.start(prepared.input, prepared.args, { resent: prepared.resent }).then(
      () => undefined,
      (err: unknown) => {
        failure = err;
        starting.abort();
      },
    );
    yield* exchange(starting.signal);
    await started;
    if (failure) throw failure;
  }

  /**
   * SubscribeToTask / tasks/resubscribe. Without Last-Event-ID: the task as of the log's head first (a
   * terminal task is -32004, §1.7), then every later event. With it: exactly the events after that id. Either
   * way the stream stays open until the task is terminal (§3.1.6), past input-required: the answer, whoever
   * sends it, shows on it.
   */
  async *subscribe(params: { id: string }): AsyncGenerator<ExchangeEvent, void, undefined> {
    const stream = this.requireStream();
    const taskId = params.id;
    await this.intake.ownTask(taskId);
    if (stream.lastEventId !== undefined) {
      await requireTask(this.deps, this.tenant, taskId);
      yield* this.follow(taskId, stream.lastEventId, 'task');
      return;
    }
    const { head, snapshot } = await taskAtHead(this.deps, this.tenant, taskId);
    if (isTerminal(snapshot.status.state)) {
      throw a2aError('UnsupportedOperation', `Task ${taskId} is ${stateLabel(snapshot.status.state)}; there is nothing left to subscribe to (reconnect with Last-Event-ID to replay its events)`);
    }
    checkStreamCap(this.deps, this.tenant, taskId);
    stream.seq = head;
    stream.closing = false;
    yield { task: snapshot };
    yield* this.follow(taskId, head, 'task');
  }

  /**
   * A resent message (CallIntent.resend: a 0.1/NEXUS client's retry, or a send to an ended task): nothing is
   * delivered; the answer is the task once the turn in progress (if any) has ended, as the original send was answered.
   */
  private async resent(taskId: string, historyLength?: number, signal = new AbortController().signal): Promise<WireTask> {
    await this.intake.ownTask(taskId);
    const { head, snapshot } = await taskAtHead(this.deps, this.tenant, taskId);
    if (!endsTurn(snapshot.status.state)) {
      // The turn's end is an event of the task's log: waited for there, as a stream would (not a poll).
      const cursor: StreamCursor = { signal, seq: head, closing: false };
      const turn = followTask(this.deps, cursor, this.tenant, taskId, head, 'turn');
      while (!(await turn.next()).done) {
        // read on, to the event that ends the turn (or the client leaving)
      }
      if (signal.aborted) throw a2aError('Internal', `the client left before task ${taskId}'s turn ended`);
    }
    return this.deps.gateway.get(this.tenant, taskId, historyLength);
  }

  /** A resent message's stream (its task's ownership checked): the task's status now, then the events of the turn in progress; one event when none runs. */
  private async *resentStream(taskId: string): AsyncGenerator<ExchangeEvent, void, undefined> {
    const stream = this.requireStream();
    const { head, snapshot } = await taskAtHead(this.deps, this.tenant, taskId);
    stream.seq = head;
    stream.closing = endsTurn(snapshot.status.state);
    yield { task: snapshot };
    if (!stream.closing) yield* this.follow(taskId, head, this.turnEnd);
  }

  /** A place in the gateway's busy phase for this send, once the tenant's share allows (src/api/a2a/fair-gate.ts). */
  private admitted(signal?: AbortSignal): Promise<Release> {
    return this.deps.admission?.enter(this.tenant, signal) ?? Promise.resolve(() => undefined);
  }

  private follow(taskId: string, afterSeq: number, until: StreamEnd, stop?: AbortSignal): AsyncGenerator<ExchangeEvent, void, undefined> {
    return followTask(this.deps, this.requireStream(), this.tenant, taskId, afterSeq, until, stop);
  }

  private followExchange(taskId: string, stop?: AbortSignal): AsyncGenerator<ExchangeEvent, void, undefined> {
    return followExchange(this.deps, this.requireStream(), this.tenant, taskId, this.turnEnd, stop);
  }

  private requireStream(): StreamCursor {
    if (!this.stream) throw a2aError('Internal', 'streaming call without a stream');
    return this.stream;
  }
}

/** A SendMessage request's parts: the message (empty optional fields dropped, as ProtoJSON omits them), how to answer, an inline push config. */
function sendArgs(params: SendParams): { message: WireMessage; args: Omit<SendMessageArgs, 'message'>; push?: Record<string, unknown> } {
  const { configuration, metadata } = params;
  return {
    message: wireMessage(params.message),
    args: {
      returnImmediately: configuration?.returnImmediately ?? false,
      historyLength: configuration?.historyLength,
      // The request's metadata travels with the message to the agent's request (0.1 agents read it as `params.metadata`).
      ...(metadata && Object.keys(metadata).length ? { metadata } : {}),
    },
    push: configuration?.taskPushNotificationConfig as Record<string, unknown> | undefined,
  };
}

/** A message without the empty strings and lists ProtoJSON leaves out (an empty taskId is no task). */
function wireMessage(m: WireMessage): WireMessage {
  const out = { ...m, parts: m.parts.map((p) => (p.mediaType === '' || p.filename === '' ? dropEmpty(p) : p)) };
  return dropEmpty(out);
}

function dropEmpty<T extends object>(o: T): T {
  const out = { ...o } as Record<string, unknown>;
  for (const k of ['contextId', 'taskId', 'extensions', 'referenceTaskIds', 'mediaType', 'filename']) {
    const v = out[k];
    if (v === '' || (Array.isArray(v) && v.length === 0)) delete out[k];
  }
  return out as T;
}

/** A ListTasks request as the projection's query; the proto default status (UNSPECIFIED) means no filter. */
export function listQuery(params: ListTasksQuery): ListTasksQuery {
  const { tenant: _tenant, ...q } = params as Omit<ListTasksQuery, 'status'> & { status?: string };
  if (q.status === 'TASK_STATE_UNSPECIFIED') delete q.status;
  return q as ListTasksQuery;
}

/**
 * Whether the client's dialect has a Message answer: 1.0 and 0.3 do; 0.1 and NEXUS (their translation records the
 * dialect of a new task) answer with tasks only, so their clients keep getting the gateway's task.
 */
function answersWithMessages(intent: CallIntent | undefined): boolean {
  const dialect = intent?.record?.dialect;
  return dialect !== '0.1' && dialect !== 'nexus';
}
