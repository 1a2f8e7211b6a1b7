/**
 * A2A 0.2/0.3: namespace/verb methods, `kind` discriminators. @a2a-js/sdk's compat layer runs these calls; this
 * file adds what the coding-agent seed (004) sends: `tasks/get`/`tasks/cancel` with `{taskId}` (a cancel of a
 * finished task then a no-op, as its server has it), and a message
 * without a taskId that resumes the one task of its context waiting for input.
 */
import { z } from 'zod';
import { PUSH_METHOD_PARAMS } from '../../../core/push/params';
import { a2aError } from '../errors';
import { legacyError } from '../rpc-errors';
import * as S from '../schemas';
import type { DialectContext, DialectDef, InternalCall } from './dialect';
import { NO_EXTENDED_CARD, asIs } from './v1';
import { isTerminal } from '../../../../task/rules';

/**
 * A call naming one task: `{id}` as the spec has it, or `{taskId}` as the coding-agent seed spells it (one of them,
 * or both naming the same task), with tasks/get's `historyLength`.
 */
export const TaskRefParams = z
  .object({
    id: z.string().min(1).max(1024).optional(),
    taskId: z.string().min(1).max(1024).optional(),
    historyLength: z.number().int().min(0).max(10_000).optional(),
    metadata: z.record(z.string(), z.unknown()).optional(),
  })
  .refine((p) => p.id !== undefined || p.taskId !== undefined, { message: 'name the task: id (or taskId)', path: ['id'] })
  .refine((p) => p.id === undefined || p.taskId === undefined || p.id === p.taskId, { message: 'id and taskId name different tasks', path: ['taskId'] });
export type TaskRef = z.infer<typeof TaskRefParams>;

/** The spec's `{id}` form of a call that may name its task `taskId`. */
export function withId(p: TaskRef): Omit<TaskRef, 'taskId'> & { id: string } {
  const { taskId, ...rest } = p;
  return { ...rest, id: (p.id ?? taskId)! };
}

type LegacySend = z.infer<typeof S.LegacySendParams>;

/**
 * Coding-agent resume (seed 004: "message/send (with answer)" carrying only the same contextId): a message without
 * a taskId, in a context where exactly one task waits for input, continues that task. With several, which one is
 * meant cannot be told: -32602 naming them. With none, it starts a new task as usual.
 */
export async function resumeByContext(method: string, p: LegacySend, ctx: DialectContext): Promise<InternalCall> {
  const { contextId, taskId } = p.message;
  if (taskId || !contextId) return { method, params: p };
  const waiting = await ctx.waitingInContext(contextId);
  if (waiting.length === 1) return { method, params: { ...p, message: { ...p.message, taskId: waiting[0] } } };
  if (waiting.length > 1) {
    const field = 'message.taskId';
    throw a2aError('InvalidParams', `contextId ${contextId} has ${waiting.length} tasks waiting for input (${waiting.join(', ')}); name one in message.taskId`, [
      { field, description: `one of ${waiting.join(', ')}` },
    ]);
  }
  return { method, params: p };
}

/**
 * tasks/cancel. Spelled `{taskId}` (seed 004's coding agent, whose server treats a cancel of a finished task as a
 * no-op), a finished task is answered as it is; spelled `{id}` (the spec), it is TaskNotCancelable (-32002).
 */
async function cancel03(p: TaskRef, ctx: DialectContext): Promise<InternalCall> {
  const { id } = withId(p);
  if (p.id === undefined) {
    const task = await ctx.task(id);
    if (task && isTerminal(task.status.state)) return { method: 'tasks/get', params: { id } };
  }
  return { method: 'tasks/cancel', params: { id, ...(p.metadata && { metadata: p.metadata }) } };
}

export const V03: DialectDef = {
  name: '0.3',
  methods: {
    'message/send': { params: S.LegacySendParams, runs: 'message/send', translate: (p: LegacySend, ctx) => resumeByContext('message/send', p, ctx) },
    'message/stream': { params: S.LegacySendParams, runs: 'message/stream', translate: (p: LegacySend, ctx) => resumeByContext('message/stream', p, ctx) },
    'tasks/get': { params: TaskRefParams, runs: 'tasks/get', translate: (p: TaskRef) => ({ method: 'tasks/get', params: withId(p) }) },
    'tasks/cancel': { params: TaskRefParams, runs: 'tasks/cancel', translate: cancel03 },
    ...asIs({ 'tasks/resubscribe': S.LegacyTaskIdParams, ...PUSH_METHOD_PARAMS['0.3'] }),
    'agent/getAuthenticatedExtendedCard': NO_EXTENDED_CARD,
  },
  renderError: legacyError,
  // The SDK's translation marks only terminal states `final`; a stream that closes at input-required says so too.
  streamRenderer: () => (result, closing) => {
    const r = result as { kind?: string; final?: boolean } | undefined;
    if (closing && r?.kind === 'status-update') r.final = true;
    return result;
  },
  errorsAsStream: new Set(['tasks/resubscribe']),
};
