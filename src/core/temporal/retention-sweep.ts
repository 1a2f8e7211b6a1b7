/**
 * The retention sweep's Temporal Schedule, one per deployment (its task queue): every SWITCHBOARD_RETENTION_SWEEP_MS
 * it runs retentionSweepWorkflow, which purges the tasks terminal for longer than their tenant's retention
 * (activities/retention.ts). Created at start-up if missing; a changed interval is applied to the existing one.
 */
import { type Client, ScheduleOverlapPolicy } from '@temporalio/client';
import { type ScheduleLog, ensureSchedule } from './schedules';

export const retentionScheduleId = (taskQueue: string) => `switchboard-retention-sweep:${taskQueue}`;

/**
 * Creates the deployment's retention-sweep Schedule, or sets the interval of the one there (recreated when it
 * does not decode under this deployment's payload keys: src/core/temporal/schedules.ts).
 */
export async function ensureRetentionSweep(client: Client, taskQueue: string, intervalMs: number, log?: ScheduleLog): Promise<void> {
  const scheduleId = retentionScheduleId(taskQueue);
  const spec = { intervals: [{ every: intervalMs }] };
  await ensureSchedule(
    client,
    {
      scheduleId,
      spec,
      action: {
        type: 'startWorkflow',
        workflowType: 'retentionSweepWorkflow',
        workflowId: scheduleId,
        taskQueue,
        args: [],
        workflowExecutionTimeout: Math.max(2 * 3_600_000, intervalMs),
        staticSummary: 'purges tasks terminal for longer than their tenant\'s retention',
      },
      // One sweep at a time: a long one (a first run over a large backlog) is not joined by the next.
      policies: { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: intervalMs },
      state: { note: `Switchboard retention sweep of task queue ${taskQueue}` },
    },
    (s) => ({ ...s, spec }),
    log,
  );
}

/** Runs the sweep now (tests, and operators: `temporal schedule trigger --schedule-id switchboard-retention-sweep:<queue>`). */
export async function triggerRetentionSweep(client: Client, taskQueue: string): Promise<void> {
  await client.schedule.getHandle(retentionScheduleId(taskQueue)).trigger();
}
