/**
 * buildApp wires Switchboard's HTTP surface from its dependencies and never listens: tests and the server
 * (src/main.ts) get the same app.
 */
import type { Client } from '@temporalio/client';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Pool } from 'pg';
import type { Logger } from 'pino';
import { AgentRegistry } from './agents/registry';
import type { Outbound } from './http/outbound';
import { agentRoutes } from './routes/agents';
import { jsonRpcRoutes } from './routes/json-rpc';
import { TaskGateway } from './temporal/task-gateway';

export const DEFAULT_TENANT = 'default';

export interface AppDeps {
  pool: Pool;
  temporal: Client;
  taskQueue: string;
  outbound: Outbound;
  log: Logger;
  inputTimeoutMs: number;
  publicUrl?: string;
  bodyLimit?: number;
}

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
  const registry = new AgentRegistry(deps.pool, deps.outbound);
  const gateway = new TaskGateway({ client: deps.temporal, taskQueue: deps.taskQueue, pool: deps.pool, log: deps.log });

  app.get('/healthz', async () => ({ ok: true }));
  await app.register(agentRoutes, { registry, tenant, publicUrl: deps.publicUrl });
  await app.register(jsonRpcRoutes, { registry, tenant, publicUrl: deps.publicUrl, gateway, pool: deps.pool, inputTimeoutMs: deps.inputTimeoutMs });
  return app;
}
