/**
 * What an agent says a task cost (`metadata.cost` on its task or status message), in Switchboard's minor
 * units. The shapes agents send (docs/api.md: "Agent-reported cost"):
 *   - an integer: minor units, as Switchboard's own agents report it;
 *   - `{amountMinor}`: the same, named;
 *   - `{usd, tokens?}` (Society AI-style infrastructure cost): US dollars, charged as cents, i.e. minor units
 *     are taken to be cents; rounded to the nearest cent. `tokens` is informational (it stays in the task's
 *     metadata).
 * Anything else (negative, not finite, another currency) is ignored: the registered price is charged.
 */
export function costOf(metadata: Record<string, unknown> | undefined): number | undefined {
  const cost = metadata?.cost;
  if (typeof cost === 'number') return minor(cost);
  if (!cost || typeof cost !== 'object' || Array.isArray(cost)) return undefined;
  const c = cost as Record<string, unknown>;
  if (typeof c.amountMinor === 'number') return minor(c.amountMinor);
  if (typeof c.usd === 'number' && Number.isFinite(c.usd) && c.usd >= 0) return minor(Math.round(c.usd * CENTS_PER_USD));
  return undefined;
}

const CENTS_PER_USD = 100;

const minor = (n: number): number | undefined => (Number.isSafeInteger(n) && n >= 0 ? n : undefined);
