/**
 * Switchboard's side of Temporal as `app.temporal`: the client and task queue, the task gateway every A2A call
 * goes through (src/core/temporal/task-gateway.ts), the certification gateway, and whether any worker polls the queue.
 * The client's connection is the process's (shared with its worker), so the process closes it, not the app.
 */
import type { Client } from '@temporalio/client';
import fp from 'fastify-plugin';
import type { Logger } from 'pino';
import { CertificationGateway } from '../../core/temporal/certification-gateway';
import { TaskGateway } from '../../core/temporal/task-gateway';
import { WorkerPresence } from '../../core/temporal/worker-presence';

export interface TemporalResources {
  client: Client;
  taskQueue: string;
  gateway: TaskGateway;
  certifications: CertificationGateway;
  workers: WorkerPresence;
}

declare module 'fastify' {
  interface FastifyInstance {
    temporal: TemporalResources;
  }
}

export interface TemporalPluginOptions {
  client: Client;
  taskQueue: string;
  log: Logger;
  /** How long a send waits for its first answer before it asks whether any worker polls (default 3 s). */
  noWorkerCheckMs?: number;
}

export const temporalPlugin = fp<TemporalPluginOptions>(
  async (app, o) => {
    const workers = new WorkerPresence({ client: o.client, taskQueue: o.taskQueue });
    const gateway = new TaskGateway({ client: o.client, taskQueue: o.taskQueue, pool: app.pg, log: o.log, health: app.health, workers, noWorkerCheckMs: o.noWorkerCheckMs });
    const certifications = new CertificationGateway({ client: o.client, taskQueue: o.taskQueue });
    app.decorate('temporal', { client: o.client, taskQueue: o.taskQueue, gateway, certifications, workers });
  },
  { name: 'switchboard-temporal', fastify: '5.x', dependencies: ['switchboard-pg', 'switchboard-health'] },
);
