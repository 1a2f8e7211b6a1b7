/**
 * Genesis Nexus (seeds/002): envelopes in (POST /genesis/messages), what became of one (GET
 * /genesis/messages/:id), agents' Genesis secrets, and topic subscriptions for published EVENTs.
 * The checks and the applying are src/api/genesis/service.ts's.
 */
import type { FastifyInstance, FastifySchema } from 'fastify';
import { z } from 'zod';
import { access, callerOf, type Caller } from '../../core/auth/caller';
import { EnvelopeError, EnvelopeHeader } from '../../core/genesis/envelope';
import { type GenesisService, SenderGone } from '../genesis/service';
import type { GenesisStore } from '../../core/genesis/store';
import { checkWebhookUrl } from '../../core/push/webhook-url';
import { answer, describeOnly, errorBody, noContent, requestSchema } from './openapi';

export interface GenesisRoutesDeps {
  service: GenesisService;
  store: GenesisStore;
  /** SWITCHBOARD_ALLOW_PRIVATE_URLS: subscriber URLs on private addresses (local receivers, tests). */
  allowPrivateUrls: boolean;
}

/** Sending envelopes changes things, like A2A writes: everyone but operators (who read). */
const senders = { auth: { roles: ['admin', 'client', 'agent'] } } as const;
/** Subscriptions belong to agents: managed by their operators, or by the agent itself with its own key. */
const subscribers = { auth: { roles: ['admin', 'operator', 'agent'] } } as const;

const SubscribeBody = z.strictObject({
  agentId: z.string().min(1).max(200),
  eventType: z.string().min(1).max(200),
  url: z.url({ protocol: /^https?$/, error: 'must be an absolute http(s) URL' }).max(2048),
});
const SubscriptionsQuery = z.strictObject({ agentId: z.string().min(1).max(200).optional(), eventType: z.string().min(1).max(200).optional() });

/** An agent key acts only for its own agent. */
const notOwnAgent = (caller: Caller, agentId: string) => caller.role === 'agent' && caller.agentId !== agentId;

export async function genesisRoutes(app: FastifyInstance, { service, store, allowPrivateUrls }: GenesisRoutesDeps): Promise<void> {
  describeOnly(app);
  const tags = ['genesis'];

  const postSchema: FastifySchema = {
    tags,
    summary: 'Send a Genesis Nexus envelope (COMMAND, QUERY, EVENT, RESPONSE): signed, optionally AES-256-GCM encrypted; answered with a RESPONSE envelope',
    body: requestSchema(EnvelopeHeader.loose()),
    response: {
      200: answer('The RESPONSE envelope (encrypted when the request was)'),
      202: answer('An ack (requiresAck COMMAND) or a published EVENT: a RESPONSE envelope; GET /genesis/messages/:id follows it'),
      400: errorBody('Invalid envelope, timestamp outside the skew, ttl passed, or decryption failed; nothing applied'),
      401: errorBody('Missing or wrong signature'),
      403: errorBody('An agent key sending for another agent'),
      404: errorBody('from or to is no agent of the caller\'s tenant'),
      409: errorBody('The id was already used by an envelope with other content (a replay repeats the first exactly)'),
    },
  };
  app.post('/genesis/messages', { config: senders, schema: postSchema }, async (req, reply) => {
    // A synchronous COMMAND waits for its task: the sender closing its connection ends the wait.
    const gone = new AbortController();
    reply.raw.on('close', () => gone.abort());
    try {
      // The answer's bytes as first sent: a replay is answered byte for byte.
      const { status, text } = await service.handle(callerOf(req), req.body, req.headers, req.jsonText, gone.signal);
      return reply.code(status).type('application/json; charset=utf-8').send(text);
    } catch (err) {
      if (err instanceof EnvelopeError) return reply.code(err.status).send({ error: err.message });
      if (err instanceof SenderGone) return reply; // nobody to answer: sending the envelope again waits anew
      throw err;
    }
  });

  const getSchema = {
    tags,
    summary: 'What became of an envelope: the answer given, a COMMAND\'s result now, an EVENT\'s deliveries',
    response: { 200: answer('{id, type, from, to, answer, result?, response?, deliveries?}'), 404: errorBody('No such envelope in the caller\'s tenant') },
  };
  app.get<{ Params: { id: string } }>('/genesis/messages/:id', { config: access.member, schema: getSchema }, async (req, reply) => {
    const view = await service.view(callerOf(req), req.params.id);
    if (!view) return reply.code(404).send({ error: `No envelope ${req.params.id}` });
    return view;
  });

  const secretSchema = {
    tags,
    summary: 'Issue (or rotate) the agent\'s Genesis secret: it signs its envelopes and derives their AES-256-GCM pair keys. Shown once',
    response: { 201: answer('{agentId, secret}'), 404: errorBody('No such agent in the caller\'s tenant') },
  };
  app.post<{ Params: { id: string } }>('/agents/:id/genesis-secret', { config: { ...access.operator, audit: 'agent.genesis-secret' }, schema: secretSchema }, async (req, reply) => {
    const secret = await store.issueSecret(callerOf(req).tenant, req.params.id);
    if (!secret) return reply.code(404).send({ error: `No agent ${req.params.id}` });
    return reply.code(201).send({ agentId: req.params.id, secret });
  });

  const subscribeSchema = {
    tags,
    summary: 'Subscribe an agent to a topic (an EVENT\'s eventType): published events are POSTed to url',
    body: requestSchema(SubscribeBody),
    response: { 201: answer('The subscription'), 400: errorBody('Invalid subscription, naming the field'), 403: errorBody('An agent key subscribing another agent'), 404: errorBody('No such agent') },
  };
  app.post('/genesis/subscriptions', { config: { ...subscribers, audit: 'genesis.subscribe' }, schema: subscribeSchema }, async (req, reply) => {
    const body = SubscribeBody.safeParse(req.body);
    if (!body.success) return reply.code(400).send({ error: `Invalid subscription: ${z.prettifyError(body.error)}` });
    const caller = callerOf(req);
    if (notOwnAgent(caller, body.data.agentId)) return reply.code(403).send({ error: `An agent key subscribes only its own agent (${caller.agentId})` });
    try {
      await checkWebhookUrl(body.data.url, allowPrivateUrls);
    } catch (err) {
      return reply.code(400).send({ error: `Invalid subscription: ${(err as Error).message}` });
    }
    const sub = await store.subscribe(caller.tenant, body.data);
    if (!sub) return reply.code(404).send({ error: `No agent ${body.data.agentId}` });
    req.auditTarget = sub.id;
    return reply.code(201).send(sub);
  });

  const listSchema = {
    tags,
    summary: 'The tenant\'s topic subscriptions, optionally one agent\'s or one topic\'s',
    querystring: requestSchema(SubscriptionsQuery),
    response: { 200: answer('{subscriptions}'), 400: errorBody('Invalid query') },
  };
  app.get('/genesis/subscriptions', { config: access.member, schema: listSchema }, async (req, reply) => {
    const q = SubscriptionsQuery.safeParse(req.query);
    if (!q.success) return reply.code(400).send({ error: `Invalid query: ${z.prettifyError(q.error)}` });
    return { subscriptions: await store.subscriptions(callerOf(req).tenant, q.data) };
  });

  const deleteSchema = { tags, summary: 'Unsubscribe', response: { 204: noContent('Removed'), 403: errorBody('Another agent\'s subscription'), 404: errorBody('No such subscription') } };
  app.delete<{ Params: { id: string } }>('/genesis/subscriptions/:id', { config: { ...subscribers, audit: 'genesis.unsubscribe' }, schema: deleteSchema }, async (req, reply) => {
    const caller = callerOf(req);
    const sub = await store.subscription(caller.tenant, req.params.id);
    if (!sub) return reply.code(404).send({ error: `No subscription ${req.params.id}` });
    if (notOwnAgent(caller, sub.agentId)) return reply.code(403).send({ error: `An agent key unsubscribes only its own agent (${caller.agentId})` });
    await store.unsubscribe(caller.tenant, req.params.id);
    return reply.code(204).send();
  });
}
