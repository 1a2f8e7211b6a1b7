/**
 * The gateway's public signing keys (RFC 7517 JWK Set), for webhook receivers that verify the
 * X-Switchboard-Jwt header of push deliveries (src/push/signing.ts).
 */
import type { FastifyInstance } from 'fastify';
import type { Pool } from 'pg';
import { jwks } from '../push/signing';
import { access } from '../auth/caller';

export interface JwksRouteDeps {
  pool: Pool;
}

export async function jwksRoutes(app: FastifyInstance, { pool }: JwksRouteDeps): Promise<void> {
  app.get('/.well-known/jwks.json', { config: access.public }, async (_req, reply) => {
    // Receivers may cache it: a retired key stays in the set, and a receiver meeting an unknown kid should refetch.
    return reply.header('cache-control', 'public, max-age=300').type('application/json').send(await jwks(pool));
  });
}
