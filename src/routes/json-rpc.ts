/**
 * Switchboard's JSON-RPC endpoints: one per agent (`POST /agents/:id/a2a`) and the routing front door
 * (`POST /a2a`, also `/api/v1/a2a`; see front-door.ts). Both are answered by one function, answerRpc, given
 * a resolver that says which handler serves a valid call.
 *
 * Everything a client can get wrong is answered here, before any work starts, with a JSON-RPC error
 * (HTTP 200, §9.5): unparseable JSON (-32700), a bad envelope (-32600), an unknown method (-32601), bad
 * params (-32602), an unsupported A2A-Version (-32009). Valid requests go to the @a2a-js/sdk transport
 * handler of the caller's dialect (1.0 PascalCase methods, 0.3 namespace/verb methods), which renders the
 * answer, and errors, in that dialect.
 */
import { toJsonRpcError } from '@a2a-js/sdk/errors';
import { LegacyJsonRpcTransportHandler } from '@a2a-js/sdk/compat/v0_3/server';
import { JsonRpcTransportHandler, UnauthenticatedUser, defaultServerCallContextBuilder } from '@a2a-js/sdk/server';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { A2A_ERRORS, type A2AErrorName, a2aError } from '../a2a/errors';
import { answerPushMethod } from '../a2a/push-methods';
import { AgentRequestHandler, type HandlerDeps, type StreamCursor, StreamLimitError } from '../a2a/request-handler';
import * as S from '../a2a/schemas';
import type { AgentRegistry } from '../agents/registry';
import { PUSH_METHOD_PARAMS } from '../push/store';
import { FRONT_DOOR_PATHS, FrontDoor } from './front-door';
import { type Caller, access, callerOf, rpcMethodRoles } from '../auth/caller';
import { quotaError } from '../auth/quotas';
import { DependencyUnavailable, type Health, outageOf } from '../health';
import type { Agent } from '../agents/registry';
import { type SseOptions, writeSse } from './sse';

export type Dialect = '1.0' | '0.3';
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
    CreateTaskPushNotificationConfig: PUSH_METHOD_PARAMS['1.0'].CreateTaskPushNotificationConfig,
    GetTaskPushNotificationConfig: PUSH_METHOD_PARAMS['1.0'].GetTaskPushNotificationConfig,
    ListTaskPushNotificationConfigs: PUSH_METHOD_PARAMS['1.0'].ListTaskPushNotificationConfigs,
    DeleteTaskPushNotificationConfig: PUSH_METHOD_PARAMS['1.0'].DeleteTaskPushNotificationConfig,
    GetExtendedAgentCard: NO_EXTENDED_CARD,
  },
  '0.3': {
    'message/send': S.LegacySendParams,
    'tasks/get': S.LegacyTaskQueryParams,
    'tasks/cancel': S.LegacyTaskIdParams,
    'message/stream': S.LegacySendParams,
    'tasks/resubscribe': S.LegacyTaskIdParams,
    'tasks/pushNotificationConfig/set': PUSH_METHOD_PARAMS['0.3']['tasks/pushNotificationConfig/set'],
    'tasks/pushNotificationConfig/get': PUSH_METHOD_PARAMS['0.3']['tasks/pushNotificationConfig/get'],
    'tasks/pushNotificationConfig/list': PUSH_METHOD_PARAMS['0.3']['tasks/pushNotificationConfig/list'],
    'tasks/pushNotificationConfig/delete': PUSH_METHOD_PARAMS['0.3']['tasks/pushNotificationConfig/delete'],
    'agent/getAuthenticatedExtendedCard': NO_EXTENDED_CARD,
  },
};

/** Every JSON-RPC method the A2A endpoints answer (both dialects), for the role × method test. */
export const RPC_METHODS: readonly string[] = [...Object.keys(METHODS['1.0']), ...Object.keys(METHODS['0.3'])];

const PUSH_METHODS = new Set([...Object.keys(PUSH_METHOD_PARAMS['1.0']), ...Object.keys(PUSH_METHOD_PARAMS['0.3'])]);
const STREAMING_METHODS = new Set(['SendStreamingMessage', 'SubscribeToTask', 'message/stream', 'tasks/resubscribe']);

/** 1.0 and 0.x method names never collide (PascalCase vs namespace/verb), so the name picks the dialect. */
function dialectOf(method: string): Dialect | undefined {
  if (Object.hasOwn(METHODS['1.0'], method)) return '1.0';
  if (Object.hasOwn(METHODS['0.3'], method)) return '0.3';
  return undefined;
}

export interface JsonRpcRouteDeps extends HandlerDeps {
  registry: AgentRegistry;
  publicUrl?: string;
  sse: SseOptions;
  health: Health;
}

/** Methods that change something: refused at once (503) while PostgreSQL or Temporal is down, before any work. */
const WRITE_METHODS = new Set([
  'SendMessage', 'SendStreamingMessage', 'CancelTask', 'CreateTaskPushNotificationConfig', 'DeleteTaskPushNotificationConfig',
  'message/send', 'message/stream', 'tasks/cancel', 'tasks/pushNotificationConfig/set', 'tasks/pushNotificationConfig/delete',
]);

/**
 * The request handler with every outage error turned into the A2A error for it (-32054, naming the dependency),
 * which the SDK renders in the caller's dialect and the route sends with HTTP 503.
 */
function mappingOutages<T extends object>(handler: T, health: Health): T {
  const map = (err: unknown) => {
    const dep = health.report(err);
    return dep ? a2aError('Unavailable', (err instanceof DependencyUnavailable ? err : new DependencyUnavailable(dep)).message) : err;
  };
  return new Proxy(handler, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        const out = value.apply(target, args);
        if (out && typeof out.then === 'function') return out.catch((err: unknown) => Promise.reject(map(err)));
        if (out && typeof out[Symbol.asyncIterator] === 'function') {
          return (async function* () {
            try {
              yield* out;
            } catch (err) {
              throw map(err);
            }
          })();
        }
        return out;
      };
    },
  });
}

/** Agents as last read, per tenant and id: while PostgreSQL is away, an agent's endpoint still serves reads. */
class KnownAgents {
  private readonly known = new Map<string, Agent>();

  async get(registry: AgentRegistry, tenant: string, id: string): Promise<Agent | undefined> {
    const key = `${tenant}/${id}`;
    try {
      const agent = await registry.get(tenant, id);
      if (agent) {
        if (this.known.size > 10_000) this.known.clear();
        this.known.set(key, agent);
      } else this.known.delete(key);
      return agent;
    } catch (err) {
      const stale = outageOf(err) ? this.known.get(key) : undefined;
      if (stale) return stale;
      throw err;
    }
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

export async function jsonRpcRoutes(app: FastifyInstance, deps: JsonRpcRouteDeps): Promise<void> {
  // Read every body as text, whatever its content type, so that parse errors become -32700 envelopes.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (_req, body, done) => done(null, body));
  app.setErrorHandler((err: { code?: string; statusCode?: number; message: string }, req, reply) => {
    if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
      return reply.code(413).send(envelope(null, { code: -32600, message: `Request body is larger than ${app.initialConfig.bodyLimit} bytes` }));
    }
    const dep = deps.health.report(err);
    if (dep) {
      const e = err instanceof DependencyUnavailable ? err : new DependencyUnavailable(dep);
      return reply.code(503).header('retry-after', String(e.retryAfterS)).send(envelope(null, { code: A2A_ERRORS.Unavailable.code, message: e.message }));
    }
    req.log.error({ err }, 'JSON-RPC request failed');
    return reply.code(200).send(envelope(null, { code: A2A_ERRORS.Internal.code, message: 'Internal error' }));
  });

  // The per-agent endpoint serves the agent in its path; the routing front door (POST /a2a, also at
  // /api/v1/a2a) picks an agent for each new task and serves existing tasks of any agent of the tenant.
  const streams = new KeyStreams();
  const agents = new KnownAgents();
  app.post('/agents/:id/a2a', { config: access.rpc }, (req: FastifyRequest<{ Params: { id: string } }>, reply) =>
    answerRpc(req, reply, deps, streams, async ({ base, caller }) => {
      const agent = await agents.get(deps.registry, caller.tenant, req.params.id);
      if (!agent) {
        return { refuse: { httpStatus: 404, code: A2A_ERRORS.InvalidRequest.code, message: `No agent ${req.params.id} is registered on this gateway` } };
      }
      const rpcUrl = `${base}/agents/${agent.id}/a2a`;
      return { agentId: agent.id, handler: (cursor, dialect) => new AgentRequestHandler(agent, caller, rpcUrl, deps, cursor, dialect) };
    }),
  );
  const frontDoor = new FrontDoor({ registry: deps.registry, pool: deps.pool });
  for (const path of FRONT_DOOR_PATHS) {
    app.post(path, { config: access.rpc }, (req, reply) => answerRpc(req, reply, deps, streams, (call) => frontDoor.resolve(call, deps)));
  }
}

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

/**
 * Picks the target of a valid call. May throw an A2A error (a2aError), answered in the caller's dialect.
 */
export type RpcResolver = (call: RpcCall) => Promise<RpcTarget>;

/**
 * Answers one JSON-RPC request: envelope, dialect, version and params checks first (nothing starts on a bad
 * request), then the target the resolver picks, through the SDK transport handler of the caller's dialect.
 */
async function answerRpc(req: FastifyRequest, reply: FastifyReply, deps: JsonRpcRouteDeps, streams: KeyStreams, resolve: RpcResolver): Promise<unknown> {
  const caller = callerOf(req);
  const rawBody = typeof req.body === 'string' ? req.body : '';
  let body: unknown;
  try {
    body = JSON.parse(rawBody);
  } catch (err) {
    return envelope(null, { code: A2A_ERRORS.ParseError.code, message: `Parse error: ${(err as Error).message}` });
  }
  const parsed = S.EnvelopeSchema.safeParse(body);
  if (!parsed.success) {
    return envelope(idOf(body), { code: A2A_ERRORS.InvalidRequest.code, message: `Invalid JSON-RPC request: ${z.prettifyError(parsed.error)}` });
  }
  const rpc = parsed.data;
  const id = rpc.id ?? null;
  const dialect = dialectOf(rpc.method);
  if (!dialect) return envelope(id, { code: A2A_ERRORS.MethodNotFound.code, message: `Method not found: ${rpc.method}` });
  const roles = rpcMethodRoles(rpc.method);
  if (!roles.includes(caller.role)) {
    // Authorization is HTTP's, as for every route; the body still says which roles the method needs.
    return reply.code(403).send({ error: `${rpc.method} needs the role ${roles.join(' or ')}; this key's role is ${caller.role}`, requiredRoles: roles });
  }
  const fail = (err: unknown) => envelope(id, dialect === '1.0' ? v1Error(err) : legacyError(err));

  const version = requestedVersion(req);
  if (version !== undefined && !/^(1\.0|0\.3)(\.\d+)?$/.test(version)) {
    return fail(a2aError('VersionNotSupported', `A2A-Version ${version} is not supported; this gateway speaks 1.0 and 0.3`));
  }
  const spec = METHODS[dialect][rpc.method];
  if ('unsupported' in spec) return fail(a2aError(spec.unsupported, `${rpc.method}: ${spec.why}`));
  const params = (spec as z.ZodType).safeParse(rpc.params);
  if (!params.success) {
    const violations = params.error.issues.map((i) => ({ field: i.path.join('.'), description: i.message }));
    return fail(a2aError('InvalidParams', `Invalid params for ${rpc.method}: ${z.prettifyError(params.error)}`, violations));
  }
  const nul = S.pathOfNul(rpc.params);
  if (nul !== undefined) {
    // PostgreSQL cannot store U+0000 in text or jsonb: refuse it here rather than fail later, mid-task.
    return fail(a2aError('InvalidParams', `Invalid params for ${rpc.method}: ${nul || 'params'} contains a NUL character (U+0000)`, [{ field: nul, description: 'must not contain U+0000' }]));
  }

  const streaming = STREAMING_METHODS.has(rpc.method);
  const lastEventId = streaming ? lastEventIdOf(req) : undefined;
  const unavailable = (err: DependencyUnavailable) => {
    reply.code(503).header('retry-after', String(err.retryAfterS));
    return fail(a2aError('Unavailable', err.message));
  };
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
    target = await resolve({ method: rpc.method, params: rpc.params, dialect, base: baseUrlOf(req, deps.publicUrl), lastEventId: lastEventId ?? undefined, caller });
  } catch (err) {
    const dep = deps.health.report(err);
    if (dep) return unavailable(err instanceof DependencyUnavailable ? err : new DependencyUnavailable(dep));
    return fail(err);
  }
  if ('refuse' in target) {
    if (target.refuse.httpStatus) reply.code(target.refuse.httpStatus);
    return envelope(id, { code: target.refuse.code, message: target.refuse.message });
  }
  if (PUSH_METHODS.has(rpc.method)) {
    try {
      const pushDeps = { pool: deps.pool, store: deps.push, gateway: deps.gateway, tenant: caller.tenant, agentId: target.agentId };
      return { jsonrpc: '2.0', id, result: await answerPushMethod(rpc.method, rpc.params, pushDeps) };
    } catch (err) {
      const dep = deps.health.report(err);
      if (dep) return unavailable(err instanceof DependencyUnavailable ? err : new DependencyUnavailable(dep));
      return fail(err);
    }
  }
  let cursor: StreamCursor | undefined;
  if (streaming) {
    if (lastEventId === null) {
      return fail(a2aError('InvalidParams', 'Last-Event-ID must be the id of an event this gateway sent (a non-negative integer)'));
    }
    if (deps.hub.readers() >= deps.streamLimits.maxTotal) {
      reply.code(429).header('retry-after', '5');
      return envelope(id, { code: A2A_ERRORS.Internal.code, message: `This gateway has ${deps.streamLimits.maxTotal} open streams (SWITCHBOARD_MAX_STREAMS); retry later` });
    }
    const max = (await deps.quotas.of(caller.tenant))?.streamsPerKey ?? 0;
    const release = streams.acquire(caller.keyId, max);
    if (!release) {
      reply.code(429).header('retry-after', '5');
      return fail(quotaError('streamsPerKey', max, 'this key has that many streams open on this Switchboard process; close one first'));
    }
    const aborter = new AbortController();
    reply.raw.on('close', () => {
      release();
      aborter.abort();
    });
    cursor = { lastEventId, signal: aborter.signal, seq: 0, closing: false };
  }
  const handler = mappingOutages(target.handler(cursor, dialect), deps.health);
  const transport = dialect === '1.0' ? new JsonRpcTransportHandler(handler) : new LegacyJsonRpcTransportHandler(handler);
  // Client credentials stay here: the context carries headers for the SDK, nothing forwards them to agents.
  const context = defaultServerCallContextBuilder({
    extensions: undefined,
    user: new UnauthenticatedUser(),
    headers: req.headers,
    requestedVersion: dialect,
    tenant: caller.tenant,
  });
  const answer = await transport.handle({ ...rpc, id, params: rpc.params }, context);
  if (answer && typeof answer === 'object' && Symbol.asyncIterator in answer && cursor) {
    // Errors before the first event (unknown task, a terminal task, a cap) are plain JSON-RPC answers.
    const events = (answer as AsyncGenerator<RpcEvent>)[Symbol.asyncIterator]();
    let first: IteratorResult<RpcEvent>;
    try {
      first = await events.next();
    } catch (err) {
      if (err instanceof StreamLimitError) {
        reply.code(429).header('retry-after', '5');
        return envelope(id, { code: A2A_ERRORS.Internal.code, message: err.message });
      }
      if ((err as { envelopeCode?: number }).envelopeCode === A2A_ERRORS.Unavailable.code) reply.code(503).header('retry-after', '5');
      return fail(err);
    }
    if (first.done) return fail(a2aError('Internal', 'the stream ended before its first event'));
    await writeSse(reply, cursor, first.value, events, { ...deps.sse, legacy: dialect === '0.3', onError: fail });
    return reply;
  }
  const result = answer as { error?: { code: number }; result?: unknown };
  if (result.error?.code === A2A_ERRORS.Unavailable.code) reply.code(503).header('retry-after', '5');
  if (result.error?.code === A2A_ERRORS.Internal.code) req.log.warn({ method: rpc.method, error: result.error }, 'internal error answered');
  if (target.decorate && result.result !== undefined) return { ...result, result: target.decorate(result.result) };
  return result;
}

type RpcEvent = { jsonrpc: '2.0'; id: string | number | null; result?: unknown; error?: unknown };

/** The Last-Event-ID header: undefined when absent, null when it is not a log position. */
function lastEventIdOf(req: FastifyRequest): number | undefined | null {
  const raw = req.headers['last-event-id'];
  const v = Array.isArray(raw) ? raw[0] : raw;
  if (v === undefined || v === '') return undefined;
  return /^\d{1,15}$/.test(v.trim()) ? Number(v.trim()) : null;
}

function envelope(id: string | number | null, error: { code: number; message: string; data?: unknown }) {
  return { jsonrpc: '2.0' as const, id, error };
}

/**
 * 1.0 errors as the SDK renders them (a google.rpc.ErrorInfo in `data`), plus, for invalid params, the field
 * violations as a google.rpc.BadRequest (§1.9): the SDK renderer drops an error's own `data`.
 */
function v1Error(err: unknown): { code: number; message: string; data?: unknown[] } {
  const out = toJsonRpcError(err);
  const violations = (err as { data?: unknown }).data;
  if (out.code !== A2A_ERRORS.InvalidParams.code || !Array.isArray(violations) || violations.length === 0) return out;
  return { ...out, data: [...(out.data ?? []), { '@type': 'type.googleapis.com/google.rpc.BadRequest', fieldViolations: violations }] };
}

/** 0.3 errors carry no google.rpc ErrorInfo array; `data` stays free-form (field violations for -32602). */
function legacyError(err: unknown): { code: number; message: string; data?: unknown } {
  const e = err as { envelopeCode?: number; message?: string; data?: unknown };
  return { code: e.envelopeCode ?? A2A_ERRORS.Internal.code, message: e.message ?? 'Internal error', ...(e.data !== undefined ? { data: e.data } : {}) };
}

/** Echo the request id in an error when it is a valid one (JSON-RPC 2.0 §5: null when it cannot be read). */
function idOf(body: unknown): string | number | null {
  const id = (body as { id?: unknown } | null)?.id;
  return typeof id === 'string' || (typeof id === 'number' && Number.isInteger(id)) ? id : null;
}

function requestedVersion(req: FastifyRequest): string | undefined {
  const header = req.headers['a2a-version'];
  const query = (req.query as Record<string, unknown> | undefined)?.['A2A-Version'];
  const v = (Array.isArray(header) ? header[0] : header) ?? (typeof query === 'string' ? query : undefined);
  return v === '' ? undefined : v;
}

export function baseUrlOf(req: FastifyRequest, publicUrl?: string): string {
  if (publicUrl) return publicUrl.replace(/\/+$/, '');
  return `${req.protocol}://${req.host}`;
}
