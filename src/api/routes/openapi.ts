/**
 * The HTTP API described as OpenAPI 3.1, served at `GET /openapi.json` (public: it holds no data), built by
 * @fastify/swagger from every route's Fastify `schema`.
 *
 * Those schemas are documentation only. The handlers keep validating with zod, so bad input keeps its clear
 * `{"error": "Invalid …: <field>: …"}` 400s, and the request schemas in the document are generated from those
 * same zod schemas (`requestSchema`), so the two cannot drift apart. Each route plugin therefore calls
 * `describeOnly` so that Fastify does not validate with route schemas (ajv would answer a Fastify-shaped 400 first,
 * and a JSON-RPC endpoint must answer any bad body with a JSON-RPC envelope: house style 6) nor serialize with them
 * (fast-json-stringify drops every field a response schema does not list).
 *
 * Who may call each route comes from its access policy (config.auth, the one every route must declare): public
 * routes need no security, the others take a key or JWT as `Authorization: Bearer` or `X-API-Key`, and the
 * description names the roles.
 */
import fastifySwagger from '@fastify/swagger';
import type { FastifyInstance, FastifySchema } from 'fastify';
import { z } from 'zod';
import { access, type Access } from '../../core/auth/caller';
import { version } from '../../../package.json';

/** One tag per area; every operation carries one (test/openapi.test.ts checks). */
export const TAGS = [
  { name: 'agents', description: 'The agent registry, its refresh and liveness probes, reputation, and the gateway cards of agents' },
  { name: 'tasks', description: 'Recent tasks for operators, and where a task went: the front door\'s routing decision' },
  { name: 'a2a', description: 'A2A JSON-RPC endpoints (1.0 and 0.3) and Switchboard\'s own card; the methods are A2A\'s, see docs/api.md' },
  { name: 'tenants', description: 'Tenants, their quotas and API keys (admin)' },
  { name: 'accounts', description: 'Requester and agent accounts, deposits' },
  { name: 'ledger', description: 'The ledger\'s invariants' },
  { name: 'push', description: 'The keys that sign push-notification deliveries, and the webhook agents push to about the tasks Switchboard follows' },
  { name: 'audit', description: 'The audit trail of mutations' },
  { name: 'genesis', description: 'Genesis Nexus envelopes: signed, optionally encrypted COMMAND/QUERY/EVENT/RESPONSE messages, secrets, topic subscriptions' },
  { name: 'health', description: 'Liveness, readiness and metrics' },
  { name: 'codec', description: 'Temporal codec server for encrypted payloads' },
  { name: 'console', description: 'The operator console\'s static files (the page reads the API with the key it is given)' },
  { name: 'mcp', description: 'The MCP server (Streamable HTTP): each agent of the tenant is a tool, each call a durable task; see docs/mcp.md' },
  { name: 'credentials', description: 'Bitstring Status Lists of the certificates Switchboard issues (NANDA certificate.* actions), public' },
] as const;
export type Tag = (typeof TAGS)[number]['name'];

/** The JSON Schema of what a zod schema accepts (its input side), for a route's `body`, `querystring` or `params`. */
export function requestSchema(schema: z.ZodType): Record<string, unknown> {
  const { $schema: _dialect, ...json } = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' });
  return json;
}

/** The body every REST route answers a refusal with. */
export const errorBody = (description: string) => ({
  description,
  type: 'object',
  properties: { error: { type: 'string' } },
  required: ['error'],
});

/** A success answer, described in words (the JSON shapes are in docs/). */
export const answer = (description: string) => ({ description, type: 'object', additionalProperties: true });
export const noContent = (description: string) => ({ description, type: 'null' });

const SECURED: Record<string, string[]>[] = [{ bearer: [] }, { apiKey: [] }];

/** Path parameters named in the url that a schema does not describe: strings, required. */
function pathParams(url: string, schema: FastifySchema): FastifySchema['params'] {
  if (schema.params) return schema.params;
  const names = [...url.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => m[1]);
  if (!names.length) return undefined;
  return { type: 'object', properties: Object.fromEntries(names.map((n) => [n, { type: 'string' }])), required: names };
}

/**
 * Makes the route schemas of this plugin (an encapsulated context) documentation only: Fastify neither validates
 * requests with them (zod in the handlers does) nor serializes replies with them (plain JSON.stringify, so no
 * field is dropped). Every route plugin calls it first, so its routes behave the same wherever it is registered.
 */
export function describeOnly(app: FastifyInstance): void {
  app.setValidatorCompiler(() => () => true);
  app.setSerializerCompiler(() => (data) => JSON.stringify(data instanceof Error ? fastifyErrorBody(data) : data));
}

/**
 * An error Fastify answers itself (a body that is not JSON, a 429) goes through the route's serializer too, as an
 * object whose prototype is the error: give it the body Fastify's own error serializer would.
 */
function fastifyErrorBody(err: Error & { statusCode?: number; code?: string; error?: string }) {
  return { statusCode: err.statusCode, code: err.code, error: err.error, message: err.message };
}

/**
 * Registers @fastify/swagger (its onRoute hook must see every route, so this comes before them) and
 * `GET /openapi.json`. Call on the root instance, like installAuth.
 */
export async function installOpenApi(app: FastifyInstance): Promise<void> {
  describeOnly(app);

  await app.register(fastifySwagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Switchboard',
        version,
        description:
          'A durable gateway for agent-to-agent (A2A) work. Every call but the public ones needs a key (or a JWT) as ' +
          '`Authorization: Bearer <key>` or `X-API-Key: <key>`; a refusal is `{"error": …}` (403s add `requiredRoles`).',
      },
      tags: TAGS.map((t) => ({ ...t })),
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer', description: 'An API key (`sb_…`) or, when configured, a JWT' },
          apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key', description: 'An API key (`sb_…`)' },
        },
      },
    },
    transform: ({ schema, url, route }) => {
      const auth = route.config?.auth as Access | undefined;
      const given = (schema ?? {}) as FastifySchema & { description?: string; security?: unknown; response?: Record<string, unknown> };
      const open = !auth || 'public' in auth;
      const roles = open ? 'Public: no credentials needed.' : `Roles: ${auth.roles.join(', ')}.`;
      return {
        url,
        schema: {
          ...given,
          params: pathParams(url, given),
          description: given.description ? `${given.description}\n\n${roles}` : roles,
          security: open ? [] : SECURED,
          response: open
            ? given.response
            : {
                401: errorBody('No or bad credentials (`WWW-Authenticate: Bearer realm="switchboard"`)'),
                403: { ...errorBody('The key lacks the role'), properties: { error: { type: 'string' }, requiredRoles: { type: 'array', items: { type: 'string' } } } },
                ...given.response,
              },
        } as FastifySchema,
      };
    },
  });

  app.get(
    '/openapi.json',
    { config: access.public, schema: { tags: ['health'], summary: 'This document: the HTTP API as OpenAPI 3.1', response: { 200: answer('The OpenAPI document') } } },
    async (_req, reply) => reply.header('cache-control', 'max-age=300').send(app.swagger()),
  );
}
