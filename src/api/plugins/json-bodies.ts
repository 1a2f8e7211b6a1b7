/**
 * JSON bodies (every route that keeps Fastify's parser: NEXUS, Genesis, registrations, admin) pass the peer-input
 * guard first (src/core/http/json-guard.ts): not UTF-8, or nested too deep for what reads them (zod, jsonb), is a 400
 * naming the limit. Then Fastify's own parser, with the app's proto and constructor poisoning settings; the text
 * stays on the request as `jsonText`.
 *
 * Then, on every route but the A2A bindings' (whose handlers answer it in their own form, -32602 naming the field),
 * a string holding U+0000 anywhere in the body, the query or the path is a 400 naming the field: PostgreSQL stores
 * no NUL in text or jsonb, and its refusal was a 500 (a tenant's, key's or agent's name, an agent's URL, an
 * idempotency key, a Genesis envelope's fields; issue 46).
 */
import fp from 'fastify-plugin';
import { checkJson, pathOfNul } from '../../core/http/json-guard';

declare module 'fastify' {
  interface FastifyRequest {
    /** The JSON body's text as received (set by this parser): for what must be passed on byte for byte. */
    jsonText?: string;
  }
}

export const jsonBodies = fp(
  async (app) => {
    const { onProtoPoisoning = 'error', onConstructorPoisoning = 'error' } = app.initialConfig;
    const parse = app.getDefaultJsonParser(onProtoPoisoning, onConstructorPoisoning);
    app.removeContentTypeParser('application/json');
    app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) => {
      let text: string;
      try {
        text = checkJson(body as Buffer);
      } catch (err) {
        return done(Object.assign(new Error(`Invalid JSON body: ${(err as Error).message}`), { statusCode: 400, code: 'SB_JSON_LIMIT' }), undefined);
      }
      req.jsonText = text;
      // Fastify's default JSON parser answers through `done` (its type also allows a promise; this one never returns one).
      void parse(req, text, done);
    });
    app.addHook('preValidation', async (req, reply) => {
      if (req.routeOptions.config?.binding) return;
      for (const [part, value] of [['body', req.body], ['query', req.query], ['path', req.params]] as const) {
        const field = pathOfNul(value);
        if (field !== undefined) return reply.code(400).send({ error: `Invalid ${part}: ${field || `the ${part}`} contains a NUL character (U+0000)`, field: field || part });
      }
    });
  },
  { name: 'switchboard-json-bodies', fastify: '5.x' },
);
