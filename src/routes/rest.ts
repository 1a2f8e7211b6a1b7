/**
 * The A2A HTTP+JSON (REST) binding: one endpoint per agent (`/agents/:id/rest/…`) and the routing front door's
 * (`/rest/…`), served by the SDK's `restHandler` (an Express router) over BindingHandler (src/a2a/
 * binding-handler.ts), which answers through the same RPC core as JSON-RPC.
 *
 * Mounted inside Fastify rather than beside it, so every REST call passes the same hooks as the other routes
 * first: authentication (401), the method's roles (403, the same JSON bodies), rate limits, the body limit (413),
 * request ids and tracing. Fastify reads the body (its limit applies) and parses the JSON; the route then hands
 * the raw request, with the parsed body and the call's particulars, to a small Express app after
 * `reply.hijack()`. Express's JSON parser sees a finished request and keeps the body it was given.
 *
 * Streams are the SDK's SSE, with two additions: each event carries `id:` (its position in the task's event log,
 * the SDK writes none), so a client resumes with `Last-Event-ID` as on JSON-RPC; and idle streams get comment
 * heartbeats. A reader too slow to keep up, and every open stream on shutdown, get a last `event: error` naming
 * the position to resume from.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import express from 'express';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { RequestMalformedError, toRestErrorBody } from '@a2a-js/sdk/errors';
import { restHandler } from '@a2a-js/sdk/server/express';
import { BindingCall, BindingHandler } from '../a2a/binding-handler';
import type { A2AEndpoints } from '../a2a/endpoints';
import { access, callerOf, rpcMethodRoles } from '../auth/caller';
import type { Health } from '../health';
import { answer, describeOnly } from './openapi';
import { baseUrlOf, firstValue } from './base-url';
import type { SseOptions } from './sse';
import { parseJson } from '../http/json-guard';

export interface RestRouteDeps {
  endpoints: A2AEndpoints;
  health: Health;
  publicUrl?: string;
  sse: SseOptions;
}

/** Where the REST binding lives: under an agent's gateway base, and the front door's. */
export const REST_PATHS = { agent: '/agents/:id/rest', frontDoor: '/rest' } as const;

type Carrier = IncomingMessage & { switchboard?: BindingCall; body?: unknown };

export async function restRoutes(app: FastifyInstance, deps: RestRouteDeps): Promise<void> {
  describeOnly(app);
  // Fastify reads every body (bodyLimit, 413) as bytes; JSON bodies are parsed in the route below.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
  app.setErrorHandler((err: { code?: string; message: string }, req, reply) => {
    if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return restError(reply, 413, 'INVALID_ARGUMENT', `Request body is larger than ${app.initialConfig.bodyLimit} bytes`);
    const e = deps.health.unavailable(err);
    if (e) return restError(reply.header('retry-after', String(e.retryAfterS)), 503, 'UNAVAILABLE', e.message);
    req.log.error({ err }, 'REST request failed');
    return restError(reply, 500, 'INTERNAL', 'Internal error');
  });

  const closing = new AbortController();
  app.addHook('preClose', async () => closing.abort());

  const handler = new BindingHandler(deps.endpoints, 'HTTP+JSON');
  const rest = express();
  rest.disable('x-powered-by');
  rest.set('query parser', 'simple');
  rest.use(
    restHandler({
      requestHandler: handler,
      userBuilder: async (req) => {
        const call = (req as unknown as Carrier).switchboard;
        if (!call) throw new Error('a REST call reached the SDK without its caller');
        return call;
      },
    }),
  );

  const serve = (req: FastifyRequest<{ Params: { id?: string; '*': string } }>, reply: FastifyReply) => dispatch(req, reply, req.params.id);
  const schema = (summary: string) => ({
    tags: ['a2a'],
    summary,
    description:
      "A2A 1.0's HTTP+JSON binding (the paths and bodies are A2A's: POST message:send, message:stream, GET tasks/{id}, " +
      'POST tasks/{id}:cancel, tasks/{id}:subscribe, tasks/{id}/pushNotificationConfigs, …), answered by the same core as ' +
      'JSON-RPC; errors are an HTTP status with a google.rpc.Status body; streams are SSE with ids to resume from.',
    response: { 200: answer('The A2A answer, or an SSE stream'), 400: answer('google.rpc.Status'), 404: answer('google.rpc.Status') },
  });
  for (const method of ['GET', 'POST', 'DELETE'] as const) {
    app.route({ method, url: `${REST_PATHS.agent}/*`, config: access.rpc, schema: schema("The agent's A2A HTTP+JSON endpoint: its tasks only"), handler: serve });
    app.route({ method, url: `${REST_PATHS.frontDoor}/*`, config: access.rpc, schema: schema('The routing front door over HTTP+JSON'), handler: serve });
  }

  async function dispatch(req: FastifyRequest<{ Params: { '*': string } }>, reply: FastifyReply, agentId: string | undefined): Promise<unknown> {
    const caller = callerOf(req);
    const query = req.raw.url?.includes('?') ? req.raw.url.slice(req.raw.url.indexOf('?')) : '';
    const path = `/${req.params['*']}`;
    const method = restMethod(req.method, path);
    if (!method) return restError(reply, 404, 'NOT_FOUND', `No A2A HTTP+JSON method at ${req.method} ${path}`);
    const roles = rpcMethodRoles(method);
    if (!roles.includes(caller.role)) {
      return reply.code(403).send({ error: `${method} needs the role ${roles.join(' or ')}; this key's role is ${caller.role}`, requiredRoles: roles });
    }
    const raw = req.raw as Carrier;
    const body = req.body as Buffer | undefined;
    if (body?.length && isJson(req.headers['content-type'])) {
      try {
        raw.body = parseJson(body); // UTF-8 and depth checked first (json-guard): the SDK's fromJSON recurses
      } catch (err) {
        return restError(reply, 400, 'INVALID_ARGUMENT', `Invalid JSON payload: ${(err as Error).message}`);
      }
    }

    const res = reply.raw;
    const gone = new AbortController();
    res.on('close', () => gone.abort());
    const sse = deps.sse;
    const events = sseIds(res, sse.heartbeatMs);
    raw.switchboard = new BindingCall({
      caller,
      agentId,
      headers: req.headers,
      lastEventId: firstValue(req.headers['last-event-id']),
      base: baseUrlOf(req, deps.publicUrl),
      signal: gone.signal,
      closing: closing.signal,
      onEvent: events.next,
      onRetryAfter: (seconds) => res.setHeader('retry-after', seconds),
      sink: {
        backlogged: () => res.writableLength > sse.maxBufferBytes,
        once: (e, l) => res.once(e, l),
        removeListener: (e, l) => res.removeListener(e, l),
      },
      drainTimeoutMs: sse.drainTimeoutMs,
    });
    // The SDK's router sees the path below the endpoint's base.
    raw.url = `${path}${query}`;
    reply.hijack();
    await new Promise<void>((resolve) => {
      res.once('close', resolve);
      res.once('finish', resolve);
      rest(raw as unknown as express.Request, res as express.Response, (err?: unknown) => {
        // Nothing in the router answered (a path restMethod accepts always matches one); never leave it open.
        if (!res.headersSent) {
          res.statusCode = err ? 500 : 404;
          res.setHeader('content-type', 'application/json');
          res.end(JSON.stringify(toRestErrorBody(err ?? new RequestMalformedError(`No A2A HTTP+JSON method at ${req.method} ${path}`), res.statusCode)));
        } else if (!res.writableEnded) res.end();
        resolve();
      });
    });
    events.stop();
    return reply;
  }
}

/**
 * The A2A method a REST request calls (the SDK's route table, 1.0 paths, with or without a `/{tenant}` prefix):
 * its roles are checked here, before the SDK, with the same answer as on every route. Undefined: no such method.
 */
export function restMethod(httpMethod: string, path: string): string | undefined {
  const p = path.replace(/^\/[^/]+(?=\/(message:|tasks\b|extendedAgentCard$))/, ''); // a /{tenant} prefix
  if (/^\/tasks\/[^/]+:subscribe$/.test(p)) return httpMethod === 'DELETE' ? undefined : 'SubscribeToTask';
  const post = httpMethod === 'POST';
  const get = httpMethod === 'GET';
  if (p === '/message:send' && post) return 'SendMessage';
  if (p === '/message:stream' && post) return 'SendStreamingMessage';
  if (/^\/tasks\/[^/]+:cancel$/.test(p) && post) return 'CancelTask';
  if (/^\/tasks\/[^/]+\/pushNotificationConfigs$/.test(p)) return post ? 'CreateTaskPushNotificationConfig' : get ? 'ListTaskPushNotificationConfigs' : undefined;
  if (/^\/tasks\/[^/]+\/pushNotificationConfigs\/[^/]+$/.test(p)) return get ? 'GetTaskPushNotificationConfig' : httpMethod === 'DELETE' ? 'DeleteTaskPushNotificationConfig' : undefined;
  if (/^\/tasks\/[^/:]+$/.test(p) && get) return 'GetTask';
  if (p === '/tasks' && get) return 'ListTasks';
  if (p === '/extendedAgentCard' && get) return 'GetExtendedAgentCard';
  return undefined;
}

/**
 * SSE ids and heartbeats on the SDK's event stream: `next(id)` is called just before the SDK writes an event
 * (the handler yields it, and the SDK writes it at once), and the next `data:` frame written gets `id: <id>`.
 */
function sseIds(res: ServerResponse, heartbeatMs: number): { next: (id: number | undefined) => void; stop: () => void } {
  let pending: number | undefined;
  let lastWrite = Date.now();
  const write = res.write.bind(res) as (chunk: unknown, ...rest: unknown[]) => boolean;
  res.write = ((chunk: unknown, ...rest: unknown[]) => {
    lastWrite = Date.now();
    if (pending !== undefined && typeof chunk === 'string' && chunk.startsWith('data: ')) {
      const id = pending;
      pending = undefined;
      return write(`id: ${id}\n${chunk}`, ...rest);
    }
    return write(chunk, ...rest);
  }) as ServerResponse['write'];
  const heartbeat = setInterval(() => {
    const streaming = String(res.getHeader('content-type') ?? '').startsWith('text/event-stream');
    if (streaming && res.headersSent && !res.writableEnded && Date.now() - lastWrite >= heartbeatMs) write(': keep-alive\n\n');
  }, Math.max(50, Math.floor(heartbeatMs / 2)));
  return {
    next: (id) => {
      pending = id;
    },
    stop: () => clearInterval(heartbeat),
  };
}

function restError(reply: FastifyReply, status: number, statusName: string, message: string): FastifyReply {
  return reply
    .code(status)
    .header('content-type', 'application/json')
    .send({ error: { code: status, status: statusName, message, details: [] } });
}

function isJson(contentType: string | undefined): boolean {
  const media = (contentType ?? '').split(';', 1)[0].trim().toLowerCase();
  return media === 'application/json' || media === 'application/a2a+json';
}

