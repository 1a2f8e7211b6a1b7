/**
 * The contracts between the task workflow, its activities and the gateway: inputs, update arguments and
 * activity results. Types (and a default or two), safe to import anywhere; the A2A wire types they use live in task/wire.ts.
 */
import type { Dialect, StreamEvent, TaskState, WireArtifact, WireMessage, WireTask } from './wire';

/** The A2A protocol bindings Switchboard calls agents over (A2A 1.0 §5: `protocolBinding`; 0.3 `transport`). */
export type AgentBinding = 'JSONRPC' | 'HTTP+JSON' | 'GRPC';

/**
 * The dialects Switchboard calls agents in: the two it serves (1.0, and 0.3, which 0.2.x shares on the wire),
 * A2A 0.1 (`tasks/send`, `type` parts, `sessionId`) and NEXUS (`message/send` with `{type, data}` parts,
 * answered `{id, status: "<state>", messages, artifacts}`) and Genesis Nexus (envelopes POSTed to the agent, seed
 * 002). src/core/agents/agent-client.ts has one transport per dialect.
 */
export type AgentDialect = Dialect | '0.1' | 'nexus' | 'genesis';

/** How the forwarding activity reaches an agent: the interface's URL, binding, and the dialect its card declares. */
export interface AgentEndpoint {
  url: string;
  protocolVersion: AgentDialect;
  streaming: boolean;
  /** Absent in workflows started before agents had a binding: those are JSON-RPC. */
  binding?: AgentBinding;
  /**
   * The card declares `capabilities.pushNotifications`: a non-streamed task is followed by the agent's pushes
   * (and a slower poll). Absent: false (and in workflows started before it was passed).
   */
  pushNotifications?: boolean;
}

/**
 * Whether the agent at `endpoint` is followed by push (activities/push-follow.ts, when Switchboard has a public URL):
 * it declares them and is not streamed; an SDK dialect.
 */
export const followsByPush = (endpoint: AgentEndpoint): boolean =>
  endpoint.pushNotifications === true && !endpoint.streaming && (endpoint.protocolVersion === '1.0' || endpoint.protocolVersion === '0.3');

/** Whether the agent's task id is the gateway task's, sent with the first message (0.1 `params.id`, NEXUS `params.id`). */
export const agentTaskIsGatewayTask = (endpoint: AgentEndpoint): boolean => endpoint.protocolVersion === '0.1' || endpoint.protocolVersion === 'nexus';

/** retry.taskTimeoutMs when the registration sets none (also for agents registered before it existed): 7 days. */
export const DEFAULT_TASK_TIMEOUT_MS = 7 * 24 * 3600_000;

/**
 * Per-agent retry policy for the forwarding activity (defaults: 3 attempts, 1 s / 2 s / 4 s, 30 s each). It bounds
 * each exchange with the agent (a send, a GetTask, a stream's first answer), not the agent's work: once the agent
 * has named its task, it is followed for up to `taskTimeoutMs`.
 */
export interface AgentRetryPolicy {
  maxAttempts: number;
  initialIntervalMs: number;
  backoffCoefficient: number;
  attemptTimeoutMs: number;
  /** How long an agent's task may run, followed, before the turn fails (and the task is canceled at the agent). */
  taskTimeoutMs?: number;
  /** How long a stream from the agent may stay silent (not a byte, keep-alives included) before it is re-attached. */
  streamIdleTimeoutMs?: number;
}

/** The retry policy of an agent whose registration sets none, field by field. */
export const DEFAULT_RETRY: Required<AgentRetryPolicy> = {
  maxAttempts: 3,
  initialIntervalMs: 1000,
  backoffCoefficient: 2,
  attemptTimeoutMs: 30_000,
  taskTimeoutMs: DEFAULT_TASK_TIMEOUT_MS,
  streamIdleTimeoutMs: 5 * 60_000,
};

export interface AgentTarget {
  agentId: string;
  endpoint: AgentEndpoint;
  priceMinor: number;
  retry: AgentRetryPolicy;
}

export interface TaskInput {
  tenant: string;
  taskId: string;
  contextId: string;
  agent: AgentTarget;
  /** Who pays for the task (the tenant's account for now): its ledger account is `requester:<requester>`. */
  requester: string;
  /**
   * The client's spending cap for the task (the first message's `metadata.budgetMinor`, validated at the front
   * door to be at least the agent's price). It is held instead of the price; unset: the price is held.
   */
  budgetMinor?: number;
  /** When the gateway logged the task as submitted (its first event): the workflow's task starts with the same. */
  submittedAt?: string;
  /** How long an input-required/auth-required task waits for the next message before it fails. */
  inputTimeoutMs: number;
  /** First retry delay of a failed webhook delivery (then doubling, up to 10 min, for up to 24 h). Default 1 s. */
  pushRetryInitialMs?: number;
  /** Multi-agent jobs: the task whose agent started this one through Switchboard, and this task's hop count. */
  parentTaskId?: string;
  depth?: number;
  /** A Genesis COMMAND's ttl (epoch ms): a first message still queued past it is dropped, never delivered. */
  expiresAt?: number;
  /**
   * The way this workflow takes where the code changed (workflows/levels.ts): the front door's PATCH_LEVEL when it
   * started the task. Unset (level 0) for a workflow started before levels: retired, refused.
   */
  patchLevel?: number;
  /** State carried across continue-as-new. */
  carry?: CarriedState;
}

export interface CarriedState {
  task: WireTask;
  children?: ChildTask[];
  agentTaskId?: string;
  agentContextId?: string;
  version: number;
  costMinor?: number;
  createdAt: string;
  pushConfigIds?: string[];
  /** The hold was decided (reserved, or not needed) before the first agent call. */
  funded?: boolean;
  /** What was reserved for the task (0: nothing). */
  heldMinor?: number;
}

/** Argument of the `sendMessage` update: one client message for this task. */
export interface SendMessageArgs {
  message: WireMessage;
  /** Answer as soon as the message is accepted instead of when the turn ends (1.0 returnImmediately, 0.3 blocking=false). */
  returnImmediately: boolean;
  historyLength?: number;
  /** Push-notification configs given inline with the message (already stored). */
  pushConfigIds?: string[];
  /**
   * The request's own metadata (1.0 SendMessageRequest.metadata, 0.3 MessageSendParams.metadata, 0.1 `params.metadata`),
   * passed on with the message to the agent as its request's metadata. Absent in histories recorded before it was.
   */
  metadata?: Record<string, unknown>;
}

/** The agent-refresh schedule's argument to every run of agentRefreshWorkflow (workflows/registry-workflow.ts). */
export interface AgentRefreshArgs {
  tenant: string;
  agentId: string;
}

export interface AgentRefreshSweepArgs extends Partial<HousekeepingArgs> {
  /** An agent whose last probe is older than this is due. */
  intervalMs: number;
}

/**
 * A housekeeping workflow's pace (workflows/housekeeping.ts): one long-lived run per job, which works every `everyMs`
 * and continues as new after `runsPerExecution` rounds. Absent in runs a Temporal Schedule started (before the
 * long-lived workflows): those work once and end.
 */
export interface HousekeepingArgs {
  everyMs: number;
  /** Rounds before the run continues as new (its history stays short). Default HOUSEKEEPING_RUNS_PER_EXECUTION. */
  runsPerExecution?: number;
}

/** The orphan sweep's arguments (workflows/orphans-workflow.ts). */
export type OrphanSweepArgs = HousekeepingArgs;

/** A task an agent started through Switchboard while working on this one. */
export interface ChildTask {
  taskId: string;
  agentId: string;
  /** Set when the child has ended: its state and its cost including its own children's. */
  state?: TaskState;
  totalCostMinor?: number;
}

/** The agent's own ids for the conversation behind a gateway task. */
export interface AgentTaskRef {
  agentTaskId: string;
  agentContextId?: string;
}

/**
 * An agent's JSON-RPC error, as the forwarding activity's failure carries it (`details[0].agentError`): the client
 * of a new task gets it as the error of its request.
 */
export interface AgentRpcError {
  code: number;
  message: string;
}

/** What one forwarding attempt learned from the agent. */
export interface ForwardResult {
  agentTaskId?: string;
  agentContextId?: string;
  state: TaskState;
  /** The agent's status message, ids already rewritten to the gateway's task. */
  statusMessage?: WireMessage;
  /** The agent's artifacts for the task so far (they replace the previous list). */
  artifacts: WireArtifact[];
  /** A cost the agent reported in the task's metadata (`metadata.cost`, see src/core/agents/agent-cost.ts), in minor units. */
  costMinor?: number;
  /** The agent's task metadata (its `switchboard` key dropped): kept on the gateway's task for the client. */
  metadata?: Record<string, unknown>;
  /**
   * The agent answered with a Message and made no task (A2A §3.1.1): `statusMessage` is that message. Its client gets
   * the Message (task-state.ts directAnswerOf); the gateway's task records the exchange all the same.
   */
  message?: MessageAnswer;
  /**
   * The agent kept its stream open at this interruption (a 0.x agent's `final: false` at input-required or
   * auth-required): a 0.x client's stream of the task stays open too, to the next terminal state (keepsStreamOpen).
   */
  streamOpen?: boolean;
}

/** How an agent's Message answer is marked on the gateway's task (`metadata.switchboard.answer`) and its last event. */
export interface MessageAnswer {
  kind: 'message';
  /** The message named a task (the agent's, rewritten to the gateway's like every id): its client is shown that id. */
  inTask: boolean;
  /** The messageId of the client's message it answers: a resend of that message is answered with it again. */
  inReplyTo: string;
}

/**
 * How long a blocking turn's first exchange (a local activity in the workflow task that starts the turn, see
 * activities/forward-message.ts forwardFirstExchange) runs the turn before handing it to the forwarding activity.
 * Short, because the workflow can take no cancel and answer no query while it runs.
 */
export const FIRST_EXCHANGE_MS = 1_000;

/**
 * What a turn's first exchange ended with: the agent's answer, or the turn handed to the forwarding activity, with
 * the task the agent named so far (`handoff`) and the key of the turn parked in the process that ran it (`adopt`).
 */
export type FirstExchange = (ForwardResult & FirstAnswer) | { handoff: AgentTaskRef | null; why: string; adopt?: string };

/** What the first exchange adds to an agent's terminal answer: the workflow settles the task in the same workflow task. */
export interface FirstAnswer {
  /**
   * A first exchange that finished a fresh task itself (ForwardArgs.settle, patch level 7; and level 3's): its final
   * status time, and whether it wrote the final record and the settlement. The workflow applies the answer with that
   * time, so its task is the one recorded, and does not write them again.
   */
  finish?: { at: string; written: boolean };
  /**
   * How many child tasks the agent started through Switchboard for this task, linked in PostgreSQL (migration 021).
   * Their links reach the workflow as signals, in its next workflow task: it waits for them when it knows fewer.
   */
  childrenLinked?: number;
  /**
   * The events the turn relayed and did not log (ForwardArgs.atFinish, patch level 5): the workflow's finishTask
   * logs them before the final state. Bounded: a first exchange logs bigger ones itself.
   */
  relayed?: NewEvent[];
}

/** One row of the PostgreSQL projection, written by the `recordTask` activity on every state change. */
export interface TaskRecord {
  tenant: string;
  agentId: string;
  task: WireTask;
  version: number;
  createdAt: string;
  parentTaskId?: string;
  depth?: number;
  /** The event this change puts in the task's event log (its key makes a retried write a no-op). */
  event?: NewEvent;
}

/** An event for the task's log (src/core/events/event-log.ts). */
export interface NewEvent {
  /** Idempotency key, unique per task: appending the same key twice stores the event once. */
  key: string;
  event: StreamEvent;
}

export interface SettlementRequest {
  tenant: string;
  taskId: string;
  agentId: string;
  requester: string;
  finalState: TaskState;
  /** Price from the registration, or the agent's reported cost: charged if completed, capped by the task's hold. */
  amountMinor: number;
  /** The terminal outcome for the agent's reputation (finer than finalState). */
  outcome: TrustOutcome;
  /** When the task started (its first message) and reached its terminal state: the latency the reputation uses. */
  startedAt: string;
  endedAt: string;
}

/**
 * How a terminal task ended, for the agent's trust record: the A2A state, except that a failed task is
 * `timeout` when the agent call timed out and `expired` when the client never answered an input-required task,
 * and a task refused for lack of funds is `unfunded` (the agent was never called).
 */
export type TrustOutcome = 'completed' | 'failed' | 'timeout' | 'expired' | 'canceled' | 'rejected' | 'unfunded';

/** Reserve `amountMinor` on the requester's account for the task, before the agent is called. */
export interface HoldRequest {
  tenant: string;
  taskId: string;
  agentId: string;
  requester: string;
  amountMinor: number;
}

// ---- NANDA capability evaluations (workflows/certification.ts) ----

export interface CertificationProbe {
  skillId: string;
  text: string;
}

export interface CertificationInput {
  tenant: string;
  certificationId: string;
  agentId: string;
  endpoint: AgentEndpoint;
  probes: CertificationProbe[];
  /** The share of probes (0–1) that must pass. */
  passScore: number;
  /** How long one probe may take (ms). */
  probeTimeoutMs: number;
}

export interface ProbeResult {
  skill_id: string;
  example: string;
  state: string;
  passed: boolean;
  detail?: string;
}

export interface CertificationOutcome {
  tenant: string;
  certificationId: string;
  state: 'passed' | 'failed';
  score: number;
  results: ProbeResult[];
}

export const certificationWorkflowId = (tenant: string, certificationId: string) => `certification:${tenant}:${certificationId}`;

/** The certification workflow, as clients start it. */
export type CertificationWorkflow = (input: CertificationInput) => Promise<{ state: 'passed' | 'failed'; score: number }>;

// ---- Genesis Nexus EVENT deliveries (workflows/genesis-events.ts) ----

/** How often a subscriber may get an event: once at most, at least once (retried), or once (one delivery id). */
export const DELIVERY_GUARANTEES = ['at-most-once', 'at-least-once', 'exactly-once'] as const;
export type DeliveryGuarantee = (typeof DELIVERY_GUARANTEES)[number];

export interface GenesisEventInput {
  tenant: string;
  messageId: string;
  guarantee: DeliveryGuarantee;
  /** When the envelope's ttl passes (epoch ms); unset: no ttl. */
  expiresAt?: number;
  subscriptionIds: string[];
  /** First retry delay (ms, then doubling up to a minute). Default 1 s. */
  retryInitialMs?: number;
}

/** The EVENT delivery workflow, as clients start it. */
export type GenesisEventWorkflow = (input: GenesisEventInput) => Promise<Record<string, string>>;

/** The task workflow, as clients start it (workflows/task-workflow.ts). */
export type TaskWorkflow = (input: TaskInput) => Promise<WireTask>;

/**
 * What a fresh task's first exchange needs to finish the task itself when the agent ends it at once (ForwardArgs.settle,
 * patch level 7): the settlement's terms the workflow knows (the task itself is in ForwardArgs.record).
 */
export interface SettleAtAnswer {
  requester: string;
  priceMinor: number;
  heldMinor: number;
  /** The child tasks the workflow knows of: the statement settles only if no more are linked in PostgreSQL. */
  knownChildren: number;
  /**
   * The workflow task that runs this may have run before (the server refused its completion, or it timed out): an
   * earlier attempt's settled answer is read first (bookkeeping.ts answeredBefore) and returned instead of calling
   * the agent again.
   */
  again?: boolean;
}

/** The level the front door starts new task workflows at (workflows/levels.ts says what each level changes). */
export const PATCH_LEVEL = 7;
/** The oldest level this code replays and runs (workflows/levels.ts refuses the ones below). */
export const OLDEST_LEVEL = 3;
