// Delegating agent: for each message it starts a task on another agent *through Switchboard*, naming the
// Switchboard task it works for (the metadata and header Switchboard sent it), waits for that task and
// completes with its answer; a failed or refused delegation fails this task with the reason. Canceling this
// agent's task aborts the call it is waiting on.
import { randomUUID } from 'node:crypto';
import { SendMessageRequest, TaskState } from '@a2a-js/sdk';
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import type { ExecutionEventBus, RequestContext } from '@a2a-js/sdk/server';
import { BaseExecutor, startV1Agent, statusEvent, taskEvent, textOf, type AgentOptions } from './v1';

export interface DelegatorOptions extends AgentOptions {
  /** Switchboard's base URL and the id there of the agent to delegate to (known once both are registered). */
  /** Where to delegate: the gateway, the agent to call there, and this agent's own agent key (role agent). */
  gateway: () => { url: string; agentId: string; key: string };
  name?: string;
  /**
   * Keep asking (the same messageId, which Switchboard takes for the same message) when the call to Switchboard
   * breaks, for up to this many ms: an agent that lives through Switchboard's restarts (npm run faults' rolling drill).
   */
  retryForMs?: number;
}

class DelegatingExecutor extends BaseExecutor {
  private readonly calls = new Map<string, AbortController>();
  constructor(private readonly o: DelegatorOptions) {
    super(o.cost);
  }

  async run(ctx: RequestContext, bus: ExecutionEventBus): Promise<void> {
    bus.publish(taskEvent(ctx, TaskState.TASK_STATE_WORKING));
    // The task Switchboard runs this turn for: the parent of the task it starts.
    const parentTaskId = (ctx.userMessage.metadata as { switchboard?: { taskId?: string } } | undefined)?.switchboard?.taskId ?? '';
    const { url, agentId, key } = this.o.gateway();
    const withParent: typeof fetch = (input, init) => {
      const headers = new Headers(init?.headers);
      headers.set('authorization', `Bearer ${key}`);
      if (parentTaskId) headers.set('x-switchboard-parent-task', parentTaskId);
      return fetch(input, { ...init, headers });
    };
    const abort = new AbortController();
    this.calls.set(ctx.taskId, abort);
    try {
      const client = await new ClientFactory(
        ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { transports: [new JsonRpcTransportFactory({ fetchImpl: withParent })] }),
      ).createFromUrl(`${url}/agents/${agentId}/.well-known/agent-card.json`, '');
      const request = SendMessageRequest.fromJSON({
        message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: `${this.o.name ?? 'delegator'} asks: ${textOf(ctx.userMessage)}` }], metadata: { switchboard: { parentTaskId } } },
      });
      const until = Date.now() + (this.o.retryForMs ?? 0);
      let reply: Awaited<ReturnType<typeof client.sendMessage>>;
      for (;;) {
        try {
          reply = await client.sendMessage(request, { signal: abort.signal });
          break;
        } catch (err) {
          if (abort.signal.aborted || Date.now() > until) throw err;
          await new Promise((r) => setTimeout(r, 500));
        }
      }
      if (abort.signal.aborted) return;
      const child = 'status' in reply ? reply : undefined;
      const answer = child?.artifacts.flatMap((a) => a.parts).map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('') ?? '';
      if (child && child.status?.state !== TaskState.TASK_STATE_COMPLETED) {
        bus.publish(statusEvent(ctx.taskId, ctx.contextId, TaskState.TASK_STATE_FAILED, { text: `the delegated task ended ${child.status?.state}: ${textOf(child.status?.message)}` }));
        return;
      }
      this.complete(ctx, bus, answer);
    } catch (err) {
      if (abort.signal.aborted) return;
      bus.publish(statusEvent(ctx.taskId, ctx.contextId, TaskState.TASK_STATE_FAILED, { text: `delegation refused: ${(err as Error).message}` }));
    } finally {
      this.calls.delete(ctx.taskId);
    }
  }

  override async cancelTask(taskId: string, bus: ExecutionEventBus): Promise<void> {
    this.calls.get(taskId)?.abort();
    await super.cancelTask(taskId, bus);
  }

  stop(): void {
    for (const a of this.calls.values()) a.abort();
  }
}

export function startDelegatorAgent(o: DelegatorOptions) {
  return startV1Agent(new DelegatingExecutor(o), o.name ?? 'Delegator', 'Hands each request to another agent through Switchboard', { streaming: false, ...o });
}
