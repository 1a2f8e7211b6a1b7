/**
 * The A2A JSON-RPC core: a request body and who sent it in, a JSON-RPC answer or an event stream out. No HTTP
 * framework here; src/routes/json-rpc.ts adapts Fastify to it, and other transports plug into the same core.
 *
 * Everything a client can get wrong is answered before any work starts, with a JSON-RPC error (HTTP 200, §9.5):
 * unparseable JSON (-32700), a bad envelope (-32600), an unknown method (-32601), bad params (-32602), an
 * unsupported A2A-Version (-32009). The method table below is the one list of methods, and its validation is
 * the one whose result runs: valid params go to the push-config methods (answered here, see push-methods.ts),
 * or to the @a2a-js/sdk transport handler of the caller's dialect, which renders answers and errors in it.
 */
import { LegacyJsonRpcTransportHandler } from '@a2a-js/sdk/compat/v0_3/server';
import { JsonRpcTransportHandler, UnauthenticatedUser, defaultServerCallContextBuilder } from '@a2a-js/sdk/server';
import { z } from 'zod';
import { A2A_ERRORS, type A2AErrorName, a2aError } from './errors';
import { answerPushMethod } from './push-methods';
import { AgentRequestHandler, type HandlerDeps } from './request-handler';
import { type StreamCursor, StreamLimitError } from './task-stream';
import * as S from './schemas';
import type { Dialect } from './wire';
import type { AgentRegistry } from '../agents/registry';
import { PUSH_METHOD_PARAMS } from '../push/params';
import { type Caller, rpcMethodRoles } from '../auth/caller';
import { quotaError } from '../auth/quotas';
import { DependencyUnavailable, type Health } from '../health';
import { KnownAgents, mappingOutages } from './outage-fallbacks';
import { type RpcEvent, envelope, idOf, legacyError, v1Error } from './rpc-errors';
import { annotate } from '../tracing';
import { withJsonNames } from './proto-json';

/** A method's params schema, or the A2A error that answers it while the feature is not offered. */
type MethodSpec = z.ZodType | { unsupported: A2AErrorName; why: string };

const NO_EXTENDED_CARD = { unsupported: 'UnsupportedOperation', why: 'this gateway does not serve extended agent cards' } as const;

const METHODS: Record<Dialect, Record<string, MethodSpec>> = {
  '1.0': {
    SendMessage: S.SendMessageParams,
    GetTask: S.GetTaskParams,
    CancelTask: S.CancelTaskParams,
    ListTasks: S.ListTasksParams,
    SendStreamingMessage: S.SendMessageParams,
    SubscribeToTask: S.SubscribeToTaskParams,
    ...PUSH_METHOD_PARAMS['1.0'],
    GetExtendedAgentCard: NO_EXTENDED_CARD,
  },
  '0.3': {
    'message/send': S.LegacySendParams,
    'tasks/get': S.LegacyTaskQueryParams,
    'tasks/cancel': S.LegacyTaskIdParams,
    'message/stream': S.LegacySendParams,
    'tasks/resubscribe': S.LegacyTaskIdParams,
    ...PUSH_METHOD_PARAMS['0.3'],
    'agent/getAuthenticatedExtendedCard': NO_EXTENDED_CARD,
  },
};

/** Every JSON-RPC method the A2A endpoints answer (both dialects), for the role × method test. */
export const RPC_METHODS: readonly string[] = [...Object.keys(METHODS['1.0']), ...Object.keys(METHODS['0.3'])];

const PUSH_METHODS = new Set([...Object.keys(PUSH_METHOD_PARAMS['1.0']), ...Object.keys(PUSH_METHOD_PARAMS['0.3'])]);
const STREAMING_METHODS = new Set(['SendStreamingMessage', 'SubscribeToTask', 'message/stream', 'tasks/resubscribe']);

/** Methods that change something: refused at once (503) while PostgreSQL or Temporal is down, before any work. */
const WRITE_METHODS = new Set([
  'SendMessage', 'SendStreamingMessage', 'CancelTask', 'CreateTaskPushNotificationConfig', 'DeleteTaskPushNotificationConfig',
  'message/send', 'message/stream', 'tasks/cancel', 'tasks/pushNotificationConfig/set', 'tasks/pushNotificationConfig/delete',
]);

/** 1.0 and 0.x method names never collide (PascalCase vs namespace/verb), so the name picks the dialect. */
function dialectOf(method: string): Dialect | undefined {
  if (Object.hasOwn(METHODS['1.0'], method)) return '1.0';
  if (Object.hasOwn(METHODS['0.3'], method)) return '0.3';
  return undefined;
}

export interface RpcCoreDeps extends HandlerDeps {
  registry: AgentRegistry;
  health: Health;
}

/** One JSON-RPC request as a transport received it. */
export interface RpcRequest {
  /** The body as sent, unparsed. */
  body: string;
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
  method: string;
  params: unknown;
  dialect: Dialect;
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
      if (!agent) return { refuse: { httpStatus: 404, code: A2A_ERRORS.InvalidRequest.code, message: `No agent ${agentId} is registered on this gateway` } };
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
      body = JSON.parse(req.body);
    } catch (err) {
      return ok(envelope(null, { code: A2A_ERRORS.ParseError.code, message: `Parse error: ${(err as Error).message}` }));
    }
    const parsed = S.EnvelopeSchema.safeParse(body);
    if (!parsed.success) {
      return ok(envelope(idOf(body), { code: A2A_ERRORS.InvalidRequest.code, message: `Invalid JSON-RPC request: ${z.prettifyError(parsed.error)}` }));
    }
    const rpc = parsed.data;
    const id = rpc.id ?? null;
    const dialect = dialectOf(rpc.method);
    if (!dialect) return ok(envelope(id, { code: A2A_ERRORS.MethodNotFound.code, message: `Method not found: ${rpc.method}` }));
    annotate({ 'rpc.system': 'jsonrpc', 'rpc.method': rpc.method, 'a2a.dialect': dialect, 'switchboard.tenant': caller.tenant });
    const roles = rpcMethodRoles(rpc.method);
    if (!roles.includes(caller.role)) {
      // Authorization is HTTP's, as for every route; the body still says which roles the method needs.
      return ok({ error: `${rpc.method} needs the role ${roles.join(' or ')}; this key's role is ${caller.role}`, requiredRoles: roles }, 403);
    }
    // An error as the caller's dialect renders it, as an answer or as a stream's last frame.
    const rendered = (err: unknown) => envelope(id, dialect === '1.0' ? v1Error(err) : legacyError(err));
    // 0.3 tasks/resubscribe always answers a stream (§7.9): an early error is its one `error` event, as SDK agents
    // send it. Every other method answers an early error as a plain JSON-RPC response.
    const errorsAsStream = dialect === '0.3' && rpc.method === 'tasks/resubscribe';
    const answerError = (body: RpcEvent, status: number, headers?: Record<string, string>): RpcAnswer =>
      errorsAsStream && status === 200 ? errorStream(body, rendered) : ok(body, status, headers);
    const fail = (err: unknown, status = 200, headers?: Record<string, string>) => answerError(rendered(err), status, headers);
    const unavailable = (err: DependencyUnavailable) => fail(a2aError('Unavailable', err.message), 503, { 'retry-after': String(err.retryAfterS) });
    const outage = (err: unknown) => {
      const down = deps.health.unavailable(err);
      return down ? unavailable(down) : undefined;
    };

    if (req.version !== undefined && !/^(1\.0|0\.3)(\.\d+)?$/.test(req.version)) {
      return fail(a2aError('VersionNotSupported', `A2A-Version ${req.version} is not supported; this gateway speaks 1.0 and 0.3`));
    }
    const spec = METHODS[dialect][rpc.method];
    if ('unsupported' in spec) return fail(a2aError(spec.unsupported, `${rpc.method}: ${spec.why}`));
    // ProtoJSON: a field may come by its proto name (message_id) as well as its JSON name (messageId).
    const checked = spec.safeParse(withJsonNames(rpc.params));
    if (!checked.success) {
      const violations = checked.error.issues.map((i) => ({ field: i.path.join('.'), description: i.message }));
      return fail(a2aError('InvalidParams', `Invalid params for ${rpc.method}: ${z.prettifyError(checked.error)}`, violations));
    }
    const nul = S.pathOfNul(checked.data);
    if (nul !== undefined) {
      // PostgreSQL cannot store U+0000 in text or jsonb: refuse it here rather than fail later, mid-task.
      return fail(a2aError('InvalidParams', `Invalid params for ${rpc.method}: ${nul || 'params'} contains a NUL character (U+0000)`, [{ field: nul, description: 'must not contain U+0000' }]));
    }
    // From here on the validated params are what runs.
    const params = checked.data as Record<string, unknown>;

    const streaming = STREAMING_METHODS.has(rpc.method);
    const lastEventId = streaming ? parseLastEventId(req.lastEventId) : undefined;
    // A change needs both: refuse it now rather than half-start it or hang (a read may still answer from one).
    if (WRITE_METHODS.has(rpc.method) && lastEventId === undefined) {
      try {
        deps.health.require('postgresql', 'temporal');
      } catch (err) {
        return unavailable(err as DependencyUnavailable);
      }
    }
    let target: RpcTarget;
    try {
      target = await resolve({ method: rpc.method, params, dialect, base: req.base, lastEventId: lastEventId ?? undefined, caller });
    } catch (err) {
      return outage(err) ?? fail(err);
    }
    if ('refuse' in target) return answerError(envelope(id, { code: target.refuse.code, message: target.refuse.message }), target.refuse.httpStatus ?? 200);
    if (PUSH_METHODS.has(rpc.method)) {
      try {
        const pushDeps = { pool: deps.pool, store: deps.push, gateway: deps.gateway, tenant: caller.tenant, agentId: target.agentId };
        return ok({ jsonrpc: '2.0', id, result: await answerPushMethod(rpc.method, dialect, params, pushDeps) });
      } catch (err) {
        return outage(err) ?? fail(err);
      }
    }

    let cursor: StreamCursor | undefined;
    let release: (() => void) | undefined;
    if (streaming) {
      if (lastEventId === null) {
        return fail(a2aError('InvalidParams', 'Last-Event-ID must be the id of an event this gateway sent (a non-negative integer)'));
      }
      const busy = { 'retry-after': '5' };
      if (deps.hub.readers() >= deps.streamLimits.maxTotal) {
        return ok(envelope(id, { code: A2A_ERRORS.Internal.code, message: `This gateway has ${deps.streamLimits.maxTotal} open streams (SWITCHBOARD_MAX_STREAMS); retry later` }), 429, busy);
      }
      const max = (await deps.quotas.of(caller.tenant))?.streamsPerKey ?? 0;
      release = this.streams.acquire(caller.keyId, max);
      if (!release) return fail(quotaError('streamsPerKey', max, 'this key has that many streams open on this Switchboard process; close one first'), 429, busy);
      req.signal.addEventListener('abort', release, { once: true });
      cursor = { lastEventId, signal: req.signal, seq: 0, closing: false };
    }
    const handler = mappingOutages(target.handler(cursor, dialect), deps.health);
    const transport = dialect === '1.0' ? new JsonRpcTransportHandler(handler) : new LegacyJsonRpcTransportHandler(handler);
    const context = defaultServerCallContextBuilder({
      extensions: undefined,
      user: new UnauthenticatedUser(),
      headers: req.headers,
      requestedVersion: dialect,
      tenant: caller.tenant,
    });
    const answer = await transport.handle({ jsonrpc: '2.0', method: rpc.method, id, params }, context);
    if (answer && typeof answer === 'object' && Symbol.asyncIterator in answer && cursor) {
      const events = (answer as AsyncGenerator<RpcEvent>)[Symbol.asyncIterator]();
      // Errors before the first event (unknown task, a terminal task, a cap) are plain JSON-RPC answers.
      let first: IteratorResult<RpcEvent>;
      try {
        first = await events.next();
      } catch (err) {
        release?.();
        if (err instanceof StreamLimitError) return ok(envelope(id, { code: A2A_ERRORS.Internal.code, message: err.message }), 429, { 'retry-after': '5' });
        if ((err as { envelopeCode?: number }).envelopeCode === A2A_ERRORS.Unavailable.code) return fail(err, 503, { 'retry-after': '5' });
        return fail(err);
      }
      if (first.done) {
        release?.();
        return fail(a2aError('Internal', 'the stream ended before its first event'));
      }
      return {
        stream: frames(first.value, events, cursor, dialect),
        errorFrame: (err) => ({ data: rendered(err) }),
        cutOffFrame: (message, at) => ({ data: envelope(id, { code: A2A_ERRORS.Internal.code, message, data: { lastEventId: at } }) }),
      };
    }
    release?.();
    const result = answer as { error?: { code: number }; result?: unknown };
    if (result.error?.code === A2A_ERRORS.Unavailable.code) return ok(result, 503, { 'retry-after': '5' });
    if (target.decorate && result.result !== undefined) return ok({ ...result, result: target.decorate(result.result) });
    return ok(result);
  }
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
async function* frames(first: RpcEvent, rest: AsyncIterator<RpcEvent>, cursor: StreamCursor, dialect: Dialect): AsyncGenerator<SseFrame, void, undefined> {
  const frame = (event: RpcEvent): SseFrame => {
    const result = event.result as { kind?: string; final?: boolean } | undefined;
    if (dialect === '0.3' && cursor.closing && result?.kind === 'status-update') result.final = true;
    return { id: cursor.seq, data: event };
  };
  try {
    yield frame(first);
    for (;;) {
      const next = await rest.next();
      if (next.done || cursor.signal.aborted) return;
      yield frame(next.value);
    }
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
