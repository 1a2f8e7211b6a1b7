/**
 * Authentication, authorization, rate limits and the audit trail, as hooks on the root Fastify instance, so that
 * they run for every route before the route's own code (and before its body is parsed).
 *
 * - Each route declares `config.auth` (src/core/auth/caller.ts); a route without one stops the server from starting.
 * - Callers are authenticated by src/core/auth/plugin.ts; a refusal (401 with `WWW-Authenticate`, 403 naming the roles
 *   needed) takes the form of the route's endpoint (src/api/routes/refusals.ts): on the A2A endpoints a JSON-RPC error
 *   or AIP-193, elsewhere `{"error": "…"}`.
 * - Rate limits (requests/s per tenant and per key) through @fastify/rate-limit's stores (Redis when REDIS_URL
 *   is set, else memory): 429 with Retry-After. Requests without a caller are limited per client address.
 * - Audit: a route with `config.audit` writes one entry per admin/operator call, after the answer is sent.
 */
import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Pool } from 'pg';
import type { Access, Caller } from '../../core/auth/caller';
import { writeAudit } from '../../core/auth/audit';
import type { KeyStore } from '../../core/auth/keys';
import { EnrollmentTokens } from '../../core/auth/enrollment';
import type { TenantQuotas } from '../../core/auth/quotas';
import { AuthFailure, type Authenticator, type BearerJwtVerifier, type RateRefusal, createAuthenticator, presented } from '../../core/auth/plugin';
import { refusalOf } from '../a2a/error-forms';
import { DependencyUnavailable } from '../../core/health';
import { quotaRefusals } from '../../core/metrics';
import { refuse } from './refusals';

const REALM = 'Bearer realm="switchboard"';

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

export async function installAuth(app: FastifyInstance, deps: AuthDeps): Promise<void> {
  // Every route must say who may call it; a route that forgot fails here, at start-up, not in production.
  const table: AccessEntry[] = [];
  app.decorate('accessTable', table);
  app.addHook('onRoute', (route) => {
    const auth = route.config?.auth as Access | undefined;
    if (!auth) throw new Error(`route ${route.method} ${route.url} declares no access policy (config.auth)`);
    for (const method of [route.method].flat()) if (method !== 'HEAD') table.push({ method, url: route.url, access: auth });
  });

  // Hub enrollment tokens are read from the same database (GET /hub's policy accepts them).
  const authenticator = createAuthenticator({ ...deps, enrollment: new EnrollmentTokens(deps.pool) });
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

