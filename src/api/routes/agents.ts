/** The registry's HTTP API and the agent cards Switchboard publishes for each registered agent. */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { RegisterAgentBody } from '../../core/agents/registration';
import { AgentCredentialSpec } from '../../core/agents/agent-credentials';
import { type GrpcAdvert, gatewayCard, gatewayEndpoints } from '../../core/agents/gateway-card';
import { agentCardDialect, sendCard } from './card-reply';
import { AGENT_STATUSES } from '../../core/agents/refresh';
import { type AgentRegistry, QueryError, type RankedAgent, RegistrationError } from '../../core/agents/registry';
import { access, callerOf } from '../../core/auth/caller';
import type { KeyStore } from '../../core/auth/keys';
import { baseUrlOf } from './base-url';
import { AgentConflict } from '../../core/agents/agent-names';
import { answer, describeOnly, errorBody, noContent, requestSchema } from './openapi';

export interface AgentRoutesDeps {
  registry: AgentRegistry;
  publicUrl?: string;
  /** The gRPC port the cards advertise (unset: gRPC is off). */
  grpc?: GrpcAdvert;
  /** The key cache: a deleted agent's keys (revoked with it, migration 023) are forgotten here at once. */
  keys?: Pick<KeyStore, 'forgetAgent'>;
}

/** A query parameter that may be repeated (`?tag=a&tag=b`) or, for status, comma-separated. */
const repeated = <T extends z.ZodType>(item: T, max: number) =>
  z.preprocess((v) => (Array.isArray(v) ? v : [v]), z.array(item).min(1).max(max, `at most ${max} values`));

/** 409 of POST /agents: the URL or name is the tenant's already; the agent that has it is named. */
const conflictBody = {
  description: 'The URL is registered already, or the name (compared ignoring case, white space, invisible and look-alike characters) is taken: the agent that has it is named',
  type: 'object',
  properties: { error: { type: 'string' }, conflict: { type: 'string', enum: ['url', 'name'] }, agentId: { type: 'string' }, agentName: { type: 'string' } },
  required: ['error', 'conflict', 'agentId', 'agentName'],
};

/**
 * `GET /agents` parameters. Strict: a misspelt parameter (`tags=`, `page=`) is an error rather than a filter
 * silently not applied.
 */
const ListAgentsQuery = z.strictObject({
  q: z.string().trim().min(1, 'q must not be empty').max(500, 'q is limited to 500 characters').optional(),
  tag: repeated(z.string().min(1).max(100), 20).optional(),
  skill: repeated(z.string().min(1).max(200), 20).optional(),
  status: z
    .preprocess((v) => (Array.isArray(v) ? v : [v]).flatMap((s) => (typeof s === 'string' ? s.split(',') : [s])), z.array(z.enum(AGENT_STATUSES)).min(1))
    .optional(),
  pageSize: z.coerce.number().int().min(1).max(100).optional(),
  pageToken: z.string().min(1).max(2000).optional(),
});

const notFound = (id: string) => ({ error: `No agent ${id}` });
const unknown = errorBody('No such agent in the caller\'s tenant');

export async function agentRoutes(app: FastifyInstance, { registry, publicUrl, grpc, keys }: AgentRoutesDeps): Promise<void> {
  describeOnly(app);
  const tenantOf = (req: FastifyRequest) => callerOf(req).tenant;
  /** Agent views with the kind of outbound credential each has (`{type}` or null), never the secret. */
  const views = async (agents: RankedAgent[], tenant: string, base: string) => {
    const kinds = await registry.credentialKinds(tenant, agents.map((a) => a.id));
    return agents.map((a) => ({ ...view(a, base), credentials: kinds.has(a.id) ? { type: kinds.get(a.id) } : null }));
  };
  const view = (a: RankedAgent, base: string) => ({
    id: a.id,
    name: a.name,
    url: a.sourceUrl,
    cardUrl: a.cardUrl,
    endpoint: a.endpoint,
    priceMinor: a.priceMinor,
    retry: a.retry,
    createdAt: a.createdAt,
    ...(a.rank !== undefined ? { rank: a.rank } : {}),
    ...(a.ranks ? { ranks: a.ranks } : {}),
    status: a.status,
    statusReason: a.statusReason,
    statusChangedAt: a.statusChangedAt,
    liveness: { consecutiveFailures: a.consecutiveFailures, lastProbe: a.lastProbe },
    signature: a.signature,
    cardCache: a.cardCache,
    gateway: { card: `${base}/agents/${a.id}/.well-known/agent-card.json`, ...gatewayEndpoints(base, a.id, grpc) },
    card: a.card,
  });
  const agentView = answer('The agent: registration, status, liveness, signature check, gateway URLs, card; credentials only as {type}');

  const registerSchema = {
    tags: ['agents'],
    summary: 'Register an agent: fetch, validate and store its card',
    body: requestSchema(RegisterAgentBody),
    response: {
      201: agentView,
      400: errorBody('Invalid registration, naming the field'),
      409: conflictBody,
      422: errorBody('The card could not be fetched or is not a valid agent card'),
    },
  };
  app.post('/agents', { config: { ...access.operator, audit: 'agent.register' }, schema: registerSchema }, async (req, reply) => {
    const body = RegisterAgentBody.safeParse(req.body);
    if (!body.success) return reply.code(400).send({ error: `Invalid registration: ${z.prettifyError(body.error)}` });
    try {
      const agent = await registry.register(tenantOf(req), body.data);
      req.auditTarget = agent.id;
      return reply.code(201).send((await views([agent], agent.tenant, baseUrlOf(req, publicUrl)))[0]);
    } catch (err) {
      if (err instanceof AgentConflict) return reply.code(409).send({ error: err.message, conflict: err.field, agentId: err.holder.id, agentName: err.holder.name });
      if (err instanceof RegistrationError) return reply.code(err.status).send({ error: err.message });
      throw err;
    }
  });

  // List, or search with `q`; filters `tag`, `skill`, `status`; keyset pages (`pageSize`, `pageToken`).
  const listSchema = {
    tags: ['agents'],
    summary: 'List the tenant\'s agents, or rank them with q: hybrid (full text and meaning) when a model service is configured, else full text; filters and keyset pages',
    querystring: requestSchema(ListAgentsQuery),
    response: { 200: answer('{agents, nextPageToken}; with q also ranking (hybrid or full-text) and semantic (on, off: …, unavailable: …)'), 400: errorBody('Invalid query, naming the parameter') },
  };
  app.get('/agents', { config: access.member, schema: listSchema }, async (req, reply) => {
    const query = ListAgentsQuery.safeParse(req.query);
    if (!query.success) return reply.code(400).send({ error: `Invalid query: ${z.prettifyError(query.error)}` });
    const { q, tag, skill, status, pageSize, pageToken } = query.data;
    try {
      const page = await registry.search(tenantOf(req), { q, tags: tag, skills: skill, statuses: status, pageSize, pageToken });
      const base = baseUrlOf(req, publicUrl);
      const ranking = page.ranking ? { ranking: page.ranking, semantic: page.semantic } : {};
      return { agents: await views(page.agents, tenantOf(req), base), nextPageToken: page.nextPageToken, ...ranking };
    } catch (err) {
      if (err instanceof QueryError) return reply.code(400).send({ error: `Invalid query: ${err.message}` });
      throw err;
    }
  });

  const getSchema = { tags: ['agents'], summary: 'One agent', response: { 200: agentView, 404: unknown } };
  app.get<{ Params: { id: string } }>('/agents/:id', { config: access.member, schema: getSchema }, async (req, reply) => {
    const agent = await registry.get(tenantOf(req), req.params.id);
    if (!agent) return reply.code(404).send(notFound(req.params.id));
    return (await views([agent], agent.tenant, baseUrlOf(req, publicUrl)))[0];
  });

  // Replace (rotate) or drop the credential Switchboard presents to the agent.
  const putCredentialsSchema = {
    tags: ['agents'],
    summary: 'Set (rotate) the credentials Switchboard presents to the agent; sealed, never shown again',
    body: requestSchema(AgentCredentialSpec),
    response: { 204: noContent('Stored'), 400: errorBody('Invalid credentials, naming the field'), 404: unknown, 422: errorBody('The credentials cannot be used') },
  };
  app.put<{ Params: { id: string } }>('/agents/:id/credentials', { config: { ...access.operator, audit: 'agent.credentials.set' }, schema: putCredentialsSchema }, async (req, reply) => {
    const spec = AgentCredentialSpec.safeParse(req.body);
    if (!spec.success) return reply.code(400).send({ error: `Invalid credentials: ${z.prettifyError(spec.error)}` });
    try {
      if (!(await registry.setCredentials(tenantOf(req), req.params.id, spec.data))) return reply.code(404).send(notFound(req.params.id));
    } catch (err) {
      if (err instanceof RegistrationError) return reply.code(err.status).send({ error: err.message });
      throw err;
    }
    return reply.code(204).send();
  });
  const deleteCredentialsSchema = { tags: ['agents'], summary: 'Drop the agent\'s credentials', response: { 204: noContent('Dropped'), 404: unknown } };
  app.delete<{ Params: { id: string } }>('/agents/:id/credentials', { config: { ...access.operator, audit: 'agent.credentials.delete' }, schema: deleteCredentialsSchema }, async (req, reply) => {
    if (!(await registry.setCredentials(tenantOf(req), req.params.id, undefined))) return reply.code(404).send(notFound(req.params.id));
    return reply.code(204).send();
  });

  // The recent liveness probes (latency and outcome), newest first.
  const probesSchema = { tags: ['agents'], summary: 'The recent liveness probes, newest first', response: { 200: answer('{probes}'), 404: unknown } };
  app.get<{ Params: { id: string } }>('/agents/:id/probes', { config: access.member, schema: probesSchema }, async (req, reply) => {
    if (!(await registry.get(tenantOf(req), req.params.id))) return reply.code(404).send(notFound(req.params.id));
    return { probes: await registry.probes(tenantOf(req), req.params.id) };
  });

  // Refresh the card and probe the agent now, answering with the result (the schedule keeps its own pace).
  const refreshSchema = { tags: ['agents'], summary: 'Refresh the card and probe the agent now', response: { 200: agentView, 404: unknown } };
  app.post<{ Params: { id: string } }>('/agents/:id/refresh', { config: { ...access.operator, audit: 'agent.refresh' }, schema: refreshSchema }, async (req, reply) => {
    const agent = await registry.refreshNow(tenantOf(req), req.params.id);
    if (!agent) return reply.code(404).send(notFound(req.params.id));
    return (await views([agent], agent.tenant, baseUrlOf(req, publicUrl)))[0];
  });

  const deleteSchema = { tags: ['agents'], summary: 'Remove the agent and its refresh schedule', response: { 204: noContent('Removed'), 404: unknown } };
  app.delete<{ Params: { id: string } }>('/agents/:id', { config: { ...access.operator, audit: 'agent.delete' }, schema: deleteSchema }, async (req, reply) => {
    if (!(await registry.remove(tenantOf(req), req.params.id))) return reply.code(404).send(notFound(req.params.id));
    keys?.forgetAgent(tenantOf(req), req.params.id);
    return reply.code(204).send();
  });

  gatewayCardRoutes(app, registry, publicUrl, grpc);
}

/**
 * 0.3+ clients look for agent-card.json, 0.1/0.2 clients for agent.json; both answer in the dialect asked for
 * (A2A-Version; none: the agent's own, card-reply.ts agentCardDialect). A card is a discovery document, readable
 * without a key (agent ids are unique across tenants); calling needs one. Clients given only the RPC URL derive the
 * card from it (`<rpc url>/.well-known/…`): it is served there too.
 */
function gatewayCardRoutes(app: FastifyInstance, registry: AgentRegistry, publicUrl: string | undefined, grpc: GrpcAdvert | undefined): void {
  for (const file of ['agent-card.json', 'agent.json']) {
    const cardSchema = {
      tags: ['agents', 'a2a'],
      summary: `The agent's gateway card (${file}): the agent's card pointing A2A clients at Switchboard`,
      response: { 200: answer('An A2A agent card'), 404: unknown },
    };
    for (const path of [`/agents/:id/.well-known/${file}`, `/agents/:id/a2a/.well-known/${file}`]) {
      app.get<{ Params: { id: string } }>(path, { config: access.public, schema: cardSchema }, async (req, reply) => {
        const agent = await registry.getPublic(req.params.id);
        if (!agent) return reply.code(404).send(notFound(req.params.id));
        const base = baseUrlOf(req, publicUrl);
        const card = gatewayCard(agent.card, gatewayEndpoints(base, agent.id, grpc), agentCardDialect(req, agent));
        return sendCard(req, reply, card, { cacheControl: 'public, max-age=60', lastModified: new Date(agent.cardChangedAt) });
      });
    }
  }
}
