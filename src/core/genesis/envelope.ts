/**
 * Genesis Nexus envelopes (seeds/002): their shapes, the HMAC-SHA256 signature over the seed's exact payload,
 * the AES-256-GCM encryption of their confidential fields, and their priority as a Temporal priority key.
 *
 * What the seed leaves open, decided here (docs/dialects.md "Genesis Nexus envelopes"):
 * - `from`/`to` (AgentIdentity) are an agent id or the name it registered with, or an object with an `id` or a
 *   `name`; the signature covers them as sent, and the pair key is derived from them as sent.
 * - `ttl` is in milliseconds from `timestamp`; 0 means no expiry.
 * - `priority` is `critical`, `high`, `normal` or `low` (any case): Temporal priority keys 1, 2, 3 and 4.
 * - `encryption`: `iv`, `ciphertext` and `authTag` are base64 (iv 12 bytes, tag 16); the plaintext is a JSON
 *   object of the envelope's confidential fields (e.g. `{action, payload}` or `{data}`), merged into it. The
 *   key is the pair's: HKDF-SHA256 of the sender's Genesis secret (salt `genesis-nexus`, info
 *   `aes-256-gcm:<from>:<to>`, 32 bytes), so a sender derives it from the secret it already holds.
 */
import { createCipheriv, createDecipheriv, createHash, createHmac, hkdfSync, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { JsonLimitError, parseJson, pathOfNul } from '../http/json-guard';
import { DELIVERY_GUARANTEES, type DeliveryGuarantee } from '../../../task/contracts';

export { DELIVERY_GUARANTEES, type DeliveryGuarantee };

export const MESSAGE_TYPES = ['COMMAND', 'QUERY', 'EVENT', 'RESPONSE'] as const;
export const QUERY_ACTIONS = ['get_status', 'get_metrics', 'get_state'] as const;
export const RESPONSE_STATUSES = ['SUCCESS', 'FAILURE', 'PARTIAL'] as const;
export type ResponseStatus = (typeof RESPONSE_STATUSES)[number];

/** Priority names → Temporal priority keys (1 runs first; the server's default, 3, is `normal`). */
export const PRIORITY_KEYS = { critical: 1, high: 2, normal: 3, low: 4 } as const;
export type PriorityName = keyof typeof PRIORITY_KEYS;

const agentId = z.string().min(1).max(200);
const AgentIdentity = z.union([agentId, z.looseObject({ id: agentId }), z.looseObject({ name: agentId })]);
const base64 = (bytes?: number) =>
  z
    .string()
    .max(1_000_000)
    .regex(/^[A-Za-z0-9+/]*={0,2}$/, 'must be base64')
    .refine((s) => bytes === undefined || Buffer.from(s, 'base64').length === bytes, `must be ${bytes} bytes (base64)`);
const A2AError = z.looseObject({ code: z.union([z.string(), z.number()]), message: z.string() });
/**
 * A numeric enum member as its name. The seed declares `type: MessageType` and `priority: Priority` as TypeScript
 * enums, which are numbers on the wire unless declared with string values: MessageType in the seed's order
 * (COMMAND 0, QUERY 1, EVENT 2, RESPONSE 3); Priority, whose members the seed does not list, in rising urgency
 * (LOW 0, NORMAL 1, HIGH 2, CRITICAL 3).
 */
const NUMERIC_PRIORITIES = ['low', 'normal', 'high', 'critical'] as const;
const Priority = z
  .union([z.string(), z.number().int().min(0).max(3).transform((n) => NUMERIC_PRIORITIES[n])])
  .transform((s) => s.toLowerCase())
  .pipe(z.enum(Object.keys(PRIORITY_KEYS) as [PriorityName, ...PriorityName[]], { error: 'must be critical, high, normal or low (or 3, 2, 1, 0)' }));
const MessageType = z.union([
  z.enum(MESSAGE_TYPES),
  z.number().int().min(0).max(3).transform((n) => MESSAGE_TYPES[n]),
]);

/** What every envelope has, in the clear: enough to find the sender, check the signature and decrypt. */
export const EnvelopeHeader = z.object({
  id: z.string().min(1).max(200),
  type: MessageType,
  version: z.string().regex(/^1\.\d+\.\d+$/, 'must be 1.x.y (the seed is 1.0.0)'),
  timestamp: z.number().int().positive(),
  from: AgentIdentity,
  to: AgentIdentity,
  correlationId: z.string().min(1).max(200).optional(),
  signature: z.string().max(128),
  encryption: z
    .strictObject({ algorithm: z.literal('AES-256-GCM'), iv: base64(12), ciphertext: base64(), authTag: base64(16) })
    .optional(),
  priority: Priority,
  ttl: z.number().int().min(0),
  requiresAck: z.boolean(),
  requiresSignature: z.boolean(),
});
export type EnvelopeHeader = z.infer<typeof EnvelopeHeader>;

/** The fields a plaintext may not set: the header is what was signed and routed. */
const HEADER_FIELDS = new Set(['id', 'type', 'version', 'timestamp', 'from', 'to', 'signature', 'encryption', 'priority', 'ttl', 'requiresAck', 'requiresSignature']);

const common = { action: z.string().max(200).optional(), payload: z.unknown().optional(), result: z.unknown().optional(), error: A2AError.optional() };
export const Envelope = z.discriminatedUnion('type', [
  EnvelopeHeader.extend({
    ...common,
    type: z.literal('COMMAND'),
    action: z.string().min(1).max(200),
    payload: z.object({ workflowId: z.string().max(200).optional(), agentId: z.string().max(200).optional(), parameters: z.record(z.string(), z.unknown()).optional() }).default({}),
  }),
  EnvelopeHeader.extend({ ...common, type: z.literal('QUERY'), action: z.enum(QUERY_ACTIONS), payload: z.object({ resourceId: z.string().min(1).max(1024) }) }),
  EnvelopeHeader.extend({
    ...common,
    type: z.literal('EVENT'),
    eventType: z.string().min(1).max(200),
    eventName: z.string().min(1).max(200),
    payload: z.object({ data: z.unknown(), metadata: z.object({ schemaVersion: z.string(), contentType: z.string() }) }),
    deliveryGuarantee: z.enum(DELIVERY_GUARANTEES),
  }),
  EnvelopeHeader.extend({
    ...common,
    type: z.literal('RESPONSE'),
    correlationId: z.string().min(1).max(200),
    requestId: z.string().min(1).max(200),
    status: z.enum(RESPONSE_STATUSES),
    data: z.unknown().optional(),
    confidence: z.number().min(0).max(1).optional(),
    sources: z.array(z.string()).optional(),
    processingTime: z.number().min(0).optional(),
  }),
]);
export type Envelope = z.infer<typeof Envelope>;

/** How an AgentIdentity names its agent, as sent: an id or a registered name (service.ts resolves it). */
export const idOf = (identity: EnvelopeHeader['from']): string =>
  typeof identity === 'string' ? identity : typeof identity.id === 'string' ? identity.id : (identity as { name: string }).name;

/** The seed's signature payload, exactly: `JSON.stringify({id, type, from, to, timestamp})`, fields as sent. */
export function signaturePayload(m: { id: unknown; type: unknown; from: unknown; to: unknown; timestamp: unknown }): string {
  return JSON.stringify({ id: m.id, type: m.type, from: m.from, to: m.to, timestamp: m.timestamp });
}

/** HMAC-SHA256 of the signature payload, hex, keyed with the secret's UTF-8 bytes (the seed's signMessage). */
export function signEnvelope(m: Parameters<typeof signaturePayload>[0], secret: string): string {
  return createHmac('sha256', secret).update(signaturePayload(m)).digest('hex');
}

/** Whether `signature` is the envelope's, compared in constant time (a wrong length compares too). */
export function verifySignature(m: Parameters<typeof signaturePayload>[0] & { signature: string }, secret: string): boolean {
  const expected = Buffer.from(signEnvelope(m, secret), 'utf8');
  const given = Buffer.from(m.signature.toLowerCase(), 'utf8');
  if (given.length !== expected.length) {
    timingSafeEqual(expected, expected);
    return false;
  }
  return timingSafeEqual(expected, given);
}

/** Derived pair keys by (from, to, secret): HKDF is most of an encrypted envelope's cost (bench/genesis.ts). */
const pairKeys = new Map<string, Buffer>();
const PAIR_KEY_CACHE = 1024;

/** The AES-256-GCM key of the (from, to) pair, derived from the sender's secret. */
export function pairKey(secret: string, from: string, to: string): Buffer {
  const id = `${from}\0${to}\0${secret}`;
  let key = pairKeys.get(id);
  if (!key) {
    key = Buffer.from(hkdfSync('sha256', Buffer.from(secret, 'utf8'), 'genesis-nexus', `aes-256-gcm:${from}:${to}`, 32));
    // A rotated secret is a new entry; the oldest entries go first.
    if (pairKeys.size >= PAIR_KEY_CACHE) pairKeys.delete(pairKeys.keys().next().value!);
    pairKeys.set(id, key);
  }
  return key;
}

export type Encryption = NonNullable<EnvelopeHeader['encryption']>;

export function encryptFields(key: Buffer, fields: Record<string, unknown>): Encryption {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const ciphertext = Buffer.concat([cipher.update(JSON.stringify(fields), 'utf8'), cipher.final()]);
  return { algorithm: 'AES-256-GCM', iv: iv.toString('base64'), ciphertext: ciphertext.toString('base64'), authTag: cipher.getAuthTag().toString('base64') };
}

/** A refusal: the HTTP status and a message that says what to fix. */
export class EnvelopeError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** How deep an envelope's JSON may nest for its content digest: far past any envelope, well inside the stack. */
const MAX_DIGEST_DEPTH = 256;

/**
 * What identifies an envelope's content for replay protection: SHA-256 (base64url) of its JSON as sent, with
 * object keys sorted, so a resend that orders its keys otherwise is the same envelope while any other value, in
 * any field (signed or not, the ciphertext included), is other content.
 * @throws EnvelopeError 400 when the JSON nests deeper than MAX_DIGEST_DEPTH.
 */
export function contentDigestOf(body: unknown): string {
  const hash = createHash('sha256');
  const put = (v: unknown, depth: number): void => {
    if (depth > MAX_DIGEST_DEPTH) throw new EnvelopeError(400, `Invalid envelope: nested deeper than ${MAX_DIGEST_DEPTH} levels`);
    if (Array.isArray(v)) {
      hash.update('[');
      v.forEach((x, i) => (i && hash.update(','), put(x, depth + 1)));
      hash.update(']');
    } else if (v !== null && typeof v === 'object') {
      hash.update('{');
      Object.keys(v)
        .sort()
        .forEach((k, i) => (i && hash.update(','), hash.update(JSON.stringify(k)), hash.update(':'), put((v as Record<string, unknown>)[k], depth + 1)));
      hash.update('}');
    } else {
      hash.update(JSON.stringify(v) ?? 'null');
    }
  };
  put(body, 0);
  return hash.digest('base64url');
}

/**
 * The confidential fields of an encrypted envelope.
 * @throws EnvelopeError 400 when the tag does not match (wrong key, or anything altered) or the plaintext is no JSON object.
 */
export function decryptFields(key: Buffer, e: Encryption): Record<string, unknown> {
  let plain: Buffer;
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(e.iv, 'base64'));
    decipher.setAuthTag(Buffer.from(e.authTag, 'base64'));
    plain = Buffer.concat([decipher.update(Buffer.from(e.ciphertext, 'base64')), decipher.final()]);
  } catch {
    throw new EnvelopeError(400, 'encryption: the AES-256-GCM authentication tag does not match (wrong pair key, or the iv, ciphertext or tag was altered); nothing was applied');
  }
  let fields: unknown;
  try {
    fields = parseJson(plain); // what the body parser checked was ciphertext: the plaintext is checked here
  } catch (err) {
    if (err instanceof JsonLimitError) throw new EnvelopeError(400, `encryption: the plaintext is not read: ${err.message}`);
    fields = undefined;
  }
  if (!fields || typeof fields !== 'object' || Array.isArray(fields)) throw new EnvelopeError(400, 'encryption: the plaintext must be a JSON object of the envelope\'s confidential fields');
  // The body's NUL check (src/api/plugins/json-bodies.ts) saw ciphertext: PostgreSQL stores no U+0000, so it is refused here.
  const nul = pathOfNul(fields);
  if (nul !== undefined) throw new EnvelopeError(400, `encryption: the plaintext's ${nul} contains a NUL character (U+0000)`);
  const misplaced = Object.keys(fields).filter((k) => HEADER_FIELDS.has(k));
  if (misplaced.length) throw new EnvelopeError(400, `encryption: the plaintext may not set header fields (${misplaced.join(', ')}); they are signed in the clear`);
  return fields as Record<string, unknown>;
}

/** The fields of an envelope that an encrypted answer carries inside its ciphertext. */
export const CONFIDENTIAL_ANSWER_FIELDS = ['data', 'error', 'confidence', 'sources', 'result'] as const;

export interface AnswerOptions {
  /** The request answered. */
  request: Pick<EnvelopeHeader, 'id' | 'from' | 'to' | 'correlationId' | 'priority'>;
  status: ResponseStatus;
  data?: unknown;
  error?: { code: string | number; message: string };
  /** The receiving agent's own, from its RESPONSE: a seed sender reads them at the top, beside `data`. */
  confidence?: number;
  sources?: string[];
  /** What Switchboard adds: the task that ran the request and its state. */
  result?: unknown;
  /** `ack`: the immediate acknowledgement of a request with requiresAck (its result follows). */
  action?: string;
  /** The requester's secret: signs the answer so the requester can check it came from Switchboard. */
  secret?: string;
  /** The pair key, when the request was encrypted: the answer is too. */
  key?: Buffer;
  processingTime?: number;
}

/**
 * A RESPONSE envelope from the request's recipient back to its sender, signed with the sender's secret (the
 * only secret the sender knows), its data encrypted with the request's pair key when the request was encrypted.
 */
export function answerEnvelope(o: AnswerOptions): Record<string, unknown> {
  const header = {
    id: randomUUID(),
    type: 'RESPONSE',
    version: '1.0.0',
    timestamp: Date.now(),
    from: o.request.to,
    to: o.request.from,
  };
  const confidential: Record<string, unknown> = {};
  if (o.data !== undefined) confidential.data = o.data;
  if (o.error) confidential.error = o.error;
  if (o.confidence !== undefined) confidential.confidence = o.confidence;
  if (o.sources !== undefined) confidential.sources = o.sources;
  if (o.result !== undefined) confidential.result = o.result;
  return {
    ...header,
    correlationId: o.request.correlationId ?? o.request.id,
    requestId: o.request.id,
    status: o.status,
    ...(o.action ? { action: o.action } : {}),
    ...(o.key ? { encryption: encryptFields(o.key, confidential) } : confidential),
    ...(o.processingTime !== undefined ? { processingTime: o.processingTime } : {}),
    signature: o.secret ? signEnvelope(header, o.secret) : '',
    priority: o.request.priority,
    ttl: 0,
    requiresAck: false,
    requiresSignature: !!o.secret,
  };
}
