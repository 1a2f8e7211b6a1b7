/**
 * Ends what a caller holds open (SSE and gRPC streams, hub sockets) once the credential that opened it would no
 * longer be let in: its key revoked, deleted or expired, its agent or its tenant deleted, its JWT expired. A JWT
 * cannot be revoked, but its tenant (and agent) can be deleted. Authentication decides at the start of a call;
 * this decides for as long as the call stays open.
 *
 * Every process hears of a change at its commit: migration 023's triggers NOTIFY a key's change and a tenant's
 * delete (an agent's delete revokes its keys), 018's an agent's change. The watch then checks the callers the
 * notice concerns against PostgreSQL, milliseconds after the change, in whichever process holds them. It also
 * checks every open caller each `sweepMs` (1 s): the bound on a notice that never came (a LISTEN connection down,
 * a call that opened while the notice passed), and what no notice announces: an expiry.
 */
import type { Pool } from 'pg';
import type { Logger } from 'pino';
import type { Caller } from './caller';
import type { ConfigListener, EventHub } from '../events/hub';

export interface CredentialWatchDeps {
  pool: Pool;
  /** The process's event hub: its config notices start a check at once. Without it, only the sweep does. */
  events?: Pick<EventHub, 'onConfigChange'>;
  log: Pick<Logger, 'warn'>;
  /** How often every open caller is checked (default 1 s). */
  sweepMs?: number;
}

interface Watched {
  caller: Caller;
  end(reason: string): void;
}

/** What PostgreSQL says of a set of callers' credentials now. */
interface Standing {
  /** key id → revoked | expired | valid; a key without an entry was deleted. */
  keys: Record<string, 'revoked' | 'expired' | 'valid'>;
  tenants: Set<string>;
  /** `tenant\nagent id` of the agents that exist. */
  agents: Set<string>;
  /**
   * hub enrollment token id → revoked | expired | valid; a token without an entry was deleted. (Used up is not a
   * lapse: the socket's own registration may have used its last use, and it then watches the agent key it got.)
   */
  tokens: Record<string, 'revoked' | 'expired' | 'valid'>;
}

const agentKey = (tenant: string, agentId: string) => `${tenant}\n${agentId}`;

export class CredentialWatch {
  private readonly open = new Set<Watched>();
  private timer?: NodeJS.Timeout;
  private sweeping = false;
  /** Whether the last check failed (PostgreSQL away): logged once per outage, not every second. */
  private failing = false;
  private readonly unsubscribe: () => void;
  private readonly sweepMs: number;

  constructor(private readonly deps: CredentialWatchDeps) {
    this.sweepMs = deps.sweepMs ?? 1_000;
    const listener: ConfigListener = (n) => {
      if (this.open.size === 0) return;
      if (!n) return void this.check([...this.open]);
      const concerned = [...this.open].filter(({ caller: c }) => {
        if (n.kind === 'api_keys') return c.via === 'key' && c.keyId === n.id;
        if (n.kind === 'tenants') return c.tenant === n.tenant;
        if (n.kind === 'agents') return c.agentId !== undefined && c.agentId === n.id && c.tenant === n.tenant;
        return false;
      });
      if (concerned.length) void this.check(concerned);
    };
    this.unsubscribe = deps.events?.onConfigChange(listener) ?? (() => undefined);
  }

  /**
   * Watches `caller` for as long as what it opened is open: `end` is called (once) with why the credential no
   * longer holds, and the transport closes what it opened with that reason.
   * @returns the function to call when it closed by itself (the watch forgets it).
   */
  watch(caller: Caller, end: (reason: string) => void): () => void {
    const entry: Watched = { caller, end };
    this.open.add(entry);
    this.timer ??= setInterval(() => this.sweep(), this.sweepMs).unref();
    return () => this.forget(entry);
  }

  /** How many open calls are watched in this process. */
  get size(): number {
    return this.open.size;
  }

  /** Stops (the app closes): nothing is ended, the transports close their own. */
  close(): void {
    this.unsubscribe();
    this.open.clear();
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private forget(entry: Watched): void {
    this.open.delete(entry);
    if (this.open.size === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  private sweep(): void {
    if (this.sweeping || this.open.size === 0) return;
    this.sweeping = true;
    void this.check([...this.open]).finally(() => (this.sweeping = false));
  }

  /** Ends every entry of `entries` whose credential no longer holds. A database error ends nothing (the next sweep retries). */
  private async check(entries: Watched[]): Promise<void> {
    let standing: Standing;
    try {
      standing = await this.standingOf(entries.map((e) => e.caller));
    } catch (err) {
      // Keys checked before the outage keep working meanwhile (src/core/auth/keys.ts); so does what they opened.
      if (!this.failing) this.deps.log.warn({ err }, 'credential watch: open streams cannot be checked; retrying every sweep until PostgreSQL answers');
      this.failing = true;
      return;
    }
    this.failing = false;
    const now = Date.now();
    for (const entry of entries) {
      if (!this.open.has(entry)) continue; // closed meanwhile
      const why = lapsed(entry.caller, standing, now);
      if (why === undefined) continue;
      this.forget(entry);
      entry.end(why);
    }
  }

  private async standingOf(callers: Caller[]): Promise<Standing> {
    const keyIds = [...new Set(callers.filter((c) => c.via === 'key').map((c) => c.keyId))];
    const tenants = [...new Set(callers.map((c) => c.tenant))];
    const agents = [...new Map(callers.filter((c) => c.agentId !== undefined).map((c) => [agentKey(c.tenant, c.agentId!), c])).values()];
    const tokenIds = [...new Set(callers.filter((c) => c.via === 'enrollment').map((c) => c.keyId))];
    const { rows } = await this.deps.pool.query<{ keys: Standing['keys'] | null; tenants: string[]; agents: string[]; tokens: Standing['tokens'] | null }>(
      `SELECT
         (SELECT json_object_agg(id, CASE WHEN revoked_at IS NOT NULL THEN 'revoked' WHEN expires_at <= now() THEN 'expired' ELSE 'valid' END)
            FROM api_keys WHERE id = ANY($1::text[])) AS keys,
         ARRAY(SELECT id FROM tenants WHERE id = ANY($2::text[])) AS tenants,
         ARRAY(SELECT a.tenant || chr(10) || a.id FROM agents a JOIN unnest($3::text[], $4::text[]) AS w (tenant, id) ON a.tenant = w.tenant AND a.id = w.id) AS agents,
         (SELECT json_object_agg(id, CASE WHEN revoked_at IS NOT NULL THEN 'revoked' WHEN expires_at <= now() THEN 'expired' ELSE 'valid' END)
            FROM enrollment_tokens WHERE id = ANY($5::text[])) AS tokens`,
      [keyIds, tenants, agents.map((c) => c.tenant), agents.map((c) => c.agentId), tokenIds],
    );
    return { keys: rows[0].keys ?? {}, tenants: new Set(rows[0].tenants), agents: new Set(rows[0].agents), tokens: rows[0].tokens ?? {} };
  }
}

/** Why the caller's credential no longer holds, or undefined when it does. */
function lapsed(c: Caller, s: Standing, now: number): string | undefined {
  if (!s.tenants.has(c.tenant)) return `tenant ${c.tenant} was deleted`;
  if (c.agentId !== undefined && !s.agents.has(agentKey(c.tenant, c.agentId))) return `agent ${c.agentId} was deleted`;
  const what = c.via === 'jwt' ? 'the token' : c.via === 'enrollment' ? `the enrollment token ${c.keyId}` : `the API key ${c.keyId}`;
  if (c.via === 'enrollment') {
    const token = s.tokens[c.keyId];
    if (token === undefined) return `${what} was deleted`;
    if (token !== 'valid') return `${what} is ${token}`;
  }
  if (c.via === 'key') {
    const key = s.keys[c.keyId];
    if (key === undefined) return `${what} was deleted`;
    if (key === 'revoked') return `${what} was revoked`;
    if (key === 'expired') return `${what} expired`;
  }
  if (c.expiresAt && c.expiresAt.getTime() <= now) return `${what} expired`;
  return undefined;
}
