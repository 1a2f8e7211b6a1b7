/**
 * Bearer JWTs from an identity provider, accepted beside API keys when SWITCHBOARD_JWT_JWKS_URL is set.
 *
 * Claims (the README copies this list):
 * - `sub` (required): who is calling; the actor is `jwt:<iss>:<sub>` in the audit trail and rate limits;
 * - `switchboard_role` (or `role`): `admin`, `operator`, `client` or `agent` (required);
 * - `switchboard_tenant` (or `tenant`): the tenant; required for every role but `admin`;
 * - `switchboard_agent`: the registered agent an `agent` token speaks for (required for that role);
 * - `exp`, `nbf`, `iss`, `aud` as usual: checked, with SWITCHBOARD_JWT_ISSUER / SWITCHBOARD_JWT_AUDIENCE when set.
 *
 * Only asymmetric algorithms are accepted (a JWKS holds public keys; `none` and HMAC are refused). The key set is
 * fetched through the guarded outbound fetch, cached, and fetched again when a token names an unknown `kid`
 * (a rotated key), at most once per cooldown.
 */
import { createRemoteJWKSet, customFetch, errors, jwtVerify, type JWTPayload } from 'jose';
import { ROLES, type Role } from './caller';

const ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'];

export interface JwtSettings {
  jwksUrl: string;
  issuer?: string;
  audience?: string;
  /** Switchboard's guarded outbound fetch: the key set is a remote document like any other. */
  fetch: typeof fetch;
  /** How long a fetched key set is used before it is fetched again (ms). Default 10 min. */
  cacheMaxAgeMs?: number;
  /** The least time between two fetches of the key set, e.g. for unknown kids (ms). Default 5 s. */
  cooldownMs?: number;
  clockToleranceSec?: number;
}

export interface JwtIdentity {
  keyId: string;
  subject: string;
  role: Role;
  tenant: string | null;
  agentId?: string;
  expiresAt?: Date;
}

/**
 * Why a token was refused. `invalid`: the token is wrong (401). `unavailable`: the key set could not be
 * fetched, so no token can be checked now (503). The message is safe to show; it never holds the token.
 */
export class JwtError extends Error {
  constructor(
    readonly kind: 'invalid' | 'unavailable',
    message: string,
  ) {
    super(message);
  }
}

export function looksLikeJwt(token: string): boolean {
  return /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.test(token);
}

export class JwtVerifier {
  private readonly keys: ReturnType<typeof createRemoteJWKSet>;

  constructor(private readonly s: JwtSettings) {
    const guarded = s.fetch;
    this.keys = createRemoteJWKSet(new URL(s.jwksUrl), {
      cacheMaxAge: s.cacheMaxAgeMs ?? 600_000,
      cooldownDuration: s.cooldownMs ?? 5_000,
      timeoutDuration: 5_000,
      [customFetch]: (url, options) => guarded(url, options as RequestInit),
    });
  }

  /** @throws JwtError */
  async verify(token: string): Promise<JwtIdentity> {
    if (!looksLikeJwt(token)) throw new JwtError('invalid', 'not a JWT');
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, this.keys, {
        algorithms: ALGORITHMS,
        issuer: this.s.issuer,
        audience: this.s.audience,
        clockTolerance: this.s.clockToleranceSec ?? 5,
      }));
    } catch (err) {
      throw toJwtError(err);
    }
    return identityOf(payload);
  }
}

function toJwtError(err: unknown): JwtError {
  if (err instanceof errors.JWTExpired) return new JwtError('invalid', 'the token has expired');
  if (err instanceof errors.JWTClaimValidationFailed) {
    const claim = err.claim === 'nbf' ? 'not valid yet (nbf)' : `claim ${err.claim} is not accepted (${err.reason})`;
    return new JwtError('invalid', `the token is ${claim}`);
  }
  if (err instanceof errors.JOSEAlgNotAllowed) return new JwtError('invalid', 'the token algorithm is not accepted (asymmetric algorithms only)');
  if (err instanceof errors.JWKSNoMatchingKey) return new JwtError('invalid', 'no key of the key set matches the token (unknown kid)');
  if (err instanceof errors.JWSSignatureVerificationFailed) return new JwtError('invalid', 'the token signature does not verify');
  if (err instanceof errors.JWKSTimeout || err instanceof errors.JWKSInvalid || (err instanceof errors.JOSEError && /JSON Web Key Set/.test(err.message))) {
    return new JwtError('unavailable', 'the key set (SWITCHBOARD_JWT_JWKS_URL) could not be read');
  }
  if (err instanceof errors.JWSInvalid || err instanceof errors.JWTInvalid || err instanceof errors.JOSEError) {
    return new JwtError('invalid', `the token is malformed (${(err as Error).message.slice(0, 100)})`);
  }
  // Anything else came from fetching the key set: a refused address, a network error, a non-200 answer.
  return new JwtError('unavailable', 'the key set (SWITCHBOARD_JWT_JWKS_URL) could not be fetched');
}

function identityOf(p: JWTPayload): JwtIdentity {
  const claim = (...names: string[]) => {
    for (const n of names) if (typeof p[n] === 'string' && p[n] !== '') return p[n] as string;
    return undefined;
  };
  if (!p.sub) throw new JwtError('invalid', 'the token has no sub');
  const role = claim('switchboard_role', 'role');
  if (!role || !(ROLES as readonly string[]).includes(role)) throw new JwtError('invalid', `the token's switchboard_role must be one of ${ROLES.join(', ')}`);
  const tenant = claim('switchboard_tenant', 'tenant') ?? null;
  if (role !== 'admin' && !tenant) throw new JwtError('invalid', 'the token names no switchboard_tenant');
  const agentId = claim('switchboard_agent');
  if (role === 'agent' && !agentId) throw new JwtError('invalid', 'an agent token must name its switchboard_agent');
  return {
    keyId: `jwt:${p.iss ?? ''}:${p.sub}`,
    subject: p.sub,
    role: role as Role,
    tenant,
    ...(role === 'agent' && agentId ? { agentId } : {}),
    ...(p.exp ? { expiresAt: new Date(p.exp * 1000) } : {}),
  };
}
