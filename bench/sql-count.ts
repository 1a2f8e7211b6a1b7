/**
 * SQL statements this process sends, counted by wrapping pg's Client#query (every pool.query and every
 * transaction's client.query go through it), grouped by the statement's first words. Bench only.
 */
import { Client } from 'pg';

const counts = new Map<string, number>();
let installed = false;

function install(): void {
  if (installed) return;
  installed = true;
  const query = Client.prototype.query as (...args: unknown[]) => unknown;
  Client.prototype.query = function (this: Client, ...args: unknown[]) {
    const first = args[0] as string | { text?: string } | undefined;
    const text = typeof first === 'string' ? first : (first?.text ?? '(submittable)');
    const key = text.replace(/\s+/g, ' ').trim().slice(0, 70);
    counts.set(key, (counts.get(key) ?? 0) + 1);
    return query.apply(this, args);
  } as typeof Client.prototype.query;
}

/** Starts counting; `stop()` returns the statements since, by statement, most frequent first. */
export function sqlMeter(): { stop(): { total: number; byStatement: [string, number][] } } {
  install();
  const before = new Map(counts);
  return {
    stop() {
      const byStatement = [...counts]
        .map(([k, n]) => [k, n - (before.get(k) ?? 0)] as [string, number])
        .filter(([, n]) => n > 0)
        .sort((a, b) => b[1] - a[1]);
      return { total: byStatement.reduce((a, [, n]) => a + n, 0), byStatement };
    },
  };
}
