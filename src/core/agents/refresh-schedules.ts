/**
 * Agent refresh in Temporal. One long-lived workflow per deployment, id `agent-refresh:<task queue>`
 * (`agentRefreshSweepWorkflow`, workflows/registry-workflow.ts; src/core/temporal/housekeeping.ts starts it), sweeps
 * every tick: it refreshes every agent whose last probe is older than the interval, many agents per activity. So
 * Temporal UI shows one housekeeping row, not a run per tick (as the former Schedule did) nor one per agent per
 * interval (10,000 agents at 5 minutes were 33 runs a second among the tasks). A new agent, and an operator's "check
 * now", get a run of `agentRefreshWorkflow` of their own, at once.
 *
 * In Temporal rather than a timer loop in the gateway: it survives restarts of every process and runs once however
 * many gateways there are. The task queue in the ids is the deployment's: several Switchboard deployments may share
 * one Temporal namespace (each with its own database and task queue), and each touches only its own. This file is
 * the only place that knows these ids.
 */
import { type Client, ScheduleNotFoundError, type WorkflowHandle } from '@temporalio/client';
import type { Pool } from 'pg';
import type { AgentRefreshArgs, AgentRefreshSweepArgs, HousekeepingArgs } from '../../../task/contracts';
import { DEFAULTS } from '../config';
import { type HousekeepingLog, ensureHousekeeping } from '../temporal/housekeeping';

export interface RefreshSchedulerOptions {
  client: Client;
  taskQueue: string;
  /** How often each agent is refreshed and probed. Default DEFAULT_REFRESH_INTERVAL_MS. */
  intervalMs?: number;
  /** Where a sweep started again because it no longer decodes is reported (src/core/temporal/housekeeping.ts). */
  log?: HousekeepingLog;
  /** Sweeps before the sweep's run continues as new (default: housekeeping's). */
  runsPerExecution?: number;
}

export const REFRESH_WORKFLOW_TYPE = 'agentRefreshWorkflow';
export const REFRESH_SWEEP_WORKFLOW_TYPE = 'agentRefreshSweepWorkflow';
/** Every 5 minutes. An agent that stops answering is degraded at its next probe. */
export const DEFAULT_REFRESH_INTERVAL_MS = DEFAULTS.SWITCHBOARD_AGENT_REFRESH_INTERVAL_MS;
const PREFIX = 'agent-refresh:';

export class RefreshScheduler {
  readonly intervalMs: number;
  /**
   * How often the sweep looks for agents due: a fifth of the interval, between 1 s and a minute, so an agent is
   * refreshed at most a tick late.
   */
  readonly tickMs: number;

  constructor(private readonly opts: RefreshSchedulerOptions) {
    this.intervalMs = opts.intervalMs ?? DEFAULT_REFRESH_INTERVAL_MS;
    this.tickMs = Math.min(60_000, Math.max(1000, Math.round(this.intervalMs / 5 / 1000) * 1000));
  }

  /** The deployment's one sweep workflow (the id of its former Schedule too). */
  get sweepId(): string {
    return `${PREFIX}${this.opts.taskQueue}`;
  }

  /** Runs of one agent's refresh start with this (then the time it was asked for). */
  runIdPrefix(tenant: string, agentId: string): string {
    return `${this.sweepId}:${tenant}:${agentId}:`;
  }

  /**
   * Refreshes one agent now, in a workflow run of its own: the first probe of a new agent, an operator's "check
   * again", tests. The sweep keeps its pace.
   */
  async refreshNow(tenant: string, agentId: string): Promise<WorkflowHandle> {
    const args: AgentRefreshArgs = { tenant, agentId };
    return this.opts.client.workflow.start(REFRESH_WORKFLOW_TYPE, {
      workflowId: `${this.runIdPrefix(tenant, agentId)}${Date.now()}`,
      taskQueue: this.opts.taskQueue,
      args: [args],
      workflowExecutionTimeout: '5 minutes',
      staticSummary: `card refresh and liveness probe of agent ${agentId}`,
    });
  }

  /**
   * Makes Temporal match: the deployment's sweep workflow runs with this interval, and the schedules of earlier
   * versions are gone (its sweep schedule, and the per-agent ones (this deployment's, `agent-refresh:<task queue>:<tenant>:<agentId>`, and older
   * `agent-refresh:<tenant>:<agentId>` ones of this database's agents; never another deployment's). Meant for
   * start-up; safe from several processes at once. @returns `created`: 1 when the sweep was started (or started
   * again), `deleted`: the per-agent schedules deleted.
   */
  async reconcile(pool: Pool): Promise<{ created: number; deleted: number }> {
    const created = (await this.ensureSweep()) ? 1 : 0;
    const perAgent: string[] = [];
    const legacy: string[] = [];
    for await (const scheduleId of this.scheduleIds()) {
      if (scheduleId.startsWith(`${this.sweepId}:`)) perAgent.push(scheduleId);
      else if (scheduleId.startsWith(PREFIX) && scheduleId.split(':').length === 3) legacy.push(scheduleId);
    }
    if (legacy.length) {
      // Agent ids are random: a legacy schedule naming one of this database's agents is this deployment's.
      const { rows } = await pool.query<{ tenant: string; id: string }>('SELECT tenant, id FROM agents');
      const ours = new Set(rows.map((r) => `${PREFIX}${r.tenant}:${r.id}`));
      perAgent.push(...legacy.filter((id) => ours.has(id)));
    }
    let deleted = 0;
    for (const scheduleId of perAgent) {
      try {
        await this.opts.client.schedule.getHandle(scheduleId).delete();
        deleted++;
      } catch (err) {
        if (!(err instanceof ScheduleNotFoundError)) throw err;
      }
    }
    return { created, deleted };
  }

  /**
   * The namespace's schedule ids. Not the SDK's list(): it decodes every schedule's memo, and one sealed under a
   * payload key this deployment does not hold (another deployment's, a retired key) would end the listing.
   */
  private async *scheduleIds(): AsyncGenerator<string> {
    const { client } = this.opts;
    let nextPageToken: Uint8Array | undefined;
    do {
      const page = await client.workflowService.listSchedules({ namespace: client.options.namespace, maximumPageSize: 1000, nextPageToken });
      for (const s of page.schedules ?? []) if (s.scheduleId) yield s.scheduleId;
      nextPageToken = page.nextPageToken?.length ? page.nextPageToken : undefined;
    } while (nextPageToken);
  }

  /** Starts the sweep, or hands the running one this interval. @returns whether a run was started. */
  private async ensureSweep(): Promise<boolean> {
    const args: AgentRefreshSweepArgs & HousekeepingArgs = { intervalMs: this.intervalMs, everyMs: this.tickMs, ...(this.opts.runsPerExecution ? { runsPerExecution: this.opts.runsPerExecution } : {}) };
    const done = await ensureHousekeeping(
      this.opts.client,
      {
        workflowId: this.sweepId,
        formerScheduleId: this.sweepId,
        workflowType: REFRESH_SWEEP_WORKFLOW_TYPE,
        taskQueue: this.opts.taskQueue,
        args,
        summary: `Switchboard housekeeping: card refresh and liveness probe of the agents due (every ${Math.round(this.intervalMs / 1000)} s each, looked for every ${Math.round(this.tickMs / 1000)} s)`,
      },
      this.opts.log,
    );
    return done !== 'running';
  }
}
