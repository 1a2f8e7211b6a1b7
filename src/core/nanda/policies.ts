/**
 * Governance policies for a tenant's registered agents (NANDA `policy.*`): named rule sets an operator creates,
 * anyone of the tenant evaluates against an agent, and an operator enforces. An enforced policy applies at
 * routing (the router skips an agent it denies) and at task start (the task intake refuses the task with
 * PolicyDenied, naming the policy, before anything starts).
 */
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { z } from 'zod';
import { taskError } from '../../../task/errors';
import type { Agent } from '../agents/registry';
import { ConfigCache } from '../events/config-cache';
import type { EventHub } from '../events/hub';
import { reputationOf } from '../trust/reputation';

export const PolicyRules = z
  .object({
    /** The agent's price (minor units) may not be above this. */
    max_price_minor: z.number().int().min(0).optional(),
    /** The agent's card must carry a signature that verifies. */
    require_verified_card: z.boolean().optional(),
    /** The agent's skills must carry every one of these tags (any case). */
    required_tags: z.array(z.string().min(1).max(100)).max(50).optional(),
    /** These agents are denied outright. */
    denied_agents: z.array(z.string().min(1).max(200)).max(1000).optional(),
    /** The agent's success rate (0–1) may not be below this; an agent without finished tasks is not judged. */
    min_reputation: z.number().min(0).max(1).optional(),
  })
  .strict()
  .refine((r) => Object.values(r).some((v) => v !== undefined), { message: 'a policy needs at least one rule' });
export type PolicyRules = z.infer<typeof PolicyRules>;

export interface Policy {
  id: string;
  name: string;
  rules: PolicyRules;
  enforced: boolean;
  createdBy: string;
  createdAt: string;
}

export interface PolicyVerdict {
  policy_id: string;
  name: string;
  enforced: boolean;
  allowed: boolean;
  /** One sentence per broken rule. */
  violations: string[];
}

/** Thrown when a policy of that name exists already (answered -32602 naming the field). */
export class PolicyConflict extends Error {}

export async function createPolicy(pool: Pool, tenant: string, by: string, p: { name: string; rules: PolicyRules; enforced: boolean }): Promise<Policy> {
  const id = `pol-${randomUUID()}`;
  const { rows } = await pool.query(
    `INSERT INTO policies (tenant, id, name, rules, enforced, created_by) VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (tenant, name) DO NOTHING RETURNING *`,
    [tenant, id, p.name, p.rules, p.enforced, by],
  );
  if (!rows[0]) throw new PolicyConflict(`a policy named ${p.name} exists already`);
  return toPolicy(rows[0]);
}

export async function listPolicies(pool: Pick<Pool, 'query'>, tenant: string, onlyEnforced = false): Promise<Policy[]> {
  const { rows } = await pool.query(`SELECT * FROM policies WHERE tenant = $1 ${onlyEnforced ? 'AND enforced' : ''} ORDER BY created_at, id`, [tenant]);
  return rows.map(toPolicy);
}

export async function getPolicy(pool: Pool, tenant: string, id: string): Promise<Policy | undefined> {
  const { rows } = await pool.query('SELECT * FROM policies WHERE tenant = $1 AND id = $2', [tenant, id]);
  return rows[0] && toPolicy(rows[0]);
}

/** @returns the policy as it is now, or undefined when the tenant has no such policy. */
export async function setEnforced(pool: Pool, tenant: string, id: string, enforced: boolean): Promise<Policy | undefined> {
  const { rows } = await pool.query('UPDATE policies SET enforced = $3, updated_at = now() WHERE tenant = $1 AND id = $2 RETURNING *', [tenant, id, enforced]);
  return rows[0] && toPolicy(rows[0]);
}

/**
 * The tenants' enforced policies for calls (task start, routing), through the process's cache: a change to a
 * tenant's policies in any process clears its entry at once (migration 018's trigger), and an entry lives 2 s at
 * most. Policy actions and evaluations read PostgreSQL itself.
 */
export class EnforcedPolicies {
  private readonly cache: ConfigCache<Policy[]>;

  constructor(
    private readonly pool: Pool,
    hub?: EventHub,
  ) {
    this.cache = new ConfigCache(hub, 'policies');
  }

  of(tenant: string): Promise<Policy[]> {
    return this.cache.read(tenant, null, () => listPolicies(this.pool, tenant, true));
  }

  /** After a change in this process: its next call sees it even before the trigger's notice comes back. */
  forget(tenant: string): void {
    this.cache.drop(tenant);
  }

  /** Stops hearing changes (the app closes). */
  close(): void {
    this.cache.close();
  }
}

/** How `agent` fares under each of `policies`. */
export async function evaluatePolicies(pool: Pool, tenant: string, agent: Agent, policies: Policy[]): Promise<PolicyVerdict[]> {
  // The reputation is read only when a rule needs it, and once.
  const needsReputation = policies.some((p) => p.rules.min_reputation !== undefined);
  const successRate = needsReputation ? ((await reputationOf(pool, tenant, agent.id))?.successRate ?? null) : null;
  const tags = new Set(((agent.card.skills ?? []) as { tags?: unknown }[]).flatMap((s) => (Array.isArray(s.tags) ? s.tags : [])).map((t) => String(t).toLowerCase()));
  return policies.map((p) => {
    const r = p.rules;
    const violations: string[] = [];
    if (r.denied_agents?.includes(agent.id)) violations.push(`agent ${agent.id} is denied`);
    if (r.max_price_minor !== undefined && agent.priceMinor > r.max_price_minor) violations.push(`price ${agent.priceMinor} is above ${r.max_price_minor}`);
    if (r.require_verified_card && agent.signature.status !== 'verified') violations.push(`the card's signature is ${agent.signature.status}, not verified`);
    const missing = (r.required_tags ?? []).filter((t) => !tags.has(t.toLowerCase()));
    if (missing.length) violations.push(`the card lacks the tags ${missing.join(', ')}`);
    if (r.min_reputation !== undefined && successRate !== null && successRate < r.min_reputation) {
      violations.push(`success rate ${successRate} is below ${r.min_reputation}`);
    }
    return { policy_id: p.id, name: p.name, enforced: p.enforced, allowed: violations.length === 0, violations };
  });
}

/**
 * The first enforced policy that denies `agent`, if any.
 * @param enforced the tenant's enforced policies, when the caller judges several agents (read here otherwise).
 */
export async function denialOf(pool: Pool, tenant: string, agent: Agent, enforced?: Policy[]): Promise<PolicyVerdict | undefined> {
  enforced ??= await listPolicies(pool, tenant, true);
  if (enforced.length === 0) return undefined;
  return (await evaluatePolicies(pool, tenant, agent, enforced)).find((v) => !v.allowed);
}

/** The error a task denied by `verdict` is answered with (nothing was started). */
export function policyDenied(agent: Agent, verdict: PolicyVerdict): Error {
  return taskError('PolicyDenied', `Policy ${verdict.name} (${verdict.policy_id}) denies agent ${agent.id}: ${verdict.violations.join('; ')}; nothing was started`);
}

/**
 * Task start's check: refuses a task for an agent an enforced policy denies.
 * @param enforced the tenant's enforced policies (EnforcedPolicies.of).
 * @throws PolicyDenied naming the policy and the broken rules.
 */
export async function enforcePolicies(pool: Pool, tenant: string, agent: Agent, enforced: Policy[]): Promise<void> {
  const verdict = await denialOf(pool, tenant, agent, enforced);
  if (verdict) throw policyDenied(agent, verdict);
}

function toPolicy(r: { id: string; name: string; rules: PolicyRules; enforced: boolean; created_by: string; created_at: Date }): Policy {
  return { id: r.id, name: r.name, rules: r.rules, enforced: r.enforced, createdBy: r.created_by, createdAt: r.created_at.toISOString() };
}
