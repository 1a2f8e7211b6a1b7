// The zero-setup `npm start` path: an embedded PostgreSQL server and a Temporal dev server, both child processes,
// both persistent across restarts. (How the Temporal CLI is found or built: test/ensure-temporal.test.ts.)
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Connection } from '@temporalio/client';
import { Pool } from 'pg';
import { type EmbeddedPostgres, startEmbeddedPostgres } from '../src/embedded/postgres';
import { migrate } from '../src/core/db/migrate';
import { createPool, prepared } from '../src/core/db/pool';
import { appendEvents } from '../src/core/events/event-log';
import { CONFIG_CHANNEL, type ConfigNotice, EventHub } from '../src/core/events/hub';
import { ensureSearchAttributes, resolveTemporalBinary, startDevServer, type DevServer } from '../src/embedded/temporal';
import { SEARCH_ATTRIBUTES } from '../task/messages';
import { freePort } from '../src/embedded/net';
import { eventually } from './helpers/harness';

const log = process.env.DEBUG ? (m: string) => console.error(m) : () => {};

let tmp: string;
before(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'switchboard-dev-infra-'));
});
after(async () => {
  await rm(tmp, { recursive: true, force: true });
});

describe('embedded postgres', { timeout: 180_000 }, () => {
  const cleanups: Array<() => Promise<unknown>> = [];
  after(async () => {
    for (const c of cleanups.reverse()) await c().catch(() => {});
  });

  /** A cluster directory and password file of its own under the test's temp dir. */
  const place = (name: string) => ({ dir: path.join(tmp, name, 'postgres'), passwordFile: path.join(tmp, name, 'postgres-password') });
  async function start(where: ReturnType<typeof place>): Promise<EmbeddedPostgres> {
    const pg = await startEmbeddedPostgres(where);
    cleanups.push(pg.stop);
    return pg;
  }
  function poolOf(pg: EmbeddedPostgres, max: number): Pool {
    const pool = createPool({ connectionString: pg.url, max });
    cleanups.push(() => pool.end());
    return pool;
  }
  const count = async (url: string) => {
    const pool = new Pool({ connectionString: url, max: 1 });
    try {
      return (await pool.query('SELECT count(*)::int AS n FROM items')).rows[0].n as number;
    } finally {
      await pool.end();
    }
  };
  /** What this test's process would not see of a server it started elsewhere: whether a pid runs (zombies do not). */
  const runs = (pid: number) => {
    try {
      process.kill(pid, 0);
      return !/^\S+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
    } catch {
      return false;
    }
  };

  /** The embedded PostgreSQL in a process of its own (test/fixtures/embedded-postgres-owner.ts), for killing. */
  async function startOwner(where: ReturnType<typeof place>): Promise<{ child: ChildProcess; url: string; pid: number }> {
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(__dirname, 'fixtures', 'embedded-postgres-owner.ts'), where.dir, where.passwordFile], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    cleanups.push(async () => child.kill('SIGKILL'));
    const line = await new Promise<string>((resolve, reject) => {
      let out = '';
      child.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('\n')) resolve(out.split('\n')[0]!);
      });
      child.once('exit', (code) => reject(new Error(`the owner exited (${code}) before its server was up`)));
    });
    const started = JSON.parse(line) as { url: string; pid: number };
    // A server whose watchdog a test killed, should that test fail before the next start stops it.
    cleanups.push(async () => runs(started.pid) && process.kill(started.pid, 'SIGINT'));
    return { child, ...started };
  }

  test('a real server: data kept across a stop and a start, many connections at once, the password made once (0600)', async () => {
    const where = place('restart');
    const first = await start(where);
    const pool = poolOf(first, 5);
    await pool.query('CREATE TABLE items (id serial PRIMARY KEY, name text UNIQUE NOT NULL)');
    // Enough parallel work that the pool opens all 5 connections at once.
    await Promise.all(Array.from({ length: 25 }, (_, i) => pool.query('INSERT INTO items (name) VALUES ($1) ON CONFLICT DO NOTHING', [`item-${i % 20}`])));
    assert.equal(pool.totalCount, 5);
    await pool.end();
    await first.stop();
    assert.equal((await stat(where.passwordFile)).mode & 0o777, 0o600);
    await assert.rejects(count(first.url), 'stopped: nothing answers on its port');

    const second = await start(where);
    assert.equal(new URL(second.url).password, new URL(first.url).password, 'the password of the first start');
    assert.equal(await count(second.url), 20);
    await second.stop();
  });

  test('two connections prepare the same named statement, and the task path runs on many connections at once', async () => {
    const pg = await start(place('prepared'));
    const pool = poolOf(pg, 4);
    const text = 'SELECT $1::int + 1 AS n';
    const clients = await Promise.all([1, 2].map(() => pool.connect()));
    try {
      // Both connections hold the same name: each connection is a session of its own.
      const sums = await Promise.all(clients.map(async (c, i) => (await c.query(prepared(text, [i]))).rows[0].n));
      assert.deepEqual(sums, [1, 2]);
      const names = await Promise.all(clients.map(async (c) => (await c.query('SELECT name FROM pg_prepared_statements')).rows.map((r) => r.name)));
      assert.deepEqual(names, [[prepared(text, []).name], [prepared(text, []).name]]);
    } finally {
      for (const c of clients) c.release();
    }
    await migrate(pool);
    const appended = await Promise.all(
      Array.from({ length: 40 }, (_, i) => appendEvents(pool, 'default', `t${i % 4}`, [{ key: `k${i}`, event: { statusUpdate: { taskId: `t${i % 4}`, contextId: 'c', status: { state: 'TASK_STATE_WORKING' } } } }])),
    );
    assert.equal(pool.totalCount, 4);
    assert.deepEqual(appended.map((a) => a.length), Array(40).fill(1));
    const { rows } = await pool.query('SELECT task_id, max(seq)::int AS last FROM task_events GROUP BY task_id ORDER BY task_id');
    assert.deepEqual(rows, ['t0', 't1', 't2', 't3'].map((t) => ({ task_id: t, last: 10 })));
  });

  test('LISTEN on one connection hears a NOTIFY sent on another', async () => {
    const pg = await start(place('notify'));
    const hub = new EventHub({ connection: { connectionString: pg.url } });
    cleanups.push(() => hub.close());
    await hub.start();
    assert.equal(hub.listening, true);
    const heard = new Promise<ConfigNotice | undefined>((resolve) => hub.onConfigChange(resolve));
    const notice: ConfigNotice = { kind: 'agents', tenant: 'default', id: 'echo' };
    await poolOf(pg, 1).query('SELECT pg_notify($1, $2)', [CONFIG_CHANNEL, JSON.stringify(notice)]);
    assert.deepEqual(await heard, notice);
  });

  test('its process killed with SIGKILL: the watchdog stops the server, and the next start has every committed row', async () => {
    const where = place('owner-killed');
    const owner = await startOwner(where);
    const pool = new Pool({ connectionString: owner.url, max: 1 });
    await pool.query('CREATE TABLE items (name text)');
    await pool.query("INSERT INTO items SELECT 'x' FROM generate_series(1, 100)");
    await pool.end();
    owner.child.kill('SIGKILL');
    await eventually(() => !runs(owner.pid), 30_000, 'the server to stop after its owner died');
    const pg = await start(where);
    assert.equal(await count(pg.url), 100);
  });

  test('a server left running by a dead owner whose watchdog died too is stopped by the next start', async () => {
    const where = place('orphan');
    const owner = await startOwner(where);
    const pool = new Pool({ connectionString: owner.url, max: 1 });
    await pool.query('CREATE TABLE items (name text)');
    await pool.query("INSERT INTO items VALUES ('kept')");
    await pool.end();
    // The watchdog is `sh -c … watchdog <server pid>`: kill it first, then the owner.
    const cmdline = (p: string) => {
      try {
        return readFileSync(`/proc/${p}/cmdline`, 'utf8');
      } catch {
        return ''; // gone meanwhile
      }
    };
    const watchdogs = readdirSync('/proc').filter((p) => /^\d+$/.test(p) && cmdline(p).endsWith(`\0watchdog\0${owner.pid}\0`));
    assert.equal(watchdogs.length, 1, 'one watchdog for the server');
    process.kill(Number(watchdogs[0]), 'SIGKILL');
    owner.child.kill('SIGKILL');
    await new Promise((r) => owner.child.once('exit', r));
    assert.equal(runs(owner.pid), true, 'the server outlived its owner');
    const pg = await start(where);
    assert.equal(runs(owner.pid), false, 'the leftover server was stopped');
    assert.equal(await count(pg.url), 1);
  });

  test('the server itself killed with SIGKILL (a crash): the next start replays the WAL and has every committed row', async () => {
    const where = place('crash');
    const first = await start(where);
    const pool = new Pool({ connectionString: first.url, max: 1 });
    await pool.query('CREATE TABLE items (name text)');
    await pool.query("INSERT INTO items SELECT 'x' FROM generate_series(1, 1000)");
    await pool.end();
    await first.kill();
    const second = await start(where);
    assert.equal(await count(second.url), 1000);
  });

  test('a second start on a directory in use is refused, naming the process that serves it; a taken port is named', async () => {
    const where = place('in-use');
    const pg = await start(where);
    await assert.rejects(startEmbeddedPostgres(where), new RegExp(`already served \\(PostgreSQL pid ${pg.pid}, port \\d+\\) by process ${process.pid}`));
    await poolOf(pg, 1).query('SELECT 1'); // still serving
    const port = Number(new URL(pg.url).port);
    await assert.rejects(startEmbeddedPostgres({ ...place('port-taken'), port }), /port 127\.0\.0\.1:\d+ is already in use .*SWITCHBOARD_POSTGRES_PORT/);
  });
});

describe('temporal dev server', { timeout: 180_000 }, () => {
  let binary: string;
  let server: DevServer | undefined;
  before(async () => {
    binary = await resolveTemporalBinary(path.resolve(__dirname, '..'));
  });
  after(async () => {
    await server?.stop();
  });

  async function listCustom(address: string): Promise<string[]> {
    const connection = await Connection.connect({ address });
    try {
      const res = await connection.operatorService.listSearchAttributes({ namespace: 'default' });
      return Object.keys(res.customAttributes ?? {}).sort();
    } finally {
      await connection.close();
    }
  }

  test('registers search attributes and keeps them on a restart with the same db file', async () => {
    const dbFilename = path.join(tmp, 'temporal', 'dev.sqlite');
    const ports = { port: await freePort(), uiPort: await freePort() };
    server = await startDevServer({ binary, dbFilename, ...ports, searchAttributes: SEARCH_ATTRIBUTES, log });
    assert.deepEqual(await listCustom(server.address), Object.keys(SEARCH_ATTRIBUTES).sort());
    await server.stop();

    // Second start on the existing file: --search-attribute flags are ignored by the CLI here, so the
    // extra attribute only exists because startDevServer runs ensureSearchAttributes.
    const more = { ...SEARCH_ATTRIBUTES, A2ATestOnly: 'Keyword' } as const;
    server = await startDevServer({ binary, dbFilename, ...ports, searchAttributes: more, log });
    assert.deepEqual(await listCustom(server.address), Object.keys(more).sort());

    // Idempotent against a server that already has them all.
    const connection = await Connection.connect({ address: server.address });
    await ensureSearchAttributes(connection, 'default', more).finally(() => connection.close());
    await server.stop();
  });

  test('fails clearly when the port is taken', async () => {
    const blocker = net.createServer().listen(0, '127.0.0.1');
    await new Promise((r) => blocker.once('listening', r));
    const port = (blocker.address() as net.AddressInfo).port;
    try {
      await assert.rejects(
        startDevServer({ binary, dbFilename: path.join(tmp, 'unused.sqlite'), port, uiPort: await freePort(),
          searchAttributes: SEARCH_ATTRIBUTES, log }),
        /already in use .*TEMPORAL_PORT to another port/,
      );
      await assert.rejects(
        startDevServer({ binary, dbFilename: path.join(tmp, 'unused.sqlite'), port: await freePort(), uiPort: port,
          searchAttributes: SEARCH_ATTRIBUTES, log }),
        /already in use .*TEMPORAL_UI_PORT to another port/,
      );
    } finally {
      blocker.close();
    }
  });
});
