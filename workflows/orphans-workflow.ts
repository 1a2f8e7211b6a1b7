/**
 * The orphan sweep: one long-lived workflow per deployment (workflows/housekeeping.ts), started at start-up by
 * src/core/temporal/orphan-sweep.ts, whose rounds run one activity that ends the tasks whose workflow closed without a
 * terminal A2A state (activities/orphans.ts).
 */
import { proxyActivities } from '@temporalio/workflow';
import type { OrphanActivities } from '../activities';
import type { OrphanSweepArgs } from '../task/contracts';
import { housekeep } from './housekeeping';

const { endOrphanedTasks } = proxyActivities<OrphanActivities>({
  startToCloseTimeout: '5 minutes',
  heartbeatTimeout: '30 seconds',
  retry: { maximumAttempts: 3, initialInterval: '5 seconds' },
});

/** Without arguments: a run the sweep's former Temporal Schedule started, in flight at an upgrade (one round). */
export async function orphanSweepWorkflow(args?: OrphanSweepArgs) {
  if (!args) return endOrphanedTasks();
  return housekeep(args, () => endOrphanedTasks());
}
