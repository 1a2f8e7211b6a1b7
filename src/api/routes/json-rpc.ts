/**
 * Switchboard's JSON-RPC endpoints over HTTP: one per agent (`POST /agents/:id/a2a`) and the routing front door
 * (`POST /a2a`, also `/api/v1/a2a`). It reads the body once (the JSON-RPC envelope), hands the method and params,
 * with the caller and the headers that matter, to the endpoints' pipeline (src/api/a2a/endpoints.ts), then sends
 * what it answers as a JSON-RPC response with the HTTP status chosen here, or as Server-Sent Events (sse.ts).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { A2A_ERRORS } from '../a2a/errors';
import type { A2AEndpoints } from '../a2a/endpoints';
import { type Refused, type RpcCoreDeps, type RpcFailure, type RpcRequest, type RpcStream, type SseFrame, answeredBeforeClose } from '../a2a/rpc-handler';
import { envelope, readEnvelope } from '../a2a/rpc-errors';
import { access, callerOf } from '../../core/auth/caller';
import { baseUrlOf, firstValue } from './base-url';
import { FRONT_DOOR_PATHS } from './front-door';
import { NEXUS_PATH, onNexusPath } from '../a2a/dialects/nexus';
import { type SseOptions, type SseStream, mapFrames, writeSse } from './sse';
import { answer, describeOnly } from './openapi';
import { refuse } from './refusals';
import { requestedVersion } from '../a2a/versions';

export interface JsonRpcRouteDeps extends RpcCoreDeps {
  /** The endpoints every binding shares (src/api/a2a/endpoints.ts). */
  endpoints: A2AEndpoints;
  publicUrl?: string;
  sse: SseOptions;
}

export async function jsonRpcRoutes(app: FastifyInstance, deps: JsonRpcRouteDeps): Promise<void> {
  describeOnly(app);
  // Read every body as bytes, whatever its content type: they are checked (UTF-8, depth) and parsed below, so
  // that every unreadable body is a JSON-RPC error envelope.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
  app.setErrorHandler((err: { code?: string; statusCode?: number; message: string }, req, reply) => {
    if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return refuse(req, reply, { name: 'BodyTooLarge', message: `Request body is larger than ${app.initialConfig.bodyLimit} bytes` });
    const e = deps.health.unavailable(err);
    if (e) return refuse(req, reply, { name: 'Unavailable', message: e.message, retryAfterS: e.retryAfterS });
    req.log.error({ err }, 'JSON-RPC request failed');
    return reply.code(200).send(envelope(null, { code: A2A_ERRORS.Internal.code, message: 'Internal error' }));
  });

  // On shutdown (app.close) every open stream gets a last event naming where to resume, and ends, and a call still
  // waiting (a blocking send) is answered -32054 to send again, so the close does not wait for clients or turns.
  const closing = new AbortController();
  app.addHook('preClose', async () => closing.abort());
  // The per-agent endpoint serves the agent in its path; the routing front door picks an agent for each new
  // task and serves existing tasks of any agent of the tenant.
  const schema = (summary: string) => ({
    tags: ['a2a'],
    summary,
    description:
      'A2A JSON-RPC 2.0 in every dialect Switchboard serves: 1.0 (SendMessage, GetTask, …), 0.3 (message/send, tasks/get, …), ' +
      '0.1/0.2 (tasks/send, tasks/sendSubscribe, …) and NEXUS (message/send with {type, data} parts); each answered in its own. Every malformed request ' +
      'is answered with a JSON-RPC error envelope and HTTP 200; streaming methods answer text/event-stream.',
    body: {
      type: 'object',
      properties: { jsonrpc: { const: '2.0' }, id: { type: ['string', 'number', 'null'] }, method: { type: 'string' }, params: { type: 'object' } },
      required: ['jsonrpc', 'method'],
    },
    // Described, not validated by Fastify: an unsupported version is the A2A error (src/api/routes/refusals.ts).
    headers: { type: 'object', properties: { 'a2a-version': { type: 'string', description: '1.0 or 0.3' }, 'last-event-id': { type: 'string' } } },
    response: {
      200: {
        description: 'A JSON-RPC response (result or error), or an SSE stream for the streaming methods',
        content: { 'application/json': { schema: answer('JSON-RPC response') }, 'text/event-stream': { schema: { type: 'string' } } },
      },
      401: answer('No or bad credentials: a JSON-RPC error envelope (-32055)'),
      403: answer('The key may not call this method: a JSON-RPC error envelope (-32056)'),
      413: answer('Body over the limit: a JSON-RPC error envelope (-32059)'),
      429: answer('A rate limit: a JSON-RPC error envelope (-32057), Retry-After'),
      503: answer('A dependency is down: a JSON-RPC error envelope (-32054), Retry-After'),
    },
  });
  app.post('/agents/:id/a2a', { config: access.jsonRpc, schema: schema('The agent\'s A2A endpoint: its tasks only') }, (req: FastifyRequest<{ Params: { id: string } }>, reply) =>
    send(req, reply, { agentId: req.params.id }),
  );
  for (const path of FRONT_DOOR_PATHS) {
    app.post(path, { config: access.jsonRpc, schema: schema('The routing front door: a new task goes to the agent chosen for it; any task of the tenant; NANDA action requests') }, (req, reply) =>
      send(req, reply, { nexus: path === NEXUS_PATH }),
    );
  }

  async function send(req: FastifyRequest, reply: FastifyReply, at: { agentId?: string; nexus?: boolean }): Promise<unknown> {
    // The body is read once, here: the envelope, or the error that answers a body that is none.
    const rpc = readEnvelope(Buffer.isBuffer(req.body) ? req.body : '');
    if ('error' in rpc) return reply.code(200).send(envelope(rpc.id, rpc.error));
    const gone = new AbortController();
    reply.raw.on('close', () => gone.abort());
    const request: RpcRequest = {
      method: rpc.method,
      params: rpc.params,
      caller: callerOf(req),
      headers: req.headers,
      version: requestedVersion(req),
      lastEventId: firstValue(req.headers['last-event-id']),
      base: baseUrlOf(req, deps.publicUrl),
      signal: gone.signal,
      agentId: at.agentId,
      requestId: rpc.id,
    };
    const answer = await answeredBeforeClose(deps.endpoints.answer(request, at.agentId), closing.signal);
    if ('stream' in answer) {
      await writeSse(reply, framed(answer, rpc.id), gone.signal, deps.sse, closing.signal);
      return reply;
    }
    if (!('error' in answer)) return reply.code(200).send({ jsonrpc: '2.0', id: rpc.id, result: answer.result });
    const status = jsonRpcStatus(answer);
    // NEXUS's own path (seed 000) names its dialect: its codes where the seed and the spec differ.
    if (at.nexus) answer.error = onNexusPath(rpc.method, answer.error);
    if (answer.error.code === A2A_ERRORS.Internal.code && status === 200) req.log.warn({ error: answer.error }, 'internal error answered');
    if (answer.retryAfterS !== undefined) reply.header('retry-after', String(answer.retryAfterS));
    return reply.code(status).send(envelope(rpc.id, answer.error));
  }
}

/**
 * The HTTP status of a JSON-RPC error answer: errors travel as responses (200, A2A §9.5), but a call refused
 * before it ran is shown as HTTP shows such refusals everywhere (authorization 403, an unknown endpoint 404, a cap
 * 429, an outage 503), as the auth hooks show theirs.
 */
function jsonRpcStatus(f: RpcFailure): number {
  return f.refused ? REFUSED_STATUS[f.refused] : 200;
}

const REFUSED_STATUS: Record<Refused, number> = { permission: 403, 'no-endpoint': 404, busy: 429, unavailable: 503 };

/** A stream's frames as JSON-RPC responses carrying the request's id. */
function framed(s: RpcStream, id: string | number | null): SseStream {
  const frame = (f: SseFrame) => ({ ...f, data: { jsonrpc: '2.0' as const, id, ...f.data } });
  return {
    stream: mapFrames(s.stream, frame),
    errorFrame: (err) => frame(s.errorFrame(err)),
    cutOffFrame: (m, at) => frame(s.cutOffFrame(m, at)),
  };
}
