/**
 * The A2A request handler behind the gRPC binding. The SDK's `grpcService` decodes each request into the SDK's
 * types and calls this handler; it hands the call to the same RPC core that answers JSON-RPC and HTTP+JSON
 * (src/api/a2a/rpc-handler.ts: role, validation, outage and stream-cap checks, the endpoint's resolver, the per-agent
 * or front-door handler) as the 1.0 method it is and its params as an object (no envelope, no text), and turns the
 * answer back into the SDK's types, or its error into the binding's own (gRPC status code with
 * google.rpc.ErrorInfo details, by the one error table). So one set of checks stands behind all three bindings,
 * and their behaviour cannot drift.
 *
 * Who calls and which endpoint is meant travel in the SDK's call context, as its `user` (a BindingCall the
 * transport built after authenticating the caller).
 */
import {
  AgentCard,
  CancelTaskRequest,
  DeleteTaskPushNotificationConfigRequest,
  type GetExtendedAgentCardRequest,
  GetTaskPushNotificationConfigRequest,
  GetTaskRequest,
  ListTaskPushNotificationConfigsRequest,
  ListTaskPushNotificationConfigsResponse,
  ListTasksRequest,
  ListTasksResponse,
  Message,
  SendMessageRequest,
  StreamResponse,
  SubscribeToTaskRequest,
  Task,
  TaskPushNotificationConfig,
} from '@a2a-js/sdk';
import { A2AError, fromJsonRpcErrorResponse } from '@a2a-js/sdk/errors';
import type { A2ARequestHandler, ServerCallContext, User } from '@a2a-js/sdk/server';
import type { Caller } from '../../core/auth/caller';
import type { A2AEndpoints } from './endpoints';
import { A2A_ERRORS } from './errors';
import { bindingErrorName, errorInfoMetadata, errorNameOf, grpcStatusOf } from './error-forms';
import { A2A_DOMAIN, ERRORS, type ErrorName, SWITCHBOARD_DOMAIN } from '../../../task/errors';
import type { Refused, RpcAnswer, RpcError, RpcOutcome, SseFrame } from './rpc-handler';

export type Binding = 'HTTP+JSON' | 'GRPC';

/** What a stream writes to, for pacing a slow reader (an HTTP response, a gRPC call). */
export interface StreamSink {
  /** True while the reader is this far behind that no more events should be produced for it. */
  backlogged(): boolean;
  once(event: 'drain' | 'close', listener: () => void): unknown;
  removeListener(event: 'drain' | 'close', listener: () => void): unknown;
}

export interface BindingCallOptions {
  caller: Caller;
  /** The agent the URL path names (REST's `/agents/:id/rest`); else the request's A2A `tenant`, else the front door. */
  agentId?: string;
  /** Request headers or call metadata (the handler reads X-Switchboard-Parent-Task from them). */
  headers: Record<string, string | string[] | undefined>;
  /** Resume a stream after this log position (SSE `Last-Event-ID`, gRPC metadata `last-event-id`), raw. */
  lastEventId?: string;
  /** The gateway's base URL as this client reaches it. */
  base: string;
  /** Aborted when the client goes away. */
  signal: AbortSignal;
  /** Aborted when Switchboard shuts down: open streams end with a last error naming where to resume. */
  closing: AbortSignal;
  /** Told the log position of each stream event just before it is written (REST writes it as the SSE `id:`). */
  onEvent?: (id: number | undefined) => void;
  /** Told when the core refuses the call with a `Retry-After` (a 429 or 503): REST sends it as that header. */
  onRetryAfter?: (seconds: string) => void;
  sink?: StreamSink;
  /** How long a backlogged reader may take to catch up before its stream is cut off. */
  drainTimeoutMs: number;
}

/** The SDK call context's user on the REST and gRPC bindings: the authenticated caller and the call's particulars. */
export class BindingCall implements User {
  /** The error the call failed with, as this handler threw it (the gRPC server adds its google.rpc.Status details). */
  failed?: unknown;
  constructor(readonly o: BindingCallOptions) {}
  get isAuthenticated(): boolean {
    return true;
  }
  get userName(): string {
    return this.o.caller.keyId;
  }
}

/**
 * The card the SDK's transports check a request's A2A-Version (and the push capability) against; they never
 * show it. Clients read each endpoint's own card from the card routes (src/core/agents/cards.ts gatewayCard).
 */
const SERVED = AgentCard.fromJSON({
  name: 'Switchboard',
  capabilities: { streaming: true, pushNotifications: true },
  supportedInterfaces: [
    { url: '', protocolBinding: 'HTTP+JSON', protocolVersion: '1.0' },
    { url: '', protocolBinding: 'GRPC', protocolVersion: '1.0' },
  ],
});

export class BindingHandler implements A2ARequestHandler {
  constructor(
    private readonly endpoints: A2AEndpoints,
    private readonly binding: Binding,
  ) {}

  async getAgentCard(): Promise<AgentCard> {
    return SERVED;
  }

  async getAuthenticatedExtendedAgentCard(params: GetExtendedAgentCardRequest, context: ServerCallContext): Promise<AgentCard> {
    return AgentCard.fromJSON(await this.call('GetExtendedAgentCard', params as unknown as { tenant?: string }, {}, context));
  }

  async sendMessage(params: SendMessageRequest, context: ServerCallContext): Promise<Message | Task> {
    const result = (await this.call('SendMessage', params, SendMessageRequest.toJSON(params), context)) as { task?: unknown; message?: unknown };
    return result.message !== undefined ? Message.fromJSON(result.message) : Task.fromJSON(result.task);
  }

  async getTask(params: GetTaskRequest, context: ServerCallContext): Promise<Task> {
    return Task.fromJSON(await this.call('GetTask', params, GetTaskRequest.toJSON(params), context));
  }

  async cancelTask(params: CancelTaskRequest, context: ServerCallContext): Promise<Task> {
    return Task.fromJSON(await this.call('CancelTask', params, CancelTaskRequest.toJSON(params), context));
  }

  async listTasks(params: ListTasksRequest, context: ServerCallContext): Promise<ListTasksResponse> {
    return ListTasksResponse.fromJSON(await this.call('ListTasks', params, ListTasksRequest.toJSON(params), context));
  }

  async createTaskPushNotificationConfig(params: TaskPushNotificationConfig, context: ServerCallContext): Promise<TaskPushNotificationConfig> {
    const json = TaskPushNotificationConfig.toJSON(params);
    return TaskPushNotificationConfig.fromJSON(await this.call('CreateTaskPushNotificationConfig', params, json, context));
  }

  async getTaskPushNotificationConfig(params: GetTaskPushNotificationConfigRequest, context: ServerCallContext): Promise<TaskPushNotificationConfig> {
    const json = GetTaskPushNotificationConfigRequest.toJSON(params);
    return TaskPushNotificationConfig.fromJSON(await this.call('GetTaskPushNotificationConfig', params, json, context));
  }

  async listTaskPushNotificationConfigs(params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext): Promise<ListTaskPushNotificationConfigsResponse> {
    const json = ListTaskPushNotificationConfigsRequest.toJSON(params);
    return ListTaskPushNotificationConfigsResponse.fromJSON(await this.call('ListTaskPushNotificationConfigs', params, json, context));
  }

  async deleteTaskPushNotificationConfig(params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext): Promise<void> {
    await this.call('DeleteTaskPushNotificationConfig', params, DeleteTaskPushNotificationConfigRequest.toJSON(params), context);
  }

  sendMessageStream(params: SendMessageRequest, context: ServerCallContext): AsyncGenerator<StreamResponse, void, undefined> {
    return this.stream('SendStreamingMessage', params, SendMessageRequest.toJSON(params), context);
  }

  resubscribe(params: SubscribeToTaskRequest, context: ServerCallContext): AsyncGenerator<StreamResponse, void, undefined> {
    return this.stream('SubscribeToTask', params, SubscribeToTaskRequest.toJSON(params), context);
  }

  /** A refusal's Retry-After, handed to the binding (the SDK's error renderer sets no headers of its own). */
  private passRetryAfter(answer: { retryAfterS?: number }, context: ServerCallContext): void {
    if (answer.retryAfterS !== undefined) this.callOf(context).o.onRetryAfter?.(String(answer.retryAfterS));
  }

  /** One unary call through the RPC core; its JSON-RPC result, or the binding's error. */
  private async call(method: string, request: { tenant?: string }, params: unknown, context: ServerCallContext): Promise<unknown> {
    try {
      return await this.unary(method, request, params, context);
    } catch (err) {
      throw this.failed(err, request, context);
    }
  }

  /**
   * Records the error the call fails with; on gRPC, a call that named no `tenant` went to the routing front door,
   * and its error says so: an agent's gRPC interface is named by the `tenant` its card gives.
   */
  private failed(err: unknown, request: { tenant?: string }, context: ServerCallContext): unknown {
    const call = this.callOf(context);
    if (this.binding === 'GRPC' && !request.tenant && call.o.agentId === undefined && err instanceof Error) {
      err.message += ` (this call named no tenant, so it went to the routing front door: an agent's gRPC interface needs the tenant its card's GRPC interface gives, which is the agent's id)`;
    }
    call.failed = err;
    return err;
  }

  private async unary(method: string, request: { tenant?: string }, params: unknown, context: ServerCallContext): Promise<unknown> {
    const answer = await this.answer(method, request, params, context);
    if ('stream' in answer) throw this.error({ code: A2A_ERRORS.Internal.code, message: `${method} answered with a stream` });
    if ('error' in answer) {
      this.passRetryAfter(answer, context);
      throw this.error(answer.error, answer.refused);
    }
    return answer.result ?? {};
  }

  /**
   * A streaming call through the RPC core: its events in the SDK's type, each announced with its log position
   * (call.onEvent) before it is handed on. A reader that falls behind is waited for, then cut off with an error
   * naming the position to resume from; so is every open stream when Switchboard shuts down.
   */
  private async *stream(method: string, request: { tenant?: string }, params: unknown, context: ServerCallContext): AsyncGenerator<StreamResponse, void, undefined> {
    try {
      yield* this.events(method, request, params, context);
    } catch (err) {
      throw this.failed(err, request, context);
    }
  }

  private async *events(method: string, request: { tenant?: string }, params: unknown, context: ServerCallContext): AsyncGenerator<StreamResponse, void, undefined> {
    const call = this.callOf(context);
    const answer = await this.answer(method, request, params, context);
    if (!('stream' in answer)) {
      if (!('error' in answer)) throw this.error({ code: A2A_ERRORS.Internal.code, message: `${method} did not answer with a stream` });
      this.passRetryAfter(answer, context);
      throw this.error(answer.error, answer.refused);
    }
    const { stream } = answer;
    let lastId = call.o.lastEventId !== undefined && /^\d+$/.test(call.o.lastEventId.trim()) ? Number(call.o.lastEventId.trim()) : 0;
    const resumeHint = () => `reconnect with Last-Event-ID: ${lastId} (gRPC: metadata last-event-id) to continue`;
    try {
      for (;;) {
        if (call.o.sink?.backlogged() && !(await drained(call.o.sink, call.o.drainTimeoutMs, call.o.signal))) {
          if (call.o.signal.aborted) return;
          throw this.error({ code: A2A_ERRORS.Internal.code, message: `The client read too slowly; the stream is closed. ${cap(resumeHint())}.` }, 'busy');
        }
        let next: IteratorResult<SseFrame>;
        try {
          next = await stream.next();
        } catch (err) {
          throw this.error(outcomeError(answer.errorFrame(err).data));
        }
        if (next.done) break;
        const { id, data } = next.value;
        if ('error' in data) throw this.error(data.error);
        if (id !== undefined) lastId = id;
        call.o.onEvent?.(id);
        yield StreamResponse.fromJSON(data.result);
      }
      if (call.o.closing.aborted && !call.o.signal.aborted) {
        throw this.error({ code: A2A_ERRORS.Unavailable.code, message: `Switchboard is shutting down; ${resumeHint()}.` }, 'unavailable');
      }
    } finally {
      await stream.return?.(undefined).catch(() => undefined);
    }
  }

  private async answer(method: string, request: { tenant?: string }, params: unknown, context: ServerCallContext): Promise<RpcAnswer> {
    const call = this.callOf(context);
    const { o } = call;
    // The A2A `tenant` of a request names the agent (the gateway card's GRPC interface says so); a URL path that
    // names an agent wins, and a tenant naming another is refused rather than silently ignored.
    const tenant = request.tenant || undefined;
    if (o.agentId !== undefined && tenant !== undefined && tenant !== o.agentId) {
      throw this.error({ code: A2A_ERRORS.InvalidParams.code, message: `tenant ${tenant} names another agent than the URL (${o.agentId})` });
    }
    const agentId = o.agentId ?? tenant;
    const { tenant: _dropped, ...rest } = (params ?? {}) as Record<string, unknown>;
    const streaming = method === 'SendStreamingMessage' || method === 'SubscribeToTask';
    return this.endpoints.answer(
      {
        method,
        params: rest,
        caller: o.caller,
        headers: o.headers,
        lastEventId: streaming ? o.lastEventId : undefined,
        base: o.base,
        // Open streams end on shutdown too; the stream above then says where to resume.
        signal: AbortSignal.any([o.signal, o.closing]),
      },
      agentId,
    );
  }

  private callOf(context: ServerCallContext | undefined): BindingCall {
    const user = context?.user;
    if (!(user instanceof BindingCall)) throw this.error({ code: A2A_ERRORS.Internal.code, message: 'the call reached the handler without an authenticated caller' });
    return user;
  }

  /**
   * A JSON-RPC error as this binding's error, by the one table (task/errors.ts): the SDK renders it with
   * the HTTP status and AIP-193 body, or the gRPC status, that A2A §5.4 gives it (A2A's own errors keep the SDK's
   * classes, with the spec's statuses); an error the table does not know is Internal, its code in the metadata.
   */
  private error(e: RpcError, refused?: Refused): Error {
    const name = bindingErrorName(e.code, refused);
    const form = ERRORS[name];
    const status = this.binding === 'GRPC' ? { transport: 'grpc', status: grpcStatusOf(name) } : { transport: 'rest', statusCode: form.http };
    if (form.domain === A2A_DOMAIN) return Object.assign(fromJsonRpcErrorResponse({ jsonrpc: '2.0', id: null, error: e as { code: number; message: string } }), status);
    // What the core said in its ErrorInfo (e.g. the roles a method needs) stays said; an unknown code is named.
    const metadata: Record<string, string> = { ...errorInfoMetadata(e.data), ...(errorNameOf(e.code) ? {} : { jsonRpcCode: String(e.code) }) };
    return Object.assign(new SwitchboardError({ message: e.message, metadata }, form.reason, name), status);
  }

}

/** The error of an outcome (an error frame's). */
function outcomeError(o: RpcOutcome): RpcError {
  return 'error' in o ? o.error : { code: A2A_ERRORS.Internal.code, message: 'Internal error' };
}

/** Switchboard's own errors (not A2A's): the SDK renders their ErrorInfo with A2A's domain; the gRPC guard adds details. */
export class SwitchboardError extends A2AError {
  override readonly reason: string;
  constructor(
    options: { message: string; metadata: Record<string, string> },
    reason: string,
    /** Its name in the error table. */
    readonly errorName: ErrorName,
  ) {
    super(options);
    this.reason = reason;
  }

  /** The SDK's type allows only A2A's domain; Switchboard's own errors are named in their own. */
  override toErrorInfo(): ReturnType<A2AError['toErrorInfo']> {
    return { ...super.toErrorInfo(), domain: SWITCHBOARD_DOMAIN } as unknown as ReturnType<A2AError['toErrorInfo']>;
  }
}

function cap(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

function drained(sink: StreamSink, timeoutMs: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    const done = (ok: boolean) => {
      clearTimeout(timer);
      sink.removeListener('drain', onDrain);
      sink.removeListener('close', onClose);
      signal.removeEventListener('abort', onClose);
      resolve(ok);
    };
    const onDrain = () => done(true);
    const onClose = () => done(false);
    const timer = setTimeout(() => done(false), timeoutMs);
    sink.once('drain', onDrain);
    sink.once('close', onClose);
    signal.addEventListener('abort', onClose, { once: true });
  });
}
