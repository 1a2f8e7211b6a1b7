/**
 * `npm start`: Switchboard with embedded defaults. Without TEMPORAL_ADDRESS it runs a Temporal dev server
 * (state under SWITCHBOARD_DATA_DIR, Web UI on TEMPORAL_UI_PORT); without DATABASE_URL an embedded PostgreSQL
 * server (a child process, data under SWITCHBOARD_DATA_DIR). Then migrations, the worker and the HTTP server.
 *
 * main only wires processes, one named step each: the config, the Temporal runtime, the embedded services, the
 * pool and its migrations, the Temporal connection and client, what the worker and the app share, the worker,
 * and the HTTP server (the api's app, or a worker process's probes). Each step hands its stop to `Stops`, which
 * Ctrl-C (or SIGTERM) runs in reverse: the HTTP server first, then the worker drains while Temporal and PostgreSQL
 * still serve it, then the connections, and the embedded services last.
 */
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { Client } from '@temporalio/client';
import { NativeConnection, Runtime } from '@temporalio/worker';
import type { Pool } from 'pg';
import type { Logger } from 'pino';
import { createPool } from './core/db/pool';
import { createLogger, temporalLogger } from './core/log';
import type { FastifyInstance } from 'fastify';
import { type Config, ConfigError, admissionOf, codecCorsOriginsOf, connectionLimitsOf, embeddingsOf, hubSettingsOf, loadConfig, mcpSettingsOf, quotaDefaultsOf, streamSettingsOf } from './core/config';
import { migrate } from './core/db/migrate';
import { startEmbeddedPostgres } from './embedded/postgres';
import { RefreshScheduler } from './core/agents/refresh-schedules';
import { EventHub } from './core/events/hub';
import { createOutbound, type Outbound } from './core/http/outbound';
import { ensureSearchAttributes, resolveTemporalBinary, startDevServer } from './embedded/temporal';
import { type AppSettings, type WorkerSettings, createProcess } from './process';
import { ensureOrphanSweep } from './core/temporal/orphan-sweep';
import { ensureRetentionSweep } from './core/temporal/retention-sweep';
import { KeyStore } from './core/auth/keys';
import { ensureAdminKey } from './core/auth/admin-key-file';
import { JwtVerifier } from './core/auth/jwt';
import { AgentCredentials, SecretBox } from './core/agents/agent-credentials';
import { AgentPushTokens } from './core/push/agent-push';
import { PushReach } from './core/push/push-reach';
import { EncryptionCodec, dataConverterOf, generateKeySpec, parseKeyRing } from './core/temporal/encryption-codec';
import { SEARCH_ATTRIBUTES } from '../task/messages';
import { freePort } from './embedded/net';
import { tracingConfigured } from './core/tracing';
import type { Tracing } from './core/tracing-sdk';
import { REPO_ROOT } from './core/paths';

/** What the started steps need undone, run in reverse order on Ctrl-C, SIGTERM or a failed start. */
class Stops {
  private readonly steps: (() => Promise<unknown>)[] = [];
  private readonly early: (() => Promise<unknown>)[] = [];

  constructor(private readonly log: Logger) {}

  push(stop: () => Promise<unknown>): void {
    this.steps.push(stop);
  }

  /** Begun as soon as the stop begins, not in its turn (a step pushed too waits for it there). */
  atOnce(begin: () => Promise<unknown>): void {
    this.early.push(begin);
  }

  async run(code: number): Promise<never> {
    for (const begin of this.early) begin().catch((err) => this.log.error({ err }, 'shutdown step failed'));
    for (const stop of this.steps.reverse()) await stop().catch((err) => this.log.error({ err }, 'shutdown step failed'));
    process.exit(code);
  }
}

async function main(): Promise<void> {
  const config = configOrExit();
  const log = createLogger(config.LOG_LEVEL, undefined, config.LOG_FORMAT);
  stayUpOnBugs(log);
  const runtimeMetricsUrl = await installRuntime(config, log);
  const stops = new Stops(log);
  stopOnSignals(stops, log);
  const tracing = await startTracing(stops, log);
  try {
    const services = await startEmbeddedServices(config, stops, log);
    const pool = await openDatabase(services.databaseUrl, stops, log);
    const temporal = await connectTemporal(config, services.temporalAddress, tracing, stops);
    const shared = await startShared(config, pool, services.databaseUrl, stops, log);
    const scheduler = new RefreshScheduler({ client: temporal.client, taskQueue: config.TEMPORAL_TASK_QUEUE, intervalMs: config.SWITCHBOARD_AGENT_REFRESH_INTERVAL_MS, log });
    const keys = new KeyStore(pool, { envAdminKey: config.SWITCHBOARD_ADMIN_KEY });
    const where = { ...services, runtimeMetricsUrl };
    const app = await startProcess(config, { pool, temporal, shared, scheduler, keys, where }, stops, log);
    if (config.SWITCHBOARD_ROLE === 'worker') await serveWorkerProbes(config, { app, where });
    else await serveApi(config, { app, keys, where }, stops, log);
  } catch (err) {
    log.fatal({ err }, 'Switchboard failed to start');
    await stops.run(1);
  }
}

function configOrExit(): Config {
  try {
    return loadConfig();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    console.error(err.message);
    process.exit(2);
  }
}

/**
 * Last resort, behind the guards on every socket, stream and timer (src/core/http/json-guard.ts and issue 32): what
 * slips through is logged at fatal, and the process stays up. Node's advice is to exit, since memory may be left
 * half-changed; but what must not be lost lives in PostgreSQL (a failed transaction rolls back) and Temporal (a
 * failed activity is retried), and what lives here is per connection. Exiting would end every tenant's streams
 * and sockets, and the embedded Temporal and PostgreSQL, for one peer's frame: the outage the guards prevent.
 */
function stayUpOnBugs(log: Logger): void {
  process.on('uncaughtException', (err, origin) => log.fatal({ err, origin }, 'uncaught exception (a bug: no guard caught it); the process stays up'));
  process.on('unhandledRejection', (reason) => log.fatal({ err: reason }, 'unhandled promise rejection (a bug: nothing awaited it); the process stays up'));
}

/**
 * The Temporal SDK runtime of this process: its logs through pino, and its metrics (`temporal_*`, of the client and
 * every worker here) on a Prometheus exporter on a free loopback port, which GET /metrics appends to Switchboard's
 * own, so each process has one scrape target. @returns the exporter's URL.
 */
async function installRuntime(config: Config, log: Logger): Promise<string> {
  const address = `127.0.0.1:${await freePort()}`;
  Runtime.install({
    // The SDK's INFO is chatty (bundler stats), so at `info` it logs warnings only.
    logger: temporalLogger(config.LOG_LEVEL === 'info' ? log.child({}, { level: 'warn' }) : log),
    telemetryOptions: { metrics: { prometheus: { bindAddress: address } } },
  });
  return `http://${address}/metrics`;
}

/** The first Ctrl-C (or SIGTERM) stops everything in order; a second one does not wait for that. */
function stopOnSignals(stops: Stops, log: Logger): void {
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      log.warn({ signal }, 'stopping now, without waiting for the shutdown to finish');
      process.exit(130);
    }
    stopping = true;
    log.info({ signal }, 'shutting down: streams end with where to resume, the worker drains');
    void stops.run(0);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
}

/** Traces only when there is somewhere to send them; the SDK is not even loaded otherwise. */
async function startTracing(stops: Stops, log: Logger): Promise<Tracing | undefined> {
  if (!tracingConfigured()) return undefined;
  const tracing = (await import('./core/tracing-sdk')).startTracing();
  stops.push(() => tracing.shutdown());
  log.info({ endpoint: process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? process.env.OTEL_EXPORTER_OTLP_ENDPOINT }, 'OpenTelemetry traces exported over OTLP');
  return tracing;
}

interface Services {
  databaseUrl: string;
  temporalAddress: string;
  /** The embedded Temporal's Web UI, when it runs one. */
  uiUrl?: string;
}

/**
 * The embedded PostgreSQL (without DATABASE_URL) and Temporal dev server (without TEMPORAL_ADDRESS), each in a
 * session of its own (src/embedded/child-session.ts), so a terminal's Ctrl-C reaches only this process, which stops them
 * last: the worker drains and the streams end while they still serve them.
 */
async function startEmbeddedServices(config: Config, stops: Stops, log: Logger): Promise<Services> {
  const dataDir = resolve(config.SWITCHBOARD_DATA_DIR);
  let databaseUrl = config.DATABASE_URL;
  if (!databaseUrl) {
    const pg = await startEmbeddedPostgres({
      dir: join(dataDir, 'postgres'),
      passwordFile: join(dataDir, 'postgres-password'),
      port: config.SWITCHBOARD_POSTGRES_PORT,
      log: log.child({ component: 'postgres' }),
    });
    stops.push(pg.stop);
    databaseUrl = pg.url;
  }
  if (config.TEMPORAL_ADDRESS) return { databaseUrl, temporalAddress: config.TEMPORAL_ADDRESS };
  const server = await startDevServer({
    binary: config.TEMPORAL_CLI ?? (await resolveTemporalBinary(REPO_ROOT)),
    dbFilename: join(dataDir, 'temporal.sqlite'),
    port: config.TEMPORAL_PORT,
    uiPort: config.TEMPORAL_UI_PORT,
    namespace: config.TEMPORAL_NAMESPACE,
    searchAttributes: SEARCH_ATTRIBUTES,
    retentionMs: config.SWITCHBOARD_TASK_RETENTION,
    log: (msg, level = 'info') => log[level](msg),
  });
  stops.push(server.stop);
  return { databaseUrl, temporalAddress: server.address, uiUrl: server.uiUrl };
}

async function openDatabase(databaseUrl: string, stops: Stops, log: Logger): Promise<Pool> {
  const pool = createPool({ connectionString: databaseUrl, max: 10 }, log);
  stops.push(() => pool.end());
  const applied = await migrate(pool);
  if (applied.length) log.info({ applied }, 'database migrations applied');
  return pool;
}

interface TemporalSide {
  connection: NativeConnection;
  client: Client;
  /** SWITCHBOARD_PAYLOAD_KEY's codec: the client and the worker both read and write payloads (and failures' messages) through it. */
  payloadCodec?: EncryptionCodec;
  plugins?: Tracing['plugin'][];
}

/**
 * One native connection (the SDK's Rust gRPC client) for the client and the worker: the front door's calls to
 * Temporal cost far less CPU than over @grpc/grpc-js, and a workflow started here may start eagerly on this
 * process's worker.
 */
async function connectTemporal(config: Config, address: string, tracing: Tracing | undefined, stops: Stops): Promise<TemporalSide> {
  const connection = await NativeConnection.connect({ address });
  stops.push(() => connection.close());
  await ensureSearchAttributes(connection, config.TEMPORAL_NAMESPACE, SEARCH_ATTRIBUTES);
  const payloadCodec = config.SWITCHBOARD_PAYLOAD_KEY ? new EncryptionCodec(parseKeyRing(config.SWITCHBOARD_PAYLOAD_KEY)) : undefined;
  const plugins = tracing ? [tracing.plugin] : undefined;
  const client = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE, dataConverter: dataConverterOf(payloadCodec), plugins });
  return { connection, client, payloadCodec, plugins };
}

interface Shared {
  hub: EventHub;
  outbound: Outbound;
  credentials: AgentCredentials;
  agentPushTokens: AgentPushTokens;
}

/** What the worker's activities and the app share: the event hub, outbound HTTP, agents' credentials, push tokens. */
async function startShared(config: Config, pool: Pool, databaseUrl: string, stops: Stops, log: Logger): Promise<Shared> {
  // Other Switchboard processes on the same database announce their events by NOTIFY.
  const hub = new EventHub({ connection: { connectionString: databaseUrl }, log });
  await hub.start();
  stops.push(() => hub.close());
  const outbound = createOutbound({ allowPrivate: config.SWITCHBOARD_ALLOW_PRIVATE_URLS });
  stops.push(() => outbound.close());
  const secretsKey = config.SWITCHBOARD_SECRETS_KEY ?? (await keyFile(join(resolve(config.SWITCHBOARD_DATA_DIR), 'secrets-key'), generateKeySpec));
  const secretsRing = parseKeyRing(secretsKey, 'SWITCHBOARD_SECRETS_KEY');
  const credentials = new AgentCredentials({ pool, box: new SecretBox(secretsRing), fetch: outbound.fetch, hub });
  stops.push(async () => credentials.close());
  // Agents that declare push notifications push to POST /agent-push/:id (any api process verifies the token:
  // all share the secrets key). Only with SWITCHBOARD_PUBLIC_URL: a URL the agent cannot reach would leave
  // each task to the slow fallback poll.
  return { hub, outbound, credentials, agentPushTokens: new AgentPushTokens(secretsRing) };
}

/**
 * The process's parts (src/process.ts, as the tests wire them): the Temporal worker (roles `all` and `worker`),
 * supervised; the WebSocket hub with its hub worker and the api's app (roles `all` and `api`: agents' sockets live
 * in this process, so their turns come to its own task queue, which only its hub worker polls), or a worker
 * process's probes. Then the housekeeping the worker's processes do in Temporal.
 */
async function startProcess(
  config: Config,
  d: { pool: Pool; temporal: TemporalSide; shared: Shared; scheduler: RefreshScheduler; keys: KeyStore; where: Where },
  stops: Stops,
  log: Logger,
): Promise<FastifyInstance> {
  const { connection, client, payloadCodec, plugins } = d.temporal;
  const { outbound, hub, credentials, agentPushTokens } = d.shared;
  const role = config.SWITCHBOARD_ROLE;
  const worker: WorkerSettings | undefined =
    role === 'api'
      ? undefined
      : {
          registryPolicy: { trustedJkuOrigins: config.SWITCHBOARD_TRUSTED_JKU_ORIGINS },
          issuer: config.SWITCHBOARD_PUBLIC_URL,
          unfundedAccounts: config.SWITCHBOARD_UNFUNDED_ACCOUNTS,
          agentPush: { tokens: agentPushTokens, baseUrl: () => config.SWITCHBOARD_PUBLIC_URL, reach: new PushReach() },
          fullStackTraces: config.SWITCHBOARD_WORKFLOW_STACK_TRACES,
          retentionMs: config.SWITCHBOARD_TASK_RETENTION,
          inputTimeoutMs: config.SWITCHBOARD_INPUT_TIMEOUT_MS,
        };
  const deps = { pool: d.pool, connection, client, namespace: config.TEMPORAL_NAMESPACE, taskQueue: config.TEMPORAL_TASK_QUEUE, log, events: hub, outbound, credentials, agentPushTokens, payloadCodec, plugins };
  const proc = await createProcess(deps, {
    worker,
    agentHub: role === 'worker' ? undefined : hubSettingsOf(config),
    app:
      role === 'worker'
        ? { probes: { runtimeMetricsUrl: d.where.runtimeMetricsUrl, auth: { keys: d.keys, redisUrl: config.REDIS_URL, quotaDefaults: quotaDefaultsOf(config) }, connections: connectionLimitsOf(config) } }
        : { api: apiSettings(config, d.keys, d.scheduler, d.where, d.shared, payloadCodec) },
  });
  // The worker's drain begins with the stop, beside the HTTP server's close: its agent calls hand their turns over
  // while streams end. Temporal and PostgreSQL, stopped later, still serve it; the process's stop waits for it.
  stops.atOnce(async () => proc.worker()?.stop());
  stops.push(() => proc.close());
  if (worker) {
    // Housekeeping in Temporal, one long-lived workflow per job (src/core/temporal/housekeeping.ts), and the retention
    // sweep's Schedule (src/core/temporal/retention-sweep.ts), by the processes that run workers (idempotent, so several may).
    await ensureOrphanSweep(client, config.TEMPORAL_TASK_QUEUE, config.SWITCHBOARD_ORPHAN_SWEEP_MS, log);
    await ensureRetentionSweep(client, config.TEMPORAL_TASK_QUEUE, config.SWITCHBOARD_RETENTION_SWEEP_MS, log);
    // The agent-refresh sweep runs (started if missing, e.g. after a new Temporal), and earlier versions' schedules
    // are gone; in the background, so a large registry does not delay listening.
    void d.scheduler
      .reconcile(d.pool)
      .then((r) => r.deleted && log.info(r, 'agent refresh schedules of an earlier version deleted'))
      .catch((err) => log.warn({ err }, 'agent refresh sweep not started'));
  }
  return proc.app;
}

/** The api's settings from the config. */
function apiSettings(config: Config, keys: KeyStore, scheduler: RefreshScheduler, where: Where, shared: Shared, payloadCodec: EncryptionCodec | undefined): AppSettings {
  // The console links each task to its workflow there: a UI of your own, else the embedded one.
  const temporalUiUrl = config.TEMPORAL_UI_URL ?? where.uiUrl;
  return {
    auth: {
      keys,
      jwt: config.SWITCHBOARD_JWT_JWKS_URL
        ? new JwtVerifier({ jwksUrl: config.SWITCHBOARD_JWT_JWKS_URL, issuer: config.SWITCHBOARD_JWT_ISSUER, audience: config.SWITCHBOARD_JWT_AUDIENCE, fetch: shared.outbound.fetch })
        : undefined,
      payloadCodec,
      codecCorsOrigins: codecCorsOriginsOf(config),
      redisUrl: config.REDIS_URL,
      quotaDefaults: quotaDefaultsOf(config),
    },
    agentRefresh: { intervalMs: config.SWITCHBOARD_AGENT_REFRESH_INTERVAL_MS, policy: { trustedJkuOrigins: config.SWITCHBOARD_TRUSTED_JKU_ORIGINS }, scheduler },
    runtimeMetricsUrl: where.runtimeMetricsUrl,
    inputTimeoutMs: config.SWITCHBOARD_INPUT_TIMEOUT_MS,
    publicUrl: config.SWITCHBOARD_PUBLIC_URL,
    allowPrivateUrls: config.SWITCHBOARD_ALLOW_PRIVATE_URLS,
    maxHops: config.SWITCHBOARD_MAX_HOPS,
    genesis: { maxSkewMs: config.SWITCHBOARD_GENESIS_MAX_SKEW_MS },
    unfundedAccounts: config.SWITCHBOARD_UNFUNDED_ACCOUNTS,
    streams: streamSettingsOf(config),
    admission: admissionOf(config),
    embeddings: embeddingsOf(config),
    mcp: mcpSettingsOf(config),
    temporalUi: temporalUiUrl ? { url: temporalUiUrl, namespace: config.TEMPORAL_NAMESPACE } : undefined,
    grpc: config.SWITCHBOARD_GRPC_PORT ? { port: config.SWITCHBOARD_GRPC_PORT, publicTarget: config.SWITCHBOARD_PUBLIC_GRPC_URL } : undefined,
    agentPush: { tokens: shared.agentPushTokens },
    connections: connectionLimitsOf(config),
  };
}

/** Where this process's services are, for the banner and the app. */
type Where = Services & { runtimeMetricsUrl: string };

/**
 * A worker process (SWITCHBOARD_ROLE=worker) listens on PORT with only /healthz, /readyz and /metrics: an
 * orchestrator can tell whether its worker polls, and a scraper reads the tasks' series, which are counted here.
 */
async function serveWorkerProbes(config: Config, d: { app: FastifyInstance; where: Where }): Promise<void> {
  const { app } = d;
  const url = await app.listen({ host: config.HOST, port: config.PORT });
  console.log(
    [
      `Switchboard worker is running (task queue ${config.TEMPORAL_TASK_QUEUE} at ${d.where.temporalAddress})`,
      `  probes:             ${url}/healthz, ${url}/readyz, ${url}/metrics (admin key; the tasks' series are counted here)`,
      ...(config.DATABASE_URL ? [] : [postgresLine(d.where.databaseUrl, resolve(config.SWITCHBOARD_DATA_DIR))]),
      'Press Ctrl-C to stop.',
    ].join('\n'),
  );
}

/** The api's HTTP server (roles `all` and `api`): the app (src/api/app.ts) and the gRPC binding beside it. */
async function serveApi(config: Config, d: { app: FastifyInstance; keys: KeyStore; where: Where }, stops: Stops, log: Logger): Promise<void> {
  const { app, keys } = d;
  const dataDir = resolve(config.SWITCHBOARD_DATA_DIR);
  const adminKey = config.SWITCHBOARD_ADMIN_KEY ? undefined : await ensureAdminKey(keys, dataDir);
  if (adminKey?.problem) log.warn({ file: adminKey.file, outcome: adminKey.outcome }, `admin key: ${adminKey.problem}`);
  const url = await app.listen({ host: config.HOST, port: config.PORT });
  const grpcPort = app.grpc && (await app.grpc.listen(config.HOST, config.SWITCHBOARD_GRPC_PORT));
  const { temporalAddress, uiUrl, databaseUrl } = d.where;
  const lines = [
    `Switchboard${config.SWITCHBOARD_ROLE === 'api' ? ' (api only: workers run elsewhere)' : ''} is running at ${url}`,
    `  console:            ${url}/console (with an operator or admin key)`,
    `  A2A bindings:       JSON-RPC ${url}/agents/<id>/a2a, HTTP+JSON ${url}/agents/<id>/rest, ${grpcPort ? `gRPC ${config.HOST}:${grpcPort} (tenant <id>)` : 'gRPC off (SWITCHBOARD_GRPC_PORT=0)'}`,
    ...(adminKey?.key ? [`  admin key (shown once; also in ${adminKey.file}, mode 0600): ${adminKey.key}`] : []),
    ...(adminKey?.outcome === 'kept' || adminKey?.outcome === 'adopted' ? [`  admin key:          ${adminKey.file}${adminKey.outcome === 'adopted' ? ' (adopted by this database)' : ''}`] : []),
    ...(adminKey?.problem ? [`  admin key:          ${adminKey.outcome === 'refused' ? 'NOT ACCEPTED: ' : ''}${adminKey.problem}`] : []),
    `  register an agent:  curl -X POST ${url}/agents -H "authorization: Bearer ${adminKey && adminKey.outcome !== 'refused' ? `$(cat ${adminKey.file})` : '$SWITCHBOARD_ADMIN_KEY'}" -H 'content-type: application/json' -d '{"url":"http://agent.example"}'`,
    `  Temporal:           ${temporalAddress} (namespace ${config.TEMPORAL_NAMESPACE}, task queue ${config.TEMPORAL_TASK_QUEUE})`,
    ...(uiUrl ? [`  Temporal UI:        ${uiUrl}/namespaces/${config.TEMPORAL_NAMESPACE}/workflows`] : []),
    config.DATABASE_URL ? '  PostgreSQL:         DATABASE_URL' : postgresLine(databaseUrl, dataDir),
    'Press Ctrl-C to stop.',
  ];
  console.log(lines.join('\n'));
}

/**
 * The banner's line for the embedded PostgreSQL: its URL without the password (a terminal's scrollback and a log
 * collector keep what is printed), and the file that holds it, for psql or another Switchboard process's DATABASE_URL.
 */
function postgresLine(url: string, dataDir: string): string {
  const shown = new URL(url);
  shown.password = '';
  const file = join(dataDir, 'postgres-password');
  const withPassword = `postgres://${shown.username}:$(cat ${file})@${shown.host}${shown.pathname}`;
  return `  PostgreSQL:         ${shown.href} (embedded, data in ${join(dataDir, 'postgres')}; password in ${file}: DATABASE_URL=${withPassword})`;
}

/** A secret kept in a 0600 file of the data dir: read when it exists, else made by `make` and written. */
async function keyFile(file: string, make: () => string): Promise<string> {
  const kept = (await readFile(file, 'utf8').catch(() => '')).trim();
  if (kept) return kept;
  const made = make();
  await mkdir(join(file, '..'), { recursive: true });
  await writeFile(file, `${made}\n`, { mode: 0o600 });
  await chmod(file, 0o600);
  return made;
}

// A failed start ends the process (the handlers above keep a started one up).
main().catch((err) => {
  console.error(err);
  process.exit(1);
});
