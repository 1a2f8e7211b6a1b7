/**
 * An agent's reputation, computed in SQL from its trust events (one per terminal task, written with the
 * task's settlement, so each task counts once whatever was retried).
 */
import type { Pool } from 'pg';

export interface Reputation {
  agentId: string;
  /** Tasks that reached the agent (every outcome but `unfunded`). */
  tasks: number;
  completed: number;
  /** Failed for another reason than a timeout (the agent's error, an invalid answer, an unreachable agent). */
  failed: number;
  timeouts: number;
  rejected: number;
  canceled: number;
  /** input-required tasks the client never answered: not held against the agent. */
  expired: number;
  /** Refused for lack of funds before the agent was called: not held against the agent. */
  unfunded: number;
  /** completed / (completed + failed + timeouts + rejected); null before any such task. */
  successRate: number | null;
  /** First message to terminal state of completed tasks, in ms (null before the first completed task). */
  latencyMs: { p50: number | null; p90: number | null; p99: number | null; max: number | null; mean: number | null };
  lastTaskAt: string | null;
}

/** @returns undefined when the agent is neither registered nor has any task on record. */
export async function reputationOf(pool: Pool, tenant: string, agentId: string): Promise<Reputation | undefined> {
  const { rows } = await pool.query(
    `SELECT EXISTS (SELECT 1 FROM agents WHERE tenant = $1 AND id = $2) AS registered,
            count(*) FILTER (WHERE outcome <> 'unfunded')::int AS tasks,
            count(*) FILTER (WHERE outcome = 'completed')::int AS completed,
            count(*) FILTER (WHERE outcome = 'failed')::int AS failed,
            count(*) FILTER (WHERE outcome = 'timeout')::int AS timeouts,
            count(*) FILTER (WHERE outcome = 'rejected')::int AS rejected,
            count(*) FILTER (WHERE outcome = 'canceled')::int AS canceled,
            count(*) FILTER (WHERE outcome = 'expired')::int AS expired,
            count(*) FILTER (WHERE outcome = 'unfunded')::int AS unfunded,
            round(count(*) FILTER (WHERE outcome = 'completed')::numeric
                  / nullif(count(*) FILTER (WHERE outcome IN ('completed', 'failed', 'timeout', 'rejected')), 0), 4)::float8 AS success_rate,
            percentile_cont(ARRAY[0.5, 0.9, 0.99]) WITHIN GROUP (ORDER BY latency_ms) FILTER (WHERE outcome = 'completed') AS pct,
            max(latency_ms) FILTER (WHERE outcome = 'completed')::float8 AS max,
            avg(latency_ms) FILTER (WHERE outcome = 'completed')::float8 AS mean,
            max(ended_at) AS last_task_at
       FROM trust_events WHERE tenant = $1 AND agent_id = $2`,
    [tenant, agentId],
  );
  const r = rows[0];
  if (!r.registered && Number(r.tasks) + Number(r.unfunded) === 0) return undefined;
  const ms = (v: number | null | undefined) => (v === null || v === undefined ? null : Math.round(v));
  const pct: number[] | null = r.pct;
  return {
    agentId,
    tasks: r.tasks,
    completed: r.completed,
    failed: r.failed,
    timeouts: r.timeouts,
    rejected: r.rejected,
    canceled: r.canceled,
    expired: r.expired,
    unfunded: r.unfunded,
    successRate: r.success_rate,
    latencyMs: { p50: ms(pct?.[0]), p90: ms(pct?.[1]), p99: ms(pct?.[2]), max: ms(r.max), mean: ms(r.mean) },
    lastTaskAt: r.last_task_at ? new Date(r.last_task_at).toISOString() : null,
  };
}
