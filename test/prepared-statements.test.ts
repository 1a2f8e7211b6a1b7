// The task path's statements are named prepared statements (src/db/pool.ts prepared()): PostgreSQL parses and
// plans each once per connection, then binds and runs it; a pool whose connections share one session (embedded
// PGlite) sends them unnamed.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createPool, prepared } from '../src/db/pool';
import { appendEvents, readEvents } from '../src/events/event-log';
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

test('the same text is the same name; another text another name; a shared-session pool gets no name', () => {
  const pool = createPool({ connectionString: DATABASE_URL, max: 1 });
  const shared = createPool({ connectionString: DATABASE_URL, max: 1 }, undefined, { namedStatements: false });
  try {
    const a = prepared(pool, 'SELECT $1::int', [1]);
    assert.equal(prepared(pool, 'SELECT $1::int', [2]).name, a.name);
    assert.notEqual(prepared(pool, 'SELECT $1::text', ['x']).name, a.name);
    assert.deepEqual(prepared(shared, 'SELECT $1::int', [1]), { text: 'SELECT $1::int', values: [1] });
  } finally {
    void pool.end();
    void shared.end();
  }
});
