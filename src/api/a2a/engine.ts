/**
 * Runs an engine call (a 1.0 or 0.3 method, its params validated once by the method's schema) on a request handler,
 * and gives its answer as data: a result, an error, or a stream of them. No transport, no envelope, no HTTP.
 *
 * A 1.0 call goes straight to the handler's wire methods (request-handler.ts): its params are already the wire form.
 * A 0.3 call came in a JSON-RPC envelope; the SDK's 0.3 transport converts it to 1.0 and its answer back, through
 * the handler's SDK-typed methods, as that dialect's one translation.
 */
import { Message, StreamResponse, Task } from '@a2a-js/sdk';
import { LegacyJsonRpcTransportHandler } from '@a2a-js/sdk/compat/v0_3/server';
import { toJsonRpcError } from '@a2a-js/sdk/errors';
import { UnauthenticatedUser, defaultServerCallContextBuilder } from '@a2a-js/sdk/server';
import { type CallIntent, INTENT_STATE } from './dialects';
import { A2A_ERRORS } from './errors';
import type { AgentRequestHandler, SendParams, TaskList } from './request-handler';
import type { ListTasksQuery } from './schemas';
import type { Dialect, WireTask } from '../../../task/wire';

/** A JSON-RPC error object, in a dialect's form. */
export type RpcError = { code: number; message: string; data?: unknown };
/** One answer, or one stream event: a result or an error. */
export type RpcOutcome = { result: unknown } | { error: RpcError };
/** What an engine call answers: one outcome, or the events of a stream (which throws an error it meets). */
export type EngineAnswer = RpcOutcome | { events: AsyncIterator<RpcOutcome> };

export interface EngineCall {
  method: string;
  params: unknown;
  intent?: CallIntent;
  headers: Record<string, string | string[] | undefined>;
  tenant: string;
  /** Aborted when the client has gone: a send that waits without delivering (a resend) stops waiting. */
  signal?: AbortSignal;
}

export async function runEngine(handler: AgentRequestHandler, call: EngineCall, engine: Dialect): Promise<EngineAnswer> {
  return engine === '1.0' ? runV1(handler, call) : runLegacy(handler, call);
}

async function runV1(h: AgentRequestHandler, call: EngineCall): Promise<EngineAnswer> {
  const extras = { intent: call.intent, headers: call.headers, signal: call.signal };
  const p = call.params as Record<string, unknown>;
  try {
    switch (call.method) {
      case 'SendMessage': {
        const a = await h.send(p as SendParams, extras);
        return { result: 'message' in a ? { message: Message.toJSON(Message.fromJSON(a.message)) } : { task: canonical(a.task) } };
      }
      case 'GetTask':
        return { result: canonical(await h.get(p as { id: string; historyLength?: number })) };
      case 'CancelTask':
        return { result: canonical(await h.cancel(p as { id: string })) };
      case 'ListTasks':
        return { result: taskPage(await h.list(p as ListTasksQuery), p.includeArtifacts === true) };
      case 'SendStreamingMessage':
        return { events: outcomes(h.sendStream(p as SendParams, extras)) };
      case 'SubscribeToTask':
        return { events: outcomes(h.subscribe(p as { id: string })) };
    }
  } catch (err) {
    return { error: toJsonRpcError(err) };
  }
  return { error: { code: A2A_ERRORS.MethodNotFound.code, message: `Method not found: ${call.method}` } };
}

/** A task in ProtoJSON's canonical form (default values left out), as every 1.0 answer shows it. */
function canonical(task: WireTask): unknown {
  return Task.toJSON(Task.fromJSON(task));
}

/** A ListTasks page: every field present; a task's artifacts shown (as an empty list too) when they were asked for. */
function taskPage(page: TaskList, includeArtifacts: boolean): unknown {
  const tasks = page.tasks.map((t) => canonical(t) as { artifacts?: unknown });
  return {
    tasks: includeArtifacts ? tasks.map((t) => (t.artifacts === undefined ? { ...t, artifacts: [] } : t)) : tasks,
    nextPageToken: page.nextPageToken ?? '',
    pageSize: page.pageSize ?? 0,
    totalSize: page.totalSize ?? 0,
  };
}

async function* outcomes(events: AsyncIterable<unknown>): AsyncGenerator<RpcOutcome, void, undefined> {
  for await (const e of events) yield { result: StreamResponse.toJSON(StreamResponse.fromJSON(e)) };
}

/** A 0.3 call through the SDK's 0.3 transport (the envelope it came in), over the handler's SDK-typed methods. */
async function runLegacy(h: AgentRequestHandler, call: EngineCall): Promise<EngineAnswer> {
  const context = defaultServerCallContextBuilder({ extensions: undefined, user: new UnauthenticatedUser(), headers: call.headers, requestedVersion: '0.3', tenant: call.tenant });
  // The handler reads the translation's intent here: a channel no client can write to.
  if (call.intent) context.state.set(INTENT_STATE, call.intent);
  const answer = await new LegacyJsonRpcTransportHandler(h).handle({ jsonrpc: '2.0', method: call.method, id: null, params: call.params }, context);
  if (answer && typeof answer === 'object' && Symbol.asyncIterator in answer) {
    return { events: legacyEvents(answer as AsyncGenerator<{ result?: unknown; error?: RpcError }>) };
  }
  const { result, error } = answer as { result?: unknown; error?: RpcError };
  return error ? { error } : { result };
}

async function* legacyEvents(events: AsyncIterable<{ result?: unknown; error?: RpcError }>): AsyncGenerator<RpcOutcome, void, undefined> {
  for await (const e of events) yield e.error !== undefined ? { error: e.error } : { result: e.result };
}
