/** The registry's HTTP API and the agent cards Switchboard publishes for each registered agent. */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { RegisterAgentBody } from '../a2a/schemas';
import { gatewayCard } from '../agents/cards';
import { type Agent, type AgentRegistry, RegistrationError } from '../agents/registry';
import { baseUrlOf } from './json-rpc';

export interface AgentRoutesDeps {
  registry: AgentRegistry;
  tenant: string;
  publicUrl?: string;
}

export async function agentRoutes(app: FastifyInstance, { registry, tenant, publicUrl }: AgentRoutesDeps): Promise<void> {
  const view = (a: Agent, base: string) => ({
    id: a.id,
    name: a.name,
    url: a.sourceUrl,
    cardUrl: a.cardUrl,
    endpoint: a.endpoint,
    priceMinor: a.priceMinor,
    retry: a.retry,
    createdAt: a.createdAt,
    gateway: { card: `${base}/agents/${a.id}/.well-known/agent-card.json`, jsonRpc: `${base}/agents/${a.id}/a2a` },
    card: a.card,
  });

  app.post('/agents', async (req, reply) => {
    const body = RegisterAgentBody.safeParse(req.body);
    if (!body.success) return reply.code(400).send({ error: `Invalid registration: ${z.prettifyError(body.error)}` });
    try {
      const agent = await registry.register(tenant, body.data);
      return reply.code(201).send(view(agent, baseUrlOf(req, publicUrl)));
    } catch (err) {
      if (err instanceof RegistrationError) return reply.code(422).send({ error: err.message });
      throw err;
    }
  });

  app.get('/agents', async (req) => ({ agents: (await registry.list(tenant)).map((a) => view(a, baseUrlOf(req, publicUrl))) }));

  app.get<{ Params: { id: string } }>('/agents/:id', async (req, reply) => {
    const agent = await registry.get(tenant, req.params.id);
    if (!agent) return reply.code(404).send({ error: `No agent ${req.params.id}` });
    return view(agent, baseUrlOf(req, publicUrl));
  });

  app.delete<{ Params: { id: string } }>('/agents/:id', async (req, reply) => {
    if (!(await registry.remove(tenant, req.params.id))) return reply.code(404).send({ error: `No agent ${req.params.id}` });
    return reply.code(204).send();
  });

  // 0.3+ clients look for agent-card.json, 0.1/0.2 clients for agent.json: both get the same card.
  for (const file of ['agent-card.json', 'agent.json']) {
    app.get<{ Params: { id: string } }>(`/agents/:id/.well-known/${file}`, async (req, reply) => {
      const agent = await registry.get(tenant, req.params.id);
      if (!agent) return reply.code(404).send({ error: `No agent ${req.params.id}` });
      const base = baseUrlOf(req, publicUrl);
      return reply.header('cache-control', 'max-age=60').send(gatewayCard(agent.card, `${base}/agents/${agent.id}/a2a`));
    });
  }
}
