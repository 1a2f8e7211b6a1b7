/**
 * Whether any worker polls a task queue, from Temporal's own description of it (DescribeTaskQueue): the pollers of
 * its workflow tasks and when each last polled. An api process runs no worker of its own, so this is how its
 * /readyz knows that a task sent to it would run, and how a blocking send knows that it waits for no one.
 */
import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';

/**
 * A poller counts while it polled within this long. A worker's poll is a long poll that the server answers empty
 * after a minute when there is no work, and Temporal records when a poll begins: an idle, healthy worker's last
 * poll is up to a minute old (measured: its age climbs to ~60 s, then starts again), so a minute and some slack.
 */
export const POLLER_FRESH_MS = 70_000;

export interface Pollers {
  /** Workers (by identity) that polled the queue's workflow tasks within POLLER_FRESH_MS. */
  count: number;
  /** When the most recent of them polled (ISO), if any polled. */
  lastPollAt?: string;
}

export class WorkerPresence {
  private cached?: { at: number; value: Promise<Pollers> };

  constructor(
    private readonly o: {
      client: Client;
      taskQueue: string;
      /** How long one answer is reused (probes and blocked sends may ask often). Default 1 s. */
      cacheMs?: number;
      freshMs?: number;
    },
  ) {}

  /** @throws the Temporal client's error when the queue cannot be described (Temporal down). */
  pollers(): Promise<Pollers> {
    const now = Date.now();
    if (this.cached && now - this.cached.at < (this.o.cacheMs ?? 1000)) return this.cached.value;
    const value = this.describe();
    this.cached = { at: now, value };
    value.catch(() => (this.cached = undefined));
    return value;
  }

  private async describe(): Promise<Pollers> {
    const { enums } = temporal.api;
    const described = await this.o.client.workflowService.describeTaskQueue({
      namespace: this.o.client.options.namespace,
      taskQueue: { name: this.o.taskQueue, kind: enums.v1.TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
      taskQueueType: enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
    });
    const since = Date.now() - (this.o.freshMs ?? POLLER_FRESH_MS);
    const polls = (described.pollers ?? [])
      .map((p) => (p.lastAccessTime ? Number(p.lastAccessTime.seconds ?? 0) * 1000 + Math.floor((p.lastAccessTime.nanos ?? 0) / 1e6) : 0))
      .filter((at) => at >= since);
    const last = polls.length ? Math.max(...polls) : undefined;
    return { count: polls.length, ...(last !== undefined ? { lastPollAt: new Date(last).toISOString() } : {}) };
  }
}
