/**
 * The one table of the JSON-RPC dialects Switchboard answers: A2A 1.0, 0.3, 0.1/0.2 (Society AI) and NEXUS. Each
 * dialect is one file that declares its methods (params schema, the 1.0 or 0.3 method it runs as, how its params
 * become that method's, how the answer is rendered back), how a request is recognised as its own where a method
 * name is shared, and how it renders errors and stream events. The RPC core (../rpc-handler.ts) picks the dialect
 * of each request here and answers in it, errors included; adding a dialect is a new file and a line below.
 *
 * Internally every call is a call of a 1.0 method (or, for 0.3 clients, of the 0.3 method the SDK's compat layer
 * translates): the engine. Dialects without an SDK transport translate to 1.0 (task/wire.ts is its form).
 */
import type { Dialect } from '../../../../task/wire';
import type { DialectDef, DialectName, MethodSpec } from './dialect';
import { V1 } from './v1';
import { V03 } from './v03';
import { V01 } from './v01';
import { NEXUS } from './nexus';

export * from './dialect';

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
