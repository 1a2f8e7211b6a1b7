/**
 * The payload-encryption API under the names the codec-server work asked for. The implementation lives in
 * ./encryption-codec (already wired into main.ts, the worker, the test harness and POST /codec/{decode,encode});
 * this module only re-exports it, so there is one wire format and one CodecRequestError class — the route's
 * `instanceof CodecRequestError` check answers 400 for errors thrown through either module.
 */
import type { PayloadCodec } from '@temporalio/common';
import { type KeyRing, applyCodecToJson, parseKeyRing } from './encryption-codec';

export { CodecRequestError, ENCODING, EncryptionCodec, generateKeySpec } from './encryption-codec';

/** The first key encrypts; every key decrypts, so a rotated-out key still opens old histories. */
export type PayloadKeyRing = KeyRing;

/** Temporal's codec-server JSON: every byte string (metadata values, data) is base64. */
export interface CodecServerBody {
  payloads: { metadata?: Record<string, string>; data?: string }[];
}

/**
 * Parses SWITCHBOARD_PAYLOAD_KEY: `<keyId>:<base64 of 32 bytes>[,<keyId>:<base64>…]`.
 * @throws Error when the spec holds no entry, an entry has no `:` or an id outside /^[A-Za-z0-9_.-]{1,64}$/, a key
 *   does not decode to exactly 32 bytes, or an id appears twice. The message names the entry's position or id and
 *   never the key material, since it ends up in startup logs.
 */
export function parsePayloadKeys(spec: string): PayloadKeyRing {
  return parseKeyRing(spec, 'SWITCHBOARD_PAYLOAD_KEY');
}

/**
 * Answers a Temporal UI / `temporal` CLI codec-server `POST …/decode` body.
 * @throws CodecRequestError when the body is not `{payloads: [{metadata?: {k: base64}, data?: base64}]}` (answer 400).
 * @throws Error naming the key id when an encrypted payload's key is not in the ring or its tag does not verify.
 */
export function decodeForCodecServer(codec: PayloadCodec, body: unknown): Promise<CodecServerBody> {
  return applyCodecToJson(codec, 'decode', body);
}

/**
 * Answers a codec-server `POST …/encode` body (Temporal UI uses it to send signals and queries with encrypted input).
 * @throws CodecRequestError when the body is not `{payloads: [{metadata?: {k: base64}, data?: base64}]}` (answer 400).
 */
export function encodeForCodecServer(codec: PayloadCodec, body: unknown): Promise<CodecServerBody> {
  return applyCodecToJson(codec, 'encode', body);
}
