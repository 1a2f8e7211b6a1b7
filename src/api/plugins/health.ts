/**
 * Which dependencies are up, as `app.health` (src/core/health.ts): probing while the app is open, and the app's error
 * handler, which answers a dependency's outage with a 503 naming it and Retry-After, never a 500 or a hang.
 */
import type { ConnectionLike } from '@temporalio/client';
import fp from 'fastify-plugin';
import type { Logger } from 'pino';
import { Health } from '../../core/health';

declare module 'fastify' {
  interface FastifyInstance {
    health: Health;
  }
}

export interface HealthPluginOptions {
  /** Default: one probing app.pg and `temporal`. */
  health?: Health;
  /** The Temporal connection to probe (the client's). */
  temporal: ConnectionLike;
  log: Logger;
}

export const healthPlugin = fp<HealthPluginOptions>(
  async (app, o) => {
    const health = o.health ?? new Health({ pool: app.pg, temporal: o.temporal, log: o.log });
    app.decorate('health', health);
    health.start();
    app.addHook('onClose', async () => health.stop());
    app.setErrorHandler((err, req, reply) => {
      const e = health.unavailable(err);
      if (e) return reply.code(503).header('retry-after', String(e.retryAfterS)).send({ error: e.message, dependency: e.dependency });
      const status = (err as { statusCode?: number }).statusCode;
      if (status && status < 500) return reply.send(err);
      req.log.error({ err }, 'request failed');
      return reply.code(500).send({ error: 'Internal error' });
    });
  },
  { name: 'switchboard-health', fastify: '5.x', dependencies: ['switchboard-pg'] },
);
