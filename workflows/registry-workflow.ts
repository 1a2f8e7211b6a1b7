/**
 * The refresh of one registered agent, started by its Temporal Schedule (src/agents/refresh-schedules.ts):
 * one activity that re-reads the card, probes the endpoint and records the agent's health. The workflow adds
 * the durability and the record: every run is in Temporal UI under `agent-refresh:<tenant>:<agentId>-<time>`.
 */
import { proxyActivities } from '@temporalio/workflow';
import type { RegistryActivities } from '../activities/registry';
import type { AgentRefreshArgs } from './types';

const { refreshAgent } = proxyActivities<RegistryActivities>({
  // A refresh makes at most a card, a key-set and an endpoint request, each bounded by the refresh policy's
  // request timeout (10 s by default), plus two short database writes.
  startToCloseTimeout: '2 minutes',
  // Remote failures are recorded, not thrown; what is retried is a database error. A few tries, then the next
  // scheduled run takes over.
  retry: { maximumAttempts: 3, initialInterval: '2 seconds' },
});

export async function agentRefreshWorkflow(args: AgentRefreshArgs) {
  return refreshAgent(args);
}
