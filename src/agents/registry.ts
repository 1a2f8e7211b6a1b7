/**
 * The agent registry: fetches and validates an agent's card, stores it, and answers lookups. Card fetches go
 * through the guarded outbound client, so a private or redirecting URL is refused like any other call.
 */
import { randomBytes } from 'node:crypto';
import type { Pool } from 'pg';
import type { Outbound } from '../http/outbound';
import type { RegisterAgent } from '../a2a/schemas';
import type { AgentEndpoint, AgentRetryPolicy } from '../../workflows/types';
import { type AgentCardJson, CardError, parseAgentCard } from './cards';

export const DEFAULT_RETRY: AgentRetryPolicy = { maxAttempts: 3, initialIntervalMs: 1000, backoffCoefficient: 2, attemptTimeoutMs: 30_000 };

export interface Agent {
  id: string;
  tenant: string;
  name: string;
  sourceUrl: string;
  cardUrl: string;
  card: AgentCardJson;
  endpoint: AgentEndpoint;
  priceMinor: number;
  retry: AgentRetryPolicy;
  createdAt: string;
}

/** A registration that cannot succeed as asked: the message says why (HTTP 422). */
export class RegistrationError extends Error {}

const CARD_PATHS = ['/.well-known/agent-card.json', '/.well-known/agent.json'];

export class AgentRegistry {
  constructor(private readonly pool: Pool, private readonly outbound: Outbound) {}

  /** @throws RegistrationError when no valid card can be fetched from the URL. */
  async register(tenant: string, body: RegisterAgent): Promise<Agent> {
    const { card, cardUrl } = await this.fetchCard(body.url);
    let parsed;
    try {
      parsed = parseAgentCard(card, cardUrl);
    } catch (err) {
      if (err instanceof CardError) throw new RegistrationError(`${cardUrl}: ${err.message}`);
      throw err;
    }
    const name = body.name ?? parsed.name;
    const id = `${slug(name)}-${randomBytes(3).toString('hex')}`;
    const retry = { ...DEFAULT_RETRY, ...body.retry };
    const { rows } = await this.pool.query<AgentRow>(
      `INSERT INTO agents (tenant, id, name, source_url, card_url, card, endpoint_url, protocol_version, streaming, price_minor, retry)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING *`,
      [tenant, id, name, body.url, cardUrl, parsed.card, parsed.endpoint.url, parsed.endpoint.protocolVersion, parsed.endpoint.streaming, body.priceMinor ?? 0, retry],
    );
    return toAgent(rows[0]);
  }

  async get(tenant: string, id: string): Promise<Agent | undefined> {
    const { rows } = await this.pool.query<AgentRow>('SELECT * FROM agents WHERE tenant = $1 AND id = $2', [tenant, id]);
    return rows[0] && toAgent(rows[0]);
  }

  async list(tenant: string): Promise<Agent[]> {
    const { rows } = await this.pool.query<AgentRow>('SELECT * FROM agents WHERE tenant = $1 ORDER BY created_at, id', [tenant]);
    return rows.map(toAgent);
  }

  /** @returns false when there was no such agent. Tasks already running keep their endpoint. */
  async remove(tenant: string, id: string): Promise<boolean> {
    const { rowCount } = await this.pool.query('DELETE FROM agents WHERE tenant = $1 AND id = $2', [tenant, id]);
    return (rowCount ?? 0) > 0;
  }

  /** A card URL is used as given; a base URL is tried at both well-known paths (0.3+ first, then 0.1/0.2). */
  private async fetchCard(url: string): Promise<{ card: unknown; cardUrl: string }> {
    const given = new URL(url);
    const urls = given.pathname.endsWith('.json')
      ? [given.toString()]
      : CARD_PATHS.map((p) => new URL(given.pathname.replace(/\/+$/, '') + p, given).toString());
    const problems: string[] = [];
    for (const cardUrl of urls) {
      let res;
      try {
        // With the version header, an agent that also speaks 0.3 serves its 1.0 card (a2a-js serves 0.3 without it).
        res = await this.outbound.getJson(cardUrl, { headers: { accept: 'application/json', 'a2a-version': '1.0' } });
      } catch (err) {
        problems.push(`${cardUrl}: ${(err as Error).message}`);
        continue;
      }
      if (res.status >= 200 && res.status < 300) return { card: res.body, cardUrl };
      problems.push(`${cardUrl}: HTTP ${res.status}`);
    }
    throw new RegistrationError(`no agent card could be fetched (${problems.join('; ')})`);
  }
}

interface AgentRow {
  tenant: string;
  id: string;
  name: string;
  source_url: string;
  card_url: string;
  card: AgentCardJson;
  endpoint_url: string;
  protocol_version: '1.0' | '0.3';
  streaming: boolean;
  price_minor: string;
  retry: AgentRetryPolicy;
  created_at: Date;
}

function toAgent(r: AgentRow): Agent {
  return {
    id: r.id,
    tenant: r.tenant,
    name: r.name,
    sourceUrl: r.source_url,
    cardUrl: r.card_url,
    card: r.card,
    endpoint: { url: r.endpoint_url, protocolVersion: r.protocol_version, streaming: r.streaming },
    priceMinor: Number(r.price_minor),
    retry: { ...DEFAULT_RETRY, ...r.retry },
    createdAt: r.created_at.toISOString(),
  };
}

function slug(name: string): string {
  return name.toLowerCase().normalize('NFKD').replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 40) || 'agent';
}
