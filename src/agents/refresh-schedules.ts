/**
 * One Temporal Schedule per registered agent, id `agent-refresh:<task queue>:<tenant>:<agentId>`, starting
 * `agentRefreshWorkflow` (workflows/registry-workflow.ts) every interval. A Schedule rather than a timer loop in
 * the gateway: it survives restarts of every process, runs once however many gateways there are, can be paused
 * or triggered by an operator, and each refresh is a workflow to inspect in Temporal UI. This file is the only
 * place that knows the schedule and workflow ids.
 *
 * The task queue in the id is the deployment's: several Switchboard deployments may share one Temporal namespace
 * (each with its own database and task queue), and each touches only its own schedules.
 */
import { createHash } from 'node:crypto';
import { type Client, ScheduleAlreadyRunning, ScheduleNotFoundError, ScheduleOverlapPolicy } from '@temporalio/client';
import type { Pool } from 'pg';
import type { AgentRefreshArgs } from '../../workflows/types';
import { DEFAULTS } from '../config';

export interface RefreshSchedulerOptions {
  client: Client;
  taskQueue: string;
  /** How often each agent is refreshed and probed. Default DEFAULT_REFRESH_INTERVAL_MS. */
  intervalMs?: number;
}

export const REFRESH_WORKFLOW_TYPE = 'agentRefreshWorkflow';
/**
 * Every 5 minutes: each refresh is a workflow run, so the interval sets the load on Temporal (10,000 agents at
 * 5 minutes are about 33 runs a second). An agent that stops answering is degraded at its next probe.
 */
export const DEFAULT_REFRESH_INTERVAL_MS = DEFAULTS.SWITCHBOARD_AGENT_REFRESH_INTERVAL_MS;
const SCHEDULE_PREFIX = 'agent-refresh:';

export class RefreshScheduler {
  readonly intervalMs: number;

  constructor(private readonly opts: RefreshSchedulerOptions) {
    this.intervalMs = opts.intervalMs ?? DEFAULT_REFRESH_INTERVAL_MS;
  }

  /** This deployment's schedules start with this. */
  get prefix(): string {
    return `${SCHEDULE_PREFIX}${this.opts.taskQueue}:`;
  }

  scheduleId(tenant: string, agentId: string): string {
    return `${this.prefix}${tenant}:${agentId}`;
  }

  /**
   * Creates the agent's schedule and runs it once now; one that already exists is left as it is (a retried
   * registration).
   * @returns false when the schedule already existed.
   */
  async create(tenant: string, agentId: string): Promise<boolean> {
    const scheduleId = this.scheduleId(tenant, agentId);
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
      return false;
    }
    return true;
  }

  /** Deletes the agent's schedule; an absent one is fine (a retried delete). */
  async remove(tenant: string, agentId: string): Promise<void> {
    try {
      await this.opts.client.schedule.getHandle(this.scheduleId(tenant, agentId)).delete();
    } catch (err) {
      if (!(err instanceof ScheduleNotFoundError)) throw err;
    }
  }

  /** Runs a refresh now, outside the interval (an operator's "check again", and tests). */
  async trigger(tenant: string, agentId: string): Promise<void> {
    await this.opts.client.schedule.getHandle(this.scheduleId(tenant, agentId)).trigger(ScheduleOverlapPolicy.ALLOW_ALL);
  }

  /**
   * Makes the schedules match the registry: creates the missing ones (agents registered before schedules
   * existed, or whose creation was lost) and deletes those whose agent is gone (a delete that failed half
   * way). Meant for start-up; safe to run from several gateways at once. Schedules are listed before agents are
   * read, so an agent registered meanwhile is never taken for gone. One listing instead of a describe per
   * agent keeps it cheap at 10,000 agents.
   */
  async reconcile(pool: Pool): Promise<{ created: number; deleted: number }> {
    const scheduled = new Set<string>();
    const legacy: string[] = [];
    for await (const s of this.opts.client.schedule.list()) {
      if (s.scheduleId.startsWith(this.prefix)) scheduled.add(s.scheduleId);
      else if (s.scheduleId.startsWith(SCHEDULE_PREFIX)) legacy.push(s.scheduleId);
    }
    const { rows } = await pool.query<{ tenant: string; id: string }>('SELECT tenant, id FROM agents');
    const wanted = new Map(rows.map((r) => [this.scheduleId(r.tenant, r.id), r]));
    // Schedules made before ids named the task queue (`agent-refresh:<tenant>:<agentId>`) are replaced: only those
    // of this database's agents (agent ids are random), never another deployment's.
    const ours = new Set(rows.map((r) => `${SCHEDULE_PREFIX}${r.tenant}:${r.id}`));
    for (const scheduleId of legacy) if (ours.has(scheduleId)) scheduled.add(scheduleId);
    let created = 0;
    let deleted = 0;
    for (const [scheduleId, { tenant, id }] of wanted) {
      if (!scheduled.has(scheduleId) && (await this.create(tenant, id))) created++;
    }
    for (const scheduleId of scheduled) {
      if (wanted.has(scheduleId)) continue;
      try {
        await this.opts.client.schedule.getHandle(scheduleId).delete();
        deleted++;
      } catch (err) {
        if (!(err instanceof ScheduleNotFoundError)) throw err;
      }
    }
    return { created, deleted };
  }
}

/** A stable offset within the interval, from the schedule id (whole seconds: Temporal rounds to them). */
function spreadOffset(scheduleId: string, intervalMs: number): number {
  const seconds = Math.max(1, Math.floor(intervalMs / 1000));
  return (createHash('sha256').update(scheduleId).digest().readUInt32BE(0) % seconds) * 1000;
}
