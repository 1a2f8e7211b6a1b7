/**
 * The registry's activity: one refresh of one agent (src/agents/refresh.ts does the work). Kept apart from the
 * task activities so that the refresh policy and the trusted key origins are its own dependencies.
 */
import type { Pool } from 'pg';
import { refreshAgent, type RefreshPolicy, type RefreshResult } from '../src/agents/refresh';
import type { AgentCredentials } from '../src/agents/agent-credentials';
import type { AgentRefreshArgs } from '../workflows/types';

export interface RegistryActivityDeps {
  pool: Pool;
  /** The guarded outbound fetch (src/http/outbound.ts). */
  fetch: typeof fetch;
  /** Overrides of DEFAULT_REFRESH_POLICY (thresholds, timeouts, trusted jku origins). */
  policy?: Partial<RefreshPolicy>;
  /** The agents' outbound credentials (looked up here, never passed through Temporal). */
  credentials?: AgentCredentials;
}

export function createRegistryActivities({ pool, fetch, policy, credentials }: RegistryActivityDeps) {
  return {
    refreshAgent: (args: AgentRefreshArgs): Promise<RefreshResult> => refreshAgent({ pool, fetch, policy, credentials }, args.tenant, args.agentId),
  };
}

export type RegistryActivities = ReturnType<typeof createRegistryActivities>;
