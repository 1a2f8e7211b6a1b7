/**
 * The A2A gRPC binding: one gRPC server per process (SWITCHBOARD_GRPC_PORT) serving the SDK's `grpcService` over
 * BindingHandler (src/api/a2a/binding-handler.ts), which answers through the same RPC core as JSON-RPC and REST.
 * The SDK's gRPC modules load `@grpc/grpc-js` and `@bufbuild/protobuf`, optional peers of @a2a-js/sdk, so
 * package.json names both (the agent side, src/core/agents/agent-client.ts, loads them too).
 *
 * Which endpoint: a request's A2A `tenant` field names the agent (the gateway card's GRPC interface carries
 * `tenant: <agentId>`, and SDK clients send it on every call); no tenant is the routing front door.
 *
 * Before the SDK sees a call, this file does what Fastify's hooks do for HTTP: authentication from the metadata
 * (`authorization: Bearer <key or JWT>` or `x-api-key`, and `x-switchboard-tenant` for admins) with the same
 * code (src/core/auth/plugin.ts), the method's roles, and the rate limits; refusals are UNAUTHENTICATED,
 * PERMISSION_DENIED, RESOURCE_EXHAUSTED or UNAVAILABLE.
 *
 * Streams: the response headers (initial metadata) carry `switchboard-first-event-id`, the log position of the
 * stream's first message; positions are consecutive, so message k (from 0) is at first + k. Resume with metadata
 * `last-event-id: <position of the last message received>` on SubscribeToTask (or the same SendStreamingMessage),
 * exactly like SSE's Last-Event-ID. A client's deadline or cancel ends the call's stream.
 */
import * as grpc from '@grpc/grpc-js';
import { A2AService, grpcService } from '@a2a-js/sdk/server/grpc';
import { BindingCall, BindingHandler, SwitchboardError } from '../a2a/binding-handler';
import type { A2AEndpoints } from '../a2a/endpoints';
import { type Caller, access, rpcMethodRoles } from '../../core/auth/caller';
import { AuthFailure, type Authenticator, type RateRefusal } from '../../core/auth/plugin';
import { type Refusal, grpcRefusal, refusalOf } from '../a2a/error-forms';
import { SUPPORTED_VERSION } from '../a2a/versions';
import { DependencyUnavailable } from '../../core/health';
import { traceServerCall } from '../../core/tracing';

export interface GrpcServerDeps {
  endpoints: A2AEndpoints;
  authenticator: Authenticator;
  rateLimitCall: (caller: Caller) => Promise<RateRefusal | undefined>;
  publicUrl?: string;
  /** Largest request message accepted (bytes): the HTTP body limit. */
  maxReceiveBytes: number;
  /** How long a stream reader that fell behind may take to catch up before it is cut off (ms). */
  drainTimeoutMs: number;
  /** HTTP/2 keepalive pings on idle connections (ms): the gRPC counterpart of SSE heartbeats. */
  keepaliveMs: number;
  log: { warn(obj: object, msg: string): void; error(obj: object, msg: string): void };
}

/** The SDK service's methods and the A2A methods they are (their roles are the JSON-RPC methods'). */
const METHODS = {
  sendMessage: 'SendMessage',
  sendStreamingMessage: 'SendStreamingMessage',
  getTask: 'GetTask',
  listTasks: 'ListTasks',
  cancelTask: 'CancelTask',
  subscribeToTask: 'SubscribeToTask',
  createTaskPushNotificationConfig: 'CreateTaskPushNotificationConfig',
  getTaskPushNotificationConfig: 'GetTaskPushNotificationConfig',
  listTaskPushNotificationConfigs: 'ListTaskPushNotificationConfigs',
  deleteTaskPushNotificationConfig: 'DeleteTaskPushNotificationConfig',
  getExtendedAgentCard: 'GetExtendedAgentCard',
} as const;

const STREAMING = new Set(['sendStreamingMessage', 'subscribeToTask']);
/** Metadata of a stream's response headers: the log position of its first message. */
export const FIRST_EVENT_ID = 'switchboard-first-event-id';

type AnyCall = (grpc.ServerUnaryCall<unknown, unknown> | grpc.ServerWritableStream<unknown, unknown>) & { switchboard?: BindingCall };
type Handler = (call: AnyCall, callback?: grpc.sendUnaryData<unknown>) => unknown;

export class GrpcServer {
  private server?: grpc.Server;
  private readonly closing = new AbortController();

  constructor(private readonly deps: GrpcServerDeps) {}

  /** Listens on host:port (0: any free port); resolves with the port bound. */
  async listen(host: string, port: number): Promise<number> {
    const { deps } = this;
    const server = new grpc.Server({
      'grpc.max_receive_message_length': deps.maxReceiveBytes,
      'grpc.keepalive_time_ms': deps.keepaliveMs,
      'grpc.keepalive_timeout_ms': 20_000,
      'grpc.keepalive_permit_without_calls': 1,
    });
    const sdk = grpcService({
      requestHandler: new BindingHandler(deps.endpoints, 'GRPC'),
      userBuilder: async (call) => {
        const bound = (call as AnyCall).switchboard;
        if (!bound) throw new Error('a gRPC call reached the SDK without its caller');
        return bound;
      },
    }) as unknown as Record<keyof typeof METHODS, Handler>;
    const impl: Record<string, Handler> = {};
    for (const [name, method] of Object.entries(METHODS) as [keyof typeof METHODS, string][]) {
      impl[name] = (call, callback) => void this.guarded(name, method, sdk[name], call, callback).catch((err) => this.failed(method, call, callback, err));
    }
    server.addService(A2AService, impl as unknown as grpc.UntypedServiceImplementation);
    const address = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
    const bound = await new Promise<number>((resolve, reject) =>
      server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
    );
    this.server = server;
    return bound;
  }

  /** Open streams end with an error naming where to resume; calls still running get a few seconds, then are cut. */
  async close(graceMs = 3_000): Promise<void> {
    this.closing.abort();
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        server.forceShutdown();
        resolve();
      }, graceMs);
      server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** Last resort: a call whose handling threw is logged and ends with INTERNAL; the server and other calls go on. */
  private failed(method: string, call: AnyCall, callback: grpc.sendUnaryData<unknown> | undefined, err: unknown): void {
    this.deps.log.error({ err, method }, 'gRPC: a call failed unexpectedly; it ends with INTERNAL');
    try {
      endCall(call, callback, { name: 'Internal', message: 'Internal error' });
    } catch {
      // the call has ended already
    }
  }

  private async guarded(name: string, method: string, sdk: Handler, call: AnyCall, callback?: grpc.sendUnaryData<unknown>): Promise<void> {
    const { deps } = this;
    const refuse = (r: Refusal) => endCall(call, callback, r);
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(call.metadata.getMap())) headers[k] = v.toString();
    // First, as on HTTP (it reveals nothing): the gRPC binding is A2A 1.0's.
    const version = headers['a2a-version']?.trim();
    if (version && !(SUPPORTED_VERSION.test(version) && version.startsWith('1.'))) {
      return refuse({ name: 'VersionNotSupported', message: `A2A-Version ${version} is not served over gRPC; it is A2A 1.0's binding` });
    }
    let caller: Caller | undefined;
    try {
      caller = await deps.authenticator.authenticate(headers, access.rpc.auth);
    } catch (err) {
      if (err instanceof AuthFailure) return refuse(refusalOf(err));
      if (err instanceof DependencyUnavailable) return refuse({ name: 'Unavailable', message: err.message, retryAfterS: err.retryAfterS });
      deps.log.warn({ err }, 'gRPC authentication failed');
      return refuse({ name: 'Internal', message: 'Internal error' });
    }
    if (!caller) return refuse({ name: 'Unauthenticated', message: 'Authentication required: send metadata authorization: Bearer <API key or JWT>, or x-api-key: <API key>' });
    const roles = rpcMethodRoles(method);
    if (!roles.includes(caller.role)) {
      return refuse({ name: 'PermissionDenied', message: `${method} needs the role ${roles.join(' or ')}; this key's role is ${caller.role}`, metadata: { requiredRoles: roles.join(',') } });
    }
    const limited = await deps.rateLimitCall(caller);
    if (limited) return refuse({ name: 'RateLimited', message: limited.message, retryAfterS: limited.retryAfterS });

    const gone = new AbortController();
    call.on('cancelled', () => gone.abort());
    call.on('close', () => gone.abort());
    let onEvent: ((id: number | undefined) => void) | undefined;
    let sink: BindingCall['o']['sink'];
    if (STREAMING.has(name)) {
      const stream = call as grpc.ServerWritableStream<unknown, unknown>;
      // The SDK sends the response headers before the stream's first message is known: they wait for it, and
      // carry its log position.
      const send = stream.sendMetadata.bind(stream);
      let held = new grpc.Metadata();
      let sent = false;
      stream.sendMetadata = (md: grpc.Metadata) => {
        held = md;
      };
      onEvent = (id) => {
        if (sent) return;
        sent = true;
        if (id !== undefined) held.set(FIRST_EVENT_ID, String(id));
        send(held);
      };
      sink = {
        backlogged: () => stream.writableLength >= stream.writableHighWaterMark,
        once: (e, l) => stream.once(e, l),
        removeListener: (e, l) => stream.removeListener(e, l),
      };
    }
    const authority = headers[':authority'] ?? 'localhost';
    const bound = new BindingCall({
      caller,
      headers,
      lastEventId: headers['last-event-id'],
      base: deps.publicUrl?.replace(/\/+$/, '') ?? `http://${authority}`,
      signal: gone.signal,
      closing: this.closing.signal,
      onEvent,
      sink,
      drainTimeoutMs: deps.drainTimeoutMs,
    });
    call.switchboard = bound;
    traceServerCall(`grpc ${method}`, headers, { 'rpc.system': 'grpc', 'rpc.method': method, 'switchboard.tenant': caller.tenant }, (end) => {
      call.on('cancelled', () => end(grpc.status.CANCELLED));
      call.on('finish', () => end(grpc.status.OK));
      call.on('error', (err: { code?: number }) => end(err.code ?? grpc.status.UNKNOWN));
      // The SDK's status for an error of Switchboard's own carries no google.rpc.Status details: they are added here.
      if (!callback) {
        const emit = call.emit.bind(call) as (event: string, ...args: unknown[]) => boolean;
        call.emit = ((event: string, ...args: unknown[]) => (event === 'error' ? emit(event, withDetails(args[0], bound.failed)) : emit(event, ...args))) as typeof call.emit;
      }
      sdk(call, callback && ((err, value) => (end(err ? (err.code ?? grpc.status.UNKNOWN) : grpc.status.OK), callback(err && withDetails(err, bound.failed), value))));
    });
  }
}

/** Ends a call with a refusal (its status and google.rpc.Status details): a unary call through its callback, a stream with an error event. */
function endCall(call: AnyCall, callback: grpc.sendUnaryData<unknown> | undefined, r: Refusal): void {
  const err = grpcRefusal(r);
  if (callback) callback(err, null);
  else {
    call.emit('error', err);
    (call as grpc.ServerWritableStream<unknown, unknown>).end();
  }
}

/** A gRPC error of Switchboard's own (the call's `failed`) with the google.rpc.Status details the SDK leaves out. */
function withDetails<T>(err: T, failed: unknown): T {
  const e = err as { metadata?: grpc.Metadata; details?: string } | undefined;
  if (!(failed instanceof SwitchboardError) || !e || (e.metadata?.get('grpc-status-details-bin').length ?? 0) > 0) return err;
  const metadata = e.metadata ?? new grpc.Metadata();
  metadata.merge(grpcRefusal({ name: failed.errorName, message: failed.message }).metadata);
  return { ...e, metadata } as T;
}
