/**
 * Hub enrollment tokens (issue 30): an admin, or an operator of the tenant, mints a token with which agents connect
 * to GET /hub and register themselves (agent.register), named as they ask; lists and revokes them. The token's
 * secret is in the answer to its creation and nowhere else, ever (only its SHA-256 is stored). Audited like keys.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { access, callerOf } from '../../core/auth/caller';
import type { EnrollmentTokens } from '../../core/auth/enrollment';
import type { KeyStore } from '../../core/auth/keys';
import { DURATION_HINT, formatDuration, parseDuration } from '../../core/retention/duration';
import { answer, describeOnly, errorBody, noContent, requestSchema } from './openapi';

export interface EnrollmentTokenRoutesDeps {
  keys: Pick<KeyStore, 'tenantExists'>;
  tokens: EnrollmentTokens;
}

const DEFAULT_EXPIRES_IN = '1d';
const MAX_EXPIRES_IN_MS = 365 * 86_400_000;
const MAX_USES = 10_000;

const CreateTokenBody = z.strictObject({
  name: z.string().min(1).max(200).optional(),
  /** How long it may be used: `15m`, `12h`, `30d` (default 1d, at most 365d). */
  expiresIn: z
    .string()
    .transform((s, ctx) => {
      const ms = parseDuration(s);
      if (ms === undefined || ms < 1000 || ms > MAX_EXPIRES_IN_MS) ctx.addIssue({ code: 'custom', message: `${DURATION_HINT}, from 1s to ${formatDuration(MAX_EXPIRES_IN_MS)}` });
      return ms ?? 0;
    })
    .optional(),
  /** How many agents it may register (default 1). */
  uses: z.number().int().min(1).max(MAX_USES).optional(),
});

export async function enrollmentTokenRoutes(app: FastifyInstance, { keys, tokens }: EnrollmentTokenRoutesDeps): Promise<void> {
  describeOnly(app);
  const tags = ['tenants'];
  const refusals = { 403: errorBody('An operator of another tenant'), 404: errorBody('No such tenant') };
  /** An operator acts in its own tenant only; an admin in any. @returns whether the reply was sent (refused). */
  const refused = async (req: FastifyRequest, reply: FastifyReply): Promise<boolean> => {
    const caller = callerOf(req);
    const tenant = (req.params as { id: string }).id;
    if (caller.role !== 'admin' && caller.tenant !== tenant) {
      await reply.code(403).send({ error: `An operator manages the enrollment tokens of its own tenant (${caller.tenant}) only` });
      return true;
    }
    if (!(await keys.tenantExists(tenant))) {
      await reply.code(404).send({ error: `No tenant ${tenant}` });
      return true;
    }
    return false;
  };

  const createSchema = {
    tags,
    summary: 'Mint a hub enrollment token: agents connect to GET /hub with it and register themselves; its secret is in this answer and nowhere else',
    body: requestSchema(CreateTokenBody),
    response: { 201: answer('The token\'s view and `token`, the secret'), 400: errorBody('Invalid token request, naming the field'), ...refusals },
  };
  app.post<{ Params: { id: string } }>('/tenants/:id/enrollment-tokens', { config: { ...access.operator, audit: 'enrollment-token.create' }, schema: createSchema }, async (req, reply) => {
    const body = CreateTokenBody.safeParse(req.body ?? {});
    if (!body.success) return reply.code(400).send({ error: `Invalid enrollment token: ${z.prettifyError(body.error)}` });
    if (await refused(req, reply)) return reply;
    const { name, expiresIn, uses } = body.data;
    const created = await tokens.create({
      tenant: req.params.id,
      name: name ?? 'hub enrollment',
      expiresInMs: expiresIn ?? parseDuration(DEFAULT_EXPIRES_IN)!,
      uses: uses ?? 1,
    });
    req.auditTarget = `${req.params.id}/${created.view.id}`;
    // The only time the secret leaves Switchboard.
    return reply.code(201).header('cache-control', 'no-store').send({ ...created.view, token: created.token });
  });

  const listSchema = { tags, summary: 'The tenant\'s hub enrollment tokens, without secrets', response: { 200: answer('{tokens}'), ...refusals } };
  app.get<{ Params: { id: string } }>('/tenants/:id/enrollment-tokens', { config: access.operator, schema: listSchema }, async (req, reply) => {
    if (await refused(req, reply)) return reply;
    return { tokens: await tokens.list(req.params.id) };
  });

  const revokeSchema = {
    tags,
    summary: 'Revoke a hub enrollment token (agents it registered keep their registrations and agent keys)',
    response: { 204: noContent('Revoked'), 403: refusals[403], 404: errorBody('No such tenant, or no such token in it') },
  };
  app.delete<{ Params: { id: string; tokenId: string } }>(
    '/tenants/:id/enrollment-tokens/:tokenId',
    { config: { ...access.operator, audit: 'enrollment-token.revoke' }, schema: revokeSchema },
    async (req, reply) => {
      if (await refused(req, reply)) return reply;
      if (!(await tokens.revoke(req.params.id, req.params.tokenId))) return reply.code(404).send({ error: `No enrollment token ${req.params.tokenId} in tenant ${req.params.id}` });
      return reply.code(204).send();
    },
  );
}
