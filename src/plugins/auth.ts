/**
 * Who may call (src/routes/auth-hooks.ts: authentication, roles, rate limits, the audit trail) and the tenants'
 * quotas, as `app.quotas`. Registered before any route: every route declares its access policy, checked here.
 */
import fp from 'fastify-plugin';
import type { KeyStore } from '../auth/keys';
import type { BearerJwtVerifier } from '../auth/plugin';
import { DEFAULT_QUOTAS, type Quotas, TenantQuotas } from '../auth/quotas';
import { installAuth } from '../routes/auth-hooks';

declare module 'fastify' {
  interface FastifyInstance {
    quotas: TenantQuotas;
  }
}

export interface AuthPluginOptions {
  keys: KeyStore;
  jwt?: BearerJwtVerifier;
  /** Process-wide quota defaults (SWITCHBOARD_QUOTA_*, SWITCHBOARD_RATE_LIMIT_*); a tenant's own settings win. */
  quotaDefaults?: Partial<Quotas>;
  /** REDIS_URL: rate-limit counters shared by every process. */
  redisUrl?: string;
}

export const authPlugin = fp<AuthPluginOptions>(
  async (app, o) => {
    const quotas = new TenantQuotas(app.pg, { ...DEFAULT_QUOTAS, ...o.quotaDefaults });
    app.decorate('quotas', quotas);
    await installAuth(app, { pool: app.pg, keys: o.keys, quotas, jwt: o.jwt, redisUrl: o.redisUrl });
  },
  { name: 'switchboard-auth', fastify: '5.x', dependencies: ['switchboard-pg'] },
);
