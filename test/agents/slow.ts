// Slow agent: works for `ms` (default 60s) then completes; cancelTask ends it promptly as canceled.
// A blocking SendMessage stays open for the whole time (the SDK answers only at a terminal state).
import type express from 'express';
import { TaskState } from '@a2a-js/sdk';
import type { ExecutionEventBus, RequestContext } from '@a2a-js/sdk/server';
import { RPC_PATH } from './harness';
import { BaseExecutor, startV1Agent, taskEvent, textOf, type AgentOptions } from './v1';

export class SlowExecutor extends BaseExecutor {
  private readonly wakers = new Map<string, () => void>();
  constructor(private readonly ms: number, cost?: number) {
    super(cost);
  }

  async run(ctx: RequestContext, bus: ExecutionEventBus): Promise<void> {
    bus.publish(taskEvent(ctx, TaskState.TASK_STATE_WORKING));
    const finished = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(true), this.ms);
      this.wakers.set(ctx.taskId, () => (clearTimeout(timer), resolve(false)));
    });
    this.wakers.delete(ctx.taskId);
    if (finished) this.complete(ctx, bus, `done: ${textOf(ctx.userMessage)}`);
  }

  override async cancelTask(taskId: string, bus: ExecutionEventBus): Promise<void> {
    await super.cancelTask(taskId, bus); // publishes CANCELED
    this.wakers.get(taskId)?.(); // ...and run() returns without completing
  }

  /** Called on close(): stop all timers so the process can exit. */
  stop(): void {
    for (const wake of this.wakers.values()) wake();
  }
}

export function startSlowAgent(opts: AgentOptions & { ms?: number } = {}) {
  return startV1Agent(new SlowExecutor(opts.ms ?? 60_000, opts.cost), 'Slow', 'Works for a long time; cancelable', opts);
}

/** A slow agent that counts the tasks it was asked to run (every execute() is one run at the agent). */
export class CountingSlowExecutor extends SlowExecutor {
  runs = 0;
  override async execute(ctx: RequestContext, bus: ExecutionEventBus): Promise<void> {
    this.runs++;
    await super.execute(ctx, bus);
  }
}

/** Makes an agent ignore non-blocking sends (startV1Agent's `before`): the flag is dropped before its SDK handler reads the request. */
export const ignoresNonBlocking = (app: express.Express) =>
  app.post(RPC_PATH, (req, _res, next) => {
    delete req.body?.params?.configuration?.returnImmediately;
    next();
  });
