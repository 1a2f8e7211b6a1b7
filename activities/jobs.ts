/** Multi-agent jobs: what a task does to the tasks its agent started through Switchboard. */
import { Context } from '@temporalio/activity';
import { WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import { cancelUpdate, workflowIdOf } from '../task/messages';

export interface CancelChildArgs {
  tenant: string;
  taskId: string;
}

/**
 * Cancels a child task the way a client would (its own workflow then cancels its agent call and its own
 * children). A child that has already ended, or is gone, needs nothing.
 */
export async function cancelChildTask(args: CancelChildArgs): Promise<'canceled' | 'already ended'> {
  const handle = Context.current().client.workflow.getHandle(workflowIdOf(args.tenant, args.taskId));
  try {
    await handle.executeUpdate(cancelUpdate, { args: [] });
    return 'canceled';
  } catch (err) {
    if (err instanceof WorkflowNotFoundError || err instanceof WorkflowUpdateFailedError) return 'already ended';
    throw err;
  }
}
