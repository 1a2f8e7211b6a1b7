/**
 * Switchboard as a real child process (`node --import tsx src/main.ts`, or the compiled build `npm start` runs:
 * `node dist/src/main.js`), for tests that kill it: started with the given environment, ready once GET /healthz answers, its output kept for failure messages.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { resolve } from 'node:path';

const REPO_ROOT = resolve(__dirname, '../..');

export interface SwitchboardProcess {
  url: string;
  child: ChildProcess;
  /** stdout and stderr so far (the last 20,000 characters, or `keepOutput`). */
  output(): string;
  /** Resolves when the process has exited, with its exit code or signal. */
  exited: Promise<string>;
  /** SIGKILL: no shutdown hooks, no graceful worker stop, as a crash. Resolves once it is gone. */
  kill(): Promise<string>;
  /**
   * Ctrl-C as a terminal sends it: SIGINT to the whole foreground process group, the process and every child of
   * it that stayed in its group (with `processGroup`; otherwise to the process alone).
   */
  interrupt(): void;
}

/** Processes started here and still running: killed if the test process exits without doing so itself. */
const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of running) c.kill('SIGKILL');
});

/** A TCP port free right now on 127.0.0.1, so a restarted process can listen on the same URL. */
import { freePort, portIsFree } from '../../src/embedded/net';
export { freePort };

const handedOut = new Set<number>();

/**
 * A free port below the kernel's ephemeral range (32768–60999 on Linux), for a service a test stops and starts
 * again on the same port. A port from freePort() is in that range: while its service is down, any outgoing
 * connection on the box may be given it as its local port, and the restart then finds it taken.
 */
export async function restartablePort(): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if (handedOut.has(port) || !(await portIsFree('127.0.0.1', port))) continue;
    handedOut.add(port);
    return port;
  }
}

/**
 * Starts `node --import tsx src/main.ts` (with `compiled`: `node dist/src/main.js`, built beforehand) with `env` and
 * waits until it is ready: /healthz answers (a worker process's too: SWITCHBOARD_ROLE=worker serves the probes), or
 * it prints `readyLine`.
 */
export async function startSwitchboard(
  env: Record<string, string>,
  opts: {
    readyTimeoutMs?: number;
    readyLine?: RegExp;
    compiled?: boolean;
    keepOutput?: number;
    /** In a process group of its own, as a terminal runs a foreground job (so interrupt() is a terminal's Ctrl-C). */
    processGroup?: boolean;
    /** Another checkout to run (an earlier release, for an upgrade drill); default this one. */
    cwd?: string;
  } = {},
): Promise<SwitchboardProcess> {
  const port = env.PORT;
  if (!port || port === '0') throw new Error('startSwitchboard needs a fixed PORT');
  const url = `http://${env.HOST ?? '127.0.0.1'}:${port}`;
  const child = spawn(process.execPath, opts.compiled ? ['dist/src/main.js'] : ['--import', 'tsx', 'src/main.ts'], {
    cwd: opts.cwd ?? REPO_ROOT,
    // Only what Switchboard reads, plus PATH/HOME: nothing from the test runner (NODE_TEST_CONTEXT, NODE_OPTIONS...).
    // The gRPC binding on a free port unless the test picks one (the default, 8081, may be taken), below the ephemeral
    // range: a port from there may be given to an outgoing connection before the process binds it.
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', SWITCHBOARD_GRPC_PORT: String(await restartablePort()), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: opts.processGroup ?? false,
  });
  running.add(child);
  let out = '';
  const keep = (d: Buffer) => {
    out = (out + d.toString()).slice(-(opts.keepOutput ?? 20_000));
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<string>((ok) =>
    child.once('exit', (code, signal) => {
      running.delete(child);
      ok(signal ?? `exit code ${code}`);
    }),
  );
  let gone: string | undefined;
  void exited.then((how) => (gone = how));

  const deadline = Date.now() + (opts.readyTimeoutMs ?? 45_000);
  for (;;) {
    if (gone) throw new Error(`Switchboard exited (${gone}) before it was ready:\n${out}`);
    if (opts.readyLine?.test(out)) break;
    try {
      const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(1000) });
      if (res.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`Switchboard did not answer ${url}/healthz in time:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    child,
    output: () => out,
    exited,
    kill() {
      if (!gone) child.kill('SIGKILL');
      return exited;
    },
    interrupt() {
      if (gone) return;
      if (opts.processGroup && child.pid !== undefined) process.kill(-child.pid, 'SIGINT');
      else child.kill('SIGINT');
    },
  };
}
