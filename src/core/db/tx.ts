/** Transactions, written once: BEGIN, the work, COMMIT; ROLLBACK on any error; the connection always released. */
import type { PoolClient } from 'pg';

/**
 * Runs `fn` in a transaction on a connection of its own. `begin` may set the isolation level and access mode.
 * @throws whatever `fn` or the database threw, after the rollback.
 */
export async function inTransaction<T>(
  pool: { connect(): Promise<PoolClient> },
  fn: (client: PoolClient) => Promise<T>,
  begin = 'BEGIN',
): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query(begin);
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}
