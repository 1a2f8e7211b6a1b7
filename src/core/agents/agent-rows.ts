/**
 * An agent as the registry stores it: the row's columns, and the Agent read from them. Shared by the registry and
 * its search (src/core/agents/search.ts).
 */
import type { Pool } from 'pg';
import { DEFAULT_RETRY, type AgentBinding, type AgentDialect, type AgentEndpoint, type AgentRetryPolicy } from '../../../task/contracts';
import type { AgentCardJson } from './cards';
import type { AgentStatus, ProbeRecord } from './refresh';
import type { SignatureCheck } from './signatures';

/** The retry policy's defaults live beside the policy (task/contracts.ts), where the activities read them too. */
export { DEFAULT_RETRY };

export interface Agent {
  id: string;
  tenant: string;
  name: string;
  sourceUrl: string;
  /** Null for an agent that publishes no card (0.1 or NEXUS registered with `protocol`). */
  cardUrl: string | null;
  card: AgentCardJson;
  endpoint: AgentEndpoint;
  priceMinor: number;
  retry: AgentRetryPolicy;
  createdAt: string;
  updatedAt: string;
  /** When the stored card last changed (registration, or a refresh or hub registration that brought another card). */
  cardChangedAt: string;
  /** Health from the liveness probes: routing should prefer healthy agents and skip down ones. */
  status: AgentStatus;
  statusReason: string;
  statusChangedAt: string;
  consecutiveFailures: number;
  lastProbe: ProbeRecord | null;
  signature: SignatureCheck;
  cardCache: { etag: string | null; noStore: boolean; fetchedAt: string; freshUntil: string | null };
}

// Every column but the search document and filter keys, which are large and only used inside queries.
export const COLUMN_NAMES = [
  'tenant', 'id', 'name', 'source_url', 'card_url', 'card', 'endpoint_url', 'protocol_version', 'streaming', 'binding', 'price_minor', 'retry',
  'created_at', 'updated_at', 'card_changed_at', 'status', 'status_reason', 'status_changed_at', 'consecutive_failures', 'last_probe', 'signature',
  'card_etag', 'card_no_store', 'card_fetched_at', 'card_fresh_until',
];
export const COLUMNS = COLUMN_NAMES.join(', ');

export interface AgentRow {
  tenant: string;
  id: string;
  name: string;
  source_url: string;
  card_url: string | null;
  card: AgentCardJson;
  endpoint_url: string;
  protocol_version: AgentDialect;
  streaming: boolean;
  binding: AgentBinding;
  price_minor: string;
  retry: AgentRetryPolicy;
  created_at: Date;
  updated_at: Date;
  card_changed_at: Date;
  status: AgentStatus;
  status_reason: string;
  status_changed_at: Date;
  consecutive_failures: number;
  last_probe: ProbeRecord | null;
  signature: SignatureCheck;
  card_etag: string | null;
  card_no_store: boolean;
  card_fetched_at: Date;
  card_fresh_until: Date | null;
}

/** The agent as PostgreSQL has it now, without a registry (the worker's sweeps have none). */
export async function findAgent(pool: Pool, tenant: string, id: string): Promise<Agent | undefined> {
  const { rows } = await pool.query<AgentRow>(`SELECT ${COLUMNS} FROM agents WHERE tenant = $1 AND id = $2`, [tenant, id]);
  return rows[0] && toAgent(rows[0]);
}

export function toAgent(r: AgentRow): Agent {
  return {
    id: r.id,
    tenant: r.tenant,
    name: r.name,
    sourceUrl: r.source_url,
    cardUrl: r.card_url,
    card: r.card,
    endpoint: { url: r.endpoint_url, protocolVersion: r.protocol_version, streaming: r.streaming, binding: r.binding },
    priceMinor: Number(r.price_minor),
    retry: { ...DEFAULT_RETRY, ...r.retry },
    createdAt: r.created_at.toISOString(),
    updatedAt: r.updated_at.toISOString(),
    cardChangedAt: r.card_changed_at.toISOString(),
    status: r.status,
    statusReason: r.status_reason,
    statusChangedAt: r.status_changed_at.toISOString(),
    consecutiveFailures: r.consecutive_failures,
    lastProbe: r.last_probe,
    signature: r.signature,
    cardCache: {
      etag: r.card_etag,
      noStore: r.card_no_store,
      fetchedAt: r.card_fetched_at.toISOString(),
      freshUntil: r.card_fresh_until?.toISOString() ?? null,
    },
  };
}
