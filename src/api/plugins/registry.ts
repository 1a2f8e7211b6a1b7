/**
 * The agent registry and the enforced NANDA policies as `app.registry` and `app.policies`: both read through
 * caches that every change clears (src/core/events/config-cache.ts), and both stop listening when the app closes.
 */
import fp from 'fastify-plugin';
import type { AgentCredentials } from '../../core/agents/agent-credentials';
import type { RefreshPolicy } from '../../core/agents/refresh';
import { RefreshScheduler } from '../../core/agents/refresh-schedules';
import { AgentRegistry } from '../../core/agents/registry';
import { CardEmbedder } from '../../core/agents/card-embedder';
import { Embeddings, type EmbeddingsSettings } from '../../core/agents/embeddings';
import type { EventHub } from '../../core/events/hub';
import type { Outbound } from '../../core/http/outbound';
import { EnforcedPolicies } from '../../core/nanda/policies';

declare module 'fastify' {
  interface FastifyInstance {
    registry: AgentRegistry;
    policies: EnforcedPolicies;
  }
}

export interface RegistryPluginOptions {
  outbound: Outbound;
  hub: EventHub;
  credentials?: AgentCredentials;
  /** Agent refresh schedules: the scheduler to use (main.ts's, which it also reconciles), or one built from intervalMs. Unset: none. */
  agentRefresh?: { intervalMs?: number; policy?: Partial<RefreshPolicy>; scheduler?: RefreshScheduler };
  /** The model service for hybrid search (SWITCHBOARD_EMBEDDINGS_*); unset: full-text search only. */
  embeddings?: EmbeddingsSettings;
}

export const registryPlugin = fp<RegistryPluginOptions>(
  async (app, o) => {
    const { client, taskQueue } = app.temporal;
    const scheduler = o.agentRefresh && (o.agentRefresh.scheduler ?? new RefreshScheduler({ client, taskQueue, intervalMs: o.agentRefresh.intervalMs }));
    // Cards are embedded in this (API) process, the one that searches: through the guarded outbound client.
    const embedder = o.embeddings && new CardEmbedder(app.pg, new Embeddings(o.embeddings, o.outbound.fetch), app.log);
    const registry = new AgentRegistry(app.pg, o.outbound, { scheduler, policy: o.agentRefresh?.policy, credentials: o.credentials, hub: o.hub, embedder });
    const policies = new EnforcedPolicies(app.pg, o.hub);
    app.decorate('registry', registry);
    app.decorate('policies', policies);
    await embedder?.start();
    app.addHook('onClose', async () => {
      await embedder?.stop();
      registry.close();
      policies.close();
    });
  },
  { name: 'switchboard-registry', fastify: '5.x', dependencies: ['switchboard-pg', 'switchboard-temporal'] },
);
