/**
 * The agent registry: fetches and validates an agent's card, checks its signature and probes its endpoint,
 * stores it, keeps it true through a refresh schedule per agent, and answers lookups and searches. Card, key
 * and probe requests go through the guarded outbound client, so a private or redirecting URL is refused like
 * any other call.
 */
import type { Pool, PoolClient } from 'pg';
import type { Outbound } from '../http/outbound';
import type { RegisterAgent } from './registration';
import type { AgentEndpoint } from '../../../task/contracts';
import { BindingError, CARDLESS_PROTOCOLS, CardError, chooseEndpoint, inDialect, parseAgentCard, type ParsedCard, parsedFromRegistration, type RegisteredProtocol } from './cards';
import { findMessageSend, sniffDialect } from './dialect-probe';
import {
  type AgentStatus,
  cacheColumns,
  DEFAULT_REFRESH_POLICY,
  fetchCard,
  probeEndpoint,
  type ProbeRecord,
  refreshAgent,
  type RefreshPolicy,
} from './refresh';
import type { RefreshScheduler } from './refresh-schedules';
import type { AgentLink } from './agent-client';
import { checkCardSignatures } from './signatures';
import { type AgentCredentialSpec, type AgentCredentials, CredentialError, authorizedFetch } from './agent-credentials';
import { ConfigCache } from '../events/config-cache';
import type { EventHub } from '../events/hub';
import { BlankName, checkNameFree, insertUnique, newId, urlHolder, urlTaken } from './agent-names';
import { type Agent, type AgentRow, COLUMNS, DEFAULT_RETRY, findAgent, toAgent } from './agent-rows';
import { type AgentPage, type AgentSearch, searchAgents } from './search';
import type { CardEmbedder } from './card-embedder';

export { type Agent, DEFAULT_RETRY, findAgent };
export { type AgentPage, type AgentSearch, QueryError, type RankedAgent } from './search';

export interface ProbeEntry {
  at: string;
  ok: boolean;
  latencyMs: number | null;
  status: AgentStatus;
  detail: Pick<ProbeRecord, 'endpoint' | 'card'>;
}

/** A registration that cannot succeed as asked: the message says why (HTTP 422, or `status`). */
export class RegistrationError extends Error {
  constructor(
    message: string,
    /** 400 when the request contradicts the card (a binding it does not offer); 422 when the card is at fault. */
    readonly status: 400 | 422 = 422,
  ) {
    super(message);
  }
}

export interface RegistryOptions {
  /** Runs a new agent's first refresh in Temporal (the deployment's sweep does the later ones). */
  scheduler?: RefreshScheduler;
  /** Thresholds, timeouts and trusted key origins; the refresh activity must get the same. */
  policy?: Partial<RefreshPolicy>;
  /** Where agents' outbound credentials are sealed; without it a registration that brings one is refused. */
  credentials?: AgentCredentials;
  /** Hears changes to agents in every process: with it, lookup() reads through a cache (src/core/events/config-cache.ts). */
  hub?: EventHub;
  /** Embeds cards for hybrid search (SWITCHBOARD_EMBEDDINGS_URL); unset: search is full-text. */
  embedder?: CardEmbedder;
}

const CARD_PATHS = ['/.well-known/agent-card.json', '/.well-known/agent.json'];

export class AgentRegistry {
  private readonly policy: RefreshPolicy;
  private readonly cache: ConfigCache<Agent | undefined>;

  constructor(
    private readonly pool: Pool,
    private readonly outbound: Outbound,
    private readonly opts: RegistryOptions = {},
  ) {
    this.policy = { ...DEFAULT_REFRESH_POLICY, ...opts.policy };
    this.cache = new ConfigCache(opts.hub, 'agents');
  }

  /** Stops hearing changes (the app closes). */
  close(): void {
    this.cache.close();
  }

  /**
   * Fetches and validates the card, checks its signature, stores the agent, and creates its refresh schedule,
   * which probes the endpoint at once and then every interval. The probe is left to the schedule so that a
   * hanging endpoint cannot hold up the registration, and so that registering sends the agent nothing but the
   * card request. A bad signature does not refuse the agent: it is what the agent's `signature` shows.
   * A URL the tenant has registered, and a name asked for that compares equal to another agent's, are refused
   * before the card is fetched, and again, race-proof, at the insert (src/core/agents/agent-names.ts); a name taken
   * from the card becomes a free variant of itself ("Echo (2)") instead.
   * @throws RegistrationError when no valid card can be fetched from the URL; AgentConflict for a URL or name taken.
   */
  async register(tenant: string, body: RegisterAgent): Promise<Agent> {
    await this.refuseTaken(tenant, body);
    if (body.url.startsWith('ws-agent:')) return this.registerHubAgent(tenant, body);
    const { credentials } = this.opts;
    if (body.credentials && !credentials) throw new RegistrationError('this Switchboard stores no agent credentials (SWITCHBOARD_SECRETS_KEY is unset)');
    let headers: Record<string, string> = {};
    try {
      if (body.credentials && credentials) headers = await credentials.headersOf(body.credentials);
    } catch (err) {
      if (err instanceof CredentialError) throw new RegistrationError(err.message);
      throw err;
    }
    const { fetched, protocol, url } = await this.cardOrDialect(body, headers);
    let parsed: ParsedCard;
    try {
      parsed = fetched ? parseAgentCard(fetched.raw, fetched.cardUrl) : parsedFromRegistration({ ...body, url });
    } catch (err) {
      if (err instanceof CardError) throw new RegistrationError(`${fetched?.cardUrl}: ${err.message}`);
      throw err;
    }
    const where = fetched?.cardUrl ?? body.url;
    // Kept with the agent, so a refresh reads the card in the same dialect.
    const dialect = protocol ?? (await this.undeclaredDialect(fetched, parsed, headers));
    let endpoint;
    try {
      endpoint = inDialect(chooseEndpoint(parsed, body.binding), dialect);
    } catch (err) {
      if (err instanceof BindingError) throw new RegistrationError(`${where}: ${err.message}`, 400);
      throw err;
    }
    if (endpoint.protocolVersion === 'nexus') endpoint = await this.findNexusEndpoint(endpoint, headers);
    const signature = fetched
      ? await checkCardSignatures(parsed.card, fetched.cardUrl, { fetch: this.outbound.fetch, trustedJkuOrigins: this.policy.trustedJkuOrigins, timeoutMs: this.policy.requestTimeoutMs })
      : { status: 'unsigned' as const, checkedAt: new Date().toISOString() };
    const cache = fetched ? cacheColumns(fetched.etag, fetched.cache, new Date(), this.policy) : { etag: null, noStore: false, freshUntil: null };
    const read = fetched ? 'the card was read' : 'no card is published: it was composed from the registration';
    const reason = this.opts.scheduler ? `registered: ${read}; the first probe of the endpoint is under way` : `registered: ${read}; the endpoint has not been probed`;

    const retry = { ...DEFAULT_RETRY, ...body.retry };
    const rows = await this.insertUnique(tenant, { url: body.url, name: body.name ?? parsed.name, asked: body.name !== undefined }, (db, name) =>
      db.query<AgentRow>(
        `INSERT INTO agents (tenant, id, name, source_url, card_url, card, endpoint_url, protocol_version, streaming, binding, price_minor, retry,
                             status, status_reason, signature, card_etag, card_no_store, card_fresh_until, protocol)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 'healthy', $13, $14, $15, $16, $17, $18) RETURNING ${COLUMNS}`,
        [
          tenant, newId(name), name, body.url, fetched?.cardUrl ?? null, parsed.card, endpoint.url, endpoint.protocolVersion, endpoint.streaming, endpoint.binding ?? 'JSONRPC',
          body.priceMinor ?? 0, retry, reason, signature, cache.etag, cache.noStore, cache.freshUntil, dialect ?? null,
        ],
      ),
    );
    const { id } = rows[0]!;
    if (body.credentials && credentials) {
      try {
        await credentials.put(tenant, id, body.credentials);
      } catch (err) {
        await this.pool.query('DELETE FROM agents WHERE tenant = $1 AND id = $2', [tenant, id]);
        throw err;
      }
    }
    if (this.opts.scheduler) {
      try {
        // The first probe at once, rather than at the sweep's next look for agents due.
        await this.opts.scheduler.refreshNow(tenant, id);
      } catch (err) {
        // Temporal away: better no registration than an agent whose first probe never comes.
        await this.pool.query('DELETE FROM agents WHERE tenant = $1 AND id = $2', [tenant, id]);
        throw err;
      }
    }
    // Embedded in the background, now rather than at the next poll; the registration does not wait for it.
    this.opts.embedder?.kick();
    return toAgent(rows[0]!);
  }

  /**
   * An agent that connects out to the hub (GET /hub) has no URL to read a card from: it is stored with its name
   * (required here) and URL `ws-agent://<id>`, down until it connects with an agent key; agent.register then
   * stores its card. Credentials are refused (Switchboard never calls it).
   */
  private async registerHubAgent(tenant: string, body: RegisterAgent): Promise<Agent> {
    if (!body.name) throw new RegistrationError('a hub agent (ws-agent://) has no card to read its name from: give "name"', 400);
    if (body.credentials || body.binding) throw new RegistrationError('a hub agent (ws-agent://) connects to Switchboard itself: it takes no credentials or binding', 400);
    const id = newId(body.name);
    const url = `ws-agent://${id}`;
    const rows = await this.insertUnique(tenant, { url, name: body.name, asked: true }, (db, name) =>
      db.query<AgentRow>(
        `INSERT INTO agents (tenant, id, name, source_url, card_url, card, endpoint_url, protocol_version, streaming, price_minor, retry, status, status_reason, signature)
         VALUES ($1, $2, $3, $4, $4, $5, $4, '0.3', false, $6, $7, 'down', 'not connected to the hub yet (GET /hub with an agent key)', $8) RETURNING ${COLUMNS}`,
        [tenant, id, name, url, { name, url, skills: [] }, body.priceMinor ?? 0, { ...DEFAULT_RETRY, ...body.retry }, { status: 'unsigned', checkedAt: new Date().toISOString() }],
      ),
    );
    this.opts.embedder?.kick();
    return toAgent(rows[0]!);
  }

  /**
   * A registration whose URL the tenant has registered, or whose name (asked for) another agent holds, is refused
   * before any request goes out for it (the insert checks again: this is only the early, cheap answer).
   * @throws AgentConflict naming the holder; RegistrationError (400) for a name with no visible character.
   */
  private async refuseTaken(tenant: string, body: RegisterAgent): Promise<void> {
    // A hub agent's URL is made from its new id: only its name can be taken.
    const sameUrl = body.url.startsWith('ws-agent:') ? undefined : await urlHolder(this.pool, tenant, body.url);
    if (sameUrl) throw urlTaken(body.url, sameUrl);
    if (body.name !== undefined) await blankAsRegistrationError(() => checkNameFree(this.pool, tenant, body.name!));
  }

  /** insertUnique (src/core/agents/agent-names.ts) with a blank name answered as a registration error (400). */
  private async insertUnique(tenant: string, want: { url: string; name: string; asked: boolean }, insert: (db: PoolClient, name: string) => Promise<{ rows: AgentRow[] }>): Promise<AgentRow[]> {
    return blankAsRegistrationError(async () => (await insertUnique(this.pool, tenant, want, insert)).rows);
  }

  /**
   * The agent for a call to it (a new task, routing): through the process's cache, which every change to the row
   * clears at once in every process (and which lives 2 s at most). Reads that must see the row as it is now
   * (admin reads, writes, refreshes) use get().
   */
  async lookup(tenant: string, id: string): Promise<Agent | undefined> {
    return this.cache.read(tenant, id, () => this.get(tenant, id));
  }

  /** The agent as PostgreSQL has it now. */
  async get(tenant: string, id: string): Promise<Agent | undefined> {
    return findAgent(this.pool, tenant, id);
  }

  /** An agent by id alone, whatever its tenant: for its public card only (ids are unique across tenants). */
  async getPublic(id: string): Promise<Agent | undefined> {
    const { rows } = await this.pool.query<AgentRow>(`SELECT ${COLUMNS} FROM agents WHERE id = $1`, [id]);
    return rows[0] && toAgent(rows[0]);
  }

  /** Every agent of the tenant, oldest first (for callers that need them all; the API pages with search()). */
  async list(tenant: string): Promise<Agent[]> {
    const { rows } = await this.pool.query<AgentRow>(`SELECT ${COLUMNS} FROM agents WHERE tenant = $1 ORDER BY created_at, id`, [tenant]);
    return rows.map(toAgent);
  }

  /**
   * Lists or searches agents (src/core/agents/search.ts): full-text, or hybrid (full text and meaning, fused) when a
   * model service is configured and answers.
   * @throws QueryError for a page token that is malformed or belongs to another query.
   */
  async search(tenant: string, s: AgentSearch): Promise<AgentPage> {
    return searchAgents(this.pool, this.opts.embedder, tenant, s);
  }

  /** The agent's recent probes, newest first (at most PROBES_KEPT are kept). */
  async probes(tenant: string, id: string, limit = 20): Promise<ProbeEntry[]> {
    const { rows } = await this.pool.query<{ at: Date; ok: boolean; latency_ms: number | null; status: AgentStatus; detail: ProbeEntry['detail'] }>(
      'SELECT at, ok, latency_ms, status, detail FROM agent_probes WHERE tenant = $1 AND agent_id = $2 ORDER BY at DESC, id DESC LIMIT $3',
      [tenant, id, limit],
    );
    return rows.map((r) => ({ at: r.at.toISOString(), ok: r.ok, latencyMs: r.latency_ms, status: r.status, detail: r.detail }));
  }

  /**
   * Refreshes the agent now, in this process: the card (when no longer fresh) and an endpoint probe. An
   * operator's "check again", and the only refresh there is without a scheduler. The sweep keeps its pace.
   * @returns the agent as it is afterwards, or undefined when there is no such agent.
   */
  async refreshNow(tenant: string, id: string): Promise<Agent | undefined> {
    const result = await refreshAgent({ pool: this.pool, fetch: this.outbound.fetch, grpc: this.outbound.grpc, policy: this.policy, credentials: this.opts.credentials }, tenant, id);
    // A changed card was queued for embedding by migration 037's trigger: embed it now rather than at the next poll.
    if (!result.gone) this.opts.embedder?.kick();
    return result.gone ? undefined : this.get(tenant, id);
  }

  /**
   * Deletes the agent; the refresh sweep no longer finds it.
   * @returns false when there was no such agent. Tasks already running keep their endpoint.
   */
  async remove(tenant: string, id: string): Promise<boolean> {
    const { rowCount } = await this.pool.query('DELETE FROM agents WHERE tenant = $1 AND id = $2', [tenant, id]);
    // This process's next call must not find it, even before the trigger's notice comes back.
    this.cache.drop(tenant, id);
    return (rowCount ?? 0) > 0;
  }

  /** A card URL is used as given; a base URL is tried at both well-known paths (0.3+ first, then 0.1/0.2). */
  /**
   * Replaces the agent's outbound credential (undefined drops it).
   * @returns false when the tenant has no such agent. @throws RegistrationError when no credential store is configured.
   */
  async setCredentials(tenant: string, id: string, spec: AgentCredentialSpec | undefined): Promise<boolean> {
    if (!(await this.get(tenant, id))) return false;
    const { credentials } = this.opts;
    if (!credentials) {
      if (spec) throw new RegistrationError('this Switchboard stores no agent credentials (SWITCHBOARD_SECRETS_KEY is unset)');
      return true;
    }
    if (spec) await credentials.put(tenant, id, spec);
    else await credentials.remove(tenant, id);
    return true;
  }

  /**
   * What an API may say about agents' outbound credentials: the kind (`bearer`, `apiKey`, `oauth2`) of each agent
   * that has one, read without opening anything.
   */
  async credentialKinds(tenant: string, ids: string[]): Promise<Map<string, string>> {
    const { rows } = await this.pool.query<{ agent_id: string; kind: string }>(
      'SELECT agent_id, kind FROM agent_credentials WHERE tenant = $1 AND agent_id = ANY($2)',
      [tenant, ids],
    );
    return new Map(rows.map((r) => [r.agent_id, r.kind]));
  }

  /**
   * The agent's card; or, for an agent that publishes none, the dialect the registration names (0.1, NEXUS,
   * Genesis) or, naming none, the one its endpoint answers in (seed 001's NANDA nodes: a card-less `POST /a2a`;
   * seed 000's NEXUS nodes; an envelope speaker), with the URL it answered at. @throws RegistrationError when there is neither a card nor an endpoint that answers.
   */
  private async cardOrDialect(body: RegisterAgent, headers: Record<string, string>): Promise<{ fetched?: CardFound; protocol?: RegisteredProtocol; url: string }> {
    if (body.protocol === 'nanda') return this.nandaNode(body, headers);
    // 0.1, NEXUS and Genesis agents may publish no card: the registration then says what a card would.
    const cardOptional = body.protocol !== undefined && CARDLESS_PROTOCOLS.includes(body.protocol);
    try {
      return { fetched: await this.fetchFirstCard(body.url, headers, cardOptional), protocol: body.protocol, url: body.url };
    } catch (err) {
      if (!(err instanceof RegistrationError) || body.protocol) throw err;
      const sniffed = await sniffDialect(this.linkWith(headers), body.url, this.policy.requestTimeoutMs);
      if (!sniffed) {
        throw new RegistrationError(`${err.message}; and no JSON-RPC endpoint answered tasks/send or message/send at ${body.url}, /a2a or /rpc, nor did the URL answer a Genesis QUERY envelope with a RESPONSE (an agent that speaks envelopes but does not answer unsigned ones registers with "protocol": "genesis")`);
      }
      return { protocol: sniffed.dialect, url: sniffed.url };
    }
  }

  /**
   * A NANDA node (seed 001) registered as one: its card if it has one, else its `message/send` endpoint (the URL
   * or `<url>/a2a`), called as 0.3 (its kind-less answers are read as 0.3's; src/core/agents/transports/v03-tolerance.ts).
   */
  private async nandaNode(body: RegisterAgent, headers: Record<string, string>): Promise<{ fetched?: CardFound; protocol: RegisteredProtocol; url: string }> {
    const fetched = await this.fetchFirstCard(body.url, headers, true);
    if (fetched) return { fetched, protocol: '0.3', url: body.url };
    const url = await findMessageSend(this.linkWith(headers), body.url, this.policy.requestTimeoutMs);
    if (!url) throw new RegistrationError(`no card, and no JSON-RPC endpoint answered message/send at ${body.url} or ${body.url.replace(/\/+$/, '')}/a2a (a NANDA node serves POST /a2a)`);
    return { protocol: '0.3', url };
  }

  /**
   * The dialect of a card that does not declare its version: A2A 0.1 (seed 003) and NEXUS (seed 000) publish
   * alike, so the endpoint is asked which methods it has; undefined (the card's reading stands) when it does
   * not say, or when the card declares a version.
   */
  private async undeclaredDialect(fetched: CardFound | undefined, parsed: ParsedCard, headers: Record<string, string>): Promise<RegisteredProtocol | undefined> {
    if (!fetched || (fetched.raw as { protocolVersion?: unknown }).protocolVersion !== undefined) return undefined;
    if (parsed.endpoint.protocolVersion !== '0.1') return undefined;
    const sniffed = await sniffDialect(this.linkWith(headers), parsed.endpoint.url, this.policy.requestTimeoutMs, { nexusFirst: true });
    return sniffed?.dialect === 'nexus' ? 'nexus' : undefined;
  }

  private linkWith(headers: Record<string, string>): AgentLink {
    return { fetch: this.outbound.fetch, credentials: Object.keys(headers).length ? async () => headers : undefined };
  }

  /**
   * A NEXUS agent answers at its root URL or at /rpc (seed 000): the first of the two that answers JSON-RPC (a
   * `tasks/get` of a task that does not exist) is its endpoint.
   * @throws RegistrationError naming what each answered when neither does.
   */
  private async findNexusEndpoint(endpoint: AgentEndpoint, headers: Record<string, string>): Promise<AgentEndpoint> {
    const root = endpoint.url.replace(/\/+$/, '');
    const urls = root.endsWith('/rpc') ? [endpoint.url] : [endpoint.url, `${root}/rpc`];
    const link: AgentLink = { fetch: this.outbound.fetch, credentials: Object.keys(headers).length ? async () => headers : undefined };
    const problems: string[] = [];
    for (const url of urls) {
      const probe = await probeEndpoint(link, { ...endpoint, url }, this.policy.requestTimeoutMs);
      if (probe.ok) return { ...endpoint, url };
      problems.push(probe.detail ?? `${url}: no answer`);
    }
    throw new RegistrationError(`no NEXUS JSON-RPC endpoint answered at / or /rpc (${problems.join('; ')})`);
  }

  /** @returns undefined when no card is found and `optional` (the agent's registration stands in for it). */
  private async fetchFirstCard(url: string, headers: Record<string, string> = {}, optional = false): Promise<CardFound | undefined> {
    const given = new URL(url);
    const urls = given.pathname.endsWith('.json')
      ? [given.toString()]
      : CARD_PATHS.map((p) => new URL(given.pathname.replace(/\/+$/, '') + p, given).toString());
    const problems: string[] = [];
    for (const cardUrl of urls) {
      const fetchImpl = Object.keys(headers).length ? authorizedFetch(this.outbound.fetch, async () => headers) : this.outbound.fetch;
      const res = await fetchCard(fetchImpl, cardUrl, { timeoutMs: this.policy.requestTimeoutMs });
      if (res.outcome === 'fetched') return { ...res, cardUrl };
      // A card-less agent (0.1, Genesis) is called at this URL later: an address the outbound guard refuses is
      // refused now, as on every other path, not registered to fail at its first task.
      if (optional && res.outcome === 'failed' && res.blocked) throw new RegistrationError(res.error);
      problems.push(res.outcome === 'failed' ? res.error : `${cardUrl}: HTTP 304`);
    }
    if (optional) return undefined;
    throw new RegistrationError(`no agent card could be fetched (${problems.join('; ')})`);
  }
}

type CardFound = Extract<Awaited<ReturnType<typeof fetchCard>>, { outcome: 'fetched' }> & { cardUrl: string };




/**
 * The endpoint a task forwards to: the agent's, plus `pushNotifications` when its card (1.0 or 0.3 shape alike)
 * declares them, so the forwarding activity can follow a non-streamed task by the agent's pushes.
 */
export function forwardingEndpoint(agent: Pick<Agent, 'endpoint' | 'card'>): AgentEndpoint {
  const push = (agent.card.capabilities as { pushNotifications?: unknown } | undefined)?.pushNotifications === true;
  return push ? { ...agent.endpoint, pushNotifications: true } : agent.endpoint;
}


async function blankAsRegistrationError<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof BlankName) throw new RegistrationError(`Invalid registration: name: ${err.message}`, 400);
    throw err;
  }
}
