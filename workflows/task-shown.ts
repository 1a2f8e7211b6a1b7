/**
 * What Temporal UI shows of a task: its state as the A2ATaskState search attribute (upserted only when it changes,
 * and held back while a first exchange that may answer at once runs) and the workflow's current details.
 */
import { setCurrentDetails, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { SA_STATE, workflowIdOf } from '../task/messages';
import { stateLabel } from '../task/rules';
import type { TaskState, WireMessage, WireTask } from '../task/wire';
import type { Job } from './job';
import type { PushDelivery } from './push-delivery';

export class TaskShown {
  /** The A2ATaskState value last upserted: the front door starts the task `submitted`; a continued run shows its first change. */
  private shown: TaskState | undefined;
  /** A first exchange running holds `working` back: one that answers shows the answer's state alone. */
  private heldBack = false;

  constructor(
    private readonly tenant: string,
    private readonly task: WireTask,
    continued: boolean,
  ) {
    this.shown = continued ? undefined : 'TASK_STATE_SUBMITTED';
  }

  /** The task's state changed: upserted when it differs from the one shown, unless held back. */
  state(): void {
    if (this.heldBack || this.shown === this.task.status.state) return;
    this.shown = this.task.status.state;
    upsertSearchAttributes([{ key: SA_STATE, value: stateLabel(this.shown) }]);
  }

  /** Holds `working` back while a first exchange that may end the turn in this workflow task runs. */
  holdBack(hold: boolean): void {
    this.heldBack = hold;
  }

  /** Ends a first exchange's hold on `working`: shown now when `show` (the turn goes on), else superseded. */
  release(show: boolean): void {
    if (!this.heldBack) return;
    this.heldBack = false;
    if (show) this.state();
  }

  /** What Temporal UI shows for the task now: its state, how each webhook's deliveries stand, the job. */
  details(push: PushDelivery, job: Job): void {
    const m = this.task.status.message;
    const lines = [`**${stateLabel(this.task.status.state)}**${m ? ` — ${textOf(m)}` : ''}`];
    for (const [id, p] of push.status) lines.push(`push \`${id}\`: delivered through event ${p.cursor}${p.note ? ` — ${p.note}` : ''}`);
    lines.push(...job.details((taskId) => this.workflowLink(taskId)));
    setCurrentDetails(lines.join('\n\n'));
  }

  /** A link Temporal UI renders to another task's workflow. */
  private workflowLink(taskId: string): string {
    const id = workflowIdOf(this.tenant, taskId);
    return `[${id}](/namespaces/${workflowInfo().namespace}/workflows/${encodeURIComponent(id)})`;
  }
}

/** A message's text, cut to 200 characters. */
export function textOf(m: WireMessage): string {
  const text = m.parts.map((p) => p.text ?? '').join(' ').trim();
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}
