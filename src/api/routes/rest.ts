/**
 * The A2A HTTP+JSON (REST) binding (A2A 1.0 §11): one endpoint per agent (`/agents/:id/rest/…`) and the routing
 * front door's (`/rest/…`), each path with or without a `/{tenant}` prefix. Each request is the A2A 1.0 method its
 * path names, with the params its path, query and body give (handed over as objects), answered by the same RPC core as JSON-RPC
 * (src/api/a2a/rpc-handler.ts): role, validation, outage and stream-cap checks, the endpoint's resolver.
 *
 * This route chooses what HTTP shows: the result as the body (201 for a new push config, 204 for a delete), errors
 * as AIP-193 google.rpc.Status bodies with the status A2A §5.4 gives them (task/errors.ts), `application/json`
 * unless the client asked for `application/a2a+json`. Streams are SSE whose events are StreamResponse objects, each
 * with `id:` (its position in the task's event log, to resume with Last-Event-ID as on JSON-RPC), heartbeats, and a
 * last `event: error` for a reader cut off or a server shutting down.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { A2AEndpoints } from '../a2a/endpoints';
import { bindingErrorName, errorInfoMetadata, restRefusal } from '../a2a/error-forms';
import { type SseFrame, answeredBeforeClose } from '../a2a/rpc-handler';
import { requestedVersion } from '../a2a/versions';
import { access, callerOf } from '../../core/auth/caller';
import type { Health } from '../../core/health';
import { answer, describeOnly } from './openapi';
import { baseUrlOf, firstValue } from './base-url';
import { refuse } from './refusals';
import { type SseFrame as RestFrame, type SseOptions, mapFrames, writeSse } from './sse';
import { parseJson } from '../../core/http/json-guard';

export interface RestRouteDeps {
  endpoints: A2AEndpoints;
  health: Health;
  publicUrl?: string;
  sse: SseOptions;
}

/** Where the REST binding lives: under an agent's gateway base, and the front door's. */
const REST_PATHS = { agent: '/agents/:id/rest', frontDoor: '/rest' } as const;

/** A REST request as the JSON-RPC method it calls: the method, its params from the path, and the HTTP status of success. */
interface RestCall {
  method: string;
  params: Record<string, unknown>;
  /** The `/{tenant}` prefix, when the path has one. */
  tenant?: string;
  /** Whether the body's fields are params (message:send, push config create, cancel's metadata). */
  takesBody: boolean;
  status: 200 | 201 | 204;
}

const TASK = '([^/:]+)';
const ROUTES: { http: string; path: RegExp; call: (m: string[]) => Omit<RestCall, 'tenant'> }[] = [
  { http: 'POST', path: /^\/message:send$/, call: () => ({ method: 'SendMessage', params: {}, takesBody: true, status: 200 }) },
  { http: 'POST', path: /^\/message:stream$/, call: () => ({ method: 'SendStreamingMessage', params: {}, takesBody: true, status: 200 }) },
  { http: 'GET', path: new RegExp(`^/tasks/${TASK}$`), call: ([id]) => ({ method: 'GetTask', params: { id }, takesBody: false, status: 200 }) },
  { http: 'GET', path: /^\/tasks$/, call: () => ({ method: 'ListTasks', params: {}, takesBody: false, status: 200 }) },
  { http: 'POST', path: new RegExp(`^/tasks/${TASK}:cancel$`), call: ([id]) => ({ method: 'CancelTask', params: { id }, takesBody: true, status: 200 }) },
  { http: 'GET', path: new RegExp(`^/tasks/${TASK}:subscribe$`), call: ([id]) => ({ method: 'SubscribeToTask', params: { id }, takesBody: false, status: 200 }) },
  { http: 'POST', path: new RegExp(`^/tasks/${TASK}:subscribe$`), call: ([id]) => ({ method: 'SubscribeToTask', params: { id }, takesBody: false, status: 200 }) },
  {
    http: 'POST',
    path: new RegExp(`^/tasks/${TASK}/pushNotificationConfigs$`),
    call: ([taskId]) => ({ method: 'CreateTaskPushNotificationConfig', params: { taskId }, takesBody: true, status: 201 }),
  },
  {
    http: 'GET',
    path: new RegExp(`^/tasks/${TASK}/pushNotificationConfigs$`),
    call: ([taskId]) => ({ method: 'ListTaskPushNotificationConfigs', params: { taskId }, takesBody: false, status: 200 }),
  },
  {
    http: 'GET',
    path: new RegExp(`^/tasks/${TASK}/pushNotificationConfigs/([^/]+)$`),
    call: ([taskId, id]) => ({ method: 'GetTaskPushNotificationConfig', params: { taskId, id }, takesBody: false, status: 200 }),
  },
  {
    http: 'DELETE',
    path: new RegExp(`^/tasks/${TASK}/pushNotificationConfigs/([^/]+)$`),
    call: ([taskId, id]) => ({ method: 'DeleteTaskPushNotificationConfig', params: { taskId, id }, takesBody: false, status: 204 }),
  },
  { http: 'GET', path: /^\/extendedAgentCard$/, call: () => ({ method: 'GetExtendedAgentCard', params: {}, takesBody: false, status: 200 }) },
];

/** The A2A method a REST request calls (A2A 1.0 §11.3 paths, with or without a `/{tenant}` prefix); undefined: none. */
export function restCall(httpMethod: string, rawPath: string): RestCall | undefined {
  const prefixed = /^\/([^/]+)(\/(?:message:|tasks\b|extendedAgentCard$).*)$/.exec(rawPath);
  for (const [tenant, path] of [[undefined, rawPath], ...(prefixed ? [[decodeURIComponent(prefixed[1]!), prefixed[2]!]] : [])] as [string | undefined, string][]) {
    for (const r of ROUTES) {
      const m = r.http === httpMethod ? r.path.exec(path) : null;
      if (m) return { ...r.call(m.slice(1).map(decodeURIComponent)), ...(tenant !== undefined ? { tenant } : {}) };
    }
  }
  return undefined;
}

/** Query parameters as params: integers and booleans as the ProtoJSON numbers and booleans they stand for. */
function queryParams(query: unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, raw] of Object.entries((query ?? {}) as Record<string, unknown>)) {
    const v = Array.isArray(raw) ? raw[0] : raw;
    if (typeof v !== 'string' || k === 'A2A-Version' || k === 'tenant') continue;
    out[k] = /^-?\d+$/.test(v) && k !== 'pageToken' && k !== 'contextId' ? Number(v) : v === 'true' ? true : v === 'false' ? false : v;
  }
  return out;
}

export async function restRoutes(app: FastifyInstance, deps: RestRouteDeps): Promise<void> {
  describeOnly(app);
  // Every body is read as bytes (the body limit applies: 413) and parsed here, so a bad one is an AIP-193 error.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
  app.setErrorHandler((err: { code?: string; message: string }, req, reply) => {
    if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return refuse(req, reply, { name: 'BodyTooLarge', message: `Request body is larger than ${app.initialConfig.bodyLimit} bytes` });
    const e = deps.health.unavailable(err);
    if (e) return refuse(req, reply, { name: 'Unavailable', message: e.message, retryAfterS: e.retryAfterS });
    req.log.error({ err }, 'REST request failed');
    return refuse(req, reply, { name: 'Internal', message: 'Internal error' });
  });

  const closing = new AbortController();
  app.addHook('preClose', async () => closing.abort());

  const schema = (summary: string) => ({
    tags: ['a2a'],
    summary,
    description:
      "A2A 1.0's HTTP+JSON binding (the paths and bodies are A2A's: POST message:send, message:stream, GET tasks/{id}, " +
      'POST tasks/{id}:cancel, tasks/{id}:subscribe, tasks/{id}/pushNotificationConfigs, …), answered by the same core as ' +
      'JSON-RPC; errors are an HTTP status with a google.rpc.Status body (AIP-193); streams are SSE with ids to resume from.',
    response: { 200: answer('The A2A answer, or an SSE stream'), 400: answer('google.rpc.Status'), 404: answer('google.rpc.Status') },
  });
  const serve = (req: FastifyRequest<{ Params: { id?: string; '*': string } }>, reply: FastifyReply) => dispatch(req, reply, req.params.id);
  for (const method of ['GET', 'POST', 'DELETE'] as const) {
    app.route({ method, url: `${REST_PATHS.agent}/*`, config: access.rest, schema: schema("The agent's A2A HTTP+JSON endpoint: its tasks only"), handler: serve });
    app.route({ method, url: `${REST_PATHS.frontDoor}/*`, config: access.rest, schema: schema('The routing front door over HTTP+JSON'), handler: serve });
  }

  async function dispatch(req: FastifyRequest<{ Params: { '*': string } }>, reply: FastifyReply, pathAgent: string | undefined): Promise<unknown> {
    const path = `/${req.params['*']}`.replace(/\/$/, '');
    const call = restCall(req.method, path);
    if (!call) return refuse(req, reply, { name: 'NoSuchEndpoint', message: `No A2A HTTP+JSON method at ${req.method} ${path}` });
    // The HTTP+JSON binding is A2A 1.0's.
    const version = requestedVersion(req);
    if (version !== undefined && !version.startsWith('1.')) {
      return refuse(req, reply, { name: 'VersionNotSupported', message: `A2A-Version ${version} is not served over HTTP+JSON; it is A2A 1.0's binding (0.3 clients use JSON-RPC)` });
    }
    // A `/{tenant}` prefix names the agent at the front door; under an agent's own path it must name that agent.
    if (pathAgent !== undefined && call.tenant !== undefined && call.tenant !== pathAgent) {
      return refuse(req, reply, { name: 'InvalidParams', message: `tenant ${call.tenant} names another agent than the URL (${pathAgent})` });
    }
    let body: Record<string, unknown> = {};
    const raw = req.body as Buffer | undefined;
    if (call.takesBody && raw?.length) {
      let parsed: unknown;
      try {
        parsed = parseJson(raw); // UTF-8 and depth checked first (json-guard): the core's validation recurses
      } catch (err) {
        return refuse(req, reply, { name: 'InvalidRequest', message: `Invalid JSON payload: ${(err as Error).message}` });
      }
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return refuse(req, reply, { name: 'InvalidRequest', message: 'The body must be a JSON object' });
      body = parsed as Record<string, unknown>;
    }
    const { tenant: _inBody, ...fields } = body;
    const params = { ...(call.method === 'ListTasks' || call.method === 'GetTask' || call.method === 'ListTaskPushNotificationConfigs' ? queryParams(req.query) : {}), ...fields, ...call.params };

    const gone = new AbortController();
    reply.raw.on('close', () => gone.abort());
    const agentId = pathAgent ?? call.tenant;
    const answering = deps.endpoints.answer(
      {
        method: call.method,
        params,
        caller: callerOf(req),
        headers: req.headers,
        version: '1.0',
        lastEventId: firstValue(req.headers['last-event-id']),
        base: baseUrlOf(req, deps.publicUrl),
        signal: gone.signal,
        agentId,
      },
      agentId,
    );
    const answered = await answeredBeforeClose(answering, closing.signal);
    const media = wantsA2AMedia(req) ? 'application/a2a+json' : 'application/json';
    if ('stream' in answered) {
      const stream = { stream: mapFrames(answered.stream, restFrame), errorFrame: (err: unknown) => restFrame(answered.errorFrame(err)), cutOffFrame: (m: string, at: number) => restFrame(answered.cutOffFrame(m, at)) };
      await writeSse(reply, stream, gone.signal, deps.sse, closing.signal);
      return reply;
    }
    if ('error' in answered) {
      const { error } = answered;
      if (answered.retryAfterS !== undefined) reply.header('retry-after', String(answered.retryAfterS));
      const { status, body: status193 } = restRefusal({ name: bindingErrorName(error.code, answered.refused), message: error.message, metadata: errorInfoMetadata(error.data) });
      return reply.code(status).header('content-type', `${media}; charset=utf-8`).send(status193);
    }
    if (call.status === 204) return reply.code(204).send();
    return reply.code(call.status).header('content-type', `${media}; charset=utf-8`).send(JSON.stringify(answered.result ?? {}));
  }
}

/** A client that names `application/a2a+json` (Accept, or its own Content-Type) gets it; others `application/json`. */
function wantsA2AMedia(req: FastifyRequest): boolean {
  return /application\/a2a\+json/i.test(`${firstValue(req.headers.accept) ?? ''} ${req.headers['content-type'] ?? ''}`);
}

/** A stream frame as HTTP+JSON sends it: the StreamResponse itself, or an AIP-193 `error` event. */
function restFrame(frame: SseFrame): RestFrame {
  if (!('error' in frame.data)) return { ...frame, data: frame.data.result };
  const { error } = frame.data;
  return { ...frame, event: 'error', data: restRefusal({ name: bindingErrorName(error.code), message: error.message, metadata: errorInfoMetadata(error.data) }).body };
}
