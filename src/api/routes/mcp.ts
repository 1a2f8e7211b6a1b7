/**
 * The MCP server at `/mcp` (issue 43): Streamable HTTP (POST for messages, GET for the server's own stream, DELETE
 * to end a session), authenticated like every entry point (a tenant's client or agent key, or an admin). The SDK's
 * transport answers each request on the raw socket (the reply is hijacked); this file reads the body, finds or
 * opens the caller's session (src/api/mcp/sessions.ts) and answers what comes before the SDK sees anything (no session,
 * unreadable JSON) as JSON-RPC errors.
 */
import type { ServerResponse } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { ERRORS, MCP_SESSION_ERRORS } from '../../../task/errors';
import { access, callerOf } from '../../core/auth/caller';
import { parseJson } from '../../core/http/json-guard';
import { type McpDeps, McpSessions, type Session } from '../mcp/sessions';
import { baseUrlOf, firstValue } from './base-url';
import { describeOnly } from './openapi';

export interface McpRouteDeps extends McpDeps {
  publicUrl?: string;
}

export async function mcpRoutes(app: FastifyInstance, deps: McpRouteDeps): Promise<void> {
  describeOnly(app);
  // Bodies as bytes: an unreadable one is a JSON-RPC parse error, not Fastify's own 400.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
  app.setErrorHandler((err: { code?: string; message: string }, req, reply) => {
    if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return jsonRpcError(reply, 413, ERRORS.InvalidRequest.code, `Request body is larger than ${app.initialConfig.bodyLimit} bytes`);
    req.log.error({ err }, 'MCP request failed');
    return jsonRpcError(reply, 500, ERRORS.Internal.code, 'Internal error');
  });
  const sessions = new McpSessions(deps);
  // Responses this file handed to the SDK (hijacked: Fastify no longer tracks them).
  const answering = new Set<ServerResponse>();
  app.addHook('preClose', async () => {
    await sessions.closeAll();
    // Whatever is still open (a stream the SDK did not end, a request that came in as the sessions closed) would
    // keep the server's close waiting on its socket: it ends here, as a restart ends it anyway.
    for (const res of answering) res.destroy();
  });
  const schema = (summary: string) => ({
    tags: ['mcp'],
    summary,
    description: 'The Model Context Protocol over Streamable HTTP (docs/mcp.md): each agent of the tenant is a tool; a tools/call is a durable A2A task.',
    headers: { type: 'object', properties: { 'mcp-session-id': { type: 'string' }, 'mcp-protocol-version': { type: 'string' }, 'last-event-id': { type: 'string' } } },
  });

  app.post('/mcp', { config: access.sender, schema: schema('MCP messages: JSON-RPC requests, notifications and responses; answered as JSON or an SSE stream') }, async (req, reply) => {
    let body: unknown;
    try {
      body = parseJson(Buffer.isBuffer(req.body) ? req.body : '', { maxDepth: 100 });
    } catch (err) {
      return jsonRpcError(reply, 400, ERRORS.ParseError.code, `Parse error: ${(err as Error).message}`);
    }
    const id = sessionIdOf(req);
    if (id !== undefined) {
      const session = sessions.find(id, callerOf(req));
      if (!session) return noSession(reply);
      return handle(session, req, reply, body);
    }
    const initializing = Array.isArray(body) ? body.some((m) => isInitializeRequest(m)) : isInitializeRequest(body);
    if (!initializing) return jsonRpcError(reply, 400, MCP_SESSION_ERRORS.NoSession, 'Bad Request: no Mcp-Session-Id; open a session with an initialize request first');
    return handle(sessions.open(callerOf(req), baseUrlOf(req, deps.publicUrl)), req, reply, body);
  });

  app.get('/mcp', { config: access.sender, schema: schema('The session\'s stream of server notifications and requests (SSE); resumes after Last-Event-ID') }, async (req, reply) => {
    const session = withSession(req);
    if (!session) return sessionMissing(req, reply);
    // Every connection has a deadline: the notification stream ends after streamMaxMs and the client opens another.
    const timer = setTimeout(() => session.transport.closeStandaloneSSEStream(), deps.settings.streamMaxMs).unref();
    reply.raw.on('close', () => clearTimeout(timer));
    return handle(session, req, reply, undefined);
  });

  app.delete('/mcp', { config: access.sender, schema: schema('Ends the session') }, async (req, reply) => {
    const session = withSession(req);
    if (!session) return sessionMissing(req, reply);
    return handle(session, req, reply, undefined);
  });

  function withSession(req: FastifyRequest): Session | undefined {
    const id = sessionIdOf(req);
    return id === undefined ? undefined : sessions.find(id, callerOf(req));
  }

  async function handle(session: Session, req: FastifyRequest, reply: FastifyReply, body: unknown): Promise<FastifyReply> {
    reply.hijack();
    session.busy++;
    answering.add(reply.raw);
    reply.raw.on('close', () => {
      answering.delete(reply.raw);
      session.busy--;
      session.lastSeen = Date.now();
    });
    try {
      await session.transport.handleRequest(req.raw, reply.raw, body);
    } catch (err) {
      req.log.error({ err }, 'MCP request failed');
      if (!reply.raw.headersSent) {
        reply.raw.writeHead(500, { 'content-type': 'application/json' });
        reply.raw.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: ERRORS.Internal.code, message: 'Internal error' } }));
      }
    }
    return reply;
  }
}

const sessionIdOf = (req: FastifyRequest): string | undefined => firstValue(req.headers['mcp-session-id']) || undefined;

function sessionMissing(req: FastifyRequest, reply: FastifyReply): FastifyReply {
  return sessionIdOf(req) === undefined ? jsonRpcError(reply, 400, MCP_SESSION_ERRORS.NoSession, 'Bad Request: Mcp-Session-Id header is required') : noSession(reply);
}

/** An unknown, ended or another key's session: 404, and the client opens a new one (the spec's rule). */
function noSession(reply: FastifyReply): FastifyReply {
  return jsonRpcError(reply, 404, MCP_SESSION_ERRORS.SessionNotFound, 'Session not found');
}

function jsonRpcError(reply: FastifyReply, status: number, code: number, message: string): FastifyReply {
  return reply.code(status).type('application/json').send({ jsonrpc: '2.0', id: null, error: { code, message } });
}
