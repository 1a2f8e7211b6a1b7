/**
 * The rules a call meets before it touches a task, for one agent's endpoint and one caller: whose task it is
 * (a per-agent endpoint answers only for its own agent's tasks), and everything a new task needs before its
 * workflow starts: the budget and parent checks, the task id (the messageId claim, within the tenant's quotas),
 * inline push configs, the link to a parent, and the task's first event in its log. No SDK types here.
 */
import type { FairGate } from './fair-gate';
import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import type { Pool } from 'pg';
import { type Agent, forwardingEndpoint } from '../../core/agents/registry';
import type { Caller } from '../../core/auth/caller';
import { claimWithinQuota, type TenantQuotas } from '../../core/auth/quotas';
import { type StoredTask, agentOfTask, claimedUnrecorded, findTask, linkChildTask, releaseClaim } from '../../core/db/task-store';
import { type NewEvent, appendEvents } from '../../core/events/event-log';
import type { EventHub } from '../../core/events/hub';
import { outageOf } from '../../core/health';
import type { PushStore } from '../../core/push/store';
import type { TaskGateway } from '../../core/temporal/task-gateway';
import { PARENT_TASK_HEADER } from '../../../task/messages';
import { submittedTask } from '../../../task/rules';
import { PATCH_LEVEL } from '../../../task/contracts';
import type { SendMessageArgs, TaskInput } from '../../../task/contracts';
import type { CallIntent } from './dialects';
import { a2aError } from './errors';
import { recordTaskDialect } from '../../core/db/task-dialects';
import { storeInlinePushConfig } from './push-methods';
import { type EnforcedPolicies, enforcePolicies } from '../../core/nanda/policies';
import type { Dialect, PushDialect, WireMessage } from '../../../task/wire';

export interface IntakeDeps {
  gateway: TaskGateway;
  pool: Pool;
  hub: EventHub;
  push: PushStore;
  inputTimeoutMs: number;
  /** Multi-agent jobs: how deep a chain of tasks started by agents may go (SWITCHBOARD_MAX_HOPS). */
  maxHops: number;
  /** First retry delay of a failed webhook delivery (ms). */
  pushRetryInitialMs?: number;
  /** The tenants' quotas: a new task is claimed only within them. */
  quotas: TenantQuotas;
  /** The tenants' enforced policies: a new task for an agent one denies is refused. */
  policies: EnforcedPolicies;
  /** Fair admission per tenant (src/api/a2a/fair-gate.ts): a send waits here for its tenant's share of a saturated gateway. */
  admission?: FairGate;
}

/** A new task, ready to start: its workflow's input and its first message. */
export interface PreparedTask {
  input: TaskInput;
  args: SendMessageArgs;
  /** The message was claimed before (a resend): its task may have started already. */
  resent: boolean;
}

export class TaskIntake {
  readonly tenant: string;

  /**
   * @param agent the agent of the endpoint; the front door's stand-in (id '') serves every agent's tasks.
   * @param caller who is calling (src/core/auth/plugin.ts authenticated them); the intake acts in their tenant.
   */
  constructor(
    private readonly agent: Agent,
    private readonly caller: Caller,
    private readonly deps: IntakeDeps,
    private readonly dialect: Dialect,
  ) {
    this.tenant = caller.tenant;
  }

  /**
   * A per-agent endpoint answers only for its own agent's tasks: another agent's task of the tenant answers
   * exactly as an unknown one does (-32001, the same message), so the endpoint is no oracle either.
   * @throws TaskNotFound
   */
  async ownTask(taskId: string): Promise<void> {
    if (this.agent.id === '') return;
    let agentId: string | undefined;
    try {
      agentId = await agentOfTask(this.deps.pool, this.tenant, taskId);
    } catch (err) {
      // PostgreSQL is away: the workflow's search attributes know the agent too (reads keep working).
      if (!outageOf(err)) throw err;
      agentId = await this.deps.gateway.agentOf(this.tenant, taskId);
    }
    if (agentId !== undefined && agentId !== this.agent.id) throw a2aError('TaskNotFound', `Task ${taskId} not found`);
  }

  /**
   * Everything a new task needs before its workflow starts. §3.1: task ids are the server's; a contextId the
   * client gave is kept, otherwise one is minted. The messageId is claimed first, so the same message sent
   * again finds its task instead of starting another. The task's first event, `submitted`, goes in its log
   * here, so a stream can show it before Temporal has started anything.
   * @param headers the request's headers (a parent task may be named in one).
   * @param intent from the dialect's translation: a client-chosen task id (0.1, NEXUS) to use instead of a minted
   *   one, and the dialect (and client metadata) to record with the new task.
   */
  async prepare(
    message: WireMessage,
    args: Omit<SendMessageArgs, 'message'>,
    push: Record<string, unknown> | undefined,
    headers: Record<string, string | string[] | undefined> | undefined,
    intent?: CallIntent,
  ): Promise<PreparedTask> {
    const budgetMinor = this.budgetOf(message);
    // Both come from per-process caches; when an entry has expired, the two reads need not wait for each other.
    const [enforced, quotas] = await Promise.all([this.deps.policies.of(this.tenant), this.deps.quotas.of(this.tenant)]);
    // Governance (issue 12): an enforced policy that denies the agent refuses the task before anything is claimed.
    await enforcePolicies(this.deps.pool, this.tenant, this.agent, enforced);
    const parent = await this.parentOf(message, headers);
    // The agent reads its task's parent in the message, however the sender named it (see followUp).
    if (parent) message = namingParent(message, parent.taskId);
    if (!quotas) throw a2aError('Internal', `tenant ${this.tenant} has no quotas (it does not exist)`);
    const candidate = intent?.taskId ?? randomUUID();
    const contextId = message.contextId || randomUUID();
    const submittedAt = new Date().toISOString();
    // Key v0: the workflow's own changes are v1, v2…
    const submitted = (taskId: string): NewEvent[] => [
      { key: 'v0', event: { task: { ...submittedTask(taskId, contextId, submittedAt), history: [{ ...message, taskId, contextId }] } } },
    ];
    // A new claim logs the task's first event in the same round trip; a resent message logs nothing new, but its
    // claim may be the front door's router's (which logs nothing), so its event is appended below when missing.
    const claim = await claimWithinQuota(this.deps.pool, this.tenant, message.messageId, candidate, quotas, this.agent.id, submitted(candidate));
    const { taskId, resent } = claim;
    if (resent) await this.ownTask(taskId);
    try {
      if (intent?.record) await recordTaskDialect(this.deps.pool, this.tenant, taskId, intent.record.dialect, intent.record.metadata, intent.record.request);
      args = { ...args, pushConfigIds: await this.inlinePush(taskId, push, intent?.pushDialect) };
      // Linked before the child runs, so a cancel of the parent reaches it however soon it comes; the row first, so the
      // parent's first exchange, which reads it once its agent has answered, knows of every signal on its way.
      if (parent) {
        await linkChildTask(this.deps.pool, this.tenant, parent.taskId, taskId);
        await this.deps.gateway.linkChild(this.tenant, parent.taskId, { taskId, agentId: this.agent.id });
      }
    } catch (err) {
      // A refused request (an inline webhook URL the outbound guard refuses, say) leaves nothing: its claim is released,
      // so the orphan sweep does not start a task whose client was told no, and the same messageId, corrected, is a
      // new task. After an outage the claim stays, as the client is told: the same messageId starts it.
      if (!resent && !outageOf(err)) await releaseClaim(this.deps.pool, this.tenant, message.messageId).catch(() => undefined);
      throw err;
    }
    const stored = resent ? await appendEvents(this.deps.pool, this.tenant, taskId, submitted(taskId)) : claim.stored;
    this.deps.hub.publish(this.tenant, taskId, stored);
    const { agent } = this;
    return {
      input: {
        tenant: this.tenant,
        taskId,
        contextId,
        requester: this.tenant,
        ...(parent ? { parentTaskId: parent.taskId, depth: parent.depth } : {}),
        budgetMinor,
        submittedAt,
        inputTimeoutMs: this.deps.inputTimeoutMs,
        pushRetryInitialMs: this.deps.pushRetryInitialMs,
        patchLevel: PATCH_LEVEL,
        agent: { agentId: agent.id, endpoint: forwardingEndpoint(agent), priceMinor: agent.priceMinor, retry: agent.retry },
      },
      args: { ...args, message: { ...message, contextId } },
      resent,
    };
  }

  /**
   * An inline push config (SendMessage configuration) is stored for the task before the message goes in.
   * @param bodies the dialect its webhook bodies are written in, when not the call's engine's (a 0.1 client's: 0.1).
   */
  async inlinePush(taskId: string, push: Record<string, unknown> | undefined, bodies?: PushDialect): Promise<string[] | undefined> {
    if (!push?.url) return undefined;
    return [await storeInlinePushConfig(this.deps.push, this.tenant, this.dialect, taskId, push, bodies)];
  }

  /**
   * The first message's `metadata.budgetMinor`: the most the client will pay for the task, in integer minor
   * units. It is held instead of the agent's price, so it caps a cost the agent reports; below the price it
   * could not pay for the task at all, so it is refused (-32602) before anything starts.
   */
  private budgetOf(message: WireMessage): number | undefined {
    const budget = (message.metadata as Record<string, unknown> | undefined)?.budgetMinor;
    if (budget === undefined) return undefined;
    const field = 'message.metadata.budgetMinor';
    if (typeof budget !== 'number' || !Number.isSafeInteger(budget) || budget < 0) {
      throw a2aError('InvalidParams', `${field} must be a non-negative integer (minor units)`, [{ field, description: 'must be a non-negative integer' }]);
    }
    if (budget < this.agent.priceMinor) {
      const description = `is below the agent's price of ${this.agent.priceMinor}`;
      throw a2aError('InvalidParams', `${field} ${budget} ${description}; the task could not be paid for`, [{ field, description }]);
    }
    return budget;
  }

  /**
   * A follow-up message as its agent gets it: `metadata.switchboard.parentTaskId`, when the sender wrote one, is the
   * task's own parent (or gone, for a task without one), never what the sender said: only a new task's parent is
   * checked (parentOf), and an agent takes that key for its task's parent.
   */
  async followUp(message: WireMessage): Promise<WireMessage> {
    const claimed = (message.metadata?.switchboard as { parentTaskId?: unknown } | undefined)?.parentTaskId;
    if (claimed === undefined || !message.taskId) return message;
    return namingParent(message, (await findTask(this.deps.pool, this.tenant, message.taskId))?.parentTaskId);
  }

  /**
   * Multi-agent jobs: a task started by an agent on behalf of a Switchboard task names that task in the
   * `X-Switchboard-Parent-Task` header or `metadata.switchboard.parentTaskId` (Switchboard sends both when it
   * forwards). Only an agent key may name one, and only a task its own agent runs: the link is the agent's
   * explicit claim, not something a client can attach to another team's job. The new task is one hop deeper,
   * and past the hop limit it is refused.
   */
  private async parentOf(message: WireMessage, headers: Record<string, string | string[] | undefined> | undefined): Promise<{ taskId: string; depth: number } | undefined> {
    const header = headers?.[PARENT_TASK_HEADER];
    const fromMeta = (message.metadata?.switchboard as { parentTaskId?: unknown } | undefined)?.parentTaskId;
    const parentTaskId = (Array.isArray(header) ? header[0] : header) || (typeof fromMeta === 'string' ? fromMeta : undefined);
    if (!parentTaskId) return undefined;
    if (this.caller.role !== 'agent') {
      throw a2aError(
        'HopLimit',
        `A parent task (X-Switchboard-Parent-Task / metadata.switchboard.parentTaskId) may only be named with an agent key (role agent); this key's role is ${this.caller.role}`,
      );
    }
    const parent = (await findTask(this.deps.pool, this.tenant, parentTaskId)) ?? (await this.parentBeingRecorded(parentTaskId));
    if (parent && parent.agentId !== this.caller.agentId) {
      throw a2aError('HopLimit', `The parent task ${parentTaskId} is not run by this key's agent (${this.caller.agentId}); an agent starts child tasks only for its own tasks`);
    }
    if (!parent) throw a2aError('HopLimit', `The parent task ${parentTaskId} (X-Switchboard-Parent-Task / metadata.switchboard.parentTaskId) does not exist`);
    const depth = parent.depth + 1;
    if (depth > this.deps.maxHops) {
      throw a2aError(
        'HopLimit',
        `Hop limit reached: this task would be ${depth} hops below its root task (parent ${parentTaskId}; the limit is ${this.deps.maxHops}, SWITCHBOARD_MAX_HOPS). Agents calling each other in a loop?`,
      );
    }
    return { taskId: parentTaskId, depth };
  }

  /**
   * A parent task whose first row is still being written: its first turn writes it while it calls its agent
   * (activities/forward-message.ts startTurn), so an agent that calls back at once may come first. Claimed and not
   * yet recorded, it is waited for, up to PARENT_RECORD_WAIT_MS. Any other unknown parent is refused at once.
   */
  private async parentBeingRecorded(taskId: string): Promise<StoredTask | undefined> {
    const { pool } = this.deps;
    if (!(await claimedUnrecorded(pool, this.tenant, taskId))) return undefined;
    const deadline = Date.now() + PARENT_RECORD_WAIT_MS;
    for (let wait = 2; Date.now() < deadline; wait = Math.min(wait * 2, 100)) {
      await delay(wait);
      const parent = await findTask(pool, this.tenant, taskId);
      if (parent) return parent;
    }
    return undefined;
  }
}

/** How long a child's front door waits for its parent's first row (parentBeingRecorded): a write, not a workflow's start. */
const PARENT_RECORD_WAIT_MS = 5_000;

/** The message with `metadata.switchboard.parentTaskId` set to `parentTaskId` (removed when there is none). */
function namingParent(message: WireMessage, parentTaskId: string | undefined): WireMessage {
  const { parentTaskId: _said, ...switchboard } = (message.metadata?.switchboard ?? {}) as Record<string, unknown>;
  const named = { ...switchboard, ...(parentTaskId !== undefined && { parentTaskId }) };
  const { switchboard: _was, ...metadata } = message.metadata ?? {};
  return { ...message, metadata: { ...metadata, ...(Object.keys(named).length && { switchboard: named }) } };
}
