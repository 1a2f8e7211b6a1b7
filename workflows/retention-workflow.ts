/**
 * The retention sweep, started every SWITCHBOARD_RETENTION_SWEEP_MS by its Temporal Schedule
 * (src/core/temporal/retention-sweep.ts): one activity that purges the tasks terminal for longer than their tenant's
 * retention (activities/retention.ts).
 */
import { proxyActivities } from '@temporalio/workflow';
import type { RetentionActivities } from '../activities';

const { purgeExpiredTasks } = proxyActivities<RetentionActivities>({
  startToCloseTimeout: '1 hour',
  heartbeatTimeout: '1 minute',
  retry: { maximumAttempts: 3, initialInterval: '10 seconds' },
});

export async function retentionSweepWorkflow() {
  return purgeExpiredTasks();
}
