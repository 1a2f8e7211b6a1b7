/**
 * Builds an @a2a-js/sdk client for one agent endpoint, over the binding the registry chose for it (JSON-RPC,
 * HTTP+JSON or gRPC), in the dialect the endpoint declares (1.0, or 0.3 through the SDK's compat transports; 0.1,
 * NEXUS and Genesis Nexus envelopes through Switchboard's own transports in src/core/agents/transports/).
 * JSON-RPC and HTTP+JSON requests go through Switchboard's guarded fetch; gRPC calls go over a guarded channel
 * (src/core/http/outbound-grpc.ts), with a deadline per call, the agent's credential as metadata, and their status
 * recorded so failures are classified like HTTP ones.
 */
import * as grpc from '@grpc/grpc-js';
import { AgentCard } from '@a2a-js/sdk';
import {
  type Client,
  ClientFactory,
  ClientFactoryOptions,
  JsonRpcTransportFactory,
  RestTransportFactory,
  type Transport,
  type TransportFactory,
} from '@a2a-js/sdk/client';
import { GrpcTransportFactory } from '@a2a-js/sdk/client/grpc';
import {
  A2AError,
  ContentTypeNotSupportedError,
  ExtensionSupportRequiredError,
  PushNotificationNotSupportedError,
  TaskNotCancelableError,
  TaskNotFoundError,
  UnsupportedOperationError,
  VersionNotSupportedError,
} from '@a2a-js/sdk/errors';
import type { GrpcChannels } from '../http/outbound-grpc';
import { withTimeouts, type OutboundTimeouts } from '../http/outbound';
import type { AgentBinding, AgentDialect, AgentEndpoint } from '../../../task/contracts';
import { traceHeaders } from '../tracing';
import { A2aV01Transport } from './transports/a2a-v01';
import { LegacyTransportFactory, type LegacyTransportOptions } from './transports/json-rpc';
import { NexusTransport } from './transports/nexus';
import { type GenesisLink, GenesisTransportFactory } from './transports/genesis';
import { type ExchangeSignal, signalOfError, signalOfGrpcStatus } from './task-health';
import { tolerant03Fetch } from './transports/v03-tolerance';

export interface HttpTrace {
  /** The HTTP status of the most recent response, so failures can be classified as retryable or not. */
  lastStatus?: number;
  /** The most recent response's Retry-After, in ms (429 and 503 say when to come back). */
  retryAfterMs?: number;
  /** The status code of the most recent gRPC call that ended (grpc.status), for the same classification. */
  grpcCode?: number;
  /** Its details text (grpc-js says "Received message larger than max" there, for one). */
  grpcDetails?: string;
  /**
   * A 0.3 JSON-RPC agent's stream said `final: false` at its latest input-required or auth-required event: it keeps
   * the stream open while the task waits (src/core/agents/transports/v03-tolerance.ts reads it; the SDK drops `final`).
   */
  openAtInterruption?: boolean;
}

/** How to reach agents: the guarded transports, and the agent's credential. */
export interface AgentLink {
  /** The guarded outbound fetch (JSON-RPC, HTTP+JSON). */
  fetch: typeof fetch;
  /** The guarded gRPC channels (Outbound.grpc); needed only for agents called over gRPC. */
  grpc?: GrpcChannels;
  /**
   * The agent's outbound credential as headers (gRPC: metadata), looked up for each request, since an OAuth
   * token may be renewed during a long call. Absent: the agent has none.
   */
  credentials?: () => Promise<Record<string, string>>;
  /**
   * Told what each request showed about the agent's reachability (task-health.ts): a task's calls pass this, so
   * the agent's health follows its tasks; probes do not (they record their own verdict). Awaited before the
   * request's outcome is handed on.
   */
  health?: (signal: ExchangeSignal) => Promise<void>;
  /** A Genesis Nexus agent's secret and recorded RESPONSEs (src/core/agents/transports/genesis.ts); a task's calls pass it. */
  genesis?: GenesisLink;
}

export interface AgentClientOptions {
  /** Sent with every request (HTTP headers, gRPC metadata). */
  headers?: Record<string, string>;
  /** gRPC: each call's deadline, from its start (none: calls without a deadline, e.g. a stream that may run for hours). */
  callTimeoutMs?: number;
  /** The id a new task is sent with in dialects where the client names tasks (0.1, NEXUS): the gateway task's. */
  newTaskId?: string;
  /** HTTP bindings: the header and body timeouts of each request, instead of the outbound client's defaults. */
  timeouts?: OutboundTimeouts;
}

/**
 * The dialects the SDK does not speak, one transport each (over JSON-RPC, the only binding they have). Adding
 * a dialect is one file in src/core/agents/transports/ and one row here.
 */
const LEGACY_DIALECTS: Partial<Record<AgentDialect, (o: LegacyTransportOptions, link: AgentLink) => TransportFactory>> = {
  '0.1': (o) => new LegacyTransportFactory(o, A2aV01Transport),
  nexus: (o) => new LegacyTransportFactory(o, NexusTransport),
  genesis: (o, link) => new GenesisTransportFactory(o, link.genesis),
};

/** Retry-After as delay-seconds or an HTTP date (RFC 9110 §10.2.3), in ms; undefined when absent or unreadable. */
export function retryAfterMs(value: string | null, now = Date.now()): number | undefined {
  if (!value) return undefined;
  if (/^\d{1,9}$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

export { PARENT_TASK_HEADER } from '../../../task/messages';

/** The A2A errors an agent answers with (on any binding): the agent is up and said no. */
const A2A_ANSWERS = [
  TaskNotFoundError, TaskNotCancelableError, UnsupportedOperationError, PushNotificationNotSupportedError,
  ContentTypeNotSupportedError, ExtensionSupportRequiredError, VersionNotSupportedError,
];

/**
 * Whether a failed call is the agent's own A2A answer (task not found, not cancelable…) rather than trouble
 * reaching it: a JSON-RPC error object at HTTP 200, or an A2A error the SDK read from a REST body or gRPC
 * status details.
 */
export function agentAnswered(err: unknown, trace: HttpTrace): boolean {
  if (!(err instanceof A2AError)) return false;
  if (trace.grpcCode === undefined && trace.lastStatus !== undefined && trace.lastStatus < 300) return true;
  return A2A_ANSWERS.some((cls) => err instanceof cls);
}

/**
 * A client for the agent at `endpoint`, over its binding (JSON-RPC when the endpoint names none).
 * @throws OutboundError when a gRPC endpoint's address is refused or does not resolve (HTTP bindings throw the
 * same from their first request instead); Error when a gRPC endpoint is given without `link.grpc`.
 */
export async function agentClient(endpoint: AgentEndpoint, link: AgentLink, trace: HttpTrace = {}, opts: AgentClientOptions = {}): Promise<Client> {
  const binding: AgentBinding = endpoint.binding ?? 'JSONRPC';
  const headers = opts.headers ?? {};
  let url = endpoint.url;
  let transport: TransportFactory;
  if (binding === 'GRPC') {
    if (!link.grpc) throw new Error(`no gRPC channels were configured: cannot call the gRPC agent at ${endpoint.url}`);
    const channel = await link.grpc.channel(endpoint.url);
    // The SDK builds its own client for the URL it is given: give it the checked address, then swap in ours.
    url = channel.getTarget();
    transport = new GuardedGrpcTransportFactory(channel, grpcInterceptor(trace, headers, link, opts.callTimeoutMs));
  } else {
    const guarded = opts.timeouts ? withTimeouts(link.fetch, opts.timeouts) : link.fetch;
    const tracingFetch: typeof fetch = async (input, init) => {
      const merged = new Headers(init?.headers);
      for (const [k, v] of Object.entries({ ...headers, ...(await link.credentials?.()) })) merged.set(k, v);
      let res: Response;
      try {
        res = await guarded(input, { ...init, headers: merged });
      } catch (err) {
        const signal = link.health && signalOfError(err);
        if (signal) await link.health!(signal);
        throw err;
      }
      // A 5xx may be a proxy in front of an agent that is away: no verdict either way.
      if (res.status < 500) await link.health?.({ kind: 'answered' });
      trace.lastStatus = res.status;
      trace.retryAfterMs = retryAfterMs(res.headers.get('retry-after'));
      return res;
    };
    // 0.2/0.3 JSON-RPC agents as they are in the wild: bare SSE events, kind-less messages, `{taskId}` readers.
    const fetchImpl = binding === 'JSONRPC' && endpoint.protocolVersion === '0.3' ? tolerant03Fetch(tracingFetch, trace) : tracingFetch;
    const options = { fetchImpl, legacyCompat: { enabled: true } };
    const legacy = binding === 'JSONRPC' ? LEGACY_DIALECTS[endpoint.protocolVersion] : undefined;
    if (legacy) transport = legacy({ fetchImpl: tracingFetch, newTaskId: opts.newTaskId }, link);
    else transport = binding === 'HTTP+JSON' ? new RestTransportFactory(options) : new JsonRpcTransportFactory(options);
  }
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { transports: [transport], preferredTransports: [binding] }),
  );
  // A card reduced to what the transport needs: the registry already validated the agent's real card.
  const card = AgentCard.fromJSON({
    name: 'agent',
    supportedInterfaces: [{ url, protocolBinding: binding, protocolVersion: endpoint.protocolVersion }],
    capabilities: { streaming: endpoint.streaming },
  });
  return factory.createFromAgentCard(card);
}

/** The SDK's gRPC transport (1.0, or 0.3 by the interface's version), on Switchboard's guarded channel. */
class GuardedGrpcTransportFactory implements TransportFactory {
  private readonly inner = new GrpcTransportFactory({ legacyCompat: { enabled: true } });

  constructor(
    private readonly channel: grpc.Channel,
    private readonly interceptor: grpc.Interceptor,
  ) {}

  get protocolName(): string {
    return this.inner.protocolName;
  }

  async create(url: string, card: AgentCard): Promise<Transport> {
    const transport = await this.inner.create(url, card);
    // The SDK's factory takes channel credentials but no channel options (deadlines, keep-alive, message
    // size, a checked address), so its client is replaced by one of the same service on our channel.
    const holder = transport as unknown as { grpcClient?: unknown };
    const own = holder.grpcClient;
    if (!(own instanceof grpc.Client)) throw new Error('@a2a-js/sdk gRPC transport has no grpcClient: Switchboard cannot give it a guarded channel');
    const Service = own.constructor as new (address: string, credentials: grpc.ChannelCredentials, options: grpc.ClientOptions) => grpc.Client;
    own.close(); // never connected: channels connect on the first call
    holder.grpcClient = new Service(this.channel.getTarget(), grpc.credentials.createInsecure(), {
      channelOverride: this.channel,
      interceptors: [this.interceptor],
    });
    return transport;
  }
}

/**
 * Every gRPC call: a deadline, the fixed headers and the agent's credential as metadata, and its final status
 * into `trace` (and what it shows of the agent's reachability to `link.health`). A credential that cannot be had ends the call UNAVAILABLE before anything is sent (as the HTTP
 * bindings fail their request), naming why.
 */
function grpcInterceptor(trace: HttpTrace, headers: Record<string, string>, link: AgentLink, callTimeoutMs: number | undefined): grpc.Interceptor {
  const { credentials, health } = link;
  return (options, nextCall) => {
    const callOptions = callTimeoutMs && !options.deadline ? { ...options, deadline: Date.now() + callTimeoutMs } : options;
    return new grpc.InterceptingCall(nextCall(callOptions), {
      start(metadata, listener, next) {
        const recorded: grpc.Listener = {
          onReceiveStatus(status, nextStatus) {
            trace.grpcCode = status.code;
            trace.grpcDetails = status.details;
            const signal = health && signalOfGrpcStatus(status.code, status.details);
            if (!signal) return nextStatus(status);
            // The status is handed on once the verdict is recorded (a failed write is reported there, not thrown).
            void health!(signal).finally(() => nextStatus(status));
          },
        };
        const fail = (code: grpc.status, details: string) => {
          trace.grpcCode = code;
          trace.grpcDetails = details;
          listener.onReceiveStatus?.({ code, details, metadata: new grpc.Metadata() });
        };
        const send = (extra: Record<string, string>) => {
          try {
            // gRPC metadata keys are lower case (HTTP/2 header names); grpc-js refuses some HTTP header names.
            for (const [k, v] of Object.entries({ ...traceHeaders(), ...headers, ...extra })) metadata.set(k.toLowerCase(), v);
          } catch (err) {
            return fail(grpc.status.INVALID_ARGUMENT, `a header cannot be sent as gRPC metadata: ${(err as Error).message}`);
          }
          next(metadata, recorded);
        };
        if (!credentials) return send({});
        credentials().then(send, (err: unknown) => fail(grpc.status.UNAVAILABLE, `the agent's credential could not be had: ${(err as Error).message}`));
      },
    });
  };
}
