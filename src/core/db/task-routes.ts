/** The front door's routing decisions (migration 006), one per task it started. */
import type { Pool } from 'pg';

export type RouteReason = 'metadata.agentId' | 'metadata.skillId' | 'search';

/** A routing decision, as stored in `task_routes` and shown in the SendMessage answer. */
export interface RoutingDecision {
  agentId: string;
  /** The skill named in the metadata, or the chosen agent's skill that shares most words with the text. */
  skillId: string | null;
  reason: RouteReason;
  /** The winning match's score (search only): ts_rank, or its reciprocal-rank-fusion score when the search was hybrid. */
  rank: number | null;
  /** The full-text query that was run (search only). */
  query: string | null;
  /** Which rank chose the agent (search only): full-text, semantic, or both (a hybrid search's fused rank). */
  rankedBy: 'full-text' | 'semantic' | 'both' | null;
  /** Agents that matched as well as the winner and lost on reputation (search and skillId only). */
  tiedWith: string[];
}

export interface StoredRoute extends Omit<RoutingDecision, 'tiedWith'> {
  taskId: string;
  requester: string;
  routedAt: string;
}

/**
 * Records the decision for a task unless one is recorded already (a resent first message, or a concurrent
 * send of the same message): the first decision stands, and is returned either way.
 */
export async function recordRoute(pool: Pool, tenant: string, taskId: string, requester: string, d: RoutingDecision): Promise<StoredRoute> {
  await pool.query(
    `INSERT INTO task_routes (tenant, task_id, requester, agent_id, skill_id, reason, rank, query, ranked_by)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (tenant, task_id) DO NOTHING`,
    [tenant, taskId, requester, d.agentId, d.skillId, d.reason, d.rank, d.query, d.rankedBy],
  );
  return (await routeOf(pool, tenant, taskId))!;
}

export async function routeOf(pool: Pool, tenant: string, taskId: string): Promise<StoredRoute | undefined> {
  const { rows } = await pool.query<{
    task_id: string; requester: string; agent_id: string; skill_id: string | null; reason: RouteReason; rank: number | null; query: string | null; ranked_by: RoutingDecision['rankedBy']; created_at: Date;
  }>('SELECT task_id, requester, agent_id, skill_id, reason, rank, query, ranked_by, created_at FROM task_routes WHERE tenant = $1 AND task_id = $2', [tenant, taskId]);
  const r = rows[0];
  return r && {
    taskId: r.task_id, requester: r.requester, agentId: r.agent_id, skillId: r.skill_id, reason: r.reason, rank: r.rank, query: r.query,
    rankedBy: r.ranked_by, routedAt: r.created_at.toISOString(),
  };
}
