/**
 * The status list credentials of the certificates Switchboard issues (NANDA `certificate.*`, src/core/nanda): public,
 * like any W3C Bitstring Status List, so a verifier holding a credential can check it without a key. A list holds
 * no names, only 131,072 bits, so reading it tells nothing about who holds which index.
 */
import type { FastifyInstance } from 'fastify';
import type { Pool } from 'pg';
import { access } from '../../core/auth/caller';
import { statusListCredential } from '../../core/nanda/status-list';
import { baseUrlOf } from './base-url';
import { answer, describeOnly, errorBody } from './openapi';

export async function credentialRoutes(app: FastifyInstance, deps: { pool: Pool; publicUrl?: string }): Promise<void> {
  describeOnly(app);
  const schema = {
    tags: ['credentials'],
    summary: 'A Bitstring Status List credential (W3C VC 2.0): the revocation bits of issued certificates',
    description:
      'JSON (application/vc) by default; with `Accept: application/vc+jwt` the same credential as a compact JWS signed with the ' +
      'gateway\'s key (/.well-known/jwks.json). `credentialSubject.encodedList` is the GZIP-compressed bitstring, base64url, multibase `u`.',
    params: { type: 'object', properties: { listId: { type: 'string' } }, required: ['listId'] },
    response: { 200: answer('A BitstringStatusListCredential'), 404: errorBody('No such status list') },
  };
  app.get<{ Params: { listId: string } }>('/credentials/status/:listId', { config: access.public, schema }, async (req, reply) => {
    const list = await statusListCredential(deps.pool, baseUrlOf(req, deps.publicUrl), req.params.listId);
    if (!list) return reply.code(404).send({ error: `No status list ${req.params.listId}` });
    // Verifiers poll it; a revocation should reach them within a minute.
    reply.header('cache-control', 'public, max-age=60').header('vary', 'accept');
    if (/application\/vc\+jwt/.test(req.headers.accept ?? '')) return reply.type('application/vc+jwt').send(list.jwt);
    return reply.type('application/vc').send(JSON.stringify(list.credential));
  });
}
