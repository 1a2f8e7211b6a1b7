/**
 * buildApp wires Switchboard's HTTP surface from its dependencies and never listens: tests and the server
 * (src/main.ts) get the same app. It registers one plugin per resource (src/api/plugins/: the pool, health, who may
 * call, Temporal, the registry), each decorating the app (`app.pg`, `app.health`, `app.temporal`, …) and closing
 * what it opened in `onClose`, then the routes, which read those resources. buildWorkerApp is the small app of a
 * worker process: health, readiness and metrics only.
 */
import { DEFAULTS, admissionOf, streamSettingsOf } from '../core/config';
import type { FairGateOptions } from './a2a/fair-gate';
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyServerOptions } from 'fastify';
import fp from 'fastify-plugin';
import type { Pool } from 'pg';
import type { Logger } from 'pino';
import type { RefreshPolicy } from '../core/agents/refresh';
import type { RefreshScheduler } from '../core/agents/refresh-schedules';
import type { EventHub } from '../core/events/hub';
import type { Outbound } from '../core/http/outbound';
import type { UnfundedPolicy } from '../core/ledger/postings';
import type { AgentHub } from './hub/hub';
import type { KeyStore } from '../core/auth/keys';
import { type BearerJwtVerifier, DEFAULT_TENANT } from '../core/auth/plugin';
import type { Quotas } from '../core/auth/quotas';
import type { AgentCredentials } from '../core/agents/agent-credentials';
import type { Health } from '../core/health';
import type { TemporalUi } from './routes/tasks';
import { traceRequests } from './plugins/request-spans';
import { installA2AGuards } from './routes/refusals';
import { installOpenApi } from './routes/openapi';
import type { EncryptionCodec } from '../core/temporal/encryption-codec';
import type { AgentPushTokens } from '../core/push/agent-push';
import { jsonBodies } from './plugins/json-bodies';
import { httpMetricsPlugin } from './plugins/http-metrics';
import { type ConnectionLimits, DEFAULT_CONNECTION_LIMITS, connectionsPlugin, serverTimeouts } from './plugins/connections';
import { pgPlugin } from './plugins/pg';
import { healthPlugin } from './plugins/health';
import { authPlugin } from './plugins/auth';
import { temporalPlugin } from './plugins/temporal';
import { registryPlugin } from './plugins/registry';
import type { EmbeddingsSettings } from '../core/agents/embeddings';
import { managementRoutes, probeRoutes } from './routes/management';
import { type StreamSettings, a2aBindings } from './routes/a2a-bindings';
import type { GrpcAdvert } from '../core/agents/gateway-card';
import type { McpSettings } from './mcp/sessions';

export { DEFAULT_TENANT };
export type { StreamSettings };
export const DEFAULT_MAX_HOPS = DEFAULTS.SWITCHBOARD_MAX_HOPS;

export interface AppDeps {
  pool: Pool;
  temporal: Client;
  taskQueue: string;
  outbound: Outbound;
  log: Logger;
  inputTimeoutMs: number;
  publicUrl?: string;
  bodyLimit?: number;
  /** Agent refresh schedules: the scheduler to use (main.ts's, which it also reconciles), or built from intervalMs. Unset: agents are checked at registration and by POST /agents/:id/refresh only. */
  agentRefresh?: { intervalMs?: number; policy?: Partial<RefreshPolicy>; scheduler?: RefreshScheduler };
  /** The process's event hub (shared with the worker's activities). */
  hub: EventHub;
  /** Webhook URLs on private/loopback addresses are accepted only when true (SWITCHBOARD_ALLOW_PRIVATE_URLS). */
  allowPrivateUrls?: boolean;
  /** Multi-agent jobs: how many hops below its root task a task may be (default 5). */
  maxHops?: number;
  /** First retry delay of a failed webhook delivery (ms, default 1 s; then doubling up to 10 min, for a day). */
  pushRetryInitialMs?: number;
  streams?: Partial<StreamSettings>;
  /** SWITCHBOARD_UNFUNDED_ACCOUNTS (default enforce): how a never-funded requester account reads. */
  unfundedAccounts?: UnfundedPolicy;
  /** Where agents' outbound credentials are sealed (registration stores them, refresh presents them). */
  credentials?: AgentCredentials;
  /** Which dependencies are up (default: one probing deps.pool and deps.temporal's connection). */
  health?: Health;
  /** Whether this process's worker is polling, for /readyz; unset when the process runs none (then /readyz asks Temporal whether any worker polls the task queue). */
  workerRunning?: () => boolean;
  /** The Temporal SDK runtime's Prometheus endpoint in this process (its client's and workers' `temporal_*`), appended to GET /metrics. */
  runtimeMetricsUrl?: string;
  /** How long a send waits for its answer before it asks whether any worker polls the task queue (default 3 s). */
  noWorkerCheckMs?: number;
  /** Where Temporal UI is (TEMPORAL_UI_URL, or the embedded dev server's), for the links from GET /tasks to each workflow. */
  temporalUi?: TemporalUi;
  /** Who may call: the key store (SWITCHBOARD_ADMIN_KEY goes into it), and a JWT verifier when JWTs are accepted. */
  auth: AppAuth;
  /**
   * The gRPC binding (SWITCHBOARD_GRPC_PORT): the port the cards advertise, or the public `host:port` clients use
   * (SWITCHBOARD_PUBLIC_GRPC_URL). buildApp never listens: the caller starts `app.grpc.listen(host, port)` beside
   * `app.listen`; `app.close()` stops it. Unset: no gRPC.
   */
  grpc?: GrpcAdvert;
  /** Genesis Nexus envelopes: the clock skew accepted (SWITCHBOARD_GENESIS_MAX_SKEW_MS), the first retry delay of event deliveries (ms). */
  genesis?: { maxSkewMs?: number; eventRetryInitialMs?: number };
  /**
   * This process's WebSocket hub (GET /hub), whose hub worker polls its task queue (main.ts starts both).
   * Unset: no /hub route.
   */
  agentHub?: AgentHub;
  /**
   * Agents' push notifications (POST /agent-push/:id): the tokens the worker's activities give agents, derived
   * from SWITCHBOARD_SECRETS_KEY as in every process. Unset: no such route (agents are polled).
   */
  agentPush?: { tokens: AgentPushTokens };
  /** SWITCHBOARD_REQUEST_TIMEOUT_MS and SWITCHBOARD_MAX_CONNECTIONS_PER_ADDRESS (src/api/plugins/connections.ts). */
  connections?: Partial<ConnectionLimits>;
  /** Fair admission per tenant, SWITCHBOARD_ADMISSION_* (src/api/a2a/fair-gate.ts); default: the config's defaults. */
  admission?: Partial<FairGateOptions>;
  /** Hybrid search's model service, SWITCHBOARD_EMBEDDINGS_* (src/core/agents/embeddings.ts); unset: full-text search. */
  embeddings?: EmbeddingsSettings;
  /** The MCP server at /mcp (src/api/mcp/sessions.ts McpSettings): how long a tools/call waits, session caps. */
  mcp?: Partial<McpSettings>;
}

export interface AppAuth {
  keys: KeyStore;
  jwt?: BearerJwtVerifier;
  /** Process-wide quota defaults (SWITCHBOARD_QUOTA_*, SWITCHBOARD_RATE_LIMIT_*); a tenant's own settings win. */
  quotaDefaults?: Partial<Quotas>;
  /** REDIS_URL: rate-limit counters shared by every process. */
  redisUrl?: string;
  /** SWITCHBOARD_PAYLOAD_KEY's codec, served to Temporal UI at /codec/decode; and the origins that UI runs at. */
  payloadCodec?: Pick<EncryptionCodec, 'seal' | 'decodeFor'>;
  codecCorsOrigins?: readonly string[];
}

export const DEFAULT_STREAM_SETTINGS: StreamSettings = streamSettingsOf(DEFAULTS);

/** The request pipeline's steps that run before authentication: each a hook on every route. */
const requestTracing = fp(async (app) => traceRequests(app), { name: 'switchboard-tracing', fastify: '5.x' });
const a2aGuards = fp(async (app) => installA2AGuards(app), { name: 'switchboard-a2a-guards', fastify: '5.x' });
const openApi = fp(installOpenApi, { name: 'switchboard-openapi', fastify: '5.x' });

export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const app = Fastify(serverOptions(deps));
  // First, so that every answer, a refusal by any hook included, closes a connection whose body never came.
  await app.register(connectionsPlugin, { maxPerAddress: limitsOf(deps).maxPerAddress });
  // Every answer counted by its route pattern (GET /metrics), refusals by the hooks below included.
  await app.register(httpMetricsPlugin);
  // JSON bodies pass the peer-input guard; then a request's span covers its authentication too (a no-op unless
  // tracing was started); then, before authentication, which reveals more, an A2A request in an unsupported
  // version or content type is refused in its binding's form, and so is a URL no route serves.
  await app.register(jsonBodies);
  await app.register(requestTracing);
  await app.register(a2aGuards);
  await app.register(pgPlugin, { pool: deps.pool });
  await app.register(healthPlugin, { health: deps.health, temporal: deps.temporal.connection, log: deps.log });
  // Every route registered after this declares who may call it, and is checked before its handler runs.
  await app.register(authPlugin, { ...deps.auth, events: deps.hub, log: deps.log });
  // Before any route: the OpenAPI document is built from every route's schema (GET /openapi.json).
  await app.register(openApi);
  await app.register(temporalPlugin, { client: deps.temporal, taskQueue: deps.taskQueue, log: deps.log, noWorkerCheckMs: deps.noWorkerCheckMs });
  await app.register(registryPlugin, { outbound: deps.outbound, hub: deps.hub, credentials: deps.credentials, agentRefresh: deps.agentRefresh, embeddings: deps.embeddings });
  await app.register(managementRoutes, {
    keys: deps.auth.keys,
    publicUrl: deps.publicUrl,
    grpc: deps.grpc,
    workerRunning: deps.workerRunning,
    runtimeMetricsUrl: deps.runtimeMetricsUrl,
    openStreams: () => deps.hub.readers(),
    payloadCodec: deps.auth.payloadCodec,
    codecCorsOrigins: deps.auth.codecCorsOrigins,
    unfundedAccounts: deps.unfundedAccounts ?? 'enforce',
    temporalUi: deps.temporalUi,
  });
  await app.register(a2aBindings, {
    log: deps.log,
    hub: deps.hub,
    publicUrl: deps.publicUrl,
    inputTimeoutMs: deps.inputTimeoutMs,
    pushRetryInitialMs: deps.pushRetryInitialMs,
    maxHops: deps.maxHops ?? DEFAULT_MAX_HOPS,
    allowPrivateUrls: deps.allowPrivateUrls ?? false,
    streams: { ...DEFAULT_STREAM_SETTINGS, ...deps.streams },
    credentials: deps.credentials,
    genesis: { maxSkewMs: deps.genesis?.maxSkewMs ?? DEFAULTS.SWITCHBOARD_GENESIS_MAX_SKEW_MS, eventRetryInitialMs: deps.genesis?.eventRetryInitialMs },
    grpc: deps.grpc,
    agentHub: deps.agentHub,
    agentPush: deps.agentPush,
    unfundedAccounts: deps.unfundedAccounts ?? 'enforce',
    admission: { ...admissionOf(DEFAULTS), ...deps.admission },
    mcp: deps.mcp,
  });
  return app;
}

export interface WorkerAppDeps {
  pool: Pool;
  /** Probed for /readyz (GetSystemInfo), like the api's. */
  temporal: Client;
  log: Logger;
  /** Whether this process's worker is polling. */
  workerRunning: () => boolean;
  /** The Temporal SDK runtime's Prometheus endpoint in this process, appended to GET /metrics. */
  runtimeMetricsUrl?: string;
  /** /metrics is an admin's or a metrics key's (its labels name every tenant's agents): the same keys as the api's. */
  auth: Pick<AppAuth, 'keys' | 'jwt' | 'redisUrl' | 'quotaDefaults'>;
  /** The process's event hub, whose notices reach the key cache at once (a revoked admin key stops working). */
  events?: EventHub;
  health?: Health;
  connections?: Partial<ConnectionLimits>;
}

/**
 * A worker process's HTTP surface (SWITCHBOARD_ROLE=worker): `/healthz`, `/readyz` (PostgreSQL, Temporal, the
 * migrations, and its worker polling) and `/metrics`, where the tasks' series are counted, since workflows and
 * their activities run in worker processes. Never listens, like buildApp.
 */
export async function buildWorkerApp(deps: WorkerAppDeps): Promise<FastifyInstance> {
  const app = Fastify(serverOptions(deps));
  await app.register(connectionsPlugin, { maxPerAddress: limitsOf(deps).maxPerAddress });
  await app.register(httpMetricsPlugin);
  await app.register(pgPlugin, { pool: deps.pool });
  await app.register(healthPlugin, { health: deps.health, temporal: deps.temporal.connection, log: deps.log });
  await app.register(authPlugin, { ...deps.auth, events: deps.events, log: deps.log });
  await app.register(probeRoutes, { workerRunning: deps.workerRunning, runtimeMetricsUrl: deps.runtimeMetricsUrl });
  return app;
}

function limitsOf(deps: { connections?: Partial<ConnectionLimits> }): ConnectionLimits {
  return { ...DEFAULT_CONNECTION_LIMITS, ...deps.connections };
}

function serverOptions(deps: { log: Logger; bodyLimit?: number; connections?: Partial<ConnectionLimits> }): FastifyServerOptions {
  return {
    loggerInstance: deps.log as FastifyBaseLogger,
    bodyLimit: deps.bodyLimit ?? 1024 * 1024,
    // Receiving a request is timed (headers, then the whole body: src/api/plugins/connections.ts); an idle socket is
    // not (connectionTimeout 0), since a blocking send waits for its agent without a byte either way.
    connectionTimeout: 0,
    ...serverTimeouts(limitsOf(deps)),
    keepAliveTimeout: 72_000,
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    // Request ids name requests in the audit trail and logs across processes: random, not a per-process counter.
    genReqId: () => randomUUID(),
    // Clients that hold a base URL post to `<url>/` (httpx, the A2A TCK, SDKs given a URL ending in a slash): every
    // route answers with and without the trailing slash.
    routerOptions: { ignoreTrailingSlash: true },
  };
}
