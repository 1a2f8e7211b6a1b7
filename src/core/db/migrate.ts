import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Pool } from 'pg';

const MIGRATIONS_DIR = join(__dirname, 'migrations');
// Any constant works; it only has to be the same for every Switchboard process sharing the database.
const MIGRATION_LOCK = 0x5b_0a_4d;

/** The numbered SQL files this database has not applied yet (all of them on a database without the table). */
export async function pendingMigrations(pool: Pool): Promise<string[]> {
  const files = (await readdir(MIGRATIONS_DIR)).filter((f) => /^\d+_.+\.sql$/.test(f)).sort();
  const { rows } = await pool.query<{ version: number }>(
    "SELECT version FROM schema_migrations WHERE to_regclass('schema_migrations') IS NOT NULL",
  ).catch((err: { code?: string }) => {
    if (err.code === '42P01') return { rows: [] as { version: number }[] }; // no table: nothing applied
    throw err;
  });
  const done = new Set(rows.map((r) => r.version));
  return files.filter((f) => !done.has(Number.parseInt(f, 10)));
}

/**
 * Applies the numbered SQL files in src/core/db/migrations that this database has not seen, each in its own
 * transaction. An advisory lock serialises concurrent starts of several Switchboard processes.
 * @returns the versions applied now (empty when the schema was current).
 */
export async function migrate(pool: Pool): Promise<number[]> {
  const files = (await readdir(MIGRATIONS_DIR)).filter((f) => /^\d+_.+\.sql$/.test(f)).sort();
  const client = await pool.connect();
  const applied: number[] = [];
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    await client.query(
      'CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())',
    );
    const { rows } = await client.query<{ version: number }>('SELECT version FROM schema_migrations');
    const done = new Set(rows.map((r) => r.version));
    for (const file of files) {
      const version = Number.parseInt(file, 10);
      if (done.has(version)) continue;
      const sql = await readFile(join(MIGRATIONS_DIR, file), 'utf8');
      // Not inTransaction (src/core/db/tx.ts): each migration runs on this one connection, which holds the lock.
      await client.query('BEGIN');
      try {
        await client.query(sql);
        await client.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [version, file]);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK');
        throw new Error(`migration ${file} failed: ${(err as Error).message}`, { cause: err });
      }
      applied.push(version);
    }
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
    client.release();
  }
  return applied;
}
