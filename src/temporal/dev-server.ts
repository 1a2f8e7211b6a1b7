// Local Temporal for `npm start` without TEMPORAL_ADDRESS: runs the CLI's dev server (SQLite-backed) as a
// child process. Also exports ensureSearchAttributes, which the app runs against any server, because the
// dev server applies --search-attribute only when it creates a new SQLite file.
import { spawn } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { portIsFree } from '../net';
import { Connection } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import { encodeSearchAttributeIndexedValueType } from '@temporalio/common/lib/search-attributes';

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
  log: (msg: string) => void;
  /** No Web UI (tests): `uiPort` is then unused. */
  headless?: boolean;
  /** More `temporal server start-dev` arguments, e.g. lower history limits for a test. */
  extraArgs?: string[];
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

  // The CLI's own message for a taken port is buried in a Go stack of warnings; say it plainly.
  const ports: [number, string][] = [[port, 'TEMPORAL_PORT'], ...(opts.headless ? [] : [[uiPort, 'TEMPORAL_UI_PORT'] as [number, string]])];
  for (const [p, variable] of ports) {
    if (!(await portIsFree(ip, p))) {
      throw new Error(`Temporal dev server: port ${ip}:${p} is already in use (another dev server running? ` +
        `set TEMPORAL_ADDRESS to use it, or ${variable} to another port)`);
    }
  }
  await mkdir(path.dirname(path.resolve(opts.dbFilename)), { recursive: true });

  const args = ['server', 'start-dev', '--db-filename', opts.dbFilename, '--ip', ip,
    '--port', String(port), ...(opts.headless ? ['--headless'] : ['--ui-port', String(uiPort)]), '--namespace', namespace,
    ...Object.entries(opts.searchAttributes).flatMap(([k, t]) => ['--search-attribute', `${k}=${t}`]),
    // File persistence is too slow without these (temporalio/sdk-typescript#1572).
    '--sqlite-pragma', 'journal_mode=WAL', '--sqlite-pragma', 'synchronous=OFF',
    ...dynamicConfigArgs(),
    '--log-level', 'warn',
    ...(opts.extraArgs ?? [])];
  opts.log(`starting Temporal dev server: ${opts.binary} ${args.join(' ')}`);
  const child = spawn(opts.binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });

  // If this process dies without calling stop(), don't leave an orphaned server holding the ports.
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);

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
      for (const line of text.split('\n')) if (line.trim()) opts.log(`temporal: ${line}`);
    });
  forward(child.stdout!, false);
  forward(child.stderr!, true);

  const stop = async () => {
    process.removeListener('exit', killOnExit);
    if (exitStatus !== undefined) return;
    stopping = true;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
    await exited;
    clearTimeout(timer);
  };

  try {
    const connection = await waitForFrontend(address, namespace, () => exitStatus, () => stderrTail);
    try {
      await ensureSearchAttributes(connection, namespace, opts.searchAttributes);
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
    process.removeListener('exit', killOnExit);
    if (exitStatus !== undefined) return;
    stopping = true;
    child.kill('SIGKILL');
    await exited;
  };
  return { address, uiUrl, stop, kill };
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
