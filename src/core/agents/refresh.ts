/**
 * Keeping a registered agent true: re-reading its card (as an HTTP cache would: max-age, no-store, ETag) and
 * probing its endpoint (over the agent's binding), then deriving its health. Registration runs the same steps once; afterwards a
 * Temporal Schedule per agent runs `refreshAgent` (activities/registry.ts), so refreshes survive restarts and
 * show up in Temporal UI. Every request goes through the guarded outbound fetch.
 */
import { performance } from 'node:perf_hooks';
import { status as grpcStatus } from '@grpc/grpc-js';
import type { Pool } from 'pg';
import type { AgentBinding, AgentDialect, AgentEndpoint } from '../../../task/contracts';
import { agentAnswered, agentClient, type AgentLink, type HttpTrace } from './agent-client';
import type { GrpcChannels } from '../http/outbound-grpc';
import { OutboundError } from '../http/outbound';
import { type AgentCardJson, CardError, parseAgentCard, type ParsedCard } from './cards';
import { checkCardSignatures, jcs, type SignatureCheck } from './signatures';
import { type AgentCredentials, authorizedFetch } from './agent-credentials';
import { inTransaction } from '../db/tx';
import { askGenesis } from './transports/genesis';
import { failingReason, recentWork } from '../trust/work-health';

export type AgentStatus = 'healthy' | 'degraded' | 'down';
export const AGENT_STATUSES: readonly AgentStatus[] = ['healthy', 'degraded', 'down'];

export interface RefreshPolicy {
  /** Failed endpoint probes in a row after which an agent is down (before that it is degraded). Default 3. */
  downAfterFailures: number;
  /** An endpoint slower than this is degraded. Default 2 s. */
  slowProbeMs: number;
  /** Each request of a refresh (card, key set, endpoint) gives up after this. Default 10 s. */
  requestTimeoutMs: number;
  /**
   * The longest a card's max-age is honoured: an agent that says "fresh for a year" is still re-read daily,
   * so a changed endpoint or a revoked signature is noticed. Default 24 h.
   */
  maxCardAgeMs: number;
  /** Origins whose JWKS a card's `jku` may name besides the card's own origin. */
  trustedJkuOrigins: readonly string[];
}

export const DEFAULT_REFRESH_POLICY: RefreshPolicy = {
  downAfterFailures: 3,
  slowProbeMs: 2_000,
  requestTimeoutMs: 10_000,
  maxCardAgeMs: 24 * 3600 * 1000,
  trustedJkuOrigins: [],
};

// ---------------------------------------------------------------------------------------------
// The card, as an HTTP cache reads it

/** The Cache-Control directives that matter to a card reader (RFC 9111 §5.2.2). */
export interface CacheDirectives {
  maxAgeS?: number;
  noStore: boolean;
  noCache: boolean;
}

export function parseCacheControl(header: string | null): CacheDirectives {
  const d: CacheDirectives = { noStore: false, noCache: false };
  for (const part of (header ?? '').split(',')) {
    const [name, value] = part.trim().toLowerCase().split('=', 2) as [string, string | undefined];
    if (name === 'no-store') d.noStore = true;
    else if (name === 'no-cache') d.noCache = true;
    else if (name === 'max-age' && value !== undefined) {
      const n = Number.parseInt(value.replace(/"/g, ''), 10);
      if (Number.isFinite(n) && n >= 0) d.maxAgeS = n;
    }
    // s-maxage is for shared caches of the response itself; Switchboard publishes its own card, not this one.
  }
  return d;
}

/** Until when a card fetched at `at` may be used without asking again; undefined = ask on every refresh. */
export function freshUntil(at: Date, d: CacheDirectives, policy: Pick<RefreshPolicy, 'maxCardAgeMs'>): Date | undefined {
  if (d.noStore || d.noCache || !d.maxAgeS) return undefined;
  return new Date(at.getTime() + Math.min(d.maxAgeS * 1000, policy.maxCardAgeMs));
}

export type CardFetch =
  | { outcome: 'fetched'; raw: unknown; etag?: string; cache: CacheDirectives; latencyMs: number }
  | { outcome: 'not-modified'; etag?: string; cache: CacheDirectives; latencyMs: number }
  /** `blocked`: the outbound guard refused the URL's address (private, loopback, …): no card, and no agent there. */
  | { outcome: 'failed'; error: string; latencyMs: number; blocked?: true };

/**
 * GETs a card, conditionally when an ETag is known. Never throws: a failure is an outcome to record.
 * The `A2A-Version: 1.0` header makes an agent that also speaks 0.3 serve its 1.0 card (a2a-js serves 0.3
 * without it).
 */
export async function fetchCard(fetchImpl: typeof fetch, url: string, opts: { etag?: string; timeoutMs: number }): Promise<CardFetch> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  const headers: Record<string, string> = { accept: 'application/json', 'a2a-version': '1.0' };
  if (opts.etag) headers['if-none-match'] = opts.etag;
  try {
    const res = await fetchImpl(url, { headers, signal: AbortSignal.timeout(opts.timeoutMs) });
    const etag = res.headers.get('etag') ?? undefined;
    const cache = parseCacheControl(res.headers.get('cache-control'));
    if (res.status === 304) {
      await res.body?.cancel().catch(() => undefined);
      if (!opts.etag) return { outcome: 'failed', error: `${url}: HTTP 304 to an unconditional request`, latencyMs: elapsed() };
      return { outcome: 'not-modified', etag: etag ?? opts.etag, cache, latencyMs: elapsed() };
    }
    const text = await res.text();
    if (res.status < 200 || res.status >= 300) return { outcome: 'failed', error: `${url}: HTTP ${res.status}`, latencyMs: elapsed() };
    let raw: unknown = text;
    try {
      raw = JSON.parse(text);
    } catch {
      // parseAgentCard reports "not a JSON object"
    }
    return { outcome: 'fetched', raw, etag, cache, latencyMs: elapsed() };
  } catch (err) {
    const blocked = err instanceof OutboundError && err.code === 'BLOCKED_ADDRESS' ? { blocked: true as const } : {};
    return { outcome: 'failed', error: describeError(err, url, opts.timeoutMs), latencyMs: elapsed(), ...blocked };
  }
}

// ---------------------------------------------------------------------------------------------
// The endpoint

export interface EndpointProbe {
  ok: boolean;
  latencyMs: number;
  /** Why the probe failed, or a note on a success (e.g. authentication required). */
  detail?: string;
}

const PROBE_TASK_ID = 'switchboard-liveness-probe';

/**
 * Asks the agent's endpoint for a task that does not exist (`GetTask` / 0.3 `tasks/get`, over the agent's
 * binding): a read that starts no work, yet proves the endpoint is up and speaks A2A. Any A2A answer counts,
 * the expected one being TaskNotFound. A 401/403 (gRPC UNAUTHENTICATED/PERMISSION_DENIED) counts too: the agent
 * is up, it wants credentials Switchboard's probe does not send. Never throws.
 */
export async function probeEndpoint(link: AgentLink, endpoint: AgentEndpoint, timeoutMs: number): Promise<EndpointProbe> {
  if (endpoint.protocolVersion === 'genesis') return probeGenesis(link, endpoint, timeoutMs);
  if ((endpoint.binding ?? 'JSONRPC') !== 'JSONRPC') return probeWithClient(link, endpoint, timeoutMs);
  const fetchImpl = link.credentials ? authorizedFetch(link.fetch, link.credentials) : link.fetch;
  const v1 = endpoint.protocolVersion === '1.0';
  const body = JSON.stringify({ jsonrpc: '2.0', id: 'switchboard-probe', method: v1 ? 'GetTask' : 'tasks/get', params: { id: PROBE_TASK_ID } });
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  try {
    const res = await fetchImpl(endpoint.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json', ...(v1 ? { 'a2a-version': '1.0' } : {}) },
      body,
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    const latencyMs = elapsed();
    if (res.status === 401 || res.status === 403) return { ok: true, latencyMs, detail: `HTTP ${res.status}: the endpoint requires credentials` };
    if (res.status !== 200) return { ok: false, latencyMs, detail: `${endpoint.url}: HTTP ${res.status}` };
    let answer: { jsonrpc?: unknown; result?: unknown; error?: unknown } | undefined;
    try {
      answer = JSON.parse(text);
    } catch {
      // handled below
    }
    if (answer?.jsonrpc !== '2.0' || (answer.result === undefined && answer.error === undefined)) {
      return { ok: false, latencyMs, detail: `${endpoint.url}: the answer is not JSON-RPC` };
    }
    return { ok: true, latencyMs };
  } catch (err) {
    return { ok: false, latencyMs: elapsed(), detail: describeError(err, endpoint.url, timeoutMs) };
  }
}

/**
 * A Genesis Nexus agent is asked a QUERY `get_status` of a resource that does not exist (unsigned: it starts
 * nothing, and its answer, a RESPONSE or a refusal, proves the agent is up). Any HTTP answer below 500 counts,
 * but 404 and 405 (nothing takes envelopes at the URL).
 */
async function probeGenesis(link: AgentLink, endpoint: AgentEndpoint, timeoutMs: number): Promise<EndpointProbe> {
  const fetchImpl = link.credentials ? authorizedFetch(link.fetch, link.credentials) : link.fetch;
  const started = performance.now();
  const asked = await askGenesis(fetchImpl, endpoint.url, timeoutMs);
  const latencyMs = Math.round(performance.now() - started);
  if (asked.status === undefined) return { ok: false, latencyMs, detail: describeError(asked.error, endpoint.url, timeoutMs) };
  // 404/405: nothing takes envelopes there.
  if (asked.status >= 500 || asked.status === 404 || asked.status === 405) return { ok: false, latencyMs, detail: `${endpoint.url}: HTTP ${asked.status}` };
  return asked.response ? { ok: true, latencyMs } : { ok: true, latencyMs, detail: `HTTP ${asked.status} to an unsigned QUERY envelope` };
}

/** The probe over HTTP+JSON or gRPC: the SDK's client reads the answer, whatever the binding's error form. */
async function probeWithClient(link: AgentLink, endpoint: AgentEndpoint, timeoutMs: number): Promise<EndpointProbe> {
  const trace: HttpTrace = {};
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  try {
    const client = await agentClient(endpoint, link, trace, { callTimeoutMs: timeoutMs });
    await client.getTask({ tenant: '', id: PROBE_TASK_ID }, { signal: AbortSignal.timeout(timeoutMs) });
    return { ok: true, latencyMs: elapsed() };
  } catch (err) {
    const latencyMs = elapsed();
    if (agentAnswered(err, trace)) return { ok: true, latencyMs };
    const denied =
      trace.grpcCode === undefined
        ? trace.lastStatus === 401 || trace.lastStatus === 403
        : trace.grpcCode === grpcStatus.UNAUTHENTICATED || trace.grpcCode === grpcStatus.PERMISSION_DENIED;
    if (denied) return { ok: true, latencyMs, detail: `${trace.grpcCode === undefined ? `HTTP ${trace.lastStatus}` : `gRPC ${grpcStatus[trace.grpcCode!]}`}: the endpoint requires credentials` };
    if (trace.grpcCode === grpcStatus.DEADLINE_EXCEEDED) return { ok: false, latencyMs, detail: `${endpoint.url}: no answer within ${timeoutMs} ms` };
    if (trace.grpcCode !== undefined) return { ok: false, latencyMs, detail: `${endpoint.url}: gRPC ${grpcStatus[trace.grpcCode]}: ${trace.grpcDetails ?? ''}`.trim() };
    if (trace.lastStatus !== undefined && trace.lastStatus >= 300) return { ok: false, latencyMs, detail: `${endpoint.url}: HTTP ${trace.lastStatus}` };
    return { ok: false, latencyMs, detail: describeError(err, endpoint.url, timeoutMs) };
  }
}

function describeError(err: unknown, url: string, timeoutMs: number): string {
  if (err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError')) return `${url}: no answer within ${timeoutMs} ms`;
  const message = err instanceof Error ? err.message : String(err);
  // OutboundError messages already name the URL.
  return message.includes(url) ? message : `${url}: ${message}`;
}

// ---------------------------------------------------------------------------------------------
// Health

export type CardOutcome =
  | { outcome: 'fresh' } // within max-age: not asked
  | { outcome: 'none' } // the agent publishes no card (0.1 or NEXUS, registered with `protocol`): nothing to read
  // the same card; `warning` when its signature verified before and no longer does (a key rotated away or revoked)
  | { outcome: 'not-modified'; latencyMs: number; warning?: string }
  | { outcome: 'unchanged'; latencyMs: number; warning?: string }
  | { outcome: 'changed'; latencyMs: number }
  | { outcome: 'failed'; latencyMs?: number; error: string } // unreachable or not a valid card: the stored one is kept
  | { outcome: 'rejected'; latencyMs: number; error: string }; // valid, but not adopted (a signature went bad)

export interface ProbeRecord {
  at: string;
  /** The endpoint answered. */
  ok: boolean;
  /** The endpoint's latency (the liveness figure). */
  latencyMs: number;
  endpoint: EndpointProbe;
  card: CardOutcome;
}

export interface Health {
  status: AgentStatus;
  reason: string;
  consecutiveFailures: number;
}

/**
 * The next health from the previous one and a probe. The endpoint decides: `policy.downAfterFailures` failed
 * probes in a row make an agent down (a single lost probe only degrades it, so one network blip does not take
 * an agent out of routing). A reachable endpoint that is slow, whose card could not be read or was refused,
 * or whose signature stopped verifying, is degraded: it works, but something needs attention.
 */
export function nextHealth(prev: Pick<Health, 'consecutiveFailures'>, probe: ProbeRecord, policy: Pick<RefreshPolicy, 'downAfterFailures' | 'slowProbeMs'>): Health {
  if (!probe.endpoint.ok) {
    const failures = prev.consecutiveFailures + 1;
    const cause = probe.endpoint.detail ?? 'no answer';
    if (failures >= policy.downAfterFailures) {
      return { status: 'down', consecutiveFailures: failures, reason: `${failures} endpoint probes failed in a row; last: ${cause}` };
    }
    return { status: 'degraded', consecutiveFailures: failures, reason: `endpoint probe failed (${failures} of ${policy.downAfterFailures} before down): ${cause}` };
  }
  const problems: string[] = [];
  if (probe.endpoint.latencyMs > policy.slowProbeMs) problems.push(`slow: the endpoint answered in ${probe.endpoint.latencyMs} ms (limit ${policy.slowProbeMs} ms)`);
  if (probe.card.outcome === 'failed') problems.push(`card not refreshed: ${probe.card.error}`);
  if (probe.card.outcome === 'rejected') problems.push(`card not adopted: ${probe.card.error}`);
  if ((probe.card.outcome === 'unchanged' || probe.card.outcome === 'not-modified') && probe.card.warning) problems.push(probe.card.warning);
  if (problems.length) return { status: 'degraded', consecutiveFailures: 0, reason: problems.join('; ') };
  return { status: 'healthy', consecutiveFailures: 0, reason: `endpoint answered in ${probe.endpoint.latencyMs} ms` };
}

// ---------------------------------------------------------------------------------------------
// One refresh of a stored agent

export interface RefreshDeps {
  pool: Pool;
  fetch: typeof fetch;
  policy?: Partial<RefreshPolicy>;
  /** The agents' outbound credentials: the card request and the probe present them (key sets are fetched without). */
  credentials?: AgentCredentials;
  /** The guarded gRPC channels (Outbound.grpc), for agents called over gRPC. */
  grpc?: GrpcChannels;
}

export type RefreshResult =
  | { agentId: string; gone: true }
  | {
      agentId: string;
      gone: false;
      status: AgentStatus;
      statusChanged: boolean;
      reason: string;
      card: CardOutcome['outcome'];
      signature: SignatureCheck['status'];
      endpointOk: boolean;
      latencyMs: number;
    };

interface StoredAgent {
  card_url: string | null;
  card: AgentCardJson;
  endpoint_url: string;
  protocol_version: AgentDialect;
  /** The dialect the registration named: the endpoint stays as registered whatever the card says. */
  protocol: string | null;
  streaming: boolean;
  binding: AgentBinding;
  card_etag: string | null;
  card_no_store: boolean;
  card_fresh_until: Date | null;
  signature: SignatureCheck;
  status: AgentStatus;
  status_reason: string;
}

/** How many probes per agent `agent_probes` keeps. */
export const PROBES_KEPT = 100;

/**
 * Refreshes one agent: its card when the cached copy is no longer fresh, then an endpoint probe, then its
 * health, all written in one transaction. The requests run before the transaction (no row lock is held across
 * the network); the health is then derived from the row as it is at write time, so a concurrent refresh
 * cannot lose a failure count.
 * @returns `gone` when the agent no longer exists (deleted while its schedule still ran). Throws only on
 * database errors; every remote failure is recorded as the agent's state instead.
 */
export async function refreshAgent(deps: RefreshDeps, tenant: string, agentId: string): Promise<RefreshResult> {
  const policy = { ...DEFAULT_REFRESH_POLICY, ...deps.policy };
  const { rows } = await deps.pool.query<StoredAgent>(
    `SELECT card_url, card, endpoint_url, protocol_version, protocol, streaming, binding, card_etag, card_no_store, card_fresh_until, signature, status, status_reason
       FROM agents WHERE tenant = $1 AND id = $2`,
    [tenant, agentId],
  );
  const stored = rows[0];
  if (!stored) return { agentId, gone: true };
  // A hub agent (ws-agent://) has no URL to fetch or probe: its socket's heartbeats decide its health (src/api/hub/hub.ts).
  if (stored.endpoint_url.startsWith('ws-agent://')) {
    return { agentId, gone: false, status: stored.status, statusChanged: false, reason: stored.status_reason, card: 'fresh', signature: stored.signature.status, endpointOk: stored.status === 'healthy', latencyMs: 0 };
  }

  const now = new Date();
  const { credentials } = deps;
  const agentFetch = credentials ? authorizedFetch(deps.fetch, () => credentials.headersFor(tenant, agentId)) : deps.fetch;
  let card: CardOutcome = { outcome: 'fresh' };
  // What to write about the card: undefined = leave the stored columns alone.
  let adopt: { parsed: ParsedCard } | undefined;
  let cacheUpdate: { etag: string | null; noStore: boolean; freshUntil: Date | null; signature?: SignatureCheck } | undefined;

  const cardUrl = stored.card_url;
  const checkSignature = (c: AgentCardJson) =>
    checkCardSignatures(c, cardUrl ?? '', { fetch: deps.fetch, trustedJkuOrigins: policy.trustedJkuOrigins, timeoutMs: policy.requestTimeoutMs });
  const lostVerification = (check?: SignatureCheck) =>
    stored.signature.status === 'verified' && check && check.status !== 'verified' ? `the card's signature no longer verifies: ${check.reason ?? check.status}` : undefined;

  const due = stored.card_no_store || !stored.card_fresh_until || stored.card_fresh_until <= now;
  if (cardUrl === null) {
    card = { outcome: 'none' };
  } else if (due) {
    // no-store forbids keeping a validator, so the request is unconditional (RFC 9111 §5.2.2.5).
    const fetched = await fetchCard(agentFetch, cardUrl, { etag: stored.card_no_store ? undefined : stored.card_etag ?? undefined, timeoutMs: policy.requestTimeoutMs });
    if (fetched.outcome === 'failed') {
      card = { outcome: 'failed', latencyMs: fetched.latencyMs, error: fetched.error };
    } else if (fetched.outcome === 'not-modified') {
      // A 304 refreshes the stored response's headers (RFC 9111 §4.3.4), so the new max-age counts from now.
      // The card is the same, but its key may have been rotated away or revoked: a signed card is re-checked.
      const signature = stored.signature.status === 'unsigned' ? undefined : await checkSignature(stored.card);
      card = { outcome: 'not-modified', latencyMs: fetched.latencyMs, warning: lostVerification(signature) };
      cacheUpdate = { ...cacheColumns(fetched.etag, fetched.cache, now, policy), signature };
    } else {
      try {
        const parsed = parseAgentCard(fetched.raw, cardUrl);
        const signature = await checkSignature(parsed.card);
        const cache = cacheColumns(fetched.etag, fetched.cache, now, policy);
        if (jcs(parsed.card) === jcs(stored.card)) {
          card = { outcome: 'unchanged', latencyMs: fetched.latencyMs, warning: lostVerification(signature) };
          cacheUpdate = { ...cache, signature };
        } else if (stored.signature.status === 'verified' && signature.status !== 'verified') {
          // A signed card replaced by one that does not verify may be someone else's: keep serving the verified
          // one until a person looks. The stored validators still describe the verified card, so the next
          // refresh reads the new one again (and adopts it once it verifies).
          card = { outcome: 'rejected', latencyMs: fetched.latencyMs, error: `the new card is ${signature.status}${signature.reason ? ` (${signature.reason})` : ''}; the last verified card is kept` };
        } else {
          card = { outcome: 'changed', latencyMs: fetched.latencyMs };
          cacheUpdate = { ...cache, signature };
          adopt = { parsed };
        }
      } catch (err) {
        if (!(err instanceof CardError)) throw err;
        card = { outcome: 'failed', latencyMs: fetched.latencyMs, error: `${cardUrl}: ${err.message}` };
      }
    }
  }

  // Probe the endpoint the agent will be called at from now on: the new card's when it changed, over the same
  // binding while the card still offers it (else the card's preferred one).
  // A dialect the registration named pins the endpoint (a NEXUS one was found by probing, not in the card).
  const adopted = adopt && !stored.protocol ? (adopt.parsed.interfaces.find((i) => i.binding === stored.binding) ?? adopt.parsed.endpoint) : undefined;
  const endpoint = adopted ?? { url: stored.endpoint_url, protocolVersion: stored.protocol_version, streaming: stored.streaming, binding: stored.binding };
  const link: AgentLink = { fetch: deps.fetch, grpc: deps.grpc, credentials: credentials ? () => credentials.headersFor(tenant, agentId) : undefined };
  const probed = await probeEndpoint(link, endpoint, policy.requestTimeoutMs);
  const probe: ProbeRecord = { at: now.toISOString(), ok: probed.ok, latencyMs: probed.latencyMs, endpoint: probed, card };

  return inTransaction(deps.pool, async (client): Promise<RefreshResult> => {
    const { rows: current } = await client.query<{ status: AgentStatus; consecutive_failures: number }>(
      'SELECT status, consecutive_failures FROM agents WHERE tenant = $1 AND id = $2 FOR UPDATE',
      [tenant, agentId],
    );
    if (!current[0]) return { agentId, gone: true };
    let health = nextHealth({ consecutiveFailures: current[0].consecutive_failures }, probe, policy);
    // Probes say the endpoint answers; the task projection says whether it does the work (src/core/trust/work-health.ts).
    if (health.status === 'healthy') {
      const work = (await recentWork(client, tenant, [agentId])).get(agentId);
      if (work?.failing) health = { ...health, status: 'degraded', reason: failingReason(work) };
    }
    await client.query(
      `UPDATE agents SET
         status = $3, status_reason = $4, consecutive_failures = $5, last_probe = $6,
         status_changed_at = CASE WHEN status = $3 THEN status_changed_at ELSE now() END,
         card_etag = CASE WHEN $7 THEN $8 ELSE card_etag END,
         card_no_store = CASE WHEN $7 THEN $9 ELSE card_no_store END,
         card_fresh_until = CASE WHEN $7 THEN $10 ELSE card_fresh_until END,
         card_fetched_at = CASE WHEN $7 THEN now() ELSE card_fetched_at END,
         signature = COALESCE($11, signature),
         -- a name the registrant chose is kept; one taken from the card (or its free variant, "Echo (2)") follows a
         -- new name on the card when that name is free in the tenant (migration 034), else stays as it is
         name = CASE WHEN $12::jsonb IS NOT NULL AND $12::jsonb->>'name' IS DISTINCT FROM card->>'name'
                      AND (name = card->>'name' OR (starts_with(name, card->>'name') AND substr(name, length(card->>'name') + 1) ~ '^ \(\d+\)$'))
                      AND switchboard_agent_name_key($12::jsonb->>'name') <> ''
                      AND NOT EXISTS (SELECT 1 FROM agents o WHERE o.tenant = $1 AND o.id <> $2
                                         AND switchboard_agent_name_key(o.name) = switchboard_agent_name_key($12::jsonb->>'name'))
                     THEN $12::jsonb->>'name' ELSE name END,
         card_changed_at = CASE WHEN $12::jsonb IS NOT NULL AND $12::jsonb IS DISTINCT FROM card THEN now() ELSE card_changed_at END,
         card = COALESCE($12, card),
         endpoint_url = COALESCE($13, endpoint_url),
         protocol_version = COALESCE($14, protocol_version),
         streaming = COALESCE($15, streaming),
         binding = COALESCE($16, binding),
         updated_at = now()
       WHERE tenant = $1 AND id = $2`,
      [
        tenant, agentId, health.status, health.reason, health.consecutiveFailures, probe,
        cacheUpdate !== undefined, cacheUpdate?.etag ?? null, cacheUpdate?.noStore ?? false, cacheUpdate?.freshUntil ?? null,
        cacheUpdate?.signature ?? null,
        adopt?.parsed.card ?? null, adopted?.url ?? null, adopted?.protocolVersion ?? null, adopted?.streaming ?? null, adopted?.binding ?? null,
      ],
    );
    await recordProbe(client, tenant, agentId, probe, health.status);
    return {
      agentId,
      gone: false,
      status: health.status,
      statusChanged: health.status !== current[0].status,
      reason: health.reason,
      card: card.outcome,
      signature: (cacheUpdate?.signature ?? stored.signature).status,
      endpointOk: probe.ok,
      latencyMs: probe.latencyMs,
    };
  });
}

/** The cache columns after a successful read. no-store: neither validator nor freshness is kept. */
export function cacheColumns(etag: string | undefined, cache: CacheDirectives, at: Date, policy: Pick<RefreshPolicy, 'maxCardAgeMs'>) {
  return { etag: cache.noStore ? null : etag ?? null, noStore: cache.noStore, freshUntil: freshUntil(at, cache, policy) ?? null };
}

/** Appends a probe to the agent's history and trims it to the newest PROBES_KEPT. */
export async function recordProbe(db: Pick<Pool, 'query'>, tenant: string, agentId: string, probe: ProbeRecord, status: AgentStatus): Promise<void> {
  await db.query(
    'INSERT INTO agent_probes (tenant, agent_id, at, ok, latency_ms, status, detail) VALUES ($1, $2, $3, $4, $5, $6, $7)',
    [tenant, agentId, probe.at, probe.ok, probe.latencyMs, status, { endpoint: probe.endpoint, card: probe.card }],
  );
  await db.query(
    `DELETE FROM agent_probes WHERE tenant = $1 AND agent_id = $2 AND id < (
       SELECT min(id) FROM (SELECT id FROM agent_probes WHERE tenant = $1 AND agent_id = $2 ORDER BY id DESC LIMIT ${PROBES_KEPT}) newest)`,
    [tenant, agentId],
  );
}
