/**
 * Multi-agent jobs, the task workflow's side: the tasks this task's agent started through Switchboard (its
 * children), the job shown in GetTask (parent, hop count, children and costs), canceling open children with
 * the task, and a child's report to its parent when it ends. Deterministic: @temporalio/workflow APIs only.
 */
import { CancellationScope, condition, getExternalWorkflowHandle, proxyActivities } from '@temporalio/workflow';
import type { createActivities } from '../activities';
import type { TaskState, WireTask } from '../task/wire';
import { childTaskSignal, workflowIdOf } from '../task/messages';
import { stateLabel } from '../task/rules';
import type { ChildTask, TaskInput } from '../task/contracts';

type Activities = ReturnType<typeof createActivities>;

/** Canceling a child is retried until its gateway answers, for at most an hour. */
const control = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  scheduleToCloseTimeout: '1 hour',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

export class Job {
  readonly children: ChildTask[];
  private canceled?: Promise<number>;

  /** @param task the workflow's task: the job is shown in its metadata (`metadata.switchboard.job`). */
  constructor(
    private readonly input: TaskInput,
    private readonly task: WireTask,
  ) {
    this.children = input.carry?.children ?? [];
  }

  /** A child was started for this task (by the gateway), or has ended (by the child). */
  childChanged(c: ChildTask): void {
    const i = this.children.findIndex((x) => x.taskId === c.taskId);
    if (i < 0) this.children.push(c);
    else this.children[i] = { ...this.children[i], ...c };
    this.show();
  }

  childrenCostMinor(): number {
    return this.children.reduce((sum, c) => sum + (c.totalCostMinor ?? 0), 0);
  }

  /** GetTask shows the job: parent, hop count, children and, once the task has settled, its costs. */
  show(ownCostMinor?: number): void {
    const { input, task, children } = this;
    if (!input.parentTaskId && children.length === 0) return;
    const job: Record<string, unknown> = { depth: input.depth ?? 0, children };
    if (input.parentTaskId) job.parentTaskId = input.parentTaskId;
    const childrenMinor = this.childrenCostMinor();
    if (ownCostMinor !== undefined) job.cost = { ownMinor: ownCostMinor, childrenMinor, totalMinor: ownCostMinor + childrenMinor };
    task.metadata = { ...task.metadata, switchboard: { ...(task.metadata?.switchboard as object), job } };
  }

  /** Lines for Temporal UI's details: the parent and each child, linked to their workflows. */
  details(link: (taskId: string) => string): string[] {
    const lines: string[] = [];
    if (this.input.parentTaskId) lines.push(`parent task: ${link(this.input.parentTaskId)} (hop ${this.input.depth ?? 1})`);
    for (const c of this.children) lines.push(`child task: ${link(c.taskId)} → agent \`${c.agentId}\`${c.state ? ` — ${stateLabel(c.state)}` : ''}`);
    return lines;
  }

  /**
   * A canceled job cancels its open children (each of them cancels its own), started as soon as the cancel
   * arrives rather than after the agent call has wound down; asking again waits for the same. @returns how many were open.
   */
  cancelChildren(): Promise<number> {
    this.canceled ??= CancellationScope.nonCancellable(async () => {
      const open = this.children.filter((c) => !c.state);
      if (open.length === 0) return 0;
      await Promise.all(open.map((c) => control.cancelChildTask({ tenant: this.input.tenant, taskId: c.taskId }).catch(() => undefined)));
      return open.length;
    });
    return this.canceled;
  }

  /** A child answers its caller at the end of its turn and reports its cost a moment later, when it settles. */
  async childrenSettled(): Promise<void> {
    if (this.children.length) await condition(() => this.children.every((c) => c.state), '30 seconds');
  }

  /** A child reports its end, with its whole cost, to its parent (which may have ended already). */
  async reportToParent(state: TaskState, ownCostMinor: number): Promise<void> {
    const { input, task } = this;
    if (!input.parentTaskId) return;
    const report: ChildTask = { taskId: task.id, agentId: input.agent.agentId, state, totalCostMinor: ownCostMinor + this.childrenCostMinor() };
    await getExternalWorkflowHandle(workflowIdOf(input.tenant, input.parentTaskId))
      .signal(childTaskSignal, report)
      .catch(() => undefined);
  }
}
