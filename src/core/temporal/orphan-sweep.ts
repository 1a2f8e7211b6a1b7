/**
 * The orphan sweep, one long-lived workflow per deployment (its task queue; src/core/temporal/housekeeping.ts): every
 * interval it ends tasks whose workflow closed without a terminal A2A state, canceling the agent's task they left,
 * and starts tasks whose first message was claimed but whose workflow never started (workflows/orphans-workflow.ts,
 * activities/orphans.ts).
 * Started at start-up when not running; a changed interval is handed to the running one.
 */
import type { Client } from '@temporalio/client';
import { type HousekeepingLog, ensureHousekeeping, runHousekeepingNow } from './housekeeping';
import { SA_STATE, SA_TENANT } from '../../../task/messages';
import type { OrphanSweepArgs } from '../../../task/contracts';
import { isTerminal, stateLabel } from '../../../task/rules';
import { TASK_STATES } from '../../../task/wire';

const OPEN_LABELS = TASK_STATES.filter((s) => !isTerminal(s)).map(stateLabel);

/** The visibility query for this deployment's closed task workflows whose last recorded state was not terminal. */
export function orphanQuery(taskQueue: string, tenant?: string): string {
  return `${tenant === undefined ? '' : `${SA_TENANT.name} = "${tenant.replace(/"/g, '')}" AND `}WorkflowType = "taskWorkflow" AND TaskQueue = "${taskQueue}" AND ExecutionStatus != "Running" AND ExecutionStatus != "ContinuedAsNew" AND ${SA_STATE.name} IN (${OPEN_LABELS.map((l) => `"${l}"`).join(', ')})`;
}

/** The sweep's workflow id (the id of its former Schedule too). */
export const orphanSweepId = (taskQueue: string) => `switchboard-orphan-sweep:${taskQueue}`;

/**
 * Starts the deployment's orphan sweep, or hands the running one this interval (one sealed under a payload key no
 * longer held is started again, with a warning on `log`). `runsPerExecution`: rounds before it continues as new.
 */
export async function ensureOrphanSweep(client: Client, taskQueue: string, intervalMs: number, log?: HousekeepingLog, runsPerExecution?: number) {
  const args: OrphanSweepArgs = { everyMs: intervalMs, ...(runsPerExecution ? { runsPerExecution } : {}) };
  return ensureHousekeeping(
    client,
    {
      workflowId: orphanSweepId(taskQueue),
      formerScheduleId: orphanSweepId(taskQueue),
      workflowType: 'orphanSweepWorkflow',
      taskQueue,
      args,
      summary: `Switchboard housekeeping: every ${Math.round(intervalMs / 1000)} s, ends tasks whose workflow closed without a terminal A2A state and starts tasks claimed without one`,
    },
    log,
  );
}

/** What a round of the sweep did (activities/orphans.ts): tasks ended, left claims' tasks started, claims released. */
export interface OrphanSweepRound {
  checked: number;
  ended: { tenant: string; taskId: string; why: string }[];
  started?: { tenant: string; taskId: string }[];
  released?: { tenant: string; taskId: string; why: string }[];
}

/** Runs the sweep now and waits for it (tests; operators: `temporal workflow update execute --name runNow`). */
export async function triggerOrphanSweep(client: Client, taskQueue: string): Promise<OrphanSweepRound> {
  return runHousekeepingNow(client, orphanSweepId(taskQueue));
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
