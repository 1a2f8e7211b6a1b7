/** The Temporal worker: the only module that imports both workflows/ (by path) and activities/. */
import type { PayloadCodec } from '@temporalio/common';
import { NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import { type ActivityDeps, createActivities } from '../activities';

/** What the worker needs: its Temporal connection and queue, plus everything the activities depend on. */
export interface WorkerDeps extends ActivityDeps {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  /** Pre-built bundle (tests bundle once per process); default: bundle workflows/ at start. */
  workflowBundle?: WorkerOptions['workflowBundle'];
  /** Replaces activities, for fault-injection tests that wrap the real ones. */
  activities?: ReturnType<typeof createActivities>;
  /** SWITCHBOARD_PAYLOAD_KEY's codec: the worker reads and writes every payload through it, like the client. */
  payloadCodec?: PayloadCodec;
}

export const WORKFLOWS_PATH = require.resolve('../workflows');

export async function createWorker(d: WorkerDeps): Promise<Worker> {
  return Worker.create({
    connection: d.connection,
    namespace: d.namespace,
    taskQueue: d.taskQueue,
    ...(d.workflowBundle ? { workflowBundle: d.workflowBundle } : { workflowsPath: WORKFLOWS_PATH }),
    activities: d.activities ?? createActivities(d),
    ...(d.payloadCodec ? { dataConverter: { payloadCodecs: [d.payloadCodec] } } : {}),
    // Each agent call holds an activity slot for its whole duration; allow many at once.
    maxConcurrentActivityTaskExecutions: 200,
    maxConcurrentLocalActivityExecutions: 200,
    shutdownGraceTime: '10s',
    // After a worker dies, Temporal waits this long on its sticky queue before giving the task to another
    // worker (default 10 s): a resuming client would wait that long for its first answer.
    stickyQueueScheduleToStartTimeout: '3s',
    // A cancel reaches a running agent call with its next heartbeat to the server; by default those are
    // throttled to 80 % of the heartbeat timeout (8 s). Every 2 s keeps a cancel prompt at modest cost.
    maxHeartbeatThrottleInterval: '2s',
  });
}
