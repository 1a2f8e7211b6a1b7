/**
 * One Temporal Schedule per registered agent, id `agent-refresh:<tenant>:<agentId>`, starting
 * `agentRefreshWorkflow` (workflows/registry-workflow.ts) every interval. A Schedule rather than a timer loop in
 * the gateway: it survives restarts of every process, runs once however many gateways there are, can be paused
 * or triggered by an operator, and each refresh is a workflow to inspect in Temporal UI. This file is the only
 * place that knows the schedule and workflow ids.
 */
import { createHash } from 'node:crypto';
import { type Client, ScheduleAlreadyRunning, ScheduleNotFoundError, ScheduleOverlapPolicy } from '@temporalio/client';
import type { Pool } from 'pg';
import type { AgentRefreshArgs } from '../../workflows/registry-workflow';

export interface RefreshSchedulerOptions {
  client: Client;
  taskQueue: string;
  /** How often each agent is refreshed and probed. Default 60 s. */
  intervalMs?: number;
}

export const REFRESH_WORKFLOW_TYPE = 'agentRefreshWorkflow';
export const DEFAULT_REFRESH_INTERVAL_MS = 60_000;

export class RefreshScheduler {
  readonly intervalMs: number;

  constructor(private readonly opts: RefreshSchedulerOptions) {
    this.intervalMs = opts.intervalMs ?? DEFAULT_REFRESH_INTERVAL_MS;
  }

  static scheduleId(tenant: string, agentId: string): string {
    return `agent-refresh:${tenant}:${agentId}`;
  }

  /**
   * Creates the agent's schedule and runs it once now; one that already exists is left as it is (a retried
   * registration).
   */
  async create(tenant: string, agentId: string): Promise<void> {
    const scheduleId = RefreshScheduler.scheduleId(tenant, agentId);
    const args: AgentRefreshArgs = { tenant, agentId };
    try {
      await this.opts.client.schedule.create({
        scheduleId,
        // Interval times are multiples of `every` since the epoch, so without an offset every agent would be
        // probed in the same second. A per-agent offset spreads 10,000 agents evenly over the interval.
        spec: { intervals: [{ every: this.intervalMs, offset: spreadOffset(scheduleId, this.intervalMs) }] },
        action: {
          type: 'startWorkflow',
          workflowType: REFRESH_WORKFLOW_TYPE,
          // Temporal appends the scheduled time, so each run has its own id under this prefix.
          workflowId: scheduleId,
          taskQueue: this.opts.taskQueue,
          args: [args],
          // A refresh that hangs must not block the next ones (overlap SKIP would skip them all).
          workflowExecutionTimeout: Math.max(5 * 60_000, this.intervalMs),
          staticSummary: `card refresh and liveness probe of agent ${agentId}`,
        },
        // A refresh still running when the next is due is not doubled, and after an outage one catch-up run is
        // enough: an old probe result is worth nothing.
        policies: { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: this.intervalMs },
        // The first run probes the new agent at once rather than up to an interval later.
        state: { note: `Switchboard agent ${tenant}/${agentId}`, triggerImmediately: true },
      });
    } catch (err) {
      if (!(err instanceof ScheduleAlreadyRunning)) throw err;
    }
  }

  /** Deletes the agent's schedule; an absent one is fine (a retried delete). */
  async remove(tenant: string, agentId: string): Promise<void> {
    try {
      await this.opts.client.schedule.getHandle(RefreshScheduler.scheduleId(tenant, agentId)).delete();
    } catch (err) {
      if (!(err instanceof ScheduleNotFoundError)) throw err;
    }
  }

  /** Runs a refresh now, outside the interval (an operator's "check again", and tests). */
  async trigger(tenant: string, agentId: string): Promise<void> {
    await this.opts.client.schedule.getHandle(RefreshScheduler.scheduleId(tenant, agentId)).trigger(ScheduleOverlapPolicy.ALLOW_ALL);
  }

  /**
   * Makes sure every registered agent has its schedule: for agents registered before schedules existed, or
   * whose schedule creation was lost. Meant for start-up; creating is idempotent, so concurrent gateways agree.
   * @returns how many schedules were created.
   */
  async ensureAll(pool: Pool): Promise<number> {
    const { rows } = await pool.query<{ tenant: string; id: string }>('SELECT tenant, id FROM agents ORDER BY tenant, id');
    let created = 0;
    for (const { tenant, id } of rows) {
      try {
        await this.opts.client.schedule.getHandle(RefreshScheduler.scheduleId(tenant, id)).describe();
      } catch (err) {
        if (!(err instanceof ScheduleNotFoundError)) throw err;
        await this.create(tenant, id);
        created++;
      }
    }
    return created;
  }
}

/** A stable offset within the interval, from the schedule id (whole seconds: Temporal rounds to them). */
function spreadOffset(scheduleId: string, intervalMs: number): number {
  const seconds = Math.max(1, Math.floor(intervalMs / 1000));
  return (createHash('sha256').update(scheduleId).digest().readUInt32BE(0) % seconds) * 1000;
}
