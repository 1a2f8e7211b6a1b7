/**
 * A process's copy of rows every new task reads and that rarely change (an agent, a tenant's enforced policies),
 * so the front door does not ask PostgreSQL for them on each call. Entries are dropped as soon as the event hub
 * hears a change (migration 018's triggers NOTIFY whoever wrote the row), and live at most `ttlMs` in any case:
 * the bound on a change whose notice was lost. While the hub's LISTEN connection is down (or there is none:
 * embedded PGlite, where NOTIFY does not cross connections) nothing is cached, since no change would be heard.
 */
import type { ConfigNotice, EventHub } from './hub';

export const CONFIG_CACHE_TTL_MS = 2_000;

/** Cache keys: an agent's, and a tenant's policies'. */
export const configKey = (kind: ConfigNotice['kind'], tenant: string, id?: string | null): string => `${kind}\u0000${tenant}\u0000${id ?? ''}`;

export class ConfigCache<V> {
  private readonly entries = new Map<string, { value: V; until: number }>();
  /** Bumped by every drop: a load that was under way meanwhile may have read the old row, so it is not kept. */
  private generation = 0;

  constructor(
    private readonly hub: Pick<EventHub, 'listening'> | undefined,
    private readonly ttlMs = CONFIG_CACHE_TTL_MS,
  ) {}

  /** The cached value of `key`, or what `load` reads (kept for next time when no change came meanwhile). */
  async read(key: string, load: () => Promise<V>): Promise<V> {
    if (!this.hub?.listening) return load();
    const hit = this.entries.get(key);
    if (hit && hit.until > Date.now()) return hit.value;
    const generation = this.generation;
    const value = await load();
    if (generation === this.generation && this.hub.listening) {
      if (this.entries.size > 10_000) this.entries.clear();
      this.entries.set(key, { value, until: Date.now() + this.ttlMs });
    }
    return value;
  }

  /** Drops `key`'s entry, or every entry (undefined). */
  drop(key?: string): void {
    this.generation++;
    if (key === undefined) this.entries.clear();
    else this.entries.delete(key);
  }
}
