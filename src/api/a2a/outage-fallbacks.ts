/**
 * What keeps the RPC core answering through an outage: handler errors that mean a dependency is down become
 * the A2A error naming it (-32054, HTTP 503), and an agent's endpoint keeps serving reads from the agent as
 * last read while PostgreSQL is away.
 */
import { a2aError, protocolError } from './errors';
import type { Agent, AgentRegistry } from '../../core/agents/registry';
import { type Health, outageOf } from '../../core/health';

/**
 * The request handler with every outage error turned into the A2A error for it (-32054, naming the dependency),
 * which the SDK renders in the caller's dialect and the transport sends with HTTP 503, and every error raised below
 * the protocol layer (task/errors.ts) into the SDK error that renders it.
 */
export function mappingOutages<T extends object>(handler: T, health: Health): T {
  const map = (err: unknown) => {
    const down = health.unavailable(err);
    return down ? a2aError('Unavailable', down.message) : protocolError(err);
  };
  return new Proxy(handler, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        const out = value.apply(target, args);
        if (out && typeof out.then === 'function') return out.catch((err: unknown) => Promise.reject(map(err)));
        if (out && typeof out[Symbol.asyncIterator] === 'function') {
          return (async function* () {
            try {
              yield* out;
            } catch (err) {
              throw map(err);
            }
          })();
        }
        return out;
      };
    },
  });
}

/** Agents as last read, per tenant and id: while PostgreSQL is away, an agent's endpoint still serves reads. */
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
