/**
 * Routing for the front door (POST /a2a): which registered agent a new task's first message goes to, and why.
 * The message may name an agent (`metadata.agentId`, or Society AI's `metadata.executor.name`: an agent id or name)
 * or a skill (`metadata.skillId`, or Society AI's `metadata.skill_used`); otherwise its text is matched against the
 * registry's search among healthy agents: hybrid (full text and meaning, src/core/agents/search.ts) when a model service
 * is configured, else full text. Ties go to the better reputation.
 * Enforced governance policies (src/core/nanda/policies.ts) and recent work (src/core/trust/work-health.ts) narrow the
 * candidates first: a denied agent is never chosen, a failing one only when no other is left.
 */
import type { Pool } from 'pg';
import { a2aError } from './errors';
import { type EnforcedPolicies, type PolicyVerdict, denialOf, policyDenied } from '../../core/nanda/policies';
import { reputationOf } from '../../core/trust/reputation';
import { recentWork } from '../../core/trust/work-health';
import type { Agent, AgentRegistry, RankedAgent } from '../../core/agents/registry';
import { rankedBy } from '../../core/agents/search';
import type { RouteReason, RoutingDecision } from '../../core/db/task-routes';

export type { RouteReason, RoutingDecision };


/** The parts of a first message routing reads (1.0 and 0.3 parts both carry `text`). */
export interface RoutableMessage {
  parts?: { text?: unknown }[];
  metadata?: Record<string, unknown> | null;
}

// A long message would make a long OR query; its first words are enough to pick an agent.
const MAX_QUERY_WORDS = 32;
// Candidates read per decision: enough for ties to be found, few enough that reputations are cheap to read.
const CANDIDATES = 10;

export class Router {
  constructor(
    private readonly registry: AgentRegistry,
    private readonly pool: Pool,
    private readonly policies: EnforcedPolicies,
  ) {}

  /**
   * Picks the agent for a new task.
   * @throws InvalidParams for metadata.agentId/skillId that are not strings; Unroutable (-32051) when no
   *   agent can take the message. Nothing is started either way.
   */
  async route(tenant: string, message: RoutableMessage): Promise<{ agent: Agent; decision: RoutingDecision }> {
    const agentId = stringField(message, 'agentId') ?? (await this.executorOf(tenant, message));
    const skillId = stringField(message, 'skillId') ?? stringField(message, 'skill_used');
    if (agentId !== undefined) {
      const agent = await this.registry.lookup(tenant, agentId);
      if (!agent) throw a2aError('Unroutable', `No agent ${agentId} is registered on this gateway (message.metadata.agentId)`);
      if (agent.status === 'down') throw a2aError('Unroutable', `Agent ${agentId} is down (${agent.statusReason}); nothing was started`);
      if (skillId !== undefined && !skillIds(agent).includes(skillId)) {
        throw a2aError('Unroutable', `Agent ${agentId} has no skill ${skillId} (message.metadata.skillId)`);
      }
      const denied = await denialOf(this.pool, tenant, agent, await this.policies.of(tenant));
      if (denied) throw policyDenied(agent, denied);
      return { agent, decision: { agentId, skillId: skillId ?? null, reason: 'metadata.agentId', rank: null, query: null, rankedBy: null, tiedWith: [] } };
    }
    if (skillId !== undefined) {
      // Healthy agents first; a degraded one (a slow or failed probe) still beats no agent; a down one never.
      for (const status of ['healthy', 'degraded'] as const) {
        const { agents: found } = await this.registry.search(tenant, { skills: [skillId], statuses: [status], pageSize: CANDIDATES });
        const agents = await this.admissible(tenant, found);
        if (agents.length === 0) continue;
        const [best, ...tied] = await this.byReputation(tenant, agents);
        return { agent: best!, decision: { agentId: best!.id, skillId, reason: 'metadata.skillId', rank: null, query: null, rankedBy: null, tiedWith: tied.map((a) => a.id) } };
      }
      throw a2aError('Unroutable', `No healthy or degraded agent has the skill ${skillId} (message.metadata.skillId); nothing was started`);
    }
    const words = wordsOf(message);
    if (words.length === 0) {
      throw a2aError('Unroutable', 'The message has no text to route by: name an agent (metadata.agentId) or a skill (metadata.skillId), or send text');
    }
    // websearch syntax ANDs bare words; a request matches an agent on any of its words, ranked by ts_rank. With a
    // model service the message's words are embedded as they are, and an agent may match by meaning alone.
    const query = words.join(' or ');
    const { agents: found } = await this.registry.search(tenant, { q: query, meaning: words.join(' '), statuses: ['healthy'], pageSize: CANDIDATES });
    const agents = await this.admissible(tenant, found);
    if (agents.length === 0) throw a2aError('Unroutable', 'No healthy agent matches the message text; name an agent (metadata.agentId) or a skill (metadata.skillId)');
    const top = agents[0]!.rank ?? 0;
    // ts_rank is a real (float4): equal scores can differ in the last bits once cast, so compare with a tolerance
    // (a fused score is a float8 sum of the same few fractions: equal ranks give equal sums).
    const tied = agents.filter((a) => Math.abs((a.rank ?? 0) - top) <= 1e-6 * Math.max(1, top));
    const [best, ...rest] = await this.byReputation(tenant, tied);
    return {
      agent: best!,
      decision: { agentId: best!.id, skillId: bestSkill(best!, words), reason: 'search', rank: top, query, rankedBy: rankedBy(best!), tiedWith: rest.map((a) => a.id) },
    };
  }

  /** Society AI names the executing agent in `metadata.executor.name`: a registered agent's id, else its name. */
  private async executorOf(tenant: string, message: RoutableMessage): Promise<string | undefined> {
    const name = (message.metadata?.executor as { name?: unknown } | undefined)?.name;
    if (name === undefined || name === null || name === '') return undefined;
    const field = 'message.metadata.executor.name';
    if (typeof name !== 'string') throw a2aError('InvalidParams', `${field} must be a string`, [{ field, description: 'must be a string' }]);
    if (await this.registry.lookup(tenant, name)) return name;
    const named = (await this.registry.list(tenant)).find((a) => a.name === name);
    if (!named) throw a2aError('Unroutable', `No agent named ${name} is registered on this gateway (${field})`);
    return named.id;
  }

  /**
   * The candidates routing may use, in their order (issue 12): those an enforced policy denies are dropped, and so
   * are those whose recent tasks all failed (src/core/trust/work-health.ts) while any other is left, so a node that
   * answers probes but fails its work never beats one that works, whatever its text rank.
   * @throws PolicyDenied when every candidate is denied (naming the first denial's policy).
   */
  private async admissible(tenant: string, agents: RankedAgent[]): Promise<RankedAgent[]> {
    if (agents.length === 0) return agents;
    const allowed: RankedAgent[] = [];
    let firstDenial: { agent: RankedAgent; verdict: PolicyVerdict } | undefined;
    const enforced = await this.policies.of(tenant);
    for (const a of agents) {
      const verdict = await denialOf(this.pool, tenant, a, enforced);
      if (!verdict) allowed.push(a);
      else firstDenial ??= { agent: a, verdict };
    }
    // Every candidate is denied: say which policy, rather than that nothing matched.
    if (allowed.length === 0 && firstDenial) throw policyDenied(firstDenial.agent, firstDenial.verdict);
    const work = await recentWork(this.pool, tenant, allowed.map((a) => a.id));
    const working = allowed.filter((a) => !work.get(a.id)?.failing);
    // Only failing agents are left: one of them still beats no agent.
    return working.length ? working : allowed;
  }

  /** Best success rate first; an agent without a record after every agent with one; then the search order. */
  private async byReputation(tenant: string, agents: RankedAgent[]): Promise<RankedAgent[]> {
    if (agents.length < 2) return agents;
    const rates = await Promise.all(agents.map(async (a) => (await reputationOf(this.pool, tenant, a.id))?.successRate ?? -1));
    return agents.map((a, i) => ({ a, rate: rates[i]!, i })).sort((x, y) => y.rate - x.rate || x.i - y.i).map((x) => x.a);
  }
}

function stringField(message: RoutableMessage, key: 'agentId' | 'skillId' | 'skill_used'): string | undefined {
  const v = message.metadata?.[key];
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string') {
    const field = `message.metadata.${key}`;
    throw a2aError('InvalidParams', `${field} must be a string`, [{ field, description: 'must be a string' }]);
  }
  return v;
}

function wordsOf(message: RoutableMessage): string[] {
  const text = (message.parts ?? []).map((p) => (typeof p.text === 'string' ? p.text : '')).join(' ');
  // `or` is websearch syntax: as a word of the message it would join nothing.
  return (text.match(/[\p{L}\p{N}]+/gu) ?? []).filter((w) => w.toLowerCase() !== 'or').slice(0, MAX_QUERY_WORDS);
}

function skillIds(agent: Agent): string[] {
  return ((agent.card.skills ?? []) as { id?: unknown }[]).map((s) => s.id).filter((id): id is string => typeof id === 'string');
}

/** The agent's skill sharing most (lower-cased) words with the message; null when none shares any. */
function bestSkill(agent: Agent, words: string[]): string | null {
  const wanted = new Set(words.map((w) => w.toLowerCase()));
  let best: { id: string; score: number } | null = null;
  for (const s of (agent.card.skills ?? []) as Record<string, unknown>[]) {
    if (typeof s.id !== 'string') continue;
    const text = [s.name, s.description, ...((s.tags as unknown[]) ?? []), ...((s.examples as unknown[]) ?? [])].filter((x) => typeof x === 'string').join(' ');
    const score = new Set((text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []).filter((w) => wanted.has(w))).size;
    if (score > 0 && (!best || score > best.score)) best = { id: s.id, score };
  }
  return best?.id ?? null;
}
