/**
 * An operator's two actions on its tenant's tasks (issue 41, the console): cancel a task, and answer one that waits
 * for input as its client would. Both run through the RPC core like a client's call (the same checks, the same
 * workflow update, the tenant's account pays for the turn), with two differences: an operator's message must
 * continue a task (operators never start one), and each action is written to the audit trail (`task.cancel`,
 * `task.answer`), like every other operator mutation.
 */
import type { Pool } from 'pg';
import { type Caller, OPERATOR_ACTIONS } from '../../core/auth/caller';
import { writeAudit } from '../../core/auth/audit';
import { ERRORS } from '../../../task/errors';
import { errorNameOf } from './error-forms';

const SENDS = new Set(['SendMessage', 'message/send']);

/** True for an operator's call of one of its actions (the engine's method, after the dialect's translation). */
export function isOperatorAction(caller: Caller, method: string): boolean {
  return caller.role === 'operator' && OPERATOR_ACTIONS.has(method);
}

/**
 * Why an operator's action may not run, or undefined: a message that starts a task, one without a taskId or with the
 * id of no task of the tenant (0.1 clients name a new task's id themselves, so an id alone proves nothing).
 */
export async function operatorRefusal(caller: Caller, method: string, params: unknown, taskExists: (taskId: string) => Promise<boolean>): Promise<string | undefined> {
  if (!isOperatorAction(caller, method) || !SENDS.has(method)) return undefined;
  // Read from the params as sent (before they are validated), so that the refusal does not depend on their shape:
  // the task's id in 1.0 and 0.3 (either spelling), the task's own id in 0.1 (`tasks/send {id}`).
  const p = params as { id?: unknown; message?: { taskId?: unknown; task_id?: unknown } } | undefined;
  const taskId = p?.message?.taskId ?? p?.message?.task_id ?? p?.id;
  if (typeof taskId === 'string' && taskId !== '' && (await taskExists(taskId))) return undefined;
  return `${method} of a new task needs the role admin or client or agent; this key's role is operator, which may answer a task of its tenant (message.taskId) but not start one`;
}

/**
 * The audit entry of an operator's action: what, which task, and the HTTP status its answer stands for (200, or
 * the status of the error it met, e.g. 409 for a task that can no longer be canceled). Never fails the call.
 */
export async function auditOperatorAction(pool: Pool, caller: Caller, call: { method: string; params: unknown; requestId?: string | number | null }, errorCode?: number): Promise<void> {
  const p = call.params as { id?: unknown; message?: { taskId?: unknown } } | undefined;
  const target = SENDS.has(call.method) ? p?.message?.taskId : p?.id;
  const name = errorCode === undefined ? undefined : errorNameOf(errorCode);
  await writeAudit(pool, {
    tenant: caller.tenant,
    actor: caller.keyId,
    role: caller.role,
    action: SENDS.has(call.method) ? 'task.answer' : 'task.cancel',
    target: typeof target === 'string' ? target : undefined,
    status: errorCode === undefined ? 200 : name ? ERRORS[name].http : 502,
    requestId: String(call.requestId ?? ''),
  }).catch(() => undefined);
}
