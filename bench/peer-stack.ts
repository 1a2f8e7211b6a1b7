/**
 * The processes of the peer bench (bench/peer.ts), all children of this one and all stopped at the end: one Temporal
 * dev server (Switchboard's settings) that both gateways use; the echo agent (test/agents, in a process of its own)
 * that Switchboard calls; Switchboard itself in a process of its own (the build this bench runs: compiled under `npm
 * run bench`, tsx under `npm run bench:tsx`), on a PostgreSQL schema of its own; and TAG: its gateway, a Redis of
 * its own (TAG keeps its tasks there) and its echo agent, a Temporal worker (bench/tag-echo-worker, built by
 * scripts/ensure-tag.sh). TAG's binaries come from BENCH_TAG_DIR (default ~/.cache/switchboard/tag).
 */
import { type ChildProcess, execFileSync, fork, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, openSync, closeSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Pool } from 'pg';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { COMPILED, REPO_ROOT } from '../src/core/paths';
import { freePort } from '../src/embedded/net';

/** Where TAG's binaries are looked for: BENCH_TAG_DIR, else the machine's shared tools cache (as scripts/ensure-tag.sh). */
export function tagDir(): string {
  const cache = process.env.SWITCHBOARD_TOOLS_CACHE ?? path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'switchboard');
  return process.env.BENCH_TAG_DIR ?? path.join(cache, 'tag');
}

/**
 * TAG's two binaries, once scripts/ensure-tag.sh has (re)built the echo worker; undefined, without building anything,
 * when TAG's gateway is not in tagDir() (the peer bench is then skipped).
 */
export function tagBinaries(): { gateway: string; worker: string } | undefined {
  const dir = tagDir();
  if (!existsSync(path.join(dir, 'tag-gateway'))) return undefined;
  try {
    execFileSync('bash', [path.join(REPO_ROOT, 'scripts/ensure-tag.sh')], { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, BENCH_TAG_DIR: dir } });
  } catch {
    return undefined;
  }
  return { gateway: path.join(dir, 'tag-gateway'), worker: path.join(dir, 'tag-echo-worker') };
}

export interface PeerStack {
  temporal: TestWorkflowEnvironment;
  /** TAG's JSON-RPC endpoint for the echo agent, and its processes. */
  tag: { url: string; gatewayPid: number; workerPid: number; redisPid: number };
  /** Switchboard's JSON-RPC endpoint for the echo agent, the client key to call it with, its process. */
  sb: { url: string; key: string; pid: number; tenant: string };
  echoPid: number;
  /** The PostgreSQL backends serving Switchboard's process right now (by its application_name). */
  sbBackends(): Promise<number[]>;
  /** Where the children's logs are (kept when something failed). */
  logDir: string;
  close(): Promise<void>;
}

/** Children started here and still running: killed if this process exits without stopping them. */
const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of running) c.kill('SIGKILL');
});

/** `binary` with `env` (and PATH/HOME only), its output to `log`: not piped through this process, whose CPU is the load's. */
function spawnLogged(binary: string, args: string[], env: Record<string, string>, log: string): ChildProcess {
  const fd = openSync(log, 'a');
  const child = spawn(binary, args, { env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env }, stdio: ['ignore', fd, fd] });
  closeSync(fd);
  running.add(child);
  child.once('exit', () => running.delete(child));
  return child;
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves once the child is gone. */
async function stopChild(child: ChildProcess, graceMs = 5_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await gone;
  clearTimeout(timer);
}

/** Waits until `ready()` holds, failing early if `child` exits and after `ms`. */
async function until(what: string, child: ChildProcess, ready: () => Promise<boolean>, log: string, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${what} exited (${child.exitCode ?? child.signalCode}) before it was ready; its log:\n${tail(log)}`);
    if (await ready().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`${what} not ready after ${ms / 1000} s; its log:\n${tail(log)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const tail = (file: string) => {
  try {
    return readFileSync(file, 'utf8').slice(-2_000);
  } catch {
    return '(no log)';
  }
};

const listening = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => (s.destroy(), resolve(true)));
    s.once('error', () => resolve(false));
  });

/** TAG's agent routing (its gateway reads it at start): the agent `echo-agent` is AgentTaskWorkflow on echo-agent-tasks. */
const ROUTING = `version: "1.0"
routing:
  "echo-agent":
    taskQueue: "echo-agent-tasks"
    workflowType: "AgentTaskWorkflow"
`;

/** TAG's gateway, its Redis and its echo worker on `temporalAddress`. */
async function startTag(bin: { gateway: string; worker: string }, temporalAddress: string, dir: string, stop: (() => Promise<void>)[]) {
  const [host, port] = temporalAddress.split(':');
  const redisPort = await freePort();
  const redisLog = path.join(dir, 'redis.log');
  const redis = spawnLogged('redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {}, redisLog);
  stop.push(() => stopChild(redis));
  await until('redis-server', redis, () => listening(redisPort), redisLog);

  const routing = path.join(dir, 'agent-routing.yaml');
  writeFileSync(routing, ROUTING);
  const a2aPort = await freePort();
  const temporalEnv = { TEMPORAL_HOST: host, TEMPORAL_PORT: port, TEMPORAL_NAMESPACE: 'default' };
  // The agent registry TAG checks at start and in /health is not used by message/send or tasks/get: nothing listens there.
  const gatewayEnv = {
    ...temporalEnv,
    A2A_PORT: String(a2aPort),
    REDIS_URL: `redis://127.0.0.1:${redisPort}`,
    AGENT_REGISTRY_URL: `http://127.0.0.1:${await freePort()}`,
    AGENT_ROUTING_CONFIG: routing,
    LOG_LEVEL: 'info',
  };
  const gatewayLog = path.join(dir, 'tag-gateway.log');
  const gateway = spawnLogged(bin.gateway, [], gatewayEnv, gatewayLog);
  stop.push(() => stopChild(gateway));
  await until('TAG gateway', gateway, async () => (await fetch(`http://127.0.0.1:${a2aPort}/health`, { signal: AbortSignal.timeout(1_000) })).ok, gatewayLog);

  // Pollers as TAG's Python worker runs with (5 and 5; bench/tag-echo-worker/main.go).
  const workerLog = path.join(dir, 'tag-echo-worker.log');
  const worker = spawnLogged(bin.worker, [], { ...temporalEnv, TASK_QUEUE: 'echo-agent-tasks' }, workerLog);
  stop.push(() => stopChild(worker));
  await until('TAG echo worker', worker, async () => /echo worker on/.test(tail(workerLog)), workerLog);
  return { url: `http://127.0.0.1:${a2aPort}/agents/echo-agent/a2a`, gatewayPid: gateway.pid!, workerPid: worker.pid!, redisPid: redis.pid! };
}

/** Switchboard in a process of its own on `temporalAddress` and a fresh schema, the echo agent registered, a client key. */
async function startSwitchboardProcess(temporalAddress: string, echoUrl: string, dir: string, stop: (() => Promise<void>)[]) {
  const { TEST_ADMIN_KEY, TEST_SECRETS_KEY, childProcessEnv, createTestDb } = await import('../test/helpers/harness');
  const { startSwitchboard } = await import('../test/helpers/process');
  const db = await createTestDb();
  stop.push(() => db.drop());
  const app = `sb-peer-${randomBytes(3).toString('hex')}`;
  const env = await childProcessEnv(
    { temporalAddress, schema: db.schema, taskQueue: app },
    { SWITCHBOARD_SECRETS_KEY: TEST_SECRETS_KEY, SWITCHBOARD_DATA_DIR: path.join(dir, 'sb-data'), LOG_LEVEL: 'warn' },
  );
  // Its PostgreSQL backends are told apart by their application_name (pg_stat_activity).
  const url = new URL(env.DATABASE_URL);
  url.searchParams.set('application_name', app);
  env.DATABASE_URL = url.toString();
  const sb = await startSwitchboard(env, { compiled: COMPILED, cwd: REPO_ROOT, readyTimeoutMs: 120_000 });
  stop.push(async () => {
    sb.child.kill('SIGTERM');
    const timer = setTimeout(() => void sb.kill(), 15_000);
    await sb.exited;
    clearTimeout(timer);
  });
  const admin = async (route: string, body: unknown) => {
    const res = await fetch(`${sb.url}${route}`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${TEST_ADMIN_KEY}` }, body: JSON.stringify(body) });
    if (res.status !== 201) throw new Error(`${route}: ${res.status} ${await res.text()}`);
    return (await res.json()) as Record<string, string>;
  };
  const key = (await admin('/tenants/default/keys', { role: 'client', name: 'peer bench' })).key!;
  const agent = (await admin('/agents', { url: echoUrl })).id!;
  const pool = new Pool({ connectionString: process.env.DATABASE_URL, max: 1 });
  stop.push(() => pool.end());
  const backends = async () => (await pool.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE application_name = $1', [app])).rows.map((r) => r.pid);
  return { sb: { url: `${sb.url}/agents/${agent}/a2a`, key, pid: sb.child.pid!, tenant: 'default' }, backends };
}

export async function startPeerStack(bin: { gateway: string; worker: string }): Promise<PeerStack> {
  const { startTemporal } = await import('../test/helpers/harness');
  const logDir = mkdtempSync(path.join(os.tmpdir(), 'sb-peer-'));
  // Stopped in reverse order: the load's targets first, Temporal last.
  const stop: (() => Promise<void>)[] = [];
  const close = async () => {
    for (const s of stop.reverse()) await s().catch((err) => console.error(`peer: stopping: ${String(err)}`));
  };
  try {
    const temporal = await startTemporal();
    stop.push(() => temporal.teardown());
    const echo = fork(require.resolve('./agent-process'), ['echo'], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
    running.add(echo);
    stop.push(async () => {
      const gone = new Promise<void>((resolve) => (echo.exitCode !== null ? resolve() : echo.once('exit', () => resolve())));
      echo.disconnect();
      await gone;
    });
    const echoUrl = await new Promise<string>((resolve, reject) => {
      echo.once('message', (m) => resolve((m as { url: string }).url));
      echo.once('exit', (code) => reject(new Error(`the echo agent exited (${code}) before it answered`)));
    });
    const tag = await startTag(bin, temporal.address, logDir, stop);
    const { sb, backends } = await startSwitchboardProcess(temporal.address, echoUrl, logDir, stop);
    return {
      temporal,
      tag,
      sb,
      echoPid: echo.pid!,
      sbBackends: backends,
      logDir,
      async close() {
        await close();
        rmSync(logDir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await close();
    throw new Error(`peer: starting the processes failed (logs kept in ${logDir}): ${String(err)}`);
  }
}
