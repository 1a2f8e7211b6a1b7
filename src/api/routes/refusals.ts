/**
 * Requests refused outside the RPC core, in the form of the endpoint they were sent to: a JSON-RPC error response
 * on a JSON-RPC endpoint, an AIP-193 google.rpc.Status on an HTTP+JSON endpoint, `{"error": "<message>"}` on
 * Switchboard's own REST routes. Authentication (401, 403), rate limits (429), body limits (413), routing (404),
 * outages (503), and — before authentication, as they reveal nothing — the A2A protocol version and the content
 * type of A2A requests.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { type Refusal, jsonRpcRefusal, restRefusal } from '../a2a/error-forms';
import { ERRORS } from '../../../task/errors';
import { SUPPORTED_VERSION, requestedVersion } from '../a2a/versions';
import type { A2ABinding } from '../../core/auth/caller';

/** The binding of the endpoint a request was sent to (also for a URL that matched no route: by its shape). */
export function bindingOf(req: FastifyRequest): A2ABinding | undefined {
  const declared = req.routeOptions.config?.binding;
  if (declared) return declared;
  if (req.routeOptions.url) return undefined;
  const path = req.url.split('?', 1)[0]!;
  if (/^\/(agents\/[^/]+\/)?(a2a|api\/v1\/a2a)(\/|$)/.test(path)) return 'jsonrpc';
  if (/^\/(agents\/[^/]+\/)?rest(\/|$)/.test(path)) return 'rest';
  return undefined;
}

/** Sends `r` in the form of the request's endpoint, with its HTTP status (and Retry-After when it has one). */
export function refuse(req: FastifyRequest, reply: FastifyReply, r: Refusal, status = ERRORS[r.name].http): FastifyReply {
  if (r.retryAfterS !== undefined) reply.header('retry-after', String(r.retryAfterS));
  switch (bindingOf(req)) {
    case 'jsonrpc':
      return reply.code(status).header('content-type', 'application/json; charset=utf-8').send(jsonRpcRefusal(r, /^0\./.test(requestedVersion(req) ?? '') ? '0.3' : '1.0'));
    case 'rest':
      return reply.code(status).header('content-type', 'application/json; charset=utf-8').send(restRefusal(r).body);
    default:
      return reply.code(status).send({ error: r.message, ...r.extra });
  }
}

/** Media types an A2A request body may have: JSON (`application/json`, `application/a2a+json`, any `+json`). */
export function isJsonMedia(contentType: string | undefined): boolean {
  const media = (contentType ?? '').split(';', 1)[0]!.trim().toLowerCase();
  return media === 'application/json' || /^application\/[\w.-]+\+json$/.test(media);
}

/**
 * The checks every A2A endpoint makes before authentication: an unsupported A2A-Version is VersionNotSupported
 * (-32009 with HTTP 200 on JSON-RPC, where errors travel as responses; HTTP 400 on HTTP+JSON), a body that is not
 * JSON is ContentTypeNotSupported (-32005; HTTP 415 on HTTP+JSON). A request without a Content-Type is read as JSON.
 */
export function installA2AGuards(app: FastifyInstance): void {
  app.addHook('onRequest', async (req, reply) => {
    const binding = req.routeOptions.config?.binding;
    if (!binding) return;
    const version = requestedVersion(req);
    if (version !== undefined && !SUPPORTED_VERSION.test(version)) {
      const r: Refusal = { name: 'VersionNotSupported', message: `A2A-Version ${version} is not supported; this gateway speaks 1.0 and 0.3` };
      return refuse(req, reply, r, binding === 'jsonrpc' ? 200 : undefined);
    }
    const contentType = req.headers['content-type'];
    if (req.method === 'POST' && contentType !== undefined && !isJsonMedia(contentType)) {
      const r: Refusal = { name: 'ContentTypeNotSupported', message: `Content-Type ${contentType} is not supported: A2A requests are JSON (application/json or application/a2a+json)` };
      return refuse(req, reply, r, binding === 'jsonrpc' ? 200 : undefined);
    }
  });
  app.setNotFoundHandler((req, reply) => refuse(req, reply, { name: 'NoSuchEndpoint', message: `No route ${req.method} ${req.url.split('?', 1)[0]}` }));
}
