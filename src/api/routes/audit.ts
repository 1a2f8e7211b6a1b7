/** GET /audit: the audit trail, newest first. Operators read their tenant's; admins every tenant's, or one with `?tenant=`. */
import type { FastifyInstance } from 'fastify';
import type { Pool } from 'pg';
import { z } from 'zod';
import { access, callerOf } from '../../core/auth/caller';
import { PageTokenError, listAudit } from '../../core/auth/audit';
import { answer, describeOnly, errorBody, requestSchema } from './openapi';

const AuditQuery = z.strictObject({
  tenant: z.string().min(1).max(63).optional(),
  pageSize: z.coerce.number().int().min(1).max(500).default(100),
  pageToken: z.string().min(1).max(200).optional(),
});

export async function auditRoutes(app: FastifyInstance, { pool }: { pool: Pool }): Promise<void> {
  describeOnly(app);
  const schema = {
    tags: ['audit'],
    summary: 'The audit trail, newest first: operators their tenant\'s; admins every tenant\'s, or ?tenant=',
    querystring: requestSchema(AuditQuery),
    response: {
      200: answer('{entries, nextPageToken}'),
      400: errorBody('Invalid query or page token'),
      403: errorBody('An operator asked for another tenant\'s trail'),
    },
  };
  app.get('/audit', { config: access.operator, schema }, async (req, reply) => {
    const q = AuditQuery.safeParse(req.query);
    if (!q.success) return reply.code(400).send({ error: `Invalid query: ${z.prettifyError(q.error)}` });
    const caller = callerOf(req);
    if (caller.role !== 'admin' && q.data.tenant !== undefined && q.data.tenant !== caller.tenant) {
      return reply.code(403).send({ error: 'An operator reads only its own tenant\'s audit trail', requiredRoles: ['admin'] });
    }
    // An admin without ?tenant= reads every tenant's entries; an operator always its own.
    const tenant = caller.role === 'admin' ? q.data.tenant : caller.tenant;
    try {
      return await listAudit(pool, { tenant, pageSize: q.data.pageSize, pageToken: q.data.pageToken });
    } catch (err) {
      if (err instanceof PageTokenError) return reply.code(400).send({ error: err.message });
      throw err;
    }
  });
}
