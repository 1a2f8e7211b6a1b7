import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { ConfigError, codecCorsOriginsOf, embeddingsOf, loadConfig, mcpSettingsOf } from '../src/core/config';

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

test('SWITCHBOARD_PUBLIC_GRPC_URL is the host:port clients use', () => {
  assert.equal(loadConfig({}).SWITCHBOARD_PUBLIC_GRPC_URL, undefined);
  assert.equal(loadConfig({ SWITCHBOARD_PUBLIC_GRPC_URL: 'grpc.example.com:443' }).SWITCHBOARD_PUBLIC_GRPC_URL, 'grpc.example.com:443');
  assert.equal(loadConfig({ SWITCHBOARD_PUBLIC_GRPC_URL: '[::1]:9090' }).SWITCHBOARD_PUBLIC_GRPC_URL, '[::1]:9090');
  for (const bad of ['grpc.example.com', 'http://grpc.example.com:443', 'host:port']) {
    assert.throws(() => loadConfig({ SWITCHBOARD_PUBLIC_GRPC_URL: bad }), /SWITCHBOARD_PUBLIC_GRPC_URL: must be host:port/, bad);
  }
});

test('SWITCHBOARD_EMBEDDINGS_*: unset, full-text search; the URL needs its model; a bad URL or timeout is named', () => {
  assert.equal(embeddingsOf(loadConfig({})), undefined);
  assert.deepEqual(embeddingsOf(loadConfig({ SWITCHBOARD_EMBEDDINGS_URL: 'http://127.0.0.1:11434/v1', SWITCHBOARD_EMBEDDINGS_MODEL: 'nomic-embed-text' })), {
    url: 'http://127.0.0.1:11434/v1', model: 'nomic-embed-text', key: undefined, timeoutMs: 2000,
  });
  assert.throws(() => loadConfig({ SWITCHBOARD_EMBEDDINGS_URL: 'http://127.0.0.1:11434/v1' }), /SWITCHBOARD_EMBEDDINGS_MODEL: is required with SWITCHBOARD_EMBEDDINGS_URL/);
  assert.throws(() => loadConfig({ SWITCHBOARD_EMBEDDINGS_URL: 'ftp://x', SWITCHBOARD_EMBEDDINGS_MODEL: 'm' }), /SWITCHBOARD_EMBEDDINGS_URL: must be a URL/);
  assert.throws(() => loadConfig({ SWITCHBOARD_EMBEDDINGS_TIMEOUT_MS: '5' }), /SWITCHBOARD_EMBEDDINGS_TIMEOUT_MS/);
});

test("Temporal UI's origins may call the codec: the embedded UI's, and TEMPORAL_UI_URL's", () => {
  assert.deepEqual(codecCorsOriginsOf(loadConfig({})), ['http://127.0.0.1:8233', 'http://localhost:8233']);
  assert.deepEqual(codecCorsOriginsOf(loadConfig({ TEMPORAL_UI_URL: 'https://temporal.example.com/ui/' })), [
    'http://127.0.0.1:8233',
    'http://localhost:8233',
    'https://temporal.example.com',
  ]);
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

test('the MCP settings: a call waits 10 minutes, a session idles out after 30, a tenant holds 100 per process', () => {
  assert.deepEqual(mcpSettingsOf(loadConfig({})), { callWaitMs: 600_000, idleMs: 1_800_000, maxPerTenant: 100 });
  const c = loadConfig({ SWITCHBOARD_MCP_CALL_WAIT_MS: '5000', SWITCHBOARD_MCP_SESSION_IDLE_MS: '60000', SWITCHBOARD_MCP_SESSIONS_PER_TENANT: '3' });
  assert.deepEqual(mcpSettingsOf(c), { callWaitMs: 5_000, idleMs: 60_000, maxPerTenant: 3 });
  assert.throws(() => loadConfig({ SWITCHBOARD_MCP_SESSIONS_PER_TENANT: '0' }), /SWITCHBOARD_MCP_SESSIONS_PER_TENANT/);
});
