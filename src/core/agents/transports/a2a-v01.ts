/**
 * Calling an A2A 0.1 agent (Society AI's dialect: `tasks/send`, `tasks/sendSubscribe`, `type` parts,
 * `sessionId`) through the SDK's Transport interface, so the forwarding activity, the cancel and the probe
 * use it as they use the SDK's own transports. In 0.1 the client names the task: a new one gets the gateway
 * task's id (AgentClientOptions.newTaskId), a follow-up the agent's task id; `sessionId` is the context id.
 */
import { randomUUID } from 'node:crypto';
import { type CancelTaskRequest, type GetTaskRequest, SendMessageRequest, StreamResponse, type SubscribeToTaskRequest, Task } from '@a2a-js/sdk';
import type { RequestOptions, Transport } from '@a2a-js/sdk/client';
import type { WireArtifact, WireMessage, WirePart, WireTask } from '../../../../task/wire';
import { fromV01Part, toV01Part } from '../../../../task/v01-parts';
import { LegacyJsonRpcTransport, objectOr, stateOf } from './json-rpc';

type V01Params = { id: string; sessionId?: string; message: Record<string, unknown>; metadata?: Record<string, unknown>; historyLength?: number };

export class A2aV01Transport extends LegacyJsonRpcTransport implements Transport {
  protected readonly dialect = 'A2A 0.1';

  get protocolVersion(): string {
    return '0.1';
  }

  async sendMessage(params: SendMessageRequest, options?: RequestOptions): Promise<Task> {
    const sent = this.sendParams(params);
    return Task.fromJSON(fromV01Task(await this.rpc.call('tasks/send', sent, options), sent));
  }

  async *sendMessageStream(params: SendMessageRequest, options?: RequestOptions): AsyncGenerator<StreamResponse, void, undefined> {
    const sent = this.sendParams(params);
    yield* this.events(this.rpc.stream('tasks/sendSubscribe', sent, options), sent);
  }

  async getTask(params: GetTaskRequest, options?: RequestOptions): Promise<Task> {
    const sent = { id: params.id, ...(params.historyLength !== undefined ? { historyLength: params.historyLength } : {}) };
    return Task.fromJSON(fromV01Task(await this.rpc.call('tasks/get', sent, options), sent));
  }

  async cancelTask(params: CancelTaskRequest, options?: RequestOptions): Promise<Task> {
    const sent = { id: params.id };
    return Task.fromJSON(fromV01Task(await this.rpc.call('tasks/cancel', sent, options), sent));
  }

  async *resubscribeTask(params: SubscribeToTaskRequest, options?: RequestOptions): AsyncGenerator<StreamResponse, void, undefined> {
    yield* this.events(this.rpc.stream('tasks/resubscribe', { id: params.id }, options), { id: params.id });
  }

  private sendParams(params: SendMessageRequest): V01Params {
    const req = SendMessageRequest.toJSON(params) as { message: WireMessage; metadata?: Record<string, unknown>; configuration?: { historyLength?: number } };
    const m = req.message;
    return {
      id: m.taskId || this.newTaskId || randomUUID(),
      ...(m.contextId ? { sessionId: m.contextId } : {}),
      message: { role: m.role === 'ROLE_AGENT' ? 'agent' : 'user', parts: m.parts.map(toV01Part), ...(m.metadata ? { metadata: m.metadata } : {}) },
      ...(req.metadata && Object.keys(req.metadata).length ? { metadata: req.metadata } : {}),
      ...(req.configuration?.historyLength !== undefined ? { historyLength: req.configuration.historyLength } : {}),
    };
  }

  /** 0.1 stream events as 1.0 ones; the stream ends at the event marked `final` (input-required included). */
  private async *events(results: AsyncGenerator<unknown>, sent: Pick<V01Params, 'id' | 'sessionId'>): AsyncGenerator<StreamResponse, void, undefined> {
    for await (const result of results) {
      const r = objectOr(result);
      if (!r) throw new Error('a tasks/sendSubscribe event is not an object');
      const ids = { taskId: String(r.id ?? sent.id), contextId: String(r.sessionId ?? sent.sessionId ?? '') };
      const metadata = objectOr(r.metadata);
      const artifact = objectOr(r.artifact);
      if (artifact) {
        yield StreamResponse.fromJSON({
          artifactUpdate: { ...ids, artifact: fromV01Artifact(artifact, 0), append: artifact.append === true, lastChunk: artifact.lastChunk === true, metadata },
        });
      } else {
        yield StreamResponse.fromJSON({ statusUpdate: { ...ids, status: fromV01Status(r.status), metadata } });
      }
      if (r.final === true) return;
    }
  }
}

/** A 0.1 Task (`sessionId`, `type` parts, artifacts by index) as the 1.0 wire task. */
function fromV01Task(result: unknown, sent: { id: string; sessionId?: string }): WireTask {
  const t = objectOr(result);
  if (!t) throw new Error('the 0.1 answer is not a task object');
  const artifacts = Array.isArray(t.artifacts) ? t.artifacts.map((a, i) => fromV01Artifact(objectOr(a) ?? {}, i)) : undefined;
  const history = Array.isArray(t.history) ? t.history.map((m) => fromV01Message(objectOr(m) ?? {})) : undefined;
  return {
    id: String(t.id ?? sent.id),
    contextId: String(t.sessionId ?? sent.sessionId ?? ''),
    status: fromV01Status(t.status),
    ...(artifacts ? { artifacts } : {}),
    ...(history ? { history } : {}),
    ...(objectOr(t.metadata) ? { metadata: objectOr(t.metadata) } : {}),
  };
}

function fromV01Status(raw: unknown): WireTask['status'] {
  const s = objectOr(raw);
  if (!s) throw new Error('the 0.1 answer has no status object');
  const message = objectOr(s.message);
  return {
    state: stateOf(s.state),
    ...(message ? { message: fromV01Message(message) } : {}),
    ...(typeof s.timestamp === 'string' ? { timestamp: s.timestamp } : {}),
  };
}

function fromV01Message(m: Record<string, unknown>): WireMessage {
  return {
    // 0.1 messages carry no id; later versions need one.
    messageId: typeof m.messageId === 'string' ? m.messageId : randomUUID(),
    role: m.role === 'user' ? 'ROLE_USER' : 'ROLE_AGENT',
    parts: Array.isArray(m.parts) ? m.parts.map(partOf) : [],
    ...(objectOr(m.metadata) ? { metadata: objectOr(m.metadata) } : {}),
  };
}

/** 0.1 artifacts have an index, not an id: the index (else the position) names it. */
function fromV01Artifact(a: Record<string, unknown>, position: number): WireArtifact {
  return {
    artifactId: `artifact-${typeof a.index === 'number' ? a.index : position}`,
    ...(typeof a.name === 'string' ? { name: a.name } : {}),
    ...(typeof a.description === 'string' ? { description: a.description } : {}),
    parts: Array.isArray(a.parts) ? a.parts.map(partOf) : [],
    ...(objectOr(a.metadata) ? { metadata: objectOr(a.metadata) } : {}),
  };
}

/** An agent's part as the 1.0 wire form; one of no known shape is kept as data rather than lost. */
const partOf = (raw: unknown): WirePart => fromV01Part(raw) ?? { data: raw ?? null };
