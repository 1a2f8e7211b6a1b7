// Asking agent: a new task stops at input-required ("What is your name?"); a follow-up on the same task
// (message.taskId set) completes it with the artifact "Hello, <answer>!".
import { TaskState } from '@a2a-js/sdk';
import type { ExecutionEventBus, RequestContext } from '@a2a-js/sdk/server';
import { BaseExecutor, startV1Agent, statusEvent, taskEvent, textOf, type AgentOptions } from './v1';

class AskingExecutor extends BaseExecutor {
  async run(ctx: RequestContext, bus: ExecutionEventBus): Promise<void> {
    bus.publish(taskEvent(ctx, TaskState.TASK_STATE_WORKING)); // follow-ups must start with a task event too
    if (!ctx.task) {
      bus.publish(statusEvent(ctx.taskId, ctx.contextId, TaskState.TASK_STATE_INPUT_REQUIRED, { text: 'What is your name?' }));
      return;
    }
    this.complete(ctx, bus, `Hello, ${textOf(ctx.userMessage)}!`);
  }
}

export function startAskingAgent(opts: AgentOptions = {}) {
  return startV1Agent(new AskingExecutor(opts.cost), 'Asker', 'Asks for your name, then greets you', opts);
}
