/**
 * A task's money before the agent is called: the hold (task-state.ts's holdOf) is reserved once, and the
 * first message is answered only once that is decided. Deterministic: @temporalio/workflow APIs only.
 */
import { ApplicationFailure, CancellationScope, proxyLocalActivities } from '@temporalio/workflow';
import type { createActivities } from '../activities';
import { FailureTypes } from '../task/messages';
import { holdOf } from '../task/rules';
import type { TaskInput } from '../task/contracts';

type Activities = ReturnType<typeof createActivities>;

const bookkeeping = proxyLocalActivities<Activities>({
  startToCloseTimeout: '10 seconds',
  retry: { initialInterval: '200 milliseconds', backoffCoefficient: 2, maximumInterval: '30 seconds' },
});

export class Funding {
  /** What the task holds when funded: the client's budget, else the agent's price. */
  readonly holdMinor: number;
  /** What was reserved (0: nothing). */
  heldMinor: number;
  private decision: 'pending' | 'funded' | { declined: string; availableMinor: number };

  constructor(private readonly input: TaskInput) {
    const { carry } = input;
    this.holdMinor = holdOf(input);
    this.heldMinor = carry?.heldMinor ?? 0;
    // A run carried over from before holds existed (no `funded` in its carry) counts as decided: it never
    // reserved anything.
    this.decision = carry ? (carry.funded === false ? 'pending' : 'funded') : this.holdMinor > 0 ? 'pending' : 'funded';
  }

  get pending(): boolean {
    return this.decision === 'pending';
  }

  /** The refusal a first message gets when the funds were not there; undefined otherwise. */
  refusal(): ApplicationFailure | undefined {
    const d = this.decision;
    if (typeof d !== 'object') return undefined;
    return ApplicationFailure.create({
      type: FailureTypes.InsufficientFunds,
      message: d.declined,
      // Shown with the failed update in Temporal UI.
      details: [{ requiredMinor: this.holdMinor, availableMinor: d.availableMinor, account: `requester:${this.input.requester}` }],
      nonRetryable: true,
    });
  }

  /**
   * Reserves the task's hold before the agent is first called. The activity is idempotent (one hold row per
   * task) and runs to completion even if the task is canceled meanwhile, so a hold can never be committed after
   * the settlement that should release it. @returns undefined when funded, else why not (the task is rejected).
   */
  async reserve(): Promise<string | undefined> {
    const { input } = this;
    const r = await CancellationScope.nonCancellable(() =>
      bookkeeping.holdFunds({ tenant: input.tenant, taskId: input.taskId, agentId: input.agent.agentId, requester: input.requester, amountMinor: this.holdMinor }),
    );
    if (r.ok) {
      this.heldMinor = this.holdMinor;
      this.decision = 'funded';
      return undefined;
    }
    this.decision = { declined: r.reason, availableMinor: r.availableMinor };
    return r.reason;
  }
}
