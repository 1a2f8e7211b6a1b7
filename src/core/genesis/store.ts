/**
 * Genesis Nexus state in PostgreSQL: agents' secrets (sealed like outbound credentials), the envelopes seen
 * (replay protection and their answers), topic subscriptions and event deliveries.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import type { SecretBox } from '../agents/agent-credentials';
import { GATEWAY_IDENTITY } from '../agents/transports/genesis';
import { AGENT_PUSH_CHANNEL } from '../events/hub';

/** The answer given to an envelope. */
/** The agent-push follow id under which a RESPONSE to request `id` wakes the turn waiting for it (activities/genesis.ts). */
export const responseFollowId = (tenant: string, id: string): string => `genesis-response:${tenant}:${id}`;

export interface StoredAnswer {
  status: number;
  body: unknown;
}

/** An answer as sent: its status and the exact JSON text, which a replay sends again byte for byte. */
export interface SentAnswer {
  status: number;
  text: string;
}

export interface MessageRow {
  tenant: string;
  id: string;
  type: string;
  fromAgent: string;
  toAgent: string;
  encrypted: boolean;
  envelope: Record<string, unknown>;
  /** The envelope as subscribers get it: the bytes as sent, or the decrypted fields (absent before migration 028). */
  envelopeText?: string;
  /** contentDigestOf the envelope as sent (absent on rows from before migration 024). */
  contentDigest?: string;
  expiresAt?: Date;
  rememberUntil: Date;
  taskId?: string;
  answer?: StoredAnswer;
  /** The answer's bytes as first sent (absent on rows from before migration 024: `answer` re-serialised). */
  answerText?: string;
  response?: Record<string, unknown>;
  createdAt: Date;
}

export interface Subscription {
  id: string;
  tenant: string;
  agentId: string;
  eventType: string;
  url: string;
  createdAt: string;
}

export interface DeliveryRow {
  subscriptionId: string;
  status: 'pending' | 'delivered' | 'failed' | 'expired';
  attempts: number;
  lastError?: string;
  deliveredAt?: string;
}

const aadOf = (tenant: string, agentId: string) => `genesis-secret/${tenant}/${agentId}`;
const MAX_ERROR_CHARS = 500;

export class GenesisStore {
  constructor(
    private readonly pool: Pool,
    private readonly box?: SecretBox,
  ) {}

  // ---- secrets ----

  /** Issues (or rotates) the agent's secret: 32 random bytes, hex. @returns it (shown once), or undefined without the agent. */
  async issueSecret(tenant: string, agentId: string): Promise<string | undefined> {
    const secret = randomBytes(32).toString('hex');
    const { keyId, sealed } = this.requireBox().seal(Buffer.from(secret, 'utf8'), aadOf(tenant, agentId));
    const { rowCount } = await this.pool.query(
      `INSERT INTO genesis_secrets (tenant, agent_id, key_id, sealed)
       SELECT $1, $2, $3, $4 WHERE EXISTS (SELECT 1 FROM agents WHERE tenant = $1 AND id = $2)
       ON CONFLICT (tenant, agent_id) DO UPDATE SET key_id = $3, sealed = $4, created_at = now()`,
      [tenant, agentId, keyId, sealed],
    );
    return rowCount ? secret : undefined;
  }

  async secretOf(tenant: string, agentId: string): Promise<string | undefined> {
    const { rows } = await this.pool.query<{ key_id: string; sealed: Buffer }>('SELECT key_id, sealed FROM genesis_secrets WHERE tenant = $1 AND agent_id = $2', [tenant, agentId]);
    if (!rows[0]) return undefined;
    return this.requireBox().open(rows[0].key_id, rows[0].sealed, aadOf(tenant, agentId)).toString('utf8');
  }

  /** The ids of the tenant's agents registered under `name` (a Genesis sender may address an agent by it); at most 5. */
  async agentsNamed(tenant: string, name: string): Promise<string[]> {
    const { rows } = await this.pool.query<{ id: string }>('SELECT id FROM agents WHERE tenant = $1 AND name = $2 ORDER BY id LIMIT 5', [tenant, name]);
    return rows.map((r) => r.id);
  }

  private requireBox(): SecretBox {
    if (!this.box) throw new Error('Genesis secrets need SWITCHBOARD_SECRETS_KEY (the app was built without agent credentials)');
    return this.box;
  }

  // ---- envelopes seen ----

  /** Claims an envelope id for its first handling. @returns false when the id is already there (a replay, or a concurrent first). */
  async claim(row: Omit<MessageRow, 'createdAt' | 'answer' | 'answerText' | 'response' | 'taskId'>): Promise<boolean> {
    const { rowCount } = await this.pool.query(
      `INSERT INTO genesis_messages (tenant, id, type, from_agent, to_agent, encrypted, envelope, expires_at, remember_until, content_digest, envelope_text)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (tenant, id) DO NOTHING`,
      [row.tenant, row.id, row.type, row.fromAgent, row.toAgent, row.encrypted, row.envelope, row.expiresAt ?? null, row.rememberUntil, row.contentDigest ?? null, row.envelopeText ?? null],
    );
    return (rowCount ?? 0) > 0;
  }

  /** Forgets a claim whose handling failed before anything was applied, so that sending it again is not a replay. */
  async unclaim(tenant: string, id: string): Promise<void> {
    await this.pool.query('DELETE FROM genesis_messages WHERE tenant = $1 AND id = $2 AND answer IS NULL', [tenant, id]);
  }

  async find(tenant: string, id: string): Promise<MessageRow | undefined> {
    const { rows } = await this.pool.query('SELECT * FROM genesis_messages WHERE tenant = $1 AND id = $2', [tenant, id]);
    return rows[0] && toMessage(rows[0]);
  }

  async setTask(tenant: string, id: string, taskId: string): Promise<void> {
    await this.pool.query('UPDATE genesis_messages SET task_id = $3 WHERE tenant = $1 AND id = $2', [tenant, id, taskId]);
  }

  /**
   * Records the answer to an envelope, unless one was recorded already (two firsts of the same envelope at once):
   * the first answer stands. @returns the answer that stands, as its bytes, for every one of them to send.
   */
  async setAnswer(tenant: string, id: string, answer: StoredAnswer): Promise<SentAnswer> {
    const text = JSON.stringify(answer.body);
    const { rowCount } = await this.pool.query(
      'UPDATE genesis_messages SET answer = $3, answer_text = $4 WHERE tenant = $1 AND id = $2 AND answer_text IS NULL',
      [tenant, id, answer, text],
    );
    if (rowCount) return { status: answer.status, text };
    const stood = await this.find(tenant, id);
    return (stood && sentAnswerOf(stood)) ?? { status: answer.status, text };
  }

  /**
   * Records an agent's RESPONSE to a request (the latest one stands) and, in the same statement, wakes the turn
   * waiting for it, in whichever process it runs (a NOTIFY on the agent-push channel, see responseFollowId).
   */
  async setResponse(tenant: string, id: string, response: Record<string, unknown>): Promise<void> {
    const notice = JSON.stringify({ id: responseFollowId(tenant, id), taskId: id });
    await this.pool.query(
      `WITH recorded AS (UPDATE genesis_messages SET response = $3 WHERE tenant = $1 AND id = $2 RETURNING id)
       SELECT pg_notify($4, $5) FROM recorded`,
      [tenant, id, response, AGENT_PUSH_CHANNEL, notice],
    );
  }

  /**
   * Keeps a request the gateway sent an agent (a COMMAND made from an A2A message), so that the agent can POST
   * its RESPONSE to /genesis/messages later, as to a Genesis sender's; kept, as the task's other rows, until the
   * task is purged. A request already there (every attempt sends the same id; a sender's own) stays as it is.
   */
  async rememberSent(row: { tenant: string; id: string; type: string; toAgent: string; encrypted: boolean; envelope: Record<string, unknown>; taskId: string }): Promise<void> {
    await this.pool.query(
      `INSERT INTO genesis_messages (tenant, id, type, from_agent, to_agent, encrypted, envelope, remember_until, task_id)
       VALUES ($1, $2, $3, $4, $5, $6, $7, now(), $8) ON CONFLICT (tenant, id) DO NOTHING`,
      [row.tenant, row.id, row.type, GATEWAY_IDENTITY, row.toAgent, row.encrypted, row.envelope, row.taskId],
    );
  }

  // ---- subscriptions ----

  async subscribe(tenant: string, s: { agentId: string; eventType: string; url: string }): Promise<Subscription | undefined> {
    const { rows } = await this.pool.query(
      `INSERT INTO genesis_subscriptions (id, tenant, agent_id, event_type, url)
       SELECT $1, $2, $3, $4, $5 WHERE EXISTS (SELECT 1 FROM agents WHERE tenant = $2 AND id = $3)
       ON CONFLICT (tenant, agent_id, event_type, url) DO UPDATE SET url = EXCLUDED.url
       RETURNING *`,
      [`sub_${randomUUID()}`, tenant, s.agentId, s.eventType, s.url],
    );
    return rows[0] && toSubscription(rows[0]);
  }

  async unsubscribe(tenant: string, id: string): Promise<boolean> {
    const { rowCount } = await this.pool.query('DELETE FROM genesis_subscriptions WHERE tenant = $1 AND id = $2', [tenant, id]);
    return (rowCount ?? 0) > 0;
  }

  /** The tenant's subscriptions, optionally one agent's or one topic's. */
  async subscriptions(tenant: string, filter: { agentId?: string; eventType?: string } = {}): Promise<Subscription[]> {
    const { rows } = await this.pool.query(
      `SELECT * FROM genesis_subscriptions WHERE tenant = $1 AND ($2::text IS NULL OR agent_id = $2) AND ($3::text IS NULL OR event_type = $3)
       ORDER BY created_at, id`,
      [tenant, filter.agentId ?? null, filter.eventType ?? null],
    );
    return rows.map(toSubscription);
  }

  async subscription(tenant: string, id: string): Promise<Subscription | undefined> {
    const { rows } = await this.pool.query('SELECT * FROM genesis_subscriptions WHERE tenant = $1 AND id = $2', [tenant, id]);
    return rows[0] && toSubscription(rows[0]);
  }

  // ---- deliveries ----

  async createDeliveries(tenant: string, messageId: string, subscriptionIds: string[]): Promise<void> {
    await this.pool.query(
      `INSERT INTO genesis_deliveries (tenant, message_id, subscription_id) SELECT $1, $2, unnest($3::text[]) ON CONFLICT DO NOTHING`,
      [tenant, messageId, subscriptionIds],
    );
  }

  async delivery(tenant: string, messageId: string, subscriptionId: string): Promise<DeliveryRow | undefined> {
    const { rows } = await this.pool.query('SELECT * FROM genesis_deliveries WHERE tenant = $1 AND message_id = $2 AND subscription_id = $3', [tenant, messageId, subscriptionId]);
    return rows[0] && toDelivery(rows[0]);
  }

  async deliveries(tenant: string, messageId: string): Promise<DeliveryRow[]> {
    const { rows } = await this.pool.query('SELECT * FROM genesis_deliveries WHERE tenant = $1 AND message_id = $2 ORDER BY subscription_id', [tenant, messageId]);
    return rows.map(toDelivery);
  }

  /** Records one attempt: `delivered` on a 2xx; otherwise the error, and `final` (failed, expired) when no attempt follows. */
  async recordAttempt(tenant: string, messageId: string, subscriptionId: string, outcome: { delivered: true } | { error: string; final?: 'failed' | 'expired'; attempted: boolean }): Promise<void> {
    if ('delivered' in outcome) {
      await this.pool.query(
        `UPDATE genesis_deliveries SET status = 'delivered', attempts = attempts + 1, delivered_at = now(), last_error = NULL
         WHERE tenant = $1 AND message_id = $2 AND subscription_id = $3`,
        [tenant, messageId, subscriptionId],
      );
      return;
    }
    await this.pool.query(
      `UPDATE genesis_deliveries SET status = COALESCE($4, status), attempts = attempts + $5, last_error = $6
       WHERE tenant = $1 AND message_id = $2 AND subscription_id = $3 AND status <> 'delivered'`,
      [tenant, messageId, subscriptionId, outcome.final ?? null, outcome.attempted ? 1 : 0, outcome.error.slice(0, MAX_ERROR_CHARS)],
    );
  }
}


/** Rows as pg returns them (snake_case columns; NULL as null). */
interface MessageDbRow {
  tenant: string;
  id: string;
  type: string;
  from_agent: string;
  to_agent: string;
  encrypted: boolean;
  envelope: Record<string, unknown>;
  expires_at: Date | null;
  remember_until: Date;
  task_id: string | null;
  answer: StoredAnswer | null;
  answer_text: string | null;
  content_digest: string | null;
  envelope_text: string | null;
  response: Record<string, unknown> | null;
  created_at: Date;
}
interface SubscriptionDbRow {
  id: string;
  tenant: string;
  agent_id: string;
  event_type: string;
  url: string;
  created_at: Date;
}
interface DeliveryDbRow {
  subscription_id: string;
  status: DeliveryRow['status'];
  attempts: number;
  last_error: string | null;
  delivered_at: Date | null;
}

function toMessage(r: MessageDbRow): MessageRow {
  return {
    tenant: r.tenant,
    id: r.id,
    type: r.type,
    fromAgent: r.from_agent,
    toAgent: r.to_agent,
    encrypted: r.encrypted,
    envelope: r.envelope,
    expiresAt: r.expires_at ?? undefined,
    rememberUntil: r.remember_until,
    taskId: r.task_id ?? undefined,
    answer: r.answer ?? undefined,
    answerText: r.answer_text ?? undefined,
    contentDigest: r.content_digest ?? undefined,
    envelopeText: r.envelope_text ?? undefined,
    response: r.response ?? undefined,
    createdAt: r.created_at,
  };
}

/** The answer a row holds, as sent (re-serialised for a row from before migration 024); undefined before one. */
export function sentAnswerOf(row: MessageRow): SentAnswer | undefined {
  if (!row.answer) return undefined;
  return { status: row.answer.status, text: row.answerText ?? JSON.stringify(row.answer.body) };
}

const toSubscription = (r: SubscriptionDbRow): Subscription => ({ id: r.id, tenant: r.tenant, agentId: r.agent_id, eventType: r.event_type, url: r.url, createdAt: r.created_at.toISOString() });

const toDelivery = (r: DeliveryDbRow): DeliveryRow => ({
  subscriptionId: r.subscription_id,
  status: r.status,
  attempts: r.attempts,
  lastError: r.last_error ?? undefined,
  deliveredAt: r.delivered_at?.toISOString(),
});
