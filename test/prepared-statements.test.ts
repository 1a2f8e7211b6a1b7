// The task path's statements are named prepared statements (src/core/db/pool.ts prepared()): PostgreSQL parses and
// plans each once per connection, then binds and runs it. Every connection is a session of its own (the embedded
// PostgreSQL too: test/dev-infra.test.ts), so two connections may hold the same name.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createPool, prepared } from '../src/core/db/pool';
import { appendEvents, readEvents } from '../src/core/events/event-log';
import { createTestDb, DATABASE_URL, type TestDb } from './helpers/harness';

let db: TestDb;
before(async () => {
  db = await createTestDb();
});
after(async () => {
  await db.drop();
});

const statusEvent = (taskId: string, n: number) => ({
  key: `k${n}`,
  event: { statusUpdate: { taskId, contextId: 'c1', status: { state: 'TASK_STATE_WORKING' as const, timestamp: new Date(n).toISOString() } } },
});

test('an append is prepared once per connection and then only executed', async () => {
  const pool = createPool({ connectionString: DATABASE_URL, max: 1, options: `-c search_path=${db.schema}` });
  try {
    for (let n = 1; n <= 3; n++) await appendEvents(pool, 'default', 't-prepared', [statusEvent('t-prepared', n)]);
    const { rows } = await pool.query<{ name: string; runs: number }>(
      `SELECT name, (generic_plans + custom_plans)::int AS runs FROM pg_prepared_statements WHERE statement LIKE '%switchboard_append_events%'`,
    );
    assert.equal(rows.length, 1, 'one statement for the three appends');
    assert.match(rows[0]!.name, /^sb_[0-9a-f]{24}$/);
    assert.equal(rows[0]!.runs, 3, 'parsed once, run three times');
    const logged = await readEvents(pool, 'default', 't-prepared', 0);
    assert.deepEqual(logged.map((e) => e.seq), [1, 2, 3]);
  } finally {
    await pool.end();
  }
});

test('the same text is the same name; another text another name', () => {
  const a = prepared('SELECT $1::int', [1]);
  assert.deepEqual(prepared('SELECT $1::int', [2]), { name: a.name, text: 'SELECT $1::int', values: [2] });
  assert.notEqual(prepared('SELECT $1::text', ['x']).name, a.name);
});

test('two connections prepare the same name at once and each runs it', async () => {
  const pool = createPool({ connectionString: DATABASE_URL, max: 2 });
  const clients = await Promise.all([1, 2].map(() => pool.connect()));
  try {
    const text = 'SELECT $1::int * 2 AS n';
    const runs = await Promise.all(clients.map(async (c, i) => [(await c.query(prepared(text, [i]))).rows[0].n, (await c.query(prepared(text, [i + 10]))).rows[0].n]));
    assert.deepEqual(runs, [[0, 20], [2, 22]]);
  } finally {
    for (const c of clients) c.release();
    await pool.end();
  }
});
