// Chunky agent: streams one artifact in `chunks` pieces ("c0 ", "c1 ", …; append after the first, lastChunk on
// the last), with a progress status update every `progressEvery` chunks, then completes. `delayMs` spaces the
// chunks. With `dropFirstAttemptAfter: k`, the first call for each messageId has its connection cut after k
// SSE events, as a crashing or unreachable agent would: the caller sees a broken stream and retries. `gate`
// holds each chunk until the test lets it go.
import { randomUUID } from 'node:crypto';
import { TaskState } from '@a2a-js/sdk';
import type { Task } from '@a2a-js/sdk';
import { AgentEvent, InMemoryTaskStore, type ExecutionEventBus, type RequestContext } from '@a2a-js/sdk/server';
import type express from 'express';
import { RPC_PATH } from './harness';
import { BaseExecutor, startV1Agent, statusEvent, taskEvent, textPart, type AgentOptions } from './v1';

export interface ChunkyOptions extends AgentOptions {
  chunks?: number;
  delayMs?: number;
  progressEvery?: number;
  dropFirstAttemptAfter?: number;
  /** Extra characters per chunk, to make a stream heavy. */
  pad?: number;
  /** Awaited before chunk `i` is sent: a test paces the stream itself (see test/console.test.ts). */
  gate?: (i: number) => Promise<void>;
}

export const chunkText = (i: number, pad = 0) => `c${i} ${'x'.repeat(pad)}`;
/** The artifact's whole text after `n` chunks. */
export const chunkedText = (n: number) => Array.from({ length: n }, (_, i) => chunkText(i)).join('');

class ChunkyExecutor extends BaseExecutor {
  private stopped = false;
  constructor(private readonly o: ChunkyOptions) {
    super(o.cost);
  }

  async run(ctx: RequestContext, bus: ExecutionEventBus): Promise<void> {
    bus.publish(taskEvent(ctx, TaskState.TASK_STATE_WORKING));
    const n = this.o.chunks ?? 100;
    const artifactId = randomUUID();
    for (let i = 0; i < n && !this.stopped; i++) {
      if (this.o.delayMs) await new Promise((r) => setTimeout(r, this.o.delayMs));
      if (this.o.gate) await this.o.gate(i);
      bus.publish(
        AgentEvent.artifactUpdate({
          taskId: ctx.taskId,
          contextId: ctx.contextId,
          artifact: { artifactId, name: 'stream', description: '', parts: [textPart(chunkText(i, this.o.pad))], metadata: undefined, extensions: [] },
          append: i > 0,
          lastChunk: i === n - 1,
          metadata: undefined,
        }),
      );
      if (this.o.progressEvery && (i + 1) % this.o.progressEvery === 0) {
        bus.publish(statusEvent(ctx.taskId, ctx.contextId, TaskState.TASK_STATE_WORKING, { text: `${i + 1} of ${n}` }));
      }
    }
    bus.publish(statusEvent(ctx.taskId, ctx.contextId, TaskState.TASK_STATE_COMPLETED, { metadata: this.costMetadata() }));
  }

  stop(): void {
    this.stopped = true;
  }
}

/**
 * The SDK's InMemoryTaskStore deep-copies the task on every save, once per streamed event: quadratic in the
 * number of chunks (10,000 chunks took 155 s). This store keeps the SDK's own object instead.
 */
class ByReferenceTaskStore extends InMemoryTaskStore {
  private readonly tasks = new Map<string, Task>();
  override async load(taskId: string): Promise<Task | undefined> {
    return this.tasks.get(taskId);
  }
  override async save(task: Task): Promise<void> {
    this.tasks.set(task.id, task);
  }
}

export function startChunkyAgent(o: ChunkyOptions = {}) {
  const executor = new ChunkyExecutor(o);
  const seen = new Set<string>();
  const before = (app: express.Express) => {
    if (o.dropFirstAttemptAfter !== undefined) {
      const limit = o.dropFirstAttemptAfter;
      app.post(RPC_PATH, (req, res, next) => {
        const messageId = (req.body as { params?: { message?: { messageId?: string } } })?.params?.message?.messageId;
        if (!messageId || seen.has(messageId)) return next();
        seen.add(messageId);
        let events = 0;
        const write = res.write.bind(res) as (chunk: unknown, ...rest: unknown[]) => boolean;
        res.write = ((chunk: unknown, ...rest: unknown[]) => {
          if (String(chunk).startsWith('data:') && ++events > limit) {
            // Let what was written reach the caller, then cut the connection mid-stream.
            if (events === limit + 1) setTimeout(() => res.socket?.destroy(), 50);
            return true;
          }
          return write(chunk, ...rest);
        }) as typeof res.write;
        const end = res.end.bind(res) as (...args: unknown[]) => typeof res;
        res.end = ((...args: unknown[]) => (events > limit ? res : end(...args))) as typeof res.end; // never finish cleanly
        next();
      });
    }
  };
  return startV1Agent(executor, 'Chunky', 'Streams a long artifact in chunks', { taskStore: new ByReferenceTaskStore(), ...o }, before);
}
