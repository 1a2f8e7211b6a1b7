/** GET /agents/:id/reputation: how an agent has done on the tasks it was given (src/trust/reputation.ts). */
import type { FastifyInstance } from 'fastify';
import type { Pool } from 'pg';
import { reputationOf } from '../trust/reputation';
import { access, callerOf } from '../auth/caller';

export interface ReputationRoutesDeps {
  pool: Pool;
}

export async function reputationRoutes(app: FastifyInstance, { pool }: ReputationRoutesDeps): Promise<void> {
  app.get<{ Params: { id: string } }>('/agents/:id/reputation', { config: access.member }, async (req, reply) => {
    const reputation = await reputationOf(pool, callerOf(req).tenant, req.params.id);
    if (!reputation) return reply.code(404).send({ error: `No agent ${req.params.id}` });
    return reputation;
  });
}
