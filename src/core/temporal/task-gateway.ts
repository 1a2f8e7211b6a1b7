/**
 * The front door's way to task workflows: every start, update, query and signal a client's call causes goes
 * through here, which knows workflow ids, the task queue and Temporal's error types, and turns them into A2A
 * errors. Routes and the request handler never touch client.workflow.
 *
 * The other modules that call Temporal, each for its own job: src/core/agents/refresh-schedules.ts (the agents'
 * refresh schedules), src/core/temporal/orphan-sweep.ts (the sweep's schedule, and a visibility query for tasks
 * whose workflow closed early), the activities that signal or cancel a task's workflow from the worker side
 * (forward-message.ts: the agent's task id; jobs.ts: cancel a child; orphans.ts: end an orphan, through
 * startLeftTask and agentTaskOfClosedRun below), src/core/health.ts
 * (a liveness ping) and src/embedded/temporal.ts (the embedded server at start-up).
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  type Client,
  WithStartWorkflowOperation,
  QueryRejectedError,
  WorkflowClient,
  WorkflowExecutionAlreadyStartedError,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
} from '@temporalio/client';
import { ApplicationFailure, type Priority } from '@temporalio/common';
import type { Pool } from 'pg';
import type { Logger } from 'pino';
import { AgentRpcFailure, WORKFLOW_FAILURE_KINDS, taskError } from '../../../task/errors';
import { findTask } from '../db/task-store';
import { FailureTypes, agentTaskQuery, childTaskSignal, workflowIdOf, SA_AGENT, SA_CONTEXT, SA_STATE, SA_TENANT, SA_LEVEL, cancelUpdate, getTaskQuery, pushConfigSignal, sendMessageUpdate } from '../../../task/messages';
import { type Refusal, isInterrupted, refuseCancel, refuseMessage, stateLabel, viewTask } from '../../../task/rules';
import { headSeq, lastEvent, snapshotAt, streamedArtifacts } from '../events/event-log';
import { OLDEST_LEVEL, PATCH_LEVEL, type TaskWorkflow } from '../../../task/contracts';
import type { AgentRpcError, AgentTaskRef, SendMessageArgs, TaskInput } from '../../../task/contracts';
import type { WireTask } from '../../../task/wire';
import { DependencyUnavailable, type Health, outageOf } from '../health';
import type { WorkerPresence } from './worker-presence';

export interface TaskGatewayOptions {
  client: Client;
  taskQueue: string;
  pool: Pool;
  log: Logger;
  /** While Temporal is known to be down, GetTask answers from the projection without trying it. */
  health?: Health;
  /** Whether any worker polls the task queue: a send nobody would answer says so (whileWorkersPoll). */
  workers?: WorkerPresence;
  /** How long a send waits for its answer before it asks whether any worker polls, and then between asks (default 3 s). */
  noWorkerCheckMs?: number;
}

/**
 * A blocking send while no worker polls the task queue (HTTP 503, JSON-RPC -32054 with Retry-After, like an
 * outage, but nothing is marked down). The task and its message are kept: the call carries on in this process.
 */
export class NoWorkerPolling extends DependencyUnavailable {
  constructor(message: string) {
    super('temporal', undefined, 10, true);
    this.message = message;
  }
}

/** A query is a read: past this it is answered from the projection instead (a down server, a busy worker). */
const QUERY_DEADLINE_MS = 3_000;

/** How long a follow-up waits for a workflow that is redoing the step that made it wait for input. */
const BUSY_RETRY_MS = 30_000;

export { workflowIdOf };

/** Open task workflows by the level of the code that started them (TaskGateway.openLevels). */
export interface OpenLevels {
  /** The level this release starts new tasks at. */
  newest: number;
  /** The oldest level this release runs. */
  oldest: number;
  /** Open tasks at each level this release runs, newest first. */
  levels: { level: number; open: number }[];
  /** Open tasks below `oldest`: this release refuses them. */
  retired: number;
  /** Open tasks started before tasks were labelled with their level: at `oldest` or below it. */
  unlabelled: number;
}

export class TaskGateway {
  /**
   * Queries only open workflows: a closed one's state is the projection's, which outlives it and which the orphan
   * sweep may have ended after the workflow was terminated (a replayed query would still say input-required).
   */
  private readonly queries: WorkflowClient;

  constructor(private readonly o: TaskGatewayOptions) {
    this.queries = new WorkflowClient({
      connection: o.client.connection,
      namespace: o.client.options.namespace,
      dataConverter: o.client.options.dataConverter,
      // The client's interceptors (its plugins': tracing) apply to queries too.
      interceptors: o.client.options.interceptors?.workflow,
      queryRejectCondition: 'NOT_OPEN',
    });
  }

  /**
   * Starts the task's workflow and delivers its first message in one call (update-with-start).
   * @returns the task when the turn ends, or at once with `returnImmediately`.
   */
  async start(input: TaskInput, args: SendMessageArgs, opts: { priority?: Priority; resent?: boolean } = {}): Promise<WireTask> {
    // A resent first message whose workflow exists already (started by a send whose answer was lost, or by the orphan
    // sweep, blocking) is the same update: it would answer when that one does. Asked to answer at once, it does.
    if (opts.resent && args.returnImmediately && (await this.exists(input.tenant, input.taskId))) return this.get(input.tenant, input.taskId, args.historyLength);
    // (An operation is used once: each call, a retry's too, makes its own.)
    const send = () =>
      againAfterWorkflowTaskFailure(() =>
        this.o.client.workflow.executeUpdateWithStart(sendMessageUpdate, {
          args: [args],
          updateId: args.message.messageId,
          startWorkflowOperation: startOperation(this.o.taskQueue, input, opts.priority),
        }),
      );
    const startIt = (signal?: AbortSignal) => (signal ? this.o.client.connection.withAbortSignal(signal, send) : send());
    try {
      // Temporal dying while the call is out is seen by the health probe within ~3 s: the client hears so then.
      const started = this.o.health ? this.o.health.untilDown('temporal', startIt) : startIt();
      return await this.whileWorkersPoll(started, input.tenant, input.taskId, args.returnImmediately);
    } catch (err) {
      if (err instanceof NoWorkerPolling) throw err;
      // The resent first message of a task that has ended: answer with the task as it ended.
      if (err instanceof WorkflowExecutionAlreadyStartedError) return this.get(input.tenant, input.taskId, args.historyLength);
      // The task's claim stays: the same messageId finds it again, and starts its workflow (or finds the one that
      // did start before Temporal went away). A new messageId would be a new task.
      if (outageOf(err) === 'temporal') {
        throw new DependencyUnavailable('temporal', `task ${input.taskId} was not started; send the message again with the same messageId to start it`);
      }
      throw this.toA2A(err, input.taskId);
    }
  }

  /**
   * Delivers a follow-up message; its updateId is the messageId, so a retried message is applied once.
   *
   * The event that told the client the task needs input is logged while the workflow's step that reached that
   * state is still being saved; if the worker died in that gap, the step is redone and the workflow briefly
   * looks busy. So "busy" while the log says the task waits for input is retried for a while.
   */
  async continue(tenant: string, taskId: string, args: SendMessageArgs): Promise<WireTask> {
    const handle = this.o.client.workflow.getHandle(workflowIdOf(tenant, taskId));
    const deadline = Date.now() + BUSY_RETRY_MS;
    const deliver = async () => {
      for (let delay = 200; ; delay = Math.min(delay * 2, 2000)) {
        try {
          return await handle.executeUpdate(sendMessageUpdate, { args: [args], updateId: args.message.messageId });
        } catch (err) {
          const busy = err instanceof WorkflowUpdateFailedError && err.cause instanceof ApplicationFailure && err.cause.type === FailureTypes.TaskBusy;
          if (!busy || Date.now() > deadline || !(await this.logSaysWaiting(tenant, taskId))) throw err;
          await new Promise((r) => setTimeout(r, delay));
        }
      }
    };
    try {
      return await this.whileWorkersPoll(deliver(), tenant, taskId, args.returnImmediately);
    } catch (err) {
      if (err instanceof NoWorkerPolling) throw err;
      if (err instanceof WorkflowNotFoundError) {
        // The workflow is gone (closed and past retention): the projection knows whether the task ever existed.
        const stored = await findTask(this.o.pool, tenant, taskId);
        const refusal = stored && refuseMessage(stored.task, false, args.message.contextId);
        if (refusal) throw refused(refusal);
      }
      throw this.toA2A(err, taskId);
    }
  }

  /**
   * A send's answer comes from the task's workflow, so from a worker. After noWorkerCheckMs without it (and as often
   * again) Temporal is asked whether any worker polls the queue; when none does, the client hears so at once instead
   * of waiting for a worker that may never come. The call carries on in this process (Temporal's client resends an
   * update until a workflow has taken it), so the message reaches the task when a worker comes.
   *
   * Blocking (the default), A2A's SendMessage "MUST wait until the task reaches a terminal or interrupted state
   * before returning" (a2a.proto, SendMessageConfiguration.return_immediately): a task still `submitted` is not an
   * answer it may give, so it is an error (NoWorkerPolling) saying so, naming the task. With returnImmediately the
   * task as it is (submitted, or waiting for input) is the answer, with a status message saying why nothing moves.
   */
  private async whileWorkersPoll(call: Promise<WireTask>, tenant: string, taskId: string, returnImmediately: boolean): Promise<WireTask> {
    const workers = this.o.workers;
    if (!workers) return call;
    const answered = new AbortController();
    call.finally(() => answered.abort()).catch(() => undefined); // a failure reaches the client through the race below
    const noWorker = (async () => {
      for (;;) {
        await sleep(this.o.noWorkerCheckMs ?? 3000, undefined, { signal: answered.signal });
        // Temporal itself unreachable is the health probe's to say, not this.
        if ((await workers.pollers().catch(() => undefined))?.count === 0) return 'none' as const;
      }
    })();
    noWorker.catch(() => undefined); // aborted: the call answered first
    const first = await Promise.race([call, noWorker]);
    if (first !== 'none') return first;
    call.catch((err: unknown) => this.o.log.warn({ err, taskId }, 'a send whose client was told that no worker polls failed afterwards'));
    const why = `no worker is polling the task queue ${this.o.taskQueue}: task ${taskId} is kept and runs when a worker polls it`;
    if (!returnImmediately) {
      throw new NoWorkerPolling(`Not answered: ${why}. Send the same message again (same messageId) to wait for it, or follow the task with GetTask or SubscribeToTask`);
    }
    const task = (await findTask(this.o.pool, tenant, taskId))?.task ?? (await snapshotAt(this.o.pool, tenant, taskId, await headSeq(this.o.pool, tenant, taskId)));
    if (!task) throw taskError('Internal', `Task ${taskId} has no record yet`);
    const note = { messageId: randomUUID(), role: 'ROLE_AGENT' as const, parts: [{ text: `Waiting: ${why}.` }], taskId, contextId: task.contextId };
    return { ...task, status: { ...task.status, message: note } };
  }

  private async logSaysWaiting(tenant: string, taskId: string): Promise<boolean> {
    const last = await lastEvent(this.o.pool, tenant, taskId);
    return !!last && 'statusUpdate' in last.event && isInterrupted(last.event.statusUpdate.status.state);
  }

  /**
   * GetTask: a workflow query while Temporal has the workflow, else the PostgreSQL projection. While Temporal is
   * down, or when the query takes longer than a few seconds, the projection answers (it trails the workflow by
   * at most the state change being written).
   */
  async get(tenant: string, taskId: string, historyLength?: number): Promise<WireTask> {
    if (this.o.health?.isUp('temporal') !== false) {
      try {
        const handle = this.queries.getHandle(workflowIdOf(tenant, taskId));
        const task = await this.o.client.connection.withDeadline(Date.now() + QUERY_DEADLINE_MS, () => handle.query(getTaskQuery, historyLength));
        return await this.withStreamed(tenant, task);
      } catch (err) {
        if (!(err instanceof WorkflowNotFoundError || err instanceof QueryRejectedError)) this.o.log.warn({ err, taskId }, 'task query failed; answering from the projection');
      }
    }
    const stored = await findTask(this.o.pool, tenant, taskId);
    if (!stored) throw taskError('TaskNotFound', `Task ${taskId} not found`);
    return this.withStreamed(tenant, viewTask(stored.task, historyLength));
  }

  /**
   * A canceled task with what its last turn streamed before the cancel: the artifacts its events built that its
   * record lacks (the turn never ended, so the workflow never had them), each marked
   * `metadata.switchboard.streamedBeforeCancel`, so a client and the console see the partial work as partial.
   */
  private async withStreamed(tenant: string, task: WireTask): Promise<WireTask> {
    if (task.status.state !== 'TASK_STATE_CANCELED') return task;
    const kept = new Set((task.artifacts ?? []).map((a) => a.artifactId));
    const partial = (await streamedArtifacts(this.o.pool, tenant, task.id)).filter((a) => !kept.has(a.artifactId));
    if (partial.length === 0) return task;
    const marked = partial.map((a) => ({ ...a, metadata: { ...a.metadata, switchboard: { ...(a.metadata?.switchboard as object | undefined), streamedBeforeCancel: true } } }));
    return { ...task, artifacts: [...(task.artifacts ?? []), ...marked] };
  }

  /**
   * CancelTask: the workflow cancels the agent call, tells the agent, and ends canceled. Canceling a canceled
   * task returns it (idempotent); any other terminal state is TaskNotCancelable.
   */
  async cancel(tenant: string, taskId: string): Promise<WireTask> {
    let task: WireTask;
    try {
      task = await this.o.client.workflow.getHandle(workflowIdOf(tenant, taskId)).executeUpdate(cancelUpdate, { args: [] });
    } catch (err) {
      if (!(err instanceof WorkflowNotFoundError)) throw this.toA2A(err, taskId);
      const stored = await findTask(this.o.pool, tenant, taskId);
      if (!stored) throw taskError('TaskNotFound', `Task ${taskId} not found`);
      task = stored.task;
    }
    // The cancel lost the race with completion, or the workflow was already gone: the state that stands says.
    const refusal = refuseCancel(task);
    if (refusal) throw refused(refusal);
    if (task.status.state !== 'TASK_STATE_CANCELED') throw taskError('Internal', `Task ${taskId} did not reach canceled (it is ${stateLabel(task.status.state)})`);
    return this.withStreamed(tenant, task);
  }

  /**
   * How many task workflows are open at each level of the task workflow's code (workflows/levels.ts), every tenant's:
   * from this release's oldest level to its newest, those below it (refused by this release: drain them with the
   * previous one), and those started before workflows were labelled with their level (A2APatchLevel), which are at
   * a level this release runs or below it (docs/operations.md, "Upgrading").
   */
  async openLevels(): Promise<OpenLevels> {
    const open = `WorkflowType = 'taskWorkflow' AND ExecutionStatus = 'Running'`;
    const count = async (where: string) => (await this.o.client.workflow.count(`${open} AND ${where}`)).count;
    const levels: { level: number; open: number }[] = [];
    for (let level = PATCH_LEVEL; level >= OLDEST_LEVEL; level--) levels.push({ level, open: await count(`A2APatchLevel = '${level}'`) });
    const retiredLevels = Array.from({ length: OLDEST_LEVEL }, (_, l) => `'${l}'`).join(', ');
    return {
      newest: PATCH_LEVEL,
      oldest: OLDEST_LEVEL,
      levels,
      retired: await count(`A2APatchLevel IN (${retiredLevels})`),
      unlabelled: await count('A2APatchLevel IS NULL'),
    };
  }

  /** Whether the task's workflow exists (running or closed); any doubt is left to the start, which says what went wrong. */
  private async exists(tenant: string, taskId: string): Promise<boolean> {
    try {
      await this.o.client.workflow.getHandle(workflowIdOf(tenant, taskId)).describe();
      return true;
    } catch {
      return false;
    }
  }

  /** The agent a task runs on, from its workflow's search attributes (when PostgreSQL cannot say). */
  async agentOf(tenant: string, taskId: string): Promise<string | undefined> {
    try {
      const handle = this.o.client.workflow.getHandle(workflowIdOf(tenant, taskId));
      const described = await this.o.client.connection.withDeadline(Date.now() + QUERY_DEADLINE_MS, () => handle.describe());
      return described.typedSearchAttributes.get(SA_AGENT);
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return undefined;
      throw err;
    }
  }

  /** Multi-agent jobs: tells the parent task's workflow that a child task was started for it. */
  async linkChild(tenant: string, parentTaskId: string, child: { taskId: string; agentId: string }): Promise<void> {
    try {
      await this.o.client.workflow.getHandle(workflowIdOf(tenant, parentTaskId)).signal(childTaskSignal, child);
    } catch (err) {
      // A parent that has already ended keeps no list; the child's projection row still names it.
      if (!(err instanceof WorkflowNotFoundError)) this.o.log.warn({ err, parentTaskId }, 'could not link a child task to its parent');
    }
  }

  /** Tells the task's workflow to deliver its events to a new push-notification config. */
  async watchPush(tenant: string, taskId: string, configId: string): Promise<void> {
    try {
      await this.o.client.workflow.getHandle(workflowIdOf(tenant, taskId)).signal(pushConfigSignal, configId);
    } catch (err) {
      throw this.toA2A(err, taskId);
    }
  }

  private toA2A(err: unknown, taskId: string): Error {
    if (err instanceof WorkflowNotFoundError) return taskError('TaskNotFound', `Task ${taskId} not found`);
    if (err instanceof WorkflowUpdateFailedError && err.cause instanceof ApplicationFailure && err.cause.type === FailureTypes.AgentError) {
      const e = err.cause.details?.[0] as AgentRpcError | undefined;
      if (e) return new AgentRpcFailure(e.code, e.message);
    }
    if (err instanceof WorkflowUpdateFailedError && err.cause instanceof ApplicationFailure && Object.hasOwn(WORKFLOW_FAILURE_KINDS, err.cause.type ?? '')) {
      return refused({ type: err.cause.type as Refusal['type'], message: err.cause.message });
    }
    this.o.log.error({ err, taskId }, 'unexpected Temporal error');
    return taskError('Internal', `Internal error while handling task ${taskId}`);
  }
}

/**
 * Temporal fails an update-with-start whose workflow task failed before it accepted the update: the update was not
 * taken, and the workflow, started, takes it when it is sent again (the same update id). It happens when the server
 * refuses a workflow task that completes the workflow because a signal arrived while it ran (patch level 7: a simple
 * task ends in the workflow task that took its message), and when the worker running it died. The rerun of the
 * workflow task reads the first exchange's kept answer (activities/forward-message.ts settleHere): the agent is not
 * called again.
 */
const WORKFLOW_TASK_FAILED = /unexpected workflow task failure/i;
const WORKFLOW_TASK_FAILED_TRIES = 5;

async function againAfterWorkflowTaskFailure<T>(call: () => Promise<T>): Promise<T> {
  for (let tries = 1; ; tries++) {
    try {
      return await call();
    } catch (err) {
      const text = `${(err as Error)?.message} ${((err as Error)?.cause as Error | undefined)?.message}`;
      if (tries >= WORKFLOW_TASK_FAILED_TRIES || !WORKFLOW_TASK_FAILED.test(text)) throw err;
      await new Promise((r) => setTimeout(r, 50 * 2 ** tries));
    }
  }
}

/** How every task workflow is started: its id, queue, search attributes and what Temporal UI shows of it. */
function startOperation(taskQueue: string, input: TaskInput, priority?: Priority): WithStartWorkflowOperation<TaskWorkflow> {
  return new WithStartWorkflowOperation<TaskWorkflow>('taskWorkflow', {
    workflowId: workflowIdOf(input.tenant, input.taskId),
    taskQueue,
    args: [input],
    // The task id comes from claimMessage: a resent first message reaches the same workflow, where the
    // update id (the messageId) makes it a no-op. A closed task is never started again.
    workflowIdConflictPolicy: 'USE_EXISTING',
    workflowIdReusePolicy: 'REJECT_DUPLICATE',
    typedSearchAttributes: [
      { key: SA_STATE, value: stateLabel('TASK_STATE_SUBMITTED') },
      { key: SA_AGENT, value: input.agent.agentId },
      { key: SA_CONTEXT, value: input.contextId },
      { key: SA_TENANT, value: input.tenant },
      { key: SA_LEVEL, value: String(input.patchLevel ?? 0) },
    ],
    staticSummary: `A2A task ${input.taskId} → agent ${input.agent.agentId}`,
    // Backlogged tasks run in priority-key order (Genesis envelopes' priority); shown in Temporal UI.
    ...(priority ? { priority } : {}),
    staticDetails: `tenant \`${input.tenant}\`, context \`${input.contextId}\`, agent endpoint ${input.agent.endpoint.url} (A2A ${input.agent.endpoint.protocolVersion})`,
  });
}

/**
 * The orphan sweep's start of a task whose first message was claimed but whose workflow never started (its front
 * door died between the two, or lost Temporal then): the same update-with-start as the front door's, with the same
 * update id (the messageId), so a client's resend joins this start instead of making a second. It waits only until
 * the workflow has accepted the message; the turn goes on without it.
 * @returns false when the task's workflow exists already (running or closed): nothing was sent.
 * @throws what Temporal throws, other than "not found" and "already started".
 */
export async function startLeftTask(client: Client, taskQueue: string, input: TaskInput, args: SendMessageArgs): Promise<boolean> {
  try {
    await client.workflow.getHandle(workflowIdOf(input.tenant, input.taskId)).describe();
    return false;
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) throw err;
  }
  try {
    await client.workflow.startUpdateWithStart(sendMessageUpdate, {
      args: [args],
      updateId: args.message.messageId,
      startWorkflowOperation: startOperation(taskQueue, input),
      waitForStage: 'ACCEPTED',
    });
    return true;
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) return false;
    throw err;
  }
}

/**
 * The agent's task a closed task workflow last knew of (its `agentTask` query, answered by replaying the run's
 * history on a worker), for the orphan sweep to cancel it at the agent. Undefined when the run never learned one,
 * or cannot say within 10 s (a level no worker replays any more, say).
 */
export async function agentTaskOfClosedRun(client: Client, tenant: string, taskId: string, runId: string): Promise<AgentTaskRef | undefined> {
  try {
    const handle = client.workflow.getHandle(workflowIdOf(tenant, taskId), runId);
    return await client.connection.withDeadline(Date.now() + 10_000, () => handle.query(agentTaskQuery));
  } catch {
    return undefined;
  }
}

/** A task's refusal (the workflow's, or the same rule applied to the projection) as the A2A error for it. */
function refused(r: Refusal): Error {
  return taskError(WORKFLOW_FAILURE_KINDS[r.type], r.message);
}
