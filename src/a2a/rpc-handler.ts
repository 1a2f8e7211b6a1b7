/**
 * The A2A JSON-RPC core: a request body and who sent it in, a JSON-RPC answer or an event stream out. No HTTP
 * framework here; src/routes/json-rpc.ts adapts Fastify to it, and other transports plug into the same core.
 *
 * Everything a client can get wrong is answered before any work starts, with a JSON-RPC error (HTTP 200, §9.5):
 * unparseable JSON or bytes that are not UTF-8 (-32700), JSON nested deeper than the peer-input guard reads
 * (src/http/json-guard.ts) or a bad envelope (-32600), an unknown method (-32601), bad params (-32602), an
 * unsupported A2A-Version (-32009). The dialect table (dialects/index.ts) is the one list of methods: it picks
 * the request's dialect, validates its params and translates them to the engine call (a 1.0 or 0.3 method), whose
 * validated params are what runs: the push-config methods (answered here, see push-methods.ts), or the
 * @a2a-js/sdk transport handler of that engine. Answers and errors go back in the request's dialect.
 */
import { LegacyJsonRpcTransportHandler } from '@a2a-js/sdk/compat/v0_3/server';
import { JsonRpcTransportHandler, UnauthenticatedUser, defaultServerCallContextBuilder } from '@a2a-js/sdk/server';
import { z } from 'zod';
import { INTENT_STATE, type CallIntent, type DialectContext, type InternalCall, type MethodDef, type StreamRenderer, engineMethod, engineOf, pickDialect } from './dialects';
import { A2A_ERRORS, a2aError, errorCodeOf } from './errors';
import { answerPushMethod } from './push-methods';
import { AgentRequestHandler, type HandlerDeps } from './request-handler';
import { type StreamCursor, StreamLimitError } from './task-stream';
import * as S from './schemas';
import type { Dialect, WireTask } from '../../task/wire';
import type { AgentRegistry } from '../agents/registry';
import { PUSH_METHOD_PARAMS } from '../push/params';
import { clientMetadataOf, dialectOfTask } from '../db/task-dialects';
import { openTasksOfContext } from '../db/task-store';
import { isInterrupted } from '../../task/rules';
import { type Caller, rpcMethodRoles } from '../auth/caller';
import type { CredentialWatch } from '../auth/credential-watch';
import { quotaError } from '../auth/quotas';
import { DependencyUnavailable, type Health } from '../health';
import { SUPPORTED_VERSION } from './versions';
import { pathOfNul } from '../http/json-guard';
import { ERROR_FORMS, jsonRpcErrorOf } from './error-forms';
import { KnownAgents, mappingOutages } from './outage-fallbacks';
import { type RpcEvent, envelope, idOf, unreadableError } from './rpc-errors';
import { annotate } from '../tracing';
import { withJsonNames } from './proto-json';
import { parseJson } from '../http/json-guard';

export { RPC_METHODS } from './dialects';

const PUSH_METHODS = new Set([...Object.keys(PUSH_METHOD_PARAMS['1.0']), ...Object.keys(PUSH_METHOD_PARAMS['0.3'])]);
const STREAMING_METHODS = new Set(['SendStreamingMessage', 'SubscribeToTask', 'message/stream', 'tasks/resubscribe']);

/** Methods that change something: refused at once (503) while PostgreSQL or Temporal is down, before any work. */
const WRITE_METHODS = new Set([
  'SendMessage', 'SendStreamingMessage', 'CancelTask', 'CreateTaskPushNotificationConfig', 'DeleteTaskPushNotificationConfig',
  'message/send', 'message/stream', 'tasks/cancel', 'tasks/pushNotificationConfig/set', 'tasks/pushNotificationConfig/delete',
]);

export interface RpcCoreDeps extends HandlerDeps {
  registry: AgentRegistry;
  health: Health;
  /** Ends an open stream once the credential that opened it no longer holds (revoked, expired, deleted). */
  credentialWatch?: CredentialWatch;
}

/** One JSON-RPC request as a transport received it. */
export interface RpcRequest {
  /** The body as sent, unparsed: bytes from the wire (checked for UTF-8 here), or text an in-process caller made. */
  body: string | Uint8Array;
  caller: Caller;
  /** The request's headers (the SDK's call context carries them; nothing forwards them to agents). */
  headers: Record<string, string | string[] | undefined>;
  /** The A2A-Version the client asked for (header or query), if any. */
  version?: string;
  /** The raw Last-Event-ID header, if any. */
  lastEventId?: string;
  /** The gateway's base URL as this client reaches it (for the cards and task URLs it is shown). */
  base: string;
  /** Aborted when the client goes away: an open stream stops. */
  signal: AbortSignal;
  /** The agent of a per-agent endpoint (a 0.3 resume by contextId looks only at its tasks). */
  agentId?: string;
  /**
   * For an in-process caller that translated the call itself (NEXUS's POST /api/v1/tasks): what a new task records.
   * Transports never set it from what a client sent.
   */
  intent?: CallIntent;
}


/** One Server-Sent Event: a JSON-RPC response, with the event's log position as its `id:` when it has one. */
export interface SseFrame {
  id?: number;
  /** The SSE event name; unset is a message. 0.3 `tasks/resubscribe` sends its errors as `error` events. */
  event?: string;
  data: RpcEvent;
}

/** What a transport sends back: one answer (HTTP status, headers, body), or a stream of events. */
export type RpcAnswer =
  | { status: number; headers?: Record<string, string>; body: unknown }
  | {
      stream: AsyncIterator<SseFrame>;
      /** The frame for an error that ends the stream early. */
      errorFrame(err: unknown): SseFrame;
      /** The frame telling a reader that was too slow where to resume: after the last frame it was sent. */
      cutOffFrame(message: string, lastEventId: number): SseFrame;
    };

/** What serves a valid call: a handler (built once the stream, if any, is set up), or a refusal as a bare envelope. */
export type RpcTarget =
  | {
      handler: (cursor: StreamCursor | undefined, dialect: Dialect) => AgentRequestHandler;
      decorate?: (result: unknown) => unknown;
      /** The agent of a per-agent endpoint: its push-config methods reach only that agent's tasks. */
      agentId?: string;
    }
  | { refuse: { httpStatus?: number; code: number; message: string } };

/** A valid call as a resolver sees it: `lastEventId` is the parsed Last-Event-ID of a streaming call. */
export interface RpcCall {
  /** The engine call: a 1.0 (or 0.3) method and its params, whatever dialect the client spoke. */
  method: string;
  params: unknown;
  dialect: Dialect;
  /** What the translation asks of a new task (a client-chosen id, the dialect to record). */
  intent?: CallIntent;
  base: string;
  lastEventId?: number;
  caller: Caller;
}

/** Picks the target of a valid call. May throw an A2A error (a2aError), answered in the caller's dialect. */
export type RpcResolver = (call: RpcCall) => Promise<RpcTarget>;

const ok = (body: unknown, status = 200, headers?: Record<string, string>): RpcAnswer => ({ status, headers, body });

export class RpcCore {
  private readonly streams = new KeyStreams();
  private readonly agents = new KnownAgents();

  constructor(private readonly deps: RpcCoreDeps) {}

  /** The resolver of a per-agent endpoint (`/agents/:id/a2a`): the agent in its path, of the caller's tenant. */
  agentEndpoint(agentId: string): RpcResolver {
    return async ({ base, caller }) => {
      const agent = await this.agents.get(this.deps.registry, caller.tenant, agentId);
      if (!agent) return { refuse: { httpStatus: 404, code: ERROR_FORMS.NoSuchEndpoint.code, message: `No agent ${agentId} is registered on this gateway` } };
      const rpcUrl = `${base}/agents/${agent.id}/a2a`;
      return { agentId: agent.id, handler: (cursor, dialect) => new AgentRequestHandler(agent, caller, rpcUrl, this.deps, cursor, dialect) };
    };
  }

  /**
   * Answers one JSON-RPC request: envelope, dialect, role, version and params checks first (nothing starts on a
   * bad request), then the target the resolver picks.
   */
  async answer(req: RpcRequest, resolve: RpcResolver): Promise<RpcAnswer> {
    const { caller } = req;
    const { deps } = this;
    let body: unknown;
    try {
      body = parseJson(req.body);
    } catch (err) {
      return ok(envelope(null, unreadableError(err)));
    }
    const parsed = S.EnvelopeSchema.safeParse(body);
    if (!parsed.success) {
      return ok(envelope(idOf(body), { code: A2A_ERRORS.InvalidRequest.code, message: `Invalid JSON-RPC request: ${z.prettifyError(parsed.error)}` }));
    }
    const rpc = parsed.data;
    const id = rpc.id ?? null;
    const dialect = await pickDialect(rpc.method, rpc.params, (taskId) => dialectOfTask(deps.pool, caller.tenant, taskId).catch(() => undefined));
    if (!dialect) return ok(envelope(id, { code: A2A_ERRORS.MethodNotFound.code, message: `Method not found: ${rpc.method}` }));
    const spec = dialect.methods[rpc.method]!;
    annotate({ 'rpc.system': 'jsonrpc', 'rpc.method': rpc.method, 'a2a.dialect': dialect.name, 'switchboard.tenant': caller.tenant });
    const roles = rpcMethodRoles('runs' in spec ? spec.runs : rpc.method);
    if (!roles.includes(caller.role)) {
      // Authorization is HTTP's, as for every route; the body still says which roles the method needs.
      const refusal = { name: 'PermissionDenied' as const, message: `${rpc.method} needs the role ${roles.join(' or ')}; this key's role is ${caller.role}`, metadata: { requiredRoles: roles.join(',') } };
      return ok(envelope(id, jsonRpcErrorOf(refusal, dialect.name === '1.0' ? '1.0' : '0.3')), 403);
    }
    // An error as the caller's dialect renders it, as an answer or as a stream's last frame.
    const rendered = (err: unknown) => envelope(id, dialect.renderError(err));
    // 0.3 tasks/resubscribe always answers a stream (§7.9): an early error is its one `error` event, as SDK agents
    // send it. Every other method answers an early error as a plain JSON-RPC response.
    const errorsAsStream = dialect.errorsAsStream?.has(rpc.method) ?? false;
    const answerError = (body: RpcEvent, status: number, headers?: Record<string, string>): RpcAnswer =>
      errorsAsStream && status === 200 ? errorStream(body, rendered) : ok(body, status, headers);
    const fail = (err: unknown, status = 200, headers?: Record<string, string>) => answerError(rendered(err), status, headers);
    const unavailable = (err: DependencyUnavailable) => fail(a2aError('Unavailable', err.message), 503, { 'retry-after': String(err.retryAfterS) });
    const outage = (err: unknown) => {
      const down = deps.health.unavailable(err);
      return down ? unavailable(down) : undefined;
    };

    if (req.version !== undefined && !SUPPORTED_VERSION.test(req.version)) {
      return fail(a2aError('VersionNotSupported', `A2A-Version ${req.version} is not supported; this gateway speaks 1.0 and 0.3`));
    }
    if ('unsupported' in spec) return fail(a2aError(spec.unsupported, `${rpc.method}: ${spec.why}`));
    // ProtoJSON: a field may come by its proto name (message_id) as well as its JSON name (messageId).
    const checked = validate(spec, rpc.method, withJsonNames(rpc.params));
    if ('error' in checked) return fail(checked.error);
    const nul = pathOfNul(checked.params);
    if (nul !== undefined) {
      // PostgreSQL cannot store U+0000 in text or jsonb: refuse it here rather than fail later, mid-task.
      return fail(a2aError('InvalidParams', `Invalid params for ${rpc.method}: ${nul || 'params'} contains a NUL character (U+0000)`, [{ field: nul, description: 'must not contain U+0000' }]));
    }
    // The engine call: the dialect's translation, validated like a call of that method (what runs is what passed).
    const ctx = this.dialectContext(caller.tenant, req.agentId);
    let internal: InternalCall;
    try {
      internal = spec.translate ? await spec.translate(checked.params, ctx) : { method: rpc.method, params: checked.params, intent: req.intent };
      const engineSpec = engineMethod(internal.method);
      if (engineSpec && engineSpec !== spec && !('unsupported' in engineSpec)) {
        const engineChecked = validate(engineSpec, internal.method, internal.params);
        if ('error' in engineChecked) return fail(engineChecked.error);
        internal = { ...internal, params: engineChecked.params };
      }
    } catch (err) {
      return outage(err) ?? fail(err);
    }
    const render = internal.render ?? spec.render;
    const engine = engineOf(internal.method);
    const params = internal.params as Record<string, unknown>;

    const streaming = STREAMING_METHODS.has(internal.method);
    const lastEventId = streaming ? parseLastEventId(req.lastEventId) : undefined;
    // A change needs both: refuse it now rather than half-start it or hang (a read may still answer from one).
    if (WRITE_METHODS.has(internal.method) && lastEventId === undefined) {
      try {
        deps.health.require('postgresql', 'temporal');
      } catch (err) {
        return unavailable(err as DependencyUnavailable);
      }
    }
    let target: RpcTarget;
    try {
      target = await resolve({ method: internal.method, params, dialect: engine, intent: internal.intent, base: req.base, lastEventId: lastEventId ?? undefined, caller });
    } catch (err) {
      return outage(err) ?? fail(err);
    }
    if ('refuse' in target) return answerError(envelope(id, { code: target.refuse.code, message: target.refuse.message }), target.refuse.httpStatus ?? 200);
    if (PUSH_METHODS.has(internal.method)) {
      try {
        const pushDeps = { pool: deps.pool, store: deps.push, gateway: deps.gateway, tenant: caller.tenant, agentId: target.agentId };
        const result = await answerPushMethod(internal.method, engine, params, pushDeps);
        return ok({ jsonrpc: '2.0', id, result: render ? await render(result, ctx) : result });
      } catch (err) {
        return outage(err) ?? fail(err);
      }
    }

    let cursor: StreamCursor | undefined;
    let release: (() => void) | undefined;
    let opened!: () => void;
    const open = new Promise<'open'>((resolve) => (opened = () => resolve('open')));
    const lapsed = new AbortController();
    if (streaming) {
      if (lastEventId === null) {
        return fail(a2aError('InvalidParams', 'Last-Event-ID must be the id of an event this gateway sent (a non-negative integer)'));
      }
      const busy = { 'retry-after': '5' };
      if (deps.hub.readers() >= deps.streamLimits.maxTotal) {
        return ok(envelope(id, { code: A2A_ERRORS.Internal.code, message: `This gateway has ${deps.streamLimits.maxTotal} open streams (SWITCHBOARD_MAX_STREAMS); retry later` }), 429, busy);
      }
      const max = (await deps.quotas.of(caller.tenant))?.streamsPerKey ?? 0;
      const slot = this.streams.acquire(caller.keyId, max);
      if (!slot) return fail(quotaError('streamsPerKey', max, 'this key has that many streams open on this Switchboard process; close one first'), 429, busy);
      // A stream lives no longer than the credential that opened it: revoked, expired, its agent or tenant
      // deleted, the follow stops and the stream's last event says why (frames below).
      const unwatch = deps.credentialWatch?.watch(caller, (why) => lapsed.abort(why));
      release = () => (slot(), unwatch?.());
      req.signal.addEventListener('abort', release, { once: true });
      cursor = { lastEventId, signal: AbortSignal.any([req.signal, lapsed.signal]), seq: 0, closing: false, opened: () => opened() };
    }
    const handler = mappingOutages(target.handler(cursor, engine), deps.health);
    const transport = engine === '1.0' ? new JsonRpcTransportHandler(handler) : new LegacyJsonRpcTransportHandler(handler);
    const context = defaultServerCallContextBuilder({
      extensions: undefined,
      user: new UnauthenticatedUser(),
      headers: req.headers,
      requestedVersion: engine,
      tenant: caller.tenant,
    });
    // The handler reads the translation's intent here: a channel no client can write to.
    if (internal.intent) context.state.set(INTENT_STATE, internal.intent);
    const answer = await transport.handle({ jsonrpc: '2.0', method: internal.method, id, params }, context);
    if (answer && typeof answer === 'object' && Symbol.asyncIterator in answer && cursor) {
      const events = (answer as AsyncGenerator<RpcEvent>)[Symbol.asyncIterator]();
      // Errors before the stream is set up (unknown task, a terminal task, a cap) are plain JSON-RPC answers. Set
      // up, it answers at once even when its first event is yet to come (a resumed stream that waits).
      const next = events.next();
      let first: IteratorResult<RpcEvent> | 'open';
      try {
        first = await Promise.race([next, open]);
      } catch (err) {
        release?.();
        if (err instanceof StreamLimitError) return ok(envelope(id, { code: A2A_ERRORS.Internal.code, message: err.message }), 429, { 'retry-after': '5' });
        if (errorCodeOf(err) === A2A_ERRORS.Unavailable.code) return fail(err, 503, { 'retry-after': '5' });
        return fail(err);
      }
      if (first !== 'open' && first.done) {
        release?.();
        return fail(a2aError('Internal', 'the stream ended before its first event'));
      }
      // The last event of a stream whose credential lapsed: no more events are produced for a caller who may no longer read them.
      const lapsedFrame = (): SseFrame => ({
        data: envelope(
          id,
          jsonRpcErrorOf({ name: 'Unauthenticated', message: `The credential that opened this stream is no longer valid: ${String(lapsed.signal.reason)}; the stream is closed.` }, dialect.name === '1.0' ? '1.0' : '0.3'),
        ),
      });
      return {
        stream: frames(first === 'open' ? next : first, events, cursor, dialect.streamRenderer(), lapsed.signal, lapsedFrame),
        errorFrame: (err) => ({ data: rendered(err) }),
        cutOffFrame: (message, at) => ({ data: envelope(id, { code: A2A_ERRORS.Internal.code, message, data: { lastEventId: at } }) }),
      };
    }
    release?.();
    const result = answer as { error?: { code: number; message: string; data?: unknown }; result?: unknown };
    if (result.error) {
      const error = dialect.renderEngineError ? dialect.renderEngineError(result.error) : result.error;
      return ok({ ...result, error }, result.error.code === A2A_ERRORS.Unavailable.code ? 503 : 200, result.error.code === A2A_ERRORS.Unavailable.code ? { 'retry-after': '5' } : undefined);
    }
    let out = result.result;
    try {
      if (target.decorate && out !== undefined) out = target.decorate(out);
      if (render && out !== undefined) out = await render(out, ctx);
    } catch (err) {
      return outage(err) ?? fail(err);
    }
    return ok({ ...result, result: out });
  }

  /** What a dialect's translation and rendering may look up, in the caller's tenant (and endpoint agent). */
  private dialectContext(tenant: string, agentId: string | undefined): DialectContext {
    const { gateway, pool } = this.deps;
    const task = async (taskId: string): Promise<WireTask | undefined> => {
      try {
        return await gateway.get(tenant, taskId);
      } catch (err) {
        if (errorCodeOf(err) === A2A_ERRORS.TaskNotFound.code) return undefined;
        throw err;
      }
    };
    return {
      tenant,
      task,
      // The projection can trail the workflow by the change being written (a client answering at once): a task it
      // shows as still working is asked directly.
      waitingInContext: async (contextId) => {
        const open = await openTasksOfContext(pool, tenant, contextId, agentId);
        const states = await Promise.all(open.map(async (t) => (isInterrupted(t.state as WireTask['status']['state']) ? t.state : (await task(t.taskId))?.status.state)));
        return open.filter((_, i) => states[i] === 'TASK_STATE_INPUT_REQUIRED').map((t) => t.taskId);
      },
      clientMetadata: (taskIds) => clientMetadataOf(pool, tenant, taskIds),
    };
  }
}

/** A method's params checked against its schema: the parsed params, or the -32602 error naming the fields. */
function validate(spec: MethodDef, method: string, params: unknown): { params: unknown } | { error: Error } {
  const checked = spec.params.safeParse(params);
  if (checked.success) return { params: checked.data };
  const violations = checked.error.issues.map((i) => ({ field: i.path.join('.'), description: i.message }));
  return { error: a2aError('InvalidParams', `Invalid params for ${method}: ${z.prettifyError(checked.error)}`, violations) };
}

/** A stream of one `error` event. */
function errorStream(body: RpcEvent, rendered: (err: unknown) => RpcEvent): RpcAnswer {
  return {
    stream: (async function* () {
      yield { event: 'error', data: body };
    })(),
    errorFrame: (err) => ({ event: 'error', data: rendered(err) }),
    cutOffFrame: (message) => ({ event: 'error', data: { ...body, error: { code: A2A_ERRORS.Internal.code, message } } as RpcEvent }),
  };
}

/**
 * The SDK's rendered events as SSE frames: each with the log position of the event it renders (the handler
 * records it in the cursor as it yields), and in 0.3 the event that ends the stream marked `final` (the SDK's
 * translation marks only terminal states).
 */
async function* frames(
  first: IteratorResult<RpcEvent> | Promise<IteratorResult<RpcEvent>>,
  rest: AsyncIterator<RpcEvent>,
  cursor: StreamCursor,
  render: StreamRenderer,
  lapsed: AbortSignal,
  lapsedFrame: () => SseFrame,
): AsyncGenerator<SseFrame, void, undefined> {
  const frame = (event: RpcEvent): SseFrame => {
    const data = event.result === undefined ? event : { ...event, result: render(event.result, cursor.closing) };
    return { id: cursor.seq, data };
  };
  try {
    // The follow stops when cursor.signal aborts: the client left, or the credential that opened the stream lapsed.
    for (let next = await first; !next.done && !cursor.signal.aborted; next = await rest.next()) yield frame(next.value);
    if (lapsed.aborted) yield lapsedFrame();
  } finally {
    await rest.return?.(undefined).catch(() => undefined);
  }
}

/** Open streams per key in this process, for the streamsPerKey quota. */
class KeyStreams {
  private readonly open = new Map<string, number>();

  /** @returns a release function, or undefined when the key already holds `max` streams. */
  acquire(keyId: string, max: number): (() => void) | undefined {
    const n = this.open.get(keyId) ?? 0;
    if (n >= max) return undefined;
    this.open.set(keyId, n + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.open.get(keyId) ?? 1) - 1;
      if (left <= 0) this.open.delete(keyId);
      else this.open.set(keyId, left);
    };
  }
}

/** The Last-Event-ID header: undefined when absent, null when it is not a log position. */
function parseLastEventId(v: string | undefined): number | undefined | null {
  if (v === undefined || v === '') return undefined;
  return /^\d{1,15}$/.test(v.trim()) ? Number(v.trim()) : null;
}
