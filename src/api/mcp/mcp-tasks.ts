/**
 * MCP tasks (protocol 2025-11-25, the SDK's `tasks` capability) over A2A tasks: a task-augmented tools/call starts
 * the A2A task without waiting and answers its id as the MCP task's; tasks/get, tasks/result and tasks/cancel read,
 * wait for and cancel it through the RPC core, like every other call. The task lives in Temporal, not in the
 * session: any session of the tenant (after a restart too) reaches it by its id.
 */
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CancelTaskRequestSchema, GetTaskPayloadRequestSchema, GetTaskRequestSchema, RELATED_TASK_META_KEY, type Task } from '@modelcontextprotocol/sdk/types.js';
import type { TaskState, WirePart, WireTask } from '../../../task/wire';
import type { CallContext, Extra, McpCalls } from './calls';

/** What the task methods need of their session: the call context of a request (its caller, base, closing). */
export type ContextOf = (extra: Extra, tool: string) => CallContext;

/** The MCP task status of an A2A state. */
export function mcpStatusOf(state: TaskState): Task['status'] {
  switch (state) {
    case 'TASK_STATE_COMPLETED':
      return 'completed';
    case 'TASK_STATE_FAILED':
    case 'TASK_STATE_REJECTED':
      return 'failed';
    case 'TASK_STATE_CANCELED':
      return 'cancelled';
    case 'TASK_STATE_INPUT_REQUIRED':
    case 'TASK_STATE_AUTH_REQUIRED':
      return 'input_required';
    default:
      return 'working';
  }
}

/** An A2A task as an MCP task: its id, status and status message; kept as long as Switchboard keeps the task. */
export function mcpTaskOf(task: WireTask): Task {
  const at = task.status.timestamp ?? new Date().toISOString();
  const message = (task.status.message?.parts ?? []).map((p: WirePart) => p.text ?? '').join('');
  return { taskId: task.id, status: mcpStatusOf(task.status.state), ...(message ? { statusMessage: message } : {}), createdAt: at, lastUpdatedAt: at, ttl: null, pollInterval: 1_000 };
}

/** Serves tasks/get, tasks/result and tasks/cancel on a session's server. */
export function serveTasks(server: Server, calls: McpCalls, contextOf: ContextOf): void {
  server.setRequestHandler(GetTaskRequestSchema, async (req, extra) => mcpTaskOf(await calls.taskOf(contextOf(extra, ''), req.params.taskId)));
  server.setRequestHandler(GetTaskPayloadRequestSchema, async (req, extra) => {
    const result = await calls.resultOfTask(contextOf(extra, ''), req.params.taskId);
    return { ...result, _meta: { ...result._meta, [RELATED_TASK_META_KEY]: { taskId: req.params.taskId } } };
  });
  server.setRequestHandler(CancelTaskRequestSchema, async (req, extra) => mcpTaskOf(await calls.cancelTask(contextOf(extra, ''), req.params.taskId)));
}
