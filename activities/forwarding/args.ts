/**
 * What the forwarding activities take: the turn (ForwardArgs, in workflow history) and the process's means (ForwardDeps).
 */
import type { Pool } from 'pg';
import type { EventHub } from '../../src/core/events/hub';
import type { AgentLink } from '../../src/core/agents/agent-client';
import type { AgentEndpoint, AgentRetryPolicy, AgentTaskRef, SettleAtAnswer, TaskRecord } from '../../task/contracts';
import type { UnfundedPolicy } from '../../src/core/ledger/postings';
import type { WireMessage } from '../../task/wire';
import type { AgentPushDeps } from '../push-follow';

export interface ForwardArgs {
  endpoint: AgentEndpoint;
  message: WireMessage;
  /** The client request's metadata (SendMessageArgs.metadata): the agent's request carries it. Absent: none. */
  metadata?: Record<string, unknown>;
  /** The agent's own ids for this conversation, once known (a follow-up continues the agent's task). */
  agentTaskId?: string;
  agentContextId?: string;
  tenant: string;
  /** The agent called: its outbound credential is looked up by (tenant, agentId) in the activity, never passed in. */
  agentId?: string;
  gatewayTaskId: string;
  gatewayContextId: string;
  /** The agent's retry policy (absent in workflows started before it was passed: the defaults). */
  retry?: AgentRetryPolicy;
  /**
   * The task's change that starts the turn (state working), written here instead of by a local activity of its own:
   * one workflow activation fewer per task. A first attempt writes it while it calls the agent (startTurn), a later
   * one before. Every attempt writes it (a no-op once written: its version and event key make it idempotent).
   */
  record?: TaskRecord;
  /**
   * The turn's message was delivered by its first exchange (forwardFirstExchange) and the agent runs it as this
   * task: the activity follows it instead of sending the message again.
   */
  attach?: AgentTaskRef;
  /** The first exchange's turn, parked in the process that ran it (its event-sink key): adopted when this attempt runs there. */
  adopt?: string;
  /** The turn's attempts made before this activity's first (the first exchange's, when it failed): for the retry count. */
  attemptsBefore?: number;
  /**
   * A first exchange's (patch level 5): a terminal answer's child tasks are counted, and the events it relayed while
   * its sink held them are logged, by the workflow's finishTask, in its statement. The first exchange neither
   * counts nor logs them then: its result carries the events (`relayed`). Unset (levels 3 and 4): it does both.
   */
  atFinish?: boolean;
  /**
   * Patch level 7, a fresh task's first exchange (implies atFinish): an answer that ends the task is finished here,
   * its relayed events, final record and settlement in finishTask's statement, and the answer kept with the task's
   * claim for a rerun of the workflow task (SettleAtAnswer.again). See activities/forward-message.ts settleHere.
   */
  settle?: SettleAtAnswer;
}

export interface ForwardDeps {
  /** The guarded transports, with this agent's credential. */
  link: AgentLink;
  pool: Pool;
  hub: EventHub;
  /** Following agents' tasks by their push notifications; unset: agents are polled. */
  push?: AgentPushDeps;
  /** How settlements treat accounts without funds (a first exchange that settles its task: ForwardArgs.settle). */
  unfunded?: UnfundedPolicy;
  /** Aborted when this process's worker stops: every turn running here hands over (Turn.handOff). */
  drain?: AbortSignal;
}
