/**
 * Health from real work, not probes alone: an agent's most recent finished tasks, read from the task projection.
 * A node can answer every liveness probe and fail every task; probes alone kept such a node `healthy`, and text
 * routing kept choosing it over one that works. An agent whose last FAILING_AFTER or more finished tasks all
 * failed is `failing`: the registry shows it degraded (src/core/agents/refresh.ts) and routing ranks it last
 * (src/api/a2a/router.ts).
 */
import type { Pool } from 'pg';

/** How many of an agent's latest finished tasks are read. */
export const RECENT_TASKS = 5;
/** Finished tasks that must all have failed before an agent counts as failing (fewer is not yet a pattern). */
export const FAILING_AFTER = 3;

// Canceled tasks say nothing about the agent; input-required ones are not finished.
const JUDGED_STATES = ['TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_REJECTED'];

export interface RecentWork {
  /** Finished tasks read (at most RECENT_TASKS), newest first. */
  recent: number;
  completed: number;
  failed: number;
  /** Every one of at least FAILING_AFTER recent finished tasks failed. */
  failing: boolean;
  lastTaskAt: string | null;
}

/** The recent work of each agent in `agentIds` (an agent without finished tasks has `recent: 0`). */
export async function recentWork(pool: Pick<Pool, 'query'>, tenant: string, agentIds: readonly string[]): Promise<Map<string, RecentWork>> {
  const out = new Map<string, RecentWork>(agentIds.map((id) => [id, { recent: 0, completed: 0, failed: 0, failing: false, lastTaskAt: null }]));
  if (agentIds.length === 0) return out;
  const { rows } = await pool.query<{ agent_id: string; recent: number; completed: number; last: Date | null }>(
    `SELECT a.id AS agent_id, count(r.state)::int AS recent,
            count(*) FILTER (WHERE r.state = 'TASK_STATE_COMPLETED')::int AS completed, max(r.status_timestamp) AS last
       FROM unnest($2::text[]) AS a(id)
       LEFT JOIN LATERAL (
         SELECT state, status_timestamp FROM tasks
          WHERE tenant = $1 AND agent_id = a.id AND state = ANY($3)
          ORDER BY status_timestamp DESC LIMIT $4
       ) r ON true
      GROUP BY a.id`,
    [tenant, [...new Set(agentIds)], JUDGED_STATES, RECENT_TASKS],
  );
  for (const r of rows) {
    const failed = r.recent - r.completed;
    out.set(r.agent_id, {
      recent: r.recent,
      completed: r.completed,
      failed,
      failing: r.recent >= FAILING_AFTER && r.completed === 0,
      lastTaskAt: r.last ? r.last.toISOString() : null,
    });
  }
  return out;
}

/** Why a failing agent is degraded, for its status reason. */
export function failingReason(w: RecentWork): string {
  return `its last ${w.recent} finished tasks all failed (the endpoint answers probes, but not work)`;
}

/**
 * Marks a healthy agent degraded at once when its recent tasks all failed, rather than at its next probe (minutes
 * away): called right after the settlement of a task that did not complete. The next probe keeps it degraded
 * while the work keeps failing, and makes it healthy again once a task completes.
 */
export async function degradeIfFailing(db: Pick<Pool, 'query'>, tenant: string, agentId: string): Promise<void> {
  const work = (await recentWork(db, tenant, [agentId])).get(agentId)!;
  if (!work.failing) return;
  await db.query(
    `UPDATE agents SET status = 'degraded', status_reason = $3, status_changed_at = now(), updated_at = now()
      WHERE tenant = $1 AND id = $2 AND status = 'healthy'`,
    [tenant, agentId, failingReason(work)],
  );
}
