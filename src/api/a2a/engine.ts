/**
 * Runs an engine call (a 1.0 or 0.3 method, its params validated once by the method's schema) on a request handler,
 * and gives its answer as data: a result, an error, or a stream of them. No transport, no envelope, no HTTP.
 *
 * A 1.0 call goes straight to the handler's wire methods (request-handler.ts): its params are already the wire form,
 * and what it throws goes up to the RPC core's one catch, which renders it in the caller's dialect.
 * A 0.3 call goes through the SDK's 0.3 transport, the one translation of that dialect (0.3 ↔ 1.0 both ways, and
 * its errors rendered as 0.3's): it calls the handler through `SdkFacing`, which converts the SDK's types to the
 * wire form and what the handler throws to the SDK error that renders it, as the core's catch would.
 */
import {
  AgentCard,
  type CancelTaskRequest,
  type GetTaskRequest,
  ListTasksRequest,
  type ListTasksResponse,
  Message,
  SendMessageRequest,
  StreamResponse,
  type SubscribeToTaskRequest,
  Task,
} from '@a2a-js/sdk';
import { LegacyJsonRpcTransportHandler } from '@a2a-js/sdk/compat/v0_3/server';
import { type A2ARequestHandler, type ServerCallContext, UnauthenticatedUser, defaultServerCallContextBuilder } from '@a2a-js/sdk/server';
import { type CallIntent, INTENT_STATE } from './dialects';
import { A2A_ERRORS, a2aError, protocolError } from './errors';
import type { AgentRequestHandler, CallExtras, SendParams, TaskList } from './request-handler';
import type { ListTasksQuery } from './schemas';
import type { Dialect, WireTask } from '../../../task/wire';

/** A JSON-RPC error object, in a dialect's form. */
export type RpcError = { code: number; message: string; data?: unknown };
/** One answer, or one stream event: a result or an error. */
export type RpcOutcome = { result: unknown } | { error: RpcError };
/** What an engine call answers: one outcome, or the events of a stream (which throws an error it meets). */
export type EngineAnswer = RpcOutcome | { events: AsyncIterator<RpcOutcome> };

export interface EngineCall {
  method: string;
  params: unknown;
  intent?: CallIntent;
  headers: Record<string, string | string[] | undefined>;
  tenant: string;
  /** Aborted when the client has gone: a send that waits without delivering (a resend) stops waiting. */
  signal?: AbortSignal;
}

/**
 * What an error thrown below the protocol stands for (the RPC core's: an outage becomes the A2A error naming the
 * dependency, -32054). The core's catch and the 0.3 adapter both read errors through it.
 */
export type Raised = (err: unknown) => unknown;

/**
 * Runs the call. A 1.0 call's errors are thrown (the core's catch answers them); a 0.3 call's come back rendered by
 * the SDK, `raised` read first.
 */
export async function runEngine(handler: AgentRequestHandler, call: EngineCall, engine: Dialect, raised: Raised): Promise<EngineAnswer> {
  return engine === '1.0' ? runV1(handler, call) : runLegacy(new SdkFacing(handler, raised), call);
}

async function runV1(h: AgentRequestHandler, call: EngineCall): Promise<EngineAnswer> {
  const extras = { intent: call.intent, headers: call.headers, signal: call.signal };
  const p = call.params as Record<string, unknown>;
  switch (call.method) {
    case 'SendMessage': {
      const a = await h.send(p as SendParams, extras);
      return { result: 'message' in a ? { message: Message.toJSON(Message.fromJSON(a.message)) } : { task: canonical(a.task) } };
    }
    case 'GetTask':
      return { result: canonical(await h.get(p as { id: string; historyLength?: number })) };
    case 'CancelTask':
      return { result: canonical(await h.cancel(p as { id: string })) };
    case 'ListTasks':
      return { result: taskPage(await h.list(p as ListTasksQuery), p.includeArtifacts === true) };
    case 'SendStreamingMessage':
      return { events: outcomes(h.sendStream(p as SendParams, extras)) };
    case 'SubscribeToTask':
      return { events: outcomes(h.subscribe(p as { id: string })) };
  }
  return { error: { code: A2A_ERRORS.MethodNotFound.code, message: `Method not found: ${call.method}` } };
}

/** A task in ProtoJSON's canonical form (default values left out), as every 1.0 answer shows it. */
function canonical(task: WireTask): unknown {
  return Task.toJSON(Task.fromJSON(task));
}

/** A ListTasks page: every field present; a task's artifacts shown (as an empty list too) when they were asked for. */
function taskPage(page: TaskList, includeArtifacts: boolean): unknown {
  const tasks = page.tasks.map((t) => canonical(t) as { artifacts?: unknown });
  return {
    tasks: includeArtifacts ? tasks.map((t) => (t.artifacts === undefined ? { ...t, artifacts: [] } : t)) : tasks,
    nextPageToken: page.nextPageToken ?? '',
    pageSize: page.pageSize ?? 0,
    totalSize: page.totalSize ?? 0,
  };
}

async function* outcomes(events: AsyncIterable<unknown>): AsyncGenerator<RpcOutcome, void, undefined> {
  for await (const e of events) yield { result: StreamResponse.toJSON(StreamResponse.fromJSON(e)) };
}

/** A 0.3 call through the SDK's 0.3 transport (the envelope it came in), over the handler's SDK-typed face. */
async function runLegacy(h: SdkFacing, call: EngineCall): Promise<EngineAnswer> {
  const context = defaultServerCallContextBuilder({ extensions: undefined, user: new UnauthenticatedUser(), headers: call.headers, requestedVersion: '0.3', tenant: call.tenant });
  // The handler reads the translation's intent here: a channel no client can write to.
  if (call.intent) context.state.set(INTENT_STATE, call.intent);
  const answer = await new LegacyJsonRpcTransportHandler(h).handle({ jsonrpc: '2.0', method: call.method, id: null, params: call.params }, context);
  if (answer && typeof answer === 'object' && Symbol.asyncIterator in answer) {
    return { events: legacyEvents(answer as AsyncGenerator<{ result?: unknown; error?: RpcError }>) };
  }
  const { result, error } = answer as { result?: unknown; error?: RpcError };
  return error ? { error } : { result };
}

async function* legacyEvents(events: AsyncIterable<{ result?: unknown; error?: RpcError }>): AsyncGenerator<RpcOutcome, void, undefined> {
  for await (const e of events) yield e.error !== undefined ? { error: e.error } : { result: e.result };
}

/**
 * The handler as the SDK's 0.3 transport calls it: the SDK's types converted to the wire form and back at this edge
 * only, and every error thrown as the SDK error that renders it in 0.3 (an outage as -32054, a task error by its row).
 */
class SdkFacing implements A2ARequestHandler {
  constructor(
    private readonly h: AgentRequestHandler,
    private readonly raised: Raised,
  ) {}

  async getAgentCard(): Promise<AgentCard> {
    return AgentCard.fromJSON(await this.mapped(this.h.card()));
  }

  async getAuthenticatedExtendedAgentCard(): Promise<AgentCard> {
    throw a2aError('UnsupportedOperation', 'Switchboard does not serve extended agent cards');
  }

  async sendMessage(params: SendMessageRequest, context?: ServerCallContext): Promise<Message | Task> {
    const answer = await this.mapped(this.h.send(SendMessageRequest.toJSON(params) as SendParams, extrasOf(context)));
    return 'message' in answer ? Message.fromJSON(answer.message) : Task.fromJSON(answer.task);
  }

  async getTask(params: GetTaskRequest): Promise<Task> {
    return Task.fromJSON(await this.mapped(this.h.get(params)));
  }

  async cancelTask(params: CancelTaskRequest): Promise<Task> {
    return Task.fromJSON(await this.mapped(this.h.cancel(params)));
  }

  async listTasks(params: ListTasksRequest): Promise<ListTasksResponse> {
    const page = await this.mapped(this.h.list(ListTasksRequest.toJSON(params) as ListTasksQuery));
    return { ...page, tasks: page.tasks.map((t) => Task.fromJSON(t)) };
  }

  async *sendMessageStream(params: SendMessageRequest, context?: ServerCallContext): AsyncGenerator<StreamResponse, void, undefined> {
    yield* this.mappedStream(this.h.sendStream(SendMessageRequest.toJSON(params) as SendParams, extrasOf(context)));
  }

  async *resubscribe(params: SubscribeToTaskRequest): AsyncGenerator<StreamResponse, void, undefined> {
    yield* this.mappedStream(this.h.subscribe(params));
  }

  // The push-config methods never come here: the RPC core answers them (push-methods.ts), because the SDK's
  // handlers would drop deliveryStatus from the answer. These only satisfy the interface.
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

  private async mapped<T>(answer: Promise<T>): Promise<T> {
    try {
      return await answer;
    } catch (err) {
      throw protocolError(this.raised(err));
    }
  }

  private async *mappedStream(events: AsyncIterable<unknown>): AsyncGenerator<StreamResponse, void, undefined> {
    try {
      for await (const e of events) yield StreamResponse.fromJSON(e);
    } catch (err) {
      throw protocolError(this.raised(err));
    }
  }
}

/** What the RPC core put in the SDK's call context (the 0.3 transport): the translation's intent and the headers. */
function extrasOf(context: ServerCallContext | undefined): CallExtras {
  return {
    intent: context?.state.get(INTENT_STATE) as CallIntent | undefined,
    headers: context?.state.get('headers') as Record<string, string | string[] | undefined> | undefined,
  };
}

const notHere = () => a2aError('Internal', 'push-config methods are answered by the RPC core, not the request handler');
