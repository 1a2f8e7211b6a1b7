/** Agents as last read, per tenant and id: while PostgreSQL is away, an agent's endpoint still serves reads. */
import type { Agent, AgentRegistry } from '../../core/agents/registry';
import { outageOf } from '../../core/health';

export class KnownAgents {
  private readonly known = new Map<string, Agent>();

  async get(registry: AgentRegistry, tenant: string, id: string): Promise<Agent | undefined> {
    const key = `${tenant}/${id}`;
    try {
      const agent = await registry.lookup(tenant, id);
      if (agent) {
        if (this.known.size > 10_000) this.known.clear();
        this.known.set(key, agent);
      } else this.known.delete(key);
      return agent;
    } catch (err) {
      const stale = outageOf(err) ? this.known.get(key) : undefined;
      if (stale) return stale;
      throw err;
    }
  }
}
