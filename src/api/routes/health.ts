/**
 * Liveness and readiness. `/healthz` answers while the process can serve anything at all (it stays 200 through a
 * dependency's outage: restarting the process would not bring PostgreSQL or Temporal back). `/readyz` answers 200
 * only when everything a new task needs is there: PostgreSQL, Temporal, the schema migrations, and a worker: this
 * process's own, or (a process without one, SWITCHBOARD_ROLE=api) any worker polling the task queue, as Temporal
 * describes it; otherwise 503 naming what is missing. Both are public: probes carry no credentials.
 */
import type { FastifyInstance } from 'fastify';
import type { Pool } from 'pg';
import { access } from '../../core/auth/caller';
import { pendingMigrations } from '../../core/db/migrate';
import type { Health } from '../../core/health';
import type { Pollers } from '../../core/temporal/worker-presence';
import { answer, describeOnly } from './openapi';

export interface HealthRouteDeps {
  health: Health;
  pool: Pool;
  /** Whether this process's worker is polling; unset when the process runs no worker. */
  workerRunning?: () => boolean;
  /** Without a worker of its own: the workers polling the task queue (unset: not checked). */
  pollers?: () => Promise<Pollers>;
}

export async function healthRoutes(app: FastifyInstance, { health, pool, workerRunning, pollers }: HealthRouteDeps): Promise<void> {
  describeOnly(app);
  const tags = ['health'];
  app.get('/healthz', { config: access.public, schema: { tags, summary: 'Liveness: 200 while the process runs', response: { 200: answer('{ok: true}') } } }, async () => ({ ok: true }));

  const readySchema = {
    tags,
    summary: 'Readiness: PostgreSQL, Temporal, migrations, and a worker (this process\'s, or any polling the task queue)',
    response: { 200: answer('{ready: true, checks}'), 503: answer('{ready: false, missing, checks}') },
  };
  app.get('/readyz', { config: access.public, schema: readySchema }, async (_req, reply) => {
    const deps = await health.probe();
    const missing: string[] = [];
    // Public, so only up/down and since when: the errors (addresses, messages) go to the log, not to anyone asking.
    const checks: Record<string, unknown> = {
      postgresql: { up: deps.postgresql.up, since: deps.postgresql.since },
      temporal: { up: deps.temporal.up, since: deps.temporal.since },
    };
    if (!deps.postgresql.up) missing.push('postgresql');
    if (!deps.temporal.up) missing.push('temporal');
    if (deps.postgresql.up) {
      const pending = await pendingMigrations(pool).catch(() => undefined);
      checks.migrations = pending === undefined ? { checked: false } : { pending };
      if (pending?.length) missing.push('migrations');
    }
    if (workerRunning) {
      checks.worker = { running: workerRunning() };
      if (!workerRunning()) missing.push('worker');
    } else if (pollers && deps.temporal.up) {
      // How many workers polled the queue in the last minute or so: none, and a task sent here would wait for one.
      const polling = await pollers().catch(() => undefined);
      checks.workers = polling ? { polling: polling.count, ...(polling.lastPollAt ? { lastPollAt: polling.lastPollAt } : {}) } : { checked: false };
      if (polling?.count === 0) missing.push('worker');
    }
    return reply.code(missing.length ? 503 : 200).send({ ready: missing.length === 0, ...(missing.length ? { missing } : {}), checks });
  });
}
