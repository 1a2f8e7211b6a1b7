/**
 * The A2A RPC core: a method, its params as parsed (not yet validated) and who sent them in; data out — a result, an
 * error (in the caller's dialect, with why it was refused when it was refused before running), or a stream of them.
 * No HTTP and no envelope here: the bindings decode their requests, hand them over (through endpoints.ts, the one
 * pipeline they share), and choose how to show the answer (HTTP status, AIP-193 body, gRPC status) by the one error
 * table (task/errors.ts, rendered by error-forms.ts).
 *
 * One call, in order: its dialect (the method table, dialects/index.ts), who may call it (the role, an operator's
 * action), the call decoded (decode.ts: an unsupported A2A-Version -32009, bad params -32602, then the engine call,
 * a 1.0 or 0.3 method whose validated params are what runs), the call itself on the target the resolver picks (the
 * push-config methods, push-methods.ts; or the endpoint's request handler through engine.ts), and its answer in the
 * caller's dialect. Nothing starts on a bad request, and whatever any step throws is answered by one catch
 * (CallErrors.answer).
 */
import { type CallIntent, type DialectContext, type DialectDef, type InternalCall, type StreamRenderer, pickDialect } from './dialects';
import { A2A_ERRORS, a2aError } from './errors';
import { decode, dialectContext } from './decode';
import { answerPushMethod } from './push-methods';
import { AgentRequestHandler, type HandlerDeps } from './request-handler';
import { type StreamCursor, StreamLimitError } from './task-stream';
import type { Dialect } from '../../../task/wire';
import type { AgentRegistry } from '../../core/agents/registry';
import { PUSH_METHOD_PARAMS } from '../../core/push/params';
import { dialectOfTask } from '../../core/db/task-dialects';
import { agentOfTask } from '../../core/db/task-store';
import { type Caller, rpcMethodRoles } from '../../core/auth/caller';
import type { CredentialWatch } from '../../core/auth/credential-watch';
import { quotaError } from '../../core/auth/quotas';
import { type DependencyUnavailable, type Health, outageOf } from '../../core/health';
import { type Refused, jsonRpcErrorOf } from './error-forms';
import { ERRORS } from '../../../task/errors';
import { KnownAgents } from './known-agents';
import { type EngineAnswer, type RpcError, type RpcOutcome, runEngine } from './engine';
import { annotate } from '../../core/tracing';
import { auditOperatorAction, isOperatorAction, operatorRefusal } from './operator-actions';

export { RPC_METHODS } from './dialects';
export type { RpcError, RpcOutcome } from './engine';

const PUSH_METHODS = new Set([...Object.keys(PUSH_METHOD_PARAMS['1.0']), ...Object.keys(PUSH_METHOD_PARAMS['0.3'])]);
const STREAMING_METHODS = new Set(['SendStreamingMessage', 'SubscribeToTask', 'message/stream', 'tasks/resubscribe']);

/** Methods that change something: refused at once (Unavailable) while PostgreSQL or Temporal is down, before any work. */
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

/** One call as a transport read it: the method and its params, parsed but not validated (the core validates them once). */
export interface RpcRequest {
  method: string;
  params: unknown;
  caller: Caller;
  /** The request's headers (the intake reads X-Switchboard-Parent-Task; nothing forwards them to agents). */
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
  /** The JSON-RPC request's `id`, where the transport has one (0.1/NEXUS tell a client's retry from a new request by it). */
  requestId?: string | number | null;
  /**
   * For an in-process caller that translated the call itself (NEXUS's POST /api/v1/tasks): what a new task records.
   * Transports never set it from what a client sent.
   */
  intent?: CallIntent;
}

export type { Refused } from './error-forms';

/** An error answer: the error in the caller's dialect, why it was refused (if before running), when to retry. */
export interface RpcFailure {
  error: RpcError;
  refused?: Refused;
  retryAfterS?: number;
}

/** One stream event: a result or an error, with the event's log position as its `id:` when it has one. */
export interface SseFrame {
  id?: number;
  /** The SSE event name; unset is a message. 0.3 `tasks/resubscribe` sends its errors as `error` events. */
  event?: string;
  data: RpcOutcome;
}

/** A stream answer: its frames, and the frames that end it early. */
export interface RpcStream {
  stream: AsyncIterator<SseFrame>;
  /** The frame for an error that ends the stream early. */
  errorFrame(err: unknown): SseFrame;
  /** The frame telling a reader that was too slow where to resume: after the last frame it was sent. */
  cutOffFrame(message: string, lastEventId: number): SseFrame;
}

/** What the core answers: a result, an error, or a stream. */
export type RpcAnswer = { result: unknown } | RpcFailure | RpcStream;

/**
 * The answer, unless the server closes first (a restart) while the call still waits, e.g. a blocking SendMessage
 * waiting for its turn's end: then -32054 at once (HTTP 503, Retry-After 1), so the close waits for no turn. The call
 * goes on without its client; sent again (the same messageId is the same message), it reaches the same task at the
 * next process. (Streams end with where to resume instead: src/api/routes/sse.ts.)
 */
export async function answeredBeforeClose(answering: Promise<RpcAnswer>, closing: AbortSignal): Promise<RpcAnswer> {
  if (closing.aborted) return answering;
  let onClose!: () => void;
  const closed = new Promise<RpcAnswer>((resolve) => {
    onClose = () =>
      resolve({
        error: { code: A2A_ERRORS.Unavailable.code, message: 'Switchboard is restarting; send the request again (the same messageId continues the same task)' },
        refused: 'unavailable',
        retryAfterS: 1,
      });
    closing.addEventListener('abort', onClose, { once: true });
  });
  answering.catch(() => undefined); // a call still running at the close fails with it, answered already
  try {
    return await Promise.race([answering, closed]);
  } finally {
    closing.removeEventListener('abort', onClose);
  }
}

/** What serves a valid call: a handler (built once the stream, if any, is set up), or a refusal. */
export type RpcTarget =
  | {
      handler: (cursor: StreamCursor | undefined, dialect: Dialect) => AgentRequestHandler;
      decorate?: (result: unknown) => unknown;
      /** The agent of a per-agent endpoint: its push-config methods reach only that agent's tasks. */
      agentId?: string;
    }
  | { refuse: RpcFailure };

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

/** A call that passed every check: its dialect, the engine call it runs as, and how its errors are answered. */
interface Checked {
  dialect: DialectDef;
  internal: InternalCall;
  engine: Dialect;
  ctx: DialectContext;
  errors: CallErrors;
}

/**
 * How one call's errors are answered, in its dialect: the one place where an error becomes an answer. An outage is
 * the A2A error naming the dependency (-32054); a -32054 is a refusal (HTTP 503, Retry-After), as a stream cap is
 * (429); 0.3 `tasks/resubscribe` answers even an early error as a stream of one `error` event.
 */
class CallErrors {
  constructor(
    private readonly dialect: DialectDef,
    private readonly method: string,
    private readonly health: Health,
  ) {}

  /** What an error thrown below the protocol stands for: an outage as the A2A error naming the dependency. */
  readonly raised = (err: unknown): unknown => {
    const down = this.outage(err);
    return down ? a2aError('Unavailable', down.message) : err;
  };

  /** The answer to an error thrown anywhere in the call: the core's one catch. */
  answer(err: unknown): RpcAnswer {
    const down = this.outage(err);
    if (down) return this.failure({ error: this.rendered(a2aError('Unavailable', down.message)), refused: 'unavailable', retryAfterS: down.retryAfterS });
    if (err instanceof StreamLimitError) return { error: { code: A2A_ERRORS.Internal.code, message: err.message }, refused: 'busy', retryAfterS: 5 };
    const error = this.rendered(err);
    return this.failure(error.code === A2A_ERRORS.Unavailable.code ? { error, refused: 'unavailable', retryAfterS: 5 } : { error });
  }

  /** An error the engine answered with (the SDK rendered it, for 0.3), as the dialect shows an engine's. */
  engineFailure(engineError: RpcError): RpcFailure {
    const error = this.dialect.renderEngineError ? this.dialect.renderEngineError(engineError) : engineError;
    return engineError.code === A2A_ERRORS.Unavailable.code ? { error, refused: 'unavailable', retryAfterS: 5 } : { error };
  }

  /** An error answer; one that is no refusal is a stream of one `error` event where the method always streams. */
  failure(f: RpcFailure): RpcAnswer {
    return !f.refused && this.dialect.errorsAsStream?.has(this.method) ? errorStream(f.error, (err) => this.rendered(err)) : f;
  }

  /** A refusal in the dialect's error form of Switchboard's own (1.0 adds the ErrorInfo). */
  refusal(name: 'PermissionDenied' | 'Unauthenticated', message: string, metadata?: Record<string, string>): RpcError {
    return jsonRpcErrorOf({ name, message, metadata }, this.dialect.name === '1.0' ? '1.0' : '0.3');
  }

  rendered(err: unknown): RpcError {
    return this.dialect.renderError(err);
  }

  /** An outage's error, the dependency marked down (Health.unavailable); no other error touches Health. */
  private outage(err: unknown): DependencyUnavailable | undefined {
    return outageOf(err) ? this.health.unavailable(err) : undefined;
  }
}

export class RpcCore {
  private readonly streams = new KeyStreams();
  private readonly agents = new KnownAgents();

  constructor(private readonly deps: RpcCoreDeps) {}

  /** The resolver of a per-agent endpoint (`/agents/:id/a2a`): the agent in its path, of the caller's tenant. */
  agentEndpoint(agentId: string): RpcResolver {
    return async ({ base, caller }) => {
      const agent = await this.agents.get(this.deps.registry, caller.tenant, agentId);
      if (!agent) return { refuse: { error: { code: ERRORS.NoSuchEndpoint.code, message: `No agent ${agentId} is registered on this gateway` }, refused: 'no-endpoint' } };
      const rpcUrl = `${base}/agents/${agent.id}/a2a`;
      return { agentId: agent.id, handler: (cursor, dialect) => new AgentRequestHandler(agent, caller, rpcUrl, this.deps, cursor, dialect) };
    };
  }

  /**
   * Answers one call: its dialect, the checks (role, then the call decoded: nothing starts on a bad request), the
   * call on the target the resolver picks, its answer in the caller's dialect. Whatever any step throws is answered
   * by the one catch (CallErrors.answer).
   */
  async answer(req: RpcRequest, resolve: RpcResolver): Promise<RpcAnswer> {
    const dialect = await pickDialect(req.method, req.params, (taskId) => dialectOfTask(this.deps.pool, req.caller.tenant, taskId).catch(() => undefined));
    if (!dialect) return { error: { code: A2A_ERRORS.MethodNotFound.code, message: `Method not found: ${req.method}` } };
    const errors = new CallErrors(dialect, req.method, this.deps.health);
    let checked: Checked | undefined;
    let out: RpcAnswer;
    try {
      const decoded = await this.check(req, dialect, errors);
      if ('errors' in decoded) out = await this.run(req, resolve, (checked = decoded));
      else out = decoded;
    } catch (err) {
      out = errors.answer(err);
    }
    if (checked && isOperatorAction(req.caller, checked.internal.method)) {
      await auditOperatorAction(this.deps.pool, req.caller, { ...checked.internal, requestId: req.requestId }, 'error' in out ? out.error.code : undefined);
    }
    return out;
  }

  private async run(req: RpcRequest, resolve: RpcResolver, checked: Checked): Promise<RpcAnswer> {
    const { internal, engine, errors } = checked;
    const { deps } = this;
    const streaming = STREAMING_METHODS.has(internal.method);
    const lastEventId = streaming ? parseLastEventId(req.lastEventId) : undefined;
    // A change needs both: refuse it now rather than half-start it or hang (a read may still answer from one).
    if (WRITE_METHODS.has(internal.method) && lastEventId === undefined) deps.health.require('postgresql', 'temporal');
    const target = await resolve({ method: internal.method, params: internal.params, dialect: engine, intent: internal.intent, base: req.base, lastEventId: lastEventId ?? undefined, caller: req.caller });
    if ('refuse' in target) return errors.failure(target.refuse);
    if (PUSH_METHODS.has(internal.method)) {
      const pushDeps = { pool: deps.pool, store: deps.push, gateway: deps.gateway, tenant: req.caller.tenant, agentId: target.agentId };
      const result = await answerPushMethod(internal.method, engine, internal.params as Record<string, unknown>, pushDeps, internal.intent?.pushDialect);
      return { result: internal.render ? await internal.render(result, checked.ctx) : result };
    }
    if (streaming) {
      if (lastEventId === null) throw a2aError('InvalidParams', 'Last-Event-ID must be the id of an event this gateway sent (a non-negative integer)');
      return this.openStream(req, checked, target, lastEventId);
    }
    const answer = await runEngine(target.handler(undefined, engine), { method: internal.method, params: internal.params, intent: internal.intent, headers: req.headers, tenant: req.caller.tenant, signal: req.signal }, engine, errors.raised);
    return this.unary(answer, checked, target);
  }

  /**
   * The checks before any work: who may call (the role, an operator's action), then the call decoded (decode.ts:
   * version, params validated once, the engine call). A refusal is answered here; a bad request is thrown (the one
   * catch answers it).
   */
  private async check(req: RpcRequest, dialect: DialectDef, errors: CallErrors): Promise<Checked | RpcAnswer> {
    const { caller, method } = req;
    const spec = dialect.methods[method]!;
    annotate({ 'rpc.system': 'jsonrpc', 'rpc.method': method, 'a2a.dialect': dialect.name, 'switchboard.tenant': caller.tenant });
    const runs = 'runs' in spec ? spec.runs : method;
    const roles = rpcMethodRoles(runs);
    if (!roles.includes(caller.role)) {
      // The body still says which roles the method needs; the transport shows the refusal as it shows authorization's.
      const message = `${method} needs the role ${roles.join(' or ')}; this key's role is ${caller.role}`;
      return { error: errors.refusal('PermissionDenied', message, { requiredRoles: roles.join(',') }), refused: 'permission' };
    }
    const taskExists = async (taskId: string) => (await agentOfTask(this.deps.pool, caller.tenant, taskId)) !== undefined;
    const refusedAction = await operatorRefusal(caller, runs, req.params, taskExists);
    if (refusedAction) return { error: errors.refusal('PermissionDenied', refusedAction, { requiredRoles: 'admin,client,agent' }), refused: 'permission' };
    const ctx = dialectContext(this.deps, caller.tenant, req.agentId, req.requestId);
    const { internal, engine } = await decode(req, dialect, ctx);
    return { dialect, internal, engine, ctx, errors };
  }

  /** A unary engine answer in the caller's dialect: its error as the dialect renders an engine's, or its result rendered. */
  private async unary(answer: EngineAnswer, c: Checked, target: Extract<RpcTarget, { handler: unknown }>): Promise<RpcAnswer> {
    if ('events' in answer) throw a2aError('Internal', `${c.internal.method} answered with a stream`);
    if ('error' in answer) return c.errors.engineFailure(answer.error);
    let out = answer.result;
    if (target.decorate && out !== undefined) out = target.decorate(out);
    if (c.internal.render && out !== undefined) out = await c.internal.render(out, c.ctx);
    return { result: out ?? null };
  }

  /**
   * A streaming call: the caps (this process's streams, the key's), then the handler's stream, which answers at once
   * once set up even when its first event is yet to come (a resumed stream that waits). Errors before it is set up
   * (unknown task, a terminal task, a cap) are plain answers.
   */
  private async openStream(req: RpcRequest, c: Checked, target: Extract<RpcTarget, { handler: unknown }>, lastEventId: number | undefined): Promise<RpcAnswer> {
    const { deps } = this;
    const { errors, internal, engine } = c;
    if (deps.hub.readers() >= deps.streamLimits.maxTotal) {
      return { error: { code: A2A_ERRORS.Internal.code, message: `This gateway has ${deps.streamLimits.maxTotal} open streams (SWITCHBOARD_MAX_STREAMS); retry later` }, refused: 'busy', retryAfterS: 5 };
    }
    const max = (await deps.quotas.of(req.caller.tenant))?.streamsPerKey ?? 0;
    const slot = this.streams.acquire(req.caller.keyId, max);
    if (!slot) return errors.failure({ error: errors.rendered(quotaError('streamsPerKey', max, 'this key has that many streams open on this Switchboard process; close one first')), refused: 'busy', retryAfterS: 5 });
    // A stream lives no longer than the credential that opened it: revoked, expired, its agent or tenant
    // deleted, the follow stops and the stream's last event says why (frames below).
    const lapsed = new AbortController();
    const unwatch = deps.credentialWatch?.watch(req.caller, (why) => lapsed.abort(why));
    const release = () => (slot(), unwatch?.());
    req.signal.addEventListener('abort', release, { once: true });
    let opened!: () => void;
    const open = new Promise<'open'>((resolve) => (opened = () => resolve('open')));
    const cursor: StreamCursor = { lastEventId, signal: AbortSignal.any([req.signal, lapsed.signal]), seq: 0, closing: false, opened: () => opened() };
    let first: IteratorResult<RpcOutcome> | 'open';
    let events: AsyncIterator<RpcOutcome>;
    let next: Promise<IteratorResult<RpcOutcome>>;
    try {
      const answer = await runEngine(target.handler(cursor, engine), { method: internal.method, params: internal.params, intent: internal.intent, headers: req.headers, tenant: req.caller.tenant }, engine, errors.raised);
      if (!('events' in answer)) {
        release();
        return 'error' in answer ? errors.engineFailure(answer.error) : errors.answer(a2aError('Internal', `${internal.method} did not answer with a stream`));
      }
      events = answer.events;
      next = events.next();
      first = await Promise.race([next, open]);
    } catch (err) {
      release();
      return errors.answer(err);
    }
    if (first !== 'open' && first.done) {
      release();
      return errors.answer(a2aError('Internal', 'the stream ended before its first event'));
    }
    // The last event of a stream whose credential lapsed: no more events are produced for a caller who may no longer read them.
    const lapsedFrame = (): SseFrame => ({
      data: { error: errors.refusal('Unauthenticated', `The credential that opened this stream is no longer valid: ${String(lapsed.signal.reason)}; the stream is closed.`) },
    });
    return {
      stream: frames(first === 'open' ? next : first, events, cursor, c.dialect.streamRenderer(), lapsed.signal, lapsedFrame),
      errorFrame: (err) => ({ data: { error: errors.rendered(errors.raised(err)) } }),
      cutOffFrame: (message, at) => ({ data: { error: { code: A2A_ERRORS.Internal.code, message, data: { lastEventId: at } } } }),
    };
  }
}

/** A stream of one `error` event. */
function errorStream(error: RpcError, rendered: (err: unknown) => RpcError): RpcAnswer {
  return {
    stream: (async function* () {
      yield { event: 'error', data: { error } };
    })(),
    errorFrame: (err) => ({ event: 'error', data: { error: rendered(err) } }),
    cutOffFrame: (message) => ({ event: 'error', data: { error: { code: A2A_ERRORS.Internal.code, message } } }),
  };
}

/**
 * The handler's events as SSE frames: each with the log position of the event it renders (the handler records it
 * in the cursor as it yields), rendered in the caller's dialect (0.3 marks the event that ends the stream `final`).
 */
async function* frames(
  first: IteratorResult<RpcOutcome> | Promise<IteratorResult<RpcOutcome>>,
  rest: AsyncIterator<RpcOutcome>,
  cursor: StreamCursor,
  render: StreamRenderer,
  lapsed: AbortSignal,
  lapsedFrame: () => SseFrame,
): AsyncGenerator<SseFrame, void, undefined> {
  const frame = (event: RpcOutcome): SseFrame => ({ id: cursor.seq, data: 'result' in event ? { result: render(event.result, cursor.closing) } : event });
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
