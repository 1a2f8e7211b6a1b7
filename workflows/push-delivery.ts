/**
 * A task's push notifications: one delivery loop per webhook config, in its own cancellation scope so that
 * canceling the task does not stop its webhooks from hearing how it ended. Part of the task workflow
 * (deterministic: @temporalio/workflow APIs only).
 */
import { CancellationScope, condition, isCancellation, proxyActivities } from '@temporalio/workflow';
import type { createActivities } from '../activities';
import type { TaskState } from '../task/wire';
import { describeFailure } from './failures';
import { isTerminal } from '../task/rules';

type Activities = ReturnType<typeof createActivities>;

export interface PushDeliveryOptions {
  tenant: string;
  taskId: string;
  /** First retry delay of a failed delivery (then doubling, up to 10 min, for up to 24 h). Default 1 s. */
  retryInitialMs?: number;
  /** The task's state now. */
  state: () => TaskState;
  /** How far the task's event log is written (bumped by the workflow after each logged change). */
  logged: () => number;
  /** Something a person would want to see changed (Temporal UI details). */
  changed: () => void;
}

export class PushDelivery {
  /** How each config's deliveries stand: the last event delivered, and why it stopped if it did. */
  readonly status = new Map<string, { cursor: number; note?: string }>();
  private readonly loops = new Map<string, Promise<void>>();
  /** The scope the loops run in, made with the first (most tasks have no webhook: a scope costs its promises). */
  private scope?: CancellationScope;
  /** The scope this was made in (the workflow's root): the loops' scope's parent, wherever the first loop starts. */
  private readonly parent = CancellationScope.current();
  private readonly activities: Activities;

  constructor(private readonly o: PushDeliveryOptions) {
    this.activities = proxyActivities<Activities>({
      startToCloseTimeout: '10 minutes',
      heartbeatTimeout: '30 seconds',
      scheduleToCloseTimeout: '24 hours',
      retry: { initialInterval: o.retryInitialMs ?? 1000, backoffCoefficient: 2, maximumInterval: '10 minutes' },
    });
  }

  /** Starts delivering to a config (once; a config already watched is left alone). */
  watch(configId: string): void {
    if (this.loops.has(configId)) return;
    this.status.set(configId, { cursor: 0 });
    // Shielded from the workflow's own cancel (a cancel requested through Temporal): the canceled task's webhooks still
    // hear how it ended; stop() cancels the loops' scope itself.
    this.scope ??= new CancellationScope({ cancellable: true, parent: new CancellationScope({ cancellable: false, parent: this.parent }) });
    this.loops.set(configId, this.scope.run(() => this.deliver(configId)));
  }

  /** The configs being delivered to (carried across continue-as-new). */
  configIds(): string[] {
    return [...this.loops.keys()];
  }

  /** Resolves when every loop has delivered the task's last event (or given up, or its config was deleted). */
  async finished(): Promise<void> {
    await Promise.all(this.loops.values());
  }

  /** Whether any config is delivered to (finished() has something to wait for). */
  get watching(): boolean {
    return this.loops.size > 0;
  }

  /** Stops every loop (before continue-as-new: the next run starts them again and each resumes at its cursor). */
  async stop(): Promise<void> {
    this.scope?.cancel();
    await Promise.allSettled(this.loops.values());
  }

  /**
   * Delivers the task's events to one webhook, in order, until the config is deleted or the task has ended and
   * its last event was delivered. Each call of the activity sends what the log has (following the live tail
   * while the agent works); retries with backoff for up to a day are Temporal's, and the cursor is the
   * config's own, in PostgreSQL, so no event is sent twice after a success.
   */
  private async deliver(configId: string): Promise<void> {
    const { o } = this;
    for (;;) {
      const seen = o.logged();
      let closed = false;
      try {
        const r = await this.activities.deliverPush({ tenant: o.tenant, taskId: o.taskId, configId, follow: o.state() === 'TASK_STATE_WORKING' });
        if (r.gone) {
          this.status.set(configId, { cursor: r.cursor, note: 'config deleted' });
          return;
        }
        closed = r.closed;
        this.status.set(configId, { cursor: r.cursor });
      } catch (err) {
        if (isCancellation(err)) throw err;
        this.status.set(configId, { cursor: this.status.get(configId)?.cursor ?? 0, note: `gave up: ${describeFailure(err)}` });
        o.changed();
        return;
      }
      o.changed();
      if (closed && isTerminal(o.state()) && o.logged() === seen) return;
      // While the agent works, keep following; otherwise wait until the workflow logs something new.
      if (!(o.state() === 'TASK_STATE_WORKING' && !closed)) await condition(() => o.logged() !== seen);
    }
  }
}
