/**
 * The A2A request handler behind the HTTP+JSON (REST) and gRPC bindings. The SDK's `restHandler` and
 * `grpcService` parse each request into the SDK's types and call this handler; it hands the call, as the
 * JSON-RPC 1.0 method it is, to the same RPC core that answers JSON-RPC (src/a2a/rpc-handler.ts: role,
 * validation, outage and stream-cap checks, the endpoint's resolver, the per-agent or front-door handler), and
 * turns the answer back into the SDK's types, or its error into the binding's own (HTTP status +
 * google.rpc.Status body, gRPC status code with google.rpc.ErrorInfo details). So one handler and one set of
 * checks stand behind all three bindings, and their behaviour cannot drift.
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
import { status as GrpcStatus } from '@grpc/grpc-js';
import type { Caller } from '../auth/caller';
import type { A2AEndpoints } from './endpoints';
import { A2A_ERRORS } from './errors';
import type { RpcAnswer } from './rpc-handler';

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
 * show it. Clients read each endpoint's own card from the card routes (src/agents/cards.ts gatewayCard).
 */
const SERVED = AgentCard.fromJSON({
  name: 'Switchboard',
  capabilities: { streaming: true, pushNotifications: true },
  supportedInterfaces: [
    { url: '', protocolBinding: 'HTTP+JSON', protocolVersion: '1.0' },
    { url: '', protocolBinding: 'GRPC', protocolVersion: '1.0' },
  ],
});

type JsonRpcError = { code: number; message: string; data?: unknown };

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
  private passRetryAfter(answer: { headers?: Record<string, string> }, context: ServerCallContext): void {
    const after = answer.headers?.['retry-after'];
    if (after) this.callOf(context).o.onRetryAfter?.(after);
  }

  /** One unary call through the RPC core; its JSON-RPC result, or the binding's error. */
  private async call(method: string, request: { tenant?: string }, params: unknown, context: ServerCallContext): Promise<unknown> {
    const answer = await this.answer(method, request, params, context);
    if ('stream' in answer) throw this.error({ code: A2A_ERRORS.Internal.code, message: `${method} answered with a stream` }, 500);
    this.passRetryAfter(answer, context);
    const body = answer.body as { result?: unknown; error?: JsonRpcError; requiredRoles?: string[] };
    if (body.error && typeof body.error === 'object') throw this.error(body.error, answer.status);
    if (answer.status === 403) throw this.denied((body as { error?: unknown }).error);
    return body.result ?? {};
  }

  /**
   * A streaming call through the RPC core: its events in the SDK's type, each announced with its log position
   * (call.onEvent) before it is handed on. A reader that falls behind is waited for, then cut off with an error
   * naming the position to resume from; so is every open stream when Switchboard shuts down.
   */
  private async *stream(method: string, request: { tenant?: string }, params: unknown, context: ServerCallContext): AsyncGenerator<StreamResponse, void, undefined> {
    const call = this.callOf(context);
    const answer = await this.answer(method, request, params, context);
    if (!('stream' in answer)) {
      this.passRetryAfter(answer, context);
      const body = answer.body as { error?: JsonRpcError | string };
      if (body.error && typeof body.error === 'object') throw this.error(body.error, answer.status);
      throw answer.status === 403 ? this.denied(body.error) : this.error({ code: A2A_ERROR_INTERNAL, message: `${method} did not answer with a stream` }, 500);
    }
    const { stream } = answer;
    let lastId = call.o.lastEventId !== undefined && /^\d+$/.test(call.o.lastEventId.trim()) ? Number(call.o.lastEventId.trim()) : 0;
    const resumeHint = () => `reconnect with Last-Event-ID: ${lastId} (gRPC: metadata last-event-id) to continue`;
    try {
      for (;;) {
        if (call.o.sink?.backlogged() && !(await drained(call.o.sink, call.o.drainTimeoutMs, call.o.signal))) {
          if (call.o.signal.aborted) return;
          throw this.error({ code: A2A_ERRORS.Internal.code, message: `The client read too slowly; the stream is closed. ${cap(resumeHint())}.` }, 429);
        }
        let next: IteratorResult<{ id?: number; data: { result?: unknown; error?: unknown } }>;
        try {
          next = await stream.next();
        } catch (err) {
          throw this.error(answer.errorFrame(err).data.error as JsonRpcError, 200);
        }
        if (next.done) break;
        const { id, data } = next.value;
        if (data.error) throw this.error(data.error as JsonRpcError, 200);
        if (id !== undefined) lastId = id;
        call.o.onEvent?.(id);
        yield StreamResponse.fromJSON(data.result);
      }
      if (call.o.closing.aborted && !call.o.signal.aborted) {
        throw this.error({ code: A2A_ERRORS.Unavailable.code, message: `Switchboard is shutting down; ${resumeHint()}.` }, 503);
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
      throw this.error({ code: A2A_ERRORS.InvalidParams.code, message: `tenant ${tenant} names another agent than the URL (${o.agentId})` }, 400);
    }
    const agentId = o.agentId ?? tenant;
    const { tenant: _dropped, ...rest } = (params ?? {}) as Record<string, unknown>;
    const streaming = method === 'SendStreamingMessage' || method === 'SubscribeToTask';
    return this.endpoints.core.answer(
      {
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: rest }),
        caller: o.caller,
        headers: o.headers,
        lastEventId: streaming ? o.lastEventId : undefined,
        base: o.base,
        // Open streams end on shutdown too; the stream above then says where to resume.
        signal: AbortSignal.any([o.signal, o.closing]),
      },
      this.endpoints.resolver(agentId),
    );
  }

  private callOf(context: ServerCallContext | undefined): BindingCall {
    const user = context?.user;
    if (!(user instanceof BindingCall)) throw this.error({ code: A2A_ERRORS.Internal.code, message: 'the call reached the handler without an authenticated caller' }, 500);
    return user;
  }

  /** A JSON-RPC error as this binding's error (the SDK renders it: HTTP status + google.rpc.Status, or a gRPC status). */
  private error(e: JsonRpcError, httpStatus: number): Error {
    const own = SWITCHBOARD_ERRORS[e.code] ?? (httpStatus === 404 ? NOT_FOUND : undefined) ?? (httpStatus === 429 ? STREAM_LIMIT : undefined);
    if (!own && A2A_SPEC_CODES.has(e.code)) return fromJsonRpcErrorResponse({ jsonrpc: '2.0', id: null, error: e as { code: number; message: string } });
    const kind = own ?? INTERNAL;
    return bindingError(this.binding, kind, e.message, { jsonRpcCode: String(e.code) });
  }

  private denied(message: unknown): Error {
    return bindingError(this.binding, PERMISSION_DENIED, typeof message === 'string' ? message : 'This key may not call this method', {});
  }
}

const A2A_ERROR_INTERNAL = A2A_ERRORS.Internal.code;

/** The codes A2A defines, which the SDK renders in every binding by itself (RequestMalformed, TaskNotFound, …). */
const A2A_SPEC_CODES = new Set([-32700, -32600, -32601, -32602, -32001, -32002, -32003, -32004, -32005, -32006, -32007, -32008, -32009]);

interface ErrorKind {
  reason: string;
  http: number;
  grpc: GrpcStatus;
}

const INTERNAL: ErrorKind = { reason: 'INTERNAL_ERROR', http: 500, grpc: GrpcStatus.INTERNAL };
const NOT_FOUND: ErrorKind = { reason: 'AGENT_NOT_FOUND', http: 404, grpc: GrpcStatus.NOT_FOUND };
const STREAM_LIMIT: ErrorKind = { reason: 'STREAM_LIMIT', http: 429, grpc: GrpcStatus.RESOURCE_EXHAUSTED };
const PERMISSION_DENIED: ErrorKind = { reason: 'PERMISSION_DENIED', http: 403, grpc: GrpcStatus.PERMISSION_DENIED };

/** Switchboard's own JSON-RPC codes (src/a2a/errors.ts) in the other bindings. */
const SWITCHBOARD_ERRORS: Record<number, ErrorKind> = {
  [A2A_ERRORS.Internal.code]: INTERNAL,
  [A2A_ERRORS.InsufficientFunds.code]: { reason: 'INSUFFICIENT_FUNDS', http: 402, grpc: GrpcStatus.FAILED_PRECONDITION },
  [A2A_ERRORS.Unroutable.code]: { reason: 'UNROUTABLE', http: 404, grpc: GrpcStatus.NOT_FOUND },
  [A2A_ERRORS.HopLimit.code]: { reason: 'JOB_LINK_REFUSED', http: 400, grpc: GrpcStatus.FAILED_PRECONDITION },
  [A2A_ERRORS.QuotaExceeded.code]: { reason: 'QUOTA_EXCEEDED', http: 429, grpc: GrpcStatus.RESOURCE_EXHAUSTED },
  [A2A_ERRORS.Unavailable.code]: { reason: 'UNAVAILABLE', http: 503, grpc: GrpcStatus.UNAVAILABLE },
  [A2A_ERRORS.PolicyDenied.code]: { reason: 'POLICY_DENIED', http: 403, grpc: GrpcStatus.PERMISSION_DENIED },
};

/**
 * An error the SDK renders with the given HTTP status (REST) or gRPC status: the SDK takes `statusCode` from an
 * A2AError whose transport is 'rest', and `status` from one whose transport is 'grpc'. Its google.rpc.ErrorInfo
 * carries the reason and, for Switchboard's own codes, the JSON-RPC code (`metadata.jsonRpcCode`).
 */
function bindingError(binding: Binding, kind: ErrorKind, message: string, metadata: Record<string, string>): Error {
  const err = new SwitchboardError({ message, metadata }, kind.reason);
  return Object.assign(err, binding === 'GRPC' ? { transport: 'grpc', status: kind.grpc } : { transport: 'rest', statusCode: kind.http });
}

class SwitchboardError extends A2AError {
  override readonly reason: string;
  constructor(options: { message: string; metadata: Record<string, string> }, reason: string) {
    super(options);
    this.reason = reason;
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
