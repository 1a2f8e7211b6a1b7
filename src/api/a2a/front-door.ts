/**
 * The routing front door, for clients that do not know which agent they need: the resolver of Switchboard's own
 * JSON-RPC endpoint (`POST /a2a`, src/api/routes/front-door.ts) and its agent card. A new task goes to the agent its
 * first message's metadata names, or to the best search match for its text; every other call works on an
 * existing task of the tenant, whichever agent runs it.
 */
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { FrontDoorHandler } from './front-door-handler';
import { a2aError } from './errors';
import type { RpcCall, RpcCoreDeps, RpcTarget } from './rpc-handler';
import { type CardDialect, type GatewayEndpoints, gatewayCard } from '../../core/agents/gateway-card';
import type { Agent, AgentRegistry } from '../../core/agents/registry';
import { type RoutableMessage, Router } from './router';
import { claimWithinQuota } from '../../core/auth/quotas';
import { type StoredRoute, recordRoute, routeOf } from '../../core/db/task-routes';
import { findTask, taskOfMessage } from '../../core/db/task-store';
import type { EnforcedPolicies } from '../../core/nanda/policies';

const SEND_METHODS = new Set(['SendMessage', 'SendStreamingMessage', 'message/send', 'message/stream']);
// The card lists a summary of what the registered agents can do, not a catalogue: GET /agents?q= is that.
const CARD_SKILLS = 50;

export interface FrontDoorDeps {
  registry: AgentRegistry;
  pool: Pool;
  policies: EnforcedPolicies;
}

export class FrontDoor {
  private readonly router: Router;

  constructor(private readonly d: FrontDoorDeps) {
    this.router = new Router(d.registry, d.pool, d.policies);
  }

  /**
   * The target of a call to POST /a2a. A first message (no taskId) is routed, its task id claimed and the
   * decision recorded before the handler starts the task; the same message sent again (a resend after a lost
   * answer, or a stream reconnect) goes to the agent its task already has, without routing again.
   * @throws Unroutable (-32051) or InvalidParams when a first message cannot be routed; nothing is started.
   */
  async resolve(call: RpcCall, deps: RpcCoreDeps): Promise<RpcTarget> {
    const { pool } = this.d;
    const { caller } = call;
    const { tenant } = caller;
    const rpcUrl = `${call.base}/a2a`;
    const card = () => switchboardCard(this.d.registry, tenant, { jsonRpc: rpcUrl });
    const target = (agent: Agent | undefined, route?: StoredRoute): RpcTarget => ({
      handler: (cursor, dialect) => new FrontDoorHandler(agent, { caller, card }, rpcUrl, deps, cursor, dialect),
      decorate: route && ((result) => withRouting(result, route)),
    });
    const message = (call.params as { message?: RoutableMessage & { messageId: string; taskId?: string } } | undefined)?.message;
    if (!SEND_METHODS.has(call.method) || !message || message.taskId) return target(undefined);

    const known = await taskOfMessage(pool, tenant, message.messageId);
    if (known) {
      const prior = await routeOf(pool, tenant, known);
      const agentId = prior?.agentId ?? (await findTask(pool, tenant, known))?.agentId;
      const agent = agentId && (await this.d.registry.lookup(tenant, agentId));
      if (agent) return target(agent, prior);
      // A reconnect follows the task's log and needs no agent.
      if (call.lastEventId !== undefined) return target(undefined);
      // Claimed but never started (it was refused before its workflow began): route it now.
    }
    const { agent, decision } = await this.router.route(tenant, message);
    const quotas = await deps.quotas.of(tenant);
    if (!quotas) throw a2aError('Internal', `tenant ${tenant} does not exist`);
    // A client-chosen task id (0.1, NEXUS: the dialect's translation asks for it) is claimed like a minted one.
    const { taskId } = await claimWithinQuota(pool, tenant, message.messageId, call.intent?.taskId ?? randomUUID(), quotas, agent.id);
    const stored = await recordRoute(pool, tenant, taskId, tenant, decision);
    // A concurrent send of the same message recorded its decision first: that one stands.
    const executing = stored.agentId === agent.id ? agent : await this.d.registry.lookup(tenant, stored.agentId);
    return target(executing ?? agent, { ...stored, ...(stored.agentId === agent.id && { tiedWith: decision.tiedWith }) });
  }
}

/** The routing decision in the SendMessage answer: 1.0 `{task}`, 0.3 the task itself (`kind: 'task'`). */
function withRouting(result: unknown, route: StoredRoute & { tiedWith?: string[] }): unknown {
  const r = result as { task?: Record<string, unknown>; kind?: string };
  const routing = {
    agentId: route.agentId, skillId: route.skillId, reason: route.reason, rank: route.rank, query: route.query,
    ...(route.rankedBy ? { rankedBy: route.rankedBy } : {}),
    ...(route.tiedWith?.length ? { tiedWith: route.tiedWith } : {}),
  };
  const add = (task: Record<string, unknown>) => {
    const metadata = (task.metadata ?? {}) as Record<string, unknown>;
    const switchboard = (metadata.switchboard ?? {}) as Record<string, unknown>;
    return { ...task, metadata: { ...metadata, switchboard: { ...switchboard, routing } } };
  };
  if (r?.task) return { ...r, task: add(r.task) };
  if (r?.kind === 'task') return add(r as Record<string, unknown>);
  return result;
}

/**
 * Switchboard's own card: the gateway card shape (its interfaces at `endpoints`), with a summary of the skills of
 * the agents routing can use now (healthy and degraded, first CARD_SKILLS distinct skill ids).
 */
export async function switchboardCard(
  registry: AgentRegistry,
  tenant: string | undefined,
  endpoints: GatewayEndpoints,
  dialect: CardDialect = '1.0',
): Promise<{ card: Record<string, unknown>; lastModified?: Date }> {
  const { agents } = tenant ? await registry.search(tenant, { statuses: ['healthy', 'degraded'], pageSize: 100 }) : { agents: [] };
  const skills = new Map<string, Record<string, unknown>>();
  for (const a of agents) {
    for (const s of (a.card.skills ?? []) as Record<string, unknown>[]) {
      if (skills.size >= CARD_SKILLS) break;
      if (typeof s.id !== 'string' || skills.has(s.id)) continue;
      const { id, name, description, tags, examples } = s;
      skills.set(s.id, { id, name, description: description ?? '', tags: tags ?? [], ...(examples ? { examples } : {}) });
    }
  }
  // It changes when one of those agents' cards or health does.
  const changes = agents.flatMap((a) => [Date.parse(a.cardChangedAt), Date.parse(a.statusChangedAt)]);
  const card = gatewayCard(
    {
      name: 'Switchboard',
      description:
        'A durable A2A gateway that routes each new task to a registered agent: the one named in the message metadata ' +
        '(agentId, or skillId), else the healthy agent whose card best matches the message text.',
      version: '1.0.0',
      skills: [...skills.values()],
    },
    endpoints,
    dialect,
  );
  return { card, ...(changes.length ? { lastModified: new Date(Math.max(...changes)) } : {}) };
}
