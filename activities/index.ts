/**
 * The activities of the task workflow, bound to their dependencies. Workflows import this module's *type* only.
 */
import type { Pool } from 'pg';
import { DEFAULT_REFRESH_POLICY, type RefreshPolicy } from '../src/core/agents/refresh';
import { TaskHealth } from '../src/core/agents/task-health';
import type { AgentCredentials } from '../src/core/agents/agent-credentials';
import type { GrpcChannels } from '../src/core/http/outbound-grpc';
import type { AgentLink } from '../src/core/agents/agent-client';
import type { AgentPushDeps } from './push-follow';
import { EventHub } from '../src/core/events/hub';
import type { UnfundedPolicy } from '../src/core/ledger/postings';
import type { HoldRequest, SettlementRequest, TaskRecord } from '../task/contracts';
import type { CertificationOutcome } from '../task/contracts';
import { type FinishOptions, finishTask, holdFunds, recordTask, settleTask } from './bookkeeping';
import { cancelAtAgent, type CancelAtAgentArgs } from './cancel-at-agent';
import { recordCertification } from './certification';
import { deliverPush, type DeliverPushArgs } from './deliver-push';
import { deliverGenesisEvent, finishGenesisDelivery, genesisLink, type GenesisDeliveryArgs, type GenesisDeliveryFinal } from './genesis';
import { GenesisStore } from '../src/core/genesis/store';
import { createRegistryActivities } from './registry';
import { forwardFirstExchange, forwardMessage, type ForwardArgs } from './forward-message';
import { hubCancel, hubForward, hubQueueOf, type HubQueueArgs } from './hub';
import type { HubLink } from '../src/core/hub/turns';
import { cancelChildTask, type CancelChildArgs } from './jobs';
import { endOrphanedTasks } from './orphans';
import { purgeExpiredTasks } from './retention';
import { ApplicationFailure, Context } from '@temporalio/activity';
import { forwardAttempts, forwardDuration, forwardRetries } from '../src/core/metrics';

export interface ActivityDeps {
  pool: Pool;
  /** The guarded outbound fetch (src/core/http/outbound.ts): every call to an agent goes through it. */
  fetch: typeof fetch;
  /** The guarded gRPC channels (Outbound.grpc): agents called over gRPC go through them. */
  grpc?: GrpcChannels;
  /** Tells this process's streams about events as soon as they are committed (other processes hear NOTIFY). */
  hub?: EventHub;
  /** Agent-refresh policy (thresholds, timeouts, trusted jku origins); the registry in app.ts gets the same. */
  registryPolicy?: Partial<RefreshPolicy>;
  /** The `iss` of push-delivery JWTs: the gateway's public URL when it has one. */
  issuer?: string;
  /** How never-funded requester accounts behave (SWITCHBOARD_UNFUNDED_ACCOUNTS); default enforce. */
  unfundedAccounts?: UnfundedPolicy;
  /** The agents' outbound credentials: looked up by the activities that call agents, never passed through Temporal. */
  credentials?: AgentCredentials;
  /** Following agents' tasks by their push notifications (the webhook's public URL and tokens); unset: polling. */
  agentPush?: AgentPushDeps;
  /** SWITCHBOARD_TASK_RETENTION (ms): how long a terminal task is kept unless its tenant sets its own. Default 30 days. */
  retentionMs?: number;
  /**
   * Aborted when the worker running these activities stops (superviseWorker): the agent calls in flight hand their
   * turns over at once instead of running into the worker's grace time (activities/forwarding/turn.ts handOff).
   */
  drain?: AbortSignal;
  /**
   * SWITCHBOARD_INPUT_TIMEOUT_MS, as the front door passes it: the orphan sweep starts a task whose claim was left
   * without its workflow with it. Default 7 days (the setting's default).
   */
  inputTimeoutMs?: number;
}

export function createActivities({
  pool, fetch, grpc, hub = new EventHub(), issuer, unfundedAccounts = 'enforce', registryPolicy, credentials, agentPush, retentionMs = 30 * 86_400_000, inputTimeoutMs = 7 * 86_400_000, drain,
}: ActivityDeps) {
  // The agents' health follows what their tasks' requests meet (src/core/agents/task-health.ts).
  const health = new TaskHealth(pool, { downAfterFailures: registryPolicy?.downAfterFailures ?? DEFAULT_REFRESH_POLICY.downAfterFailures, warn: activityWarn });
  // How to reach one agent: Switchboard's guarded transports, presenting that agent's credential (if it has one).
  const genesis = new GenesisStore(pool, credentials?.box);
  const agentLink = (tenant: string, agentId: string | undefined, taskId?: string): AgentLink => ({
    fetch,
    grpc,
    credentials: credentials && agentId ? () => credentials.headersFor(tenant, agentId) : undefined,
    health: agentId ? (signal) => health.note(tenant, agentId, signal) : undefined,
    genesis: agentId ? genesisLink(genesis, hub, { tenant, agentId, taskId }, !!credentials) : undefined,
  });
  // An attempt that got no answer within its time is a timeout for the agent's health too (the client aborts it, so
  // the request itself shows only an abort). A task that outran retry.taskTimeoutMs is not: the agent answered.
  const noted = <T>(args: ForwardArgs, forward: () => Promise<T>): Promise<T> =>
    forward().catch(async (err: unknown) => {
      if (args.agentId && err instanceof ApplicationFailure && err.type === 'AgentTimeout' && !err.message.includes('retry.taskTimeoutMs')) {
        await health.note(args.tenant, args.agentId, { kind: 'timeout', detail: err.message });
      }
      throw err;
    });
  return {
    ...createRegistryActivities({ pool, fetch, grpc, policy: registryPolicy, credentials }),
    forwardMessage: (args: ForwardArgs) => measuredForward(args, () => noted(args, () => forwardMessage({ link: agentLink(args.tenant, args.agentId, args.gatewayTaskId), pool, hub, push: agentPush, drain }, args))),
    forwardFirstExchange: (args: ForwardArgs) =>
      measuredForward(args, () =>
        noted(args, () =>
          forwardFirstExchange({ link: agentLink(args.tenant, args.agentId, args.gatewayTaskId), pool, hub, push: agentPush, drain, unfunded: unfundedAccounts }, args),
        ),
      ),
    hubQueueOf: (args: HubQueueArgs) => hubQueueOf(pool, args),
    cancelAtAgent: (args: CancelAtAgentArgs) =>
      cancelAtAgent(agentLink(args.tenant ?? '', args.agentId), args, Context.current().info.startToCloseTimeoutMs),
    cancelChildTask: (args: CancelChildArgs) => cancelChildTask(args),
    recordTask: (rec: TaskRecord) => recordTask(pool, hub, rec),
    holdFunds: (req: HoldRequest) => holdFunds(pool, unfundedAccounts, req),
    settleTask: (req: SettlementRequest) => settleTask(pool, unfundedAccounts, req),
    finishTask: (rec: TaskRecord, req: SettlementRequest, opts?: FinishOptions) => finishTask(pool, hub, unfundedAccounts, rec, req, opts),
    deliverPush: (args: DeliverPushArgs) => deliverPush({ pool, fetch, hub, issuer }, args),
    deliverGenesisEvent: (args: GenesisDeliveryArgs) => deliverGenesisEvent({ pool, fetch, issuer, secrets: credentials ? genesis : undefined }, args),
    finishGenesisDelivery: (f: GenesisDeliveryFinal) => finishGenesisDelivery(pool, f),
    endOrphanedTasks: () =>
      endOrphanedTasks({
        pool,
        hub,
        unfundedAccounts,
        taskDefaults: { inputTimeoutMs },
        // One attempt of at most 10 s per task: the sweep has others to end, and the task ends failed either way.
        cancelAtAgent: (args: CancelAtAgentArgs) => cancelAtAgent(agentLink(args.tenant ?? '', args.agentId), args, ORPHAN_CANCEL_MS),
      }),
    purgeExpiredTasks: () => purgeExpiredTasks({ pool, retentionMs }),
    recordCertification: (o: CertificationOutcome) => recordCertification(pool, o),
  };
}

/** How long the orphan sweep waits for an agent to answer the cancel of a task whose workflow was terminated. */
const ORPHAN_CANCEL_MS = 10_000;

/** The certification workflow's activities: the task path's forwarding, and recording the outcome. */
export type CertificationActivities = Pick<ReturnType<typeof createActivities>, 'forwardMessage' | 'recordCertification'>;
/**
 * The activities of this process's hub worker (its own task queue, src/api/hub/hub.ts): forwarding turns to the
 * agents whose sockets this process holds.
 */
export function createHubActivities(hub: HubLink) {
  return {
    hubForward: (args: ForwardArgs) => measuredForward(args, () => hubForward(hub, args)),
    hubCancel: async (args: { tenant: string; agentId: string; taskId: string }) => hubCancel(hub, args),
  };
}
export type HubActivities = ReturnType<typeof createHubActivities>;

/** The orphan sweep's activity, as its workflow proxies it. */
export type OrphanActivities = Pick<ReturnType<typeof createActivities>, 'endOrphanedTasks'>;

/** The retention sweep's activity, as its workflow proxies it. */
export type RetentionActivities = Pick<ReturnType<typeof createActivities>, 'purgeExpiredTasks'>;

/** One forwarding attempt, counted and timed for /metrics (by agent; outcome ok or the failure's type). */
async function measuredForward<T>(args: ForwardArgs, attempt: () => Promise<T>): Promise<T> {
  const agent = args.agentId ?? 'unknown';
  forwardAttempts.inc({ agent });
  if (Context.current().info.attempt + (args.attemptsBefore ?? 0) > 1) forwardRetries.inc({ agent });
  const stop = forwardDuration.startTimer({ agent });
  try {
    const result = await attempt();
    stop({ outcome: 'ok' });
    return result;
  } catch (err) {
    stop({ outcome: (err as { type?: string }).type ?? (err as Error).name ?? 'error' });
    throw err;
  }
}

/** A warning in the activity's log, when there is an activity (health writes may finish after it). */
function activityWarn(msg: string, err: unknown): void {
  try {
    Context.current().log.warn(msg, { error: err instanceof Error ? err.message : String(err) });
  } catch {
    // no activity context: nowhere to say it
  }
}
