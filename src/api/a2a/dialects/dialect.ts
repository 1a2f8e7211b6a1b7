/**
 * What a dialect declares (one file per dialect in this folder; index.ts is the table of them). Types and one
 * constant only, so the dialect files and the table import this, never each other's table.
 */
import type { z } from 'zod';
import type { A2AErrorName } from '../errors';
import type { PushDialect, WireTask } from '../../../../task/wire';
import type { AgentDialect } from '../../../../task/contracts';

/** Every dialect a client may speak. `Dialect` (1.0 | 0.3) is the engine a call runs on once translated. */
/** The dialects clients speak: the same names as the agents' (task/contracts.ts AgentDialect). */
export type DialectName = AgentDialect;

/** What a translated call asks of the handler beyond its params: never something a client can ask for itself. */
export interface CallIntent {
  /** A new task takes this id (a 0.1/NEXUS client-chosen task id) instead of a minted one. */
  taskId?: string;
  /** Recorded with a new task (task_dialects): the dialect later calls on it are answered in, and client metadata. */
  record?: { dialect: DialectName; metadata?: Record<string, unknown>; request?: string };
  /**
   * The send repeats a message the task (message.taskId) has had, or reaches a task that has ended (a 0.1/NEXUS
   * client's retry, which carries no messageId): nothing is delivered. The answer is the task once the turn in
   * progress has ended; a stream is the task's status, then that turn's events (one event when no turn runs).
   */
  resend?: boolean;
  /** The dialect a push config given with this call is delivered in, when not the engine's (0.1 configs). */
  pushDialect?: PushDialect;
}

/** The call-context state key of a call's intent, read by the request handler. */
export const INTENT_STATE = 'switchboard.intent';

/** What a translation or a rendering may look up, in the caller's tenant (and the endpoint's agent, if any). */
export interface DialectContext {
  tenant: string;
  /** The task with this id, or undefined when the tenant has none. */
  task(id: string): Promise<WireTask | undefined>;
  /** The ids of the tasks of this context that wait for input (submitted/working ones checked with their workflow). */
  waitingInContext(contextId: string): Promise<string[]>;
  /** Client metadata recorded with these tasks when they were started (0.1: requester, user_id, chat_id…). */
  clientMetadata(taskIds: string[]): Promise<Map<string, Record<string, unknown>>>;
  /** The JSON-RPC `id` of the request being translated, when it came over JSON-RPC with one. */
  requestId?: string | number;
  /** The request key (requestKey) of the request that started this 0.1/NEXUS task, when it was recorded. */
  firstRequest(taskId: string): Promise<string | undefined>;
}

/** A call as the engine runs it: a 1.0 (or 0.3) method name and its params in that method's form. */
export interface InternalCall {
  method: string;
  params: unknown;
  intent?: CallIntent;
  /** Renders this call's result instead of the method's `render` (a 0.1 send that became a GetTask). */
  render?: (result: unknown, ctx: DialectContext) => unknown;
}

export interface MethodDef {
  /** The params as the dialect's clients send them. */
  params: z.ZodType;
  /** The engine method the call runs as (its roles, whether it streams, whether it writes). */
  runs: string;
  /** The engine call for validated params; unset: the method runs as is. @throws an A2A error, answered in the dialect. */
  translate?(params: unknown, ctx: DialectContext): InternalCall | Promise<InternalCall>;
  /** The engine's result as this dialect answers it; unset: as is. */
  render?(result: unknown, ctx: DialectContext): unknown;
}

/** A method's definition, or the A2A error that answers it while the feature is not offered. */
export type MethodSpec = MethodDef | { unsupported: A2AErrorName; why: string };

/** Renders one stream's events (the engine's JSON-RPC `result`s), in order; `closing` marks the stream's last. */
export type StreamRenderer = (result: unknown, closing: boolean) => unknown;

export interface DialectDef {
  name: DialectName;
  methods: Record<string, MethodSpec>;
  /** For a method name another dialect has too: whether this request is this dialect's by its shape. */
  claims?(method: string, params: unknown): boolean;
  /** A call naming a task started in this dialect (task_dialects) is this dialect's, where the name is shared. */
  byTask?: boolean;
  renderError(err: unknown): { code: number; message: string; data?: unknown };
  /** Renders the error of an engine answer (the 1.0 or 0.3 envelope's `error`); unset: as is. */
  renderEngineError?(error: { code: number; message: string; data?: unknown }): { code: number; message: string; data?: unknown };
  streamRenderer(): StreamRenderer;
  /** Methods that answer even an early error as a stream of one `error` event (0.3 tasks/resubscribe). */
  errorsAsStream?: ReadonlySet<string>;
}
