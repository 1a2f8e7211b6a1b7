/**
 * The registry on real components, wired as production wires it once src/api/app.ts passes a RefreshScheduler to
 * the AgentRegistry: the HTTP routes, PostgreSQL (a schema of its own), and, unless `temporal: false`, a
 * Temporal dev server whose worker runs the refresh workflow and activity on a task queue of its own.
 */
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { bundleWorkflowCode, DefaultLogger, Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { createRegistryActivities } from '../../activities/registry';
import { AgentRegistry } from '../../src/core/agents/registry';
import { CardEmbedder } from '../../src/core/agents/card-embedder';
import { Embeddings, type EmbeddingsSettings } from '../../src/core/agents/embeddings';
import type { RefreshPolicy } from '../../src/core/agents/refresh';
import { RefreshScheduler } from '../../src/core/agents/refresh-schedules';
import { createOutbound, type Outbound } from '../../src/core/http/outbound';
import { agentRoutes } from '../../src/api/routes/agents';
import { workflowBundleOptions } from '../../src/worker/worker';
import { createTestDb, startTemporal, type TestDb } from './harness';

export const TENANT = 'default';

export interface RegistryGateway {
  url: string;
  app: FastifyInstance;
  db: TestDb;
  outbound: Outbound;
  registry: AgentRegistry;
  /** Present unless started with `temporal: false`. */
  env?: TestWorkflowEnvironment;
  scheduler?: RefreshScheduler;
  /** The refresh worker's task queue. */
  taskQueue?: string;
  /** Present when started with `embeddings`. */
  embedder?: CardEmbedder;
  close(): Promise<void>;
}

export interface RegistryGatewayOptions {
  policy?: Partial<RefreshPolicy>;
  /** The schedules' interval (default 5 min: tests trigger refreshes instead of waiting). */
  intervalMs?: number;
  temporal?: boolean;
  /** Hybrid search's model service (SWITCHBOARD_EMBEDDINGS_*): the registry embeds cards through it, as the app does. */
  embeddings?: EmbeddingsSettings;
  /** Reuse a database (left for its owner to drop), e.g. to start again with another model. */
  db?: TestDb;
}

let workflowBundle: Promise<WorkflowBundleWithSourceMap> | undefined;

export async function startRegistryGateway(opts: RegistryGatewayOptions = {}): Promise<RegistryGateway> {
  const withTemporal = opts.temporal !== false;
  const [env, db] = await Promise.all([withTemporal ? startTemporal() : undefined, opts.db ?? createTestDb()]);
  const outbound = createOutbound({ allowPrivate: true });
  let worker: Worker | undefined;
  let running: Promise<void> | undefined;
  let scheduler: RefreshScheduler | undefined;
  const taskQueue = env ? `registry-${randomBytes(3).toString('hex')}` : undefined;
  if (env && taskQueue) {
    workflowBundle ??= bundleWorkflowCode({ ...workflowBundleOptions(require.resolve('../../workflows/registry-workflow')), logger: new DefaultLogger('WARN') });
    worker = await Worker.create({
      connection: env.nativeConnection,
      namespace: env.namespace ?? 'default',
      taskQueue,
      workflowBundle: await workflowBundle,
      activities: createRegistryActivities({ pool: db.pool, fetch: outbound.fetch, grpc: outbound.grpc, policy: opts.policy }),
    });
    running = worker.run();
    scheduler = new RefreshScheduler({ client: env.client, taskQueue, intervalMs: opts.intervalMs });
  }
  const embedder = opts.embeddings && new CardEmbedder(db.pool, new Embeddings(opts.embeddings, outbound.fetch));
  await embedder?.start();
  const registry = new AgentRegistry(db.pool, outbound, { scheduler, policy: opts.policy, embedder });
  const app = Fastify();
  // The registry's routes alone, without the app's authentication: every request acts as the tenant's operator.
  app.addHook('onRequest', async (req) => {
    req.caller = { keyId: 'test', role: 'operator', tenant: TENANT, via: 'key' };
  });
  await app.register(agentRoutes, { registry });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  return {
    url,
    app,
    db,
    outbound,
    registry,
    env,
    scheduler,
    taskQueue,
    embedder,
    async close() {
      await app.close();
      await embedder?.stop();
      if (worker) {
        worker.shutdown();
        await running;
      }
      await env?.teardown();
      await outbound.close();
      if (!opts.db) await db.drop();
    },
  };
}

/** JSON over HTTP: status and parsed body. */
export async function call(method: string, url: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(url, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}
