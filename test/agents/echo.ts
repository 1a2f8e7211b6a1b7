// Echo agent: every message creates a task, working -> completed, one artifact "echo: <text>".
import { TaskState } from '@a2a-js/sdk';
import type { ExecutionEventBus, RequestContext } from '@a2a-js/sdk/server';
import { BaseExecutor, startV1Agent, taskEvent, textOf, type AgentOptions } from './v1';

export class EchoExecutor extends BaseExecutor {
  async run(ctx: RequestContext, bus: ExecutionEventBus): Promise<void> {
    bus.publish(taskEvent(ctx, TaskState.TASK_STATE_WORKING));
    this.complete(ctx, bus, `echo: ${textOf(ctx.userMessage)}`);
  }
}

export function startEchoAgent(opts: AgentOptions = {}) {
  return startV1Agent(new EchoExecutor(opts.cost), 'Echo', 'Echoes the text of each message', opts);
}
