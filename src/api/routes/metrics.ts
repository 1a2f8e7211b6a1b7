/**
 * `GET /metrics`: Prometheus text (src/core/metrics.ts), for an admin or a `metrics` key (a scraper's, which opens
 * nothing else), since its labels name the agents of every tenant. Point a scraper at it with
 * `Authorization: Bearer <metrics key>`.
 */
import type { FastifyInstance } from 'fastify';
import type { Pool } from 'pg';
import { access } from '../../core/auth/caller';
import { metricsText, readGaugesFrom, registry } from '../../core/metrics';
import { describeOnly } from './openapi';

export interface MetricsRouteDeps {
  pool: Pool;
  openStreams: () => number;
  /** The Temporal SDK runtime's Prometheus endpoint in this process (its client's and workers' `temporal_*`), appended to the answer. */
  runtimeMetricsUrl?: string;
}

export async function metricsRoutes(app: FastifyInstance, deps: MetricsRouteDeps): Promise<void> {
  describeOnly(app);
  const stopReading = readGaugesFrom({ pool: deps.pool, openStreams: deps.openStreams });
  app.addHook('onClose', async () => stopReading());
  const schema = {
    tags: ['health'],
    summary: 'Prometheus metrics (text exposition format)',
    response: { 200: { description: 'Prometheus text', content: { 'text/plain': { schema: { type: 'string' } } } } },
  };
  app.get('/metrics', { config: access.metrics, schema }, async (_req, reply) =>
    reply.header('content-type', registry.contentType).send(await metricsText(deps.runtimeMetricsUrl)),
  );
}
