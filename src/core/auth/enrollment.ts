/**
 * Hub enrollment tokens (issue 30): an operator mints one for a tenant; an agent upgrades `GET /hub` with it and
 * registers itself with `agent.register` (src/api/hub/enroll.ts), which uses one of the token's uses and gives the agent
 * an agent key of its own for later connections. A token is `sbe_` + 32 random bytes (base64url); only its SHA-256
 * is stored, and the token itself is shown once, when it is minted. It opens `GET /hub` and nothing else.
 */
import { randomBytes } from 'node:crypto';
import type { Pool, PoolClient } from 'pg';
import { hashKey } from './keys';

export const ENROLLMENT_PREFIX = 'sbe_';

/** A syntactically valid enrollment token: the prefix and 43 base64url characters (32 bytes). */
export function looksLikeEnrollmentToken(token: string): boolean {
  return /^sbe_[A-Za-z0-9_-]{43}$/.test(token);
}

export interface EnrollmentTokenView {
  id: string;
  tenant: string;
  name: string;
  /** How many agents it may register, and how many it has. */
  uses: number;
  used: number;
  expiresAt: string;
  revokedAt?: string;
  createdAt: string;
  lastUsedAt?: string;
  /** usable, or why not: revoked, expired, used up. */
  state: 'usable' | 'revoked' | 'expired' | 'used up';
}

/** What a presented token stands for while it is usable. */
export interface EnrollmentIdentity {
  tokenId: string;
  tenant: string;
  expiresAt: Date;
}

interface TokenRow {
  id: string;
  tenant: string;
  name: string;
  max_uses: number;
  uses: number;
  expires_at: Date;
  revoked_at: Date | null;
  created_at: Date;
  last_used_at: Date | null;
}

/** The usable-token condition, for the statements below (`t`: the row). */
const USABLE = 'revoked_at IS NULL AND expires_at > now() AND uses < max_uses';

export class EnrollmentTokens {
  constructor(private readonly pool: Pool) {}

  /** Mints a token; the returned `token` is the only copy of the secret. */
  async create(opts: { tenant: string; name: string; expiresInMs: number; uses: number }): Promise<{ token: string; view: EnrollmentTokenView }> {
    const token = ENROLLMENT_PREFIX + randomBytes(32).toString('base64url');
    const id = `enr_${randomBytes(9).toString('base64url')}`;
    const { rows } = await this.pool.query<TokenRow>(
      `INSERT INTO enrollment_tokens (id, tenant, name, token_hash, max_uses, expires_at) VALUES ($1, $2, $3, $4, $5, now() + $6 * interval '1 millisecond') RETURNING *`,
      [id, opts.tenant, opts.name, hashKey(token), opts.uses, opts.expiresInMs],
    );
    return { token, view: viewOf(rows[0]!) };
  }

  async list(tenant: string): Promise<EnrollmentTokenView[]> {
    const { rows } = await this.pool.query<TokenRow>('SELECT * FROM enrollment_tokens WHERE tenant = $1 ORDER BY created_at, id', [tenant]);
    return rows.map(viewOf);
  }

  /** Revokes a token of the tenant (agents it registered keep their registrations and keys). @returns false when there is no such token. */
  async revoke(tenant: string, id: string): Promise<boolean> {
    const { rowCount } = await this.pool.query('UPDATE enrollment_tokens SET revoked_at = coalesce(revoked_at, now()) WHERE tenant = $1 AND id = $2', [tenant, id]);
    return (rowCount ?? 0) > 0;
  }

  /** The token's tenant while it is usable (not revoked, not expired, a use left); undefined otherwise. */
  async authenticate(token: string): Promise<EnrollmentIdentity | undefined> {
    if (!looksLikeEnrollmentToken(token)) return undefined;
    const { rows } = await this.pool.query<{ id: string; tenant: string; expires_at: Date }>(
      `SELECT id, tenant, expires_at FROM enrollment_tokens WHERE token_hash = $1 AND ${USABLE}`,
      [hashKey(token)],
    );
    const r = rows[0];
    return r && { tokenId: r.id, tenant: r.tenant, expiresAt: r.expires_at };
  }

  /** Why the token no longer holds (revoked, expired, used up, deleted), or undefined while it is usable. */
  async lapsed(tokenId: string): Promise<string | undefined> {
    const { rows } = await this.pool.query<TokenRow>('SELECT * FROM enrollment_tokens WHERE id = $1', [tokenId]);
    if (!rows[0]) return 'it was deleted';
    const state = stateOf(rows[0]);
    return state === 'usable' ? undefined : `it is ${state}`;
  }
}

/**
 * Uses one of the token's uses, in the caller's transaction (the agent's registration). @returns false when the
 * token no longer holds (revoked, expired or used up since the socket opened).
 */
export async function useEnrollmentToken(db: PoolClient, tenant: string, tokenId: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE enrollment_tokens SET uses = uses + 1, last_used_at = now() WHERE id = $1 AND tenant = $2 AND ${USABLE}`,
    [tokenId, tenant],
  );
  return (rowCount ?? 0) > 0;
}

function stateOf(r: TokenRow): EnrollmentTokenView['state'] {
  if (r.revoked_at) return 'revoked';
  if (r.expires_at.getTime() <= Date.now()) return 'expired';
  if (r.uses >= r.max_uses) return 'used up';
  return 'usable';
}

function viewOf(r: TokenRow): EnrollmentTokenView {
  return {
    id: r.id,
    tenant: r.tenant,
    name: r.name,
    uses: r.max_uses,
    used: r.uses,
    expiresAt: r.expires_at.toISOString(),
    ...(r.revoked_at ? { revokedAt: r.revoked_at.toISOString() } : {}),
    createdAt: r.created_at.toISOString(),
    ...(r.last_used_at ? { lastUsedAt: r.last_used_at.toISOString() } : {}),
    state: stateOf(r),
  };
}
