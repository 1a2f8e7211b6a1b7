/**
 * Tenants and their API keys (admin only): make a tenant, set its quotas, hand its teams keys, revoke them.
 * A key's secret is in the answer to its creation and nowhere else, ever.
 */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { ROLES, access } from '../../core/auth/caller';
import { KeyConflictError, type KeyStore, UnknownTenantError } from '../../core/auth/keys';
import { QuotaPatchSchema, type TenantQuotas } from '../../core/auth/quotas';
import { RETENTION_HINT, parseRetention } from '../../core/retention/duration';
import { answer, describeOnly, errorBody, noContent, requestSchema } from './openapi';

export interface TenantRoutesDeps {
  keys: KeyStore;
  quotas: TenantQuotas;
}

const TenantId = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/, 'must be 1-63 letters, digits, . _ - (starting with a letter or digit)');

const CreateTenantBody = z.strictObject({
  id: TenantId,
  name: z.string().min(1).max(200),
  quotas: QuotaPatchSchema.optional(),
});

const CreateKeyBody = z
  .strictObject({
    role: z.enum(ROLES),
    /** Required for role agent: the registered agent (of this tenant) the key speaks for. */
    agentId: z.string().min(1).max(200).optional(),
    name: z.string().min(1).max(200),
    expiresAt: z.iso.datetime({ offset: true }).optional(),
  })
  .refine((b) => (b.role === 'agent') === (b.agentId !== undefined), { message: 'agentId is required for role agent, and only for it', path: ['agentId'] })
  .refine((b) => b.expiresAt === undefined || Date.parse(b.expiresAt) > Date.now(), { message: 'expiresAt must be in the future', path: ['expiresAt'] });

/** A tenant's task retention: a duration from 1s to 3650d, as ms; null puts it back to SWITCHBOARD_TASK_RETENTION. */
const Retention = z
  .string()
  .transform((s, ctx) => {
    const ms = parseRetention(s);
    if (ms === undefined) ctx.addIssue({ code: 'custom', message: RETENTION_HINT });
    return ms ?? 0;
  })
  .nullable();

const PatchTenantBody = z
  .strictObject({ quotas: QuotaPatchSchema.optional(), retention: Retention.optional() })
  .refine((b) => b.quotas !== undefined || b.retention !== undefined, { message: 'give quotas, retention or both' });

export async function tenantRoutes(app: FastifyInstance, { keys, quotas }: TenantRoutesDeps): Promise<void> {
  describeOnly(app);
  const tags = ['tenants'];
  const noTenant = errorBody('No such tenant');
  const tenantView = answer('The tenant, its own quota settings and the effective quotas');
  const createSchema = {
    tags,
    summary: 'Make a tenant',
    body: requestSchema(CreateTenantBody),
    response: { 201: answer('The tenant'), 400: errorBody('Invalid tenant, naming the field'), 409: errorBody('The tenant exists') },
  };
  app.post('/tenants', { config: { ...access.admin, audit: 'tenant.create' }, schema: createSchema }, async (req, reply) => {
    const body = CreateTenantBody.safeParse(req.body);
    if (!body.success) return reply.code(400).send({ error: `Invalid tenant: ${z.prettifyError(body.error)}` });
    req.auditTarget = body.data.id;
    try {
      const clean = Object.fromEntries(Object.entries(body.data.quotas ?? {}).filter(([, v]) => v !== null && v !== undefined)) as Record<string, number>;
      return reply.code(201).send(await keys.createTenant(body.data.id, body.data.name, clean));
    } catch (err) {
      if (err instanceof KeyConflictError) return reply.code(409).send({ error: err.message });
      throw err;
    }
  });

  app.get('/tenants', { config: access.admin, schema: { tags, summary: 'Every tenant', response: { 200: answer('{tenants}') } } }, async () => ({ tenants: await keys.listTenants() }));

  app.get<{ Params: { id: string } }>('/tenants/:id', { config: access.admin, schema: { tags, summary: 'One tenant', response: { 200: tenantView, 404: noTenant } } }, async (req, reply) => {
    const tenant = await keys.getTenant(req.params.id);
    if (!tenant) return reply.code(404).send({ error: `No tenant ${req.params.id}` });
    return { ...tenant, effectiveQuotas: await quotas.of(tenant.id) };
  });

  // Quotas: any subset; null puts one back to the process default. Applies within a couple of seconds everywhere.
  // Retention (`7d`, `12h`; null: SWITCHBOARD_TASK_RETENTION) applies from the retention sweep's next run.
  const patchSchema = {
    tags,
    summary: 'Change quotas (any subset) and the task retention; null puts one back to the process default',
    body: requestSchema(PatchTenantBody),
    response: { 200: tenantView, 400: errorBody('Invalid change, naming the field'), 404: noTenant },
  };
  app.patch<{ Params: { id: string } }>('/tenants/:id', { config: { ...access.admin, audit: 'tenant.quotas' }, schema: patchSchema }, async (req, reply) => {
    const body = PatchTenantBody.safeParse(req.body);
    if (!body.success) return reply.code(400).send({ error: `Invalid change: ${z.prettifyError(body.error)}` });
    const { quotas: quotaPatch, retention } = body.data;
    let tenant = quotaPatch === undefined ? await keys.getTenant(req.params.id) : await keys.updateTenantQuotas(req.params.id, quotaPatch as Record<string, number | null>);
    if (tenant && retention !== undefined) tenant = await keys.updateTenantRetention(req.params.id, retention);
    if (!tenant) return reply.code(404).send({ error: `No tenant ${req.params.id}` });
    quotas.forget(tenant.id);
    return { ...tenant, effectiveQuotas: await quotas.of(tenant.id) };
  });

  const createKeySchema = {
    tags,
    summary: 'Make an API key; its secret is in this answer and nowhere else, ever',
    body: requestSchema(CreateKeyBody),
    response: {
      201: answer('The key\'s view and `key`, the secret'),
      400: errorBody('Invalid key, naming the field (agentId with role agent only; expiresAt in the future)'),
      404: noTenant,
      422: errorBody('The agent is not the tenant\'s'),
    },
  };
  app.post<{ Params: { id: string } }>('/tenants/:id/keys', { config: { ...access.admin, audit: 'key.create' }, schema: createKeySchema }, async (req, reply) => {
    const body = CreateKeyBody.safeParse(req.body);
    if (!body.success) return reply.code(400).send({ error: `Invalid key: ${z.prettifyError(body.error)}` });
    const { role, agentId, name, expiresAt } = body.data;
    try {
      const created = await keys.create({ tenant: req.params.id, role, agentId, name, expiresAt: expiresAt ? new Date(expiresAt) : undefined });
      req.auditTarget = `${req.params.id}/${created.id}`;
      // The only time the secret leaves Switchboard.
      return reply.code(201).header('cache-control', 'no-store').send({ ...created.view, key: created.key });
    } catch (err) {
      if (err instanceof UnknownTenantError) return reply.code(404).send({ error: err.message });
      if (err instanceof KeyConflictError) return reply.code(422).send({ error: err.message });
      throw err;
    }
  });

  const listKeysSchema = { tags, summary: 'The tenant\'s keys, without secrets', response: { 200: answer('{keys}'), 404: noTenant } };
  app.get<{ Params: { id: string } }>('/tenants/:id/keys', { config: access.admin, schema: listKeysSchema }, async (req, reply) => {
    if (!(await keys.tenantExists(req.params.id))) return reply.code(404).send({ error: `No tenant ${req.params.id}` });
    return { keys: await keys.list(req.params.id) };
  });

  const revokeSchema = { tags, summary: 'Revoke a key (other processes within 2 s)', response: { 204: noContent('Revoked'), 404: errorBody('No such key in the tenant') } };
  app.delete<{ Params: { id: string; keyId: string } }>('/tenants/:id/keys/:keyId', { config: { ...access.admin, audit: 'key.revoke' }, schema: revokeSchema }, async (req, reply) => {
    if (!(await keys.revoke(req.params.id, req.params.keyId))) return reply.code(404).send({ error: `No key ${req.params.keyId} in tenant ${req.params.id}` });
    return reply.code(204).send();
  });
}
