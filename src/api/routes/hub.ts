/**
 * GET /hub: the WebSocket hub (Society AI's transport) for agents that connect out, e.g. from behind NAT. An
 * agent key authenticates the upgrade request like any other call (src/core/auth/plugin.ts); the socket then speaks
 * JSON-RPC 2.0 both ways (src/api/hub/session.ts). A plain GET without the upgrade is answered 426.
 */
import websocket from '@fastify/websocket';
import type { FastifyInstance } from 'fastify';
import type { A2AEndpoints } from '../a2a/endpoints';
import type { AgentRegistry } from '../../core/agents/registry';
import { access, callerOf } from '../../core/auth/caller';
import type { CredentialWatch } from '../../core/auth/credential-watch';
import type { AgentHub } from '../hub/hub';
import { HubSession } from '../hub/session';
import { baseUrlOf } from './base-url';
import { errorBody } from './openapi';

export interface HubRoutesDeps {
  hub: AgentHub;
  registry: AgentRegistry;
  endpoints: A2AEndpoints;
  publicUrl?: string;
  /** Closes a socket once its agent key no longer holds (src/core/auth/credential-watch.ts). */
  credentialWatch?: CredentialWatch;
}

export async function hubRoutes(app: FastifyInstance, { hub, registry, endpoints, publicUrl, credentialWatch }: HubRoutesDeps): Promise<void> {
  // maxPayload: a larger frame closes the socket with 1009 (Message Too Big) before it is buffered whole.
  await app.register(websocket, {
    options: { maxPayload: hub.settings.maxFrameBytes },
    // A socket error is the agent's doing (a frame over the cap, invalid UTF-8): ws closes the socket with the
    // matching code (1009, 1007) itself. Worth a warning, not an error log and a torn-down socket.
    errorHandler: (err, _socket, req) => req.log.warn({ err: err.message, agentId: req.caller?.agentId }, 'hub: a socket error closed an agent\'s connection'),
  });
  // Agents reconnect to this process's successor or another one; their turns wait in Temporal meanwhile.
  app.addHook('preClose', async () => hub.closeAll());
  // An upgrade refused before the route (401 for a revoked or unknown key, 403, 429: the auth hooks answer it)
  // leaves a socket the HTTP server no longer manages (no keep-alive timeout, not idle): a client that keeps it
  // open would hold it, and the server's close, forever. It is closed once the refusal is written.
  app.addHook('onResponse', async (req) => {
    if (req.raw.headers.upgrade !== undefined) req.raw.socket.destroy();
  });
  const schema = {
    tags: ['a2a'],
    summary: 'The WebSocket hub: an agent connects out with its agent key; JSON-RPC 2.0 frames both ways (see docs/dialects.md)',
    description:
      'Upgrade to a WebSocket with an agent key. Agent → hub: agent.register, heartbeat, task.status, task.artifact, task.complete, ' +
      'agent.search, agent.send_task. Hub → agent: tasks/send (or message/send for 0.3+ cards) per turn, tasks/cancel.',
    response: { 101: { description: 'Switching Protocols: the socket is open', type: 'null' }, 426: errorBody('A plain GET: this route only upgrades to a WebSocket') },
  };
  app.route({
    method: 'GET',
    url: '/hub',
    config: access.hub,
    schema,
    handler: async (_req, reply) => reply.code(426).header('upgrade', 'websocket').send({ error: 'GET /hub upgrades to a WebSocket (Connection: Upgrade, Upgrade: websocket)' }),
    wsHandler: async (socket, req) => {
      const session = new HubSession(socket, callerOf(req), { hub, registry, endpoints, base: baseUrlOf(req, publicUrl), credentialWatch });
      await session.start().catch((err) => {
        req.log.error({ err }, 'hub: a connection could not start');
        session.close(1011, 'the hub could not register the connection; reconnect');
      });
    },
  });
}
