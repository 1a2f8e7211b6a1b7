/**
 * Switchboard's implementation of the A2A server interface of @a2a-js/sdk, for one registered agent.
 * The SDK's transport handlers parse and render both dialects; this class turns each call into work on the
 * task's workflow (through TaskGateway) or a read of the projection.
 */
import { randomUUID } from 'node:crypto';
import {
  AgentCard,
  type CancelTaskRequest,
  type GetTaskRequest,
  ListTasksRequest,
  type ListTasksResponse,
  type Message,
  SendMessageRequest,
  StreamResponse,
  type SubscribeToTaskRequest,
  Task,
} from '@a2a-js/sdk';
import type { A2ARequestHandler, ServerCallContext } from '@a2a-js/sdk/server';
import type { Pool } from 'pg';
import { gatewayCard } from '../agents/cards';
import type { Agent } from '../agents/registry';
import { agentOfTask, findTask, listTasks, taskOfMessage } from '../db/task-store';
import type { Caller } from '../auth/caller';
import { claimWithinQuota, type TenantQuotas } from '../auth/quotas';
import { outageOf } from '../health';
import { appendEvents, closesStream, headSeq, lastEvent, snapshotAt } from '../events/event-log';
import type { StreamEvent } from '../events/event-log';
import { followEvents } from '../events/follow';
import type { EventHub } from '../events/hub';
import type { PushDialect, PushStore } from '../push/store';
import type { TaskGateway } from '../temporal/task-gateway';
import { storeInlinePushConfig } from './push-methods';
import { PARENT_TASK_HEADER } from '../../workflows/messages';
import { isInterrupted, isTerminal, stateLabel } from '../../workflows/task-state';
import type { SendMessageArgs, TaskInput, WireMessage, WireTask } from '../../workflows/types';
import { a2aError } from './errors';
import type { ListTasksQuery } from './schemas';

export interface HandlerDeps {
  gateway: TaskGateway;
  pool: Pool;
  hub: EventHub;
  push: PushStore;
  inputTimeoutMs: number;
  /** Multi-agent jobs: how deep a chain of tasks started by agents may go (SWITCHBOARD_MAX_HOPS). */
  maxHops: number;
  /** First retry delay of a failed webhook delivery (ms). */
  pushRetryInitialMs?: number;
  streamLimits: StreamLimits;
  /** The tenants' quotas: a new task is claimed only within them. */
  quotas: TenantQuotas;
}

export interface StreamLimits {
  /** Open streams allowed on one task. */
  maxPerTask: number;
  /** Open streams allowed in this process. */
  maxTotal: number;
}

/**
 * The SSE side of one streaming call, shared with the route that writes it: what the client resumes from,
 * when it went away, and the log position and kind of the event just yielded (the SSE `id:`; 0.3 `final`).
 */
export interface StreamCursor {
  lastEventId?: number;
  signal: AbortSignal;
  seq: number;
  closing: boolean;
}

/** A cap on open streams was reached (the route answers HTTP 429). */
export class StreamLimitError extends Error {}

const toTask = (t: WireTask) => Task.fromJSON(t);

export class AgentRequestHandler implements A2ARequestHandler {
  private readonly tenant: string;

  /**
   * @param agent the agent of the endpoint; the front door's stand-in (id '') serves every agent's tasks.
   * @param caller who is calling (src/auth/plugin.ts authenticated them); the handler acts in their tenant.
   */
  constructor(
    private readonly agent: Agent,
    private readonly caller: Caller,
    private readonly rpcUrl: string,
    private readonly deps: HandlerDeps,
    private readonly stream?: StreamCursor,
    private readonly dialect: PushDialect = '1.0',
  ) {
    this.tenant = caller.tenant;
  }

  /**
   * A per-agent endpoint answers only for its own agent's tasks: another agent's task of the tenant answers
   * exactly as an unknown one does (-32001, the same message), so the endpoint is no oracle either.
   * @throws TaskNotFound
   */
  private async ownTask(taskId: string): Promise<void> {
    if (this.agent.id === '') return;
    let agentId: string | undefined;
    try {
      agentId = await agentOfTask(this.deps.pool, this.tenant, taskId);
    } catch (err) {
      // PostgreSQL is away: the workflow's search attributes know the agent too (reads keep working).
      if (!outageOf(err)) throw err;
      agentId = await this.deps.gateway.agentOf(this.tenant, taskId);
    }
    if (agentId !== undefined && agentId !== this.agent.id) throw a2aError('TaskNotFound', `Task ${taskId} not found`);
  }

  async getAgentCard(): Promise<AgentCard> {
    return AgentCard.fromJSON(gatewayCard(this.agent.card, this.rpcUrl));
  }

  async getAuthenticatedExtendedAgentCard(): Promise<AgentCard> {
    throw a2aError('UnsupportedOperation', 'Switchboard does not serve extended agent cards');
  }

  async sendMessage(params: SendMessageRequest, context?: ServerCallContext): Promise<Message | Task> {
    const { message, args, push } = this.sendArgs(params);
    if (message.taskId) {
      await this.ownTask(message.taskId);
      const pushConfigIds = await this.inlinePush(message.taskId, push);
      return toTask(await this.deps.gateway.continue(this.tenant, message.taskId, { ...args, message, pushConfigIds }));
    }
    return toTask(await this.startTask(message, args, push, context));
  }

  /**
   * §3.1: task ids are the server's; a contextId the client gave is kept, otherwise one is minted. The
   * messageId is claimed first, so the same message sent again finds its task instead of starting another.
   */
  private async startTask(message: WireMessage, args: Omit<SendMessageArgs, 'message'>, push?: Record<string, unknown>, context?: ServerCallContext): Promise<WireTask> {
    const prepared = await this.prepareTask(message, args, push, context);
    return this.deps.gateway.start(prepared.input, prepared.args);
  }

  /**
   * Everything a new task needs before its workflow starts: the budget and parent checks, the task id (the
   * messageId claim), inline push configs, the link to a parent, and the task's first event, `submitted`, in
   * its log (so a stream can show it before Temporal has started anything).
   */
  private async prepareTask(
    message: WireMessage,
    args: Omit<SendMessageArgs, 'message'>,
    push?: Record<string, unknown>,
    context?: ServerCallContext,
  ): Promise<{ input: TaskInput; args: SendMessageArgs }> {
    const budgetMinor = this.budgetOf(message);
    const parent = await this.parentOf(message, context);
    const quotas = await this.deps.quotas.of(this.tenant);
    if (!quotas) throw a2aError('Internal', `tenant ${this.tenant} has no quotas (it does not exist)`);
    const { taskId, resent } = await claimWithinQuota(this.deps.pool, this.tenant, message.messageId, randomUUID(), quotas, this.agent.id);
    if (resent) await this.ownTask(taskId);
    args = { ...args, pushConfigIds: await this.inlinePush(taskId, push) };
    // Linked before the child runs, so a cancel of the parent reaches it however soon it comes.
    if (parent) await this.deps.gateway.linkChild(this.tenant, parent.taskId, { taskId, agentId: this.agent.id });
    const contextId = message.contextId || randomUUID();
    const submitted: WireTask = {
      id: taskId,
      contextId,
      status: { state: 'TASK_STATE_SUBMITTED', timestamp: new Date().toISOString() },
      history: [{ ...message, taskId, contextId }],
      artifacts: [],
    };
    // Key v0: the workflow's own changes are v1, v2…; a resent message logs nothing new.
    this.deps.hub.publish(this.tenant, taskId, await appendEvents(this.deps.pool, this.tenant, taskId, [{ key: 'v0', event: { task: submitted } }]));
    const { agent } = this;
    return {
      input: {
        tenant: this.tenant,
        taskId,
        contextId,
        requester: this.tenant,
        ...(parent ? { parentTaskId: parent.taskId, depth: parent.depth } : {}),
        budgetMinor,
        inputTimeoutMs: this.deps.inputTimeoutMs,
        pushRetryInitialMs: this.deps.pushRetryInitialMs,
        agent: { agentId: agent.id, endpoint: agent.endpoint, priceMinor: agent.priceMinor, retry: agent.retry },
      },
      args: { ...args, message: { ...message, contextId } },
    };
  }


  /**
   * The first message's `metadata.budgetMinor`: the most the client will pay for the task, in integer minor
   * units. It is held instead of the agent's price, so it caps a cost the agent reports; below the price it
   * could not pay for the task at all, so it is refused (-32602) before anything starts.
   */
  private budgetOf(message: WireMessage): number | undefined {
    const budget = (message.metadata as Record<string, unknown> | undefined)?.budgetMinor;
    if (budget === undefined) return undefined;
    const field = 'message.metadata.budgetMinor';
    if (typeof budget !== 'number' || !Number.isSafeInteger(budget) || budget < 0) {
      throw a2aError('InvalidParams', `${field} must be a non-negative integer (minor units)`, [{ field, description: 'must be a non-negative integer' }]);
    }
    if (budget < this.agent.priceMinor) {
      const description = `is below the agent's price of ${this.agent.priceMinor}`;
      throw a2aError('InvalidParams', `${field} ${budget} ${description}; the task could not be paid for`, [{ field, description }]);
    }
    return budget;
  }

  private sendArgs(params: SendMessageRequest): { message: WireMessage; args: Omit<SendMessageArgs, 'message'>; push?: Record<string, unknown> } {
    const json = SendMessageRequest.toJSON(params) as {
      message: WireMessage;
      configuration?: { returnImmediately?: boolean; historyLength?: number; taskPushNotificationConfig?: Record<string, unknown> };
    };
    return {
      message: json.message,
      args: { returnImmediately: json.configuration?.returnImmediately ?? false, historyLength: json.configuration?.historyLength },
      push: json.configuration?.taskPushNotificationConfig,
    };
  }

  /**
   * Multi-agent jobs: a task started by an agent on behalf of a Switchboard task names that task in the
   * `X-Switchboard-Parent-Task` header or `metadata.switchboard.parentTaskId` (Switchboard sends both when it
   * forwards). Only an agent key may name one, and only a task its own agent runs: the link is the agent's
   * explicit claim, not something a client can attach to another team's job. The new task is one hop deeper,
   * and past the hop limit it is refused.
   */
  private async parentOf(message: WireMessage, context?: ServerCallContext): Promise<{ taskId: string; depth: number } | undefined> {
    const headers = context?.state.get('headers') as Record<string, string | string[] | undefined> | undefined;
    const header = headers?.[PARENT_TASK_HEADER];
    const fromMeta = (message.metadata?.switchboard as { parentTaskId?: unknown } | undefined)?.parentTaskId;
    const parentTaskId = (Array.isArray(header) ? header[0] : header) || (typeof fromMeta === 'string' ? fromMeta : undefined);
    if (!parentTaskId) return undefined;
    if (this.caller.role !== 'agent') {
      throw a2aError(
        'HopLimit',
        `A parent task (X-Switchboard-Parent-Task / metadata.switchboard.parentTaskId) may only be named with an agent key (role agent); this key's role is ${this.caller.role}`,
      );
    }
    const parent = await findTask(this.deps.pool, this.tenant, parentTaskId);
    if (parent && parent.agentId !== this.caller.agentId) {
      throw a2aError('HopLimit', `The parent task ${parentTaskId} is not run by this key's agent (${this.caller.agentId}); an agent starts child tasks only for its own tasks`);
    }
    if (!parent) throw a2aError('HopLimit', `The parent task ${parentTaskId} (X-Switchboard-Parent-Task / metadata.switchboard.parentTaskId) does not exist`);
    const depth = parent.depth + 1;
    if (depth > this.deps.maxHops) {
      throw a2aError(
        'HopLimit',
        `Hop limit reached: this task would be ${depth} hops below its root task (parent ${parentTaskId}; the limit is ${this.deps.maxHops}, SWITCHBOARD_MAX_HOPS). Agents calling each other in a loop?`,
      );
    }
    return { taskId: parentTaskId, depth };
  }

  /** An inline push config (SendMessage configuration) is stored for the task before the message goes in. */
  private async inlinePush(taskId: string, push: Record<string, unknown> | undefined): Promise<string[] | undefined> {
    if (!push?.url) return undefined;
    return [await storeInlinePushConfig(this.deps.push, this.tenant, this.dialect, taskId, push)];
  }

  async getTask(params: GetTaskRequest): Promise<Task> {
    await this.ownTask(params.id);
    return toTask(await this.deps.gateway.get(this.tenant, params.id, params.historyLength));
  }

  async cancelTask(params: CancelTaskRequest): Promise<Task> {
    await this.ownTask(params.id);
    return toTask(await this.deps.gateway.cancel(this.tenant, params.id));
  }

  async listTasks(params: ListTasksRequest): Promise<ListTasksResponse> {
    const q = ListTasksRequest.toJSON(params) as Omit<ListTasksQuery, 'status'> & { status?: string };
    if (q.status === 'TASK_STATE_UNSPECIFIED') delete q.status; // the proto default means no filter
    const page = await listTasks(this.deps.pool, this.tenant, this.agent.id, q as ListTasksQuery);
    return { ...page, tasks: page.tasks.map(toTask) };
  }

  /**
   * SendStreamingMessage / message/stream: delivers the message (a new task, or the next turn of an
   * interrupted one) and streams the task's events from the log until the turn ends. With Last-Event-ID
   * (a reconnect of a stream whose task is known) the message is not sent again: the stream replays the
   * events after that id, then follows the live tail.
   */
  async *sendMessageStream(params: SendMessageRequest, context?: ServerCallContext): AsyncGenerator<StreamResponse, void, undefined> {
    const stream = this.requireStream();
    const { message, args, push } = this.sendArgs(params);
    const known = message.taskId ?? (stream.lastEventId !== undefined ? await taskOfMessage(this.deps.pool, this.tenant, message.messageId) : undefined);
    if (known) await this.ownTask(known);
    if (known && stream.lastEventId !== undefined) {
      await this.requireTask(known);
      yield* this.follow(known, stream.lastEventId);
      return;
    }
    if (message.taskId) {
      // The turn's events are the ones after the current head: the update is only accepted while the task
      // waits for input, so nothing else is logged in between.
      const after = await headSeq(this.deps.pool, this.tenant, message.taskId);
      const pushConfigIds = await this.inlinePush(message.taskId, push);
      await this.deps.gateway.continue(this.tenant, message.taskId, { ...args, returnImmediately: true, message, pushConfigIds });
      yield* this.follow(message.taskId, after);
      return;
    }
    const prepared = await this.prepareTask(message, { ...args, returnImmediately: true }, push, context);
    const { taskId } = prepared.input;
    if ((prepared.input.budgetMinor ?? prepared.input.agent.priceMinor) > 0) {
      // A paid task is answered once its hold is decided: a client without the funds gets a plain -32050.
      await this.deps.gateway.start(prepared.input, prepared.args);
      yield* this.follow(taskId, 0);
      return;
    }
    // A free task has nothing left to refuse: its first event streams while Temporal starts the workflow.
    const starting = new AbortController();
    let failure: unknown;
    const started = this.deps.gateway.start(prepared.input, prepared.args).then(
      () => undefined,
      (err: unknown) => {
        failure = err;
        starting.abort();
      },
    );
    yield* this.follow(taskId, 0, starting.signal);
    await started;
    if (failure) throw failure;
  }

  /**
   * SubscribeToTask / tasks/resubscribe. Without Last-Event-ID: the task as of the log's head first (a
   * terminal task is -32004, §1.7), then every later event. With it: exactly the events after that id.
   */
  async *resubscribe(params: SubscribeToTaskRequest): AsyncGenerator<StreamResponse, void, undefined> {
    const stream = this.requireStream();
    const taskId = params.id;
    await this.ownTask(taskId);
    if (stream.lastEventId !== undefined) {
      await this.requireTask(taskId);
      yield* this.follow(taskId, stream.lastEventId);
      return;
    }
    // The log answers without a workflow query, which can take seconds right after a worker restart.
    const head = await headSeq(this.deps.pool, this.tenant, taskId);
    const snapshot = (head > 0 ? await snapshotAt(this.deps.pool, this.tenant, taskId, head) : undefined) ?? (await this.deps.gateway.get(this.tenant, taskId));
    if (isTerminal(snapshot.status.state)) {
      throw a2aError('UnsupportedOperation', `Task ${taskId} is ${stateLabel(snapshot.status.state)}; there is nothing left to subscribe to (reconnect with Last-Event-ID to replay its events)`);
    }
    this.checkStreamCap(taskId);
    stream.seq = head;
    stream.closing = isInterrupted(snapshot.status.state);
    yield StreamResponse.fromJSON({ task: snapshot });
    if (stream.closing) return;
    yield* this.follow(taskId, head);
  }

  /** TaskNotFound unless the task exists: its event log says so, or else the workflow or projection. */
  private async requireTask(taskId: string): Promise<void> {
    if ((await headSeq(this.deps.pool, this.tenant, taskId)) > 0) return;
    await this.deps.gateway.get(this.tenant, taskId);
  }

  /** Streams the task's logged events after `afterSeq` until one ends the stream (terminal or interrupted). */
  private async *follow(taskId: string, afterSeq: number, stop?: AbortSignal): AsyncGenerator<StreamResponse, void, undefined> {
    const stream = this.requireStream();
    this.checkStreamCap(taskId);
    const { pool } = this.deps;
    // A reconnect after the stream's last event: if that event closed the stream, nothing more is coming.
    const last = await lastEvent(pool, this.tenant, taskId);
    if (last && afterSeq >= last.seq && closesStream(last.event)) return;
    // A replay goes through earlier turns: an input-required the log has already moved past does not end it
    // (Last-Event-ID: n means every event after n); only the newest one, or a terminal one, does.
    const head = last?.seq ?? 0;
    for await (const e of followEvents({ pool, hub: this.deps.hub, tenant: this.tenant, taskId, afterSeq, signal: stop ? AbortSignal.any([stream.signal, stop]) : stream.signal })) {
      stream.seq = e.seq;
      stream.closing = closesStream(e.event) && (e.seq >= head || endsTask(e.event));
      yield StreamResponse.fromJSON(e.event);
      if (stream.closing) return;
    }
  }

  private checkStreamCap(taskId: string): void {
    const { maxPerTask } = this.deps.streamLimits;
    if (this.deps.hub.readers(this.tenant, taskId) >= maxPerTask) {
      throw new StreamLimitError(`Task ${taskId} already has ${maxPerTask} open streams (SWITCHBOARD_MAX_STREAMS_PER_TASK); close one or retry later`);
    }
  }

  private requireStream(): StreamCursor {
    if (!this.stream) throw a2aError('Internal', 'streaming call without a stream');
    return this.stream;
  }

  // The push-config methods never reach this class: the route answers them (src/a2a/push-methods.ts), because
  // the SDK's handlers would drop deliveryStatus from the answer. These only satisfy the interface.
  async createTaskPushNotificationConfig(): Promise<never> {
    throw notHere();
  }
  async getTaskPushNotificationConfig(): Promise<never> {
    throw notHere();
  }
  async listTaskPushNotificationConfigs(): Promise<never> {
    throw notHere();
  }
  async deleteTaskPushNotificationConfig(): Promise<never> {
    throw notHere();
  }
}

/** A status update to a terminal state: nothing can follow it in the log. */
function endsTask(e: StreamEvent): boolean {
  return 'statusUpdate' in e && isTerminal(e.statusUpdate.status.state);
}

const notHere = () => a2aError('Internal', 'push-config methods are answered by the JSON-RPC route, not the request handler');
