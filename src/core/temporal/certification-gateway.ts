/**
 * Starts capability evaluations (workflows/certification.ts). Like task-gateway.ts for tasks, the one place that
 * knows the certification workflows' IDs and task queue.
 */
import type { Client } from '@temporalio/client';
import { type CertificationInput, certificationWorkflowId } from '../../../task/contracts';

export class CertificationGateway {
  constructor(private readonly o: { client: Client; taskQueue: string }) {}

  /** Starts the evaluation; starting the same one again is a no-op (the ID is the evaluation's). */
  async start(input: CertificationInput): Promise<void> {
    await this.o.client.workflow.start('certificationWorkflow', {
      workflowId: certificationWorkflowId(input.tenant, input.certificationId),
      taskQueue: this.o.taskQueue,
      args: [input],
      workflowIdConflictPolicy: 'USE_EXISTING',
    });
  }
}
