/**
 * An MCP `tools/call` as an A2A task (issue 43). Every call goes through the RPC core (src/api/a2a/rpc-handler.ts) as
 * the agent's own endpoint would answer it over JSON-RPC, SendStreamingMessage, GetTask, SubscribeToTask and
 * CancelTask in A2A 1.0: the same role checks, quotas, policies, fair admission, settlement and Temporal workflow as
 * any other binding. The stream's events are relayed as progress; the task's state at the end of the turn is the
 * result (src/api/mcp/tools.ts). A call waits at most `callWaitMs`: a longer task answers "still working" with its id,
 * and a call with that taskId waits on.
 */
import { randomUUID } from 'node:crypto';
import { ElicitResultSchema, ErrorCode, McpError, type CallToolResult, type ServerNotification, type ServerRequest } from '@modelcontextprotocol/sdk/types.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { StreamEvent, WireMessage, WirePart, WireTask } from '../../../task/wire';
import { isInterrupted, isTerminal } from '../../../task/rules';
import type { Pool } from 'pg';
import type { Caller } from '../../core/auth/caller';
import { taskOfMessage } from '../../core/db/task-store';
import type { A2AEndpoints } from '../a2a/endpoints';
import type { RpcAnswer, RpcRequest } from '../a2a/rpc-handler';
import { A2A_ERRORS } from '../a2a/errors';
import { type ToolArgs, resultOf, stateName, toolError } from './tools';

export type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

export interface CallSettings {
  /** How long one tools/call waits for its task's turn to end (and for an elicitation's answer) before it answers "still working". */
  callWaitMs: number;
}

/** Who calls, where, and how to reach their client: what one tools/call needs besides its arguments. */
export interface CallContext {
  caller: Caller;
  /** The tool's agent; unset for the MCP task methods, which reach any task of the tenant (the front door's). */
  agentId?: string;
  tool: string;
  /** The gateway's base URL as the client reaches it. */
  base: string;
  extra: Extra;
  /** Whether the client declared the elicitation capability (form mode) at initialize. */
  elicits: boolean;
  /**
   * Aborted when the session ends (Switchboard closes, the client deletes it, it expires): the call stops, its task
   * goes on. The SDK aborts `extra.signal` then too; only an abort while the session lasts is the client's cancel.
   */
  closing: AbortSignal;
}

/** An A2A error the core answered, as a tool error (the agent's refusal, a quota) or, for a protocol matter, a JSON-RPC error. */
class Refusal extends Error {
  constructor(readonly code: number, message: string) {
    super(message);
  }
}

export class McpCalls {
  constructor(
    private readonly endpoints: A2AEndpoints,
    private readonly pool: Pool,
    private readonly settings: CallSettings,
  ) {}

  /**
   * A task-augmented tools/call (MCP 2025-11-25 tasks): the message sent without waiting (SendMessage,
   * returnImmediately), the A2A task as it stands. Its id is the MCP task's.
   */
  async start(args: ToolArgs, ctx: CallContext): Promise<WireTask> {
    try {
      return await this.send(args, ctx);
    } catch (err) {
      // A task-augmented call answers a task or an error: a refusal (a quota, a policy, no such taskId) is the latter.
      if (err instanceof Refusal) throw new McpError(err.code === A2A_ERRORS.TaskNotFound.code ? ErrorCode.InvalidParams : ErrorCode.InvalidRequest, err.message, { a2aCode: err.code });
      throw err;
    }
  }

  private async send(args: ToolArgs, ctx: CallContext): Promise<WireTask> {
    const params = { message: messageOf(args, args.taskId ? await this.getTask(ctx, args.taskId) : undefined), configuration: { returnImmediately: true } };
    const answer = await this.core(ctx, 'SendMessage', params, AbortSignal.timeout(60_000));
    if (!('result' in answer)) throw failureOf(answer);
    const sent = answer.result as { task?: WireTask; message?: WireMessage };
    if (sent.task) return sent.task;
    const taskId = await taskOfMessage(this.pool, ctx.caller.tenant, params.message.messageId);
    if (!taskId) throw new Refusal(A2A_ERRORS.Internal.code, 'the agent answered no task');
    return this.getTask(ctx, taskId);
  }

  /** An MCP task's A2A task, or a JSON-RPC error when the tenant has no such task (tasks/get). */
  async taskOf(ctx: CallContext, taskId: string): Promise<WireTask> {
    try {
      return await this.getTask(ctx, taskId);
    } catch (err) {
      if (err instanceof Refusal) throw new McpError(ErrorCode.InvalidParams, `Task not found: ${taskId}`);
      throw err;
    }
  }

  /** tasks/result: the task's result once its turn ends (waiting up to callWaitMs), as a tool result. */
  async resultOfTask(ctx: CallContext, taskId: string): Promise<CallToolResult> {
    let task = await this.taskOf(ctx, taskId);
    if (!isTerminal(task.status.state) && !isInterrupted(task.status.state)) task = await this.turn(ctx, AbortSignal.timeout(this.settings.callWaitMs), undefined, taskId);
    return resultOf(task, ctx.tool, ctx.base);
  }

  /** tasks/cancel: CancelTask (the agent is told), then the task as it stands. */
  async cancelTask(ctx: CallContext, taskId: string): Promise<WireTask> {
    await this.taskOf(ctx, taskId);
    await this.cancel(ctx, taskId);
    return this.taskOf(ctx, taskId);
  }

  /** Runs one tools/call to its end of turn, or its deadline; A2A refusals come back as tool errors. */
  async call(args: ToolArgs, ctx: CallContext): Promise<CallToolResult> {
    const deadline = AbortSignal.timeout(this.settings.callWaitMs);
    try {
      return await this.run(args, ctx, deadline);
    } catch (err) {
      if (err instanceof Refusal) {
        if (err.code === A2A_ERRORS.TaskNotFound.code) throw new McpError(ErrorCode.InvalidParams, `${err.message} (taskId ${args.taskId ?? ''} is no task of ${ctx.tool})`);
        return toolError(err.message, { a2aCode: err.code });
      }
      throw err;
    }
  }

  private async run(args: ToolArgs, ctx: CallContext, deadline: AbortSignal): Promise<CallToolResult> {
    let task: WireTask;
    if (args.taskId) {
      task = await this.getTask(ctx, args.taskId);
      if (isTerminal(task.status.state)) return resultOf(task, ctx.tool, ctx.base);
      // A task still at work is waited for (its message, if any, is not sent: the agent asked for nothing); one that
      // waits for input gets the message as its answer, unless it is empty (a look at where the task stands).
      if (!isInterrupted(task.status.state)) task = await this.turn(ctx, deadline, undefined, task.id);
      else if (args.message !== '') task = await this.turn(ctx, deadline, messageOf(args, task));
    } else {
      task = await this.turn(ctx, deadline, messageOf(args));
    }
    // Input-required: asked of the client where it can answer (elicitation), each answer continuing the same task.
    while (ctx.elicits && isInterrupted(task.status.state) && task.status.state === 'TASK_STATE_INPUT_REQUIRED' && !deadline.aborted && !ctx.closing.aborted) {
      const answer = await this.elicit(ctx, task, deadline);
      if (answer === undefined) break;
      task = await this.turn(ctx, deadline, messageOf({ message: answer }, task));
    }
    return resultOf(task, ctx.tool, ctx.base);
  }

  /**
   * One turn of the task: a message sent (SendStreamingMessage), or an existing task followed (SubscribeToTask),
   * each event relayed as progress, until the turn ends (terminal or interrupted), the deadline passes or the client
   * cancels (then the A2A task is canceled: the agent is told). The task as it stands then.
   */
  private async turn(ctx: CallContext, deadline: AbortSignal, message: WireMessage | undefined, followId?: string): Promise<WireTask> {
    const leave = new AbortController();
    const signal = AbortSignal.any([leave.signal, deadline, ctx.extra.signal, ctx.closing]);
    const answer = message
      ? await this.core(ctx, 'SendStreamingMessage', { message }, signal)
      : await this.core(ctx, 'SubscribeToTask', { id: followId }, signal);
    if (!('stream' in answer)) {
      const failed = failureOf(answer);
      // A task that ended between the read and the subscription: it is read once more below.
      if (followId && failed.code === A2A_ERRORS.UnsupportedOperation.code) return this.getTask(ctx, followId);
      throw failed;
    }
    let taskId = followId ?? message?.taskId;
    let direct: WireMessage | undefined;
    const progress = new Progress(ctx.extra);
    const events = answer.stream;
    const stop = aborted(signal);
    try {
      for (;;) {
        const next = await Promise.race([events.next(), stop]);
        if (next === 'aborted' || next.done) break;
        const data = next.value.data;
        if ('error' in data) throw new Refusal(data.error.code, data.error.message);
        const event = data.result as StreamEvent | { message: WireMessage };
        if ('message' in event) direct = event.message;
        taskId ??= idOf(event);
        await progress.relay(event, taskId);
        if (endsTurn(event)) break;
      }
    } finally {
      leave.abort();
      void events.return?.(undefined)?.catch(() => undefined);
    }
    if (ctx.extra.signal.aborted && !ctx.closing.aborted && taskId) {
      await this.cancel(ctx, taskId);
      throw new McpError(ErrorCode.RequestTimeout, 'canceled by the client'); // never sent: a canceled request gets no answer
    }
    // An agent that answered with a Message made no task of its own; Switchboard keeps one of the exchange all the
    // same (its id is not in the Message a 1.0 client is given), found by the message that started it.
    if (!taskId && message && direct) taskId = await taskOfMessage(this.pool, ctx.caller.tenant, message.messageId);
    if (!taskId) {
      if (direct) return { id: direct.taskId ?? '', contextId: direct.contextId ?? '', status: { state: 'TASK_STATE_COMPLETED', message: direct } };
      throw new Refusal(A2A_ERRORS.Internal.code, 'the agent answered no task');
    }
    return this.getTask(ctx, taskId);
  }

  /** Asks the client for the agent's question (elicitation/create, on the call's own stream); its answer, or undefined. */
  private async elicit(ctx: CallContext, task: WireTask, deadline: AbortSignal): Promise<string | undefined> {
    const question = textOf(task.status.message?.parts) || 'The agent needs more input to continue.';
    try {
      const reply = await ctx.extra.sendRequest(
        {
          method: 'elicitation/create',
          params: {
            message: question,
            requestedSchema: { type: 'object', properties: { answer: { type: 'string', title: 'Answer', description: question } }, required: ['answer'] },
          },
        },
        ElicitResultSchema,
        { signal: AbortSignal.any([deadline, ctx.closing]), timeout: this.settings.callWaitMs },
      );
      const answer = reply.action === 'accept' ? reply.content?.answer : undefined;
      return typeof answer === 'string' ? answer : undefined;
    } catch {
      // No answer in time, or the client cannot elicit after all: the task keeps waiting, and the result says so.
      return undefined;
    }
  }

  private async getTask(ctx: CallContext, id: string): Promise<WireTask> {
    const answer = await this.core(ctx, 'GetTask', { id }, AbortSignal.timeout(30_000));
    if ('result' in answer) return answer.result as WireTask;
    throw failureOf(answer);
  }

  /** CancelTask, as the client's notifications/cancelled asks: the workflow cancels the task at its agent. */
  private async cancel(ctx: CallContext, id: string): Promise<void> {
    await this.core(ctx, 'CancelTask', { id }, AbortSignal.timeout(30_000)).catch(() => undefined);
  }

  private core(ctx: CallContext, method: string, params: unknown, signal: AbortSignal): Promise<RpcAnswer> {
    const headers = ctx.extra.requestInfo?.headers ?? {};
    const req: RpcRequest = {
      method,
      params,
      caller: ctx.caller,
      // Only the parent-task header is read from these (an agent key starting work for a task it runs).
      headers: { 'x-switchboard-parent-task': headers['x-switchboard-parent-task'] },
      version: '1.0',
      base: ctx.base,
      signal,
      agentId: ctx.agentId,
      requestId: String(ctx.extra.requestId),
    };
    return this.endpoints.answer(req, ctx.agentId);
  }
}

/** A new user message, or the answer to a task waiting for input (its task and context named). */
function messageOf(args: ToolArgs, task?: WireTask): WireMessage {
  return {
    messageId: randomUUID(),
    role: 'ROLE_USER',
    parts: [{ text: args.message }],
    ...(task ? { taskId: task.id, contextId: task.contextId } : args.contextId ? { contextId: args.contextId } : {}),
    ...(args.skill ? { metadata: { skillId: args.skill } } : {}),
  };
}

function failureOf(answer: RpcAnswer): Refusal {
  if ('error' in answer) return new Refusal(answer.error.code, answer.error.message);
  return new Refusal(A2A_ERRORS.Internal.code, 'unexpected answer from the A2A core');
}

const idOf = (e: StreamEvent | { message: WireMessage }): string | undefined =>
  'task' in e ? e.task.id : 'statusUpdate' in e ? e.statusUpdate.taskId : 'artifactUpdate' in e ? e.artifactUpdate.taskId : e.message.taskId;

function endsTurn(e: StreamEvent | { message: WireMessage }): boolean {
  const state = 'task' in e ? e.task.status.state : 'statusUpdate' in e ? e.statusUpdate.status.state : undefined;
  return 'message' in e || (state !== undefined && (isTerminal(state) || isInterrupted(state)));
}

const textOf = (parts: WirePart[] = []): string => parts.map((p) => p.text ?? '').join('');

function aborted(signal: AbortSignal): Promise<'aborted'> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve('aborted');
    else signal.addEventListener('abort', () => resolve('aborted'), { once: true });
  });
}

/** notifications/progress for a call whose client sent a progress token: one per A2A event, counting up. */
class Progress {
  private n = 0;
  private readonly token: string | number | undefined;

  constructor(private readonly extra: Extra) {
    this.token = extra._meta?.progressToken;
  }

  /** Relays one event; its `_meta.taskId` lets a client that loses the call continue the task by its id. */
  async relay(e: StreamEvent | { message: WireMessage }, taskId: string | undefined): Promise<void> {
    if (this.token === undefined) return;
    const message =
      'statusUpdate' in e
        ? textOf(e.statusUpdate.status.message?.parts) || stateName(e.statusUpdate.status.state)
        : 'artifactUpdate' in e
          ? textOf(e.artifactUpdate.artifact.parts) || `artifact ${e.artifactUpdate.artifact.name ?? e.artifactUpdate.artifact.artifactId}`
          : 'task' in e
            ? stateName(e.task.status.state)
            : textOf(e.message.parts);
    this.n++;
    await this.extra.sendNotification({ method: 'notifications/progress', params: { progressToken: this.token, progress: this.n, message, ...(taskId ? { _meta: { taskId } } : {}) } }).catch(() => undefined);
  }
}
