/**
 * Outbound credentials: what Switchboard presents when IT calls a registered agent (forwarding, cancel, card
 * refresh, liveness probes). Set at registration; stored sealed (AES-256-GCM under SWITCHBOARD_SECRETS_KEY, the
 * tenant and agent bound in as associated data, so a sealed value copied to another agent's row does not open);
 * read only here, by the activities and the registry, to build request headers. No API returns them (only
 * `describe`, which names the kind), no workflow input or history holds them, and the log redacts them.
 *
 * A client's own Authorization is never forwarded to an agent: that would hand one party's credential to
 * another (reference/reliability-and-security.md §2.1).
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { Pool } from 'pg';
import { z } from 'zod';
import type { KeyRing } from '../temporal/encryption-codec';
import { ConfigCache } from '../events/config-cache';
import type { EventHub } from '../events/hub';

const FORBIDDEN_HEADERS = new Set(['host', 'content-length', 'content-type', 'connection', 'transfer-encoding', 'cookie', 'te', 'upgrade', 'accept-encoding']);
const secret = z.string().min(1).max(8192).regex(/^[^\r\n\0]*$/, 'must not contain line breaks or NUL');

export const AgentCredentialSpec = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('bearer'), token: secret }),
  z.strictObject({
    type: z.literal('apiKey'),
    header: z
      .string()
      .regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$/, 'must be an HTTP header name')
      .refine((h) => !FORBIDDEN_HEADERS.has(h.toLowerCase()), 'is a header Switchboard sets itself'),
    value: secret,
  }),
  z.strictObject({
    type: z.literal('oauth2'),
    /** OAuth 2.0 client-credentials grant (RFC 6749 §4.4): Switchboard fetches and caches the access token. */
    tokenUrl: z.url({ protocol: /^https?$/ }),
    clientId: secret,
    clientSecret: secret,
    scope: secret.optional(),
    audience: secret.optional(),
  }),
]);
export type AgentCredentialSpec = z.infer<typeof AgentCredentialSpec>;

/** What an API may say about an agent's credential: its kind and where it goes, never the secret. */
export type CredentialDescription =
  | { type: 'bearer' }
  | { type: 'apiKey'; header: string }
  | { type: 'oauth2'; tokenUrl: string; clientId: string; scope?: string };

/** An agent's token endpoint refused or failed; the message names the agent and the status, never a secret. */
export class CredentialError extends Error {}

/** Seals bytes under the current key of a ring; opens them under any key of it. */
export class SecretBox {
  constructor(private readonly ring: KeyRing) {}

  seal(plain: Buffer, aad: string): { keyId: string; sealed: Buffer } {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.ring.keys.get(this.ring.current)!, iv);
    cipher.setAAD(Buffer.from(aad));
    return { keyId: this.ring.current, sealed: Buffer.concat([iv, cipher.update(plain), cipher.final(), cipher.getAuthTag()]) };
  }

  /** @throws Error when the key is not in the ring or the sealed bytes do not open with this aad. */
  open(keyId: string, sealed: Buffer, aad: string): Buffer {
    const key = this.ring.keys.get(keyId);
    if (!key) throw new Error(`sealed under key ${keyId}, which SWITCHBOARD_SECRETS_KEY does not hold`);
    const decipher = createDecipheriv('aes-256-gcm', key, sealed.subarray(0, 12));
    decipher.setAAD(Buffer.from(aad));
    decipher.setAuthTag(sealed.subarray(sealed.length - 16));
    return Buffer.concat([decipher.update(sealed.subarray(12, sealed.length - 16)), decipher.final()]);
  }
}

export interface AgentCredentialsDeps {
  pool: Pool;
  box: SecretBox;
  /** The guarded outbound fetch: token endpoints are URLs from users like any other. */
  fetch: typeof fetch;
  /** How long before a token's expiry it is fetched again (ms). Default 30 s. */
  refreshMarginMs?: number;
  /**
   * Where changes to credential rows are heard (migration 022's trigger): while it listens, the sealed rows are
   * cached in the process (ConfigCache), so a call to an agent does not wait for a read of its credential first.
   * Without one, every use reads the row.
   */
  hub?: Pick<EventHub, 'listening' | 'onConfigChange'>;
}

/** A credential row as stored: still sealed (it is opened for each use, so no plaintext secret is kept). */
interface SealedRow {
  key_id: string;
  sealed: Buffer;
}

interface CachedToken {
  token: string;
  until: number;
}

export class AgentCredentials {
  private readonly tokens = new Map<string, CachedToken>();
  private readonly inFlight = new Map<string, Promise<CachedToken>>();
  private readonly rows: ConfigCache<SealedRow | undefined>;
  private readonly unsubscribe: () => void;

  constructor(private readonly d: AgentCredentialsDeps) {
    this.rows = new ConfigCache(d.hub, 'agent_credentials');
    // A credential changed in any process: an OAuth token fetched with the old one is not used again here either.
    this.unsubscribe =
      d.hub?.onConfigChange((n) => {
        if (!n) this.tokens.clear();
        else if (n.kind === 'agent_credentials' && n.id) this.tokens.delete(`${n.tenant}/${n.id}`);
      }) ?? (() => undefined);
  }

  /** Stops hearing changes (the process closes). */
  close(): void {
    this.rows.close();
    this.unsubscribe();
  }

  /** The box credentials are sealed in: Genesis secrets (src/core/genesis/store.ts) are sealed in it too. */
  get box(): SecretBox {
    return this.d.box;
  }

  /** Stores (or replaces) the agent's credential, sealed. */
  async put(tenant: string, agentId: string, spec: AgentCredentialSpec): Promise<void> {
    const { keyId, sealed } = this.d.box.seal(Buffer.from(JSON.stringify(spec)), aadOf(tenant, agentId));
    await this.d.pool.query(
      `INSERT INTO agent_credentials (tenant, agent_id, kind, key_id, sealed) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (tenant, agent_id) DO UPDATE SET kind = $3, key_id = $4, sealed = $5, updated_at = now()`,
      [tenant, agentId, spec.type, keyId, sealed],
    );
    this.changed(tenant, agentId);
  }

  async remove(tenant: string, agentId: string): Promise<void> {
    await this.d.pool.query('DELETE FROM agent_credentials WHERE tenant = $1 AND agent_id = $2', [tenant, agentId]);
    this.changed(tenant, agentId);
  }

  /** This process changed the agent's credential: its next call uses the new one (others hear the trigger's notice). */
  private changed(tenant: string, agentId: string): void {
    this.rows.drop(tenant, agentId);
    this.invalidate(tenant, agentId);
  }

  async describe(tenant: string, agentId: string): Promise<CredentialDescription | undefined> {
    const spec = await this.load(tenant, agentId);
    return spec && describeSpec(spec);
  }

  /**
   * The headers that authenticate Switchboard to the agent: `{}` when it has no credential.
   * @throws CredentialError when an OAuth token cannot be had.
   */
  async headersFor(tenant: string, agentId: string): Promise<Record<string, string>> {
    const spec = await this.load(tenant, agentId);
    return spec ? this.headersOf(spec, `${tenant}/${agentId}`) : {};
  }

  /** The headers for a credential not stored yet (registration fetches the card with it before the row exists). */
  async headersOf(spec: AgentCredentialSpec, cacheKey = ''): Promise<Record<string, string>> {
    switch (spec.type) {
      case 'bearer':
        return { authorization: `Bearer ${spec.token}` };
      case 'apiKey':
        return { [spec.header]: spec.value };
      case 'oauth2':
        return { authorization: `Bearer ${(await this.token(spec, cacheKey)).token}` };
    }
  }

  /** Forgets a cached token, e.g. after the agent answered 401 with it. */
  invalidate(tenant: string, agentId: string): void {
    this.tokens.delete(`${tenant}/${agentId}`);
  }

  /** The agent's credential, opened from its row (cached sealed while the hub listens). */
  private async load(tenant: string, agentId: string): Promise<AgentCredentialSpec | undefined> {
    const row = await this.rows.read(tenant, agentId, async () => {
      const { rows } = await this.d.pool.query<SealedRow>('SELECT key_id, sealed FROM agent_credentials WHERE tenant = $1 AND agent_id = $2', [tenant, agentId]);
      return rows[0];
    });
    if (!row) return undefined;
    return JSON.parse(this.d.box.open(row.key_id, row.sealed, aadOf(tenant, agentId)).toString('utf8')) as AgentCredentialSpec;
  }

  private async token(spec: Extract<AgentCredentialSpec, { type: 'oauth2' }>, cacheKey: string): Promise<CachedToken> {
    const hit = cacheKey ? this.tokens.get(cacheKey) : undefined;
    if (hit && hit.until > Date.now()) return hit;
    const running = cacheKey ? this.inFlight.get(cacheKey) : undefined;
    if (running) return running;
    const fetching = this.fetchToken(spec, cacheKey).finally(() => this.inFlight.delete(cacheKey));
    if (cacheKey) this.inFlight.set(cacheKey, fetching);
    const got = await fetching;
    if (cacheKey) this.tokens.set(cacheKey, got);
    return got;
  }

  private async fetchToken(spec: Extract<AgentCredentialSpec, { type: 'oauth2' }>, who: string): Promise<CachedToken> {
    const form = new URLSearchParams({ grant_type: 'client_credentials' });
    if (spec.scope) form.set('scope', spec.scope);
    if (spec.audience) form.set('audience', spec.audience);
    // client_secret_basic (RFC 6749 §2.3.1): each part form-urlencoded, then Basic.
    const basic = Buffer.from(`${encodeURIComponent(spec.clientId)}:${encodeURIComponent(spec.clientSecret)}`).toString('base64');
    let res: Response;
    try {
      res = await this.d.fetch(spec.tokenUrl, {
        method: 'POST',
        headers: { authorization: `Basic ${basic}`, 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
        body: form.toString(),
        signal: AbortSignal.timeout(10_000),
      });
    } catch (err) {
      throw new CredentialError(`the token endpoint of agent ${who || '(registering)'} could not be reached: ${(err as Error).message}`);
    }
    const body = (await res.json().catch(() => undefined)) as { access_token?: unknown; expires_in?: unknown } | undefined;
    if (!res.ok || typeof body?.access_token !== 'string' || !body.access_token) {
      throw new CredentialError(`the token endpoint of agent ${who || '(registering)'} answered HTTP ${res.status} without an access token`);
    }
    const lifetimeMs = typeof body.expires_in === 'number' && body.expires_in > 0 ? body.expires_in * 1000 : 300_000;
    const margin = Math.min(this.d.refreshMarginMs ?? 30_000, lifetimeMs / 2);
    return { token: body.access_token, until: Date.now() + lifetimeMs - margin };
  }
}

export function describeSpec(spec: AgentCredentialSpec): CredentialDescription {
  switch (spec.type) {
    case 'bearer':
      return { type: 'bearer' };
    case 'apiKey':
      return { type: 'apiKey', header: spec.header };
    case 'oauth2':
      return { type: 'oauth2', tokenUrl: spec.tokenUrl, clientId: spec.clientId, ...(spec.scope ? { scope: spec.scope } : {}) };
  }
}

/** A fetch that adds the headers `headers()` gives to every request (over the request's own). */
export function authorizedFetch(fetchImpl: typeof fetch, headers: () => Promise<Record<string, string>>): typeof fetch {
  return async (input, init) => {
    const extra = await headers();
    if (!Object.keys(extra).length) return fetchImpl(input, init);
    const merged = new Headers(init?.headers);
    for (const [k, v] of Object.entries(extra)) merged.set(k, v);
    return fetchImpl(input, { ...init, headers: merged });
  };
}

const aadOf = (tenant: string, agentId: string) => `agent-credential/${tenant}/${agentId}`;
