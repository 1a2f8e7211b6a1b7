/**
 * A process's copy of rows every new task reads and that rarely change (an agent, a tenant's enforced policies, an
 * agent's sealed credential), so neither the front door nor an agent call asks PostgreSQL for them each time.
 * Entries are dropped as soon as the event hub hears a change (migrations 018 and 022: triggers NOTIFY whoever
 * wrote the row), and live at most `ttlMs` in any case:
 * the bound on a change whose notice was lost. While the hub's LISTEN connection is down (or it has none: an
 * in-process hub of a test) nothing is cached, since no change would be heard.
 */
import type { ConfigNotice, EventHub } from './hub';
import { SingleFlight } from '../single-flight';

export const CONFIG_CACHE_TTL_MS = 2_000;

/** One table's rows (`kind`, the table the trigger names), by tenant and, for agents, id. */
export class ConfigCache<V> {
  private readonly entries = new Map<string, { value: V; until: number }>();
  /** Misses of one entry at the same time read it once. */
  private readonly loads = new SingleFlight<V>();
  /** Bumped by every drop: a load that was under way meanwhile may have read the old row, so it is not kept. */
  private generation = 0;
  private readonly unsubscribe: () => void;

  constructor(
    private readonly hub: Pick<EventHub, 'listening' | 'onConfigChange'> | undefined,
    kind: ConfigNotice['kind'],
    private readonly ttlMs = CONFIG_CACHE_TTL_MS,
  ) {
    // A notice names the changed row; none (undefined) means the connection was (re)made and any row may have changed.
    this.unsubscribe =
      hub?.onConfigChange((n) => {
        if (!n) this.drop();
        else if (n.kind === kind) this.drop(n.tenant, n.id);
      }) ?? (() => undefined);
  }

  /** The cached value for (tenant, id), or what `load` reads (kept for next time when no change came meanwhile). */
  async read(tenant: string, id: string | null, load: () => Promise<V>): Promise<V> {
    if (!this.hub?.listening) return load();
    const key = keyOf(tenant, id);
    const hit = this.entries.get(key);
    if (hit && hit.until > Date.now()) return hit.value;
    const generation = this.generation;
    const value = await this.loads.run(key, load);
    if (generation === this.generation && this.hub.listening) {
      if (this.entries.size > 10_000) this.entries.clear();
      this.entries.set(key, { value, until: Date.now() + this.ttlMs });
    }
    return value;
  }

  /** Drops (tenant, id)'s entry, or every entry (no tenant): after a change this process made, or heard of. */
  drop(tenant?: string, id: string | null = null): void {
    this.generation++;
    if (tenant === undefined) this.entries.clear();
    else this.entries.delete(keyOf(tenant, id));
    this.loads.forget(tenant === undefined ? undefined : keyOf(tenant, id));
  }

  /** Stops hearing changes (the app closes). */
  close(): void {
    this.unsubscribe();
  }
}

const keyOf = (tenant: string, id: string | null): string => `${tenant}\u0000${id ?? ''}`;
