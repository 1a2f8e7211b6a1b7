/**
 * API keys and tenants in PostgreSQL. A key is `sb_` + 32 random bytes (base64url); only its SHA-256 is stored
 * (a fast hash is enough for a secret of that entropy) and the key itself is shown once, when it is made.
 *
 * Verified keys are cached for a short TTL so that authentication costs no query on the hot path; a revocation
 * in this process drops the entry at once, and every other process as its notice arrives (migration 023's
 * trigger NOTIFYs a key's revocation, expiry change or deletion, and an agent's delete revokes its keys): the
 * TTL (2 s) is the bound on a notice that never came.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Pool } from 'pg';
import type { Caller, Role } from './caller';
import type { ConfigNotice } from '../events/hub';
import { DependencyUnavailable, outageOf, poolBusy, poolExhausted } from '../health';
import { SingleFlight } from '../single-flight';
import { formatDuration } from '../retention/duration';

export const KEY_PREFIX = 'sb_';
/** The id SWITCHBOARD_ADMIN_KEY is known by in logs and the audit trail. */
export const ENV_ADMIN_KEY_ID = 'env-admin';

export interface KeyView {
  id: string;
  tenant: string | null;
  role: Role;
  agentId?: string;
  name: string;
  expiresAt?: string;
  revokedAt?: string;
  createdAt: string;
  lastUsedAt?: string;
}

export interface TenantView {
  id: string;
  name: string;
  quotas: Record<string, number>;
  /** The tenant's own task retention (`30d`, `12h`), or null: SWITCHBOARD_TASK_RETENTION. */
  retention: string | null;
  createdAt: string;
}

/** A key as authentication sees it: the caller it makes, less the tenant an admin may pick per request. */
export interface KeyIdentity {
  keyId: string;
  role: Role;
  /** null for an admin key. */
  tenant: string | null;
  agentId?: string;
  via: Caller['via'];
  /** When the credential stops being valid by itself (a key's expires_at, a JWT's exp). */
  expiresAt?: Date;
}

export function generateKey(): string {
  return KEY_PREFIX + randomBytes(32).toString('base64url');
}

export function hashKey(key: string): Buffer {
  return createHash('sha256').update(key, 'utf8').digest();
}

/** A syntactically valid key: the prefix and 43 base64url characters (32 bytes). */
export function looksLikeKey(token: string): boolean {
  return /^sb_[A-Za-z0-9_-]{43}$/.test(token);
}

export class KeyConflictError extends Error {}
export class UnknownTenantError extends Error {}

/** The columns a key is verified by. */
type KeyRow = { id: string; tenant: string | null; role: Role; agent_id: string | null; key_hash: Buffer; expires_at: Date | null };

interface CacheEntry {
  identity: KeyIdentity | undefined;
  until: number;
}

export interface KeyStoreOptions {
  /** SWITCHBOARD_ADMIN_KEY: accepted as an admin key without a row (its hash is kept in memory only). */
  envAdminKey?: string;
  /** How long a verified (or refused) key is remembered (ms). Default 2 s: a revocation elsewhere takes effect within it. */
  cacheTtlMs?: number;
}

export class KeyStore {
  private readonly cache = new Map<string, CacheEntry>();
  private readonly envAdminHash?: Buffer;
  private readonly ttl: number;
  private readonly lastTouched = new Map<string, number>();
  /** Misses of one key at the same time read it once. */
  private readonly loads = new SingleFlight<KeyRow[]>();
  /** Bumped by every change heard: a load under way meanwhile may have read the key before it, so it is not kept. */
  private generation = 0;

  constructor(
    private readonly pool: Pool,
    opts: KeyStoreOptions = {},
  ) {
    this.envAdminHash = opts.envAdminKey ? hashKey(opts.envAdminKey) : undefined;
    this.ttl = opts.cacheTtlMs ?? 2_000;
  }

  /**
   * The identity a presented key stands for, or undefined when it is unknown, revoked or expired. Any string may
   * be SWITCHBOARD_ADMIN_KEY; stored keys have the `sb_` shape.
   * The comparison with the stored hash is constant-time.
   */
  async authenticate(key: string): Promise<KeyIdentity | undefined> {
    const hash = hashKey(key);
    if (this.envAdminHash && timingSafeEqual(hash, this.envAdminHash)) {
      return { keyId: ENV_ADMIN_KEY_ID, role: 'admin', tenant: null, via: 'env' };
    }
    // Only a key of Switchboard's own shape can be in the table: anything else costs no query.
    if (!looksLikeKey(key)) return undefined;
    const cacheKey = hash.toString('base64');
    const now = Date.now();
    const hit = this.cache.get(cacheKey);
    if (hit && hit.until > now) return hit.identity;
    let rows: KeyRow[];
    const generation = this.generation;
    try {
      rows = await this.loads.run(cacheKey, async () => {
        const { rows: found } = await this.pool.query<KeyRow>(
          `SELECT id, tenant, role, agent_id, key_hash, expires_at FROM api_keys
            WHERE key_hash = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())`,
          [hash],
        );
        return found;
      });
    } catch (err) {
      // PostgreSQL is away: a key verified before keeps working (a revocation made meanwhile waits for the
      // database, which holds it); an unknown one cannot be checked, which is the caller's 503, not a 401.
      if (!outageOf(err)) throw err;
      if (hit) return hit.identity;
      throw poolExhausted(err, this.pool) ? poolBusy(this.pool) : new DependencyUnavailable('postgresql', 'API keys cannot be checked');
    }
    const row = rows[0];
    const identity =
      row && row.key_hash.length === hash.length && timingSafeEqual(row.key_hash, hash)
        ? {
            keyId: row.id,
            role: row.role,
            tenant: row.tenant,
            ...(row.agent_id ? { agentId: row.agent_id } : {}),
            via: 'key' as const,
            ...(row.expires_at ? { expiresAt: row.expires_at } : {}),
          }
        : undefined;
    if (this.cache.size > 10_000) this.cache.clear(); // bounded: a flood of made-up keys cannot grow it
    // Never past the key's expiry: a key that expires is refused from that moment, cached or not.
    if (generation === this.generation) this.cache.set(cacheKey, { identity, until: Math.min(now + this.ttl, identity?.expiresAt?.getTime() ?? Infinity) });
    if (identity) this.touch(identity.keyId, now);
    return identity;
  }

  /**
   * A change another process (or a hand-run statement) made, heard on the config channel: a key's entry goes at
   * once (revoked, expired, deleted; an agent's delete revokes its keys). Undefined: the LISTEN connection was
   * (re)made and notices may have been lost, so every entry goes.
   */
  heard(notice: ConfigNotice | undefined): void {
    if (notice && notice.kind !== 'api_keys') return;
    this.generation++;
    if (!notice) return this.cache.clear();
    for (const [k, entry] of this.cache) if (entry.identity?.keyId === notice.id) this.cache.delete(k);
  }

  /** Forgets the keys of a deleted agent in this process before the trigger's notice comes back. */
  forgetAgent(tenant: string, agentId: string): void {
    this.generation++;
    for (const [k, entry] of this.cache) if (entry.identity?.tenant === tenant && entry.identity.agentId === agentId) this.cache.delete(k);
  }

  /** last_used_at, at most once a minute per key, off the request path. */
  private touch(keyId: string, now: number): void {
    if ((this.lastTouched.get(keyId) ?? 0) > now - 60_000) return;
    this.lastTouched.set(keyId, now);
    this.pool.query('UPDATE api_keys SET last_used_at = now() WHERE id = $1', [keyId]).catch(() => undefined);
  }

  /**
   * Makes a key; the returned `key` is the only copy of the secret.
   * @throws UnknownTenantError when the tenant does not exist; KeyConflictError for an agent key whose agent is not the tenant's.
   */
  async create(opts: { tenant: string | null; role: Role; agentId?: string; name: string; expiresAt?: Date }): Promise<{ id: string; key: string; view: KeyView }> {
    if (opts.tenant !== null && !(await this.tenantExists(opts.tenant))) throw new UnknownTenantError(`No tenant ${opts.tenant}`);
    if (opts.role === 'agent') {
      const { rowCount } = await this.pool.query('SELECT 1 FROM agents WHERE tenant = $1 AND id = $2', [opts.tenant, opts.agentId]);
      if (!rowCount) throw new KeyConflictError(`No agent ${opts.agentId} is registered in tenant ${opts.tenant}`);
    }
    const key = generateKey();
    const id = `key_${randomBytes(9).toString('base64url')}`;
    const { rows } = await this.pool.query(
      `INSERT INTO api_keys (id, tenant, role, agent_id, name, key_hash, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *`,
      [id, opts.tenant, opts.role, opts.role === 'agent' ? opts.agentId : null, opts.name, hashKey(key), opts.expiresAt ?? null],
    );
    return { id, key, view: keyView(rows[0]) };
  }

  async list(tenant: string): Promise<KeyView[]> {
    const { rows } = await this.pool.query('SELECT * FROM api_keys WHERE tenant = $1 ORDER BY created_at, id', [tenant]);
    return rows.map(keyView);
  }

  /**
   * Revokes a key of the tenant at once: this process forgets it now, the others as migration 023's notice reaches
   * them (milliseconds; the cache TTL bounds a lost one), and what it holds open ends (src/core/auth/credential-watch.ts).
   * @returns false when there is no such key.
   */
  async revoke(tenant: string, keyId: string): Promise<boolean> {
    const { rows } = await this.pool.query<{ key_hash: Buffer }>(
      'UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE tenant = $1 AND id = $2 RETURNING key_hash',
      [tenant, keyId],
    );
    if (!rows[0]) return false;
    this.generation++;
    this.cache.delete(rows[0].key_hash.toString('base64'));
    this.loads.forget(rows[0].key_hash.toString('base64'));
    return true;
  }

  /**
   * What this database says of a key, whoever holds it: usable (and its role), revoked or expired (since when),
   * or unknown. For start-up checks (src/core/auth/admin-key-file.ts), not for authenticating requests.
   */
  async inspect(key: string): Promise<{ state: 'usable'; role: Role } | { state: 'revoked' | 'expired'; role: Role; since: string } | { state: 'unknown' }> {
    if (!looksLikeKey(key)) return { state: 'unknown' };
    const { rows } = await this.pool.query<{ role: Role; revoked_at: Date | null; expires_at: Date | null; expired: boolean }>(
      'SELECT role, revoked_at, expires_at, expires_at <= now() AS expired FROM api_keys WHERE key_hash = $1',
      [hashKey(key)],
    );
    const r = rows[0];
    if (!r) return { state: 'unknown' };
    if (r.revoked_at) return { state: 'revoked', role: r.role, since: r.revoked_at.toISOString() };
    if (r.expired && r.expires_at) return { state: 'expired', role: r.role, since: r.expires_at.toISOString() };
    return { state: 'usable', role: r.role };
  }

  /**
   * Stores a key made elsewhere (only its SHA-256, as for every key), e.g. the admin key a data folder kept when
   * the checkout moves to another database. @returns false when that key is already stored (adopted by another
   * process at the same time, or before).
   */
  async adopt(opts: { key: string; tenant: null; role: 'admin'; name: string }): Promise<boolean> {
    if (!looksLikeKey(opts.key)) throw new Error('Only a key of the sb_ shape can be adopted');
    const id = `key_${randomBytes(9).toString('base64url')}`;
    const { rowCount } = await this.pool.query(
      'INSERT INTO api_keys (id, tenant, role, name, key_hash) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (key_hash) DO NOTHING',
      [id, opts.tenant, opts.role, opts.name, hashKey(opts.key)],
    );
    return (rowCount ?? 0) > 0;
  }

  /** Whether any usable admin key is stored (the embedded start makes one when there is none). */
  async hasAdminKey(): Promise<boolean> {
    const { rowCount } = await this.pool.query(
      `SELECT 1 FROM api_keys WHERE role = 'admin' AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now()) LIMIT 1`,
    );
    return (rowCount ?? 0) > 0;
  }

  async tenantExists(id: string): Promise<boolean> {
    const { rowCount } = await this.pool.query('SELECT 1 FROM tenants WHERE id = $1', [id]);
    return (rowCount ?? 0) > 0;
  }

  /** @throws KeyConflictError when the id is taken. */
  async createTenant(id: string, name: string, quotas: Record<string, number> = {}): Promise<TenantView> {
    const { rows } = await this.pool.query(
      'INSERT INTO tenants (id, name, quotas) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING RETURNING *',
      [id, name, JSON.stringify(quotas)],
    );
    if (!rows[0]) throw new KeyConflictError(`Tenant ${id} already exists`);
    return tenantView(rows[0]);
  }

  async updateTenantQuotas(id: string, quotas: Record<string, number | null>): Promise<TenantView | undefined> {
    // null removes a quota (back to the process default).
    const { rows } = await this.pool.query(
      `UPDATE tenants SET quotas = jsonb_strip_nulls(quotas || $2::jsonb) WHERE id = $1 RETURNING *`,
      [id, JSON.stringify(quotas)],
    );
    return rows[0] ? tenantView(rows[0]) : undefined;
  }

  /** Sets the tenant's task retention (ms), or null: back to SWITCHBOARD_TASK_RETENTION. */
  async updateTenantRetention(id: string, retentionMs: number | null): Promise<TenantView | undefined> {
    const { rows } = await this.pool.query('UPDATE tenants SET retention_ms = $2 WHERE id = $1 RETURNING *', [id, retentionMs]);
    return rows[0] ? tenantView(rows[0]) : undefined;
  }

  async getTenant(id: string): Promise<TenantView | undefined> {
    const { rows } = await this.pool.query('SELECT * FROM tenants WHERE id = $1', [id]);
    return rows[0] ? tenantView(rows[0]) : undefined;
  }

  async listTenants(): Promise<TenantView[]> {
    const { rows } = await this.pool.query('SELECT * FROM tenants ORDER BY id');
    return rows.map(tenantView);
  }
}

function keyView(r: KeyListRow): KeyView {
  return {
    id: r.id,
    tenant: r.tenant,
    role: r.role,
    ...(r.agent_id ? { agentId: r.agent_id } : {}),
    name: r.name,
    ...(r.expires_at ? { expiresAt: r.expires_at.toISOString() } : {}),
    ...(r.revoked_at ? { revokedAt: r.revoked_at.toISOString() } : {}),
    createdAt: r.created_at.toISOString(),
    ...(r.last_used_at ? { lastUsedAt: r.last_used_at.toISOString() } : {}),
  };
}

/** A row of `api_keys` as listed (SELECT *). */
interface KeyListRow {
  id: string;
  tenant: string | null;
  role: Role;
  agent_id: string | null;
  name: string;
  expires_at: Date | null;
  revoked_at: Date | null;
  created_at: Date;
  last_used_at: Date | null;
}

/** A row of `tenants` (SELECT *). */
interface TenantRow {
  id: string;
  name: string;
  quotas: TenantView['quotas'];
  retention_ms: string | null;
  created_at: Date;
}

function tenantView(r: TenantRow): TenantView {
  return { id: r.id, name: r.name, quotas: r.quotas, retention: r.retention_ms === null ? null : formatDuration(Number(r.retention_ms)), createdAt: r.created_at.toISOString() };
}
