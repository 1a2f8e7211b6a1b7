/**
 * The gateway's public signing keys (RFC 7517 JWK Set), for webhook receivers that verify the
 * X-Switchboard-Jwt header of push deliveries (src/core/push/signing.ts).
 */
import type { FastifyInstance } from 'fastify';
import type { Pool } from 'pg';
import { jwks } from '../../core/push/signing';
import { access } from '../../core/auth/caller';
import { answer, describeOnly } from './openapi';

export interface JwksRouteDeps {
  pool: Pool;
}

export async function jwksRoutes(app: FastifyInstance, { pool }: JwksRouteDeps): Promise<void> {
  describeOnly(app);
  const schema = {
    tags: ['push'],
    summary: 'The gateway\'s public keys (JWK Set) that verify the X-Switchboard-Jwt of push deliveries',
    response: { 200: answer('{keys: [{kty, crv, x, y, kid, alg, use}]}') },
  };
  app.get('/.well-known/jwks.json', { config: access.public, schema }, async (_req, reply) => {
    // Receivers may cache it: a retired key stays in the set, and a receiver meeting an unknown kid should refetch.
    return reply.header('cache-control', 'public, max-age=300').type('application/json').send(await jwks(pool));
  });
}
