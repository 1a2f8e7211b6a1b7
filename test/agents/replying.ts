// Replying agent: answers every message with a Message and makes no task (A2A §3.1.1, "a direct response message"):
// "reply: <text>" in the message's context, with `{cost}` in its metadata when given. With `inTask`, the message names
// the task id the SDK allotted to the exchange, as an agent answering inside a task of its own would.
import { AgentEvent, type ExecutionEventBus, type RequestContext } from '@a2a-js/sdk/server';
import { BaseExecutor, agentMessage, startV1Agent, textOf, type AgentOptions } from './v1';

class ReplyingExecutor extends BaseExecutor {
  constructor(
    cost: number | undefined,
    private readonly inTask: boolean,
  ) {
    super(cost);
  }

  async run(ctx: RequestContext, bus: ExecutionEventBus): Promise<void> {
    const reply = agentMessage(this.inTask ? ctx.taskId : '', ctx.contextId, `reply: ${textOf(ctx.userMessage)}`);
    bus.publish(AgentEvent.message({ ...reply, metadata: this.costMetadata() }));
    bus.finished();
  }
}

export function startReplyingAgent(opts: AgentOptions & { inTask?: boolean } = {}) {
  return startV1Agent(new ReplyingExecutor(opts.cost, opts.inTask ?? false), 'Replier', 'Answers each message with a message, no task', opts);
}
