/**
 * Per-tenant quotas: how fast a tenant's keys may call (requests/s, per tenant and per key), how many of its
 * tasks may be open at once, how many new tasks it may start a day, and how many streams one key may hold open.
 * Each tenant row may set its own (`tenants.quotas`); unset ones come from the process defaults
 * (SWITCHBOARD_QUOTA_*, SWITCHBOARD_RATE_LIMIT_*).
 *
 * A new task over quota is refused before its message is claimed, so nothing starts and the same message can
 * be sent again once the quota allows; the check and the claim share one transaction under a per-tenant
 * advisory lock, so concurrent sends cannot slip past the limit together.
 */
import type { Pool } from 'pg';
import { z } from 'zod';
import { taskError } from '../../../task/errors';
import { DEFAULTS, quotaDefaultsOf } from '../config';
import { DependencyUnavailable, outageOf, poolBusy, poolExhausted } from '../health';
import { prepared } from '../db/pool';
import { SingleFlight } from '../single-flight';
import { quotaRefusals } from '../metrics';
import { EVENTS_CHANNEL, type LoggedEvent, type NewEvent, appendParams, storedEvents } from '../events/event-log';

export const QuotasSchema = z.strictObject({
  requestsPerSecond: z.number().int().min(1).max(1_000_000),
  requestsPerSecondPerKey: z.number().int().min(1).max(1_000_000),
  openTasks: z.number().int().min(0).max(100_000_000),
  newTasksPerDay: z.number().int().min(0).max(1_000_000_000),
  streamsPerKey: z.number().int().min(0).max(1_000_000),
});
export type Quotas = z.infer<typeof QuotasSchema>;
export type QuotaName = keyof Quotas;

/** A tenant's own settings as an admin sends them: any subset; null removes one (back to the default). */
export const QuotaPatchSchema = z.strictObject(
  Object.fromEntries(Object.entries(QuotasSchema.shape).map(([k, v]) => [k, v.nullable().optional()])) as {
    [K in QuotaName]: z.ZodOptional<z.ZodNullable<(typeof QuotasSchema.shape)[K]>>;
  },
);

export const DEFAULT_QUOTAS: Quotas = quotaDefaultsOf(DEFAULTS);

/** The tenants' effective quotas, read through a short cache (an admin's change applies within `ttlMs`). */
export class TenantQuotas {
  private readonly cache = new Map<string, { quotas: Quotas; exists: boolean; until: number }>();
  /** Misses of one tenant at the same time read it once. */
  private readonly loads = new SingleFlight<{ quotas: Partial<Quotas> }[]>();

  constructor(
    private readonly pool: Pool,
    private readonly defaults: Quotas = DEFAULT_QUOTAS,
    private readonly ttlMs = 2_000,
  ) {}

  /** The tenant's quotas, or undefined when there is no such tenant. */
  async of(tenant: string): Promise<Quotas | undefined> {
    const now = Date.now();
    const hit = this.cache.get(tenant);
    if (hit && hit.until > now) return hit.exists ? hit.quotas : undefined;
    let rows: { quotas: Partial<Quotas> }[];
    try {
      rows = await this.loads.run(tenant, async () => (await this.pool.query<{ quotas: Partial<Quotas> }>('SELECT quotas FROM tenants WHERE id = $1', [tenant])).rows);
    } catch (err) {
      // While PostgreSQL is away, what was last read stands (reads that need no database keep working).
      if (hit && outageOf(err)) return hit.exists ? hit.quotas : undefined;
      if (!outageOf(err)) throw err;
      throw poolExhausted(err, this.pool) ? poolBusy(this.pool) : new DependencyUnavailable('postgresql', 'tenant quotas cannot be read');
    }
    const quotas = { ...this.defaults, ...(rows[0]?.quotas ?? {}) };
    if (this.cache.size > 10_000) this.cache.clear();
    this.cache.set(tenant, { quotas, exists: rows.length > 0, until: now + this.ttlMs });
    return rows.length ? quotas : undefined;
  }

  forget(tenant: string): void {
    this.cache.delete(tenant);
    this.loads.forget(tenant);
  }
}

export function quotaError(name: QuotaName, value: number, detail: string): Error {
  quotaRefusals.inc({ quota: name });
  return taskError('QuotaExceeded', `Quota ${name} (${value}) reached: ${detail}. Nothing was started; send the same message again once the quota allows.`);
}

const TERMINAL_STATES = ['TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED'];
/** A claim the projection has not recorded within this long never started (its workflow did not run). */
const UNRECORDED_WINDOW = '5 minutes';

/**
 * Claims a first message's task id (as task-store's claimMessage does) after checking the tenant's open-task
 * and daily quotas, in one statement (the database function `switchboard_claim_within_quota`, migration 016,
 * its counts from partial indexes since 020: the check and the claim under the tenant's advisory lock). The same message sent again finds its task and
 * counts nothing. A task counts as open from its claim until the projection records it terminal.
 * @param first the new task's first events (for the task `candidate`): appended in the same round trip and
 *   transaction when the claim is new (`switchboard_claim_and_submit`, migration 019), and returned as `stored`.
 * @throws the QuotaExceeded A2A error; nothing is claimed (or appended) then.
 */
export async function claimWithinQuota(
  pool: Pool,
  tenant: string,
  messageId: string,
  candidate: string,
  quotas: Quotas,
  agentId?: string,
  first?: NewEvent[],
): Promise<{ taskId: string; resent: boolean; stored: LoggedEvent[] }> {
  const params: unknown[] = [tenant, messageId, candidate, agentId ?? null, quotas.newTasksPerDay, quotas.openTasks, TERMINAL_STATES, UNRECORDED_WINDOW];
  const call = first
    ? 'switchboard_claim_and_submit($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $10)'
    : 'switchboard_claim_within_quota($1, $2, $3, $4, $5, $6, $7, $8)';
  if (first) params.push(appendParams(tenant, candidate, first)[2], EVENTS_CHANNEL);
  const { rows } = await pool.query<{ task_id: string | null; resent: boolean; today: string | null; open: string | null; stored_seq?: string | null; stored_key?: string | null }>(
    prepared(`SELECT * FROM ${call}`, params),
  );
  const { task_id: taskId, resent } = rows[0];
  if (taskId !== null) {
    const appended = rows.flatMap((r) => (r.stored_seq ? [{ stored_seq: r.stored_seq, stored_key: r.stored_key! }] : []));
    return { taskId, resent, stored: first ? storedEvents(first, appended) : [] };
  }
  const today = Number(rows[0].today);
  const open = Number(rows[0].open);
  if (today >= quotas.newTasksPerDay) throw quotaError('newTasksPerDay', quotas.newTasksPerDay, `this tenant has started ${today} tasks today (UTC)`);
  throw quotaError('openTasks', quotas.openTasks, `this tenant has ${open} open tasks`);
}
