/**
 * Authentication, authorization, rate limits and the audit trail, as hooks on the root Fastify instance, so
 * that they run for every route before the route's own code (and before its body is parsed).
 *
 * - Credentials: `Authorization: Bearer <key or JWT>` or `X-API-Key: <key>`. Keys are checked by KeyStore,
 *   JWTs (when SWITCHBOARD_JWT_JWKS_URL is set) by the JWT verifier.
 * - Each route declares `config.auth` (src/auth/caller.ts); a route without one stops the server from starting.
 * - No or bad credentials: 401 with `WWW-Authenticate`. Valid but not allowed: 403 naming the roles needed.
 *   The JSON-RPC endpoints answer these at the HTTP level too, as A2A transports do.
 * - Rate limits (requests/s per tenant and per key) through @fastify/rate-limit's stores (Redis when REDIS_URL
 *   is set, else memory): 429 with Retry-After. Requests without a caller are limited per client address.
 * - Audit: a route with `config.audit` writes one entry per admin/operator call, after the answer is sent.
 */
import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Pool } from 'pg';
import type { Access, Caller, Role } from './caller';
import { writeAudit } from './audit';
import { type KeyIdentity, type KeyStore, looksLikeKey } from './keys';
import type { TenantQuotas } from './quotas';
import { DependencyUnavailable } from '../health';
import { looksLikeJwt } from './jwt';
import { quotaRefusals } from '../metrics';
import { firstValue } from '../routes/base-url';
import { refuse } from '../routes/refusals';
import type { Refusal } from '../a2a/error-forms';

export const TENANT_HEADER = 'x-switchboard-tenant';
export const DEFAULT_TENANT = 'default';
const REALM = 'Bearer realm="switchboard"';
/** Longer than any key or reasonable JWT: refused before any work. */
const MAX_CREDENTIAL_LENGTH = 8192;

/** A JWT verifier as authentication needs it (src/auth/jwt.ts). */
export interface BearerJwtVerifier {
  verify(token: string): Promise<{ keyId: string; role: Role; tenant: string | null; agentId?: string }>;
}

export interface AuthDeps {
  pool: Pool;
  keys: KeyStore;
  quotas: TenantQuotas;
  jwt?: BearerJwtVerifier;
  /** REDIS_URL: rate-limit counters shared by every Switchboard process. */
  redisUrl?: string;
  /** Requests/s from one client address that presents no valid credentials. */
  anonymousRps?: number;
}

/** One route and who may call it: the table the role × route test checks against its own. */
export interface AccessEntry {
  method: string;
  url: string;
  access: Access;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Every route with its access policy, in registration order (filled by installAuth's onRoute hook). */
    accessTable: AccessEntry[];
    /** Authentication for transports outside Fastify's routes (the gRPC server): the same keys, JWTs and tenants. */
    authenticator: Authenticator;
    /**
     * The per-tenant and per-key rate limits for a call outside Fastify's routes (the gRPC server): counts the
     * call, and returns the refusal when one is exceeded.
     */
    rateLimitCall(caller: Caller): Promise<RateRefusal | undefined>;
  }
  interface FastifyRequest {
    /** What the audit entry names as the target, when the route's params do not (e.g. the id a POST created). */
    auditTarget?: string;
  }
}

type Presented = { token: string } | { malformed: string } | undefined;

/** Request headers (HTTP) or call metadata (gRPC), lower-case names. */
export type CredentialHeaders = Record<string, string | string[] | undefined>;

/** The credential in the request, if any: a Bearer token or an X-API-Key. */
function presented(headers: CredentialHeaders): Presented {
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

const AUTH_REFUSALS = { 401: 'Unauthenticated', 403: 'PermissionDenied', 404: 'NoSuchEndpoint', 503: 'Unavailable' } as const;

/** An authentication failure as the refusal every binding renders (src/a2a/error-forms.ts). */
export function refusalOf(err: AuthFailure): Refusal {
  const metadata = Object.fromEntries(Object.entries(err.extra).map(([k, v]) => [k, Array.isArray(v) ? v.join(',') : String(v)]));
  return { name: AUTH_REFUSALS[err.status], message: err.error, extra: err.extra, metadata, ...(err.status === 503 ? { retryAfterS: 5 } : {}) };
}

/**
 * Credentials to a caller, for every transport: the HTTP hook below passes request headers, the gRPC server
 * (src/grpc/server.ts) call metadata. `authenticate` returns the caller (undefined on a public route without
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

export function createAuthenticator(deps: Pick<AuthDeps, 'keys' | 'quotas' | 'jwt'>): Authenticator {
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
    const id = await identify(cred.token);
    if (!policy.roles.includes(id.role)) {
      throw new AuthFailure(403, `This needs the role ${policy.roles.join(' or ')}; this key's role is ${id.role}`, { requiredRoles: policy.roles });
    }
    return { keyId: id.keyId, role: id.role, tenant: await tenantOf(headers, id), via: id.via, ...(id.agentId ? { agentId: id.agentId } : {}) };
  }
  return { authenticate };
}

export async function installAuth(app: FastifyInstance, deps: AuthDeps): Promise<void> {
  // Every route must say who may call it; a route that forgot fails here, at start-up, not in production.
  const table: AccessEntry[] = [];
  app.decorate('accessTable', table);
  app.addHook('onRoute', (route) => {
    const auth = route.config?.auth as Access | undefined;
    if (!auth) throw new Error(`route ${route.method} ${route.url} declares no access policy (config.auth)`);
    for (const method of [route.method].flat()) if (method !== 'HEAD') table.push({ method, url: route.url, access: auth });
  });

  const authenticator = createAuthenticator(deps);
  app.decorate('authenticator', authenticator);
  async function authenticate(req: FastifyRequest, policy: Access): Promise<void> {
    const caller = await authenticator.authenticate(req.headers, policy);
    if (caller) req.caller = caller;
  }

  await app.register(rateLimit, {
    global: false,
    skipOnError: true, // a Redis outage must not take the API down: requests pass unlimited until it is back
    nameSpace: 'switchboard-rl:',
    ...(deps.redisUrl ? { redis: await redisClient(deps.redisUrl, app) } : {}),
  });
  const perTenant = app.createRateLimit({
    timeWindow: 1000,
    keyGenerator: (req) => `t:${req.caller!.tenant}`,
    max: async (req) => (await deps.quotas.of(req.caller!.tenant))?.requestsPerSecond ?? 1,
  });
  const perKey = app.createRateLimit({
    timeWindow: 1000,
    keyGenerator: (req) => `k:${req.caller!.keyId}`,
    max: async (req) => (await deps.quotas.of(req.caller!.tenant))?.requestsPerSecondPerKey ?? 1,
  });
  const anonymous = app.createRateLimit({ timeWindow: 1000, max: deps.anonymousRps ?? 1000 });

  type Limit = Awaited<ReturnType<typeof anonymous>>;
  const exceeded = (r: Limit): r is Extract<Limit, { isAllowed: false }> => !r.isAllowed && r.isExceeded;
  const tooMany = (req: FastifyRequest, reply: FastifyReply, quota: string, scope: string, r: { max?: number; ttlInSeconds?: number }) => {
    quotaRefusals.inc({ quota });
    const message = `Rate limit reached: ${r.max} requests per second ${scope}; retry after the Retry-After seconds`;
    return refuse(req, reply, { name: 'RateLimited', message, retryAfterS: Math.max(1, r.ttlInSeconds ?? 1) });
  };

  app.decorate('rateLimitCall', async (caller: Caller): Promise<RateRefusal | undefined> => {
    // The limiters read only the caller and the route's (absent) rate-limit group.
    const call = { caller, routeOptions: { config: {} } } as unknown as FastifyRequest;
    const refusal = (quota: string, scope: string, r: { max?: number; ttlInSeconds?: number }) => {
      quotaRefusals.inc({ quota });
      return { quota, message: `Rate limit reached: ${r.max} requests per second ${scope}; retry after ${Math.max(1, r.ttlInSeconds ?? 1)} s`, retryAfterS: Math.max(1, r.ttlInSeconds ?? 1) };
    };
    const tenant = await perTenant(call);
    if (exceeded(tenant)) return refusal('requestsPerSecond', `for tenant ${caller.tenant}`, tenant);
    const key = await perKey(call);
    if (exceeded(key)) return refusal('requestsPerSecondPerKey', 'for this key', key);
    return undefined;
  });

  app.addHook('onRequest', async (req, reply) => {
    reply.header('x-request-id', req.id);
    const policy = req.routeOptions.config?.auth as Access | undefined;
    if (!policy) return; // no route matched: Fastify answers 404, which says nothing about anything
    try {
      await authenticate(req, policy);
    } catch (err) {
      if (err instanceof DependencyUnavailable) {
        return refuse(req, reply, { name: 'Unavailable', message: err.message, retryAfterS: err.retryAfterS, extra: { dependency: err.dependency } });
      }
      if (!(err instanceof AuthFailure)) throw err;
      if (err.status === 401) reply.header('www-authenticate', `${REALM}${presented(req.headers) ? ', error="invalid_token"' : ''}`);
      const limited = await anonymous(req);
      if (exceeded(limited)) return tooMany(req, reply, 'anonymousRequestsPerSecond', 'from this address without valid credentials', limited);
      return refuse(req, reply, refusalOf(err));
    }
    if (!req.caller) {
      const limited = await anonymous(req);
      if (exceeded(limited)) return tooMany(req, reply, 'anonymousRequestsPerSecond', 'from this address without credentials', limited);
      return;
    }
    const tenant = await perTenant(req);
    if (exceeded(tenant)) return tooMany(req, reply, 'requestsPerSecond', `for tenant ${req.caller.tenant}`, tenant);
    const key = await perKey(req);
    if (exceeded(key)) return tooMany(req, reply, 'requestsPerSecondPerKey', 'for this key', key);
  });

  app.addHook('onResponse', async (req, reply) => {
    const action = req.routeOptions.config?.audit;
    const caller = req.caller;
    if (!action || !caller || (caller.role !== 'admin' && caller.role !== 'operator')) return;
    const params = (req.params ?? {}) as Record<string, string>;
    const target = req.auditTarget ?? (Object.values(params).join('/') || undefined);
    await writeAudit(deps.pool, {
      tenant: caller.tenant,
      actor: caller.keyId,
      role: caller.role,
      action,
      target,
      status: reply.statusCode,
      requestId: String(req.id),
    }).catch((err) => req.log.error({ err }, 'audit entry not written'));
  });
}

/** An ioredis client for the rate-limit store; closed with the app. Loaded only when REDIS_URL is set. */
async function redisClient(url: string, app: FastifyInstance) {
  const { Redis } = await import('ioredis');
  // Commands fail fast while Redis is away (skipOnError lets the request through) instead of queueing.
  const redis = new Redis(url, { maxRetriesPerRequest: 1, enableOfflineQueue: false, connectTimeout: 2_000, lazyConnect: false });
  redis.on('error', (err) => app.log.warn({ err: err.message }, 'rate-limit store (Redis) unavailable'));
  app.addHook('onClose', async () => {
    redis.disconnect();
  });
  return redis;
}

