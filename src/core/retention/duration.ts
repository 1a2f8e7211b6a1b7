/**
 * Durations as operators write them: a whole number and a unit, `500ms`, `4s`, `15m`, `12h`, `30d`.
 */
const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** @returns the duration in ms, or undefined when `text` is not one. */
export function parseDuration(text: string): number | undefined {
  const m = /^(\d{1,12})(ms|s|m|h|d)$/.exec(text.trim());
  if (!m) return undefined;
  const ms = Number(m[1]) * UNITS[m[2]!]!;
  return Number.isSafeInteger(ms) ? ms : undefined;
}

/** The largest unit that writes `ms` exactly: 2592000000 → `30d`, 4000 → `4s`. */
export function formatDuration(ms: number): string {
  for (const unit of ['d', 'h', 'm', 's'] as const) if (ms % UNITS[unit]! === 0) return `${ms / UNITS[unit]!}${unit}`;
  return `${ms}ms`;
}

export const DURATION_HINT = 'must be a duration: a whole number and ms, s, m, h or d (e.g. 30d, 4s)';

/**
 * The longest task retention accepted: ten years. The sweep's cut-off is `now()` less the retention, and
 * PostgreSQL's timestamps begin in 4713 BC: a tenant's `10000000d` made every sweep fail with "timestamp out of range".
 */
export const MAX_RETENTION_MS = 3650 * UNITS.d!;

export const RETENTION_HINT = `${DURATION_HINT}, from 1s to ${formatDuration(MAX_RETENTION_MS)}`;

/** @returns a task retention in ms (a duration from 1 s to MAX_RETENTION_MS), or undefined when `text` is not one. */
export function parseRetention(text: string): number | undefined {
  const ms = parseDuration(text);
  return ms !== undefined && ms >= 1000 && ms <= MAX_RETENTION_MS ? ms : undefined;
}
