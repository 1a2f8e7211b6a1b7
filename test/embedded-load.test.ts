// The default `npm start` (no DATABASE_URL, no TEMPORAL_ADDRESS) under the load of issue 32: 30 tasks sent at once
// while four readers loop over the console's GETs. Over the old embedded database (PGlite behind a socket), the
// pool's connections interleaved their extended-protocol messages on one session: 10 of 30 tasks failed and 125 of
// 630 reads answered 500. The embedded PostgreSQL is a real server: every task completes and every read answers 200.
// Then the process is killed with SIGKILL and started again: the tasks are still there; and Ctrl-C, sent as a
// terminal sends it (to the whole process group), stops it in order: the worker drains while the embedded services
// still run (each in a session of its own), then they stop; no warning or error line on the way.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { AgentPool, startEchoAgent } from './agents';
import { eventually } from './helpers/harness';
import { restartablePort, startSwitchboard, type SwitchboardProcess } from './helpers/process';

const TASKS = 30;
const READERS = 4;
/** The console's reads (src/api/console/console.js), as an operator or admin sees them. */
const CONSOLE_READS = ['/agents?pageSize=100', '/tasks?pageSize=20', '/accounts', '/ledger/reconcile'];
/** As many reads as issue 32 counted at least: the readers go on until the tasks are answered and this many were made. */
const MIN_READS = 630;
/** A task not answered in this time counts as failed (an echo task takes milliseconds), a read likewise. */
const TASK_TIMEOUT_MS = 60_000;
const READ_TIMEOUT_MS = 10_000;

let dataDir: string;
let env: Record<string, string>;
let sb: SwitchboardProcess | undefined;
const agents = new AgentPool();

/** Every process's command line (Linux: /proc). */
const processes = (): { pid: number; args: string[] }[] =>
  readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p))
    .map((p) => {
      try {
        return { pid: Number(p), args: readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0') };
      } catch {
        return { pid: Number(p), args: [] };
      }
    });

/** The embedded services' processes, found by the data dir in their command line (the Temporal dev server's db file, PostgreSQL's -D). */
const servicesOf = (dir: string): number[] =>
  processes()
    .filter(({ args }) => args.includes(join(dir, 'temporal.sqlite')) || args.includes(join(dir, 'postgres')))
    .map(({ pid }) => pid);
const temporalOf = (dir: string): number[] =>
  processes()
    .filter(({ args }) => args.includes(join(dir, 'temporal.sqlite')) && args.includes('start-dev'))
    .map(({ pid }) => pid);
/** The watchdog `sh` of a service (src/embedded/child-session.ts): its last argument is the pid it watches. */
const watchdogOf = (pid: number): number | undefined =>
  processes().find(({ args }) => args[0] === 'sh' && args.includes('watchdog') && args.at(-2) === String(pid))?.pid;

/**
 * SIGKILL, as a crash: each embedded service's watchdog stops it (asserted). With `leaveTemporal`, the Temporal dev
 * server's watchdog is killed first, as if it had died too: the server is left running, holding its ports, for the
 * next start to recover from.
 */
async function crash(opts: { leaveTemporal?: boolean } = {}): Promise<number[]> {
  const temporal = temporalOf(dataDir);
  if (opts.leaveTemporal) for (const pid of temporal) process.kill(watchdogOf(pid)!, 'SIGKILL');
  assert.equal(await sb!.kill(), 'SIGKILL');
  sb = undefined;
  await eventually(() => !existsSync(join(dataDir, 'postgres', 'postmaster.pid')) || undefined, 30_000, 'the embedded PostgreSQL to stop after its process died');
  if (!opts.leaveTemporal) await eventually(() => temporalOf(dataDir).length === 0 || undefined, 30_000, 'the Temporal dev server to stop after its process died');
  return temporal;
}

before(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'sb-embedded-load-'));
  // As `npm start` runs it: the embedded PostgreSQL and Temporal dev server under SWITCHBOARD_DATA_DIR, the admin key
  // made on the first start. Only the ports are chosen free, and loopback agents allowed.
  env = {
    SWITCHBOARD_DATA_DIR: dataDir,
    // Started again on the same ports after a crash: ports outside the ephemeral range (see restartablePort).
    PORT: String(await restartablePort()),
    TEMPORAL_PORT: String(await restartablePort()),
    TEMPORAL_UI_PORT: String(await restartablePort()),
    ...(process.env.TEMPORAL_CLI ? { TEMPORAL_CLI: process.env.TEMPORAL_CLI } : {}),
    SWITCHBOARD_ALLOW_PRIVATE_URLS: 'true',
    LOG_LEVEL: 'warn',
  };
});
after(async () => {
  if (sb) await crash();
  for (const pid of servicesOf(dataDir)) process.kill(pid, 'SIGKILL');
  await agents.closeAll();
  await rm(dataDir, { recursive: true, force: true });
});

test(`the embedded default: ${TASKS} tasks sent while ${READERS} readers loop over the console's GETs, none fails`, { timeout: 300_000 }, async (t) => {
  sb = await startSwitchboard(env, { readyTimeoutMs: 180_000, processGroup: true });
  const url = sb.url;
  // The banner names the database, for psql or another process's DATABASE_URL, and where its password is: not the password.
  assert.match(sb.output(), /PostgreSQL: +postgres:\/\/postgres@127\.0\.0\.1:\d+\/postgres \(embedded, .*password in \S+postgres-password/);
  const pgPassword = (await readFile(join(dataDir, 'postgres-password'), 'utf8')).trim();
  assert.equal(sb.output().includes(pgPassword), false, 'the banner does not print the password');
  const adminKey = (await readFile(join(dataDir, 'admin-key'), 'utf8')).trim();
  const headers = { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' };

  const echo = await agents.add(startEchoAgent());
  const registered = await fetch(`${url}/agents`, { method: 'POST', headers, body: JSON.stringify({ url: echo.url }) });
  assert.equal(registered.status, 201, await registered.clone().text());
  const { id } = (await registered.json()) as { id: string };

  let sending = true;
  const reads = new Map<string, number>(); // status (or error) -> count
  const readCount = () => [...reads.values()].reduce((a, b) => a + b, 0);
  const failedReads: string[] = [];
  const reader = async () => {
    while (sending || readCount() < MIN_READS) {
      for (const path of CONSOLE_READS) {
        const res = await fetch(`${url}${path}`, { headers, signal: AbortSignal.timeout(READ_TIMEOUT_MS) }).then(
          async (r) => ({ status: String(r.status), body: await r.text() }),
          (err: Error) => ({ status: err.message, body: '' }),
        );
        reads.set(res.status, (reads.get(res.status) ?? 0) + 1);
        if (res.status !== '200' && failedReads.length < 5) failedReads.push(`GET ${path}: ${res.status} ${res.body.slice(0, 300)}`);
      }
    }
  };
  const send = async (n: number): Promise<string | undefined> => {
    try {
      const res = await fetch(`${url}/agents/${id}/a2a`, {
        method: 'POST',
        headers,
        signal: AbortSignal.timeout(TASK_TIMEOUT_MS),
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: n,
          method: 'SendMessage',
          params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: `task ${n}` }] } },
        }),
      });
      const body = (await res.json().catch(() => undefined)) as any;
      const task = body?.result?.task;
      const text = task?.artifacts?.[0]?.parts?.[0]?.text;
      if (task?.status?.state === 'TASK_STATE_COMPLETED' && text === `echo: task ${n}`) return undefined;
      return `task ${n}: HTTP ${res.status} ${JSON.stringify(body?.error ?? task?.status ?? body).slice(0, 300)}`;
    } catch (err) {
      return `task ${n}: ${(err as Error).message}`;
    }
  };

  const readers = Array.from({ length: READERS }, reader);
  const outcomes = await Promise.all(Array.from({ length: TASKS }, (_, n) => send(n))).finally(() => (sending = false));
  await Promise.all(readers);

  const failedTasks = outcomes.filter((o) => o !== undefined);
  const total = readCount();
  const ok = reads.get('200') ?? 0;
  t.diagnostic(`${TASKS - failedTasks.length} of ${TASKS} tasks completed; ${ok} of ${total} reads answered 200 (${JSON.stringify(Object.fromEntries(reads))})`);
  assert.deepEqual(failedTasks, [], 'every task completes');
  assert.equal(ok, total, `every read answers 200: ${failedReads.join('\n')}`);

  const listed = (await (await fetch(`${url}/tasks?pageSize=50`, { headers })).json()) as { tasks: { state: string }[] };
  assert.equal(listed.tasks.filter((x) => x.state === 'completed').length, TASKS, JSON.stringify(listed).slice(0, 500));
});

test('killed with SIGKILL (its Temporal dev server left running) and started again: both services recover, and the tasks are still listed', { timeout: 300_000 }, async () => {
  assert.ok(sb, 'the gateway of the test above');
  const [leftover] = await crash({ leaveTemporal: true });
  assert.ok(leftover && temporalOf(dataDir).includes(leftover), 'the dev server outlived its process (its watchdog was killed)');
  sb = await startSwitchboard(env, { readyTimeoutMs: 180_000, processGroup: true });
  const adminKey = (await readFile(join(dataDir, 'admin-key'), 'utf8')).trim();
  const listed = (await (await fetch(`${sb.url}/tasks?pageSize=50`, { headers: { authorization: `Bearer ${adminKey}` } })).json()) as { tasks: { state: string }[] };
  assert.equal(listed.tasks.filter((x) => x.state === 'completed').length, TASKS, JSON.stringify(listed).slice(0, 500));
  assert.equal(servicesOf(dataDir).length, 2, 'one PostgreSQL and one Temporal dev server: nothing left over from before');
  assert.ok(!temporalOf(dataDir).includes(leftover), 'the leftover dev server was stopped, and a new one started');
});

test('Ctrl-C (SIGINT to the process group, as a terminal sends it) stops the app first, then the embedded services: exit code 0, no warning or error line', { timeout: 120_000 }, async () => {
  assert.ok(sb, 'the gateway of the test above');
  // A normal start: the one above recovered from a crash.
  sb.interrupt();
  assert.equal(await sb.exited, 'exit code 0');
  // At `npm start`'s own log level, so that the embedded services' lines forwarded at info are seen too.
  sb = await startSwitchboard({ ...env, LOG_LEVEL: 'info' }, { readyTimeoutMs: 180_000, processGroup: true });
  sb.interrupt();
  assert.equal(await sb.exited, 'exit code 0');
  // pino's warn, error and fatal; the SDK's and the dev server's own lines go through it (the dev server's at their
  // own level: were it stopped with the app, its `network dial error` warnings would show here).
  const lines = sb.output().split('\n');
  const loud = lines.filter((l) => /"level":(40|50|60)/.test(l));
  sb = undefined;
  assert.deepEqual(loud, [], 'no warning or error line on a normal start or stop');
  assert.equal(existsSync(join(dataDir, 'postgres', 'postmaster.pid')), false, 'PostgreSQL shut down cleanly');
  assert.deepEqual(servicesOf(dataDir), [], 'no service left running: the Temporal dev server is gone too');
  assert.equal(existsSync(join(dataDir, 'temporal.sqlite.owner')), false);
});
