/**
 * The orphan sweep's round: nothing of a task is left half-done (issue 45).
 *
 * Tasks whose workflow closed without bringing them to a terminal A2A state: an operator's Terminate in Temporal UI,
 * a workflow timeout, a failed run. Such a task would otherwise stay `input-required` (or working) forever:
 * follow-ups refused, its hold held, and its agent's task running on at the agent. Each one found is recorded
 * `failed` with the reason and settled like any failed task (hold released, trust event), in the same bookkeeping
 * the workflow itself uses, so a second sweep, or one racing another, changes nothing. Before that, the agent's task
 * the workflow knew of (its `agentTask` query, answered by replaying the closed run) is canceled at the agent, as the
 * workflow itself does with a task it leaves. A task whose workflow closed before it wrote its first row is ended
 * from its submitted event, so that it is not invisible either.
 *
 * Claims whose workflow never started (left-claims.ts): a first message claimed at least CLAIM_GRACE_MS ago
 * whose task has no row and no workflow is started from what its front door recorded, with the messageId as the
 * update id, so the client's resend joins it; a claim with nothing to start from is released.
 *
 * Run by the orphan sweep (workflows/orphans-workflow.ts). Only this deployment's task workflows (its task queue)
 * are looked at, and left tasks are started on it.
 */
import { Context } from '@temporalio/activity';
import type { Pool } from 'pg';
import { findAgent, forwardingEndpoint } from '../src/core/agents/registry';
import { type TaskDefaults, leftTaskOf } from './left-claims';
import { findTask, parentOfTask, releaseClaim, unrecordedClaims } from '../src/core/db/task-store';
import { readEvents } from '../src/core/events/event-log';
import type { EventHub } from '../src/core/events/hub';
import type { UnfundedPolicy } from '../src/core/ledger/postings';
import { orphanQuery } from '../src/core/temporal/orphan-sweep';
import { agentTaskOfClosedRun, startLeftTask } from '../src/core/temporal/task-gateway';
import { agentTaskIsGatewayTask } from '../task/contracts';
import { SA_AGENT } from '../task/messages';
import { isTerminal, stateLabel } from '../task/rules';
import type { WireTask } from '../task/wire';
import { finishTask } from './bookkeeping';
import type { CancelAtAgentArgs } from './cancel-at-agent';

const WHY: Record<string, string> = {
  TERMINATED: 'its workflow was terminated (by an operator in Temporal, most likely)',
  TIMED_OUT: 'its workflow timed out',
  FAILED: 'its workflow failed',
  CANCELLED: 'its workflow was canceled in Temporal without the task being canceled',
  COMPLETED: 'its workflow completed without the task ending',
};

/**
 * How long a claim may stay without its workflow before the sweep starts it: far longer than a front door takes
 * from the claim to the start (milliseconds; a start refused by a Temporal outage fails within seconds), so the sweep
 * does not race a live one (it would win with its own arguments). A left claim is started by the first sweep after
 * this: within SWITCHBOARD_ORPHAN_SWEEP_MS plus this.
 */
export const CLAIM_GRACE_MS = 10_000;

/** Left claims looked at per round, oldest first (a claim queued behind busy workers is looked at again next round). */
const CLAIMS_PER_ROUND = 500;

export interface OrphanSweep {
  checked: number;
  ended: { tenant: string; taskId: string; why: string }[];
  /** Tasks whose claim had no workflow, started now. */
  started: { tenant: string; taskId: string }[];
  /** Claims released (their messageId makes a new task when sent again). */
  released: { tenant: string; taskId: string; why: string }[];
}

export interface OrphanDeps {
  pool: Pool;
  hub: EventHub;
  unfundedAccounts: UnfundedPolicy;
  /** Asks an agent to cancel its task (activities/cancel-at-agent.ts through the agent's link); unset: nobody is told. */
  cancelAtAgent?: (args: CancelAtAgentArgs) => Promise<string>;
  /** The front door's configuration a left claim's task is started with. */
  taskDefaults: TaskDefaults;
}

export async function endOrphanedTasks(deps: OrphanDeps): Promise<OrphanSweep> {
  const ctx = Context.current();
  const taskQueue = ctx.info.taskQueue;
  const sweep: OrphanSweep = { checked: 0, ended: [], started: [], released: [] };
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
    let stored = rows[0];
    if (!stored) {
      // Closed before its first row (terminated while queued, say): its submitted event is all there is to end.
      const [first] = await readEvents(deps.pool, tenant, taskId, 0, 1);
      const submitted = first && 'task' in first.event ? first.event.task : undefined;
      const agentId = wf.typedSearchAttributes.get(SA_AGENT);
      if (!submitted || !agentId) continue;
      const parentTaskId = await parentOfTask(deps.pool, tenant, taskId);
      const depth = parentTaskId ? ((await findTask(deps.pool, tenant, parentTaskId))?.depth ?? 0) + 1 : 0;
      stored = { task: submitted, agent_id: agentId, version: 0, created_at: new Date(submitted.status.timestamp ?? Date.now()), parent_task_id: parentTaskId ?? null, depth };
    }
    if (isTerminal(stored.task.status.state)) continue;
    let why = `${WHY[wf.status.name] ?? `its workflow closed (${wf.status.name})`} while it was ${stateLabel(stored.task.status.state)}`;
    const told = await cancelLeftAtAgent(deps, tenant, taskId, wf.runId, stored.agent_id);
    if (told) why += `; ${told}`;
    await endTask(deps, { tenant, taskId, agentId: stored.agent_id, task: stored.task, version: stored.version, createdAt: stored.created_at, parentTaskId: stored.parent_task_id, depth: stored.depth, why, key: wf.runId });
    sweep.ended.push({ tenant, taskId, why });
  }
  await startLeftClaims(deps, taskQueue, sweep);
  return sweep;
}

/**
 * The agent's task a closed workflow left running, canceled at the agent: the one the run knew of (A2A 0.1 and NEXUS
 * agents': the gateway's own task id). @returns what to add to the task's status, or undefined when nobody was asked.
 */
async function cancelLeftAtAgent(deps: OrphanDeps, tenant: string, taskId: string, runId: string, agentId: string): Promise<string | undefined> {
  if (!deps.cancelAtAgent) return undefined;
  const agent = await findAgent(deps.pool, tenant, agentId);
  // A hub agent's cancel goes through the process holding its socket (workflows/hub.ts): not reachable from here.
  if (!agent || agent.endpoint.url.startsWith('ws-agent:')) return undefined;
  const endpoint = forwardingEndpoint(agent);
  const known = await agentTaskOfClosedRun(Context.current().client, tenant, taskId, runId);
  const agentTaskId = known?.agentTaskId ?? (agentTaskIsGatewayTask(endpoint) ? taskId : undefined);
  if (!agentTaskId) return undefined;
  try {
    const answer = await deps.cancelAtAgent({ endpoint, agentTaskId, tenant, agentId });
    return `the agent was asked to cancel its task ${agentTaskId} (${answer})`;
  } catch (err) {
    return `the agent did not confirm the cancel of its task ${agentTaskId} (${err instanceof Error ? err.message : String(err)})`;
  }
}

/** Starts the tasks whose claim has no workflow, or releases the claims with nothing to start from. */
async function startLeftClaims(deps: OrphanDeps, taskQueue: string, sweep: OrphanSweep): Promise<void> {
  const ctx = Context.current();
  for (const claim of await unrecordedClaims(deps.pool, CLAIM_GRACE_MS, CLAIMS_PER_ROUND)) {
    ctx.heartbeat();
    const { tenant, taskId } = claim;
    const left = await leftTaskOf(deps.pool, claim, deps.taskDefaults);
    if ('skip' in left) continue;
    if ('release' in left) {
      if (await releaseClaim(deps.pool, tenant, claim.messageId)) sweep.released.push({ tenant, taskId, why: left.release });
      continue;
    }
    if ('end' in left) {
      const { task, agentId, why } = left.end;
      const because = `it could not be started: ${why}`;
      await endTask(deps, { tenant, taskId, agentId, task, version: 0, createdAt: claim.claimedAt, parentTaskId: null, depth: 0, why: because, key: 'unstarted' });
      sweep.ended.push({ tenant, taskId, why: because });
      continue;
    }
    if (await startLeftTask(ctx.client, taskQueue, left.start.input, left.start.args)) sweep.started.push({ tenant, taskId });
  }
}

interface Ending {
  tenant: string;
  taskId: string;
  agentId: string;
  task: WireTask;
  /** The projection's version now (0: no row yet). */
  version: number;
  createdAt: Date;
  parentTaskId: string | null;
  depth: number;
  why: string;
  /** Makes the event's key, so a retried ending logs it once. */
  key: string;
}

/** Records the task failed, saying why, and settles it (hold released, nothing charged), in one statement. */
async function endTask(deps: OrphanDeps, e: Ending): Promise<void> {
  const { tenant, taskId } = e;
  const now = new Date().toISOString();
  const message = {
    messageId: `switchboard-orphan-${e.key}`,
    role: 'ROLE_AGENT' as const,
    taskId,
    contextId: e.task.contextId,
    parts: [{ text: `Switchboard ended this task: ${e.why}.` }],
  };
  const task: WireTask = { ...e.task, status: { state: 'TASK_STATE_FAILED', message, timestamp: now } };
  // The failed state and its settlement commit together: a reader who sees the task failed sees its hold released.
  await finishTask(
    deps.pool,
    deps.hub,
    deps.unfundedAccounts,
    {
      tenant,
      agentId: e.agentId,
      task,
      version: e.version + 1,
      createdAt: e.createdAt.toISOString(),
      ...(e.parentTaskId ? { parentTaskId: e.parentTaskId, depth: e.depth } : {}),
      event: { key: `orphan/${e.key}`, event: { statusUpdate: { taskId, contextId: task.contextId, status: task.status } } },
    },
    {
      tenant,
      taskId,
      agentId: e.agentId,
      requester: tenant,
      finalState: 'TASK_STATE_FAILED',
      amountMinor: 0,
      outcome: 'failed',
      startedAt: e.createdAt.toISOString(),
      endedAt: now,
    },
  );
}
