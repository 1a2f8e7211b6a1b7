/**
 * What the SDK-less agent dialects (A2A 0.1, NEXUS) share: JSON-RPC 2.0 calls over Switchboard's guarded fetch,
 * answered as JSON or as an SSE stream of JSON-RPC responses, with the agent's JSON-RPC errors raised as the
 * SDK's error classes (so agentAnswered and classify read them as they read the SDK transports' errors).
 */
import { randomUUID } from 'node:crypto';
import { parseSseStream } from '@a2a-js/sdk';
import { fromJsonRpcErrorResponse, UnsupportedOperationError } from '@a2a-js/sdk/errors';
import type { RequestOptions, Transport, TransportFactory } from '@a2a-js/sdk/client';
import type { TaskState } from '../../../../task/wire';

interface RpcAnswer {
  jsonrpc?: unknown;
  id?: unknown;
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
}

export class JsonRpcChannel {
  constructor(
    private readonly url: string,
    private readonly fetchImpl: typeof fetch,
  ) {}

  /** One call's result. @throws the SDK's JSON-RPC error for an error answer; Error for anything not JSON-RPC. */
  async call(method: string, params: unknown, options?: RequestOptions, id: string = randomUUID()): Promise<unknown> {
    const res = await this.post(method, params, options, id, 'application/json');
    return resultOf(await readJson(res, method), method);
  }

  /**
   * The results of a streaming call, one per SSE event. An agent that answers with plain JSON instead (an
   * error, or the whole result at once) yields that one result.
   */
  async *stream(method: string, params: unknown, options?: RequestOptions, id: string = randomUUID()): AsyncGenerator<unknown, void, undefined> {
    const res = await this.post(method, params, options, id, 'text/event-stream');
    if (!res.headers.get('content-type')?.startsWith('text/event-stream')) {
      yield resultOf(await readJson(res, method), method);
      return;
    }
    for await (const event of parseSseStream(res)) {
      let answer: RpcAnswer;
      try {
        answer = JSON.parse(event.data) as RpcAnswer;
      } catch {
        throw new Error(`${method}: an SSE event is not JSON: ${event.data.slice(0, 100)}`);
      }
      yield resultOf(answer, method);
    }
  }

  private async post(method: string, params: unknown, options: RequestOptions | undefined, id: string, accept: string): Promise<Response> {
    const res = await this.fetchImpl(this.url, {
      method: 'POST',
      headers: { ...options?.serviceParameters, 'content-type': 'application/json', accept },
      body: JSON.stringify({ jsonrpc: '2.0', id, method, params }),
      signal: options?.signal,
    });
    // A JSON-RPC error may come with a 4xx/5xx status; anything else non-2xx is classified by its status.
    if (!res.ok && !res.headers.get('content-type')?.includes('json')) {
      await res.body?.cancel().catch(() => undefined);
      throw new Error(`${method}: HTTP ${res.status}`);
    }
    return res;
  }
}

/** The SDK's "unsupported operation" for what a dialect has no method for. */
export function unsupported(dialect: string, operation: string): never {
  throw new UnsupportedOperationError({ message: `${operation} does not exist in the ${dialect} dialect` });
}

export interface LegacyTransportOptions {
  /** The guarded fetch (with the agent's credential and the trace). */
  fetchImpl: typeof fetch;
  /** The task id a new task is sent with, in dialects where the client names it (the gateway task's id). */
  newTaskId?: string;
}

/**
 * "Unsupported" for what Switchboard never asks of an agent in an SDK-less dialect: the extended card, push
 * configs, listing. Every such dialect's Transport extends it.
 */
export abstract class SdkLessTransport
  implements Pick<Transport, 'getExtendedAgentCard' | 'createTaskPushNotificationConfig' | 'getTaskPushNotificationConfig' | 'listTaskPushNotificationConfig' | 'deleteTaskPushNotificationConfig' | 'listTasks'>
{
  /** The dialect's name in error messages, e.g. "A2A 0.1". */
  protected abstract readonly dialect: string;

  get protocolName(): string {
    return 'JSONRPC';
  }

  getExtendedAgentCard(): never {
    return unsupported(this.dialect, 'the extended agent card');
  }
  createTaskPushNotificationConfig(): never {
    return unsupported(this.dialect, 'push-config creation through Switchboard');
  }
  getTaskPushNotificationConfig(): never {
    return unsupported(this.dialect, 'push-config reads through Switchboard');
  }
  listTaskPushNotificationConfig(): never {
    return unsupported(this.dialect, 'listing push configs');
  }
  deleteTaskPushNotificationConfig(): never {
    return unsupported(this.dialect, 'deleting push configs');
  }
  listTasks(): never {
    return unsupported(this.dialect, 'listing tasks');
  }
}

/**
 * What the SDK-less JSON-RPC dialects' Transports share besides: their JSON-RPC channel and the id a new task is
 * sent with. A dialect implements sending, reading, canceling and resubscribing.
 */
export abstract class LegacyJsonRpcTransport extends SdkLessTransport {
  constructor(
    protected readonly rpc: JsonRpcChannel,
    protected readonly newTaskId: string | undefined,
  ) {
    super();
  }
}

/** The SDK TransportFactory of an SDK-less dialect: its transport over a guarded JSON-RPC channel. */
export class LegacyTransportFactory implements TransportFactory {
  constructor(
    private readonly opts: LegacyTransportOptions,
    private readonly transport: new (rpc: JsonRpcChannel, newTaskId: string | undefined) => Transport,
  ) {}

  get protocolName(): string {
    return 'JSONRPC';
  }

  async create(url: string): Promise<Transport> {
    return new this.transport(new JsonRpcChannel(url, this.opts.fetchImpl), this.opts.newTaskId);
  }
}

async function readJson(res: Response, method: string): Promise<RpcAnswer> {
  const text = await res.text();
  try {
    return JSON.parse(text) as RpcAnswer;
  } catch {
    throw new Error(`${method}: the answer (HTTP ${res.status}) is not JSON: ${text.slice(0, 100)}`);
  }
}

function resultOf(answer: RpcAnswer, method: string): unknown {
  if (answer && typeof answer === 'object' && answer.error && typeof answer.error.code === 'number') {
    throw fromJsonRpcErrorResponse({ jsonrpc: '2.0', id: null, error: { code: answer.error.code, message: String(answer.error.message ?? '') } });
  }
  if (!answer || typeof answer !== 'object' || answer.result === undefined || answer.result === null) {
    throw new Error(`${method}: the answer is not a JSON-RPC result`);
  }
  return answer.result;
}

/** A plain object, or undefined. */
export const objectOr = (v: unknown): Record<string, unknown> | undefined => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined);

const STATES: Record<string, TaskState> = {
  submitted: 'TASK_STATE_SUBMITTED',
  working: 'TASK_STATE_WORKING',
  'input-required': 'TASK_STATE_INPUT_REQUIRED',
  'auth-required': 'TASK_STATE_AUTH_REQUIRED',
  completed: 'TASK_STATE_COMPLETED',
  canceled: 'TASK_STATE_CANCELED',
  cancelled: 'TASK_STATE_CANCELED',
  failed: 'TASK_STATE_FAILED',
  rejected: 'TASK_STATE_REJECTED',
  // 0.1: "unknown" is effectively terminal; Switchboard cannot tell it from a failure.
  unknown: 'TASK_STATE_FAILED',
};

/** A 0.x state name (`input-required`…) as the 1.0 state. @throws Error for a name no version has. */
export function stateOf(name: unknown): TaskState {
  const state = typeof name === 'string' ? STATES[name.toLowerCase()] : undefined;
  if (!state) throw new Error(`the agent answered with an unknown task state ${JSON.stringify(name)}`);
  return state;
}
