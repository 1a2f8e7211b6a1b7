/**
 * One Switchboard process, wired in one place: src/main.ts starts it from the config, and the tests'
 * startGateway (test/helpers/harness.ts) from their options, so the tests run what production runs. The caller
 * brings what outlives a process's parts (PostgreSQL, the Temporal connection and client, the event hub, outbound
 * HTTP, agents' credentials and push tokens); this wires the worker (supervised: replaced when it fails), the
 * WebSocket hub with its hub worker, and the app: the api's (buildApp) or a worker process's probes
 * (buildWorkerApp). Nothing listens: the caller does, once it has what the banner or the test needs.
 */
import type { Client } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import type { Pool } from 'pg';
import type { Logger } from 'pino';
import type { FastifyInstance } from 'fastify';
import { type AppDeps, type WorkerAppDeps, buildApp, buildWorkerApp } from './api/app';
import type { AgentCredentials } from './core/agents/agent-credentials';
import type { EventHub } from './core/events/hub';
import { AgentHub, type HubSettings } from './api/hub/hub';
import type { Outbound } from './core/http/outbound';
import type { AgentPushTokens } from './core/push/agent-push';
import type { EncryptionCodec } from './core/temporal/encryption-codec';
import { type SupervisedWorker, type WorkerDeps, createHubWorker, createWorker, superviseWorker } from './worker/worker';

/** What a process's parts share, made by its caller. */
export interface ProcessDeps {
  pool: Pool;
  connection: NativeConnection;
  client: Client;
  namespace: string;
  taskQueue: string;
  log: Logger;
  events: EventHub;
  outbound: Outbound;
  credentials: AgentCredentials;
  agentPushTokens: AgentPushTokens;
  /** SWITCHBOARD_PAYLOAD_KEY's codec: the client and the workers read and write payloads through it. */
  payloadCodec?: EncryptionCodec;
  plugins?: WorkerDeps['plugins'];
}

/** The worker's own settings: what its activities need beyond ProcessDeps, and how it runs. */
export type WorkerSettings = Omit<WorkerDeps, 'connection' | 'namespace' | 'taskQueue' | 'pool' | 'fetch' | 'grpc' | 'hub' | 'credentials' | 'payloadCodec' | 'plugins' | 'drain' | 'activities'>;

/** The app's settings beyond ProcessDeps (the api's), or a worker process's probes. */
export type AppSettings = Omit<AppDeps, 'pool' | 'temporal' | 'taskQueue' | 'outbound' | 'log' | 'hub' | 'credentials' | 'agentHub' | 'workerRunning'>;
export type ProbeSettings = Omit<WorkerAppDeps, 'pool' | 'temporal' | 'log' | 'events' | 'workerRunning'>;

export interface ProcessOptions {
  /**
   * The Temporal worker (roles `all` and `worker`); unset: none (role `api`). `idle`: not started with the process,
   * only by startWorker (a test's second front door, which may start one later).
   */
  worker?: WorkerSettings & { idle?: boolean };
  /** The WebSocket hub (GET /hub) with its hub worker; unset: none. */
  agentHub?: Partial<HubSettings>;
  /** The api's app, or `probes`: a worker process's /healthz, /readyz and /metrics only. */
  app: { api: AppSettings } | { probes: ProbeSettings };
}

export interface SwitchboardProcess {
  app: FastifyInstance;
  agentHub?: AgentHub;
  /** The worker now running, if any. */
  worker(): SupervisedWorker | undefined;
  /** Starts a worker (again, after stopWorker); the settings as at creation, `wrapActivities` replaced when given. */
  startWorker(wrapActivities?: WorkerSettings['wrapActivities']): Promise<void>;
  /** Drains the worker: its agent calls hand their turns over. */
  stopWorker(): Promise<void>;
  /** The app first (streams end with where to resume), then the hub worker, then the worker drains. */
  close(): Promise<void>;
}

/**
 * Wires a process. The worker is made once before it is supervised, so a wrong address fails the start rather than
 * being retried for ever.
 * @throws whatever the first worker's creation or the app's build throws.
 */
export async function createProcess(d: ProcessDeps, o: ProcessOptions): Promise<SwitchboardProcess> {
  let worker: SupervisedWorker | undefined;
  const startWorker = async (wrapActivities = o.worker?.wrapActivities): Promise<void> => {
    const { idle: _idle, ...settings } = { ...o.worker, wrapActivities };
    const make = (drain: AbortSignal) =>
      createWorker({
        ...settings,
        connection: d.connection,
        namespace: d.namespace,
        taskQueue: d.taskQueue,
        pool: d.pool,
        fetch: d.outbound.fetch,
        grpc: d.outbound.grpc,
        hub: d.events,
        credentials: d.credentials,
        payloadCodec: d.payloadCodec,
        plugins: d.plugins,
        drain,
      });
    const drain = new AbortController();
    const first = await make(drain.signal);
    let handedOver = false;
    worker = superviseWorker((signal) => (handedOver ? make(signal) : ((handedOver = true), Promise.resolve(first))), d.log, drain);
  };
  const stopWorker = async (): Promise<void> => {
    const stopping = worker;
    worker = undefined;
    await stopping?.stop();
  };
  const runsWorker = o.worker !== undefined && !o.worker.idle;
  if (runsWorker) await startWorker();
  // A process without a worker of its own: /readyz asks Temporal whether any worker polls the queue.
  const workerRunning = runsWorker ? () => worker?.running() ?? false : undefined;

  const agentHub = o.agentHub && new AgentHub({ pool: d.pool, events: d.events, log: d.log, taskQueue: d.taskQueue, settings: o.agentHub });
  const hubWorker =
    agentHub && superviseWorker(() => createHubWorker({ connection: d.connection, namespace: d.namespace, hub: agentHub, payloadCodec: d.payloadCodec, plugins: d.plugins }), d.log);

  const app =
    'api' in o.app
      ? await buildApp({ ...o.app.api, pool: d.pool, temporal: d.client, taskQueue: d.taskQueue, outbound: d.outbound, log: d.log, hub: d.events, credentials: d.credentials, agentHub, workerRunning })
      : await buildWorkerApp({ ...o.app.probes, pool: d.pool, temporal: d.client, log: d.log, events: d.events, workerRunning: workerRunning ?? (() => false) });
  return {
    app,
    agentHub,
    worker: () => worker,
    startWorker,
    stopWorker,
    async close() {
      await app.close();
      await hubWorker?.stop();
      await stopWorker();
    },
  };
}
