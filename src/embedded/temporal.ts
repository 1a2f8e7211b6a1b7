// Local Temporal for `npm start` without TEMPORAL_ADDRESS: runs the CLI's dev server (SQLite-backed) as a
// child process. Also exports ensureSearchAttributes, which the app runs against any server, because the
// dev server applies --search-attribute only when it creates a new SQLite file.
//
// Like the embedded PostgreSQL (src/embedded/child-session.ts), it runs in a session of its own: a terminal's Ctrl-C reaches
// only Switchboard, which stops it after the worker has drained (were it stopped at the same moment, the draining
// worker would log a burst of dial errors); a watchdog stops it when this process dies without doing so, and a
// server left running all the same (the watchdog killed too) is stopped by the next start on the same files.
import { spawn } from 'node:child_process';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { portIsFree } from './net';
import { commandLine, procStat, running, signalable, startWatchdog, waitGone } from './child-session';
import { Connection } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import { encodeSearchAttributeIndexedValueType } from '@temporalio/common/lib/search-attributes';
import { msToTs } from '@temporalio/common/lib/time';

export interface DevServer {
  address: string;
  uiUrl: string;
  stop(): Promise<void>;
  /** SIGKILL, as a crash (fault drills): no shutdown at all. Resolves once the process is gone. */
  kill(): Promise<void>;
}

export interface DevServerOptions {
  binary: string;
  dbFilename: string;
  ip?: string;
  port?: number;
  uiPort?: number;
  namespace?: string;
  searchAttributes: Record<string, 'Keyword'>;
  /** Our lines and the server's banner at info; its log lines at their own level (it runs at --log-level warn). */
  log: (msg: string, level?: 'info' | 'warn' | 'error') => void;
  /** No Web UI (tests): `uiPort` is then unused. */
  headless?: boolean;
  /** More `temporal server start-dev` arguments, e.g. lower history limits for a test. */
  extraArgs?: string[];
  /** The namespace's retention of closed workflows (ms): SWITCHBOARD_TASK_RETENTION (at least a day, Temporal's floor). */
  retentionMs?: number;
}

/** Temporal refuses a namespace retention under one day. */
export const MIN_NAMESPACE_RETENTION_MS = 86_400_000;

/** Sets the namespace's retention of closed workflows to match the tasks' (never under Temporal's one-day floor). */
export async function setNamespaceRetention(connection: Pick<Connection | NativeConnection, 'workflowService'>, namespace: string, retentionMs: number): Promise<void> {
  const ttl = msToTs(Math.max(retentionMs, MIN_NAMESPACE_RETENTION_MS));
  await connection.workflowService.updateNamespace({ namespace, config: { workflowExecutionRetentionTtl: ttl } });
}

/**
 * The Temporal server settings Switchboard relies on, in one list: `npm start`'s dev server, the tests' dev
 * servers and the compose server's docker/dynamicconfig/switchboard.yaml (test/compose.test.ts checks it) all
 * use these values.
 * - update-with-start (every new task) and eager workflow start;
 * - latency: the dev server's defaults add ~30 ms to every task dispatch (transfer-queue poll rate 20/s) and
 *   route activities through matching; both measured with bench/temporal-floor.ts.
 */
export const DYNAMIC_CONFIG: Readonly<Record<string, boolean | number>> = {
  'frontend.enableExecuteMultiOperation': true,
  'system.enableEagerWorkflowStart': true,
  'history.transferProcessorMaxPollRPS': 10_000,
  'system.enableActivityEagerExecution': true,
  // Genesis envelopes' priority (Temporal priority keys) orders backlogged tasks only with the new matcher.
  'matching.useNewMatcher': true,
};

/** DYNAMIC_CONFIG as `temporal server start-dev` arguments. */
export function dynamicConfigArgs(): string[] {
  return Object.entries(DYNAMIC_CONFIG).flatMap(([k, v]) => ['--dynamic-config-value', `${k}=${v}`]);
}

const START_DEADLINE_MS = 60_000; // a cold start on a busy 2-core box can take a while
const STOP_GRACE_MS = 10_000;
/** How long the ports of a leftover server just stopped are waited for (it may hold them a moment longer). */
const PORT_RELEASE_MS = 10_000;
const GRPC_ALREADY_EXISTS = 6;

/** Runs scripts/ensure-temporal.sh (which may build the CLI; its progress goes to our stderr). */
export function resolveTemporalBinary(repoRoot: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [path.join(repoRoot, 'scripts', 'ensure-temporal.sh')], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      const binary = out.trim().split('\n').pop();
      if (code === 0 && binary) resolve(binary);
      else reject(new Error(`scripts/ensure-temporal.sh failed (exit ${code}); see its output above`));
    });
  });
}

/** Registers missing search attributes; existing ones (or a concurrent registration) count as success. */
export async function ensureSearchAttributes(
  connection: Pick<Connection | NativeConnection, 'operatorService'>,
  namespace: string,
  attrs: Record<string, 'Keyword'>,
): Promise<void> {
  const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace });
  const missing = Object.keys(attrs).filter((name) => !(name in (customAttributes ?? {})));
  if (missing.length === 0) return;
  const keyword = encodeSearchAttributeIndexedValueType('KEYWORD')!;
  try {
    await connection.operatorService.addSearchAttributes({
      namespace,
      searchAttributes: Object.fromEntries(missing.map((name) => [name, keyword])),
    });
  } catch (err) {
    if ((err as { code?: number }).code !== GRPC_ALREADY_EXISTS) throw err;
  }
}

export async function startDevServer(opts: DevServerOptions): Promise<DevServer> {
  const ip = opts.ip ?? '127.0.0.1';
  const port = opts.port ?? 7233;
  const uiPort = opts.uiPort ?? 8233;
  const namespace = opts.namespace ?? 'default';
  // A wildcard bind is reachable locally through loopback.
  const host = ip === '0.0.0.0' ? '127.0.0.1' : ip;
  const address = `${host}:${port}`;

  await mkdir(path.dirname(path.resolve(opts.dbFilename)), { recursive: true });
  const stopped = await stopLeftover(opts.dbFilename, opts.log);
  // The CLI's own message for a taken port is buried in a Go stack of warnings; say it plainly. The leftover server
  // just stopped may hold its ports a moment after its pid is gone: they are waited for then.
  const ports: [number, string][] = [[port, 'TEMPORAL_PORT'], ...(opts.headless ? [] : [[uiPort, 'TEMPORAL_UI_PORT'] as [number, string]])];
  for (const [p, variable] of ports) {
    if (!(await portFreeWithin(ip, p, stopped ? PORT_RELEASE_MS : 0))) {
      throw new Error(`Temporal dev server: port ${ip}:${p} is already in use (another dev server running? ` +
        `set TEMPORAL_ADDRESS to use it, or ${variable} to another port)${stopped ? `; a leftover server (pid ${stopped}) was stopped before` : ''}`);
    }
  }

  const args = ['server', 'start-dev', '--db-filename', opts.dbFilename, '--ip', ip,
    '--port', String(port), ...(opts.headless ? ['--headless'] : ['--ui-port', String(uiPort)]), '--namespace', namespace,
    ...Object.entries(opts.searchAttributes).flatMap(([k, t]) => ['--search-attribute', `${k}=${t}`]),
    // File persistence is too slow without these (temporalio/sdk-typescript#1572).
    '--sqlite-pragma', 'journal_mode=WAL', '--sqlite-pragma', 'synchronous=OFF',
    ...dynamicConfigArgs(),
    '--log-level', 'warn',
    ...(opts.extraArgs ?? [])];
  opts.log(`starting Temporal dev server: ${opts.binary} ${args.join(' ')}`);
  const child = spawn(opts.binary, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });

  // If this process exits without calling stop(), don't leave an orphaned server holding the ports; if it dies
  // (kill -9), the watchdog stops the server.
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  const watchdog = startWatchdog(child.pid, 'TERM');
  if (child.pid !== undefined) await writeFile(ownerFile(opts.dbFilename), `${process.pid} ${child.pid}\n`);
  // Before the server goes: the watchdog must not signal a pid that may be reused.
  const unwatch = () => {
    process.removeListener('exit', killOnExit);
    watchdog?.kill('SIGKILL');
  };

  let stopping = false;
  let stderrTail = '';
  const exited = new Promise<number | string>((resolve) => {
    child.on('exit', (code, signal) => resolve(code ?? signal ?? 'unknown'));
    child.on('error', (err) => resolve(err.message)); // e.g. ENOENT for a wrong binary path
  });
  let exitStatus: number | string | undefined;
  void exited.then((s) => (exitStatus = s));
  const forward = (stream: NodeJS.ReadableStream, keepTail: boolean) =>
    stream.on('data', (d: Buffer) => {
      const text = d.toString();
      if (keepTail) stderrTail = (stderrTail + text).slice(-4000);
      // Shutdown produces a burst of harmless dial/poll warnings; don't forward those.
      if (stopping) return;
      for (const line of text.split('\n')) if (line.trim()) opts.log(`temporal: ${line}`, levelOf(line));
    });
  forward(child.stdout!, false);
  forward(child.stderr!, true);

  const stop = async () => {
    unwatch();
    if (exitStatus === undefined) {
      stopping = true;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
      await exited;
      clearTimeout(timer);
    }
    await rm(ownerFile(opts.dbFilename), { force: true });
  };

  try {
    const connection = await waitForFrontend(address, namespace, () => exitStatus, () => stderrTail);
    try {
      await ensureSearchAttributes(connection, namespace, opts.searchAttributes);
      if (opts.retentionMs !== undefined) await setNamespaceRetention(connection, namespace, opts.retentionMs);
    } finally {
      await connection.close();
    }
  } catch (err) {
    await stop();
    throw err;
  }
  const uiUrl = `http://${host}:${uiPort}`;
  opts.log(`Temporal dev server ready at ${address}, UI ${uiUrl}`);
  const kill = async () => {
    unwatch();
    if (exitStatus === undefined) {
      stopping = true;
      child.kill('SIGKILL');
      await exited;
    }
    await rm(ownerFile(opts.dbFilename), { force: true });
  };
  return { address, uiUrl, stop, kill };
}

/** The level of a line of the server's own: its log lines' (Go slog: `level=WARN`); its banner (no level) is info. */
function levelOf(line: string): 'info' | 'warn' | 'error' {
  const level = /\blevel=(\w+)/.exec(line)?.[1]?.toUpperCase();
  if (level === undefined || level === 'INFO' || level === 'DEBUG') return 'info';
  return level === 'WARN' ? 'warn' : 'error';
}

/** Beside the SQLite file: `<owner pid> <server pid>`, while a process serves it. */
const ownerFile = (dbFilename: string) => `${dbFilename}.owner`;

/**
 * A dev server still running on `dbFilename` from an earlier start: the owner file names it, and its command line
 * names the file (Linux). While the process that started it lives, it is in use: refused, naming both. Otherwise
 * its owner died and the watchdog with it: it is stopped, so this start can take over its ports and its file.
 */
async function stopLeftover(dbFilename: string, log: (msg: string) => void): Promise<number | undefined> {
  const [owner, pid] = (await readFile(ownerFile(dbFilename), 'utf8').catch(() => '')).trim().split(' ').map(Number);
  if (!pid || !(await running(pid)) || !(await commandLine(pid))?.includes(dbFilename)) return undefined;
  if (owner && signalable(owner) && (await procStat(pid))?.ppid === owner) {
    throw new Error(`Temporal dev server: ${dbFilename} is already served (pid ${pid}) by process ${owner}: stop that one, or set TEMPORAL_ADDRESS to use its server`);
  }
  log(`stopping a Temporal dev server (pid ${pid}) left running on ${dbFilename} by a process that is gone`);
  process.kill(pid, 'SIGTERM');
  if (!(await waitGone(pid, STOP_GRACE_MS))) {
    process.kill(pid, 'SIGKILL');
    if (!(await waitGone(pid, 5_000))) throw new Error(`Temporal dev server: the server left running on ${dbFilename} (pid ${pid}) does not stop`);
  }
  return pid;
}

/** Whether `port` is free, or becomes free within `ms` (looked at every 100 ms). */
async function portFreeWithin(ip: string, port: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (!(await portIsFree(ip, port))) {
    if (Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, 100));
  }
  return true;
}

async function waitForFrontend(
  address: string,
  namespace: string,
  exitStatus: () => number | string | undefined,
  stderr: () => string,
): Promise<Connection> {
  const deadline = Date.now() + START_DEADLINE_MS;
  let lastError: unknown;
  while (Date.now() < deadline) {
    const status = exitStatus();
    if (status !== undefined) {
      throw new Error(`Temporal dev server exited early (${status}):\n${stderr()}`);
    }
    let connection: Connection | undefined;
    try {
      connection = await Connection.connect({ address, connectTimeout: '1s' });
      // The namespace (not just the port) must be ready before search attributes can be registered.
      await connection.workflowService.describeNamespace({ namespace });
      return connection;
    } catch (err) {
      lastError = err;
      await connection?.close();
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  throw new Error(`Temporal dev server at ${address} not ready after ${START_DEADLINE_MS / 1000}s: ` +
    `${(lastError as Error)?.message}\n${stderr()}`);
}
