import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { ConfigError, loadConfig } from '../src/config';

test('defaults: embedded services, private URLs refused', () => {
  const c = loadConfig({});
  assert.equal(c.PORT, 8080);
  assert.equal(c.HOST, '127.0.0.1');
  assert.equal(c.DATABASE_URL, undefined);
  assert.equal(c.TEMPORAL_ADDRESS, undefined);
  assert.equal(c.TEMPORAL_TASK_QUEUE, 'switchboard');
  assert.equal(c.SWITCHBOARD_ALLOW_PRIVATE_URLS, false);
  assert.equal(c.SWITCHBOARD_INPUT_TIMEOUT_MS, 7 * 24 * 3600 * 1000);
});

test('values are parsed, and an empty string counts as unset', () => {
  const c = loadConfig({ PORT: '9000', SWITCHBOARD_ALLOW_PRIVATE_URLS: 'true', TEMPORAL_ADDRESS: 'temporal:7233', DATABASE_URL: '' });
  assert.equal(c.PORT, 9000);
  assert.equal(c.SWITCHBOARD_ALLOW_PRIVATE_URLS, true);
  assert.equal(c.TEMPORAL_ADDRESS, 'temporal:7233');
  assert.equal(c.DATABASE_URL, undefined);
});

test('every bad variable is named', () => {
  assert.throws(
    () => loadConfig({ PORT: 'eighty', SWITCHBOARD_ALLOW_PRIVATE_URLS: 'maybe', DATABASE_URL: 'mysql://x', TEMPORAL_ADDRESS: 'no-port' }),
    (err: unknown) => {
      assert.ok(err instanceof ConfigError);
      for (const name of ['PORT', 'SWITCHBOARD_ALLOW_PRIVATE_URLS', 'DATABASE_URL', 'TEMPORAL_ADDRESS']) assert.match(err.message, new RegExp(name));
      return true;
    },
  );
});

test('npm start with a bad value exits with the message before starting anything', () => {
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    env: { ...process.env, PORT: '99999' },
    encoding: 'utf8',
    timeout: 30_000,
  });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /PORT/);
});
