/**
 * `npm start`: Switchboard with embedded defaults. Without TEMPORAL_ADDRESS it runs a Temporal dev server
 * (state under SWITCHBOARD_DATA_DIR, Web UI on TEMPORAL_UI_PORT); without DATABASE_URL an embedded PostgreSQL
 * server (a child process, data under SWITCHBOARD_DATA_DIR). Then migrations, the worker and the HTTP server.
 * Ctrl-C stops everything in reverse order.
 */
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { Client } from '@temporalio/client';
import { NativeConnection, Runtime } from '@temporalio/worker';
import { createPool } from './db/pool';
import { createLogger, temporalLogger } from './log';
import { buildApp } from './app';
import { ConfigError, hubSettingsOf, loadConfig, quotaDefaultsOf, streamSettingsOf } from './config';
import { AgentHub } from './hub/hub';
import { migrate } from './db/migrate';
import { startEmbeddedPostgres } from './db/embedded';
import { RefreshScheduler } from './agents/refresh-schedules';
import { EventHub } from './events/hub';
import { createOutbound } from './http/outbound';
import { ensureSearchAttributes, resolveTemporalBinary, startDevServer } from './temporal/dev-server';
import { createHubWorker, createWorker, superviseWorker } from './worker';
import { ensureOrphanSweep } from './temporal/orphan-sweep';
import { KeyStore } from './auth/keys';
import { JwtVerifier } from './auth/jwt';
import { AgentCredentials, SecretBox } from './agents/agent-credentials';
import { AgentPushTokens } from './push/agent-push';
import { PushReach } from './push/push-reach';
import { EncryptionCodec, dataConverterOf, generateKeySpec, parseKeyRing } from './temporal/encryption-codec';
import { SEARCH_ATTRIBUTES } from '../task/messages';
import { freePort } from './net';
import { tracingConfigured } from './tracing';
import { REPO_ROOT } from './paths';

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      process.exit(2);
    }
    throw err;
  }
  const log = createLogger(config.LOG_LEVEL);
  // Last resort, behind the guards on every socket, stream and timer (src/http/json-guard.ts and issue 32): what
  // slips through is logged at fatal, and the process stays up. Node's advice is to exit, since memory may be left
  // half-changed; but what must not be lost lives in PostgreSQL (a failed transaction rolls back) and Temporal (a
  // failed activity is retried), and what lives here is per connection. Exiting would end every tenant's streams
  // and sockets, and the embedded Temporal and PostgreSQL, for one peer's frame: the outage the guards prevent.
  process.on('uncaughtException', (err, origin) => log.fatal({ err, origin }, 'uncaught exception (a bug: no guard caught it); the process stays up'));
  process.on('unhandledRejection', (reason) => log.fatal({ err: reason }, 'unhandled promise rejection (a bug: nothing awaited it); the process stays up'));
  // The worker's own metrics (SDK runtime telemetry) go to a Prometheus exporter on a free loopback port, which
  // GET /metrics appends to Switchboard's, so there is one scrape target.
  const workerMetricsAddress = `127.0.0.1:${await freePort()}`;
  Runtime.install({
    // The SDK's logs go through pino; its INFO is chatty (bundler stats), so at `info` it logs warnings only.
    logger: temporalLogger(config.LOG_LEVEL === 'info' ? log.child({}, { level: 'warn' }) : log),
    telemetryOptions: { metrics: { prometheus: { bindAddress: workerMetricsAddress } } },
  });
  const stops: (() => Promise<unknown>)[] = [];
  const shutdown = async (code: number) => {
    for (const stop of stops.reverse()) await stop().catch((err) => log.error({ err }, 'shutdown step failed'));
    process.exit(code);
  };
  // The first Ctrl-C (or SIGTERM) stops everything in order; a second one does not wait for that.
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      log.warn({ signal }, 'stopping now, without waiting for the shutdown to finish');
      process.exit(130);
    }
    stopping = true;
    log.info({ signal }, 'shutting down: streams end with where to resume, the worker drains');
    void shutdown(0);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  // Traces only when there is somewhere to send them; the SDK is not even loaded otherwise.
  const tracing = tracingConfigured() ? (await import('./tracing-sdk')).startTracing() : undefined;
  if (tracing) {
    stops.push(() => tracing.shutdown());
    log.info({ endpoint: process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? process.env.OTEL_EXPORTER_OTLP_ENDPOINT }, 'OpenTelemetry traces exported over OTLP');
  }
  const plugins = tracing ? [tracing.plugin] : undefined;

  try {
    const dataDir = resolve(config.SWITCHBOARD_DATA_DIR);
    let databaseUrl = config.DATABASE_URL;
    if (!databaseUrl) {
      // Stopped last (stops run in reverse): the worker drains and the streams end while it still serves them. Both
      // embedded services run in sessions of their own (src/child-session.ts): a terminal's Ctrl-C reaches only us.
      const pg = await startEmbeddedPostgres({
        dir: join(dataDir, 'postgres'),
        passwordFile: join(dataDir, 'postgres-password'),
        port: config.SWITCHBOARD_POSTGRES_PORT,
        log: log.child({ component: 'postgres' }),
      });
      stops.push(pg.stop);
      databaseUrl = pg.url;
    }
    let temporalAddress = config.TEMPORAL_ADDRESS;
    let uiUrl: string | undefined;
    if (!temporalAddress) {
      const binary = config.TEMPORAL_CLI ?? (await resolveTemporalBinary(REPO_ROOT));
      const server = await startDevServer({
        binary,
        dbFilename: join(dataDir, 'temporal.sqlite'),
        port: config.TEMPORAL_PORT,
        uiPort: config.TEMPORAL_UI_PORT,
        namespace: config.TEMPORAL_NAMESPACE,
        searchAttributes: SEARCH_ATTRIBUTES,
        log: (msg, level = 'info') => log[level](msg),
      });
      stops.push(server.stop);
      temporalAddress = server.address;
      uiUrl = server.uiUrl;
    }

    const pool = createPool({ connectionString: databaseUrl, max: 10 }, log);
    stops.push(() => pool.end());
    const applied = await migrate(pool);
    if (applied.length) log.info({ applied }, 'database migrations applied');

    // One native connection (the SDK's Rust gRPC client) for the client and the worker: the front door's calls
    // to Temporal cost far less CPU than over @grpc/grpc-js, and a workflow started here may start eagerly on
    // this process's worker.
    const connection = await NativeConnection.connect({ address: temporalAddress });
    stops.push(() => connection.close());
    await ensureSearchAttributes(connection, config.TEMPORAL_NAMESPACE, SEARCH_ATTRIBUTES);
    // SWITCHBOARD_PAYLOAD_KEY: the client and the worker both read and write payloads (and failures' messages)
    // through the codec.
    const payloadCodec = config.SWITCHBOARD_PAYLOAD_KEY ? new EncryptionCodec(parseKeyRing(config.SWITCHBOARD_PAYLOAD_KEY)) : undefined;
    const client = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE, dataConverter: dataConverterOf(payloadCodec), plugins });

    // Other Switchboard processes on the same database announce their events by NOTIFY.
    const hub = new EventHub({ connection: { connectionString: databaseUrl }, log });
    await hub.start();
    stops.push(() => hub.close());

    const outbound = createOutbound({ allowPrivate: config.SWITCHBOARD_ALLOW_PRIVATE_URLS });
    stops.push(() => outbound.close());
    const secretsKey = config.SWITCHBOARD_SECRETS_KEY ?? (await keyFile(join(dataDir, 'secrets-key'), generateKeySpec));
    const secretsRing = parseKeyRing(secretsKey, 'SWITCHBOARD_SECRETS_KEY');
    const credentials = new AgentCredentials({ pool, box: new SecretBox(secretsRing), fetch: outbound.fetch, hub });
    stops.push(async () => credentials.close());
    // Agents that declare push notifications push to POST /agent-push/:id (any api process verifies the token:
    // all share the secrets key). Only with SWITCHBOARD_PUBLIC_URL: a URL the agent cannot reach would leave
    // each task to the slow fallback poll.
    const agentPushTokens = new AgentPushTokens(secretsRing);
    const agentRefresh = { intervalMs: config.SWITCHBOARD_AGENT_REFRESH_INTERVAL_MS, policy: { trustedJkuOrigins: config.SWITCHBOARD_TRUSTED_JKU_ORIGINS } };
    const workerOptions = {
      registryPolicy: agentRefresh.policy,
      connection,
      namespace: config.TEMPORAL_NAMESPACE,
      taskQueue: config.TEMPORAL_TASK_QUEUE,
      pool,
      fetch: outbound.fetch,
      grpc: outbound.grpc,
      hub,
      issuer: config.SWITCHBOARD_PUBLIC_URL,
      unfundedAccounts: config.SWITCHBOARD_UNFUNDED_ACCOUNTS,
      credentials,
      agentPush: { tokens: agentPushTokens, baseUrl: () => config.SWITCHBOARD_PUBLIC_URL, reach: new PushReach() },
      payloadCodec,
      plugins,
      fullStackTraces: config.SWITCHBOARD_WORKFLOW_STACK_TRACES,
    };
    const role = config.SWITCHBOARD_ROLE;
    const scheduler = new RefreshScheduler({ client, taskQueue: config.TEMPORAL_TASK_QUEUE, intervalMs: agentRefresh.intervalMs, log });
    let worker: ReturnType<typeof superviseWorker> | undefined;
    if (role !== 'api') {
      // Fails fast at start-up (a wrong address should say so), then restarts after any later failure.
      const first = await createWorker(workerOptions);
      let handedOver = false;
      worker = superviseWorker(async () => {
        if (!handedOver) {
          handedOver = true;
          return first;
        }
        return createWorker(workerOptions);
      }, log);
      stops.push(() => worker!.stop());
      // Housekeeping in Temporal, done by the processes that run workers (idempotent, so several may).
      await ensureOrphanSweep(client, config.TEMPORAL_TASK_QUEUE, config.SWITCHBOARD_ORPHAN_SWEEP_MS, log);
      // Every registered agent has its refresh schedule (created if missing, e.g. after a new Temporal); in the
      // background, so a large registry does not delay listening.
      void scheduler
        .reconcile(pool)
        .then((r) => (r.created || r.deleted) && log.info(r, 'agent refresh schedules reconciled'))
        .catch((err) => log.warn({ err }, 'agent refresh schedules not reconciled'));
    }
    if (role === 'worker') {
      console.log(`Switchboard worker is running (task queue ${config.TEMPORAL_TASK_QUEUE} at ${temporalAddress}; no HTTP server in this role).`);
      if (!config.DATABASE_URL) console.log(postgresLine(databaseUrl, dataDir));
      console.log('Press Ctrl-C to stop.');
      return;
    }

    // The WebSocket hub: agents' sockets live in this process, so their turns come to this process's own task
    // queue, which only its hub worker polls (also in an api-only process: it holds sockets too).
    const agentHub = new AgentHub({ pool, events: hub, log, taskQueue: config.TEMPORAL_TASK_QUEUE, settings: hubSettingsOf(config) });
    const hubWorker = superviseWorker(() => createHubWorker({ connection, namespace: config.TEMPORAL_NAMESPACE, hub: agentHub, payloadCodec, plugins }), log);
    stops.push(() => hubWorker.stop());

    const keys = new KeyStore(pool, { envAdminKey: config.SWITCHBOARD_ADMIN_KEY });
    // The console links each task to its workflow there: a UI of your own, else the embedded one.
    const temporalUiUrl = config.TEMPORAL_UI_URL ?? uiUrl;
    const adminKey = config.SWITCHBOARD_ADMIN_KEY ? undefined : await ensureAdminKey(keys, dataDir);
    const app = await buildApp({
      auth: {
        keys,
        jwt: config.SWITCHBOARD_JWT_JWKS_URL
          ? new JwtVerifier({ jwksUrl: config.SWITCHBOARD_JWT_JWKS_URL, issuer: config.SWITCHBOARD_JWT_ISSUER, audience: config.SWITCHBOARD_JWT_AUDIENCE, fetch: outbound.fetch })
          : undefined,
        payloadCodec,
        codecCorsOrigins: [`http://127.0.0.1:${config.TEMPORAL_UI_PORT}`, `http://localhost:${config.TEMPORAL_UI_PORT}`],
        redisUrl: config.REDIS_URL,
        quotaDefaults: quotaDefaultsOf(config),
      },
      agentRefresh: { ...agentRefresh, scheduler },
      credentials,
      // An api-only process is ready without a worker of its own.
      workerRunning: worker && (() => worker!.running()),
      workerMetricsUrl: worker && `http://${workerMetricsAddress}/metrics`,
      pool,
      temporal: client,
      taskQueue: config.TEMPORAL_TASK_QUEUE,
      outbound,
      log,
      inputTimeoutMs: config.SWITCHBOARD_INPUT_TIMEOUT_MS,
      publicUrl: config.SWITCHBOARD_PUBLIC_URL,
      hub,
      allowPrivateUrls: config.SWITCHBOARD_ALLOW_PRIVATE_URLS,
      maxHops: config.SWITCHBOARD_MAX_HOPS,
      genesis: { maxSkewMs: config.SWITCHBOARD_GENESIS_MAX_SKEW_MS },
      unfundedAccounts: config.SWITCHBOARD_UNFUNDED_ACCOUNTS,
      streams: streamSettingsOf(config),
      temporalUi: temporalUiUrl ? { url: temporalUiUrl, namespace: config.TEMPORAL_NAMESPACE } : undefined,
      grpc: config.SWITCHBOARD_GRPC_PORT ? { port: config.SWITCHBOARD_GRPC_PORT } : undefined,
      agentHub,
      agentPush: { tokens: agentPushTokens },
    });
    stops.push(() => app.close());
    const url = await app.listen({ host: config.HOST, port: config.PORT });
    const grpcPort = app.grpc && (await app.grpc.listen(config.HOST, config.SWITCHBOARD_GRPC_PORT));
    const lines = [
      `Switchboard${role === 'api' ? ' (api only: workers run elsewhere)' : ''} is running at ${url}`,
      `  console:            ${url}/console (with an operator or admin key)`,
      `  A2A bindings:       JSON-RPC ${url}/agents/<id>/a2a, HTTP+JSON ${url}/agents/<id>/rest, ${grpcPort ? `gRPC ${config.HOST}:${grpcPort} (tenant <id>)` : 'gRPC off (SWITCHBOARD_GRPC_PORT=0)'}`,
      ...(adminKey?.created ? [`  admin key (shown once; also in ${adminKey.file}, mode 0600): ${adminKey.key}`] : []),
      ...(adminKey && !adminKey.created ? [`  admin key:          ${adminKey.file}`] : []),
      `  register an agent:  curl -X POST ${url}/agents -H "authorization: Bearer ${adminKey ? `$(cat ${adminKey.file})` : '$SWITCHBOARD_ADMIN_KEY'}" -H 'content-type: application/json' -d '{"url":"http://agent.example"}'`,
      `  Temporal:           ${temporalAddress} (namespace ${config.TEMPORAL_NAMESPACE}, task queue ${config.TEMPORAL_TASK_QUEUE})`,
      ...(uiUrl ? [`  Temporal UI:        ${uiUrl}/namespaces/${config.TEMPORAL_NAMESPACE}/workflows`] : []),
      config.DATABASE_URL ? '  PostgreSQL:         DATABASE_URL' : postgresLine(databaseUrl, dataDir),
      'Press Ctrl-C to stop.',
    ];
    console.log(lines.join('\n'));
  } catch (err) {
    log.fatal({ err }, 'Switchboard failed to start');
    await shutdown(1);
  }
}

/** The banner's line for the embedded PostgreSQL: its URL, for psql or another Switchboard process's DATABASE_URL. */
function postgresLine(url: string, dataDir: string): string {
  return `  PostgreSQL:         ${url} (embedded, data in ${join(dataDir, 'postgres')}; psql or another process's DATABASE_URL may use it)`;
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

/**
 * The embedded start's admin key: when the database has no admin key, one is made (only its hash is stored),
 * written to `<data dir>/admin-key` (0600) for the local user, and printed once. Later starts point at the file.
 */
async function ensureAdminKey(keys: KeyStore, dataDir: string): Promise<{ key?: string; file: string; created: boolean } | undefined> {
  const file = join(dataDir, 'admin-key');
  if (await keys.hasAdminKey()) {
    const kept = await readFile(file, 'utf8').catch(() => undefined);
    return kept ? { file, created: false } : undefined;
  }
  const { key } = await keys.create({ tenant: null, role: 'admin', name: 'embedded start' });
  await mkdir(dataDir, { recursive: true });
  await writeFile(file, `${key}\n`, { mode: 0o600 });
  await chmod(file, 0o600); // writeFile's mode applies only to a new file
  return { key, file, created: true };
}

// A failed start ends the process (the handlers above keep a started one up).
main().catch((err) => {
  console.error(err);
  process.exit(1);
});
