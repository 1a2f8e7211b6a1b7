/**
 * buildApp wires Switchboard's HTTP surface from its dependencies and never listens: tests and the server
 * (src/main.ts) get the same app.
 */
import { DEFAULTS, streamSettingsOf } from './config';
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Pool } from 'pg';
import type { Logger } from 'pino';
import type { StreamLimits } from './a2a/task-stream';
import type { RefreshPolicy } from './agents/refresh';
import { RefreshScheduler } from './agents/refresh-schedules';
import { AgentRegistry } from './agents/registry';
import type { EventHub } from './events/hub';
import { PushStore } from './push/store';
import { jwksRoutes } from './routes/jwks';
import type { Outbound } from './http/outbound';
import type { UnfundedPolicy } from './ledger/postings';
import { accountRoutes } from './routes/accounts';
import { agentRoutes } from './routes/agents';
import { frontDoorRoutes } from './routes/front-door';
import { jsonRpcRoutes } from './routes/json-rpc';
import { nexusTaskRoutes } from './routes/nexus-tasks';
import { restRoutes } from './routes/rest';
import { hubRoutes } from './routes/hub';
import type { AgentHub } from './hub/hub';
import { A2AEndpoints } from './a2a/endpoints';
import { GrpcServer } from './grpc/server';
import { reputationRoutes } from './routes/reputation';
import type { SseOptions } from './routes/sse';
import { TaskGateway } from './temporal/task-gateway';
import { KeyStore } from './auth/keys';
import { CredentialWatch } from './auth/credential-watch';
import { type BearerJwtVerifier, DEFAULT_TENANT } from './auth/plugin';
import { installAuth } from './routes/auth-hooks';
import { DEFAULT_QUOTAS, type Quotas, TenantQuotas } from './auth/quotas';
import { auditRoutes } from './routes/audit';
import { tenantRoutes } from './routes/tenants';
import { codecRoutes } from './routes/codec';
import type { AgentCredentials } from './agents/agent-credentials';
import { Health } from './health';
import { healthRoutes } from './routes/health';
import { installOpenApi } from './routes/openapi';
import { metricsRoutes } from './routes/metrics';
import { consoleRoutes } from './routes/console';
import { type TemporalUi, taskRoutes } from './routes/tasks';
import { closedOpenTaskIds } from './temporal/orphan-sweep';
import { traceRequests } from './tracing';
import { installA2AGuards } from './routes/refusals';
import { GenesisService } from './genesis/service';
import { GenesisStore } from './genesis/store';
import { genesisRoutes } from './routes/genesis';
import { Actions } from './a2a/nanda-actions';
import { EnforcedPolicies } from './nanda/policies';
import { CertificationGateway } from './temporal/certification-gateway';
import type { EncryptionCodec } from './temporal/encryption-codec';
import { credentialRoutes } from './routes/credentials';
import { agentPushRoutes } from './routes/agent-push';
import type { AgentPushTokens } from './push/agent-push';
import { checkJson } from './http/json-guard';

export { DEFAULT_TENANT };
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
  /** Per-agent refresh schedules (card refresh + liveness). Unset: agents are checked at registration and by POST /agents/:id/refresh only. */
  /** Agent refresh schedules: the scheduler to use (main.ts's, which it also reconciles), or built from intervalMs. */
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
  /** Whether this process's worker is polling, for /readyz; unset when the process runs none. */
  /** The Temporal runtime's Prometheus endpoint in this process (worker metrics), appended to GET /metrics. */
  workerMetricsUrl?: string;
  workerRunning?: () => boolean;
  /** Where Temporal UI is (TEMPORAL_UI_URL, or the embedded dev server's), for the links from GET /tasks to each workflow. */
  temporalUi?: TemporalUi;
  /** Who may call: the key store (SWITCHBOARD_ADMIN_KEY goes into it), and a JWT verifier when JWTs are accepted. */
  auth: AppAuth;
  /**
   * The gRPC binding (SWITCHBOARD_GRPC_PORT): the port the cards advertise. buildApp never listens: the caller
   * starts `app.grpc.listen(host, port)` beside `app.listen`; `app.close()` stops it. Unset: no gRPC.
   */
  grpc?: { port: number };
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
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The gRPC server (not yet listening) when AppDeps.grpc is set. */
    grpc?: GrpcServer;
  }
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

export interface StreamSettings extends SseOptions, StreamLimits {}

export const DEFAULT_STREAM_SETTINGS: StreamSettings = streamSettingsOf(DEFAULTS);

export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: deps.log as FastifyBaseLogger,
    bodyLimit: deps.bodyLimit ?? 1024 * 1024,
    // Node's own request timeout is off when these are 0 (the default); a stuck client must not hold a socket forever.
    connectionTimeout: 0,
    requestTimeout: 0,
    keepAliveTimeout: 72_000,
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    // Request ids name requests in the audit trail and logs across processes: random, not a per-process counter.
    genReqId: () => randomUUID(),
    // Clients that hold a base URL post to `<url>/` (httpx, the A2A TCK, SDKs given a URL ending in a slash): every
    // route answers with and without the trailing slash.
    routerOptions: { ignoreTrailingSlash: true },
  });
  // JSON bodies (every route that keeps Fastify's parser: NEXUS, Genesis, registrations, admin) pass the peer-input
  // guard first: not UTF-8, or nested too deep for what reads them (zod, jsonb), is a 400 naming the limit.
  guardJsonBodies(app);
  // First of all: a request's span covers its authentication too (a no-op unless tracing was started).
  traceRequests(app);
  const quotas = new TenantQuotas(deps.pool, { ...DEFAULT_QUOTAS, ...deps.auth.quotaDefaults });
  // Before authentication, which reveals more: an A2A request in an unsupported version or content type is refused
  // in its binding's form; so is a URL no route serves.
  installA2AGuards(app);
  // A key revoked or deleted, an agent or a tenant deleted, in any process (migration 023's notices): the key cache
  // and the tenants' cache forget it at once, and what its callers hold open ends (streams, hub sockets).
  const credentialWatch = new CredentialWatch({ pool: deps.pool, events: deps.hub, log: deps.log });
  const unhear = deps.hub.onConfigChange((n) => {
    deps.auth.keys.heard(n);
    if (n?.kind === 'tenants') quotas.forget(n.tenant);
  });
  app.addHook('onClose', async () => {
    unhear();
    credentialWatch.close();
  });
  // First: every route registered after this declares who may call it, and is checked before its handler runs.
  await installAuth(app, { pool: deps.pool, keys: deps.auth.keys, quotas, jwt: deps.auth.jwt, redisUrl: deps.auth.redisUrl });
  // Before any route: the OpenAPI document is built from every route's schema (GET /openapi.json).
  await installOpenApi(app);
  const scheduler =
    deps.agentRefresh && (deps.agentRefresh.scheduler ?? new RefreshScheduler({ client: deps.temporal, taskQueue: deps.taskQueue, intervalMs: deps.agentRefresh.intervalMs }));
  // Agents and enforced policies are read through caches that every change clears (src/events/config-cache.ts).
  const registry = new AgentRegistry(deps.pool, deps.outbound, { scheduler, policy: deps.agentRefresh?.policy, credentials: deps.credentials, hub: deps.hub });
  const policies = new EnforcedPolicies(deps.pool, deps.hub);
  app.addHook('onClose', async () => {
    registry.close();
    policies.close();
  });
  const health = deps.health ?? new Health({ pool: deps.pool, temporal: deps.temporal.connection, log: deps.log });
  const gateway = new TaskGateway({ client: deps.temporal, taskQueue: deps.taskQueue, pool: deps.pool, log: deps.log, health });

  health.start();
  app.addHook('onClose', async () => health.stop());
  // A dependency's outage is a 503 naming it, with Retry-After: never a 500, never a hang.
  app.setErrorHandler((err, req, reply) => {
    const e = health.unavailable(err);
    if (e) return reply.code(503).header('retry-after', String(e.retryAfterS)).send({ error: e.message, dependency: e.dependency });
    if ((err as { statusCode?: number }).statusCode && (err as { statusCode: number }).statusCode < 500) return reply.send(err);
    req.log.error({ err }, 'request failed');
    return reply.code(500).send({ error: 'Internal error' });
  });
  await app.register(healthRoutes, { health, pool: deps.pool, workerRunning: deps.workerRunning });
  await app.register(metricsRoutes, { pool: deps.pool, openStreams: () => deps.hub.readers(), workerMetricsUrl: deps.workerMetricsUrl });
  await app.register(jwksRoutes, { pool: deps.pool });
  await app.register(tenantRoutes, { keys: deps.auth.keys, quotas });
  await app.register(auditRoutes, { pool: deps.pool });
  await app.register(codecRoutes, { codec: deps.auth.payloadCodec, corsOrigins: deps.auth.codecCorsOrigins ?? [] });
  await app.register(agentRoutes, { registry, publicUrl: deps.publicUrl, grpcPort: deps.grpc?.port, keys: deps.auth.keys });
  await app.register(reputationRoutes, { pool: deps.pool });
  await app.register(taskRoutes, { pool: deps.pool, temporalUi: deps.temporalUi });
  await app.register(consoleRoutes);
  await app.register(frontDoorRoutes, { registry, pool: deps.pool, publicUrl: deps.publicUrl, grpcPort: deps.grpc?.port });
  await app.register(accountRoutes, {
    pool: deps.pool,
    unfundedAccounts: deps.unfundedAccounts ?? 'enforce',
    closedOpenTasks: (tenant) => closedOpenTaskIds(deps.temporal, deps.taskQueue, tenant),
  });
  const streams = { ...DEFAULT_STREAM_SETTINGS, ...deps.streams };
  const rpcDeps = {
    registry,
    policies,
    quotas,
    health,
    gateway,
    pool: deps.pool,
    hub: deps.hub,
    push: new PushStore(deps.pool, { allowPrivate: deps.allowPrivateUrls ?? false }),
    inputTimeoutMs: deps.inputTimeoutMs,
    pushRetryInitialMs: deps.pushRetryInitialMs,
    maxHops: deps.maxHops ?? DEFAULT_MAX_HOPS,
    streamLimits: { maxPerTask: streams.maxPerTask, maxTotal: streams.maxTotal },
    credentialWatch,
  };
  // One RPC core and front door behind every binding (JSON-RPC, HTTP+JSON, gRPC).
  const endpoints = new A2AEndpoints(rpcDeps);
  const sse = { heartbeatMs: streams.heartbeatMs, maxBufferBytes: streams.maxBufferBytes, drainTimeoutMs: streams.drainTimeoutMs };
  const certifications = new CertificationGateway({ client: deps.temporal, taskQueue: deps.taskQueue });
  const actions = new Actions({ pool: deps.pool, registry, policies, certifications, health });
  await app.register(jsonRpcRoutes, { ...rpcDeps, endpoints, publicUrl: deps.publicUrl, sse, actions });
  await app.register(credentialRoutes, { pool: deps.pool, publicUrl: deps.publicUrl });
  await app.register(restRoutes, { endpoints, health, publicUrl: deps.publicUrl, sse });
  const genesisStore = new GenesisStore(deps.pool, deps.credentials?.box);
  const genesis = new GenesisService({
    store: genesisStore,
    registry,
    intake: rpcDeps,
    temporal: deps.temporal,
    taskQueue: deps.taskQueue,
    maxSkewMs: deps.genesis?.maxSkewMs ?? DEFAULTS.SWITCHBOARD_GENESIS_MAX_SKEW_MS,
    eventRetryInitialMs: deps.genesis?.eventRetryInitialMs ?? deps.pushRetryInitialMs,
  });
  await app.register(genesisRoutes, { service: genesis, store: genesisStore, allowPrivateUrls: deps.allowPrivateUrls ?? false });
  await app.register(nexusTaskRoutes, { endpoints, publicUrl: deps.publicUrl });
  if (deps.agentPush) await app.register(agentPushRoutes, { pool: deps.pool, hub: deps.hub, tokens: deps.agentPush.tokens });
  if (deps.agentHub) await app.register(hubRoutes, { hub: deps.agentHub, registry, endpoints, publicUrl: deps.publicUrl, credentialWatch });
  if (deps.grpc) {
    const grpc = new GrpcServer({
      endpoints,
      authenticator: app.authenticator,
      rateLimitCall: app.rateLimitCall,
      publicUrl: deps.publicUrl,
      maxReceiveBytes: app.initialConfig.bodyLimit ?? 1024 * 1024,
      drainTimeoutMs: streams.drainTimeoutMs,
      keepaliveMs: streams.heartbeatMs,
      log: deps.log,
    });
    app.decorate('grpc', grpc);
    // Like the SSE streams: open gRPC streams end (naming where to resume) before the HTTP server waits for clients.
    app.addHook('preClose', async () => grpc.close());
  }
  return app;
}

/** Fastify's JSON parser (with the app's proto and constructor poisoning settings) behind the peer-input guard (src/http/json-guard.ts). */
function guardJsonBodies(app: FastifyInstance): void {
  const { onProtoPoisoning = 'error', onConstructorPoisoning = 'error' } = app.initialConfig;
  const parse = app.getDefaultJsonParser(onProtoPoisoning, onConstructorPoisoning);
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) => {
    let text: string;
    try {
      text = checkJson(body as Buffer);
    } catch (err) {
      return done(Object.assign(new Error(`Invalid JSON body: ${(err as Error).message}`), { statusCode: 400, code: 'SB_JSON_LIMIT' }), undefined);
    }
    parse(req, text, done);
  });
}
