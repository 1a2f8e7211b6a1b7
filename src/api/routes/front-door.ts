/**
 * The routing front door's HTTP side: Switchboard's own agent card (`/.well-known/agent-card.json`,
 * `/.well-known/agent.json`) and `GET /tasks/:id/route` (who asked, who executes and why). Its JSON-RPC endpoint
 * (`POST /a2a`, also `/api/v1/a2a`) is served by json-rpc.ts with the resolver of src/api/a2a/front-door.ts.
 */
import type { FastifyInstance } from 'fastify';
import type { Pool } from 'pg';
import { switchboardCard } from '../a2a/front-door';
import { type GrpcAdvert, gatewayEndpoints } from '../../core/agents/gateway-card';
import { requestedCardDialect, sendCard } from './card-reply';
import type { AgentRegistry } from '../../core/agents/registry';
import { routeOf } from '../../core/db/task-routes';
import { findTask } from '../../core/db/task-store';
import { access, callerOf } from '../../core/auth/caller';
import { baseUrlOf } from './base-url';
import { answer, describeOnly, errorBody } from './openapi';

export const FRONT_DOOR_PATHS = ['/a2a', '/api/v1/a2a'];

export async function frontDoorRoutes(app: FastifyInstance, deps: { registry: AgentRegistry; pool: Pool; publicUrl?: string; grpc?: GrpcAdvert }): Promise<void> {
  describeOnly(app);
  // Public, like every card; the skills it lists are those of the caller's tenant, so only a caller with a key
  // sees any (and a shared cache must not serve one tenant's card to another: `Vary`, private).
  for (const file of ['agent-card.json', 'agent.json']) {
    const schema = { tags: ['a2a'], summary: `Switchboard's own agent card (${file}): the routing front door, with the skills of the caller's tenant`, response: { 200: answer('An A2A agent card') } };
    app.get(`/.well-known/${file}`, { config: access.public, schema }, async (req, reply) => {
      const endpoints = gatewayEndpoints(baseUrlOf(req, deps.publicUrl), undefined, deps.grpc);
      const { card, lastModified } = await switchboardCard(deps.registry, req.caller?.tenant, endpoints, requestedCardDialect(req));
      return sendCard(req, reply, card, { cacheControl: req.caller ? 'private, max-age=60' : 'public, max-age=60', vary: ['authorization', 'x-api-key'], lastModified });
    });
  }

  // Who asked, who executes, which skill, and why: the front door's decision, or the agent asked directly.
  const routeSchema = {
    tags: ['tasks'],
    summary: 'Who asked, who executes, which skill and why: the front door\'s decision, or requestedVia agent',
    response: { 200: answer('{taskId, requestedVia, requester, agentId, skillId, reason, …}'), 404: errorBody('No such task') },
  };
  app.get<{ Params: { id: string } }>('/tasks/:id/route', { config: access.member, schema: routeSchema }, async (req, reply) => {
    const { tenant } = callerOf(req);
    const route = await routeOf(deps.pool, tenant, req.params.id);
    if (route) return { ...route, requestedVia: 'router' };
    const task = await findTask(deps.pool, tenant, req.params.id);
    if (!task) return reply.code(404).send({ error: `No task ${req.params.id} is known (tasks appear once their workflow has recorded them)` });
    return { taskId: req.params.id, requestedVia: 'agent', requester: tenant, agentId: task.agentId, skillId: null, reason: null };
  });
}
