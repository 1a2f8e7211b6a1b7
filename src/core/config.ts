/**
 * Switchboard's configuration: read from the environment once, here, and validated with zod.
 * Nothing else reads process.env. A bad value stops start-up with a message naming the variable.
 */
import os from 'node:os';
import { z } from 'zod';
import { RETENTION_HINT, parseRetention } from './retention/duration';

const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'], { error: 'must be true or false' })
  .transform((v) => v === 'true' || v === '1' || v === 'yes');
const optionalUrl = (protocols: RegExp) => z.url({ protocol: protocols, error: 'must be a URL' }).optional();

const EnvSchema = z.object({
  PORT: z.coerce.number({ error: 'must be a port number' }).int().min(0).max(65535).default(8080),
  HOST: z.string().min(1).default('127.0.0.1'),
  /** The A2A gRPC binding's port (on HOST; the cards advertise it on SWITCHBOARD_PUBLIC_URL's host). 0: no gRPC. */
  SWITCHBOARD_GRPC_PORT: z.coerce.number({ error: 'must be a port number' }).int().min(0).max(65535).default(8081),
  /**
   * The gRPC target clients use (`host:port`), written into the cards, when it is not the base URL's host at
   * SWITCHBOARD_GRPC_PORT: a published port (docker-compose), a proxy or a load balancer in front.
   */
  SWITCHBOARD_PUBLIC_GRPC_URL: z
    .string()
    .regex(/^(\[[0-9a-fA-F:.]+\]|[\w.-]+):\d{1,5}$/, 'must be host:port (the gRPC target clients use)')
    .optional(),
  /** Unset: an embedded PostgreSQL server (a child process), its data under SWITCHBOARD_DATA_DIR. */
  DATABASE_URL: optionalUrl(/^postgres(ql)?$/),
  /** The embedded PostgreSQL's port on 127.0.0.1 (without DATABASE_URL); default: a free one at each start. */
  SWITCHBOARD_POSTGRES_PORT: z.coerce.number({ error: 'must be a port number' }).int().min(1).max(65535).optional(),
  /** Unset: a Temporal dev server started by Switchboard, persisted under SWITCHBOARD_DATA_DIR. */
  TEMPORAL_ADDRESS: z
    .string()
    .regex(/^[\w.-]+:\d{1,5}$/, 'must be host:port')
    .optional(),
  TEMPORAL_NAMESPACE: z.string().min(1).default('default'),
  TEMPORAL_TASK_QUEUE: z.string().min(1).default('switchboard'),
  /** Outbound calls to loopback/private/link-local addresses are refused unless this is true. */
  SWITCHBOARD_ALLOW_PRIVATE_URLS: bool.default(false),
  SWITCHBOARD_DATA_DIR: z.string().min(1).default('.data'),
  /** The URL clients use to reach Switchboard (written into the agent cards it serves); default: the request's Host. */
  SWITCHBOARD_PUBLIC_URL: optionalUrl(/^https?$/),
  /** How long an input-required task waits for the client's next message (ms). Default 7 days. */
  SWITCHBOARD_INPUT_TIMEOUT_MS: z.coerce.number().int().min(1000).default(7 * 24 * 3600 * 1000),
  /** Temporal CLI used for the embedded dev server; default: scripts/ensure-temporal.sh finds or builds it. */
  TEMPORAL_CLI: z.string().min(1).optional(),
  /** The embedded dev server's gRPC port (without TEMPORAL_ADDRESS). */
  TEMPORAL_PORT: z.coerce.number().int().min(1).max(65535).default(7233),
  TEMPORAL_UI_PORT: z.coerce.number().int().min(1).max(65535).default(8233),
  /** Temporal UI's base URL, for the console's links to each task's workflow; default: the embedded dev server's UI. */
  TEMPORAL_UI_URL: optionalUrl(/^https?$/),
  /**
   * How long a client has to send a whole request, headers and body (ms); past it the connection is closed. Only
   * receiving: a stream's or a blocking send's answer may take as long as it takes.
   */
  SWITCHBOARD_REQUEST_TIMEOUT_MS: z.coerce.number().int().min(1000).default(30_000),
  /**
   * Open HTTP connections one client address may hold (an IPv6 client: its /64); past it a new one is closed at
   * once. Behind a reverse proxy every client has the proxy's address: raise it there.
   */
  SWITCHBOARD_MAX_CONNECTIONS_PER_ADDRESS: z.coerce.number().int().min(1).default(1_000),
  /**
   * Fair admission per tenant (src/api/a2a/fair-gate.ts): sends in their busy phase at once, across tenants; past it a
   * send waits, and a freed place goes to the waiting tenant holding the fewest. 0: as many as the CPUs this process
   * may use (on 2 cores twice that let a flood triple a light tenant's p50: bench/fairness.ts). With split roles,
   * size it to the workers behind this api process.
   */
  SWITCHBOARD_ADMISSION_CONCURRENCY: z.coerce.number().int().min(0).default(0),
  /** The longest a send holds its place (ms): a task still running then waits on its agent and lets others in. */
  SWITCHBOARD_ADMISSION_HOLD_MS: z.coerce.number().int().min(1).default(250),
  /** The longest a send waits for a place before it is refused (-32053, nothing started) (ms). */
  SWITCHBOARD_ADMISSION_WAIT_MS: z.coerce.number().int().min(1).default(30_000),
  /** MCP (/mcp, docs/mcp.md): how long a tools/call waits for its task's turn to end before it answers "still working" (ms). */
  SWITCHBOARD_MCP_CALL_WAIT_MS: z.coerce.number().int().min(1_000).default(10 * 60_000),
  /** MCP: a session without a request (and no open stream) this long is closed (ms). */
  SWITCHBOARD_MCP_SESSION_IDLE_MS: z.coerce.number().int().min(1_000).default(30 * 60_000),
  /** MCP: open sessions per tenant in one process; one more closes the tenant's least recently used. */
  SWITCHBOARD_MCP_SESSIONS_PER_TENANT: z.coerce.number().int().min(1).default(100),
  /** SSE: a comment is sent on a stream idle this long (ms). */
  SWITCHBOARD_SSE_HEARTBEAT_MS: z.coerce.number().int().min(100).default(15_000),
  /** SSE: bytes buffered for a slow reader before Switchboard waits for it, and how long it waits (ms). */
  SWITCHBOARD_SSE_BUFFER_BYTES: z.coerce.number().int().min(1024).default(1024 * 1024),
  SWITCHBOARD_SSE_DRAIN_TIMEOUT_MS: z.coerce.number().int().min(100).default(30_000),
  /** Caps on open SSE streams: per task, and in this process. */
  SWITCHBOARD_MAX_STREAMS_PER_TASK: z.coerce.number().int().min(1).default(100),
  SWITCHBOARD_MAX_STREAMS: z.coerce.number().int().min(1).default(10_000),
  /**
   * A requester account that has never been funded: `enforce` (default) refuses any paid task until it is
   * funded; `unlimited` lets it run on credit until its first deposit covers what it owes.
   */
  SWITCHBOARD_UNFUNDED_ACCOUNTS: z.enum(['enforce', 'unlimited'], { error: 'must be enforce or unlimited' }).default('enforce'),
  /** How often each registered agent's card is refreshed and its endpoint probed (ms). Default 5 min. */
  SWITCHBOARD_AGENT_REFRESH_INTERVAL_MS: z.coerce.number().int().min(1000).default(300_000),
  /** Comma-separated origins whose JWKS an agent card's `jku` may name, besides the card's own origin. */
  SWITCHBOARD_TRUSTED_JKU_ORIGINS: z
    .string()
    .default('')
    .transform((s) => s.split(',').map((o) => o.trim()).filter(Boolean))
    .pipe(z.array(z.url({ protocol: /^https?$/, error: 'must be comma-separated http(s) origins' }))),
  /** How often tasks whose workflow closed without a terminal state (e.g. terminated in Temporal UI) are ended (ms). */
  SWITCHBOARD_ORPHAN_SWEEP_MS: z.coerce.number().int().min(1000).default(30_000),
  /**
   * How long a task is kept after it reached a terminal state (a duration: `30d`, `12h`, `4s`); then the retention
   * sweep purges it (src/core/temporal/retention-sweep.ts). A tenant may set its own (PATCH /tenants/:id).
   */
  SWITCHBOARD_TASK_RETENTION: z
    .string()
    .default('30d')
    .transform((s, ctx) => {
      const ms = parseRetention(s);
      if (ms === undefined) ctx.addIssue({ code: 'custom', message: RETENTION_HINT });
      return ms ?? 0;
    }),
  /** How often the retention sweep runs (ms). Default 1 h. */
  SWITCHBOARD_RETENTION_SWEEP_MS: z.coerce.number().int().min(1000).default(3_600_000),
  /**
   * Full per-promise stack traces in the workflow sandbox (Temporal UI's Stack Trace tab names the line each task
   * waits at), at a cost in workflow-thread CPU per task; the worker then bundles its workflows at start, without
   * workflows/sandbox.ts. Default: two frames (failures keep where they were thrown).
   */
  SWITCHBOARD_WORKFLOW_STACK_TRACES: bool.default(false),
  /** Multi-agent jobs: how many hops below its root task a task started by an agent may be. */
  SWITCHBOARD_MAX_HOPS: z.coerce.number().int().min(0).max(100).default(5),
  /** Genesis Nexus envelopes: how far an envelope's timestamp may be from the gateway's clock, either way (ms). */
  SWITCHBOARD_GENESIS_MAX_SKEW_MS: z.coerce.number().int().min(1000).default(300_000),
  /** The WebSocket hub (GET /hub): the largest frame an agent may send (bytes; larger closes the socket with 1009). */
  SWITCHBOARD_HUB_MAX_FRAME_BYTES: z.coerce.number().int().min(1024).default(1024 * 1024),
  /** The hub pings each socket this often (ms); one that has not answered the last ping is dropped. */
  SWITCHBOARD_HUB_PING_MS: z.coerce.number().int().min(100).default(20_000),
  /** A hub agent silent this long (ms: no heartbeat or other frame) is marked down and its socket closed (4000). */
  SWITCHBOARD_HUB_HEARTBEAT_TIMEOUT_MS: z.coerce.number().int().min(1000).default(60_000),
  /** Frames per second one hub agent may send (bursts of twice that); past it, requests are answered -32053. */
  SWITCHBOARD_HUB_MAX_FRAMES_PER_SECOND: z.coerce.number().int().min(1).default(100),
  /**
   * An admin API key (any string of 32+ characters; `sb_…` from POST /tenants/:id/keys works too). Unset: the
   * embedded start makes one on first run, prints it once and keeps it in SWITCHBOARD_DATA_DIR/admin-key (0600).
   */
  SWITCHBOARD_ADMIN_KEY: z.string().min(32, 'must be at least 32 characters').optional(),
  /** Accept bearer JWTs verified against this JWKS (claims: src/core/auth/jwt.ts), beside API keys. */
  SWITCHBOARD_JWT_JWKS_URL: optionalUrl(/^https?$/),
  SWITCHBOARD_JWT_ISSUER: z.string().min(1).optional(),
  SWITCHBOARD_JWT_AUDIENCE: z.string().min(1).optional(),
  /** Rate-limit counters in Redis (shared by every Switchboard process); unset: in memory, per process. */
  REDIS_URL: optionalUrl(/^rediss?$/),
  /**
   * Seals agents' outbound credentials at rest: `<keyId>:<base64 of 32 bytes>[,…]`, the first encrypts, all
   * decrypt. Unset: the embedded start makes one in SWITCHBOARD_DATA_DIR/secrets-key (0600).
   */
  SWITCHBOARD_SECRETS_KEY: z.string().min(1).optional(),
  /** Encrypt every Temporal payload (same format as SWITCHBOARD_SECRETS_KEY); POST /codec/decode serves Temporal UI. */
  SWITCHBOARD_PAYLOAD_KEY: z.string().min(1).optional(),
  /** Quota defaults for tenants that set none of their own (PATCH /tenants/:id). */
  SWITCHBOARD_QUOTA_OPEN_TASKS: z.coerce.number().int().min(0).default(10_000),
  SWITCHBOARD_QUOTA_TASKS_PER_DAY: z.coerce.number().int().min(0).default(1_000_000),
  SWITCHBOARD_QUOTA_STREAMS_PER_KEY: z.coerce.number().int().min(0).default(1_000),
  SWITCHBOARD_RATE_LIMIT_TENANT_RPS: z.coerce.number().int().min(1).default(2_000),
  SWITCHBOARD_RATE_LIMIT_KEY_RPS: z.coerce.number().int().min(1).default(1_000),
  /**
   * Hybrid search (issue 42): an OpenAI-compatible embeddings API (`POST <url>/embeddings`: Ollama, vLLM,
   * text-embeddings-inference, LocalAI, OpenAI), its model, and its key if it wants one. Unset: full-text search only.
   * Called through the guarded outbound client: a service on a private address needs SWITCHBOARD_ALLOW_PRIVATE_URLS.
   */
  SWITCHBOARD_EMBEDDINGS_URL: optionalUrl(/^https?$/),
  SWITCHBOARD_EMBEDDINGS_MODEL: z.string().min(1).max(200).optional(),
  SWITCHBOARD_EMBEDDINGS_KEY: z.string().min(1).optional(),
  /** The longest a search waits for its query's vector before it ranks by full text alone (ms). */
  SWITCHBOARD_EMBEDDINGS_TIMEOUT_MS: z.coerce.number().int().min(50).max(60_000).default(2_000),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** `pretty`: one readable, coloured line per entry; `json`: one JSON object per line. Unset: pretty on a terminal, else JSON. */
  LOG_FORMAT: z.enum(['json', 'pretty']).optional(),
  /**
   * What this process runs: `api` (the HTTP front door), `worker` (the Temporal worker, no HTTP server), or `all`
   * (both, the default). Split roles share DATABASE_URL, TEMPORAL_ADDRESS and the task queue.
   */
  SWITCHBOARD_ROLE: z.enum(['api', 'worker', 'all'], { error: 'must be api, worker or all' }).default('all'),
}).superRefine((c, ctx) => {
  // Split roles are the production shape: their processes share one Temporal, and the embedded one is Temporal's
  // development server (SQLite, synchronous=OFF: src/embedded/temporal.ts). The embedded PostgreSQL is a real
  // server that other processes may share (DATABASE_URL, printed at start), so a split role may run it.
  if (c.SWITCHBOARD_ROLE !== 'all' && !c.TEMPORAL_ADDRESS) {
    ctx.addIssue({ code: 'custom', path: ['SWITCHBOARD_ROLE'], message: `${c.SWITCHBOARD_ROLE} needs TEMPORAL_ADDRESS (split roles share one Temporal server; the embedded one is a development server)` });
  }
  if (c.SWITCHBOARD_EMBEDDINGS_URL && !c.SWITCHBOARD_EMBEDDINGS_MODEL) {
    ctx.addIssue({ code: 'custom', path: ['SWITCHBOARD_EMBEDDINGS_MODEL'], message: 'is required with SWITCHBOARD_EMBEDDINGS_URL (the model the service embeds with)' });
  }
});

export type Config = z.infer<typeof EnvSchema>;

export class ConfigError extends Error {}

/** @throws ConfigError naming every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // Empty strings count as unset, as in most shells' `VAR= cmd`.
  const present = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = EnvSchema.safeParse(present);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message} (got ${JSON.stringify(present[String(i.path[0])])})`);
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  return parsed.data;
}

/** Every setting's default, as loadConfig gives it with nothing set: the one place defaults are written is the schema above. */
export const DEFAULTS: Config = loadConfig({});

/**
 * The origins whose browsers may call POST /codec/decode (Temporal UI's): the embedded UI's on both loopback
 * names, and TEMPORAL_UI_URL's when Temporal UI is elsewhere (docker-compose's, a deployed one).
 */
export function codecCorsOriginsOf(c: Config): string[] {
  const origins = [`http://127.0.0.1:${c.TEMPORAL_UI_PORT}`, `http://localhost:${c.TEMPORAL_UI_PORT}`];
  if (c.TEMPORAL_UI_URL) origins.push(new URL(c.TEMPORAL_UI_URL).origin);
  return [...new Set(origins)];
}

/** The stream settings (SSE and caps) of a config. */
export function streamSettingsOf(c: Config) {
  return {
    heartbeatMs: c.SWITCHBOARD_SSE_HEARTBEAT_MS,
    maxBufferBytes: c.SWITCHBOARD_SSE_BUFFER_BYTES,
    drainTimeoutMs: c.SWITCHBOARD_SSE_DRAIN_TIMEOUT_MS,
    maxPerTask: c.SWITCHBOARD_MAX_STREAMS_PER_TASK,
    maxTotal: c.SWITCHBOARD_MAX_STREAMS,
  };
}

/** The WebSocket hub's limits (src/api/hub/hub.ts). */
export function hubSettingsOf(c: Config) {
  return {
    maxFrameBytes: c.SWITCHBOARD_HUB_MAX_FRAME_BYTES,
    pingMs: c.SWITCHBOARD_HUB_PING_MS,
    heartbeatTimeoutMs: c.SWITCHBOARD_HUB_HEARTBEAT_TIMEOUT_MS,
    maxFramesPerSecond: c.SWITCHBOARD_HUB_MAX_FRAMES_PER_SECOND,
  };
}

/** The quotas a tenant has unless it sets its own (PATCH /tenants/:id). */
export function quotaDefaultsOf(c: Config) {
  return {
    openTasks: c.SWITCHBOARD_QUOTA_OPEN_TASKS,
    newTasksPerDay: c.SWITCHBOARD_QUOTA_TASKS_PER_DAY,
    streamsPerKey: c.SWITCHBOARD_QUOTA_STREAMS_PER_KEY,
    requestsPerSecond: c.SWITCHBOARD_RATE_LIMIT_TENANT_RPS,
    requestsPerSecondPerKey: c.SWITCHBOARD_RATE_LIMIT_KEY_RPS,
  };
}

/** Fair admission's settings (src/api/a2a/fair-gate.ts). */
export function admissionOf(c: Config) {
  return {
    capacity: c.SWITCHBOARD_ADMISSION_CONCURRENCY || os.availableParallelism(),
    holdMs: c.SWITCHBOARD_ADMISSION_HOLD_MS,
    maxWaitMs: c.SWITCHBOARD_ADMISSION_WAIT_MS,
  };
}

/** The model service for hybrid search, or undefined when none is configured (src/core/agents/embeddings.ts). */
export function embeddingsOf(c: Config) {
  if (!c.SWITCHBOARD_EMBEDDINGS_URL || !c.SWITCHBOARD_EMBEDDINGS_MODEL) return undefined;
  return { url: c.SWITCHBOARD_EMBEDDINGS_URL, model: c.SWITCHBOARD_EMBEDDINGS_MODEL, key: c.SWITCHBOARD_EMBEDDINGS_KEY, timeoutMs: c.SWITCHBOARD_EMBEDDINGS_TIMEOUT_MS };
}

/** The MCP server's settings (src/api/mcp/sessions.ts). */
export function mcpSettingsOf(c: Config) {
  return { callWaitMs: c.SWITCHBOARD_MCP_CALL_WAIT_MS, idleMs: c.SWITCHBOARD_MCP_SESSION_IDLE_MS, maxPerTenant: c.SWITCHBOARD_MCP_SESSIONS_PER_TENANT };
}

/** What one client's connections may hold (src/api/plugins/connections.ts). */
export function connectionLimitsOf(c: Config) {
  return { requestTimeoutMs: c.SWITCHBOARD_REQUEST_TIMEOUT_MS, maxPerAddress: c.SWITCHBOARD_MAX_CONNECTIONS_PER_ADDRESS };
}
