/**
 * The per-process caches a task reads (src/core/events/config-cache.ts: agents, policies, agents' credentials;
 * src/core/auth/: tenants' quotas, API keys) read an expired entry once when many requests miss it together, not once
 * each (src/core/single-flight.ts): at c=32 every 2 s expiry used to send 32 identical reads. Real PostgreSQL; the pool
 * is the real one with its statements counted.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { ConfigCache } from '../src/core/events/config-cache';
import { EventHub } from '../src/core/events/hub';
import { KeyStore } from '../src/core/auth/keys';
import { TenantQuotas } from '../src/core/auth/quotas';
import { DATABASE_URL, type TestDb, createTestDb } from './helpers/harness';

let db: TestDb;
let hub: EventHub;
before(async () => {
  db = await createTestDb();
  hub = new EventHub({ connection: { connectionString: DATABASE_URL } });
  await hub.start();
});
after(async () => {
  await hub?.close();
  await db?.drop();
});

/** The test database's pool, counting the statements whose text contains `what`. */
function counting(what: string): { pool: Pool; count: () => number } {
  let n = 0;
  const pool = Object.create(db.pool) as Pool;
  pool.query = ((...args: Parameters<Pool['query']>) => {
    if (String(typeof args[0] === 'string' ? args[0] : (args[0] as { text?: string }).text).includes(what)) n++;
    return (db.pool.query as (...a: unknown[]) => unknown)(...args);
  }) as Pool['query'];
  return { pool, count: () => n };
}

const together = <T>(n: number, f: () => Promise<T>) => Promise.all(Array.from({ length: n }, f));

test('32 reads of one uncached entry load it once; a drop while it loads makes the next read load again', async () => {
  const cache = new ConfigCache<number>(hub, 'agents', 60_000);
  // Ids no other test uses: their agents' notices (NOTIFY is database-wide) would drop entries here.
  const [a1, a2, a3] = ['a1', 'a2', 'a3'].map((a) => `${a}-${randomUUID()}`);
  let loads = 0;
  const load = async () => {
    loads++;
    const { rows } = await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM tenants');
    return rows[0]!.n;
  };
  const values = await together(32, () => cache.read('default', a1, load));
  assert.equal(loads, 1);
  assert.deepEqual(new Set(values), new Set([1]));
  // Another entry is its own load.
  await together(8, () => cache.read('default', a2, load));
  assert.equal(loads, 2);
  // A change heard while a load runs: readers after it do not join that load.
  const running = cache.read('default', a3, load);
  cache.drop('default', a3);
  await Promise.all([running, cache.read('default', a3, load)]);
  assert.equal(loads, 4);
});

test("32 requests of one tenant whose quotas expired read them once", async () => {
  const { pool, count } = counting('FROM tenants');
  const quotas = new TenantQuotas(pool, undefined, 60_000);
  await together(32, () => quotas.of('default'));
  assert.equal(count(), 1);
  quotas.forget('default');
  await together(32, () => quotas.of('default'));
  assert.equal(count(), 2);
});

test('32 requests with one key read it once, and a revoked key is refused by the next request', async () => {
  const { pool, count } = counting('FROM api_keys');
  const keys = new KeyStore(pool, { cacheTtlMs: 60_000 });
  const { id, key } = await keys.create({ tenant: 'default', role: 'client', name: 'c' });
  const identities = await together(32, () => keys.authenticate(key));
  assert.equal(count(), 1);
  assert.ok(identities.every((i) => i?.keyId === id));
  assert.equal(await keys.revoke('default', id), true);
  assert.equal(await keys.authenticate(key), undefined);
  assert.equal(count(), 2);
});
