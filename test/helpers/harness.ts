/**
 * One Switchboard for a test file, on real components: a Temporal dev server (the Go-built CLI through
 * @temporalio/testing), the local PostgreSQL in a schema of its own, a worker, and the HTTP app listening
 * on 127.0.0.1 so that @a2a-js/sdk clients talk to it over the wire. A test that only calls Switchboard's own
 * routes uses `gw.inject` (Fastify's inject: no socket), and with `listen: false` the app opens no port at all.
 */
import type { FairGateOptions } from '../../src/api/a2a/fair-gate';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bundleWorkflowCode, Runtime, DefaultLogger, type WorkflowBundleOption } from '@temporalio/worker';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Pool } from 'pg';
import type { FastifyInstance } from 'fastify';
import type { AppDeps, StreamSettings } from '../../src/api/app';
import { EventHub } from '../../src/core/events/hub';
import { migrate } from '../../src/core/db/migrate';
import { createOutbound, type Outbound } from '../../src/core/http/outbound';
import { type Activities, prebuiltWorkflowBundle, type WorkerTuning, workflowBundleOptions } from '../../src/worker/worker';
import { createProcess } from '../../src/process';
import { COMPILED } from '../../src/core/paths';
import type { HubSettings } from '../../src/api/hub/hub';
import { PushReach } from '../../src/core/push/push-reach';
import { SEARCH_ATTRIBUTES } from '../../task/messages';
import { KeyStore } from '../../src/core/auth/keys';
import { AgentCredentials, SecretBox } from '../../src/core/agents/agent-credentials';
import { EncryptionCodec, dataConverterOf, parseKeyRing } from '../../src/core/temporal/encryption-codec';
import { createLogger } from '../../src/core/log';
import { AgentPushTokens } from '../../src/core/push/agent-push';
import { createPool } from '../../src/core/db/pool';
import { startDevServer } from '../../src/embedded/temporal';
import { freePort } from './process';
import { Client } from '@temporalio/client';
import { type Client as A2AClient, ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import { SendMessageRequest, Task } from '@a2a-js/sdk';

/** SWITCHBOARD_ADMIN_KEY of every test gateway. */
export const TEST_ADMIN_KEY = 'test-admin-key-0123456789abcdef0123456789';

/** The keys a test gateway hands out for tenant `default`: an admin's, an operator's and a client's. */
export interface TestKeys {
  admin: string;
  operator: string;
  client: string;
}

/** Keys per gateway URL, so rpc() and register() authenticate as the gateway they talk to expects. */
const keysByUrl = new Map<string, TestKeys>();
/** Tells rpc(), register() and sse() which keys the Switchboard at `url` (e.g. a child process) accepts. */
export function rememberKeys(url: string, keys: TestKeys): void {
  keysByUrl.set(url, keys);
}

export function keysFor(url: string): TestKeys | undefined {
  for (const [base, keys] of keysByUrl) if (url.startsWith(base)) return keys;
  return undefined;
}

/** A fetch that sends `key` as a bearer token (for @a2a-js/sdk clients and plain calls). */
export function authFetch(key: string): typeof fetch {
  return (input, init) => {
    const headers = new Headers(init?.headers);
    if (!headers.has('authorization')) headers.set('authorization', `Bearer ${key}`);
    return fetch(input, { ...init, headers });
  };
}

/** An @a2a-js/sdk client factory whose card fetches and calls carry `key`. */
export function clientFactory(key: string, opts: { legacyCompat?: boolean } = {}): ClientFactory {
  const fetchImpl = authFetch(key);
  return new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl, ...(opts.legacyCompat ? { legacyCompat: { enabled: true } } : {}) })],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
    }),
  );
}

const bundles = new Map<boolean, Promise<WorkflowBundleOption>>();
/**
 * Bundling takes a second or two: once per test process (and kind: `sealedFailures` for a gateway with a payload
 * key). The compiled bench (`npm run bench`, dist/) runs `npm run build`'s bundle, as `npm start` does; the tests
 * (tsx) bundle the sources they run.
 */
export function workflowBundle(sealedFailures = false): Promise<WorkflowBundleOption> {
  let bundle = bundles.get(sealedFailures);
  if (!bundle) {
    const prebuilt = COMPILED ? prebuiltWorkflowBundle([], sealedFailures) : bundledForTheRun(sealedFailures);
    bundle = prebuilt ? Promise.resolve(prebuilt) : bundleWorkflowCode({ ...workflowBundleOptions(undefined, sealedFailures), logger: new DefaultLogger('WARN') });
    bundles.set(sealedFailures, bundle);
  }
  return bundle;
}

/** The bundle scripts/test.sh made once for the whole run (scripts/bundle-test-workflows.ts), if it made one. */
function bundledForTheRun(sealedFailures: boolean): { codePath: string } | undefined {
  const dir = process.env.SWITCHBOARD_TEST_WORKFLOW_BUNDLES;
  const codePath = dir && join(dir, sealedFailures ? 'sealed.js' : 'plain.js');
  return codePath && existsSync(codePath) ? { codePath } : undefined;
}

let runtimeInstalled = false;
export async function startTemporal(extraArgs: string[] = []): Promise<TestWorkflowEnvironment> {
  if (!runtimeInstalled) {
    Runtime.install({ logger: new DefaultLogger('WARN'), telemetryOptions: { logging: { filter: 'WARN', forward: {} } } });
    runtimeInstalled = true;
  }
  const binary = process.env.TEMPORAL_CLI;
  if (!binary) throw new Error('TEMPORAL_CLI is not set: run the tests with `npm test` (scripts/test.sh finds or builds the Temporal CLI)');
  // The dev server `npm start` runs (same settings, same readiness check: the namespace answers, the search
  // attributes exist), on a free port, without its UI.
  const dir = mkdtempSync(join(tmpdir(), 'sb-temporal-'));
  // A server that dies at start (a port it derives from ours, e.g. its HTTP API's, taken meanwhile by another test's
  // process: a Go panic from its dependency injection) is started again on another port, twice at most.
  let server: Awaited<ReturnType<typeof startDevServer>>;
  for (let attempt = 1; ; attempt++) {
    try {
      server = await startDevServer({
        binary,
        dbFilename: join(dir, `temporal-${attempt}.sqlite`),
        port: await freePort(),
        headless: true,
        searchAttributes: SEARCH_ATTRIBUTES,
        log: () => {},
        extraArgs,
      });
      break;
    } catch (err) {
      if (attempt >= 3 || !/exited early/.test(String(err))) throw err;
    }
  }
  const env = await TestWorkflowEnvironment.createFromExistingServer({ address: server.address });
  // The environment's teardown closes its connections; the server and its files are ours.
  const closeConnections = env.teardown.bind(env);
  return Object.assign(env, {
    async teardown() {
      await closeConnections();
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  });
}

export interface TestDb {
  pool: Pool;
  schema: string;
  drop(): Promise<void>;
}

/** A fresh schema in the local PostgreSQL (DATABASE_URL), migrated; dropped at the end. */
export const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/**
 * The environment of a Switchboard child process (test/helpers/process.ts startSwitchboard) on a test's Temporal
 * server and PostgreSQL schema: on loopback, private agent URLs allowed, the test admin key, warnings only.
 */
export async function childProcessEnv(o: { temporalAddress: string; schema: string; taskQueue: string }, extra: Record<string, string> = {}): Promise<Record<string, string>> {
  const url = new URL(DATABASE_URL);
  url.searchParams.set('options', `-c search_path=${o.schema}`); // the child works in this schema
  return {
    DATABASE_URL: url.toString(),
    TEMPORAL_ADDRESS: o.temporalAddress,
    TEMPORAL_TASK_QUEUE: o.taskQueue,
    HOST: '127.0.0.1',
    PORT: String(await freePort()),
    SWITCHBOARD_ALLOW_PRIVATE_URLS: 'true',
    SWITCHBOARD_ADMIN_KEY: TEST_ADMIN_KEY,
    LOG_LEVEL: 'warn',
    ...extra,
  };
}

export async function createTestDb(): Promise<TestDb> {
  const url = DATABASE_URL;
  const schema = `sb_test_${randomBytes(4).toString('hex')}`;
  const admin = new Pool({ connectionString: url, max: 1 });
  await admin.query(`CREATE SCHEMA ${schema}`);
  await admin.end();
  const pool = createPool({ connectionString: url, max: 20, options: `-c search_path=${schema}` });
  await migrate(pool);
  return {
    pool,
    schema,
    async drop() {
      await pool.query(`DROP SCHEMA ${schema} CASCADE`);
      await pool.end();
    },
  };
}

export type { Activities };

/** A request for Gateway.inject: a path of the app, as `as` (default the tenant's client; `none`: no credentials). */
export interface InjectRequest {
  method?: string;
  url: string;
  /** Sent as JSON (with its content type) unless a string or bytes. */
  body?: unknown;
  headers?: Record<string, string>;
  as?: keyof TestKeys | 'none';
}

export interface Injected {
  status: number;
  /** The body parsed as JSON, or undefined when it is not JSON. */
  json: any;
  text: string;
  headers: import('node:http').OutgoingHttpHeaders;
}

export interface Gateway {
  /** Where the app listens; with `listen: false`, the base inject uses (nothing listens there). */
  url: string;
  app: FastifyInstance;
  /** A request to the app in-process (app.inject), as a client over the wire would send it, without a socket. */
  inject(req: InjectRequest): Promise<Injected>;
  env: TestWorkflowEnvironment;
  /** The Temporal client the gateway uses. */
  temporal: Client;
  db: TestDb;
  outbound: Outbound;
  hub: EventHub;
  taskQueue: string;
  /** Keys for tenant `default` (admin, operator, client); rpc() and register() use them by default. */
  keys: TestKeys;
  /** The gRPC binding's host:port, when GatewayOptions.grpc asked for it. */
  grpc?: string;
  /** fetch as the tenant's client (or as `role`). */
  fetch(url: string, init?: RequestInit, role?: keyof TestKeys): Promise<Response>;
  /** Starts a worker (one runs after startGateway); `wrap` replaces activities, for fault injection. */
  startWorker(wrap?: (real: Activities) => Activities): Promise<void>;
  stopWorker(): Promise<void>;
  close(): Promise<void>;
}

export interface GatewayOptions {
  inputTimeoutMs?: number;
  /** The worker's slots, pollers and cache other than its defaults (src/worker/worker.ts WorkerTuning): the bench's BENCH_WORKER_OPTIONS. */
  workerTuning?: WorkerTuning;
  /** Fair admission per tenant (src/api/a2a/fair-gate.ts); default: the config's defaults. */
  admission?: Partial<FairGateOptions>;
  /** Extra `temporal server start-dev` arguments, e.g. lower history limits. */
  temporalArgs?: string[];
  /** Reuse a database (it is then left for its owner to drop), e.g. to bring a gateway up on another Temporal. */
  db?: TestDb;
  wrapActivities?: (real: Activities) => Activities;
  /** SWITCHBOARD_ALLOW_PRIVATE_URLS for the gateway's outbound calls (default true: the test agents are on 127.0.0.1). */
  allowPrivate?: boolean;
  /** The outbound client's default body timeout (idle time between chunks; default 30 s), for calls with no timeouts of their own. */
  outboundBodyTimeoutMs?: number;
  /** Reuse a Temporal server (left for its owner to tear down), e.g. for a second gateway process on the same task queue. */
  temporal?: { env: TestWorkflowEnvironment; taskQueue: string };
  /** Start a worker (default true); a gateway without one only serves HTTP, like a second front-door process. */
  worker?: boolean;
  pushRetryInitialMs?: number;
  maxHops?: number;
  /** SSE settings; pollMs is how often streams poll the log when no notice woke them. */
  streams?: Partial<StreamSettings> & { pollMs?: number };
  /**
   * SWITCHBOARD_UNFUNDED_ACCOUNTS. Default here `unlimited`, so tests that are not about money need not fund the
   * tenant; the economics tests use `enforce` (the production default).
   */
  unfundedAccounts?: 'enforce' | 'unlimited';
  /** Quota defaults (a tenant's own settings still win). */
  quotas?: Partial<import('../../src/core/auth/quotas').Quotas>;
  /** REDIS_URL for the rate-limit store. */
  redisUrl?: string;
  /** SWITCHBOARD_PAYLOAD_KEY: the client and the worker encrypt every Temporal payload. */
  payloadKey?: string;
  /** Bearer JWTs accepted beside keys (SWITCHBOARD_JWT_JWKS_URL). */
  jwt?: import('../../src/core/auth/plugin').BearerJwtVerifier;
  /** OpenTelemetry started by the test (src/core/tracing-sdk.ts): its plugin goes to the client, the worker and the bundle. */
  tracing?: import('../../src/core/tracing-sdk').Tracing;
  /** Temporal UI's base URL and namespace (TEMPORAL_UI_URL): GET /tasks links each task's workflow there. */
  temporalUi?: import('../../src/api/routes/tasks').TemporalUi;
  /** Where the gateway logs (at LOG_LEVEL, default silent), e.g. to search the log for secrets. */
  logTo?: { level: string; stream: import('pino').DestinationStream };
  /** Serve the gRPC binding too (SWITCHBOARD_GRPC_PORT), on a free port: Gateway.grpc is its host:port. */
  grpc?: boolean;
  /** With `grpc`: the `host:port` the cards advertise instead (SWITCHBOARD_PUBLIC_GRPC_URL), e.g. a proxy's. */
  grpcPublicTarget?: string;
  /** Serve the WebSocket hub (GET /hub) with its hub worker, as main.ts does; settings override the defaults. */
  hub?: Partial<HubSettings>;
  /** How often a task followed by the agent's pushes is polled all the same (default 30 s, as in production). */
  agentPushPollMs?: number;
  /**
   * Listen on 127.0.0.1 (default true). A test that reaches Switchboard only through gw.inject needs no port; SDK
   * clients, SSE streams and agents that call back (pushes) need one.
   */
  listen?: boolean;
  /** SWITCHBOARD_TASK_RETENTION (ms) for the worker's retention sweep (default 30 days). */
  retentionMs?: number;
  /** How long a send waits before it asks whether any worker polls the task queue (default 3 s). */
  noWorkerCheckMs?: number;
  /** SWITCHBOARD_REQUEST_TIMEOUT_MS and SWITCHBOARD_MAX_CONNECTIONS_PER_ADDRESS (default: the process defaults). */
  connections?: AppDeps['connections'];
  /** SWITCHBOARD_EMBEDDINGS_*: hybrid search's model service (default: none, full-text search). */
  embeddings?: AppDeps['embeddings'];
  /** The MCP server's settings (src/api/mcp/sessions.ts), e.g. a short call wait. */
  mcp?: AppDeps['mcp'];
}

/** SWITCHBOARD_SECRETS_KEY of every test gateway (gateways sharing a database must share it). */
export const TEST_SECRETS_KEY = `test:${Buffer.alloc(32, 7).toString('base64')}`;

export async function startGateway(opts: GatewayOptions = {}): Promise<Gateway> {
  const [env, db, workflowBundleCode] = await Promise.all([
    opts.temporal?.env ?? startTemporal(opts.temporalArgs),
    opts.db ?? createTestDb(),
    opts.tracing
      ? bundleWorkflowCode({ ...workflowBundleOptions(undefined, !!opts.payloadKey), logger: new DefaultLogger('WARN'), plugins: [opts.tracing.plugin] })
      : workflowBundle(!!opts.payloadKey),
  ]);
  const log = opts.logTo ? createLogger(opts.logTo.level, opts.logTo.stream) : createLogger(process.env.LOG_LEVEL ?? 'silent');
  const outbound = createOutbound({ allowPrivate: opts.allowPrivate ?? true, bodyTimeoutMs: opts.outboundBodyTimeoutMs });

  const agentPushTokens = new AgentPushTokens(parseKeyRing(TEST_SECRETS_KEY));
  // The URL agents push to: the gateway's own, once it listens (the worker starts before).
  const pushAt: { base?: string } = {};
  const payloadCodec = opts.payloadKey ? new EncryptionCodec(parseKeyRing(opts.payloadKey)) : undefined;
  const plugins = opts.tracing ? [opts.tracing.plugin] : undefined;
  // As in production (src/main.ts): the client shares the worker's native connection.
  const temporal = new Client({ connection: env.nativeConnection, namespace: env.namespace ?? 'default', plugins, dataConverter: dataConverterOf(payloadCodec) });
  const taskQueue = opts.temporal?.taskQueue ?? `switchboard-${randomBytes(3).toString('hex')}`;
  // Each gateway is its own "process": its own hub, hearing the others through LISTEN/NOTIFY.
  const hub = new EventHub({ connection: { connectionString: DATABASE_URL }, pollMs: opts.streams?.pollMs });
  await hub.start();
  const credentials = new AgentCredentials({ pool: db.pool, box: new SecretBox(parseKeyRing(TEST_SECRETS_KEY)), fetch: outbound.fetch, hub });
  const unfundedAccounts = opts.unfundedAccounts ?? 'unlimited';
  const keyStore = new KeyStore(db.pool, { envAdminKey: TEST_ADMIN_KEY });
  const grpcPort = opts.grpc ? await freePort() : undefined;
  // As src/main.ts wires a process: the same composition root (src/process.ts), from the test's options.
  const proc = await createProcess(
    { pool: db.pool, connection: env.nativeConnection, client: temporal, namespace: env.namespace ?? 'default', taskQueue, log, events: hub, outbound, credentials, agentPushTokens, payloadCodec, plugins },
    {
      worker: {
        idle: !(opts.worker ?? true),
        workflowBundle: workflowBundleCode,
        wrapActivities: opts.wrapActivities,
        ...(opts.workerTuning ? { tuning: opts.workerTuning } : {}),
        unfundedAccounts,
        agentPush: { tokens: agentPushTokens, baseUrl: () => pushAt.base, fallbackPollMs: opts.agentPushPollMs, reach: new PushReach() },
        retentionMs: opts.retentionMs,
        inputTimeoutMs: opts.inputTimeoutMs,
      },
      agentHub: opts.hub,
      app: {
        api: {
          grpc: grpcPort ? { port: grpcPort, publicTarget: opts.grpcPublicTarget } : undefined,
          auth: { keys: keyStore, jwt: opts.jwt, quotaDefaults: opts.quotas, redisUrl: opts.redisUrl, payloadCodec, codecCorsOrigins: ['http://ui.test'] },
          allowPrivateUrls: opts.allowPrivate ?? true,
          pushRetryInitialMs: opts.pushRetryInitialMs,
          maxHops: opts.maxHops,
          streams: opts.streams,
          admission: opts.admission,
          unfundedAccounts,
          temporalUi: opts.temporalUi,
          inputTimeoutMs: opts.inputTimeoutMs ?? 7 * 24 * 3600 * 1000,
          agentPush: { tokens: agentPushTokens },
          noWorkerCheckMs: opts.noWorkerCheckMs,
          connections: opts.connections,
          embeddings: opts.embeddings,
          mcp: opts.mcp,
        },
      },
    },
  );
  const { app } = proc;
  // Fastify's inject sends `Host: localhost:80`, so the URLs the app builds from a request's host say that.
  const url = opts.listen === false ? 'http://localhost:80' : await app.listen({ host: '127.0.0.1', port: 0 });
  if (opts.listen !== false) pushAt.base = url;
  if (grpcPort) await app.grpc!.listen('127.0.0.1', grpcPort);
  const keys: TestKeys = {
    admin: TEST_ADMIN_KEY,
    operator: (await keyStore.create({ tenant: 'default', role: 'operator', name: 'test operator' })).key,
    client: (await keyStore.create({ tenant: 'default', role: 'client', name: 'test client' })).key,
  };
  if (opts.listen !== false) keysByUrl.set(url, keys);
  return {
    url,
    app,
    inject: (req) => injectInto(app, keys, req),
    keys,
    temporal,
    grpc: grpcPort ? `127.0.0.1:${grpcPort}` : undefined,
    fetch: (target, init, role = 'client') => authFetch(keys[role])(target, init),
    env,
    db,
    outbound,
    hub,
    taskQueue,
    startWorker: (wrap) => proc.startWorker(wrap),
    stopWorker: () => proc.stopWorker(),
    async close() {
      keysByUrl.delete(url);
      await proc.close();
      credentials.close();
      await hub.close();
      if (!opts.temporal) await env.teardown();
      await outbound.close();
      if (!opts.db) await db.drop();
    },
  };
}

async function injectInto(app: FastifyInstance, keys: TestKeys, req: InjectRequest): Promise<Injected> {
  const headers: Record<string, string> = { ...req.headers };
  const own = Object.keys(headers).some((h) => /^(authorization|x-api-key)$/i.test(h));
  const as = req.as ?? 'client';
  if (!own && as !== 'none') headers.authorization = `Bearer ${keys[as]}`;
  const raw = typeof req.body === 'string' || req.body instanceof Uint8Array;
  if (req.body !== undefined && !raw && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) headers['content-type'] = 'application/json';
  const res = await app.inject({
    method: (req.method ?? 'GET') as 'GET',
    url: req.url,
    headers,
    ...(req.body === undefined ? {} : { payload: raw ? Buffer.from(req.body as string | Uint8Array) : JSON.stringify(req.body) }),
  });
  let json: any;
  try {
    json = res.body ? JSON.parse(res.body) : undefined;
  } catch {
    json = undefined;
  }
  return { status: res.statusCode, json, text: res.body, headers: res.headers };
}

/** The URLs each gateway's register() has registered, and how often: see copyOf. */
const registeredUrls = new WeakMap<Gateway, Map<string, number>>();

/**
 * The URL to register an agent server at once more. Tests register one agent server as several agents (other
 * prices, retry policies, bindings); a tenant registers a URL once (409 otherwise, migration 034), so each further
 * registration gets a query of its own (`?copy=2`), which the agent's card fetch and routes ignore.
 */
export function copyOf(gw: Gateway, agentUrl: string): string {
  const seen = registeredUrls.get(gw) ?? new Map<string, number>();
  registeredUrls.set(gw, seen);
  const n = (seen.get(agentUrl) ?? 0) + 1;
  seen.set(agentUrl, n);
  return n === 1 ? agentUrl : `${agentUrl}${agentUrl.includes('?') ? '&' : '?'}copy=${n}`;
}

/**
 * Registers an agent on the gateway (in-process, as its operator) and returns its id and the gateway URLs for it.
 * A URL this gateway registered before is registered as a copy (copyOf).
 */
export async function register(gw: Gateway, agentUrl: string, extra: Record<string, unknown> = {}) {
  const res = await gw.inject({ method: 'POST', url: '/agents', as: 'operator', body: { url: copyOf(gw, agentUrl), ...extra } });
  if (res.status !== 201) throw new Error(`registration failed: ${res.status} ${res.text}`);
  const { id } = res.json as { id: string };
  return { id, base: `${gw.url}/agents/${id}`, rpc: `${gw.url}/agents/${id}/a2a` };
}

/** Makes an agent key (role agent) for a registered agent, through the admin API: the agent's own credential. */
export async function agentKey(gw: Gateway, agentId: string): Promise<string> {
  const res = await fetch(`${gw.url}/tenants/default/keys`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${gw.keys.admin}` },
    body: JSON.stringify({ role: 'agent', agentId, name: `agent ${agentId}` }),
  });
  const body = (await res.json()) as { key: string };
  if (res.status !== 201) throw new Error(`agent key refused: ${res.status} ${JSON.stringify(body)}`);
  return body.key;
}

/**
 * A raw JSON-RPC call, for the error cases the SDK clients would refuse to send. It carries the client key of
 * the test gateway at `url` unless `headers` bring credentials of their own. A string or bytes body goes as is.
 */
export async function rpc(url: string, body: unknown, headers: Record<string, string> = {}) {
  const own = Object.keys(headers).some((h) => /^(authorization|x-api-key)$/i.test(h));
  const key = own ? undefined : keysFor(url)?.client;
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}), ...headers },
    body: typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text };
}

/** Polls `check` until it returns a value, or fails after `ms`; `what` may be a function, to say what was seen by then. */
export async function eventually<T>(check: () => Promise<T | undefined> | T | undefined, ms = 15_000, what: string | (() => string) = 'condition'): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v !== undefined && v !== false) return v as T;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${typeof what === 'function' ? what() : what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Sends `text` as a new user message (non-blocking when asked) and returns the task the gateway answers with, as 1.0 JSON. */
export async function sendText(client: A2AClient, text: string, returnImmediately = false): Promise<any> {
  const request = SendMessageRequest.fromJSON({
    message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] },
    configuration: { returnImmediately },
  });
  return Task.toJSON((await client.sendMessage(request)) as Task);
}

/** The text of a message's or an artifact's parts (1.0 JSON). */
export const textOf = (parts: { text?: string }[] = []) => parts.map((p) => p.text ?? '').join('');
