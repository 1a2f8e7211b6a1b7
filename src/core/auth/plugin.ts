/**
 * Who calls: credentials (request headers, or gRPC call metadata) to a caller, for every transport.
 *
 * - Credentials: `Authorization: Bearer <key or JWT>` or `X-API-Key: <key>`. Keys are checked by KeyStore,
 *   JWTs (when SWITCHBOARD_JWT_JWKS_URL is set) by the JWT verifier.
 * - No or bad credentials: AuthFailure 401. Valid but not allowed: 403 naming the roles needed. The transports
 *   (src/api/routes/auth-hooks.ts for HTTP, src/api/grpc/server.ts) render them in their endpoint's form.
 */
import type { Access, Caller, Role } from './caller';
import { type KeyIdentity, type KeyStore, looksLikeKey } from './keys';
import { type EnrollmentTokens, looksLikeEnrollmentToken } from './enrollment';
import type { TenantQuotas } from './quotas';
import { looksLikeJwt } from './jwt';
import { firstValue } from '../http/headers';

export const TENANT_HEADER = 'x-switchboard-tenant';
export const DEFAULT_TENANT = 'default';
/** Longer than any key or reasonable JWT: refused before any work. */
const MAX_CREDENTIAL_LENGTH = 8192;

/** A JWT verifier as authentication needs it (src/core/auth/jwt.ts). */
export interface BearerJwtVerifier {
  verify(token: string): Promise<{ keyId: string; role: Role; tenant: string | null; agentId?: string; expiresAt?: Date }>;
}


type Presented = { token: string } | { malformed: string } | undefined;

/** Request headers (HTTP) or call metadata (gRPC), lower-case names. */
export type CredentialHeaders = Record<string, string | string[] | undefined>;

/** The credential in the request, if any: a Bearer token or an X-API-Key. */
export function presented(headers: CredentialHeaders): Presented {
  const auth = firstValue(headers.authorization);
  const apiKey = headers['x-api-key'];
  if (auth !== undefined) {
    const m = /^Bearer +(\S+) *$/i.exec(auth);
    if (!m) return { malformed: 'Authorization must be "Bearer <API key or JWT>"' };
    return m[1].length > MAX_CREDENTIAL_LENGTH ? { malformed: 'the credential is too long' } : { token: m[1] };
  }
  if (apiKey !== undefined) {
    const v = (Array.isArray(apiKey) ? apiKey.join(',') : apiKey).trim();
    if (!v || v.includes(',') || v.length > MAX_CREDENTIAL_LENGTH) return { malformed: 'X-API-Key must hold one API key' };
    return { token: v };
  }
  return undefined;
}


/** Why a call is refused before it runs: 401 (no or bad credentials), 403, 404 (no such tenant) or 503. */
export class AuthFailure {
  constructor(
    readonly status: 401 | 403 | 404 | 503,
    readonly error: string,
    readonly extra: Record<string, unknown> = {},
  ) {}
}


/**
 * Credentials to a caller, for every transport: the HTTP hook below passes request headers, the gRPC server
 * (src/api/grpc/server.ts) call metadata. `authenticate` returns the caller (undefined on a public route without
 * valid credentials) or throws AuthFailure (or DependencyUnavailable while keys cannot be checked).
 */
export interface Authenticator {
  authenticate(headers: CredentialHeaders, policy: Access): Promise<Caller | undefined>;
}

/** A rate limit that refused a call: which quota, the message, and when to retry. */
export interface RateRefusal {
  quota: string;
  message: string;
  retryAfterS: number;
}

/** What authentication reads: the keys, the tenants (their quotas row says a tenant exists), and JWTs when accepted. */
export interface AuthenticatorDeps {
  keys: KeyStore;
  /** Hub enrollment tokens, accepted by the routes whose policy says `enrollment` (GET /hub). */
  enrollment?: Pick<EnrollmentTokens, 'authenticate'>;
  quotas: TenantQuotas;
  jwt?: BearerJwtVerifier;
}

export function createAuthenticator(deps: AuthenticatorDeps): Authenticator {
  async function identify(token: string): Promise<KeyIdentity> {
    if (deps.jwt && looksLikeJwt(token)) {
      try {
        return { ...(await deps.jwt.verify(token)), via: 'jwt' };
      } catch (err) {
        const e = err as { kind?: string; message?: string };
        if (e.kind === 'unavailable') throw new AuthFailure(503, `Tokens cannot be checked right now: ${e.message}`);
        throw new AuthFailure(401, `The token is not valid: ${e.message ?? 'rejected'}`);
      }
    }
    const identity = await deps.keys.authenticate(token);
    if (identity) return identity;
    if (looksLikeKey(token)) throw new AuthFailure(401, 'The API key is not valid (unknown, revoked or expired)');
    if (looksLikeEnrollmentToken(token)) throw new AuthFailure(401, 'A hub enrollment token (sbe_…) opens GET /hub only');
    throw new AuthFailure(401, `The credential is not a valid Switchboard API key (sb_…)${deps.jwt ? ' or an accepted JWT' : ''}`);
  }

  /** The tenant a request acts in: a non-admin's own; an admin's pick (X-Switchboard-Tenant), `default` if none. */
  async function tenantOf(headers: CredentialHeaders, id: KeyIdentity): Promise<string> {
    const raw = firstValue(headers[TENANT_HEADER]);
    const requested = typeof raw === 'string' && raw !== '' ? raw : undefined;
    if (id.role === 'admin') {
      const tenant = requested ?? DEFAULT_TENANT;
      if (!(await deps.quotas.of(tenant))) throw new AuthFailure(404, `No tenant ${tenant}`);
      return tenant;
    }
    if (id.tenant === null) throw new AuthFailure(403, 'This key belongs to no tenant');
    if (requested !== undefined && requested !== id.tenant) {
      throw new AuthFailure(403, `This key acts only in its own tenant; ${TENANT_HEADER} names another`);
    }
    // A JWT names its tenant itself (a key's row cannot outlive its tenant): one that does not exist, or no longer
    // does, lets nobody in, least of all to register agents into it.
    if (!(await deps.quotas.of(id.tenant))) throw new AuthFailure(401, `The ${id.via === 'jwt' ? 'token' : 'key'}'s tenant ${id.tenant} does not exist`);
    return id.tenant;
  }

  async function authenticate(headers: CredentialHeaders, policy: Access): Promise<Caller | undefined> {
    const cred = presented(headers);
    if ('public' in policy) {
      // A public route serves everyone; valid credentials only add what the caller may see (its tenant's skills).
      if (cred && 'token' in cred) {
        try {
          const id = await identify(cred.token);
          return { ...id, tenant: await tenantOf(headers, id) };
        } catch {
          // a bad credential on a public document is ignored, not refused
        }
      }
      return undefined;
    }
    if (!cred) throw new AuthFailure(401, 'Authentication required: send Authorization: Bearer <API key or JWT>, or X-API-Key: <API key>');
    if ('malformed' in cred) throw new AuthFailure(401, cred.malformed);
    if (policy.enrollment && looksLikeEnrollmentToken(cred.token)) return enrolling(headers, cred.token);
    const id = await identify(cred.token);
    if (!policy.roles.includes(id.role)) {
      const only = id.role === 'metrics' ? ' (a metrics key reads GET /metrics only)' : '';
      throw new AuthFailure(403, `This needs the role ${policy.roles.join(' or ')}; this key's role is ${id.role}${only}`, { requiredRoles: policy.roles });
    }
    const tenant = await tenantOf(headers, id);
    return { keyId: id.keyId, role: id.role, tenant, via: id.via, ...(id.agentId ? { agentId: id.agentId } : {}), ...(id.expiresAt ? { expiresAt: id.expiresAt } : {}) };
  }
  /** A hub enrollment token's caller: role agent, no agent yet (it registers itself), the token's tenant. */
  async function enrolling(headers: CredentialHeaders, token: string): Promise<Caller> {
    const found = await deps.enrollment?.authenticate(token);
    if (!found) throw new AuthFailure(401, 'The enrollment token is not valid (unknown, revoked, expired or used up)');
    const id: KeyIdentity = { keyId: found.tokenId, role: 'agent', tenant: found.tenant, via: 'enrollment', expiresAt: found.expiresAt };
    return { keyId: id.keyId, role: 'agent', tenant: await tenantOf(headers, id), via: 'enrollment', expiresAt: found.expiresAt };
  }
  return { authenticate };
}
