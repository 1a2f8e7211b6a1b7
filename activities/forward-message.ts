/**
 * The forwarding activity: one client message to the agent, in the agent's dialect, until the agent's task is
 * terminal or interrupted. Every attempt sends the same messageId, so an agent that deduplicates sees one message.
 */
import { A2AError } from '@a2a-js/sdk/errors';
import { Message, SendMessageRequest, Task, TaskArtifactUpdateEvent, TaskStatusUpdateEvent, type StreamResponse } from '@a2a-js/sdk';
import { ApplicationFailure, Context, heartbeat, sleep } from '@temporalio/activity';
import { agentTaskSignal } from '../workflows/messages';
import { OutboundError } from '../src/http/outbound';
import type { AgentEndpoint, ForwardResult, TaskState, WireArtifact, WireMessage, WireTask } from '../workflows/types';
import { agentClient, type HttpTrace } from './agent-client';

export interface ForwardArgs {
  endpoint: AgentEndpoint;
  message: WireMessage;
  /** The agent's own ids for this conversation, once known (a follow-up continues the agent's task). */
  agentTaskId?: string;
  agentContextId?: string;
  gatewayTaskId: string;
  gatewayContextId: string;
}

const SETTLED = (s: TaskState) => s !== 'TASK_STATE_SUBMITTED' && s !== 'TASK_STATE_WORKING';
const POLL_MS = 500;

export async function forwardMessage(fetchImpl: typeof fetch, args: ForwardArgs): Promise<ForwardResult> {
  const ctx = Context.current();
  const trace: HttpTrace = {};
  const beat = setInterval(() => heartbeat(), 1_000);
  heartbeat();
  try {
    const client = await agentClient(args.endpoint, fetchImpl, trace);
    const request = SendMessageRequest.fromJSON({
      // The agent knows its task by its own ids, never by the gateway's.
      message: { ...args.message, taskId: args.agentTaskId, contextId: args.agentContextId },
      configuration: { returnImmediately: false },
    });
    const options = { signal: ctx.cancellationSignal };
    let task: WireTask | undefined;
    const announce = once(async (t: WireTask) => {
      // The workflow needs the agent's task id to pass a cancel on while this call is still running.
      if (t.id === args.agentTaskId) return;
      const workflowId = ctx.info.workflowExecution?.workflowId;
      if (!workflowId) return;
      await ctx.client.workflow.getHandle(workflowId).signal(agentTaskSignal, { agentTaskId: t.id, agentContextId: t.contextId || undefined });
    });
    if (args.endpoint.streaming) {
      const acc = new StreamAccumulator();
      for await (const event of client.sendMessageStream(request, options)) {
        acc.add(event);
        if (acc.task) await announce(acc.task);
      }
      task = acc.task;
      if (!task) return acc.messageResult(args);
    } else {
      const reply = await client.sendMessage(request, options);
      if ('messageId' in reply) return messageResult(Message.toJSON(reply) as WireMessage, args);
      task = Task.toJSON(reply) as WireTask;
    }
    // An agent that answered before the task settled (or ignored blocking) is polled until it does.
    while (!SETTLED(task.status.state)) {
      await announce(task);
      await sleep(POLL_MS);
      task = Task.toJSON(await client.getTask({ tenant: '', id: task.id }, options)) as WireTask;
    }
    return taskResult(task, args);
  } catch (err) {
    if (ctx.cancellationSignal.aborted) await ctx.cancelled; // report the cancellation, not the abort it caused
    throw classify(err, trace);
  } finally {
    clearInterval(beat);
  }
}

/** Folds a stream of 1.0 StreamResponse events into the agent's latest task. */
class StreamAccumulator {
  task?: WireTask;
  private message?: WireMessage;
  private artifacts = new Map<string, WireArtifact>();

  add(event: StreamResponse): void {
    const p = event.payload;
    if (!p) return;
    if (p.$case === 'task') {
      this.task = Task.toJSON(p.value) as WireTask;
      for (const a of this.task.artifacts ?? []) this.artifacts.set(a.artifactId, a);
    } else if (p.$case === 'message') {
      this.message = Message.toJSON(p.value) as WireMessage;
    } else if (p.$case === 'statusUpdate' && this.task) {
      const u = TaskStatusUpdateEvent.toJSON(p.value) as { status: WireTask['status']; metadata?: Record<string, unknown> };
      this.task.status = u.status;
      if (u.metadata) this.task.metadata = { ...this.task.metadata, ...u.metadata };
    } else if (p.$case === 'artifactUpdate') {
      const u = TaskArtifactUpdateEvent.toJSON(p.value) as { artifact: WireArtifact; append?: boolean };
      const prev = this.artifacts.get(u.artifact.artifactId);
      this.artifacts.set(
        u.artifact.artifactId,
        u.append && prev ? { ...prev, parts: [...prev.parts, ...u.artifact.parts] } : u.artifact,
      );
    }
    if (this.task) this.task.artifacts = [...this.artifacts.values()];
  }

  messageResult(args: ForwardArgs): ForwardResult {
    if (!this.message) throw ApplicationFailure.nonRetryable('the agent closed the stream without a task or a message', 'InvalidAgentResponse');
    return messageResult(this.message, args);
  }
}

/** A message-only reply (no task at the agent) completes the gateway's task with that message. */
function messageResult(reply: WireMessage, args: ForwardArgs): ForwardResult {
  return {
    agentContextId: reply.contextId || undefined,
    state: 'TASK_STATE_COMPLETED',
    statusMessage: { ...reply, taskId: args.gatewayTaskId, contextId: args.gatewayContextId },
    artifacts: [],
    costMinor: costOf(reply.metadata),
  };
}

function taskResult(task: WireTask, args: ForwardArgs): ForwardResult {
  const m = task.status.message;
  return {
    agentTaskId: task.id,
    agentContextId: task.contextId || undefined,
    state: task.status.state,
    statusMessage: m ? { ...m, taskId: args.gatewayTaskId, contextId: args.gatewayContextId } : undefined,
    artifacts: task.artifacts ?? [],
    costMinor: costOf(task.metadata) ?? costOf(m?.metadata),
  };
}

/** Agents report what a task cost as `metadata.cost` in integer minor units; anything else is ignored. */
function costOf(metadata: Record<string, unknown> | undefined): number | undefined {
  const cost = metadata?.cost;
  return typeof cost === 'number' && Number.isSafeInteger(cost) && cost >= 0 ? cost : undefined;
}

/**
 * Sorts a failure into "retrying may help" (network trouble, 5xx, 408/429) and "it cannot succeed"
 * (a JSON-RPC error, another 4xx, an unreadable answer, a refused address). The non-retryable types are
 * listed in NON_RETRYABLE_FORWARD_ERRORS in the workflow.
 */
export function classify(err: unknown, trace: HttpTrace): ApplicationFailure {
  const outbound = findOutboundError(err);
  if (outbound) {
    const transient = outbound.code === 'TIMEOUT' || outbound.code === 'NETWORK';
    return ApplicationFailure.create({ message: outbound.message, type: transient ? 'AgentUnavailable' : 'AgentUnreachable', nonRetryable: !transient });
  }
  const message = err instanceof Error ? err.message : String(err);
  if (err instanceof A2AError && trace.lastStatus !== undefined && trace.lastStatus < 300) {
    return ApplicationFailure.nonRetryable(`the agent answered with an error: ${message}`, 'AgentRejected');
  }
  const status = trace.lastStatus;
  if (status === undefined) return ApplicationFailure.retryable(`the agent could not be reached: ${message}`, 'AgentUnavailable');
  if (status >= 500 || status === 408 || status === 429) {
    return ApplicationFailure.retryable(`the agent answered HTTP ${status}`, 'AgentUnavailable');
  }
  if (status >= 400) return ApplicationFailure.nonRetryable(`the agent refused the request with HTTP ${status}: ${message}`, 'AgentRejected');
  return ApplicationFailure.nonRetryable(`the agent's answer is not a valid A2A response: ${message}`, 'InvalidAgentResponse');
}

function once<A>(fn: (a: A) => Promise<void>): (a: A) => Promise<void> {
  let done = false;
  return async (a) => {
    if (done) return;
    done = true;
    await fn(a);
  };
}

function findOutboundError(err: unknown): OutboundError | undefined {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof OutboundError) return e;
  }
  return undefined;
}
