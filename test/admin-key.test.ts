// The admin key the data folder keeps (`<data dir>/admin-key`) across a database switch: Switchboard started as
// `npm start` starts it (the embedded PostgreSQL), then on DATABASE_URL (a new database): the same key works and
// the file is not replaced. And every way the file's key can fail a database is said at start, never silently.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { DATABASE_URL, type TestDb, createTestDb, startTemporal } from './helpers/harness';
import { freePort, startSwitchboard } from './helpers/process';
import { KeyStore, hashKey } from '../src/core/auth/keys';
import { ensureAdminKey } from '../src/core/auth/admin-key-file';

const status = async (url: string, key: string) => (await fetch(`${url}/tenants`, { headers: { authorization: `Bearer ${key}` } })).status;

describe('npm start, then the same folder on DATABASE_URL', { timeout: 300_000 }, () => {
  let env: TestWorkflowEnvironment;
  let db: TestDb;
  let dataDir: string;
  before(async () => {
    [env, db] = await Promise.all([startTemporal(), createTestDb()]);
    dataDir = mkdtempSync(path.join(tmpdir(), 'sb-admin-key-'));
  });
  after(async () => {
    await db?.drop();
    await env?.teardown();
    rmSync(dataDir, { recursive: true, force: true });
  });

  test('the new database adopts the key in .data/admin-key (its hash only); the file is kept; the key works on both', async () => {
    const common = { HOST: '127.0.0.1', SWITCHBOARD_DATA_DIR: dataDir, TEMPORAL_ADDRESS: env.address, TEMPORAL_TASK_QUEUE: `admin-key-${process.pid}`, LOG_LEVEL: 'warn' };
    // 1: the embedded PostgreSQL, as a fresh checkout's `npm start`: a key is made and written to the file.
    const embedded = await startSwitchboard({ ...common, PORT: String(await freePort()) }, { readyTimeoutMs: 120_000 });
    const file = path.join(dataDir, 'admin-key');
    let key: string;
    try {
      key = readFileSync(file, 'utf8').trim();
      assert.match(embedded.output(), new RegExp(`admin key \\(shown once; also in ${file}, mode 0600\\): ${key}`));
      assert.equal(await status(embedded.url, key), 200);
    } finally {
      await embedded.kill();
    }
    const written = statSync(file);

    // 2: the same folder on DATABASE_URL, a database that has no admin key yet.
    const url = new URL(DATABASE_URL);
    url.searchParams.set('options', `-c search_path=${db.schema}`);
    const moved = await startSwitchboard({ ...common, PORT: String(await freePort()), DATABASE_URL: url.toString() });
    try {
      assert.equal(await status(moved.url, key), 200, `the same key works on the new database:\n${moved.output()}`);
      assert.match(moved.output(), new RegExp(`admin key: +${file} \\(adopted by this database\\)`));
      assert.doesNotMatch(moved.output(), new RegExp(key), 'the key is not printed again');
      assert.equal(readFileSync(file, 'utf8').trim(), key, 'the file still holds the same key');
      assert.equal(statSync(file).mtimeMs, written.mtimeMs, 'the file was not written again');
      assert.equal(statSync(file).mode & 0o777, 0o600);
      // Stored as every key is: its SHA-256, never the key.
      const { rows } = await db.pool.query("SELECT key_hash, to_jsonb(api_keys)::text AS row FROM api_keys WHERE role = 'admin'");
      assert.equal(rows.length, 1);
      assert.deepEqual(rows[0].key_hash, hashKey(key));
      assert.ok(!rows[0].row.includes(key.slice(3)), 'the key itself is not stored');
    } finally {
      await moved.kill();
    }

    // 3: and again: the database now knows the key; nothing new is adopted or made.
    const again = await startSwitchboard({ ...common, PORT: String(await freePort()), DATABASE_URL: url.toString() });
    try {
      assert.equal(await status(again.url, key), 200);
      assert.match(again.output(), new RegExp(`admin key: +${file}\\n`));
      assert.equal((await db.pool.query("SELECT count(*)::int AS n FROM api_keys WHERE role = 'admin'")).rows[0].n, 1);
    } finally {
      await again.kill();
    }
  });
});

describe('ensureAdminKey: a key that does not work is reported, never silently replaced', () => {
  let db: TestDb;
  let keys: KeyStore;
  let dir: string;
  const file = () => path.join(dir, 'admin-key');
  before(async () => {
    db = await createTestDb();
    keys = new KeyStore(db.pool);
  });
  after(() => db?.drop());
  const fresh = async () => {
    await db.pool.query('DELETE FROM api_keys');
    dir = mkdtempSync(path.join(tmpdir(), 'sb-admin-key-'));
  };

  test('no file, no admin key: one is made, written 0600 and shown once; no file but admin keys: nothing to say', async () => {
    await fresh();
    const made = await ensureAdminKey(keys, dir);
    assert.equal(made?.outcome, 'made');
    assert.equal(readFileSync(file(), 'utf8').trim(), made?.key);
    assert.equal(statSync(file()).mode & 0o777, 0o600);
    assert.equal((await keys.authenticate(made!.key!))?.role, 'admin');
    assert.deepEqual(await ensureAdminKey(keys, dir), { file: file(), outcome: 'kept' });
    rmSync(file());
    assert.equal(await ensureAdminKey(keys, dir), undefined);
  });

  test("another database's key, where this one has admin keys of its own: refused, the file untouched", async () => {
    await fresh();
    await keys.create({ tenant: null, role: 'admin', name: 'this database' });
    const theirs = `sb_${'x'.repeat(43)}`;
    writeFileSync(file(), `${theirs}\n`, { mode: 0o600 });
    const r = await ensureAdminKey(keys, dir);
    assert.equal(r?.outcome, 'refused');
    assert.match(r!.problem!, /this database does not know it/);
    assert.match(r!.problem!, /set SWITCHBOARD_ADMIN_KEY/);
    assert.equal(readFileSync(file(), 'utf8').trim(), theirs);
    assert.equal(await keys.authenticate(theirs), undefined, 'not adopted: this database chose its admins');
  });

  test('a revoked key: refused while other admin keys work; replaced (and said so) when none does', async () => {
    await fresh();
    const mine = await keys.create({ tenant: null, role: 'admin', name: 'mine' });
    writeFileSync(file(), `${mine.key}\n`, { mode: 0o600 });
    await db.pool.query('UPDATE api_keys SET revoked_at = now() WHERE id = $1', [mine.id]);
    const other = await keys.create({ tenant: null, role: 'admin', name: 'other' });
    const refused = await ensureAdminKey(keys, dir);
    assert.equal(refused?.outcome, 'refused');
    assert.match(refused!.problem!, /it was revoked in this database at \d{4}-/);
    assert.equal(readFileSync(file(), 'utf8').trim(), mine.key);

    await db.pool.query('UPDATE api_keys SET revoked_at = now() WHERE id = $1', [other.id]);
    const replaced = await ensureAdminKey(keys, dir);
    assert.equal(replaced?.outcome, 'replaced');
    assert.match(replaced!.problem!, /no longer worked: it was revoked/);
    assert.equal(readFileSync(file(), 'utf8').trim(), replaced!.key);
    assert.equal((await keys.authenticate(replaced!.key!))?.role, 'admin');
  });

  test('a key of another role, or not a key at all: refused, the file untouched', async () => {
    await fresh();
    const client = await keys.create({ tenant: 'default', role: 'client', name: 'client' });
    writeFileSync(file(), `${client.key}\n`);
    const notAdmin = await ensureAdminKey(keys, dir);
    assert.equal(notAdmin?.outcome, 'refused');
    assert.match(notAdmin!.problem!, /it is a client key, not an admin key/);
    writeFileSync(file(), 'my own secret\n');
    const notAKey = await ensureAdminKey(keys, dir);
    assert.equal(notAKey?.outcome, 'refused');
    assert.match(notAKey!.problem!, /not a Switchboard API key/);
    assert.match(notAKey!.problem!, /a new key is then made/);
    assert.equal(readFileSync(file(), 'utf8'), 'my own secret\n');
    assert.equal(await keys.hasAdminKey(), false, 'nothing made behind the user\'s back');
  });
});
