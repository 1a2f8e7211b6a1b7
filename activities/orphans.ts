/**
 * Ends the tasks whose workflow closed without bringing them to a terminal A2A state: an operator's Terminate in
 * Temporal UI, a workflow timeout, a failed run. Such a task would otherwise stay `input-required` (or working)
 * forever: follow-ups refused, its hold held. Each one found is recorded `failed` with the reason and settled
 * like any failed task (hold released, trust event), in the same bookkeeping the workflow itself uses, so a
 * second sweep, or one racing another, changes nothing.
 *
 * Run by the orphan sweep's Temporal Schedule (workflows/orphans-workflow.ts). Only this deployment's tasks
 * (its task queue) are touched.
 */
import { Context } from '@temporalio/activity';
import type { Pool } from 'pg';
import type { EventHub } from '../src/events/hub';
import type { UnfundedPolicy } from '../src/ledger/postings';
import { orphanQuery } from '../src/temporal/orphan-sweep';
import { isTerminal, stateLabel } from '../task/rules';
import type { WireTask } from '../task/wire';
import { finishTask } from './bookkeeping';

const WHY: Record<string, string> = {
  TERMINATED: 'its workflow was terminated (by an operator in Temporal, most likely)',
  TIMED_OUT: 'its workflow timed out',
  FAILED: 'its workflow failed',
  CANCELLED: 'its workflow was canceled in Temporal without the task being canceled',
  COMPLETED: 'its workflow completed without the task ending',
};

export interface OrphanSweep {
  checked: number;
  ended: { tenant: string; taskId: string; why: string }[];
}

export async function endOrphanedTasks(deps: { pool: Pool; hub: EventHub; unfundedAccounts: UnfundedPolicy }): Promise<OrphanSweep> {
  const ctx = Context.current();
  const taskQueue = ctx.info.taskQueue;
  const sweep: OrphanSweep = { checked: 0, ended: [] };
  for await (const wf of ctx.client.workflow.list({ query: orphanQuery(taskQueue) })) {
    ctx.heartbeat();
    sweep.checked++;
    const m = /^a2a:(.+):([^:]+)$/.exec(wf.workflowId);
    if (!m) continue;
    const [, tenant, taskId] = m as unknown as [string, string, string];
    const { rows } = await deps.pool.query<{ task: WireTask; agent_id: string; version: number; created_at: Date; parent_task_id: string | null; depth: number }>(
      'SELECT task, agent_id, version, created_at, parent_task_id, depth FROM tasks WHERE tenant = $1 AND task_id = $2',
      [tenant, taskId],
    );
    const stored = rows[0];
    if (!stored || isTerminal(stored.task.status.state)) continue;
    const why = WHY[wf.status.name] ?? `its workflow closed (${wf.status.name})`;
    const now = new Date().toISOString();
    const message = {
      messageId: `switchboard-orphan-${wf.runId}`,
      role: 'ROLE_AGENT' as const,
      taskId,
      contextId: stored.task.contextId,
      parts: [{ text: `Switchboard ended this task: ${why} while it was ${stateLabel(stored.task.status.state)}.` }],
    };
    const task: WireTask = { ...stored.task, status: { state: 'TASK_STATE_FAILED', message, timestamp: now } };
    // The failed state and its settlement commit together: a reader who sees the task failed sees its hold released.
    await finishTask(
      deps.pool,
      deps.hub,
      deps.unfundedAccounts,
      {
        tenant,
        agentId: stored.agent_id,
        task,
        version: stored.version + 1,
        createdAt: stored.created_at.toISOString(),
        ...(stored.parent_task_id ? { parentTaskId: stored.parent_task_id, depth: stored.depth } : {}),
        event: { key: `orphan/${wf.runId}`, event: { statusUpdate: { taskId, contextId: task.contextId, status: task.status } } },
      },
      {
        tenant,
        taskId,
        agentId: stored.agent_id,
        requester: tenant,
        finalState: 'TASK_STATE_FAILED',
        amountMinor: 0,
        outcome: 'failed',
        startedAt: stored.created_at.toISOString(),
        endedAt: now,
      },
    );
    sweep.ended.push({ tenant, taskId, why });
  }
  return sweep;
}
