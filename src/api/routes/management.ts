/**
 * The management API: health and metrics, keys and tenants, the audit trail, the codec for Temporal UI, the agent
 * registry, tasks and accounts for operators, the console page, and the public JWKS and status lists. Every route
 * reads the app's resources (src/api/plugins/*) through these options.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { KeyStore } from '../../core/auth/keys';
import type { UnfundedPolicy } from '../../core/ledger/postings';
import type { EncryptionCodec } from '../../core/temporal/encryption-codec';
import { closedOpenTaskIds } from '../../core/temporal/orphan-sweep';
import { accountRoutes } from './accounts';
import { agentRoutes } from './agents';
import { auditRoutes } from './audit';
import { codecRoutes } from './codec';
import { consoleRoutes } from './console';
import { credentialRoutes } from './credentials';
import { healthRoutes } from './health';
import { jwksRoutes } from './jwks';
import { metricsRoutes } from './metrics';
import { reputationRoutes } from './reputation';
import { type TemporalUi, taskRoutes } from './tasks';
import { tenantRoutes } from './tenants';
import { enrollmentTokenRoutes } from './enrollment-tokens';
import { EnrollmentTokens } from '../../core/auth/enrollment';
import type { GrpcAdvert } from '../../core/agents/gateway-card';

export interface ManagementOptions {
  keys: KeyStore;
  publicUrl?: string;
  grpc?: GrpcAdvert;
  /** Whether this process's worker is polling; unset: /readyz asks Temporal whether any worker polls the queue. */
  workerRunning?: () => boolean;
  /** The Temporal SDK runtime's Prometheus endpoint in this process, appended to GET /metrics. */
  runtimeMetricsUrl?: string;
  /** Open SSE streams in this process (a gauge of GET /metrics). */
  openStreams: () => number;
  /** SWITCHBOARD_PAYLOAD_KEY's codec, served to Temporal UI at /codec/decode; and the origins that UI runs at. */
  payloadCodec?: Pick<EncryptionCodec, 'seal' | 'decodeFor'>;
  codecCorsOrigins?: readonly string[];
  unfundedAccounts: UnfundedPolicy;
  temporalUi?: TemporalUi;
}

export const managementRoutes = fp<ManagementOptions>(
  async (app: FastifyInstance, o) => {
    const pool = app.pg;
    const { client, taskQueue, workers } = app.temporal;
    await app.register(probeRoutes, { workerRunning: o.workerRunning, pollers: o.workerRunning ? undefined : () => workers.pollers(), runtimeMetricsUrl: o.runtimeMetricsUrl, openStreams: o.openStreams });
    await app.register(jwksRoutes, { pool });
    await app.register(tenantRoutes, { keys: o.keys, quotas: app.quotas });
    await app.register(enrollmentTokenRoutes, { keys: o.keys, tokens: new EnrollmentTokens(pool) });
    await app.register(auditRoutes, { pool });
    await app.register(codecRoutes, { codec: o.payloadCodec, corsOrigins: o.codecCorsOrigins ?? [] });
    await app.register(agentRoutes, { registry: app.registry, publicUrl: o.publicUrl, grpc: o.grpc, keys: o.keys });
    await app.register(reputationRoutes, { pool });
    await app.register(taskRoutes, { pool, temporalUi: o.temporalUi });
    await app.register(consoleRoutes);
    await app.register(accountRoutes, { pool, unfundedAccounts: o.unfundedAccounts, closedOpenTasks: (tenant) => closedOpenTaskIds(client, taskQueue, tenant) });
    await app.register(credentialRoutes, { pool, publicUrl: o.publicUrl });
  },
  { name: 'switchboard-management', fastify: '5.x', dependencies: ['switchboard-auth', 'switchboard-temporal', 'switchboard-registry'] },
);

export interface ProbeOptions {
  workerRunning?: () => boolean;
  pollers?: Parameters<typeof healthRoutes>[1]['pollers'];
  runtimeMetricsUrl?: string;
  openStreams?: () => number;
}

/**
 * What an orchestrator and a scraper read from every process, a worker's too: `/healthz`, `/readyz` and `/metrics`
 * (this process's `switchboard_*` series, then the SDK runtime's `temporal_*`).
 */
export const probeRoutes = fp<ProbeOptions>(
  async (app: FastifyInstance, o) => {
    await app.register(healthRoutes, { health: app.health, pool: app.pg, workerRunning: o.workerRunning, pollers: o.pollers });
    await app.register(metricsRoutes, { pool: app.pg, openStreams: o.openStreams ?? (() => 0), runtimeMetricsUrl: o.runtimeMetricsUrl });
  },
  { name: 'switchboard-probes', fastify: '5.x', dependencies: ['switchboard-auth', 'switchboard-health'] },
);
