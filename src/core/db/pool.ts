/**
 * The one way Switchboard opens a PostgreSQL pool. A restart of PostgreSQL must not end the process: an idle
 * client's connection error is an 'error' event on the pool, which would be an uncaught exception without a
 * listener. The pool drops that client and opens a new one on the next query. Connecting gives up after a few
 * seconds, so a request that needs the database while it is down fails fast instead of waiting forever.
 */
import { createHash } from 'node:crypto';
import { Pool, type PoolConfig, type QueryConfig } from 'pg';
import type { Logger } from 'pino';

export const CONNECT_TIMEOUT_MS = 3_000;

export function createPool(config: PoolConfig, log?: Pick<Logger, 'warn'>): Pool {
  const pool = new Pool({ connectionTimeoutMillis: CONNECT_TIMEOUT_MS, idleTimeoutMillis: 30_000, ...config });
  pool.on('error', (err) => log?.warn({ err: err.message }, 'an idle PostgreSQL connection failed; the pool replaces it'));
  return pool;
}

/** Statement names by text: the hot statements' texts are built from a few templates, so this stays small. */
const names = new Map<string, string>();

/**
 * A statement of the task path as a named prepared statement: each connection parses and plans it once, then only
 * binds and executes it (the CTE statements that record and finish a task cost PostgreSQL more to plan than to
 * run). Its name is its text's hash, so the same text is one statement on every connection, and two texts never
 * share a name.
 */
export function prepared(text: string, values: unknown[]): QueryConfig {
  let name = names.get(text);
  if (!name) {
    name = `sb_${createHash('sha256').update(text).digest('hex').slice(0, 24)}`;
    names.set(text, name);
  }
  return { name, text, values };
}
