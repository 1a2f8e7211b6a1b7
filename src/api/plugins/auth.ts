/**
 * Who may call (src/api/routes/auth-hooks.ts: authentication, roles, rate limits, the audit trail) and the tenants'
 * quotas, as `app.quotas`. Registered before any route: every route declares its access policy, checked here.
 * `app.credentialWatch` ends what a caller holds open (streams, hub sockets) once its credential lapses.
 */
import fp from 'fastify-plugin';
import type { Logger } from 'pino';
import { CredentialWatch } from '../../core/auth/credential-watch';
import type { EventHub } from '../../core/events/hub';
import type { KeyStore } from '../../core/auth/keys';
import type { BearerJwtVerifier } from '../../core/auth/plugin';
import { DEFAULT_QUOTAS, type Quotas, TenantQuotas } from '../../core/auth/quotas';
import { installAuth } from '../routes/auth-hooks';

declare module 'fastify' {
  interface FastifyInstance {
    quotas: TenantQuotas;
    credentialWatch: CredentialWatch;
  }
}

export interface AuthPluginOptions {
  keys: KeyStore;
  jwt?: BearerJwtVerifier;
  /** Process-wide quota defaults (SWITCHBOARD_QUOTA_*, SWITCHBOARD_RATE_LIMIT_*); a tenant's own settings win. */
  quotaDefaults?: Partial<Quotas>;
  /** REDIS_URL: rate-limit counters shared by every process. */
  redisUrl?: string;
  /** The process's event hub: its config notices (migration 023) reach the key and tenant caches at once. */
  events?: EventHub;
  log: Logger;
}

export const authPlugin = fp<AuthPluginOptions>(
  async (app, o) => {
    const quotas = new TenantQuotas(app.pg, { ...DEFAULT_QUOTAS, ...o.quotaDefaults });
    app.decorate('quotas', quotas);
    // A key revoked or deleted, an agent or a tenant deleted, in any process (migration 023's notices): the key cache
    // and the tenants' cache forget it at once, and what its callers hold open ends (streams, hub sockets).
    const credentialWatch = new CredentialWatch({ pool: app.pg, events: o.events, log: o.log });
    app.decorate('credentialWatch', credentialWatch);
    const unhear =
      o.events?.onConfigChange((n) => {
        o.keys.heard(n);
        if (n?.kind === 'tenants') quotas.forget(n.tenant);
      }) ?? (() => undefined);
    app.addHook('onClose', async () => {
      unhear();
      credentialWatch.close();
    });
    await installAuth(app, { pool: app.pg, keys: o.keys, quotas, jwt: o.jwt, redisUrl: o.redisUrl });
  },
  { name: 'switchboard-auth', fastify: '5.x', dependencies: ['switchboard-pg'] },
);
