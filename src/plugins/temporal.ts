/**
 * Switchboard's side of Temporal as `app.temporal`: the client and task queue, the task gateway every A2A call
 * goes through (src/temporal/task-gateway.ts), and the certification gateway.
 * The client's connection is the process's (shared with its worker), so the process closes it, not the app.
 */
import type { Client } from '@temporalio/client';
import fp from 'fastify-plugin';
import type { Logger } from 'pino';
import { CertificationGateway } from '../temporal/certification-gateway';
import { TaskGateway } from '../temporal/task-gateway';

export interface TemporalResources {
  client: Client;
  taskQueue: string;
  gateway: TaskGateway;
  certifications: CertificationGateway;
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
}

export const temporalPlugin = fp<TemporalPluginOptions>(
  async (app, o) => {
    const gateway = new TaskGateway({ client: o.client, taskQueue: o.taskQueue, pool: app.pg, log: o.log, health: app.health });
    const certifications = new CertificationGateway({ client: o.client, taskQueue: o.taskQueue });
    app.decorate('temporal', { client: o.client, taskQueue: o.taskQueue, gateway, certifications });
  },
  { name: 'switchboard-temporal', fastify: '5.x', dependencies: ['switchboard-pg', 'switchboard-health'] },
);
