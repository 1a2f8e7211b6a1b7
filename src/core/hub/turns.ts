/**
 * Hub turns in PostgreSQL (migration 010): how far each turn sent to a hub agent got, so that a retried or
 * re-routed forwarding attempt, in this process or another, neither sends a turn the agent acknowledged again
 * nor misses an outcome another process received.
 */
import type { Pool } from 'pg';
import type { WireArtifact } from '../../../task/wire';
import type { ForwardResult } from '../../../task/contracts';

/** What the hub needs of a socket's session (src/api/hub/session.ts holds the socket). */
export interface HubConnection {
  readonly id: string;
  readonly tenant: string;
  readonly agentId: string;
  readonly closed: boolean;
  /** Sends a turn (tasks/send or message/send) of a task and resolves once it is written to the socket. */
  sendTurn(frame: Record<string, unknown>, taskId: string): Promise<void>;
  /** Sends a request whose answer nobody waits for (tasks/cancel); resolves once written, rejects when the socket failed. */
  notifyAgent(method: string, params: Record<string, unknown>): Promise<void>;
  /** The JSON-RPC method that carries a turn to this agent: `tasks/send` unless its card declares 0.3 or later. */
  readonly turnMethod: 'tasks/send' | 'message/send';
  close(code: number, reason: string): void;
}

/**
 * What the hub's activities (activities/hub.ts) need of the process's hub (src/api/hub/hub.ts AgentHub): the
 * queue only this process's hub worker polls, the turns, the agents' sockets held here and the wake-ups.
 */
export interface HubLink {
  readonly queue: string;
  readonly turns: HubTurns;
  connection(tenant: string, agentId: string): HubConnection | undefined;
  tellCancel(c: HubConnection, taskId: string): Promise<void>;
  waitForWake(turnKey: string, ms: number, signal: AbortSignal): Promise<void>;
}

export interface TurnKey {
  tenant: string;
  taskId: string;
  messageId: string;
}

export type TurnState = 'pending' | 'sent' | 'acked' | 'done';

/** What a finished turn holds: the outcome for the workflow, or the agent's JSON-RPC error (the turn fails). */
export type TurnResult = { outcome: ForwardResult } | { error: { code: number; message: string } };

export interface OpenTurn extends TurnKey {
  agentId: string;
  contextId: string;
  state: TurnState;
  artifacts: WireArtifact[];
}

export const turnKeyText = (k: TurnKey) => `${k.tenant}/${k.taskId}/${k.messageId}`;

export class HubTurns {
  constructor(private readonly pool: Pool) {}

  /** Creates the turn if it is new; either way returns its state (and result, once done). */
  async open(k: TurnKey, agentId: string, contextId: string): Promise<{ state: TurnState; result: TurnResult | null }> {
    await this.pool.query(
      `INSERT INTO hub_turns (tenant, task_id, message_id, agent_id, context_id) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`,
      [k.tenant, k.taskId, k.messageId, agentId, contextId],
    );
    return (await this.get(k))!;
  }

  async get(k: TurnKey): Promise<{ state: TurnState; result: TurnResult | null } | undefined> {
    const { rows } = await this.pool.query<{ state: TurnState; result: TurnResult | null }>(
      'SELECT state, result FROM hub_turns WHERE tenant = $1 AND task_id = $2 AND message_id = $3',
      [k.tenant, k.taskId, k.messageId],
    );
    return rows[0];
  }

  /** Moves a turn forward (pending → sent → acked), never back and never out of done. */
  async advance(k: TurnKey, to: 'sent' | 'acked'): Promise<void> {
    const from = to === 'sent' ? ['pending'] : ['pending', 'sent'];
    await this.pool.query(
      'UPDATE hub_turns SET state = $4, updated_at = now() WHERE tenant = $1 AND task_id = $2 AND message_id = $3 AND state = ANY($5)',
      [k.tenant, k.taskId, k.messageId, to, from],
    );
  }

  /** Records the outcome once: a second report of the same turn changes nothing. @returns whether this one counted. */
  async finish(k: TurnKey, result: TurnResult): Promise<boolean> {
    const { rowCount } = await this.pool.query(
      `UPDATE hub_turns SET state = 'done', result = $4, updated_at = now() WHERE tenant = $1 AND task_id = $2 AND message_id = $3 AND state <> 'done'`,
      [k.tenant, k.taskId, k.messageId, result],
    );
    return (rowCount ?? 0) > 0;
  }

  /** The agent's open turn of a task (an update names the task only); undefined when it has none. */
  async openTurnOf(tenant: string, agentId: string, taskId: string): Promise<OpenTurn | undefined> {
    const { rows } = await this.pool.query<{ message_id: string; context_id: string; state: TurnState; artifacts: WireArtifact[] }>(
      `SELECT message_id, context_id, state, artifacts FROM hub_turns WHERE tenant = $1 AND agent_id = $2 AND task_id = $3 AND state <> 'done'
        ORDER BY created_at DESC LIMIT 1`,
      [tenant, agentId, taskId],
    );
    const r = rows[0];
    return r && { tenant, taskId, messageId: r.message_id, agentId, contextId: r.context_id, state: r.state, artifacts: r.artifacts };
  }

  /**
   * The canceled tasks the agent is still to be told of (migration 031 marks a canceled task's turns): claimed, so
   * that whichever process holds the agent's socket tells it once. @returns their task ids.
   */
  async claimCancels(tenant: string, agentId: string): Promise<string[]> {
    const { rows } = await this.pool.query<{ task_id: string }>(
      `UPDATE hub_turns SET cancel_told_at = now() WHERE tenant = $1 AND agent_id = $2 AND cancel_requested_at IS NOT NULL AND cancel_told_at IS NULL RETURNING task_id`,
      [tenant, agentId],
    );
    return [...new Set(rows.map((r) => r.task_id))];
  }

  /**
   * The workflow tells the agent of its task's cancel now: its turns are marked told, so that the agent is not told
   * again when it reconnects. @returns false when it was told already (at a reconnect, meanwhile).
   */
  async claimCancelOf(tenant: string, taskId: string): Promise<boolean> {
    const { rowCount } = await this.pool.query('UPDATE hub_turns SET cancel_told_at = now() WHERE tenant = $1 AND task_id = $2 AND cancel_told_at IS NULL', [tenant, taskId]);
    if (rowCount) return true;
    const told = await this.pool.query('SELECT 1 FROM hub_turns WHERE tenant = $1 AND task_id = $2 LIMIT 1', [tenant, taskId]);
    return !told.rowCount; // no turn recorded at all: told as before
  }

  /**
   * A cancel claimed as told whose write failed (the socket died under it): it waits for the agent's next connect
   * again, marked requested even if the task's cancel trigger skipped it while it was claimed.
   */
  async untellCancel(tenant: string, taskId: string): Promise<void> {
    await this.pool.query(
      `UPDATE hub_turns SET cancel_told_at = NULL, cancel_requested_at = coalesce(cancel_requested_at, now())
        WHERE tenant = $1 AND task_id = $2 AND state <> 'pending' AND cancel_told_at IS NOT NULL`,
      [tenant, taskId],
    );
  }

  async saveArtifacts(k: TurnKey, artifacts: WireArtifact[]): Promise<void> {
    await this.pool.query('UPDATE hub_turns SET artifacts = $4, updated_at = now() WHERE tenant = $1 AND task_id = $2 AND message_id = $3', [
      k.tenant, k.taskId, k.messageId, JSON.stringify(artifacts),
    ]);
  }
}
