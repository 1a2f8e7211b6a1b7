/**
 * The orphan sweep, started every minute by its Temporal Schedule (src/temporal/orphan-sweep.ts): one activity
 * that ends the tasks whose workflow closed without a terminal A2A state (activities/orphans.ts).
 */
import { proxyActivities } from '@temporalio/workflow';
import type { OrphanActivities } from '../activities';

const { endOrphanedTasks } = proxyActivities<OrphanActivities>({
  startToCloseTimeout: '5 minutes',
  heartbeatTimeout: '30 seconds',
  retry: { maximumAttempts: 3, initialInterval: '5 seconds' },
});

export async function orphanSweepWorkflow() {
  return endOrphanedTasks();
}
