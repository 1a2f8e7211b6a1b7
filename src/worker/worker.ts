/** The Temporal worker: the only module that imports both workflows/ (by path) and activities/. */
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import type { PayloadCodec } from '@temporalio/common';
import { NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import { type ActivityDeps, createActivities, createHubActivities } from '../../activities';
import type { HubLink } from '../core/hub/turns';
import { DIST_DIR, REPO_ROOT } from '../core/paths';
import { SEALED_FAILURE_CONVERTER_PATH, dataConverterOf } from '../core/temporal/encryption-codec';

export type Activities = ReturnType<typeof createActivities>;

/** What the worker needs: its Temporal connection and queue, plus everything the activities depend on. */
export interface WorkerDeps extends ActivityDeps {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  /** Pre-built bundle (tests bundle once per process); default: `npm run build`'s (prebuiltWorkflowBundle), else bundle workflows/ at start. */
  workflowBundle?: WorkerOptions['workflowBundle'];
  /** Replaces activities, for fault-injection tests that wrap the real ones. */
  activities?: Activities;
  /** Wraps the real activities (made from these deps), for fault-injection tests. */
  wrapActivities?: (real: Activities) => Activities;
  /**
   * SWITCHBOARD_PAYLOAD_KEY's codec: the worker reads and writes every payload through it, like the client, and
   * its failures' messages are sealed too (the `.sealed-failures` bundle, see workflowBundleOptions).
   */
  payloadCodec?: PayloadCodec;
  /** SWITCHBOARD_WORKFLOW_STACK_TRACES: workflows bundled at start without workflows/sandbox.ts (the SDK's full stack traces). */
  fullStackTraces?: boolean;
  /** Worker plugins, e.g. OpenTelemetry's (its workflow interceptors must be in a pre-built bundle too). */
  plugins?: WorkerOptions['plugins'];
  /**
   * Slots, pollers and the cache other than the defaults below: a saturated one-slot worker in a priority test, and
   * the settings the bench measures (BENCH_WORKER_OPTIONS, docs/benchmark.md "The worker's settings").
   */
  tuning?: WorkerTuning;
}

export type WorkerTuning = Partial<
  Pick<
    WorkerOptions,
    | 'maxConcurrentWorkflowTaskExecutions'
    | 'maxConcurrentActivityTaskExecutions'
    | 'maxConcurrentLocalActivityExecutions'
    | 'maxCachedWorkflows'
    | 'maxConcurrentWorkflowTaskPolls'
    | 'maxConcurrentActivityTaskPolls'
    | 'nonStickyToStickyPollRatio'
    | 'workflowTaskPollerBehavior'
    | 'activityTaskPollerBehavior'
  >
>;

export const WORKFLOWS_PATH = require.resolve('../../workflows');

/**
 * How every workflow bundle is made (the build's, the tests', one made at start): workflows/sandbox.ts is loaded into
 * each workflow thread's context before any workflow runs (it shortens the SDK's per-promise stack traces). With
 * `sealedFailures` (a deployment with SWITCHBOARD_PAYLOAD_KEY) workflows encode their failures' messages into a
 * payload, which the codec encrypts: the failure converter of a workflow is fixed when its code is bundled.
 */
export function workflowBundleOptions(
  workflowsPath = WORKFLOWS_PATH,
  sealedFailures = false,
): { workflowsPath: string; preloadModules: string[]; failureConverterPath?: string } {
  return { workflowsPath, preloadModules: [require.resolve('../../workflows/sandbox')], ...(sealedFailures ? { failureConverterPath: SEALED_FAILURE_CONVERTER_PATH } : {}) };
}

/**
 * The file `npm run build` (scripts/build.js) writes the workflow bundle for these worker plugins to: one bundle
 * per set of plugins, because a plugin may add workflow interceptor modules to the bundle (OpenTelemetry's does),
 * and per failure converter (`.sealed-failures` with a payload key).
 */
export function workflowBundleFile(plugins: readonly { name: string }[] = [], sealedFailures = false): string {
  return path.join(DIST_DIR, `workflow-bundle${plugins.map((p) => `.${p.name}`).join('')}${sealedFailures ? '.sealed-failures' : ''}.js`);
}

/**
 * `npm run build`'s workflow bundle for these plugins, when it exists and is not older than any file of the
 * workflows/ directory this code would otherwise bundle (dist/workflows/ in the compiled build, the TypeScript
 * sources under tsx) nor than package-lock.json (the bundle holds @temporalio/workflow). Else undefined, and the
 * worker bundles at start as before. Loaded by path: the SDK reads its inline source map once, for the stack
 * traces of workflows (Temporal UI's "Stack Trace"); plain `node` has Node's own source maps off.
 */
export function prebuiltWorkflowBundle(plugins: readonly { name: string }[] = [], sealedFailures = false): { codePath: string } | undefined {
  const codePath = workflowBundleFile(plugins, sealedFailures);
  const mtime = (file: string) => statSync(file, { throwIfNoEntry: false })?.mtimeMs;
  const built = mtime(codePath);
  if (built === undefined) return undefined;
  const dir = path.dirname(WORKFLOWS_PATH);
  const sources = [...readdirSync(dir).map((f) => path.join(dir, f)), path.join(REPO_ROOT, 'package-lock.json')];
  return sources.every((f) => (mtime(f) ?? 0) <= built) ? { codePath } : undefined;
}

const MAX_CACHED_WORKFLOWS = 200;

export async function createWorker(d: WorkerDeps): Promise<Worker> {
  return Worker.create({
    connection: d.connection,
    namespace: d.namespace,
    taskQueue: d.taskQueue,
    ...workflowCode(d),
    activities: d.activities ?? (d.wrapActivities ? d.wrapActivities(createActivities(d)) : createActivities(d)),
    dataConverter: dataConverterOf(d.payloadCodec),
    plugins: d.plugins,
    // A bounded cache of running workflows. The SDK's default grows with the heap limit (~2,300 on a 4 GB heap)
    // and each cached task workflow holds ~250 KB (~90 KB of it in the workflow thread's heap, bench/paused.ts),
    // so 10,000 tasks waiting for input would hold gigabytes; past
    // this many the least recently used is evicted and, when its task resumes, replayed from its history (a few
    // ms). Far above the tasks in flight at once, so a running task is not evicted between its steps.
    maxCachedWorkflows: MAX_CACHED_WORKFLOWS,
    // Each agent call holds an activity slot for its whole duration; allow many at once.
    maxConcurrentActivityTaskExecutions: 200,
    maxConcurrentLocalActivityExecutions: 200,
    ...d.tuning,
    shutdownGraceTime: '10s',
    // After a worker dies, Temporal waits this long on its sticky queue before giving the task to another
    // worker (default 10 s): a resuming client would wait that long for its first answer.
    stickyQueueScheduleToStartTimeout: '3s',
    // A cancel reaches a running agent call with its next heartbeat to the server; by default those are
    // throttled to 80 % of the heartbeat timeout (8 s). Every 2 s keeps a cancel prompt at modest cost.
    maxHeartbeatThrottleInterval: '2s',
  });
}

/**
 * The workflow code a worker runs: the bundle it was given; with full stack traces, workflows/ bundled now without
 * the sandbox module; else the prebuilt bundle, else workflows/ bundled now. Bundled now, the failure converter
 * comes from the data converter (dataConverterOf); prebuilt, from the bundle of its kind.
 */
function workflowCode(d: WorkerDeps): Pick<WorkerOptions, 'workflowBundle' | 'workflowsPath' | 'bundlerOptions'> {
  if (d.workflowBundle) return { workflowBundle: d.workflowBundle };
  if (d.fullStackTraces) return { workflowsPath: WORKFLOWS_PATH };
  const bundle = prebuiltWorkflowBundle(d.plugins ?? [], !!d.payloadCodec);
  if (bundle) return { workflowBundle: bundle };
  const { workflowsPath, preloadModules } = workflowBundleOptions();
  return { workflowsPath, bundlerOptions: { preloadModules } };
}

/**
 * The hub worker: polls only this process's hub queue (AgentHub.queue), with only the activity that forwards a
 * turn over a socket this process holds. No workflows: those run on the deployment's queue.
 */
export async function createHubWorker(d: { connection: NativeConnection; namespace: string; hub: HubLink; payloadCodec?: PayloadCodec; plugins?: WorkerOptions['plugins'] }): Promise<Worker> {
  return Worker.create({
    connection: d.connection,
    namespace: d.namespace,
    taskQueue: d.hub.queue,
    activities: createHubActivities(d.hub),
    dataConverter: dataConverterOf(d.payloadCodec),
    plugins: d.plugins,
    maxConcurrentActivityTaskExecutions: 1000,
    shutdownGraceTime: '5s',
    maxHeartbeatThrottleInterval: '2s',
  });
}

export interface SupervisedWorker {
  /** Whether a worker is polling right now (for /readyz). */
  running(): boolean;
  /**
   * Drains the current worker and stops restarting it: it stops polling, and its agent calls hand their turns over
   * at once (the drain signal), so it ends in about the time their last writes take, not its grace time. Once
   * called, every call returns the same promise.
   */
  stop(): Promise<void>;
}

/**
 * Runs a worker and, when it fails (Temporal unreachable for longer than the SDK retries, a fatal poll error),
 * makes a new one after a backoff (1 s doubling to 30 s), for as long as the process runs: a dependency's
 * outage must not end the process. Each failure is logged. `create` gets the signal its activities drain on
 * (ActivityDeps.drain), aborted by stop() once the worker has stopped polling.
 */
export function superviseWorker(
  create: (drain: AbortSignal) => Promise<Worker>,
  log: { warn(o: object, m: string): void; error(o: object, m: string): void },
  /** The drain of a worker made before (a first one, made to fail the start early), else a new one. */
  drain = new AbortController(),
): SupervisedWorker {
  let current: Worker | undefined;
  let stopping = false;
  let stopped: Promise<void> | undefined;
  let wake: (() => void) | undefined;
  const loop = (async () => {
    for (let failures = 0; !stopping; ) {
      const started = Date.now();
      try {
        current = await create(drain.signal);
        if (stopping) break;
        await current.run();
        if (stopping) break;
        log.warn({}, 'the Temporal worker stopped; starting a new one');
      } catch (err) {
        if (stopping) break;
        log.error({ err }, 'the Temporal worker failed; starting a new one after a pause');
      }
      current = undefined;
      failures = Date.now() - started > 60_000 ? 1 : failures + 1;
      await new Promise<void>((r) => {
        const timer = setTimeout(r, Math.min(30_000, 1000 * 2 ** (failures - 1)));
        wake = () => (clearTimeout(timer), r());
      });
    }
  })();
  return {
    running: () => current?.getState() === 'RUNNING',
    stop() {
      stopped ??= (async () => {
        stopping = true;
        wake?.();
        // Polling stops first, so no attempt handed over comes back to this worker.
        if (current && current.getState() === 'RUNNING') current.shutdown();
        drain.abort();
        await loop;
      })();
      return stopped;
    },
  };
}
