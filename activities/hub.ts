/**
 * Forwarding a turn to an agent connected to the WebSocket hub (ws-agent:// URLs). Two steps, because the
 * agent's socket lives in one Switchboard process (see workflows/hub.ts):
 *  - hubQueueOf (any worker): the task queue of the process holding the agent's socket, waiting for the agent
 *    to connect if it is not;
 *  - hubForward (only that process's hub worker polls the queue): sends the turn over the socket and waits for
 *    its outcome (task.complete, a final task.status, or the answer to the turn's request).
 * The turn's progress is kept in PostgreSQL (hub_turns): an attempt after a disconnect, a retry or a dead process
 * never sends a turn the agent acknowledged again, and finds an outcome another process received.
 */
import { ApplicationFailure, Context, heartbeat } from '@temporalio/activity';
import type { Pool } from 'pg';
import type { HubLink } from '../src/core/hub/turns';
import { messageToHub } from '../src/core/hub/frames';
import { type TurnKey, turnKeyText } from '../src/core/hub/turns';
import type { ForwardResult } from '../task/contracts';
import type { ForwardArgs } from './forward-message';

export interface HubQueueArgs {
  tenant: string;
  agentId: string;
  /** How long to wait for the agent to connect (the forwarding attempt's timeout). */
  waitMs: number;
}

/** How often hubQueueOf looks for the agent's connection while it is not connected. */
const LOOK_MS = 500;
/**
 * How often a waiting turn looks in PostgreSQL for an outcome another process received (the agent reconnected
 * elsewhere mid-turn). An outcome received in this process wakes it at once, so this is only the rare case's delay.
 */
const POLL_MS = 2000;

export async function hubQueueOf(pool: Pool, args: HubQueueArgs): Promise<string> {
  const ctx = Context.current();
  const deadline = Date.now() + args.waitMs;
  for (;;) {
    const { rows } = await pool.query<{ task_queue: string }>('SELECT task_queue FROM hub_connections WHERE tenant = $1 AND agent_id = $2 AND expires_at > now()', [args.tenant, args.agentId]);
    if (rows[0]) return rows[0].task_queue;
    if (Date.now() >= deadline) {
      throw ApplicationFailure.retryable(`the agent ${args.agentId} has not connected to the hub (GET /hub) for ${Math.round(args.waitMs / 1000)} s`, 'AgentUnavailable');
    }
    heartbeat();
    await Promise.race([new Promise((r) => setTimeout(r, LOOK_MS)), ctx.cancelled]);
  }
}

/** The frame that carries a turn: 0.1/0.2 tasks/send (the gateway's task id), or 0.3 message/send. */
export function turnFrame(method: 'tasks/send' | 'message/send', args: ForwardArgs): Record<string, unknown> {
  // The request's metadata (args.metadata) and the message's, as the seed's hub agents read them: `params.metadata`.
  const metadata = { ...args.metadata, ...args.message.metadata, switchboard: { ...(args.message.metadata?.switchboard as object), parentTaskId: args.gatewayTaskId } };
  const message = messageToHub(args.message);
  if (method === 'tasks/send') {
    return { id: args.message.messageId, method, params: { id: args.gatewayTaskId, sessionId: args.gatewayContextId, message, metadata } };
  }
  const parts = message.parts.map(({ type, ...rest }) => ({ kind: type, ...rest }));
  return {
    id: args.message.messageId,
    method,
    params: { message: { kind: 'message', ...message, parts, taskId: args.gatewayTaskId, contextId: args.gatewayContextId }, metadata },
  };
}

export async function hubForward(hub: HubLink, args: ForwardArgs): Promise<ForwardResult> {
  const ctx = Context.current();
  const agentId = args.agentId ?? '';
  const key: TurnKey = { tenant: args.tenant, taskId: args.gatewayTaskId, messageId: args.message.messageId };
  const text = turnKeyText(key);
  const beat = setInterval(() => heartbeat(), 1_000);
  heartbeat();
  let sentOn: { closed: boolean } | undefined;
  try {
    for (let turn = await hub.turns.open(key, agentId, args.gatewayContextId); ; turn = (await hub.turns.get(key))!) {
      if (turn.state === 'done') return resultOf(turn.result!);
      // The workflow tells the agent (tasks/cancel) once the call has stopped, as for a cancel between turns.
      if (ctx.cancellationSignal.aborted) await ctx.cancelled;
      // Not acknowledged yet: this attempt sends it (again, with the same request id and messageId) over the socket here.
      if ((turn.state === 'pending' || turn.state === 'sent') && !sentOn) {
        const c = hub.connection(args.tenant, agentId);
        if (!c) throw ApplicationFailure.retryable('the agent is not connected to this Switchboard process (it moved or disconnected)', 'AgentUnavailable');
        await hub.turns.advance(key, 'sent');
        await c.sendTurn(turnFrame(c.turnMethod, args), args.gatewayTaskId);
        sentOn = c;
      }
      // A socket that closed before the agent acknowledged the turn: look for the agent again (it may reconnect elsewhere).
      if (turn.state === 'sent' && sentOn?.closed) throw ApplicationFailure.retryable('the agent disconnected before it acknowledged the turn', 'AgentUnavailable');
      await hub.waitForWake(text, POLL_MS, ctx.cancellationSignal);
    }
  } catch (err) {
    if (ctx.cancellationSignal.aborted && !(err instanceof ApplicationFailure && err.type === 'AgentRejected')) await ctx.cancelled;
    throw err;
  } finally {
    clearInterval(beat);
  }
}

/**
 * Sends tasks/cancel over the agent's socket in this process, unless the agent was told already (it reconnected
 * meanwhile, and the hub told it: src/api/hub/hub.ts tellCancels).
 */
export async function hubCancel(hub: HubLink, args: { tenant: string; agentId: string; taskId: string }): Promise<void> {
  const c = hub.connection(args.tenant, args.agentId);
  if (!c) throw ApplicationFailure.retryable('the agent is not connected to this Switchboard process', 'AgentUnavailable');
  if (!(await hub.turns.claimCancelOf(args.tenant, args.taskId))) return;
  // A socket that dies under the write: the agent is told when it connects again (the claim is given back).
  await hub.tellCancel(c, args.taskId).catch((err: unknown) => {
    throw ApplicationFailure.retryable(`the agent's socket failed while it was told of the cancel (${(err as Error).message}); it is told when it reconnects`, 'AgentUnavailable');
  });
}

function resultOf(r: { outcome: ForwardResult } | { error: { code: number; message: string } }): ForwardResult {
  // Kept whole in the details, as for HTTP agents (activities/forwarding/classify.ts): the client of a blocking send gets it.
  if ('error' in r) {
    const { code, message } = r.error;
    throw ApplicationFailure.create({ message: `the agent answered with an error: ${message} (JSON-RPC ${code})`, type: 'AgentRejected', nonRetryable: true, details: [{ agentError: { code, message } }] });
  }
  return r.outcome;
}
