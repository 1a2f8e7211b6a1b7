/**
 * Delivers one published Genesis EVENT to one subscriber: one POST of the envelope (decrypted), signed like a
 * push delivery (src/core/push/signing.ts: the gateway's ES256 JWT over the body, with a delivery id), through the
 * guarded outbound fetch. The workflow (workflows/genesis-events.ts) gives the retry policy the guarantee asks
 * for; this activity refuses to send past the envelope's TTL, and never sends again once a POST was acknowledged.
 *
 * Delivery ids: `exactly-once` keeps one id per (event, subscriber) on every attempt, which is what the
 * subscriber dedupes on; `at-least-once` and `at-most-once` get a new id per attempt.
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Pool } from 'pg';
import { GenesisStore, responseFollowId } from '../src/core/genesis/store';
import type { EventHub } from '../src/core/events/hub';
import { signDelivery, signingKey } from '../src/core/push/signing';
import { type GenesisLink, envelopeFrom } from '../src/core/agents/transports/genesis';
import { type DeliveryGuarantee, type Encryption, decryptFields, encryptFields, pairKey, signEnvelope, verifySignature } from '../src/core/genesis/envelope';

export interface GenesisDeliveryDeps {
  pool: Pool;
  /** The store with the secret box: a subscriber's Genesis secret signs what it is sent. Absent: no secrets. */
  secrets?: GenesisStore;
  /** The guarded outbound fetch: subscriber URLs are user input. */
  fetch: typeof fetch;
  issuer?: string;
}

export interface GenesisDeliveryArgs {
  tenant: string;
  messageId: string;
  subscriptionId: string;
  guarantee: DeliveryGuarantee;
}

export type GenesisDeliveryOutcome = 'delivered' | 'expired' | 'gone';

export interface GenesisDeliveryFinal extends Omit<GenesisDeliveryArgs, 'guarantee'> {
  status: 'failed' | 'expired';
  error: string;
}

const POST_TIMEOUT_MS = 15_000;

/** @throws ApplicationFailure GenesisDeliveryFailed (retryable) unless the subscriber answered 2xx. */
export async function deliverGenesisEvent(deps: GenesisDeliveryDeps, args: GenesisDeliveryArgs): Promise<GenesisDeliveryOutcome> {
  const { tenant, messageId, subscriptionId } = args;
  const store = new GenesisStore(deps.pool);
  const [message, subscription, delivery] = await Promise.all([store.find(tenant, messageId), store.subscription(tenant, subscriptionId), store.delivery(tenant, messageId, subscriptionId)]);
  if (!message || !subscription) {
    await store.recordAttempt(tenant, messageId, subscriptionId, { error: 'the subscription was deleted', final: 'failed', attempted: false });
    return 'gone';
  }
  // Acknowledged before (an earlier attempt's 2xx whose activity result was lost): never send it again.
  if (delivery?.status === 'delivered') return 'delivered';
  if (message.expiresAt && message.expiresAt.getTime() <= Date.now()) {
    await store.recordAttempt(tenant, messageId, subscriptionId, { error: 'the envelope\'s ttl passed while its delivery was queued', final: 'expired', attempted: false });
    return 'expired';
  }
  const attempt = activityAttempt();
  const deliveryId = args.guarantee === 'exactly-once' ? `${messageId}:${subscriptionId}` : `${messageId}:${subscriptionId}:${attempt}`;
  // The envelope's bytes as the publisher sent them (rows from before migration 028: re-serialised), signed for
  // the subscriber: with its own Genesis secret when it has one.
  const body = signedFor(message.envelopeText ?? JSON.stringify(message.envelope), await deps.secrets?.secretOf(tenant, subscription.agentId));
  const headers = {
    'content-type': 'application/json',
    ...(await signDelivery(await signingKey(deps.pool), {
      deliveryId,
      timestamp: Math.floor(Date.now() / 1000),
      body,
      // The push JWT's claims name a task and a config: here the event and the subscription.
      taskId: messageId,
      configId: subscriptionId,
      issuer: deps.issuer ?? 'switchboard',
    })),
  };
  let failure: string;
  try {
    const res = await deps.fetch(subscription.url, { method: 'POST', headers, body, signal: AbortSignal.timeout(POST_TIMEOUT_MS) });
    await res.body?.cancel().catch(() => undefined);
    if (res.ok) {
      await store.recordAttempt(tenant, messageId, subscriptionId, { delivered: true });
      return 'delivered';
    }
    failure = `HTTP ${res.status}`;
  } catch (err) {
    failure = (err as Error).message;
  }
  await store.recordAttempt(tenant, messageId, subscriptionId, { error: `attempt ${attempt}: ${failure}`, attempted: true, final: args.guarantee === 'at-most-once' ? 'failed' : undefined });
  throw ApplicationFailure.retryable(`genesis delivery ${deliveryId} to ${subscription.url} failed: ${failure}`, 'GenesisDeliveryFailed');
}

/**
 * An EVENT as a subscriber with a Genesis secret checks it: the seed's verifySignature recomputes the HMAC of
 * `{id, type, from, to, timestamp}` with the secret the subscriber holds, which is its own (secrets are per agent),
 * so the signature is made again with it, over the fields as sent (their key order kept by JSON.parse). Everything
 * else is as sent; the whitespace of the sender's JSON is not. Without a secret: the bytes as sent.
 */
function signedFor(text: string, secret: string | undefined): string {
  if (!secret) return text;
  const envelope = JSON.parse(text) as Record<string, unknown> & Parameters<typeof signEnvelope>[0];
  return JSON.stringify({ ...envelope, signature: signEnvelope(envelope, secret) });
}

/** Records why a delivery ended without an acknowledgement (its retries ran out, or its ttl passed). */
export async function finishGenesisDelivery(pool: Pool, f: GenesisDeliveryFinal): Promise<void> {
  await new GenesisStore(pool).recordAttempt(f.tenant, f.messageId, f.subscriptionId, { error: f.error, final: f.status, attempted: false });
}

function activityAttempt(): number {
  try {
    return Context.current().info.attempt;
  } catch {
    return 1; // called outside an activity (bench, scripts)
  }
}

/**
 * What the forwarding's Genesis transport (src/core/agents/transports/genesis.ts) asks of Switchboard about one agent:
 * envelopes signed with the agent's Genesis secret (the one it shares with Switchboard: the seed's signMessage) and
 * encrypted with the pair key derived from it; the agent's RESPONSEs checked and opened with it; and the RESPONSE
 * it POSTed to /genesis/messages for a request that came through there, or that the gateway made and kept (its row
 * holds it, checked and decrypted), with a wake-up when it is recorded.
 * Without a secret box (the app stores no secrets) the agent has no secret.
 */
export function genesisLink(store: GenesisStore, hub: EventHub, call: { tenant: string; agentId: string; taskId?: string }, hasSecrets: boolean): GenesisLink {
  const { tenant, agentId } = call;
  const secretOf = async () => (hasSecrets ? store.secretOf(tenant, agentId) : undefined);
  return {
    agentId,
    async seal(draft) {
      const secret = await secretOf();
      if (draft.encrypt && !secret) {
        throw ApplicationFailure.nonRetryable(`the sender encrypted its envelope, and agent ${agentId} has no Genesis secret to derive the pair key from (POST /agents/${agentId}/genesis-secret)`, 'AgentRejected');
      }
      const { from, to } = draft.header;
      const encryption = draft.encrypt ? encryptFields(pairKey(secret!, identityId(from), identityId(to)), draft.confidential) : undefined;
      return envelopeFrom(draft, { signature: secret ? signEnvelope(draft.header, secret) : '', encryption });
    },
    async open(answer) {
      const secret = await secretOf();
      if (secret) {
        const signature = typeof answer.signature === 'string' ? answer.signature : '';
        if (!verifySignature({ ...(answer as Parameters<typeof signEnvelope>[0]), signature }, secret)) {
          throw new Error("the agent's RESPONSE is not signed with its Genesis secret (HMAC-SHA256, hex, of JSON.stringify({id, type, from, to, timestamp}))");
        }
      }
      const sealed = answer.encryption as Encryption | undefined;
      if (!sealed) return answer;
      if (!secret) throw new Error("the agent's RESPONSE is encrypted, and the agent has no Genesis secret to derive the pair key from");
      const { encryption: _sealed, ...clear } = answer;
      try {
        return { ...clear, ...decryptFields(pairKey(secret, identityId(answer.from), identityId(answer.to)), sealed) };
      } catch (err) {
        throw new Error(`the agent's RESPONSE: ${(err as Error).message}`);
      }
    },
    async response(requestId) {
      const row = await store.find(tenant, requestId);
      return row && row.toAgent === agentId ? row.response : undefined;
    },
    async remember(draft, envelope) {
      // Outside a task's turn (a probe) nothing answers later.
      if (!call.taskId) return;
      await store.rememberSent({ tenant, id: draft.header.id, type: draft.header.type, toAgent: agentId, encrypted: draft.encrypt, envelope, taskId: call.taskId });
    },
    onResponse(requestId, listener) {
      return hub.onAgentPush(responseFollowId(tenant, requestId), listener);
    },
  };
}

/** How an AgentIdentity names its agent, as sent (an id or a name, or an object with one): what pair keys are derived from. */
function identityId(identity: unknown): string {
  if (!identity || typeof identity !== 'object') return String(identity);
  const { id, name } = identity as { id?: unknown; name?: unknown };
  return String(id ?? name);
}
