/**
 * The retention sweep's activity: purges every task that reached a terminal state longer ago than its tenant's
 * retention (the tenant's own, else SWITCHBOARD_TASK_RETENTION). Per tenant, oldest first, in batches of
 * BATCH tasks: each batch first deletes the tasks' workflows from Temporal (so a GetTask cannot answer from a
 * closed workflow that the namespace's retention has not removed yet), then deletes their rows in one short
 * transaction (switchboard_purge_tasks, 026_retention.sql). A crash between the two leaves rows whose workflow is
 * gone, which GetTask answers from the projection and the next sweep purges; never the other way round.
 *
 * Paused and working tasks are never candidates: only terminal rows are (tasks_expiring index). The ledger, trust
 * events and audit trail are kept; purged_tasks records each purged task for reconcile.
 *
 * Run by the retention sweep's Temporal Schedule (workflows/retention-workflow.ts, src/core/temporal/retention-sweep.ts).
 */
import { Context } from '@temporalio/activity';
import type { Pool } from 'pg';

/** Tasks per batch: each batch's transaction deletes their rows in every table, so it stays short. */
export const BATCH = 200;

export interface RetentionSweep {
  /** Per tenant that had anything to purge: how many tasks were purged. */
  purged: Record<string, number>;
  /** Per tenant whose purge failed: why. The other tenants' purges went on; the next sweep tries it again. */
  failed: Record<string, string>;
}

export interface RetentionDeps {
  pool: Pool;
  /** SWITCHBOARD_TASK_RETENTION (ms), for tenants without their own. */
  retentionMs: number;
}

const GRPC_NOT_FOUND = 5;

export async function purgeExpiredTasks(deps: RetentionDeps): Promise<RetentionSweep> {
  const ctx = activityContext();
  const { rows: tenants } = await deps.pool.query<{ id: string; retention_ms: string | null }>('SELECT id, retention_ms FROM tenants ORDER BY id');
  const sweep: RetentionSweep = { purged: {}, failed: {} };
  for (const t of tenants) {
    const retentionMs = t.retention_ms === null ? deps.retentionMs : Number(t.retention_ms);
    // One tenant's failure (a retention PostgreSQL cannot subtract from now(), written before MAX_RETENTION_MS was
    // checked; a table it alone locks) must not leave every other tenant's tasks unpurged.
    try {
      const n = await purgeTenant(deps.pool, t.id, retentionMs, ctx);
      if (n > 0) sweep.purged[t.id] = n;
    } catch (err) {
      sweep.failed[t.id] = (err as Error).message;
      ctx.log.warn('retention sweep: a tenant\'s purge failed; the others go on', { tenant: t.id, retentionMs, error: (err as Error).message });
    }
  }
  return sweep;
}

type Ctx = ReturnType<typeof activityContext>;

function activityContext() {
  const ctx = Context.current();
  return { heartbeat: () => ctx.heartbeat(), client: ctx.client, namespace: ctx.info.workflowNamespace, log: ctx.log };
}

async function purgeTenant(pool: Pool, tenant: string, retentionMs: number, ctx: Ctx): Promise<number> {
  // One cut-off for the whole pass, from the database's clock (the one updated_at is written with).
  const { rows: cut } = await pool.query<{ before: Date }>('SELECT now() - make_interval(secs => $1 / 1000.0) AS before', [retentionMs]);
  const before = cut[0]!.before;
  let purged = 0;
  for (;;) {
    ctx.heartbeat();
    const { rows } = await pool.query<{ task_id: string }>(
      `SELECT task_id FROM tasks
        WHERE tenant = $1 AND updated_at < $2
          AND state IN ('TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED')
        ORDER BY updated_at LIMIT $3`,
      [tenant, before, BATCH],
    );
    if (rows.length === 0) return purged;
    const ids = rows.map((r) => r.task_id);
    const deleted = await deleteWorkflows(ctx, tenant, ids);
    if (deleted.length === 0) return purged;
    const { rows: done } = await pool.query<{ id: string }>('SELECT switchboard_purge_tasks($1, $2, $3) AS id', [tenant, deleted, before]);
    purged += done.length;
    // Every candidate written since it was chosen is left; the next pass (a newer cut-off) sees it again.
    if (rows.length < BATCH || done.length === 0) return purged;
  }
}

/**
 * Deletes the tasks' workflows and waits until Temporal no longer finds them (a deletion is asynchronous, and on the
 * dev server takes ~30 s): only then can no GetTask answer from them. All of a batch's deletions are asked for first
 * and then waited for together, so a batch costs one wait, not one per task.
 * @returns the ids whose workflows are gone; those still there after DELETE_WAIT_MS are left for the next sweep.
 */
async function deleteWorkflows(ctx: Ctx, tenant: string, ids: string[]): Promise<string[]> {
  const gone: string[] = [];
  const pending = new Map<string, string>();
  for (const id of ids) {
    const workflowId = `a2a:${tenant}:${id}`;
    try {
      await ctx.client.workflowService.deleteWorkflowExecution({ namespace: ctx.namespace, workflowExecution: { workflowId } });
      pending.set(id, workflowId);
    } catch (err) {
      if (!notFound(err)) throw err;
      gone.push(id);
    }
    ctx.heartbeat();
  }
  for (let waited = 0; pending.size > 0 && waited < DELETE_WAIT_MS; waited += DELETE_POLL_MS) {
    for (const [id, workflowId] of pending) {
      try {
        await ctx.client.workflowService.describeWorkflowExecution({ namespace: ctx.namespace, execution: { workflowId } });
      } catch (err) {
        if (!notFound(err)) throw err;
        pending.delete(id);
        gone.push(id);
      }
    }
    ctx.heartbeat();
    if (pending.size > 0) await new Promise((resolve) => setTimeout(resolve, DELETE_POLL_MS));
  }
  return gone;
}

const DELETE_WAIT_MS = 120_000;
const DELETE_POLL_MS = 500;
const notFound = (err: unknown) => (err as { code?: number }).code === GRPC_NOT_FOUND;
