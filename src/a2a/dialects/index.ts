/**
 * The one table of the JSON-RPC dialects Switchboard answers: A2A 1.0, 0.3, 0.1/0.2 (Society AI) and NEXUS. Each
 * dialect is one file that declares its methods (params schema, the 1.0 or 0.3 method it runs as, how its params
 * become that method's, how the answer is rendered back), how a request is recognised as its own where a method
 * name is shared, and how it renders errors and stream events. The RPC core (../rpc-handler.ts) picks the dialect
 * of each request here and answers in it, errors included; adding a dialect is a new file and a line below.
 *
 * Internally every call is a call of a 1.0 method (or, for 0.3 clients, of the 0.3 method the SDK's compat layer
 * translates): the engine. Dialects without an SDK transport translate to 1.0 (src/a2a/wire.ts is its form).
 */
import type { z } from 'zod';
import type { A2AErrorName } from '../errors';
import type { Dialect, WireTask } from '../wire';
import { V1 } from './v1';
import { V03 } from './v03';
import { V01 } from './v01';
import { NEXUS } from './nexus';

/** Every dialect a client may speak. `Dialect` (1.0 | 0.3) is the engine a call runs on once translated. */
export type DialectName = '1.0' | '0.3' | '0.1' | 'nexus';

/** What a translated call asks of the handler beyond its params: never something a client can ask for itself. */
export interface CallIntent {
  /** A new task takes this id (a 0.1/NEXUS client-chosen task id) instead of a minted one. */
  taskId?: string;
  /** Recorded with a new task (task_dialects): the dialect later calls on it are answered in, and client metadata. */
  record?: { dialect: DialectName; metadata?: Record<string, unknown> };
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
  translate?(params: any, ctx: DialectContext): InternalCall | Promise<InternalCall>;
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

/** In order of precedence: where a method name is shared and neither shape nor task decides, the first wins. */
export const DIALECTS: readonly DialectDef[] = [V1, V03, V01, NEXUS];

/** Every JSON-RPC method the A2A endpoints answer, in every dialect (for the role × method test). */
export const RPC_METHODS: readonly string[] = [...new Set(DIALECTS.flatMap((d) => Object.keys(d.methods)))];

const ENGINE_1_0 = new Set(Object.keys(V1.methods));
const ENGINE_0_3 = new Set(Object.keys(V03.methods));

/** The engine (SDK transport, push-config format) of an internal method. */
export function engineOf(method: string): Dialect {
  if (ENGINE_1_0.has(method)) return '1.0';
  if (ENGINE_0_3.has(method)) return '0.3';
  throw new Error(`${method} is not a 1.0 or 0.3 method`);
}

/** The engine's own definition of an internal method (to validate a translation's output against). */
export function engineMethod(method: string): MethodSpec | undefined {
  return (engineOf(method) === '1.0' ? V1 : V03).methods[method];
}

/** The task id a task-addressed call names (`id`, or the coding-agent seed's `taskId`). */
export function taskIdOf(params: unknown): string | undefined {
  const p = params as { id?: unknown; taskId?: unknown } | undefined;
  const id = p?.id ?? p?.taskId;
  return typeof id === 'string' && id !== '' ? id : undefined;
}

/**
 * The dialect of a request: the only one with the method; else the one whose shape it has (NEXUS `{type, data}`
 * parts); else the one the named task was started in (0.1 `tasks/get` reads exactly like 0.3's); else the first.
 * @returns undefined for a method no dialect has (-32601).
 */
export async function pickDialect(method: string, params: unknown, recorded: (taskId: string) => Promise<DialectName | undefined>): Promise<DialectDef | undefined> {
  const candidates = DIALECTS.filter((d) => Object.hasOwn(d.methods, method));
  if (candidates.length <= 1) return candidates[0];
  const claimed = candidates.find((d) => d.claims?.(method, params));
  if (claimed) return claimed;
  const taskId = candidates.some((d) => d.byTask) ? taskIdOf(params) : undefined;
  if (taskId) {
    const name = await recorded(taskId);
    const started = candidates.find((d) => d.byTask && d.name === name);
    if (started) return started;
  }
  return candidates[0];
}
