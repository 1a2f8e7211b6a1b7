/**
 * The forwarding activity: one client message to the agent, in the agent's dialect, until the agent's task is
 * terminal or interrupted. Every attempt sends the same messageId, so an agent that deduplicates sees one message.
 *
 * What the agent streams on the way (artifact chunks, progress) goes to the task's event log as it arrives,
 * not into workflow history: the result holds only the turn's outcome. A retried attempt first logs an event
 * that voids the previous attempt's partial output, so readers drop it instead of seeing it twice.
 */
import { A2AError, isJsonRpcError } from '@a2a-js/sdk/errors';
import { Message, SendMessageRequest, Task, TaskArtifactUpdateEvent, TaskStatusUpdateEvent, type StreamResponse } from '@a2a-js/sdk';
import { ApplicationFailure, Context, heartbeat, sleep } from '@temporalio/activity';
import { agentTaskSignal } from '../workflows/messages';
import type { Pool } from 'pg';
import { seqRangeOf } from '../src/events/event-log';
import type { EventHub } from '../src/events/hub';
import { OutboundError } from '../src/http/outbound';
import type { AgentEndpoint, AgentRpcError, ForwardResult } from '../workflows/types';
import type { TaskState, WireArtifact, WireArtifactUpdate, WireMessage, WirePart, WireStatusUpdate, WireTask } from '../src/a2a/wire';
import * as grpc from '@grpc/grpc-js';
import { PARENT_TASK_HEADER, agentClient, type AgentLink, type HttpTrace } from './agent-client';
import { EventSink } from './event-sink';
import { costOf } from './agent-cost';

export interface ForwardArgs {
  endpoint: AgentEndpoint;
  message: WireMessage;
  /** The agent's own ids for this conversation, once known (a follow-up continues the agent's task). */
  agentTaskId?: string;
  agentContextId?: string;
  tenant: string;
  /** The agent called: its outbound credential is looked up by (tenant, agentId) in the activity, never passed in. */
  agentId?: string;
  gatewayTaskId: string;
  gatewayContextId: string;
}

export interface ForwardDeps {
  /** The guarded transports, with this agent's credential. */
  link: AgentLink;
  pool: Pool;
  hub: EventHub;
}

/** The longest Retry-After an agent's answer may impose on the next attempt. */
const MAX_RETRY_AFTER_MS = 5 * 60_000;
const SETTLED = (s: TaskState) => s !== 'TASK_STATE_SUBMITTED' && s !== 'TASK_STATE_WORKING';
const INTERRUPTED = (s: TaskState) => s === 'TASK_STATE_INPUT_REQUIRED' || s === 'TASK_STATE_AUTH_REQUIRED';
const POLL_MS = 500;

export async function forwardMessage(deps: ForwardDeps, args: ForwardArgs): Promise<ForwardResult> {
  const ctx = Context.current();
  const trace: HttpTrace = {};
  const { workflowExecution, activityId, attempt } = ctx.info;
  const attemptKey = (n: number) => `fwd/${workflowExecution?.runId}/${activityId}/${n}/`;
  const sink = new EventSink(deps.pool, deps.hub, args.tenant, args.gatewayTaskId, attemptKey(attempt));
  const relay = new Relay(sink, args);
  const beat = setInterval(() => heartbeat(), 1_000);
  heartbeat();
  try {
    if (attempt > 1) await voidPreviousAttempt(deps.pool, sink, args, attemptKey(attempt - 1), attempt);
    // How the agent calls back: a task it starts through Switchboard with this id becomes this task's child.
    // gRPC calls get the attempt's own timeout as their deadline (HTTP ones are bounded by the outbound timeouts).
    const client = await agentClient(args.endpoint, deps.link, trace, {
      headers: { [PARENT_TASK_HEADER]: args.gatewayTaskId },
      callTimeoutMs: ctx.info.startToCloseTimeoutMs,
      newTaskId: args.gatewayTaskId,
    });
    const switchboard = { ...(args.message.metadata?.switchboard as object), parentTaskId: args.gatewayTaskId };
    const request = SendMessageRequest.fromJSON({
      // The agent knows its task by its own ids, never by the gateway's; until it has named a context, the
      // client's (the gateway task's context: the client's contextId / sessionId when it gave one) is the context.
      message: { ...args.message, taskId: args.agentTaskId, contextId: args.agentContextId ?? args.gatewayContextId, metadata: { ...args.message.metadata, switchboard } },
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
      // Not awaited in the loop: the signal's round trip must not hold up the first chunk.
      let announced: Promise<unknown> | undefined;
      // Closed once the agent's task is interrupted: an agent may keep its stream open then (below).
      const streamDone = new AbortController();
      for await (const event of client.sendMessageStream(request, { signal: AbortSignal.any([ctx.cancellationSignal, streamDone.signal]) })) {
        acc.add(event);
        await relay.event(event);
        if (acc.task) announced ??= announce(acc.task).then(() => undefined, (err: unknown) => err);
        // input-required with the stream left open (the coding-agent seed: "Not final; stream stays open"): the
        // turn ends here for the client, and the answer goes to the same agent task as a new message.
        if (acc.task && INTERRUPTED(acc.task.status.state)) break;
      }
      streamDone.abort(); // an agent that keeps the stream open gets it closed
      const signalFailure = await announced;
      if (signalFailure) throw signalFailure;
      task = acc.task;
      if (!task) {
        await sink.flush();
        return acc.messageResult(args);
      }
    } else {
      const reply = await client.sendMessage(request, options);
      if ('messageId' in reply) {
        await sink.flush();
        return messageResult(Message.toJSON(reply) as WireMessage, args);
      }
      task = Task.toJSON(reply) as WireTask;
    }
    // An agent that answered before the task settled (or ignored blocking) is polled until it does.
    while (!SETTLED(task.status.state)) {
      await announce(task);
      await sleep(POLL_MS);
      task = Task.toJSON(await client.getTask({ tenant: '', id: task.id }, options)) as WireTask;
    }
    // Artifacts that arrived whole (a blocking answer, a task snapshot) have not been relayed yet.
    await relay.remaining(task.artifacts ?? []);
    await sink.flush();
    return taskResult(task, args);
  } catch (err) {
    await sink.flush().catch(() => undefined); // what was relayed stays in the log; a retry voids it
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

  messageResult(args: ForwardArgs): ForwardResult {
    if (!this.message) throw ApplicationFailure.nonRetryable('the agent closed the stream without a task or a message', 'InvalidAgentResponse');
    return messageResult(this.message, args);
  }
}

/**
 * Turns the agent's stream events into the gateway task's events: artifact chunks (append/lastChunk kept)
 * and progress updates (state working), with the agent's ids replaced by the gateway's. The turn's outcome
 * (input-required, completed, failed…) is not relayed: the workflow logs it once it has applied it.
 */
class Relay {
  /** Parts relayed per artifact id, to tell a complete stream from one that broke off. */
  private readonly relayed = new Map<string, number>();

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
  async remaining(artifacts: WireArtifact[]): Promise<void> {
    const ids = { taskId: this.args.gatewayTaskId, contextId: this.args.gatewayContextId };
    for (const artifact of artifacts) {
      if (this.relayed.get(artifact.artifactId) === artifact.parts.length) continue;
      await this.sink.push({ artifactUpdate: { ...ids, artifact, append: false, lastChunk: true } });
    }
  }
}

/**
 * The first event of a retried attempt: it names the events of the failed attempt so a reader can drop them
 * (metadata `switchboard.void = {attempt, fromSeq, toSeq}`), since the agent is asked again from the start.
 */
async function voidPreviousAttempt(pool: Pool, sink: EventSink, args: ForwardArgs, previousKey: string, attempt: number): Promise<void> {
  const range = await seqRangeOf(pool, args.tenant, args.gatewayTaskId, previousKey);
  if (!range) return;
  const text = `Attempt ${attempt - 1} of the agent call failed; its partial output (events ${range.from}-${range.to}) is void. Asking the agent again (attempt ${attempt}).`;
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
    artifacts: withinBudget((task.artifacts ?? []).map(compactArtifact)),
    costMinor: costOf(task.metadata) ?? costOf(m?.metadata),
    metadata: agentMetadata(task.metadata),
  };
}

/**
 * Joins runs of adjacent text parts: a 10,000-chunk stream becomes one text part in the workflow's task
 * (the event log keeps every chunk), so history and payloads stay small. The text itself is unchanged.
 */
export function compactArtifact(a: WireArtifact): WireArtifact {
  const parts: WirePart[] = [];
  // Text parts with the same other fields (media type, no metadata…) read the same joined.
  const shape = (p: WirePart) => (typeof p.text === 'string' ? JSON.stringify({ ...p, text: undefined }) : undefined);
  for (const part of a.parts) {
    const prev = parts[parts.length - 1];
    const s = shape(part);
    if (prev && s !== undefined && shape(prev) === s) parts[parts.length - 1] = { ...prev, text: `${prev.text}${part.text}` };
    else parts.push(part);
  }
  return parts.length === a.parts.length ? a : { ...a, parts };
}

/** What one turn may carry into the workflow (Temporal refuses payloads over 2 MiB and messages over 4 MiB). */
export const ARTIFACT_BUDGET_BYTES = 1024 * 1024;

/**
 * Keeps the artifacts that go into workflow state under ARTIFACT_BUDGET_BYTES. Past it, parts are dropped and
 * the artifact is marked `metadata.switchboard.truncated`; every chunk is still in the task's event log (and
 * was streamed), so SubscribeToTask with Last-Event-ID: 0 replays the whole output.
 */
export function withinBudget(artifacts: WireArtifact[]): WireArtifact[] {
  let left = ARTIFACT_BUDGET_BYTES;
  return artifacts.map((a) => {
    const kept: WirePart[] = [];
    for (const part of a.parts) {
      const size = Buffer.byteLength(JSON.stringify(part));
      if (size > left) break;
      left -= size;
      kept.push(part);
    }
    if (kept.length === a.parts.length) return a;
    const note = { keptParts: kept.length, totalParts: a.parts.length, reason: `over the ${ARTIFACT_BUDGET_BYTES}-byte budget of a task's artifacts; the event log has all of it` };
    return { ...a, parts: kept, metadata: { ...a.metadata, switchboard: { ...(a.metadata?.switchboard as object), truncated: note } } };
  });
}

/** The most of the agent's task metadata a turn carries into the workflow (it is the client's to read, not a store). */
export const AGENT_METADATA_BUDGET_BYTES = 64 * 1024;

/**
 * The agent's task metadata as the gateway task keeps it: without `switchboard` (the gateway's own key), and
 * replaced by a note when it is over AGENT_METADATA_BUDGET_BYTES.
 */
function agentMetadata(metadata: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (!metadata) return undefined;
  const { switchboard: _own, ...rest } = metadata;
  if (Object.keys(rest).length === 0) return undefined;
  const size = Buffer.byteLength(JSON.stringify(rest));
  return size <= AGENT_METADATA_BUDGET_BYTES ? rest : { agentMetadataDropped: `${size} bytes, over the ${AGENT_METADATA_BUDGET_BYTES}-byte budget` };
}

/**
 * Sorts a failure into "retrying may help" (network trouble, 5xx, 408/429; gRPC UNAVAILABLE and the like) and
 * "it cannot succeed" (a JSON-RPC error, another 4xx, an unreadable answer, a refused address; gRPC
 * INVALID_ARGUMENT and the like). The non-retryable types are listed in NON_RETRYABLE_FORWARD_ERRORS in the workflow.
 */
export function classify(err: unknown, trace: HttpTrace): ApplicationFailure {
  if (err instanceof ApplicationFailure) return err; // already classified here (e.g. a stream that ended without a task)
  const outbound = findOutboundError(err);
  if (outbound) {
    const transient = outbound.code === 'TIMEOUT' || outbound.code === 'NETWORK';
    return ApplicationFailure.create({ message: outbound.message, type: transient ? 'AgentUnavailable' : 'AgentUnreachable', nonRetryable: !transient });
  }
  const message = err instanceof Error ? err.message : String(err);
  // OK: the call itself succeeded, and what failed was reading its answer (as after an HTTP 200, below).
  if (trace.grpcCode !== undefined && trace.grpcCode !== grpc.status.OK) return classifyGrpc(trace.grpcCode, trace.grpcDetails ?? message);
  // A connection cut mid-answer (often mid-stream, after a 200) is network trouble, not a bad answer.
  if (connectionLost(err)) return ApplicationFailure.retryable(`the connection to the agent was lost: ${message}`, 'AgentUnavailable');
  if (trace.grpcCode === grpc.status.OK) return ApplicationFailure.nonRetryable(`the agent's answer is not a valid A2A response: ${message}`, 'InvalidAgentResponse');
  if (trace.lastStatus !== undefined && trace.lastStatus < 300 && (err instanceof A2AError || jsonRpcErrorOf(err))) {
    // The agent's own JSON-RPC error (in a stream, wrapped by the SDK), kept whole: the workflow passes it to
    // the client of a new task as is.
    const rpc = jsonRpcErrorOf(err);
    return ApplicationFailure.create({
      message: `the agent answered with an error: ${rpc ? `${rpc.message} (JSON-RPC ${rpc.code})` : message}`,
      type: 'AgentRejected',
      nonRetryable: true,
      ...(rpc ? { details: [{ agentError: rpc }] } : {}),
    });
  }
  const status = trace.lastStatus;
  if (status === undefined) return ApplicationFailure.retryable(`the agent could not be reached: ${message}`, 'AgentUnavailable');
  if (status >= 500 || status === 408 || status === 429) {
    // The agent says when to come back (429, 503): the next attempt waits that long instead of the backoff's
    // interval, within reason (an agent cannot park a task for a day with one header).
    const wait = trace.retryAfterMs;
    return ApplicationFailure.create({
      message: `the agent answered HTTP ${status}${wait !== undefined ? ` (Retry-After ${Math.round(wait / 1000)} s)` : ''}`,
      type: 'AgentUnavailable',
      ...(wait !== undefined ? { nextRetryDelay: Math.min(wait, MAX_RETRY_AFTER_MS) } : {}),
    });
  }
  if (status >= 400) return ApplicationFailure.nonRetryable(`the agent refused the request with HTTP ${status}: ${message}`, 'AgentRejected');
  return ApplicationFailure.nonRetryable(`the agent's answer is not a valid A2A response: ${message}`, 'InvalidAgentResponse');
}

/**
 * gRPC status codes that mean "try again" (the gRPC counterparts of network trouble, 5xx, 408 and 429):
 * the server could not take the call now, did not finish it in time, or failed inside (UNKNOWN is what a
 * handler's uncaught exception becomes, INTERNAL a broken frame). Every other code is an answer about the
 * request itself (INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION, PERMISSION_DENIED, UNAUTHENTICATED,
 * UNIMPLEMENTED…) and is not retried.
 */
const RETRYABLE_GRPC = new Set<number>([
  grpc.status.CANCELLED, grpc.status.UNKNOWN, grpc.status.DEADLINE_EXCEEDED, grpc.status.RESOURCE_EXHAUSTED,
  grpc.status.ABORTED, grpc.status.INTERNAL, grpc.status.UNAVAILABLE,
]);

function classifyGrpc(code: number, details: string): ApplicationFailure {
  const name = grpc.status[code] ?? String(code);
  // grpc-js's own limit on what it reads (the outbound size cap), not the agent's: as an HTTP body over the cap.
  if (code === grpc.status.RESOURCE_EXHAUSTED && /larger than max/i.test(details)) {
    return ApplicationFailure.nonRetryable(`the agent's answer exceeds the size limit: ${details}`, 'AgentUnreachable');
  }
  if (RETRYABLE_GRPC.has(code)) return ApplicationFailure.retryable(`the agent answered gRPC ${name}: ${details}`, 'AgentUnavailable');
  return ApplicationFailure.nonRetryable(`the agent refused the request with gRPC ${name}: ${details}`, 'AgentRejected');
}

function once<A>(fn: (a: A) => Promise<void>): (a: A) => Promise<void> {
  let done = false;
  return async (a) => {
    if (done) return;
    done = true;
    await fn(a);
  };
}

const LOST_CONNECTION_CODES = new Set(['UND_ERR_SOCKET', 'UND_ERR_CLOSED', 'ECONNRESET', 'EPIPE', 'ECONNABORTED']);

function connectionLost(err: unknown): boolean {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (LOST_CONNECTION_CODES.has((e as { code?: string }).code ?? '')) return true;
    if (e instanceof TypeError && e.message === 'terminated') return true; // undici's body stream, cut
  }
  return false;
}

/** The agent's JSON-RPC error (code and message) behind a failure, also when a stream wrapped it. */
function jsonRpcErrorOf(err: unknown): AgentRpcError | undefined {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (isJsonRpcError(e)) return { code: e.envelopeCode, message: e.message };
  }
  return undefined;
}

function findOutboundError(err: unknown): OutboundError | undefined {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof OutboundError) return e;
  }
  return undefined;
}
