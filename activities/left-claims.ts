/**
 * A first message claimed at the front door whose task workflow never started: its process died between the claim
 * and the start (src/api/a2a/task-intake.ts `prepare`, then the gateway's `start`), or lost Temporal then and its client never
 * sent the message again. Nothing of such a task is in Temporal and the projection has no row, so without this its
 * `GetTask` would answer -32001 for ever, though its client may know it (a stream shows the submitted task first).
 *
 * What the front door recorded is enough to start it as it would have: the claim (tenant, task id, agent), the task's
 * first event (the submitted task with the message: its context, its time, its `metadata.budgetMinor`), its inline
 * push configs and its parent's link, all written before the start. Not recorded, so not carried: the request's own
 * metadata, a Genesis envelope's ttl and priority, and the client's wish to be answered at once (no client waits).
 * The orphan sweep (orphans.ts) starts the task from this, or releases the claim when there is nothing to
 * start from.
 */
import type { Pool } from 'pg';
import { findAgent, forwardingEndpoint } from '../src/core/agents/registry';
import type { UnrecordedClaim } from '../src/core/db/task-store';
import { findTask, parentOfTask } from '../src/core/db/task-store';
import { readEvents } from '../src/core/events/event-log';
import { PATCH_LEVEL, type SendMessageArgs, type TaskInput } from '../task/contracts';
import type { WireTask } from '../task/wire';

/** What the front door passes every task that the claim does not record (its configuration). */
export interface TaskDefaults {
  inputTimeoutMs: number;
  pushRetryInitialMs?: number;
}

/** How a left claim's task is started again, or why it cannot be. */
export type LeftTask =
  | { start: { input: TaskInput; args: SendMessageArgs } }
  /** No submitted event: the front door's router claimed it and died before the task was made (no client knows it). */
  | { release: string }
  /** The submitted task is logged (a client may know it) but cannot run: it is to be ended failed, saying why. */
  | { end: { task: WireTask; agentId: string; why: string } }
  /** Not this claim's to start: another message's claim of the same task id (a client-chosen one). */
  | { skip: string };

/** The task a left claim would have started, rebuilt from what its front door recorded. */
export async function leftTaskOf(pool: Pool, claim: UnrecordedClaim, defaults: TaskDefaults): Promise<LeftTask> {
  const { tenant, taskId } = claim;
  const [first] = await readEvents(pool, tenant, taskId, 0, 1);
  const submitted = first && 'task' in first.event ? first.event.task : undefined;
  const message = submitted?.history?.[0];
  if (!submitted || !message) return { release: 'its submitted task was never logged' };
  if (message.messageId !== claim.messageId) return { skip: `task ${taskId} was first claimed by message ${message.messageId}` };
  const agent = claim.agentId ? await findAgent(pool, tenant, claim.agentId) : undefined;
  if (!agent) {
    const why = claim.agentId ? `its agent ${claim.agentId} is no longer registered` : 'it names no agent';
    return { end: { task: submitted, agentId: claim.agentId ?? '', why } };
  }
  const parentTaskId = await parentOfTask(pool, tenant, taskId);
  const parent = parentTaskId ? await findTask(pool, tenant, parentTaskId) : undefined;
  const { rows } = await pool.query<{ config_id: string }>('SELECT config_id FROM push_configs WHERE tenant = $1 AND task_id = $2 ORDER BY created_at', [tenant, taskId]);
  const budget = (message.metadata as Record<string, unknown> | undefined)?.budgetMinor;
  const { taskId: _inHistory, ...sent } = message;
  const input: TaskInput = {
    tenant,
    taskId,
    contextId: submitted.contextId,
    requester: tenant,
    ...(parentTaskId ? { parentTaskId, depth: (parent?.depth ?? 0) + 1 } : {}),
    // Checked at the front door before the claim (budgetOf), so a number here is a valid one.
    ...(typeof budget === 'number' ? { budgetMinor: budget } : {}),
    submittedAt: submitted.status.timestamp ?? claim.claimedAt.toISOString(),
    inputTimeoutMs: defaults.inputTimeoutMs,
    pushRetryInitialMs: defaults.pushRetryInitialMs,
    patchLevel: PATCH_LEVEL,
    agent: { agentId: agent.id, endpoint: forwardingEndpoint(agent), priceMinor: agent.priceMinor, retry: agent.retry },
  };
  // Blocking, as a send is by default: a client that sends the message again (same messageId, so the same update)
  // waits for the turn's end, as it would have; the sweep itself waits only until the workflow accepts it.
  const args: SendMessageArgs = { message: { ...sent, contextId: submitted.contextId }, returnImmediately: false, ...(rows.length ? { pushConfigIds: rows.map((r) => r.config_id) } : {}) };
  return { start: { input, args } };
}
