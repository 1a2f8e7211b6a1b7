// Embedded PostgreSQL for `npm start` without DATABASE_URL: a persistent PGlite database served over the
// Postgres wire protocol, so the app keeps using the same `pg` Pool code path as with a real server.
// Limits: one process only, queries from all connections are serialised onto one PGlite instance, and
// LISTEN/NOTIFY does not cross connections (a NOTIFY reaches only the connection that sent it).
import { mkdir } from 'node:fs/promises';
import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';

export interface EmbeddedPostgres {
  url: string;
  stop(): Promise<void>;
}

export async function startEmbeddedPostgres(opts: {
  dataDir: string;
  host?: string;
  port?: number; // 0 = ephemeral
}): Promise<EmbeddedPostgres> {
  await mkdir(opts.dataDir, { recursive: true });
  const db = await PGlite.create({ dataDir: opts.dataDir });
  // maxConnections defaults to 1, which breaks any pg.Pool with max > 1 ("Connection terminated unexpectedly").
  const server = new PGLiteSocketServer({
    db,
    host: opts.host ?? '127.0.0.1',
    port: opts.port ?? 0,
    maxConnections: 32,
  });
  try {
    await server.start();
  } catch (err) {
    await db.close();
    throw new Error(`embedded postgres: cannot listen on ${opts.host ?? '127.0.0.1'}:${opts.port ?? 0}: ${(err as Error).message}`);
  }
  // getServerConn() reports the real port after listen, which matters for port 0.
  const url = `postgres://postgres@${server.getServerConn()}/postgres?sslmode=disable`;
  let stopped = false;
  return {
    url,
    async stop() {
      if (stopped) return;
      stopped = true;
      await server.stop();
      await db.close(); // flushes to dataDir so the next start sees the data
    },
  };
}
