/**
 * buildApp wires Switchboard's HTTP surface from its dependencies and never listens: tests and the server
 * (src/main.ts) get the same app.
 */
import type { Client } from '@temporalio/client';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Pool } from 'pg';
import type { Logger } from 'pino';
import type { StreamLimits } from './a2a/request-handler';
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
import { reputationRoutes } from './routes/reputation';
import type { SseOptions } from './routes/sse';
import { TaskGateway } from './temporal/task-gateway';

export const DEFAULT_TENANT = 'default';
export const DEFAULT_MAX_HOPS = 5;

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
  agentRefresh?: { intervalMs?: number; policy?: Partial<RefreshPolicy> };
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
}

export interface StreamSettings extends SseOptions, StreamLimits {}

export const DEFAULT_STREAM_SETTINGS: StreamSettings = {
  heartbeatMs: 15_000,
  maxBufferBytes: 1024 * 1024,
  drainTimeoutMs: 30_000,
  maxPerTask: 100,
  maxTotal: 10_000,
};

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
  });
  const tenant = DEFAULT_TENANT;
  const scheduler = deps.agentRefresh && new RefreshScheduler({ client: deps.temporal, taskQueue: deps.taskQueue, intervalMs: deps.agentRefresh.intervalMs });
  const registry = new AgentRegistry(deps.pool, deps.outbound, { scheduler, policy: deps.agentRefresh?.policy });
  const gateway = new TaskGateway({ client: deps.temporal, taskQueue: deps.taskQueue, pool: deps.pool, log: deps.log });

  app.get('/healthz', async () => ({ ok: true }));
  await app.register(jwksRoutes, { pool: deps.pool });
  await app.register(agentRoutes, { registry, tenant, publicUrl: deps.publicUrl });
  await app.register(reputationRoutes, { pool: deps.pool, tenant });
  await app.register(frontDoorRoutes, { registry, pool: deps.pool, tenant, publicUrl: deps.publicUrl });
  await app.register(accountRoutes, { pool: deps.pool, tenant, unfundedAccounts: deps.unfundedAccounts ?? 'enforce' });
  const streams = { ...DEFAULT_STREAM_SETTINGS, ...deps.streams };
  await app.register(jsonRpcRoutes, {
    registry,
    tenant,
    publicUrl: deps.publicUrl,
    gateway,
    pool: deps.pool,
    hub: deps.hub,
    push: new PushStore(deps.pool, { allowPrivate: deps.allowPrivateUrls ?? false }),
    inputTimeoutMs: deps.inputTimeoutMs,
    pushRetryInitialMs: deps.pushRetryInitialMs,
    maxHops: deps.maxHops ?? DEFAULT_MAX_HOPS,
    streamLimits: { maxPerTask: streams.maxPerTask, maxTotal: streams.maxTotal },
    sse: { heartbeatMs: streams.heartbeatMs, maxBufferBytes: streams.maxBufferBytes, drainTimeoutMs: streams.drainTimeoutMs },
  });
  return app;
}
