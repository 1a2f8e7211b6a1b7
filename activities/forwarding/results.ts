/**
 * What a turn makes of the agent's answers: a stream folded into the agent's task (StreamAccumulator), the agent's
 * events relayed to the gateway task's log (Relay), a failed attempt's output voided, and the turn's result.
 */
import { Message, Task, TaskArtifactUpdateEvent, TaskStatusUpdateEvent, type StreamResponse } from '@a2a-js/sdk';
import { ApplicationFailure } from '@temporalio/activity';
import type { Pool } from 'pg';
import { seqRangeOf } from '../../src/core/events/event-log';
import type { EventSink } from '../../src/core/events/event-sink';
import { costOf } from '../../src/core/agents/agent-cost';
import { compactArtifact, withinBudget } from '../../task/artifacts';
import type { ForwardResult } from '../../task/contracts';
import type { WireArtifact, WireArtifactUpdate, WireMessage, WireStatusUpdate, WireTask } from '../../task/wire';
import type { ForwardArgs } from './args';
import { agentMetadata } from '../../task/agent-metadata';

/** Folds a stream of 1.0 StreamResponse events into the agent's latest task. */
export class StreamAccumulator {
  task?: WireTask;
  private reply?: WireMessage;
  private artifacts = new Map<string, WireArtifact>();

  add(event: StreamResponse): void {
    const p = event.payload;
    if (!p) return;
    if (p.$case === 'task') {
      this.task = Task.toJSON(p.value) as WireTask;
      for (const a of this.task.artifacts ?? []) this.artifacts.set(a.artifactId, a);
    } else if (p.$case === 'message') {
      this.reply = Message.toJSON(p.value) as WireMessage;
    } else if (p.$case === 'statusUpdate') {
      const u = TaskStatusUpdateEvent.toJSON(p.value) as WireStatusUpdate;
      // A stream may start with an update instead of the task (the coding-agent seed's does): it names the task.
      this.task ??= { id: u.taskId, contextId: u.contextId, status: u.status };
      this.task.status = u.status;
      if (u.metadata) this.task.metadata = { ...this.task.metadata, ...u.metadata };
    } else if (p.$case === 'artifactUpdate') {
      const u = TaskArtifactUpdateEvent.toJSON(p.value) as WireArtifactUpdate;
      this.task ??= { id: u.taskId, contextId: u.contextId, status: { state: 'TASK_STATE_WORKING' } };
      const prev = this.artifacts.get(u.artifact.artifactId);
      if (u.append && prev) prev.parts.push(...u.artifact.parts); // in place: long streams append thousands of chunks
      else this.artifacts.set(u.artifact.artifactId, { ...u.artifact, parts: [...u.artifact.parts] });
    }
    if (this.task) this.task.artifacts = [...this.artifacts.values()];
  }

  /** The agent's message, for a stream that carried no task. */
  message(): WireMessage {
    if (!this.reply) throw ApplicationFailure.nonRetryable('the agent closed the stream without a task or a message', 'InvalidAgentResponse');
    return this.reply;
  }
}

/**
 * Turns the agent's stream events into the gateway task's events: artifact chunks (append/lastChunk kept)
 * and progress updates (state working), with the agent's ids replaced by the gateway's. The turn's outcome
 * (input-required, completed, failed…) is not relayed: the workflow logs it once it has applied it.
 */
export class Relay {
  /** Parts relayed per artifact id, to tell a complete stream from one that broke off. */
  private readonly relayed = new Map<string, number>();
  /** The Genesis RESPONSE last logged as progress (its id). */
  private progressed?: string;

  constructor(
    private readonly sink: EventSink,
    private readonly args: ForwardArgs,
  ) {}

  async event(event: StreamResponse): Promise<void> {
    const p = event.payload;
    const ids = { taskId: this.args.gatewayTaskId, contextId: this.args.gatewayContextId };
    if (p?.$case === 'artifactUpdate') {
      const u = TaskArtifactUpdateEvent.toJSON(p.value) as WireArtifactUpdate;
      const before = u.append ? (this.relayed.get(u.artifact.artifactId) ?? 0) : 0;
      this.relayed.set(u.artifact.artifactId, before + u.artifact.parts.length);
      await this.sink.push({ artifactUpdate: { ...u, ...ids } });
    } else if (p?.$case === 'statusUpdate') {
      const u = TaskStatusUpdateEvent.toJSON(p.value) as WireStatusUpdate;
      if (u.status.state !== 'TASK_STATE_WORKING') return;
      const message = u.status.message && { ...u.status.message, ...ids };
      await this.sink.push({ statusUpdate: { ...u, ...ids, status: { ...u.status, ...(message ? { message } : {}) } } });
    }
  }

  /**
   * Logs, whole, each artifact of the final answer that did not stream completely: one that arrived in a
   * blocking answer or a task snapshot, or whose stream broke off before the agent's task settled (it is
   * then sent with append: false, replacing the partial one).
   */
  async remaining(artifacts: WireArtifact[], { lastChunk = true, all = false } = {}): Promise<void> {
    const ids = { taskId: this.args.gatewayTaskId, contextId: this.args.gatewayContextId };
    for (const artifact of artifacts) {
      if (!all && this.relayed.get(artifact.artifactId) === artifact.parts.length) continue;
      this.relayed.set(artifact.artifactId, artifact.parts.length);
      await this.sink.push({ artifactUpdate: { ...ids, artifact, append: false, lastChunk } });
    }
  }

  /**
   * A Genesis agent's PARTIAL RESPONSE (its task working, the RESPONSE in metadata `genesisResponse`: the Genesis
   * transport's reading) as the task's progress: a working status with the RESPONSE's data as its message and the
   * RESPONSE in its metadata, each RESPONSE once. A synchronous COMMAND's sender is answered with it
   * (src/api/genesis/service.ts firstAnswer). Any other task: nothing.
   */
  async progress(task: WireTask): Promise<void> {
    const response = task.metadata?.genesisResponse as { id?: unknown; status?: unknown } | undefined;
    if (response?.status !== 'PARTIAL' || task.status.state !== 'TASK_STATE_WORKING') return;
    const key = typeof response.id === 'string' ? response.id : JSON.stringify(response);
    if (key === this.progressed) return;
    this.progressed = key;
    const ids = { taskId: this.args.gatewayTaskId, contextId: this.args.gatewayContextId };
    const message = task.status.message && { ...task.status.message, ...ids };
    await this.sink.push({ statusUpdate: { ...ids, status: { ...task.status, ...(message ? { message } : {}) }, metadata: { genesisResponse: response } } });
  }

  /** A re-attached stream starts with the task so far: its artifacts replace what was relayed of them. */
  snapshot(artifacts: WireArtifact[]): Promise<void> {
    return this.remaining(artifacts, { lastChunk: false });
  }
}

/**
 * The first event of a retried attempt: it names the events of the failed attempt so a reader can drop them
 * (metadata `switchboard.void = {attempt, fromSeq, toSeq}`): the agent is asked again from the start, or its task
 * re-attached (`resumed`), whose snapshot brings the output so far again.
 */
export async function voidPreviousAttempt(pool: Pool, sink: EventSink, args: ForwardArgs, previousKey: string, attempt: number, resumed: boolean): Promise<void> {
  const range = await seqRangeOf(pool, args.tenant, args.gatewayTaskId, previousKey);
  if (!range) return;
  const next = resumed ? `Following the agent's task again (attempt ${attempt}).` : `Asking the agent again (attempt ${attempt}).`;
  const text = `Attempt ${attempt - 1} of the agent call failed; its partial output (events ${range.from}-${range.to}) is void. ${next}`;
  const ids = { taskId: args.gatewayTaskId, contextId: args.gatewayContextId };
  await sink.push(
    {
      statusUpdate: {
        ...ids,
        status: {
          state: 'TASK_STATE_WORKING',
          timestamp: new Date().toISOString(),
          message: { messageId: `${sink.keyPrefix}void`, role: 'ROLE_AGENT', ...ids, parts: [{ text }] },
        },
        metadata: { switchboard: { void: { attempt: attempt - 1, fromSeq: range.from, toSeq: range.to } } },
      },
    },
    `${sink.keyPrefix}void`,
  );
  await sink.flush();
}

/** A message-only reply (no task at the agent) completes the gateway's task with that message; its client gets the message. */
export function messageResult(reply: WireMessage, args: ForwardArgs): ForwardResult {
  return {
    agentContextId: reply.contextId || undefined,
    state: 'TASK_STATE_COMPLETED',
    statusMessage: { ...reply, taskId: args.gatewayTaskId, contextId: args.gatewayContextId },
    artifacts: [],
    costMinor: costOf(reply.metadata),
    message: { kind: 'message', inTask: Boolean(reply.taskId), inReplyTo: args.message.messageId },
  };
}

export function taskResult(task: WireTask, args: ForwardArgs): ForwardResult {
  const m = task.status.message;
  return {
    agentTaskId: task.id,
    agentContextId: task.contextId || undefined,
    state: task.status.state,
    statusMessage: m ? { ...m, taskId: args.gatewayTaskId, contextId: args.gatewayContextId } : undefined,
    artifacts: withinBudget((task.artifacts ?? []).map(compactArtifact)),
    costMinor: costOf(task.metadata) ?? costOf(m?.metadata),
    metadata: agentMetadata(task.metadata),
  };
}
