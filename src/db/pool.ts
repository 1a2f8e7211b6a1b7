/**
 * The one way Switchboard opens a PostgreSQL pool. A restart of PostgreSQL must not end the process: an idle
 * client's connection error is an 'error' event on the pool, which would be an uncaught exception without a
 * listener. The pool drops that client and opens a new one on the next query. Connecting gives up after a few
 * seconds, so a request that needs the database while it is down fails fast instead of waiting forever.
 */
import { Pool, type PoolConfig } from 'pg';
import type { Logger } from 'pino';

export const CONNECT_TIMEOUT_MS = 3_000;

export function createPool(config: PoolConfig, log?: Pick<Logger, 'warn'>): Pool {
  const pool = new Pool({ connectionTimeoutMillis: CONNECT_TIMEOUT_MS, idleTimeoutMillis: 30_000, ...config });
  pool.on('error', (err) => log?.warn({ err: err.message }, 'an idle PostgreSQL connection failed; the pool replaces it'));
  return pool;
}
