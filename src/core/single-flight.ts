/**
 * Concurrent loads of one key share the first one's promise: when a cached row expires under load, the requests
 * that miss it together ask PostgreSQL once, not once each (the caches of src/core/events/config-cache.ts and
 * src/core/auth/: agents, policies, credentials, quotas, keys).
 */
export class SingleFlight<V> {
  private readonly running = new Map<string, Promise<V>>();

  /** `load()`'s result, or the result of the load of `key` already running. */
  run(key: string, load: () => Promise<V>): Promise<V> {
    const running = this.running.get(key);
    if (running) return running;
    const started = load().finally(() => {
      if (this.running.get(key) === started) this.running.delete(key);
    });
    this.running.set(key, started);
    return started;
  }

  /** Later calls for `key` (every key, without one) load afresh: what is running may have read a row changed since. */
  forget(key?: string): void {
    if (key === undefined) this.running.clear();
    else this.running.delete(key);
  }
}
