/**
 * Wakes the readers of a task's event log when the task has new events. Two sources:
 *  - in-process: a writer in this process (the worker's activities) hands over what it just committed, so a
 *    local stream needs no database round trip;
 *  - other processes: PostgreSQL LISTEN on EVENTS_CHANNEL (writers NOTIFY in the appending transaction).
 * Notices are only hints. Readers always continue from their own cursor in the log, and poll it every
 * `pollMs` as well, so a missed notice (while the LISTEN connection is down) delays an event, never loses one.
 *
 * The same connection LISTENs on AGENT_PUSH_CHANNEL: an agent's push (POST /agent-push/:id, in whichever process
 * got it) wakes the forwarding activity that follows that agent's task, here. Those are hints too (the activity
 * reads the task with GetTask, and polls as well).
 *
 * And on CONFIG_CHANNEL: an agent, credential or policy row changed (migrations 018 and 022, whoever wrote it), so the
 * process's caches of them (src/core/events/config-cache.ts) drop the entry; or a key was revoked, an agent or a tenant
 * deleted (023), so the key cache forgets the key and what its callers hold open ends (src/core/auth/credential-watch.ts). A cache trusts its entries only while
 * the connection is up; each (re)connect tells it to drop everything, since notices sent meanwhile were lost.
 */
import { Client, type ClientConfig } from 'pg';
import type { Logger } from 'pino';
import { EVENTS_CHANNEL, type EventNotice, type LoggedEvent } from './event-log';

/** The NOTIFY channel that wakes the activity following an agent's task (payload: AgentPushNotice). */
export const AGENT_PUSH_CHANNEL = 'switchboard_agent_push';

/** What the webhook tells the follower: which turn, and the agent task the push named (a hint to check). */
export interface AgentPushNotice {
  id: string;
  taskId: string;
}

/**
 * The NOTIFY channel of migration 018's triggers on `agents` and `policies`, 022's on `agent_credentials`, 023's on
 * `api_keys` and a deleted tenant, and 031's on a hub agent's canceled task (payload: ConfigNotice, JSON).
 */
export const CONFIG_CHANNEL = 'switchboard_config';

/**
 * A changed row: an agent (`id` names it), an agent's outbound credential (`id` names the agent; migration 022),
 * one of a tenant's policies, an API key (`id` names it; revoked, expired or deleted; migration 023), a deleted
 * tenant (023), or a canceled task a hub agent is still to be told of (`id` names the agent; migration 031).
 */
export interface ConfigNotice {
  kind: 'agents' | 'agent_credentials' | 'policies' | 'api_keys' | 'tenants' | 'hub_cancels';
  tenant: string;
  id: string | null;
}

/** Hears every ConfigNotice; undefined means anything may have changed (the LISTEN connection was (re)made). */
export type ConfigListener = (notice: ConfigNotice | undefined) => void;

export interface TaskListener {
  /** Events just committed by this process, in seq order. */
  onEvents(events: LoggedEvent[]): void;
  /** The task has events up to `seq` (another process wrote them). */
  onNotice(seq: number): void;
}

export interface EventHubOptions {
  /** Where to LISTEN; without it the hub is in-process only. */
  connection?: ClientConfig;
  log?: Logger;
  /** How often a reader polls the log when nothing woke it (default 1 s). */
  pollMs?: number;
}

const keyOf = (tenant: string, taskId: string) => `${tenant}\u0000${taskId}`;

/** Adds `listener` to `key`'s set in `map`; the returned function removes it (and the set, once empty). */
function addListener<L>(map: Map<string, Set<L>>, key: string, listener: L): () => void {
  let set = map.get(key);
  if (!set) map.set(key, (set = new Set()));
  set.add(listener);
  return () => {
    set.delete(listener);
    if (set.size === 0) map.delete(key);
  };
}

export class EventHub {
  readonly pollMs: number;
  private readonly listeners = new Map<string, Set<TaskListener>>();
  private readonly pushListeners = new Map<string, Set<(notice: AgentPushNotice) => void>>();
  private readonly configListeners = new Set<ConfigListener>();
  private client?: Client;
  private closed = false;
  private reconnectTimer?: NodeJS.Timeout;

  constructor(private readonly o: EventHubOptions = {}) {
    this.pollMs = o.pollMs ?? 1000;
  }

  /** Starts listening for other processes' notices (no-op without a connection). */
  async start(): Promise<void> {
    if (!this.o.connection || this.closed) return;
    const client = new Client(this.o.connection);
    client.on('notification', (n) => {
      if (n.channel === AGENT_PUSH_CHANNEL && n.payload) return this.agentPushed(n.payload);
      if (n.channel === CONFIG_CHANNEL && n.payload) return this.configChanged(n.payload);
      if (n.channel !== EVENTS_CHANNEL || !n.payload) return;
      let notice: EventNotice;
      try {
        notice = JSON.parse(n.payload) as EventNotice;
      } catch {
        return; // not ours
      }
      this.tell(this.listeners.get(keyOf(notice.tenant, notice.taskId)), (l) => l.onNotice(notice.seq));
    });
    client.on('error', (err) => {
      this.o.log?.warn({ err }, 'event LISTEN connection failed; readers fall back to polling until it is back');
      this.reconnectLater();
    });
    client.on('end', () => this.reconnectLater());
    await client.connect();
    await client.query(`LISTEN ${EVENTS_CHANNEL}; LISTEN ${AGENT_PUSH_CHANNEL}; LISTEN ${CONFIG_CHANNEL}`);
    this.client = client;
    for (const l of this.configListeners) l(undefined);
  }

  private reconnectLater(): void {
    if (this.closed || this.reconnectTimer) return;
    this.client = undefined;
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      this.start().catch(() => this.reconnectLater());
    }, 1000);
    this.reconnectTimer.unref();
  }

  subscribe(tenant: string, taskId: string, listener: TaskListener): () => void {
    return addListener(this.listeners, keyOf(tenant, taskId), listener);
  }

  /** Called by writers in this process right after their append committed. */
  publish(tenant: string, taskId: string, events: LoggedEvent[]): void {
    if (events.length === 0) return;
    this.tell(this.listeners.get(keyOf(tenant, taskId)), (l) => l.onEvents(events));
  }

  /** Whether other processes' notices reach this hub now (its LISTEN connection is up). */
  get listening(): boolean {
    return this.client !== undefined;
  }

  /** Calls `listener` for every agent push to follow `id` (heard through NOTIFY, or agentPushed in this process). */
  onAgentPush(id: string, listener: (notice: AgentPushNotice) => void): () => void {
    return addListener(this.pushListeners, id, listener);
  }

  /** An agent push for a follow of this process (the NOTIFY payload, JSON). */
  agentPushed(payload: string): void {
    let notice: AgentPushNotice;
    try {
      notice = JSON.parse(payload) as AgentPushNotice;
    } catch {
      return; // not ours
    }
    this.tell(this.pushListeners.get(notice.id), (l) => l(notice));
  }

  /** Calls `listener` for every agent or policy change heard, and with undefined on each (re)connect. */
  onConfigChange(listener: ConfigListener): () => void {
    this.configListeners.add(listener);
    return () => this.configListeners.delete(listener);
  }

  private configChanged(payload: string): void {
    let notice: ConfigNotice;
    try {
      notice = JSON.parse(payload) as ConfigNotice;
    } catch {
      return; // not ours
    }
    this.tell(this.configListeners, (l) => l(notice));
  }

  /**
   * Calls each listener. Last resort: one that throws is logged and the others still hear; nothing thrown here
   * reaches pg's connection (a NOTIFY handler: an uncaught exception) or the writer that published.
   */
  private tell<L>(listeners: Iterable<L> | undefined, call: (l: L) => void): void {
    for (const l of listeners ?? []) {
      try {
        call(l);
      } catch (err) {
        this.o.log?.error({ err }, 'event hub: a listener failed; the others were told');
      }
    }
  }

  /** Number of readers of one task, or of all tasks. */
  readers(tenant?: string, taskId?: string): number {
    if (tenant !== undefined && taskId !== undefined) return this.listeners.get(keyOf(tenant, taskId))?.size ?? 0;
    let n = 0;
    for (const s of this.listeners.values()) n += s.size;
    return n;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    const c = this.client;
    this.client = undefined;
    await c?.end().catch(() => undefined);
  }
}
