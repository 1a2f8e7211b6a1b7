/**
 * This process's side of the WebSocket hub: the agents' sockets it holds, the Temporal task queue only its
 * hub worker polls (a turn for an agent is forwarded by an activity scheduled there, see workflows/hub.ts),
 * and the wake-ups of the forwarding activities waiting here for a turn's outcome.
 *
 * Which process holds an agent's socket is in PostgreSQL (hub_connections), so any process's workflow can find
 * the queue. A socket is one agent's; a newer connection of the same agent replaces the older one.
 */
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import type { Logger } from 'pino';
import type { EventHub } from '../../core/events/hub';
import { type HubConnection, type HubLink, HubTurns } from '../../core/hub/turns';

export type { HubConnection };

export interface HubSettings {
  /** The largest frame an agent may send (bytes); a larger one closes the socket with 1009. */
  maxFrameBytes: number;
  /** How often the hub pings each socket; one without a pong by the next ping is dropped. */
  pingMs: number;
  /** An agent silent this long (no heartbeat, no other frame) is marked down and its socket closed (4000). */
  heartbeatTimeoutMs: number;
  /** Frames per second an agent may send (a burst of twice as many is let through); past it they are refused. */
  maxFramesPerSecond: number;
}

/**
 * Close codes the hub uses besides the standard ones (4000–4999 are the application's). `revoked`: the agent key
 * the socket was opened with no longer holds (revoked, deleted, expired; its agent or tenant deleted).
 */
export const HUB_CLOSE = { heartbeatTimeout: 4000, revoked: 4001, replaced: 4002, notAHubAgent: 4003 } as const;

export const DEFAULT_HUB_SETTINGS: HubSettings = { maxFrameBytes: 1024 * 1024, pingMs: 20_000, heartbeatTimeoutMs: 60_000, maxFramesPerSecond: 100 };

export interface AgentHubDeps {
  pool: Pool;
  events: EventHub;
  log: Pick<Logger, 'info' | 'warn' | 'error'>;
  /** The deployment's task queue: this process's hub queue is derived from it. */
  taskQueue: string;
  settings?: Partial<HubSettings>;
}

export class AgentHub implements HubLink {
  /** The task queue only this process's hub worker polls. */
  readonly queue: string;
  readonly settings: HubSettings;
  readonly turns: HubTurns;
  private readonly connections = new Map<string, HubConnection>();
  private readonly waiters = new Map<string, Set<() => void>>();
  private readonly unlisten: () => void;

  constructor(readonly deps: AgentHubDeps) {
    this.queue = `${deps.taskQueue}.hub.${randomUUID()}`;
    this.settings = { ...DEFAULT_HUB_SETTINGS, ...deps.settings };
    this.turns = new HubTurns(deps.pool);
    // A task canceled while its agent was away (migration 031): the process holding the agent's socket tells it.
    // Undefined (the LISTEN connection was remade, notices may be lost): every agent connected here is looked at.
    this.unlisten = deps.events.onConfigChange((n) => {
      if (!n) for (const c of this.connections.values()) void this.tellCancels(c);
      else if (n.kind === 'hub_cancels' && n.id) {
        const c = this.connection(n.tenant, n.id);
        if (c) void this.tellCancels(c);
      }
    });
  }

  /**
   * Sends the agent tasks/cancel for each of its tasks canceled while it could not be told (not connected within
   * the cancel's wait), once: at each connect, and when the cancel is recorded while it is connected here.
   */
  private async tellCancels(c: HubConnection): Promise<void> {
    if (c.closed) return;
    try {
      const ids = await this.turns.claimCancels(c.tenant, c.agentId);
      for (const [i, id] of ids.entries()) {
        // A write the socket fails gives back this cancel and the ones after it: the agent hears them at its next connect.
        const told = await c.notifyAgent('tasks/cancel', { id }).then(() => true, () => false);
        if (!told) {
          for (const untold of ids.slice(i)) await this.turns.untellCancel(c.tenant, untold);
          return;
        }
      }
    } catch (err) {
      this.deps.log.warn({ err, agentId: c.agentId }, 'hub: the cancels an agent is to be told of could not be read; told at its next connect');
    }
  }

  /**
   * Writes tasks/cancel of `taskId` to the agent's socket, the cancel already claimed as told. A socket that fails
   * the write gives the claim back, so the agent is told at its next connect. @throws the write's error then.
   */
  async tellCancel(c: HubConnection, taskId: string): Promise<void> {
    try {
      await c.notifyAgent('tasks/cancel', { id: taskId });
    } catch (err) {
      await this.turns.untellCancel(c.tenant, taskId);
      throw err;
    }
  }

  get pool(): Pool {
    return this.deps.pool;
  }

  connection(tenant: string, agentId: string): HubConnection | undefined {
    const c = this.connections.get(`${tenant}/${agentId}`);
    return c && !c.closed ? c : undefined;
  }

  /**
   * Makes `c` the agent's connection: an older one (here) is closed, the agent's queue in PostgreSQL is this
   * process's (replacing another process's), and the agent is healthy again.
   */
  async attach(c: HubConnection): Promise<void> {
    // Closed while it started (its first frame was refused, say): it must not replace a newer connection (4002).
    if (c.closed) return;
    const key = `${c.tenant}/${c.agentId}`;
    const older = this.connections.get(key);
    this.connections.set(key, c);
    if (older && older !== c) older.close(HUB_CLOSE.replaced, 'replaced by a newer connection of the same agent');
    await this.deps.pool.query(
      `INSERT INTO hub_connections (tenant, agent_id, connection_id, task_queue, expires_at) VALUES ($1, $2, $3, $4, now() + $5 * interval '1 millisecond')
       ON CONFLICT (tenant, agent_id) DO UPDATE SET connection_id = EXCLUDED.connection_id, task_queue = EXCLUDED.task_queue, connected_at = now(), expires_at = EXCLUDED.expires_at`,
      [c.tenant, c.agentId, c.id, this.queue, this.leaseMs()],
    );
    await this.setStatus(c.tenant, c.agentId, 'healthy', 'connected to the hub');
    await this.tellCancels(c);
  }

  /** How long a connection's row stays valid unrenewed: past one ping and the heartbeat timeout, the socket is surely gone. */
  private leaseMs(): number {
    return this.settings.heartbeatTimeoutMs + this.settings.pingMs;
  }

  /** Keeps the connection's row alive (the socket answered its last ping): turns keep coming to this process. */
  async renew(c: HubConnection): Promise<void> {
    await this.deps.pool.query(
      `UPDATE hub_connections SET expires_at = now() + $4 * interval '1 millisecond' WHERE tenant = $1 AND agent_id = $2 AND connection_id = $3`,
      [c.tenant, c.agentId, c.id, this.leaseMs()],
    );
  }

  /** Forgets a closed connection (unless a newer one replaced it, here or in another process). */
  async detach(c: HubConnection): Promise<void> {
    const key = `${c.tenant}/${c.agentId}`;
    if (this.connections.get(key) === c) this.connections.delete(key);
    await this.deps.pool.query('DELETE FROM hub_connections WHERE tenant = $1 AND agent_id = $2 AND connection_id = $3', [c.tenant, c.agentId, c.id]);
    // Gone without a word is a missed heartbeat too: down unless it has reconnected (to any process) by then.
    const { heartbeatTimeoutMs } = this.settings;
    setTimeout(() => {
      void this.deps.pool
        .query('SELECT 1 FROM hub_connections WHERE tenant = $1 AND agent_id = $2', [c.tenant, c.agentId])
        .then(async ({ rowCount }) => {
          if (!rowCount) await this.setStatus(c.tenant, c.agentId, 'down', `hub: disconnected, no heartbeat for ${Math.round(heartbeatTimeoutMs / 1000)} s`);
        })
        .catch(() => undefined); // the pool may be closed by then (shutdown)
    }, heartbeatTimeoutMs).unref();
  }

  /**
   * The registry's health of a hub agent is the hub's to say (the refresh schedule does not probe ws-agent:// URLs).
   * An agent still registered with an HTTP URL (connected, not yet agent.register'ed) keeps the probes' verdict.
   */
  async setStatus(tenant: string, agentId: string, status: 'healthy' | 'down', reason: string): Promise<void> {
    await this.deps.pool.query(
      `UPDATE agents SET status = $3, status_reason = $4, consecutive_failures = 0,
              status_changed_at = CASE WHEN status = $3 THEN status_changed_at ELSE now() END
        WHERE tenant = $1 AND id = $2 AND endpoint_url LIKE 'ws-agent:%'`,
      [tenant, agentId, status, reason],
    );
  }

  /** Wakes the activities waiting in this process for the turn's outcome. */
  wake(turnKey: string): void {
    for (const w of this.waiters.get(turnKey) ?? []) w();
  }

  /** Resolves when the turn is woken here, or after `ms` (the caller then looks in PostgreSQL: another process may have it). */
  waitForWake(turnKey: string, ms: number, signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const set = this.waiters.get(turnKey) ?? new Set();
      this.waiters.set(turnKey, set);
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        set.delete(done);
        if (set.size === 0) this.waiters.delete(turnKey);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener('abort', done, { once: true });
      set.add(done);
    });
  }

  /** Closes every socket (1001, going away): the agents reconnect, to this process's successor or another. */
  closeAll(): void {
    this.unlisten();
    for (const c of this.connections.values()) c.close(1001, 'Switchboard is shutting down; reconnect');
  }
}
