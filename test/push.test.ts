// Tests for the push-notification building blocks: the config store and its params (src/core/push/store.ts), delivery
// signing (src/core/push/signing.ts), the JWKS route and the delivery activity (activities/deliver-push.ts), against
// the local PostgreSQL and a real node:http webhook receiver on 127.0.0.1.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { v1Error } from '../src/api/a2a/rpc-errors';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import Fastify from 'fastify';
import { calculateJwkThumbprint, createLocalJWKSet, decodeProtectedHeader, exportJWK, generateKeyPair, jwtVerify } from 'jose';
import { Pool } from 'pg';
import { deliverPush, type DeliverPushArgs, type DeliverPushResult } from '../activities/deliver-push';
import { appendEvents } from '../src/core/events/event-log';
import type { StreamEvent } from '../task/wire';
import { EventHub } from '../src/core/events/hub';
import { createOutbound } from '../src/core/http/outbound';
import {
  DELIVERY_HEADERS,
  DeliveryVerificationError,
  jwks,
  type Jwks,
  signDelivery,
  signingKey,
  signJwt,
  verifyDelivery,
} from '../src/core/push/signing';
import { PushStore } from '../src/core/push/store';
import { parsePushRequest, type PushConfigInput } from '../src/core/push/params';
import { renderConfig, renderList } from '../src/core/push/render';
import { jwksRoutes } from '../src/api/routes/jwks';
import { createTestDb, eventually, type TestDb } from './helpers/harness';

const TENANT = 'default';
const SECRET = 'a-long-enough-hmac-secret';

// ---- a webhook receiver: records every request; /fail-N/... answers 500 to its first N requests ----

interface Received {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  status: number;
}
let receiver: http.Server;
let hookBase: string;
const received: Received[] = [];
const hits = new Map<string, number>();

function receive(req: http.IncomingMessage, res: http.ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const path = req.url ?? '/';
    const n = (hits.get(path) ?? 0) + 1;
    hits.set(path, n);
    const failFirst = Number(/^\/fail-(\d+)\//.exec(path)?.[1] ?? 0);
    const status = n <= failFirst ? 500 : 204;
    received.push({ path, headers: req.headers, body: Buffer.concat(chunks).toString(), status });
    res.writeHead(status).end();
  });
}
const receivedAt = (path: string) => received.filter((r) => r.path === path);

let db: TestDb;
let hub: EventHub;
const outbound = createOutbound({ allowPrivate: true });
let store: PushStore;

before(async () => {
  receiver = http.createServer(receive);
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  hookBase = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  db = await createTestDb();
  hub = new EventHub({ pollMs: 50 });
  store = new PushStore(db.pool, { allowPrivate: true });
});

after(async () => {
  await hub.close();
  await outbound.close();
  await db.drop();
  receiver.closeAllConnections();
  await new Promise<void>((resolve) => receiver.close(() => resolve()));
});

/** The JSON-RPC code an error would be answered with (the store raises task errors; the protocol layer renders them). */
async function rejectsWithCode(p: Promise<unknown> | (() => unknown), code: number, message?: RegExp): Promise<void> {
  let caught: unknown;
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (err) {
    caught = err;
  }
  assert.ok(caught, `expected error ${code}, got success`);
  const rendered = v1Error(caught);
  assert.equal(rendered.code, code, `${rendered.message}`);
  if (message) assert.match(rendered.message, message);
}

const input = (over: Partial<PushConfigInput> = {}): PushConfigInput => ({ taskId: `task-${randomUUID()}`, url: `${hookBase}/hook`, ...over });

// ---------------------------------------------------------------------------------------------

describe('push config store', () => {
  test('create mints a UUID id, get finds it, the rendering adds deliveryStatus and hides every secret', async () => {
    const cfg = await store.create(TENANT, '1.0', input({ token: 'tok-secret', authentication: { scheme: 'Bearer', credentials: 'cred-secret' } }));
    assert.match(cfg.id, /^[0-9a-f-]{36}$/);
    const got = await store.get(TENANT, cfg.taskId, cfg.id);
    assert.equal(got?.url, `${hookBase}/hook`);
    assert.equal(got?.token, 'tok-secret');
    assert.deepEqual(got?.authentication, { scheme: 'Bearer', credentials: 'cred-secret' });

    const v1 = renderConfig('1.0', got!);
    assert.deepEqual(v1, {
      id: cfg.id,
      taskId: cfg.taskId,
      url: `${hookBase}/hook`,
      authentication: { scheme: 'Bearer' },
      deliveryStatus: { deliveries: 0, attempts: 0, failures: 0, deliveredSeq: 0 },
    });
    const v03 = renderConfig('0.3', got!);
    assert.deepEqual(v03, {
      taskId: cfg.taskId,
      pushNotificationConfig: { id: cfg.id, url: `${hookBase}/hook`, authentication: { schemes: ['Bearer'] } },
      deliveryStatus: { deliveries: 0, attempts: 0, failures: 0, deliveredSeq: 0 },
    });
    for (const rendered of [v1, v03, renderList('1.0', { configs: [got!], nextPageToken: '' }), renderList('0.3', { configs: [got!], nextPageToken: '' })]) {
      assert.doesNotMatch(JSON.stringify(rendered), /secret/);
    }
  });

  test('an HMAC-SHA256 scheme (any case) keeps its credentials as the HMAC secret, never as authentication', async () => {
    const cfg = await store.create(TENANT, '1.0', input({ authentication: { scheme: 'hmac-sha256', credentials: SECRET } }));
    assert.equal(cfg.hmacSecret, SECRET);
    assert.deepEqual(cfg.authentication, { scheme: 'hmac-sha256' });
    const { rows } = await db.pool.query('SELECT authentication, hmac_secret FROM push_configs WHERE config_id = $1', [cfg.id]);
    assert.deepEqual(rows[0], { authentication: { scheme: 'hmac-sha256' }, hmac_secret: SECRET });
    assert.doesNotMatch(JSON.stringify(renderConfig('1.0', cfg)), new RegExp(SECRET));
  });

  test('re-creating with the same id replaces the webhook but keeps the delivery cursor and counters', async () => {
    const first = await store.create(TENANT, '1.0', input({ id: 'mine', token: 'old' }));
    await store.recordSuccess(TENANT, first.taskId, 'mine', 7);
    const second = await store.create(TENANT, '0.3', { taskId: first.taskId, id: 'mine', url: `${hookBase}/other` });
    assert.equal(second.id, 'mine');
    assert.equal(second.url, `${hookBase}/other`);
    assert.equal(second.dialect, '0.3');
    assert.equal(second.token, undefined);
    assert.equal(second.status.deliveredSeq, 7);
    assert.equal(second.status.deliveries, 1);
    assert.equal((await store.list(TENANT, first.taskId)).configs.length, 1);
  });

  test('startAfterSeq sets where a new config starts', async () => {
    const cfg = await store.create(TENANT, '1.0', input(), { startAfterSeq: 12 });
    assert.equal(cfg.status.deliveredSeq, 12);
  });

  test('list pages in id order; a forged page token is invalid params', async () => {
    const taskId = `task-${randomUUID()}`;
    for (const id of ['c', 'a', 'b']) await store.create(TENANT, '1.0', { taskId, id, url: `${hookBase}/hook` });
    const page1 = await store.list(TENANT, taskId, { pageSize: 2 });
    assert.deepEqual(page1.configs.map((c) => c.id), ['a', 'b']);
    assert.notEqual(page1.nextPageToken, '');
    const page2 = await store.list(TENANT, taskId, { pageSize: 2, pageToken: page1.nextPageToken });
    assert.deepEqual(page2.configs.map((c) => c.id), ['c']);
    assert.equal(page2.nextPageToken, '');
    assert.deepEqual((await store.list(TENANT, 'no-such-task')).configs, []);
    await rejectsWithCode(store.list(TENANT, taskId, { pageToken: 'bm9wZQ' }), -32602, /pageToken/);
  });

  test('get without a config id answers the newest config (0.3 get by task id)', async () => {
    const taskId = `task-${randomUUID()}`;
    await store.create(TENANT, '0.3', { taskId, id: 'older', url: `${hookBase}/hook` });
    // 'older' sorts after 'newer' by id: only a later created_at makes 'newer' the newest, so the clock must have moved on.
    const later = () => db.pool.query<{ later: boolean }>('SELECT clock_timestamp() > created_at AS later FROM push_configs WHERE tenant = $1 AND task_id = $2 AND config_id = $3', [TENANT, taskId, 'older']);
    await eventually(async () => (await later()).rows[0]?.later, 5_000, "PostgreSQL's clock past the older config's created_at");
    await store.create(TENANT, '0.3', { taskId, id: 'newer', url: `${hookBase}/hook` });
    assert.equal((await store.get(TENANT, taskId))?.id, 'newer');
    assert.equal(await store.get(TENANT, 'no-such-task'), undefined);
  });

  test('delete is idempotent', async () => {
    const cfg = await store.create(TENANT, '1.0', input());
    assert.equal(await store.delete(TENANT, cfg.taskId, cfg.id), true);
    assert.equal(await store.delete(TENANT, cfg.taskId, cfg.id), false);
    assert.equal(await store.get(TENANT, cfg.taskId, cfg.id), undefined);
  });

  describe('webhook URLs (SSRF) with allowPrivate false', () => {
    const strict = () => new PushStore(db.pool, { allowPrivate: false });
    for (const url of [
      'http://127.0.0.1/hook',
      'http://169.254.169.254/latest/meta-data/',
      'http://10.0.0.1/',
      'http://[::1]:8080/',
      'http://[::ffff:127.0.0.1]/',
      'http://localhost:9999/hook',
    ]) {
      test(`refuses ${url}`, () => rejectsWithCode(strict().create(TENANT, '1.0', input({ url })), -32602, /private, loopback or link-local/));
    }
    test('refuses a host that does not resolve', () =>
      rejectsWithCode(strict().create(TENANT, '1.0', input({ url: 'https://no-such-host.invalid/hook' })), -32602, /does not resolve/));
    test('refuses credentials in the URL and non-http schemes', async () => {
      await rejectsWithCode(strict().create(TENANT, '1.0', input({ url: 'https://user:pw@8.8.8.8/hook' })), -32602, /credentials/);
      await rejectsWithCode(strict().create(TENANT, '1.0', input({ url: 'ftp://8.8.8.8/hook' })), -32602, /http or https/);
    });
    test('accepts a public address', async () => {
      const cfg = await strict().create(TENANT, '1.0', input({ url: 'https://8.8.8.8/hook' }));
      assert.equal(cfg.url, 'https://8.8.8.8/hook');
    });
  });
});

describe('push-config params', () => {
  test('the 1.0 and 0.3 methods map to the same requests', () => {
    const auth = { scheme: 'Bearer', credentials: 'c' };
    assert.deepEqual(parsePushRequest('CreateTaskPushNotificationConfig', { taskId: 't', url: 'https://x.example/h', token: 'k', authentication: auth }), {
      dialect: '1.0',
      request: { op: 'create', config: { taskId: 't', id: undefined, url: 'https://x.example/h', token: 'k', authentication: auth } },
    });
    assert.deepEqual(
      parsePushRequest('tasks/pushNotificationConfig/set', {
        taskId: 't',
        pushNotificationConfig: { id: 'p', url: 'https://x.example/h', authentication: { schemes: ['Bearer', 'Basic'], credentials: 'c' } },
      }),
      { dialect: '0.3', request: { op: 'create', config: { taskId: 't', id: 'p', url: 'https://x.example/h', token: undefined, authentication: auth } } },
    );
    assert.deepEqual(parsePushRequest('GetTaskPushNotificationConfig', { taskId: 't', id: 'p' }).request, { op: 'get', taskId: 't', configId: 'p' });
    assert.deepEqual(parsePushRequest('tasks/pushNotificationConfig/get', { id: 't' }).request, { op: 'get', taskId: 't', configId: undefined });
    assert.deepEqual(parsePushRequest('ListTaskPushNotificationConfigs', { taskId: 't', pageSize: 0, pageToken: '' }).request, {
      op: 'list',
      taskId: 't',
      pageSize: undefined,
      pageToken: undefined,
    });
    assert.deepEqual(parsePushRequest('tasks/pushNotificationConfig/list', { id: 't' }).request, { op: 'list', taskId: 't' });
    assert.deepEqual(parsePushRequest('DeleteTaskPushNotificationConfig', { taskId: 't', id: 'p' }).request, { op: 'delete', taskId: 't', configId: 'p' });
    assert.deepEqual(parsePushRequest('tasks/pushNotificationConfig/delete', { id: 't', pushNotificationConfigId: 'p' }).request, {
      op: 'delete',
      taskId: 't',
      configId: 'p',
    });
  });

  const invalid: [string, unknown, RegExp][] = [
    ['CreateTaskPushNotificationConfig', { taskId: 't' }, /url/],
    ['CreateTaskPushNotificationConfig', { url: 'https://x.example/h' }, /taskId/],
    ['CreateTaskPushNotificationConfig', { taskId: 't', url: 'ftp://x.example/h' }, /http/],
    ['CreateTaskPushNotificationConfig', { taskId: 't', url: 'https://x.example/h', token: 'a\r\nX-Evil: 1' }, /printable ASCII/],
    ['CreateTaskPushNotificationConfig', { taskId: 't', url: 'https://x.example/h', authentication: { scheme: 'Bad Scheme' } }, /auth-scheme/],
    ['CreateTaskPushNotificationConfig', { taskId: 't', url: 'https://x.example/h', authentication: { scheme: 'HMAC-SHA256', credentials: 'short' } }, /at least 16/],
    ['GetTaskPushNotificationConfig', { taskId: 't' }, /id/],
    ['ListTaskPushNotificationConfigs', { taskId: 't', pageSize: 101 }, /pageSize/],
    ['DeleteTaskPushNotificationConfig', { id: 'p' }, /taskId/],
    ['tasks/pushNotificationConfig/set', { taskId: 't', url: 'https://x.example/h' }, /pushNotificationConfig/],
    ['tasks/pushNotificationConfig/set', { taskId: 't', pushNotificationConfig: { url: 'https://x.example/h', authentication: { schemes: [], credentials: 'c' } } }, /scheme/],
    ['tasks/pushNotificationConfig/delete', { id: 't' }, /pushNotificationConfigId/],
    ['tasks/pushNotificationConfig/list', {}, /id/],
  ];
  for (const [method, params, message] of invalid) {
    test(`${method} ${JSON.stringify(params)} is invalid params`, () => rejectsWithCode(() => parsePushRequest(method, params), -32602, message));
  }
});

// ---------------------------------------------------------------------------------------------

describe('delivery signing', () => {
  const delivery = { deliveryId: 'cfg:1', body: '{"statusUpdate":{}}', taskId: 't', configId: 'cfg', issuer: 'https://gw.example', secret: SECRET };

  test('the key is created once: processes racing on one database agree on it, and the JWKS publishes it', async () => {
    // Separate pools stand in for separate processes (each caches its own key).
    const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
    const others = [1, 2, 3].map(() => new Pool({ connectionString: url, max: 2, options: `-c search_path=${db.schema}` }));
    try {
      const keys = await Promise.all([db.pool, ...others].map((p) => signingKey(p)));
      assert.equal(new Set(keys.map((k) => k.kid)).size, 1);
      const set = await jwks(db.pool);
      assert.equal(set.keys.length, 1);
      assert.deepEqual(Object.keys(set.keys[0]).sort(), ['alg', 'crv', 'kid', 'kty', 'use', 'x', 'y']);
      assert.equal(set.keys[0].kid, keys[0].kid);
      assert.equal(set.keys[0].alg, 'ES256');
      assert.equal(set.keys[0].use, 'sig');
    } finally {
      await Promise.all(others.map((p) => p.end()));
    }
  });

  test('a signed delivery verifies (HMAC and JWT) and carries the claims', async () => {
    const key = await signingKey(db.pool);
    const now = Math.floor(Date.now() / 1000);
    const headers = await signDelivery(key, { ...delivery, timestamp: now });
    assert.match(headers[DELIVERY_HEADERS.signature], /^v1=[0-9a-f]{64}$/);
    const { claims } = await verifyDelivery(new Headers(headers), { body: delivery.body, jwks: await jwks(db.pool), secret: SECRET, issuer: 'https://gw.example' });
    assert.equal(claims.jti, 'cfg:1');
    assert.equal(claims.taskId, 't');
    assert.equal(claims.configId, 'cfg');
    assert.equal(claims.iat, now);
  });

  test('the JWT on the wire: header {alg, typ, kid}, exactly the delivery claims, verifiable by a plain JWT library against the JWKS', async () => {
    const key = await signingKey(db.pool);
    const now = Math.floor(Date.now() / 1000);
    const jwt = (await signDelivery(key, { ...delivery, timestamp: now }))[DELIVERY_HEADERS.jwt];
    // Receivers built against the first release parse these; the header is exactly the three fields, in this order.
    assert.deepEqual(Object.entries(decodeProtectedHeader(jwt)), [
      ['alg', 'ES256'],
      ['typ', 'JWT'],
      ['kid', key.kid],
    ]);
    const keySet = await jwks(db.pool);
    const { payload } = await jwtVerify(jwt, createLocalJWKSet(keySet), { algorithms: ['ES256'], issuer: 'https://gw.example', typ: 'JWT' });
    const bodyHash = Buffer.from(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(delivery.body))).toString('base64url');
    assert.deepEqual(payload, { iss: 'https://gw.example', iat: now, jti: 'cfg:1', taskId: 't', configId: 'cfg', body_sha256: bodyHash });
    // The kid is the key's RFC 7638 thumbprint.
    assert.equal(key.kid, await calculateJwkThumbprint(keySet.keys[0]));
  });

  test('without a secret there is no HMAC header, and the JWT alone verifies', async () => {
    const key = await signingKey(db.pool);
    const headers = await signDelivery(key, { ...delivery, secret: undefined, timestamp: Math.floor(Date.now() / 1000) });
    assert.equal(headers[DELIVERY_HEADERS.signature], undefined);
    await verifyDelivery(new Headers(headers), { body: delivery.body, jwks: await jwks(db.pool) });
  });

  test('refuses a tampered body, a wrong secret, a wrong key, a stale or future timestamp, alg none, a swapped delivery id', async () => {
    const key = await signingKey(db.pool);
    const keySet = await jwks(db.pool);
    const now = Math.floor(Date.now() / 1000);
    const headers = await signDelivery(key, { ...delivery, timestamp: now });
    const refuses = (h: Record<string, string>, opts: Partial<Parameters<typeof verifyDelivery>[1]>, message: RegExp) =>
      assert.rejects(verifyDelivery(new Headers(h), { body: delivery.body, jwks: keySet, secret: SECRET, ...opts }), (err: unknown) => {
        assert.ok(err instanceof DeliveryVerificationError, String(err));
        assert.match(err.message, message);
        return true;
      });

    await refuses(headers, { body: '{"statusUpdate":{"x":1}}' }, /HMAC/);
    await refuses(headers, { body: '{"statusUpdate":{"x":1}}', secret: undefined }, /body does not match/);
    await refuses(headers, { secret: 'another-secret-of-length' }, /HMAC/);
    // The same kid with another key's public half: the signature cannot verify.
    const other = await exportJWK((await generateKeyPair('ES256')).publicKey);
    const wrongKeys: Jwks = { keys: [{ ...keySet.keys[0], x: other.x!, y: other.y! }] };
    await refuses(headers, { jwks: wrongKeys, secret: undefined }, /signature does not verify/);
    await refuses(headers, { jwks: { keys: [] }, secret: undefined }, /kid/);
    await refuses(headers, { now: now + 301 }, /stale or replayed/);
    await refuses(headers, { now: now - 301 }, /stale or replayed/);
    await refuses(await signDelivery(key, { ...delivery, timestamp: now - 600 }), {}, /stale or replayed/);
    // A later timestamp header pasted onto an old JWT fails the HMAC; without a secret, the JWT's own iat.
    const replayed = await signDelivery(key, { ...delivery, timestamp: now - 600 });
    await refuses({ ...replayed, [DELIVERY_HEADERS.timestamp]: String(now) }, {}, /HMAC/);
    await refuses({ ...replayed, [DELIVERY_HEADERS.timestamp]: String(now) }, { secret: undefined }, /JWT iat/);
    const jwt = headers[DELIVERY_HEADERS.jwt];
    const [, payload, signature] = jwt.split('.');
    const none = `${Buffer.from(JSON.stringify({ alg: 'none', kid: key.kid })).toString('base64url')}.${payload}.${signature}`;
    await refuses({ ...headers, [DELIVERY_HEADERS.jwt]: none }, { secret: undefined }, /alg none/);
    const otherDelivery = await signJwt(key, { iss: 'x', iat: now, jti: 'cfg:2', taskId: 't', configId: 'cfg', body_sha256: 'x' });
    await refuses({ ...headers, [DELIVERY_HEADERS.jwt]: otherDelivery }, { secret: undefined }, /jti cfg:2/);
    await refuses(headers, { issuer: 'https://someone-else.example' }, /iss/);
  });

  test('GET /.well-known/jwks.json serves the key set', async (t) => {
    const app = Fastify();
    await app.register(jwksRoutes, { pool: db.pool });
    t.after(() => app.close());
    const res = await app.inject({ method: 'GET', url: '/.well-known/jwks.json' });
    assert.equal(res.statusCode, 200);
    assert.match(String(res.headers['content-type']), /^application\/json/);
    assert.match(String(res.headers['cache-control']), /max-age=\d+/);
    assert.deepEqual(res.json(), await jwks(db.pool));
  });
});

// ---------------------------------------------------------------------------------------------

const ts = '2026-01-01T00:00:00.000Z';
const status = (taskId: string, state: string): StreamEvent => ({
  statusUpdate: { taskId, contextId: 'ctx', status: { state: state as never, timestamp: ts } },
});
/** A task's whole life: snapshot, working, an artifact, completed. */
function lifeOf(taskId: string): StreamEvent[] {
  return [
    { task: { id: taskId, contextId: 'ctx', status: { state: 'TASK_STATE_SUBMITTED', timestamp: ts } } },
    status(taskId, 'TASK_STATE_WORKING'),
    { artifactUpdate: { taskId, contextId: 'ctx', artifact: { artifactId: 'a1', parts: [{ text: 'hello' }] } } },
    status(taskId, 'TASK_STATE_COMPLETED'),
  ];
}
/** Logs events and tells followers in this process, as the workflow's writers do. */
async function append(taskId: string, events: StreamEvent[]) {
  const logged = await appendEvents(db.pool, TENANT, taskId, events.map((event) => ({ key: randomUUID(), event })));
  hub.publish(TENANT, taskId, logged);
  return logged;
}

/** Resolves once `path` has received `n` deliveries. */
const deliveredAt = (path: string, n: number) => eventually(() => receivedAt(path).length >= n || undefined, 10_000, `${n} deliveries at ${path}`);

const deps = () => ({ pool: db.pool, fetch: outbound.fetch, hub, issuer: 'https://gw.example' });
// Failed attempts are expected here; the mock environment would log each one as a warning.
const quietEnv = () => new MockActivityEnvironment(undefined, { logger: new DefaultLogger('ERROR') });
const run = (args: DeliverPushArgs, env = quietEnv()): Promise<DeliverPushResult> => env.run(deliverPush, deps(), args) as Promise<DeliverPushResult>;

/** Calls the activity the way Temporal's retry policy would: again after every retryable failure. */
async function runWithRetries(args: DeliverPushArgs, maxAttempts = 10): Promise<{ result: DeliverPushResult; failures: ApplicationFailure[] }> {
  const failures: ApplicationFailure[] = [];
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    try {
      return { result: await run(args), failures };
    } catch (err) {
      assert.ok(err instanceof ApplicationFailure, String(err));
      assert.equal(err.type, 'PushDeliveryFailed');
      assert.equal(err.nonRetryable, false);
      failures.push(err);
    }
  }
  throw new Error(`still failing after ${maxAttempts} attempts`);
}

describe('deliverPush', () => {
  test('a webhook failing twice gets every event exactly once, in order, signed; the status counts it all', async () => {
    const taskId = `task-${randomUUID()}`;
    const path = `/fail-2/${taskId}`;
    const logged = await append(taskId, lifeOf(taskId));
    const cfg = await store.create(TENANT, '1.0', {
      taskId,
      url: `${hookBase}${path}`,
      token: 'tok',
      authentication: { scheme: 'HMAC-SHA256', credentials: SECRET },
    });

    const { result, failures } = await runWithRetries({ tenant: TENANT, taskId, configId: cfg.id, follow: false });
    assert.deepEqual(result, { cursor: 4, closed: true, gone: false });
    assert.equal(failures.length, 2);
    assert.match(failures[0].message, /HTTP 500/);

    const all = receivedAt(path);
    assert.equal(all.length, 6); // event 1 three times (two 500s), then 2, 3, 4
    const ok = all.filter((r) => r.status === 204);
    assert.deepEqual(
      ok.map((r) => r.headers[DELIVERY_HEADERS.deliveryId.toLowerCase()]),
      logged.map((e) => `${cfg.id}:${e.seq}`),
    );
    // A redelivery is the same delivery: the same id every time.
    assert.deepEqual(new Set(all.slice(0, 3).map((r) => r.headers[DELIVERY_HEADERS.deliveryId.toLowerCase()])), new Set([`${cfg.id}:1`]));
    const keySet = await jwks(db.pool);
    for (const [i, r] of ok.entries()) {
      assert.equal(r.headers['content-type'], 'application/a2a+json');
      assert.equal(r.headers['x-a2a-notification-token'], 'tok');
      assert.equal(r.headers.authorization, undefined); // the HMAC secret signs; it is never sent
      assert.deepEqual(JSON.parse(r.body), logged[i].event);
      const { claims } = await verifyDelivery(r.headers, { body: r.body, jwks: keySet, secret: SECRET, issuer: 'https://gw.example' });
      assert.equal(claims.taskId, taskId);
      assert.equal(claims.configId, cfg.id);
    }

    const after = await store.get(TENANT, taskId, cfg.id);
    assert.equal(after?.status.deliveredSeq, 4);
    assert.equal(after?.status.attempts, 6);
    assert.equal(after?.status.failures, 2);
    assert.equal(after?.status.deliveries, 4);
    assert.match(after?.status.lastError ?? '', /HTTP 500/);
    assert.ok(after?.status.lastSuccessAt);
    assert.equal(after.status.lastAttemptAt, after.status.lastSuccessAt); // the last attempt succeeded

    // Once everything is delivered, another run sends nothing.
    assert.deepEqual(await run({ tenant: TENANT, taskId, configId: cfg.id, follow: false }), { cursor: 4, closed: true, gone: false });
    assert.deepEqual(await run({ tenant: TENANT, taskId, configId: cfg.id, follow: true, idleMs: 200 }), { cursor: 4, closed: true, gone: false });
    assert.equal(receivedAt(path).length, 6);
  });

  test('a 0.3 config gets bare 0.3 events as application/json, with its Authorization header', async () => {
    const taskId = `task-${randomUUID()}`;
    const path = `/v03/${taskId}`;
    await append(taskId, lifeOf(taskId));
    const cfg = await store.create(TENANT, '0.3', { taskId, url: `${hookBase}${path}`, authentication: { scheme: 'Bearer', credentials: 'xyz' } });
    assert.deepEqual(await run({ tenant: TENANT, taskId, configId: cfg.id, follow: false }), { cursor: 4, closed: true, gone: false });

    const got = receivedAt(path);
    assert.equal(got.length, 4);
    for (const r of got) {
      assert.match(String(r.headers['content-type']), /^application\/json/);
      assert.equal(r.headers.authorization, 'Bearer xyz');
      assert.equal(r.headers[DELIVERY_HEADERS.signature.toLowerCase()], undefined);
      await verifyDelivery(r.headers, { body: r.body, jwks: await jwks(db.pool) });
    }
    const bodies = got.map((r) => JSON.parse(r.body));
    assert.equal(bodies[0].kind, 'task');
    assert.equal(bodies[0].id, taskId);
    assert.equal(bodies[0].status.state, 'submitted');
    assert.deepEqual(
      { kind: bodies[1].kind, state: bodies[1].status.state, final: bodies[1].final },
      { kind: 'status-update', state: 'working', final: false },
    );
    assert.equal(bodies[2].kind, 'artifact-update');
    assert.deepEqual(bodies[2].artifact.parts, [{ kind: 'text', text: 'hello' }]);
    assert.deepEqual({ kind: bodies[3].kind, state: bodies[3].status.state, final: bodies[3].final }, { kind: 'status-update', state: 'completed', final: true });
  });

  test('follow: false stops at the end of the log and the next run resumes after the cursor', async () => {
    const taskId = `task-${randomUUID()}`;
    const path = `/partial/${taskId}`;
    const [snapshot, working, artifact, completed] = lifeOf(taskId);
    await append(taskId, [snapshot, working]);
    const cfg = await store.create(TENANT, '1.0', { taskId, url: `${hookBase}${path}` });
    assert.deepEqual(await run({ tenant: TENANT, taskId, configId: cfg.id, follow: false }), { cursor: 2, closed: false, gone: false });
    await append(taskId, [artifact, completed]);
    assert.deepEqual(await run({ tenant: TENANT, taskId, configId: cfg.id, follow: false }), { cursor: 4, closed: true, gone: false });
    assert.deepEqual(
      receivedAt(path).map((r) => r.headers[DELIVERY_HEADERS.deliveryId.toLowerCase()]),
      [1, 2, 3, 4].map((seq) => `${cfg.id}:${seq}`),
    );
  });

  test('follow: true delivers events as they are appended, and stops after idleMs without any', async () => {
    const taskId = `task-${randomUUID()}`;
    const path = `/live/${taskId}`;
    const [snapshot, working, artifact, completed] = lifeOf(taskId);
    await append(taskId, [snapshot]);
    const cfg = await store.create(TENANT, '1.0', { taskId, url: `${hookBase}${path}` });

    const idle = Date.now();
    assert.deepEqual(await run({ tenant: TENANT, taskId, configId: cfg.id, follow: true, idleMs: 300 }), { cursor: 1, closed: false, gone: false });
    assert.ok(Date.now() - idle >= 300);

    // The run is past its first read of the log once it has delivered what was there: every later event
    // reaches it live.
    const live = run({ tenant: TENANT, taskId, configId: cfg.id, follow: true, idleMs: 5_000 });
    await deliveredAt(path, 1);
    await append(taskId, [working, artifact]);
    await deliveredAt(path, 3);
    await append(taskId, [completed]);
    assert.deepEqual(await live, { cursor: 4, closed: true, gone: false });
    assert.equal(receivedAt(path).length, 4);
  });

  test('a deleted config is gone, before or during a run', async () => {
    const taskId = `task-${randomUUID()}`;
    await append(taskId, lifeOf(taskId).slice(0, 2));
    const cfg = await store.create(TENANT, '1.0', { taskId, url: `${hookBase}/gone/${taskId}` });
    const live = run({ tenant: TENANT, taskId, configId: cfg.id, follow: true, idleMs: 5_000 });
    await deliveredAt(`/gone/${taskId}`, 2); // following now
    await store.delete(TENANT, taskId, cfg.id);
    await append(taskId, lifeOf(taskId).slice(2));
    assert.deepEqual(await live, { cursor: 2, closed: false, gone: true });
    assert.equal(receivedAt(`/gone/${taskId}`).length, 2);
    assert.deepEqual(await run({ tenant: TENANT, taskId, configId: cfg.id, follow: false }), { cursor: 0, closed: false, gone: true });
  });

  test('an unreachable webhook is a retryable failure with the reason recorded', async () => {
    const taskId = `task-${randomUUID()}`;
    await append(taskId, lifeOf(taskId).slice(0, 1));
    // A port nothing listens on: bind one and close it.
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const cfg = await store.create(TENANT, '1.0', { taskId, url: `http://127.0.0.1:${port}/hook` });
    await assert.rejects(run({ tenant: TENANT, taskId, configId: cfg.id, follow: false }), (err: unknown) => {
      assert.ok(err instanceof ApplicationFailure && err.type === 'PushDeliveryFailed', String(err));
      assert.match(err.message, /unreachable/);
      return true;
    });
    const after = await store.get(TENANT, taskId, cfg.id);
    assert.deepEqual([after?.status.attempts, after?.status.failures, after?.status.deliveredSeq], [1, 1, 0]);
    assert.match(after?.status.lastError ?? '', /unreachable/);
  });

  test('cancelling the activity ends a follow with a cancellation', async () => {
    const taskId = `task-${randomUUID()}`;
    await append(taskId, lifeOf(taskId).slice(0, 1));
    const cfg = await store.create(TENANT, '1.0', { taskId, url: `${hookBase}/cancel/${taskId}` });
    const env = quietEnv();
    const live = run({ tenant: TENANT, taskId, configId: cfg.id, follow: true, idleMs: 30_000 }, env);
    await deliveredAt(`/cancel/${taskId}`, 1); // following now
    env.cancel();
    await assert.rejects(live, (err: unknown) => err instanceof CancelledFailure);
    assert.equal((await store.get(TENANT, taskId, cfg.id))?.status.deliveredSeq, 1);
  });
});
