/** GET /agents/:id/reputation: how an agent has done on the tasks it was given (src/core/trust/reputation.ts). */
import type { FastifyInstance } from 'fastify';
import type { Pool } from 'pg';
import { reputationOf } from '../../core/trust/reputation';
import { access, callerOf } from '../../core/auth/caller';
import { answer, describeOnly, errorBody } from './openapi';

export interface ReputationRoutesDeps {
  pool: Pool;
}

export async function reputationRoutes(app: FastifyInstance, { pool }: ReputationRoutesDeps): Promise<void> {
  describeOnly(app);
  const schema = {
    tags: ['agents'],
    summary: 'How the agent has done: task counts by outcome, success rate, latency percentiles',
    response: { 200: answer('The reputation'), 404: errorBody('No such agent') },
  };
  app.get<{ Params: { id: string } }>('/agents/:id/reputation', { config: access.member, schema }, async (req, reply) => {
    const reputation = await reputationOf(pool, callerOf(req).tenant, req.params.id);
    if (!reputation) return reply.code(404).send({ error: `No agent ${req.params.id}` });
    return reputation;
  });
}
