/**
 * Temporal payload encryption (SWITCHBOARD_PAYLOAD_KEY): every workflow and activity payload, in histories,
 * queries and updates, leaves Switchboard as AES-256-GCM ciphertext, so the Temporal
 * database holds no message text. The key id travels in the payload's metadata, so keys can rotate: the first key
 * of the ring encrypts, every key decrypts. Temporal UI reads tasks through POST /codec/decode (the "codec server"
 * setting), which applies the same codec for operators.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { Payload, PayloadCodec } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { z } from 'zod';

export const ENCODING = 'binary/encrypted';
const KEY_ID = 'encryption-key-id';
const IV_BYTES = 12;
const TAG_BYTES = 16;

export interface KeyRing {
  /** The id of the key that encrypts. */
  current: string;
  keys: ReadonlyMap<string, Buffer>;
}

/**
 * Parses `<keyId>:<base64 of 32 bytes>[,<keyId>:<base64>…]` (the first encrypts). The error never holds key material.
 * @throws Error naming the bad entry by position and id.
 */
export function parseKeyRing(spec: string, variable = 'SWITCHBOARD_PAYLOAD_KEY'): KeyRing {
  const keys = new Map<string, Buffer>();
  const entries = spec.split(',').map((e) => e.trim()).filter(Boolean);
  if (!entries.length) throw new Error(`${variable} holds no key`);
  entries.forEach((entry, i) => {
    const at = entry.indexOf(':');
    const id = at > 0 ? entry.slice(0, at) : '';
    if (!/^[A-Za-z0-9_.-]{1,64}$/.test(id)) throw new Error(`${variable} entry ${i + 1}: expected <keyId>:<base64 key>, with a key id of letters, digits, . _ -`);
    const key = Buffer.from(entry.slice(at + 1), 'base64');
    if (key.length !== 32) throw new Error(`${variable} key ${id}: must be 32 bytes, base64 (e.g. openssl rand -base64 32)`);
    if (keys.has(id)) throw new Error(`${variable}: key id ${id} appears twice`);
    keys.set(id, key);
  });
  return { current: entries[0]!.slice(0, entries[0]!.indexOf(':')), keys };
}

/** A fresh one-key ring spec, `k1:<base64>`. */
export function generateKeySpec(id = 'k1'): string {
  return `${id}:${randomBytes(32).toString('base64')}`;
}

const text = new TextEncoder();
const untext = new TextDecoder();

export class EncryptionCodec implements PayloadCodec {
  constructor(private readonly ring: KeyRing) {}

  async encode(payloads: Payload[]): Promise<Payload[]> {
    const key = this.ring.keys.get(this.ring.current)!;
    return payloads.map((p) => {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      cipher.setAAD(Buffer.from(this.ring.current));
      const plain = temporal.api.common.v1.Payload.encode(p).finish();
      const sealed = Buffer.concat([iv, cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
      return { metadata: { encoding: text.encode(ENCODING), [KEY_ID]: text.encode(this.ring.current) }, data: sealed };
    });
  }

  /** @throws Error naming the key id when a payload's key is not in the ring or its ciphertext does not verify. */
  async decode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((p) => {
      if (!p.metadata || untext.decode(p.metadata.encoding ?? new Uint8Array()) !== ENCODING) return p;
      const id = untext.decode(p.metadata[KEY_ID] ?? new Uint8Array());
      const key = this.ring.keys.get(id);
      if (!key) throw new Error(`payload encrypted with key ${id}, which SWITCHBOARD_PAYLOAD_KEY does not hold`);
      const data = Buffer.from(p.data ?? new Uint8Array());
      if (data.length < IV_BYTES + TAG_BYTES) throw new Error(`payload under key ${id} is too short to be ciphertext`);
      const decipher = createDecipheriv('aes-256-gcm', key, data.subarray(0, IV_BYTES));
      decipher.setAAD(Buffer.from(id));
      decipher.setAuthTag(data.subarray(data.length - TAG_BYTES));
      let plain: Buffer;
      try {
        plain = Buffer.concat([decipher.update(data.subarray(IV_BYTES, data.length - TAG_BYTES)), decipher.final()]);
      } catch {
        throw new Error(`payload under key ${id} does not decrypt (tampered, or another key with that id)`);
      }
      return temporal.api.common.v1.Payload.decode(plain) as Payload;
    });
  }
}

/** A body the codec endpoint cannot read: answered 400. */
export class CodecRequestError extends Error {}

const Base64 = z.string().max(16 * 1024 * 1024).regex(/^[A-Za-z0-9+/]*={0,2}$/, 'must be base64');
/** Temporal's codec-server request body (also the route's documented body). */
export const CodecBody = z.strictObject({
  payloads: z.array(z.object({ metadata: z.record(z.string(), Base64).optional(), data: Base64.optional() })).max(10_000),
});

type JsonPayload = { metadata?: Record<string, string>; data?: string };

/**
 * Temporal UI's codec-server protocol (POST …/decode and …/encode): `{payloads: [{metadata: {k: base64}, data:
 * base64}]}` in, the same shape out.
 * @throws CodecRequestError for a body of another shape; Error when a payload does not decrypt.
 */
export async function applyCodecToJson(codec: PayloadCodec, op: 'encode' | 'decode', body: unknown): Promise<{ payloads: JsonPayload[] }> {
  const parsed = CodecBody.safeParse(body);
  if (!parsed.success) throw new CodecRequestError(`expected {payloads: [{metadata: {key: base64}, data: base64}]}: ${z.prettifyError(parsed.error)}`);
  const payloads: Payload[] = parsed.data.payloads.map((p) => ({
    metadata: Object.fromEntries(Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64')])),
    data: Buffer.from(p.data ?? '', 'base64'),
  }));
  const out = op === 'decode' ? await codec.decode(payloads) : await codec.encode(payloads);
  return {
    payloads: out.map((p) => ({
      metadata: Object.fromEntries(Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
      data: Buffer.from(p.data ?? new Uint8Array()).toString('base64'),
    })),
  };
}
