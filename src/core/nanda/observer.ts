/**
 * NANDA's observer services from what the registry and the ledger already know: liveness (`observer.*`, the
 * registry's probes combined with the agent's recent work), latency telemetry (`telemetry.latency`, probe and
 * task latencies), `reputation` (trust events), and `audit.*` (the ledger's reconciliation, per agent or task).
 */
import type { Pool } from 'pg';
import type { Agent, AgentRegistry } from '../agents/registry';
import type { AgentStatus } from '../agents/refresh';
import { reconcile } from '../ledger/reconcile';
import { reputationOf } from '../trust/reputation';
import { type RecentWork, failingReason, recentWork } from '../trust/work-health';

export interface Liveness {
  agent_id: string;
  /** The registry's status, degraded as well when the agent's recent tasks all failed. */
  status: AgentStatus;
  reason: string;
  /** The status as the registry stores it (its probes; work failures since the settlement of the last task). */
  registry_status: AgentStatus;
  status_changed_at: string;
  consecutive_probe_failures: number;
  last_probe: { at: string; ok: boolean; latency_ms: number } | null;
  work: RecentWork;
}

/** The liveness of each agent, probes and recent work together. */
export async function liveness(pool: Pool, tenant: string, agents: Agent[]): Promise<Liveness[]> {
  const work = await recentWork(pool, tenant, agents.map((a) => a.id));
  return agents.map((a) => {
    const w = work.get(a.id)!;
    const failing = a.status === 'healthy' && w.failing;
    return {
      agent_id: a.id,
      status: failing ? 'degraded' : a.status,
      reason: failing ? failingReason(w) : a.statusReason,
      registry_status: a.status,
      status_changed_at: a.statusChangedAt,
      consecutive_probe_failures: a.consecutiveFailures,
      last_probe: a.lastProbe && { at: a.lastProbe.at, ok: a.lastProbe.ok, latency_ms: a.lastProbe.latencyMs },
      work: w,
    };
  });
}

/** `telemetry.latency`: the latency of the agent's recent probes and of its completed tasks. */
export async function latency(pool: Pool, registry: AgentRegistry, tenant: string, agentId: string) {
  const probes = await registry.probes(tenant, agentId, 50);
  const answered = probes.filter((p) => p.ok && p.latencyMs !== null).map((p) => p.latencyMs!).sort((x, y) => x - y);
  const at = (q: number) => (answered.length ? answered[Math.min(answered.length - 1, Math.floor(q * answered.length))]! : null);
  const rep = await reputationOf(pool, tenant, agentId);
  return {
    agent_id: agentId,
    probes: { count: probes.length, answered: answered.length, latency_ms: { p50: at(0.5), p90: at(0.9), max: answered.at(-1) ?? null }, last: probes[0] ?? null },
    tasks: { completed: rep?.completed ?? 0, latency_ms: rep?.latencyMs ?? null },
  };
}

/** `reputation`: the trust events' figures and the recent work. */
export async function reputation(pool: Pool, tenant: string, agentId: string) {
  const rep = await reputationOf(pool, tenant, agentId);
  const work = (await recentWork(pool, tenant, [agentId])).get(agentId)!;
  return { agent_id: agentId, ...rep, success_rate: rep?.successRate ?? null, recent_work: work };
}

/**
 * `audit.reconcile`: the ledger's invariants (GET /ledger/reconcile), with the violations narrowed to one agent's
 * tasks and account, or to one task. Without either it is the tenant's whole reconciliation.
 */
export async function auditReconcile(pool: Pool, tenant: string, scope: { agentId?: string; taskId?: string }) {
  const report = await reconcile(pool, tenant);
  if (!scope.agentId && !scope.taskId) return { scope: 'tenant', ...report };
  const tasks = new Set<string>();
  if (scope.taskId) tasks.add(scope.taskId);
  if (scope.agentId) {
    const { rows } = await pool.query<{ task_id: string }>(
      'SELECT task_id FROM tasks WHERE tenant = $1 AND agent_id = $2 UNION SELECT task_id FROM settlements WHERE tenant = $1 AND agent_id = $2',
      [tenant, scope.agentId],
    );
    for (const r of rows) tasks.add(r.task_id);
  }
  const account = scope.agentId && `agent:${scope.agentId}`;
  const mine = (v: Record<string, unknown>) => (typeof v.taskId === 'string' && tasks.has(v.taskId)) || (account !== undefined && v.account === account);
  const invariants = report.invariants.map((i) => {
    const violations = i.violations.filter(mine);
    return { ...i, ok: violations.length === 0, violations };
  });
  return {
    scope: scope.taskId ? `task ${scope.taskId}` : `agent ${scope.agentId}`,
    ok: invariants.every((i) => i.ok),
    checkedAt: report.checkedAt,
    tasks: tasks.size,
    settling: report.settling.filter((t) => tasks.has(t)),
    invariants,
  };
}

/**
 * `audit.settlement`: one task's settlement verified against the ledger: settled once and in the task's final
 * state, its movement balanced, the requester charged exactly the settled amount, within the hold, one trust event.
 */
export async function auditSettlement(pool: Pool, tenant: string, taskId: string) {
  const { rows: t } = await pool.query<{ state: string; agent_id: string }>('SELECT state, agent_id FROM tasks WHERE tenant = $1 AND task_id = $2', [tenant, taskId]);
  if (!t[0]) return undefined;
  const { rows: s } = await pool.query('SELECT id, final_state, amount_minor::bigint AS amount, created_at FROM settlements WHERE tenant = $1 AND task_id = $2', [tenant, taskId]);
  const settlement = s[0];
  const { rows: entries } = settlement
    ? await pool.query('SELECT account, amount_minor::bigint AS amount FROM ledger_entries WHERE settlement_id = $1 ORDER BY account', [settlement.id])
    : { rows: [] as { account: string; amount: string }[] };
  const { rows: holds } = await pool.query('SELECT state, amount_minor::bigint AS amount, captured_minor::bigint AS captured FROM holds WHERE tenant = $1 AND task_id = $2', [tenant, taskId]);
  const { rows: trust } = await pool.query('SELECT outcome FROM trust_events WHERE tenant = $1 AND task_id = $2', [tenant, taskId]);
  const amount = settlement ? Number(settlement.amount) : 0;
  const debited = -entries.map((e) => Number(e.amount)).filter((a) => a < 0).reduce((x, y) => x + y, 0);
  const hold = holds[0] && { state: holds[0].state as string, amount_minor: Number(holds[0].amount), captured_minor: holds[0].captured === null ? null : Number(holds[0].captured) };
  const checks = {
    settled_once: s.length === 1,
    final_state_matches: settlement?.final_state === t[0].state,
    movement_balanced: entries.reduce((x, e) => x + Number(e.amount), 0) === 0,
    charged_settled_amount: settlement ? debited === amount : false,
    within_hold: amount === 0 || (hold !== undefined && amount <= hold.amount_minor && hold.captured_minor === amount),
    hold_closed: !hold || hold.state !== 'held',
    trust_event: trust.length === 1,
  };
  return {
    task_id: taskId,
    agent_id: t[0].agent_id,
    state: t[0].state,
    verified: Object.values(checks).every(Boolean),
    checks,
    settlement: settlement ? { final_state: settlement.final_state, amount_minor: amount, settled_at: settlement.created_at.toISOString() } : null,
    entries: entries.map((e) => ({ account: e.account, amount_minor: Number(e.amount) })),
    hold: hold ?? null,
    trust_outcome: trust[0]?.outcome ?? null,
  };
}
