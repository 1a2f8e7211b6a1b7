/**
 * The process's PostgreSQL pool as `app.pg`. The pool is shared with the process's worker, which drains after
 * the app has closed (src/main.ts), so the process ends it, not the app.
 */
import fp from 'fastify-plugin';
import type { Pool } from 'pg';

declare module 'fastify' {
  interface FastifyInstance {
    pg: Pool;
  }
}

export const pgPlugin = fp<{ pool: Pool }>(
  async (app, { pool }) => {
    app.decorate('pg', pool);
  },
  { name: 'switchboard-pg', fastify: '5.x' },
);
