/**
 * A Temporal "codec server" for Temporal UI and `temporal` CLI users (SWITCHBOARD_PAYLOAD_KEY): `POST /codec/decode`
 * (and `/codec/encode`) apply Switchboard's payload codec, so an operator reads tasks in the UI while the Temporal
 * database holds only ciphertext. Operators and admins only: decoding shows message text. An operator decodes only
 * its own tenant's payloads (each payload names its owner, bound into its encryption); an admin decodes any, and
 * encoding seals for the caller's tenant. The browser calls it from Temporal UI's origin, so those origins get CORS
 * answers (the preflight needs no credentials).
 */
import type { Payload } from '@temporalio/common';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { access, callerOf } from '../../core/auth/caller';
import { CodecBody, CodecRequestError, type EncryptionCodec, PayloadKeyError, PayloadOwnerError, applyCodecToJson } from '../../core/temporal/encryption-codec';
import { answer, describeOnly, errorBody, noContent, requestSchema } from './openapi';

export interface CodecRouteDeps {
  /** Unset (no SWITCHBOARD_PAYLOAD_KEY): payloads are plain and pass through unchanged. */
  codec?: Pick<EncryptionCodec, 'seal' | 'decodeFor'>;
  /** Origins allowed to call from a browser (Temporal UI's), e.g. http://127.0.0.1:8233. */
  corsOrigins: readonly string[];
}

const PLAIN: Pick<EncryptionCodec, 'seal' | 'decodeFor'> = { seal: async (p) => p, decodeFor: async (p) => p };

export async function codecRoutes(app: FastifyInstance, { codec = PLAIN, corsOrigins }: CodecRouteDeps): Promise<void> {
  describeOnly(app);
  const cors = (req: FastifyRequest, reply: FastifyReply) => {
    const origin = req.headers.origin;
    if (origin && corsOrigins.includes(origin)) {
      reply
        .header('access-control-allow-origin', origin)
        .header('access-control-allow-credentials', 'true')
        .header('access-control-allow-headers', 'authorization, content-type, x-api-key, x-namespace')
        .header('access-control-allow-methods', 'POST, OPTIONS')
        .header('vary', 'origin');
    }
  };
  for (const op of ['decode', 'encode'] as const) {
    const preflight = { tags: ['codec'], summary: `CORS preflight for /codec/${op} from Temporal UI's origins`, response: { 204: noContent('CORS headers for allowed origins') } };
    app.options(`/codec/${op}`, { config: access.public, schema: preflight }, async (req, reply) => {
      cors(req, reply);
      return reply.code(204).send();
    });
    const schema = {
      tags: ['codec'],
      summary: `Temporal codec server: ${op} payloads with Switchboard's payload codec`,
      body: requestSchema(CodecBody),
      response: {
        200: answer('{payloads}'),
        400: errorBody('Not a codec request'),
        403: errorBody("A payload of another tenant (or Switchboard's own): only an admin decodes it; nothing was decoded"),
        422: errorBody('A payload does not decrypt'),
      },
    };
    app.post(`/codec/${op}`, { config: access.operator, schema }, async (req, reply) => {
      cors(req, reply);
      const caller = callerOf(req);
      const apply = (p: Payload[]) =>
        op === 'decode' ? codec.decodeFor(p, caller.role === 'admin' ? { admin: true } : { tenant: caller.tenant }) : codec.seal(p, { tenant: caller.tenant });
      try {
        return await applyCodecToJson(apply, req.body);
      } catch (err) {
        if (err instanceof CodecRequestError) return reply.code(400).send({ error: err.message });
        if (err instanceof PayloadOwnerError) return reply.code(403).send({ error: err.message });
        // A payload that does not decrypt (another key, tampered): the operator's problem to see, not a 500.
        if (err instanceof PayloadKeyError) return reply.code(422).send({ error: err.message });
        throw err;
      }
    });
  }
}
