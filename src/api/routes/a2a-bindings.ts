/**
 * Every way in for A2A and its neighbours, behind one RPC core and front door (src/api/a2a/endpoints.ts): the
 * routing front door's card, JSON-RPC, HTTP+JSON, gRPC (SWITCHBOARD_GRPC_PORT), NEXUS's task API, Genesis Nexus
 * envelopes, agents' push notifications and the WebSocket hub.
 */
import { FairGate, type FairGateOptions } from '../a2a/fair-gate';
import type { UnfundedPolicy } from '../../core/ledger/postings';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Logger } from 'pino';
import type { StreamLimits } from '../a2a/task-stream';
import { A2AEndpoints } from '../a2a/endpoints';
import { Actions } from '../a2a/nanda-actions';
import type { AgentCredentials } from '../../core/agents/agent-credentials';
import type { EventHub } from '../../core/events/hub';
import { GenesisService } from '../genesis/service';
import { GenesisStore } from '../../core/genesis/store';
import { GrpcServer } from '../grpc/server';
import type { AgentHub } from '../hub/hub';
import type { AgentPushTokens } from '../../core/push/agent-push';
import { PushStore } from '../../core/push/store';
import { agentPushRoutes } from './agent-push';
import { frontDoorRoutes } from './front-door';
import { genesisRoutes } from './genesis';
import { hubRoutes } from './hub';
import { jsonRpcRoutes } from './json-rpc';
import { mcpRoutes } from './mcp';
import { DEFAULT_MCP_SETTINGS, type McpSettings } from '../mcp/sessions';
import { nexusTaskRoutes } from './nexus-tasks';
import { restRoutes } from './rest';
import type { SseOptions } from './sse';
import type { GrpcAdvert } from '../../core/agents/gateway-card';

declare module 'fastify' {
  interface FastifyInstance {
    /** The gRPC server (not yet listening) when A2ABindingOptions.grpc is set. */
    grpc?: GrpcServer;
  }
}

export interface StreamSettings extends SseOptions, StreamLimits {}

export interface A2ABindingOptions {
  log: Logger;
  hub: EventHub;
  publicUrl?: string;
  inputTimeoutMs: number;
  pushRetryInitialMs?: number;
  maxHops: number;
  allowPrivateUrls: boolean;
  streams: StreamSettings;
  credentials?: AgentCredentials;
  genesis: { maxSkewMs: number; eventRetryInitialMs?: number };
  /** Fair admission per tenant of every binding's sends (src/api/a2a/fair-gate.ts). */
  admission: FairGateOptions;
  /** The gRPC binding: the port it listens on and the target the cards advertise; the caller listens (`app.grpc.listen`). */
  grpc?: GrpcAdvert;
  agentHub?: AgentHub;
  agentPush?: { tokens: AgentPushTokens };
  /** How a never-funded requester wallet reads (the NANDA `audit.wallet` action). */
  unfundedAccounts: UnfundedPolicy;
  /** The MCP server at /mcp (issue 43): how long a call waits, session caps (default DEFAULT_MCP_SETTINGS). */
  mcp?: Partial<McpSettings>;
}

export const a2aBindings = fp<A2ABindingOptions>(
  async (app: FastifyInstance, o) => {
    const { pg: pool, registry, policies, quotas, health, credentialWatch } = app;
    const { gateway, certifications } = app.temporal;
    const { streams, publicUrl } = o;
    const rpcDeps = {
      registry,
      policies,
      quotas,
      health,
      gateway,
      pool,
      hub: o.hub,
      push: new PushStore(pool, { allowPrivate: o.allowPrivateUrls }),
      inputTimeoutMs: o.inputTimeoutMs,
      pushRetryInitialMs: o.pushRetryInitialMs,
      maxHops: o.maxHops,
      streamLimits: { maxPerTask: streams.maxPerTask, maxTotal: streams.maxTotal },
      credentialWatch,
      admission: new FairGate(o.admission),
    };
    const actions = new Actions({ pool, registry, policies, certifications, health, unfundedAccounts: o.unfundedAccounts });
    const endpoints = new A2AEndpoints(rpcDeps, actions);
    const sse = { heartbeatMs: streams.heartbeatMs, maxBufferBytes: streams.maxBufferBytes, drainTimeoutMs: streams.drainTimeoutMs };
    await app.register(frontDoorRoutes, { registry, pool, publicUrl, grpc: o.grpc });
    await app.register(jsonRpcRoutes, { ...rpcDeps, endpoints, publicUrl, sse });
    await app.register(restRoutes, { endpoints, health, publicUrl, sse });
    await app.register(mcpRoutes, { endpoints, pool, registry, health, hub: o.hub, credentialWatch, log: o.log, publicUrl, settings: { ...DEFAULT_MCP_SETTINGS, ...o.mcp } });
    const genesisStore = new GenesisStore(pool, o.credentials?.box);
    const { client, taskQueue } = app.temporal;
    const genesis = new GenesisService({
      store: genesisStore,
      registry,
      intake: rpcDeps,
      temporal: client,
      taskQueue,
      maxSkewMs: o.genesis.maxSkewMs,
      eventRetryInitialMs: o.genesis.eventRetryInitialMs ?? o.pushRetryInitialMs,
    });
    await app.register(genesisRoutes, { service: genesis, store: genesisStore, allowPrivateUrls: o.allowPrivateUrls });
    await app.register(nexusTaskRoutes, { endpoints, publicUrl });
    if (o.agentPush) await app.register(agentPushRoutes, { pool, hub: o.hub, tokens: o.agentPush.tokens });
    if (o.agentHub) await app.register(hubRoutes, { hub: o.agentHub, registry, endpoints, publicUrl, credentialWatch });
    if (o.grpc) {
      const grpc = new GrpcServer({
        endpoints,
        authenticator: app.authenticator,
        rateLimitCall: app.rateLimitCall,
        publicUrl,
        maxReceiveBytes: app.initialConfig.bodyLimit ?? 1024 * 1024,
        drainTimeoutMs: streams.drainTimeoutMs,
        keepaliveMs: streams.heartbeatMs,
        log: o.log,
      });
      app.decorate('grpc', grpc);
      // Like the SSE streams: open gRPC streams end (naming where to resume) before the HTTP server waits for clients.
      app.addHook('preClose', async () => grpc.close());
    }
  },
  { name: 'switchboard-a2a', fastify: '5.x', dependencies: ['switchboard-auth', 'switchboard-temporal', 'switchboard-registry'] },
);
