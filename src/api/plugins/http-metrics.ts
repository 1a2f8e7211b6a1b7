/**
 * The HTTP requests a process answered (`switchboard_http_requests_total`, `switchboard_http_request_duration_seconds`,
 * src/core/metrics.ts), labelled by the route's pattern (`/agents/:id/a2a`), never the URL, so the series stay few
 * whatever is requested; a URL no route serves counts under `route="unmatched"`. Registered before every route,
 * on the root instance, so that every answer is counted, a refusal by any hook included.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { UNMATCHED_ROUTE, httpRequestDuration, httpRequests } from '../../core/metrics';

/** The methods a route can have; any other a client sends (the method is the client's to choose) counts as `other`. */
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

async function httpMetrics(app: FastifyInstance): Promise<void> {
  app.addHook('onResponse', async (req, reply) => {
    const method = METHODS.has(req.method) ? req.method : 'other';
    const labels = { route: req.routeOptions.url ?? UNMATCHED_ROUTE, method, status: String(reply.statusCode) };
    httpRequests.inc(labels);
    httpRequestDuration.observe(labels, reply.elapsedTime / 1000);
  });
}

export const httpMetricsPlugin = fp(httpMetrics, { name: 'switchboard-http-metrics', fastify: '5.x' });
