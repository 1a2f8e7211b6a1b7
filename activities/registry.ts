/**
 * The registry's activities: the refresh of one agent, and of every agent due (src/core/agents/refresh.ts does the
 * work). Kept apart from the task activities so that the refresh policy and the trusted key origins are its own
 * dependencies.
 */
import { Context } from '@temporalio/activity';
import type { Pool } from 'pg';
import { refreshAgent, type RefreshPolicy, type RefreshResult } from '../src/core/agents/refresh';
import type { AgentCredentials } from '../src/core/agents/agent-credentials';
import type { GrpcChannels } from '../src/core/http/outbound-grpc';
import type { AgentRefreshArgs } from '../task/contracts';

export interface RegistryActivityDeps {
  pool: Pool;
  /** The guarded outbound fetch (src/core/http/outbound.ts). */
  fetch: typeof fetch;
  /** The guarded gRPC channels (Outbound.grpc), for probing agents called over gRPC. */
  grpc?: GrpcChannels;
  /** Overrides of DEFAULT_REFRESH_POLICY (thresholds, timeouts, trusted jku origins). */
  policy?: Partial<RefreshPolicy>;
  /** The agents' outbound credentials (looked up here, never passed through Temporal). */
  credentials?: AgentCredentials;
}

/** Agents refreshed at once by a sweep: each is a few requests that mostly wait on the network. */
const SWEEP_CONCURRENCY = 8;

export function createRegistryActivities({ pool, fetch, grpc, policy, credentials }: RegistryActivityDeps) {
  const deps = { pool, fetch, grpc, policy, credentials };
  return {
    refreshAgent: (args: AgentRefreshArgs): Promise<RefreshResult> => refreshAgent(deps, args.tenant, args.agentId),

    /**
     * Refreshes up to `limit` agents whose last probe (or, never probed, registration) is older than the interval,
     * the longest-waiting first. A failed probe is recorded, not thrown; one agent's database error does not stop
     * the others. @returns how many agents were due and refreshed.
     */
    async refreshDueAgents({ intervalMs, limit }: { intervalMs: number; limit: number }): Promise<number> {
      const { rows } = await pool.query<{ tenant: string; id: string }>(
        `SELECT tenant, id FROM agents
          WHERE COALESCE((last_probe->>'at')::timestamptz, created_at) < now() - make_interval(secs => $1::double precision / 1000)
          ORDER BY COALESCE((last_probe->>'at')::timestamptz, created_at)
          LIMIT $2`,
        [intervalMs, limit],
      );
      const ctx = Context.current();
      let next = 0;
      let done = 0;
      const errors: unknown[] = [];
      const lane = async () => {
        while (next < rows.length) {
          const { tenant, id } = rows[next++]!;
          try {
            await refreshAgent(deps, tenant, id);
          } catch (err) {
            errors.push(err);
            ctx.log.warn('agent refresh failed', { tenant, agentId: id, error: (err as Error).message });
          }
          ctx.heartbeat(++done);
        }
      };
      await Promise.all(Array.from({ length: Math.min(SWEEP_CONCURRENCY, rows.length) }, lane));
      // Nothing went through (the database is away): let Temporal retry the batch.
      if (rows.length > 0 && errors.length === rows.length) throw errors[0];
      return rows.length;
    },
  };
}

export type RegistryActivities = ReturnType<typeof createRegistryActivities>;
