/**
 * Calling a NEXUS agent (seed 000: `message/send` with `{type, data}` parts and `params.id` as the task id,
 * answered `{id, status: "<state>", messages, artifacts}`) through the SDK's Transport interface. NEXUS has
 * no streaming shape and no context: a stream is the one answer, the context is the gateway's.
 */
import { randomUUID } from 'node:crypto';
import { type CancelTaskRequest, type GetTaskRequest, SendMessageRequest, StreamResponse, Task } from '@a2a-js/sdk';
import type { RequestOptions, Transport } from '@a2a-js/sdk/client';
import { fromNexusPart, toNexusPart } from '../../../../task/nexus-parts';
import type { WireMessage, WirePart, WireTask } from '../../../../task/wire';
import { LegacyJsonRpcTransport, objectOr, stateOf, unsupported } from './json-rpc';

export class NexusTransport extends LegacyJsonRpcTransport implements Transport {
  protected readonly dialect = 'NEXUS';

  get protocolVersion(): string {
    return 'nexus';
  }

  async sendMessage(params: SendMessageRequest, options?: RequestOptions): Promise<Task> {
    const { message } = SendMessageRequest.toJSON(params) as { message: WireMessage };
    const id = message.taskId || this.newTaskId || randomUUID();
    const sent = { id, message: { role: message.role === 'ROLE_AGENT' ? 'agent' : 'user', parts: message.parts.map(toNexusPart) } };
    // NEXUS's own gateway uses the task id as the request id too.
    return Task.fromJSON(fromNexusTask(await this.rpc.call('message/send', sent, options, id), id, message.contextId));
  }

  async *sendMessageStream(params: SendMessageRequest, options?: RequestOptions): AsyncGenerator<StreamResponse, void, undefined> {
    yield StreamResponse.fromJSON({ task: Task.toJSON(await this.sendMessage(params, options)) });
  }

  async getTask(params: GetTaskRequest, options?: RequestOptions): Promise<Task> {
    return Task.fromJSON(fromNexusTask(await this.rpc.call('tasks/get', { id: params.id }, options), params.id));
  }

  async cancelTask(params: CancelTaskRequest, options?: RequestOptions): Promise<Task> {
    return Task.fromJSON(fromNexusTask(await this.rpc.call('tasks/cancel', { id: params.id }, options), params.id));
  }

  resubscribeTask(): never {
    return unsupported('NEXUS', 'resubscribing');
  }
}

/**
 * `{id, status, messages, artifacts}` as the 1.0 wire task: `messages` is the history, the last agent message
 * the status message. `status` is a state name (NEXUS) or a status object (tolerated).
 */
function fromNexusTask(result: unknown, id: string, contextId = ''): WireTask {
  const t = objectOr(result);
  if (!t) throw new Error('the NEXUS answer is not a task object');
  const history = (Array.isArray(t.messages) ? t.messages : []).map((m): WireMessage => {
    const o = objectOr(m) ?? {};
    return { messageId: randomUUID(), role: o.role === 'user' ? 'ROLE_USER' : 'ROLE_AGENT', parts: (Array.isArray(o.parts) ? o.parts : []).map(partFromAgent) };
  });
  const status = objectOr(t.status);
  const reply = [...history].reverse().find((m) => m.role === 'ROLE_AGENT');
  const artifacts = (Array.isArray(t.artifacts) ? t.artifacts : []).map((a, i) => {
    const o = objectOr(a) ?? {};
    return {
      artifactId: typeof o.artifactId === 'string' ? o.artifactId : `artifact-${i}`,
      ...(typeof o.name === 'string' ? { name: o.name } : {}),
      ...(typeof o.description === 'string' ? { description: o.description } : {}),
      parts: (Array.isArray(o.parts) ? o.parts : []).map(partFromAgent),
    };
  });
  return {
    id: String(t.id ?? id),
    contextId,
    status: { state: stateOf(status ? status.state : t.status), ...(reply ? { message: reply } : {}) },
    artifacts,
    history,
    ...(objectOr(t.metadata) ? { metadata: objectOr(t.metadata) } : {}),
  };
}

/** A NEXUS agent's part as task/nexus-parts.ts reads it (a part without a type is text; text without data, empty). */
function partFromAgent(raw: unknown): WirePart {
  const p = objectOr(raw) ?? {};
  const type = typeof p.type === 'string' ? p.type : 'text';
  const text = typeof p.text === 'string' ? p.text : type === 'text' && p.data === undefined ? '' : undefined;
  return fromNexusPart(type, p.data, objectOr(p.metadata), text);
}
