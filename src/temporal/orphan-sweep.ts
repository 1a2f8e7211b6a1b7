/**
 * The orphan sweep's Temporal Schedule, one per deployment (its task queue): every interval it runs
 * orphanSweepWorkflow, which ends tasks whose workflow closed without a terminal A2A state. Created at start-up
 * if missing; a changed interval is applied to the existing schedule.
 */
import { type Client, ScheduleOverlapPolicy } from '@temporalio/client';
import { type ScheduleLog, ensureSchedule } from './schedules';
import { SA_STATE, SA_TENANT } from '../../task/messages';
import { isTerminal, stateLabel } from '../../task/rules';
import { TASK_STATES } from '../../task/wire';

const OPEN_LABELS = TASK_STATES.filter((s) => !isTerminal(s)).map(stateLabel);

/** The visibility query for this deployment's closed task workflows whose last recorded state was not terminal. */
export function orphanQuery(taskQueue: string, tenant?: string): string {
  return `${tenant === undefined ? '' : `${SA_TENANT.name} = "${tenant.replace(/"/g, '')}" AND `}WorkflowType = "taskWorkflow" AND TaskQueue = "${taskQueue}" AND ExecutionStatus != "Running" AND ExecutionStatus != "ContinuedAsNew" AND ${SA_STATE.name} IN (${OPEN_LABELS.map((l) => `"${l}"`).join(', ')})`;
}

export const orphanScheduleId = (taskQueue: string) => `switchboard-orphan-sweep:${taskQueue}`;

/**
 * Creates the deployment's orphan-sweep Schedule, or sets the interval of the one there (recreated when it does
 * not decode under this deployment's payload keys, with a warning on `log`: src/temporal/schedules.ts).
 */
export async function ensureOrphanSweep(client: Client, taskQueue: string, intervalMs: number, log?: ScheduleLog): Promise<void> {
  const scheduleId = orphanScheduleId(taskQueue);
  const spec = { intervals: [{ every: intervalMs }] };
  await ensureSchedule(
    client,
    {
      scheduleId,
      spec,
      action: {
        type: 'startWorkflow',
        workflowType: 'orphanSweepWorkflow',
        workflowId: scheduleId,
        taskQueue,
        args: [],
        workflowExecutionTimeout: Math.max(5 * 60_000, intervalMs),
        staticSummary: 'ends tasks whose workflow closed without a terminal A2A state',
      },
      policies: { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: intervalMs },
      state: { note: `Switchboard orphan sweep of task queue ${taskQueue}` },
    },
    (s) => ({ ...s, spec }),
    log,
  );
}

/** Runs the sweep now (tests, and operators through the CLI: `temporal schedule trigger`). */
export async function triggerOrphanSweep(client: Client, taskQueue: string): Promise<void> {
  await client.schedule.getHandle(orphanScheduleId(taskQueue)).trigger();
}

/**
 * The tasks of a tenant whose workflow has closed while its last recorded state was not terminal (candidates:
 * the caller checks the projection, since a swept task keeps its last search attribute).
 */
export async function closedOpenTaskIds(client: Client, taskQueue: string, tenant: string, limit = 1000): Promise<string[]> {
  const ids: string[] = [];
  for await (const wf of client.workflow.list({ query: orphanQuery(taskQueue, tenant) })) {
    const m = /^a2a:.+:([^:]+)$/.exec(wf.workflowId);
    if (m) ids.push(m[1]!);
    if (ids.length >= limit) break;
  }
  return ids;
}
