/**
 * Agent refresh (src/core/agents/refresh-schedules.ts): the deployment's sweep, one long-lived workflow (housekeeping.ts), and
 * the refresh of one agent, started for a new agent or an operator's "check again". The activities re-read cards,
 * probe endpoints and record the agents' health; the workflows add the durability and the record in Temporal UI.
 */
import { proxyActivities } from '@temporalio/workflow';
import type { RegistryActivities } from '../activities/registry';
import type { AgentRefreshArgs, AgentRefreshSweepArgs } from '../task/contracts';
import { housekeep } from './housekeeping';

const { refreshAgent } = proxyActivities<RegistryActivities>({
  // A refresh makes at most a card, a key-set and an endpoint request, each bounded by the refresh policy's
  // request timeout (10 s by default), plus two short database writes.
  startToCloseTimeout: '2 minutes',
  // Remote failures are recorded, not thrown; what is retried is a database error.
  retry: { maximumAttempts: 3, initialInterval: '2 seconds' },
});

const { refreshDueAgents } = proxyActivities<RegistryActivities>({
  // A batch refreshes its agents a few at a time and heartbeats after each one.
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: '2 minutes',
  retry: { maximumAttempts: 3, initialInterval: '2 seconds' },
});

/** Agents per activity, and batches per sweep: up to 10,000 agents each tick, in a history of 20 activities. */
export const SWEEP_BATCH = 500;
const MAX_BATCHES = 20;

export async function agentRefreshWorkflow(args: AgentRefreshArgs) {
  return refreshAgent(args);
}

/**
 * Every `everyMs`, refreshes the agents that are due. Without `everyMs`: a run the sweep's former Temporal Schedule
 * started, in flight at an upgrade (one round).
 */
export async function agentRefreshSweepWorkflow(args: AgentRefreshSweepArgs): Promise<{ refreshed: number; batches: number }> {
  if (args.everyMs === undefined) return refreshDue(args);
  return housekeep({ ...args, everyMs: args.everyMs }, refreshDue);
}

/** Refreshes the agents that are due, a batch at a time, until a batch comes back short. */
async function refreshDue(args: AgentRefreshSweepArgs): Promise<{ refreshed: number; batches: number }> {
  let refreshed = 0;
  let batches = 0;
  while (batches < MAX_BATCHES) {
    const n = await refreshDueAgents({ intervalMs: args.intervalMs, limit: SWEEP_BATCH });
    refreshed += n;
    batches++;
    if (n < SWEEP_BATCH) break;
  }
  return { refreshed, batches };
}
