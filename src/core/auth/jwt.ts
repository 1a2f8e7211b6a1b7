/**
 * Bearer JWTs from an identity provider, accepted beside API keys when SWITCHBOARD_JWT_JWKS_URL is set: each token
 * is verified against the provider's JSON Web Key Set (JWKS) and turned into a caller.
 *
 * Claims (docs/security.md copies this list):
 * - `sub` (required, a non-empty string): who is calling. The caller's actor id, used by the audit trail and the
 *   per-key rate limits, is `jwt:<iss>:<sub>` (`jwt::<sub>` when the token has no `iss`).
 * - `switchboard_role` (falls back to `role`; required): `admin`, `operator`, `client`, `agent` or `metrics`.
 * - `switchboard_tenant` (falls back to `tenant`): the tenant the caller acts in. Required for every role but
 *   `admin`; an admin without one acts in any tenant, like the admin key (X-Switchboard-Tenant picks it).
 * - `switchboard_agent` (required for role `agent`, ignored otherwise): the registered agent the token speaks for.
 * - `exp` and `nbf`, when present, are checked (with `clockToleranceSec` of leeway, default 5 s); `iss` must equal
 *   SWITCHBOARD_JWT_ISSUER and `aud` must hold SWITCHBOARD_JWT_AUDIENCE when those are set.
 * A claim that is present but not a non-empty string refuses the token; the fallback name is read only when the
 * `switchboard_` one is absent.
 *
 * Algorithms: asymmetric only (RS256/384/512, PS256/384/512, ES256/384/512, EdDSA). `none` and HMAC (HS*) are refused
 * before any key is looked up: a JWKS holds public keys, and an HMAC "verified" with a public key would let anyone
 * who can read the key set mint tokens.
 *
 * Keys: the key set is fetched through Switchboard's guarded outbound fetch (never the global fetch), cached for
 * `cacheMaxAgeMs` (default 10 min), and fetched again when a token names a `kid` the cached set lacks (a rotated
 * key), at most once per `cooldownMs` (default 5 s). A token without `kid` is tried against every key of the set
 * that fits its algorithm.
 */
import { createRemoteJWKSet, customFetch, decodeProtectedHeader, errors, jwtVerify, type JWTPayload, type JWTVerifyOptions } from 'jose';
import { ROLES, type Role } from './caller';

/** The JWS algorithms accepted: asymmetric ones only. */
export const JWT_ALGORITHMS: readonly string[] = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'];

export interface JwtSettings {
  /** SWITCHBOARD_JWT_JWKS_URL: where the identity provider publishes its public keys (http or https). */
  jwksUrl: string;
  /** SWITCHBOARD_JWT_ISSUER: when set, `iss` must equal it. */
  issuer?: string;
  /** SWITCHBOARD_JWT_AUDIENCE: when set, `aud` must be or contain it. */
  audience?: string;
  /**
   * Switchboard's guarded outbound fetch (`createOutbound({ allowPrivate }).fetch`, src/core/http/outbound.ts): the key
   * set is a remote document like any other, so SSRF rules, redirect refusal and size caps apply to it.
   */
  fetch: typeof fetch;
  /** How long a fetched key set is used before it is fetched again (ms). Default 600_000 (10 min). */
  cacheMaxAgeMs?: number;
  /** The least time after a successful fetch before an unknown `kid` fetches the key set again (ms). Default 5_000. */
  cooldownMs?: number;
  /** Leeway for `exp` and `nbf` (seconds). Default 5. */
  clockToleranceSec?: number;
  /** How long one fetch of the key set may take (ms). Default 5_000. */
  fetchTimeoutMs?: number;
}

/** A verified token's caller. */
export interface JwtIdentity {
  /** `sub`. */
  subject: string;
  /** `switchboard_tenant` (or `tenant`); null only for an admin that names none. */
  tenant: string | null;
  role: Role;
  /** `switchboard_agent`, for role `agent` only. */
  agentId?: string;
  /** `exp`, when the token has one. */
  expiresAt?: Date;
  /** `jwt:<iss or ''>:<sub>`: a stable actor id for the audit trail and rate limits. Never a secret. */
  keyId: string;
}

/**
 * Why a token was refused. `invalid`: the token is wrong (answer 401). `unavailable`: the key set could not be
 * fetched or used, so no token can be checked right now (answer 503). The message is safe to show to the client:
 * it never holds the token, nor the JWKS URL. For `unavailable` the underlying error is the `cause`, for the log.
 */
export class JwtError extends Error {
  override readonly name = 'JwtError';
  constructor(
    readonly kind: 'invalid' | 'unavailable',
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

/**
 * Cheap shape test: three base64url segments separated by dots (the signature may be empty, as in an unsigned
 * `alg: none` token, so that such a token is refused as a JWT with its reason rather than as an unknown key).
 * An API key (`sb_…`) has no dots. Says nothing about validity.
 */
export function looksLikeJwt(token: string): boolean {
  return JWT_SHAPE.test(token);
}

/** The key set could not be fetched: thrown from inside jose's fetch so it reaches us unchanged. */
class KeySetUnavailable extends Error {}

export class JwtVerifier {
  private readonly keys: ReturnType<typeof createRemoteJWKSet>;
  private readonly options: JWTVerifyOptions;

  /** @throws TypeError when `jwksUrl` is not a URL or a duration is negative. */
  constructor(settings: JwtSettings) {
    const guarded = settings.fetch;
    this.keys = createRemoteJWKSet(new URL(settings.jwksUrl), {
      cacheMaxAge: settings.cacheMaxAgeMs ?? 600_000,
      cooldownDuration: settings.cooldownMs ?? 5_000,
      timeoutDuration: settings.fetchTimeoutMs ?? 5_000,
      [customFetch]: async (url, init) => {
        let res: Response;
        try {
          res = await guarded(url, init);
        } catch (err) {
          const timedOut = (err as { name?: unknown }).name === 'TimeoutError';
          throw new KeySetUnavailable(timedOut ? 'timed out' : 'request failed', { cause: err });
        }
        if (res.status !== 200) {
          await res.body?.cancel().catch(() => {});
          throw new KeySetUnavailable(`answered HTTP ${res.status}`);
        }
        return res;
      },
    });
    this.options = {
      algorithms: [...JWT_ALGORITHMS],
      issuer: settings.issuer,
      audience: settings.audience,
      clockTolerance: settings.clockToleranceSec ?? 5,
    };
  }

  /**
   * Verify a bearer token and return its caller.
   * @throws JwtError (`kind` `invalid` for a bad token, `unavailable` when the key set cannot be fetched)
   */
  async verify(token: string): Promise<JwtIdentity> {
    if (!looksLikeJwt(token)) throw new JwtError('invalid', 'the token is not a JWT (three base64url segments)');
    let payload: JWTPayload;
    try {
      payload = await this.verifySignature(token);
    } catch (err) {
      throw toJwtError(err, token);
    }
    return identityOf(payload);
  }

  private async verifySignature(token: string): Promise<JWTPayload> {
    try {
      return (await jwtVerify(token, this.keys, this.options)).payload;
    } catch (err) {
      // A token without `kid` while the set holds several keys of its type: jose hands us the candidates.
      if (!(err instanceof errors.JWKSMultipleMatchingKeys)) throw err;
      for await (const key of err) {
        try {
          return (await jwtVerify(token, key, this.options)).payload;
        } catch (inner) {
          if (!(inner instanceof errors.JWSSignatureVerificationFailed)) throw inner;
        }
      }
      throw new errors.JWSSignatureVerificationFailed();
    }
  }
}

/** The token's `alg`, when it is short and plain enough to repeat in a message. */
function algOf(token: string): string | undefined {
  try {
    const { alg } = decodeProtectedHeader(token);
    return typeof alg === 'string' && /^[A-Za-z0-9_+-]{1,16}$/.test(alg) ? alg : undefined;
  } catch {
    return undefined;
  }
}

function toJwtError(err: unknown, token: string): JwtError {
  if (err instanceof JwtError) return err;
  const unavailable = (what: string) => new JwtError('unavailable', `the key set (JWKS) ${what}`, { cause: err });
  if (err instanceof KeySetUnavailable) return unavailable(`could not be fetched (${err.message})`);
  if (err instanceof errors.JWKSTimeout) return unavailable('could not be fetched (timed out)');
  if (err instanceof errors.JWKSInvalid) return unavailable('could not be used (it is malformed)');
  if (err instanceof errors.JOSEError && /JSON Web Key Set HTTP response/.test(err.message)) {
    return unavailable('could not be fetched (the answer is not a JSON key set)');
  }

  const invalid = (message: string) => new JwtError('invalid', message);
  if (err instanceof errors.JOSEAlgNotAllowed) {
    const alg = algOf(token);
    return invalid(`the token's algorithm${alg ? ` (${alg})` : ''} is not accepted: only ${JWT_ALGORITHMS.join(', ')}`);
  }
  if (err instanceof errors.JWTExpired) return invalid('the token has expired (exp)');
  if (err instanceof errors.JWTClaimValidationFailed) {
    const { claim, reason } = err;
    if (claim === 'nbf') return invalid('the token is not valid yet (nbf)');
    if (reason === 'missing') return invalid(`the token has no ${claim} claim`);
    if (claim === 'iss') return invalid('the token is from another issuer (iss)');
    if (claim === 'aud') return invalid('the token is for another audience (aud)');
    return invalid(`the token's ${claim} claim is not accepted`);
  }
  if (err instanceof errors.JWKSNoMatchingKey) return invalid('no key of the key set matches the token (unknown kid)');
  if (err instanceof errors.JWSSignatureVerificationFailed) return invalid('the token signature does not verify');
  if (err instanceof errors.JWSInvalid || err instanceof errors.JWTInvalid) return invalid(`the token is malformed: ${err.message}`);
  if (err instanceof errors.JOSENotSupported) return invalid(`the token uses something not supported: ${err.message}`);
  if (err instanceof errors.JOSEError) return invalid(`the token is not accepted: ${err.message}`);
  // Not jose's: importing a key of the set failed (a bad key in the JWKS), or a bug. Not the client's fault.
  return unavailable('could not be used to check the token');
}

/** A string claim, read from the first of `names` that is present; present but not a non-empty string refuses. */
function stringClaim(p: JWTPayload, ...names: string[]): string | undefined {
  for (const name of names) {
    if (!Object.hasOwn(p, name)) continue;
    const value = p[name];
    if (typeof value !== 'string' || value === '') throw new JwtError('invalid', `the token's ${name} claim must be a non-empty string`);
    return value;
  }
  return undefined;
}

function identityOf(p: JWTPayload): JwtIdentity {
  const subject = stringClaim(p, 'sub');
  if (subject === undefined) throw new JwtError('invalid', 'the token has no sub claim');
  const role = stringClaim(p, 'switchboard_role', 'role');
  if (role === undefined) throw new JwtError('invalid', `the token has no switchboard_role claim (one of ${ROLES.join(', ')})`);
  if (!(ROLES as readonly string[]).includes(role)) throw new JwtError('invalid', `the token's switchboard_role must be one of ${ROLES.join(', ')}`);
  const tenant = stringClaim(p, 'switchboard_tenant', 'tenant') ?? null;
  if (tenant === null && role !== 'admin') throw new JwtError('invalid', `a ${role} token must name its switchboard_tenant`);
  const agentId = role === 'agent' ? stringClaim(p, 'switchboard_agent') : undefined;
  if (role === 'agent' && agentId === undefined) throw new JwtError('invalid', 'an agent token must name its switchboard_agent');
  const issuer = typeof p.iss === 'string' ? p.iss : '';
  return {
    subject,
    tenant,
    role: role as Role,
    ...(agentId !== undefined ? { agentId } : {}),
    ...(typeof p.exp === 'number' ? { expiresAt: new Date(p.exp * 1000) } : {}),
    keyId: `jwt:${issuer}:${subject}`,
  };
}
