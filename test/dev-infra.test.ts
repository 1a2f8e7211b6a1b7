// The zero-setup `npm start` path: embedded Postgres (PGlite over the wire protocol) and a Temporal dev
// server child process, both persistent across restarts.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Connection } from '@temporalio/client';
import { Pool } from 'pg';
import { startEmbeddedPostgres } from '../src/db/embedded';
import { migrate } from '../src/db/migrate';
import { createPool, prepared } from '../src/db/pool';
import { appendEvents } from '../src/events/event-log';
import { ensureSearchAttributes, resolveTemporalBinary, startDevServer, type DevServer } from '../src/temporal/dev-server';
import { SEARCH_ATTRIBUTES } from '../workflows/messages';
import { freePort } from '../src/net';

const log = process.env.DEBUG ? (m: string) => console.error(m) : () => {};

let tmp: string;
before(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'switchboard-dev-infra-'));
});
after(async () => {
  await rm(tmp, { recursive: true, force: true });
});

describe('embedded postgres', () => {
  const cleanups: Array<() => Promise<void>> = [];
  after(async () => {
    for (const c of cleanups.reverse()) await c().catch(() => {});
  });

  test('serves a pg.Pool of 5 concurrent clients and keeps data across restarts', async () => {
    const dataDir = path.join(tmp, 'pgdata');
    const first = await startEmbeddedPostgres({ dataDir });
    cleanups.push(first.stop);
    const pool = new Pool({ connectionString: first.url, max: 5 });
    cleanups.push(() => pool.end());
    await pool.query('CREATE TABLE items (id serial PRIMARY KEY, name text UNIQUE NOT NULL)');
    // Enough parallel work that the pool opens all 5 connections at once.
    await Promise.all(
      Array.from({ length: 25 }, (_, i) =>
        pool.query('INSERT INTO items (name) VALUES ($1) ON CONFLICT DO NOTHING', [`item-${i % 20}`])),
    );
    assert.equal(pool.totalCount, 5);
    await pool.end();
    await first.stop();

    const second = await startEmbeddedPostgres({ dataDir });
    cleanups.push(second.stop);
    const pool2 = new Pool({ connectionString: second.url, max: 2 });
    cleanups.push(() => pool2.end());
    const { rows } = await pool2.query('SELECT count(*)::int AS n FROM items');
    assert.equal(rows[0].n, 20);
  });

  test('runs the task path\'s prepared statements on every connection: one session, so unnamed', async () => {
    const server = await startEmbeddedPostgres({ dataDir: path.join(tmp, 'pgdata-prepared') });
    cleanups.push(server.stop);
    const text = 'SELECT $1::int + 1 AS n';
    // Two connections naming one statement collide in PGlite's one session: why main.ts opens this pool unnamed.
    const named = createPool({ connectionString: server.url, max: 2 });
    cleanups.push(() => named.end());
    const both = await Promise.allSettled([1, 2].map(async (i) => {
      const c = await named.connect();
      try {
        await new Promise((r) => setTimeout(r, 20)); // both connections open before either prepares
        return (await c.query(prepared(named, text, [i]))).rows[0].n;
      } finally {
        c.release();
      }
    }));
    assert.ok(both.some((r) => r.status === 'rejected' && /already exists/.test(String(r.reason))), 'a named statement prepared twice in the one session');
    const pool = createPool({ connectionString: server.url, max: 2 }, undefined, { namedStatements: false });
    cleanups.push(() => pool.end());
    await migrate(pool);
    const appended = await Promise.all(
      Array.from({ length: 8 }, (_, i) => appendEvents(pool, 'default', `t${i % 2}`, [{ key: `k${i}`, event: { statusUpdate: { taskId: `t${i % 2}`, contextId: 'c', status: { state: 'TASK_STATE_WORKING' } } } }])),
    );
    assert.equal(pool.totalCount, 2);
    assert.deepEqual(appended.map((a) => a.length), [1, 1, 1, 1, 1, 1, 1, 1]);
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

describe('scripts/ensure-temporal.sh', () => {
  test('uses a temporal CLI on PATH before building one', async () => {
    // A copy of the script in a scratch repo (no .tools), with a stand-in `temporal` on PATH and no Go.
    const repo = await mkdtemp(path.join(os.tmpdir(), 'ensure-temporal-'));
    try {
      await mkdir(path.join(repo, 'scripts'));
      await copyFile(path.join(__dirname, '..', 'scripts', 'ensure-temporal.sh'), path.join(repo, 'scripts', 'ensure-temporal.sh'));
      await mkdir(path.join(repo, 'bin'));
      await writeFile(path.join(repo, 'bin', 'temporal'), '#!/bin/sh\necho "temporal version 1.5.1"\n', { mode: 0o755 });
      const out = execFileSync('bash', [path.join(repo, 'scripts', 'ensure-temporal.sh')], {
        env: { PATH: `${path.join(repo, 'bin')}:/usr/bin:/bin`, HOME: repo },
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      assert.equal(out.trim().split('\n').at(-1), path.join(repo, 'bin', 'temporal'));
    } finally {
      await rm(repo, { recursive: true, force: true });
    }
  });
});
