/**
 * How a webhook receiver knows a delivery came from this gateway, unchanged and recently.
 *
 * Every delivery carries an ES256 JWT (`X-Switchboard-Jwt`) signed with the gateway's key, whose public half
 * is published at /.well-known/jwks.json: it binds the delivery id, the task, the config and a SHA-256 of the
 * exact body. A config whose authentication scheme is HMAC-SHA256 also gets `X-Switchboard-Signature`, an
 * HMAC over timestamp, delivery id and body with the secret the client chose, for receivers that would rather
 * not fetch keys. Both carry the time they were made, so a receiver can refuse replays older than its window
 * and only has to remember delivery ids for that long. The delivery id is the same on every redelivery of an
 * event (`<configId>:<seq>`), which is what makes receivers idempotent.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import {
  calculateJwkThumbprint,
  createLocalJWKSet,
  decodeProtectedHeader,
  errors,
  exportJWK,
  generateKeyPair,
  importJWK,
  jwtVerify,
  SignJWT,
  type CryptoKey,
  type JWK,
} from 'jose';
import type { Pool } from 'pg';

export const DELIVERY_HEADERS = {
  token: 'X-A2A-Notification-Token',
  deliveryId: 'X-Switchboard-Delivery-Id',
  timestamp: 'X-Switchboard-Timestamp',
  signature: 'X-Switchboard-Signature',
  jwt: 'X-Switchboard-Jwt',
} as const;

/** The signing_keys purpose of the key that signs webhook deliveries. */
const PUSH_KEY_PURPOSE = 'push';
/** A receiver's default replay window, both ways (clocks drift). */
export const DEFAULT_MAX_SKEW_SEC = 300;

export interface PublicJwk {
  kty: 'EC';
  crv: 'P-256';
  x: string;
  y: string;
  kid: string;
  alg: 'ES256';
  use: 'sig';
}
export interface Jwks {
  keys: PublicJwk[];
}
export interface SigningKey {
  kid: string;
  privateKey: CryptoKey;
  publicJwk: PublicJwk;
}

// ---------------------------------------------------------------------------------------------
// The gateway's key

const keys = new WeakMap<Pool, Promise<SigningKey>>();

/**
 * The gateway's active ES256 key, created on first use. Loaded once per pool and cached: the key only changes
 * when it is retired in the database, and a process restart picks that up.
 * @throws the database error if it cannot be read or created (not cached; the next call tries again).
 */
export function signingKey(pool: Pool): Promise<SigningKey> {
  let key = keys.get(pool);
  if (!key) {
    key = loadOrCreate(pool);
    keys.set(pool, key);
    key.catch(() => keys.delete(pool));
  }
  return key;
}

async function loadOrCreate(pool: Pool): Promise<SigningKey> {
  const existing = await activeKey(pool);
  if (existing) return existing;
  // Several processes may get here at once. The partial unique index lets exactly one insert win; everyone
  // then reads the winner, so all processes sign with the key the JWKS publishes.
  const fresh = await generateKey();
  await pool.query(
    `INSERT INTO signing_keys (kid, purpose, private_jwk, public_jwk) VALUES ($1, $2, $3, $4)
     ON CONFLICT (purpose) WHERE retired_at IS NULL DO NOTHING`,
    [fresh.kid, PUSH_KEY_PURPOSE, fresh.privateJwk, fresh.publicJwk],
  );
  const winner = await activeKey(pool);
  if (!winner) throw new Error('signing key vanished right after it was created');
  return winner;
}

async function activeKey(pool: Pool): Promise<SigningKey | undefined> {
  const { rows } = await pool.query<{ kid: string; private_jwk: JWK; public_jwk: PublicJwk }>(
    'SELECT kid, private_jwk, public_jwk FROM signing_keys WHERE purpose = $1 AND retired_at IS NULL',
    [PUSH_KEY_PURPOSE],
  );
  const r = rows[0];
  return r && { kid: r.kid, privateKey: (await importJWK(r.private_jwk, 'ES256')) as CryptoKey, publicJwk: r.public_jwk };
}

/** A new P-256 key; its kid is the RFC 7638 thumbprint, so a kid can never name two different keys. */
async function generateKey(): Promise<{ kid: string; privateJwk: JWK; publicJwk: PublicJwk }> {
  // Extractable: the private half is stored (as a JWK) so that every process signs with the one published key.
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  const pub = await exportJWK(publicKey);
  const kid = await calculateJwkThumbprint(pub, 'sha256');
  return {
    kid,
    privateJwk: await exportJWK(privateKey),
    publicJwk: { kty: 'EC', crv: 'P-256', x: pub.x!, y: pub.y!, kid, alg: 'ES256', use: 'sig' },
  };
}

/**
 * The published key set: every key of the purpose, retired ones included, so that a delivery signed just
 * before a rotation still verifies. Creates the key if none exists yet.
 */
export async function jwks(pool: Pool): Promise<Jwks> {
  await signingKey(pool);
  const { rows } = await pool.query<{ public_jwk: PublicJwk }>('SELECT public_jwk FROM signing_keys WHERE purpose = $1 ORDER BY created_at DESC', [
    PUSH_KEY_PURPOSE,
  ]);
  return { keys: rows.map((r) => r.public_jwk) };
}

// ---------------------------------------------------------------------------------------------
// Signing

export const sha256Base64url = (body: string | Buffer) => createHash('sha256').update(body).digest('base64url');

/** A compact JWS (RFC 7515) with header {alg: ES256, typ: JWT, kid} over the claims as given. */
export function signJwt(key: SigningKey, claims: Record<string, unknown>): Promise<string> {
  return new SignJWT(claims).setProtectedHeader({ alg: 'ES256', typ: 'JWT', kid: key.kid }).sign(key.privateKey);
}

/** `v1=<hex HMAC-SHA256(secret, "<timestamp>.<deliveryId>.<body>")>`; the version prefix leaves room for another scheme. */
export function hmacSignature(secret: string, timestamp: number | string, deliveryId: string, body: string | Buffer): string {
  const mac = createHmac('sha256', secret).update(`${timestamp}.${deliveryId}.`).update(body).digest('hex');
  return `v1=${mac}`;
}

export interface DeliveryToSign {
  deliveryId: string;
  /** Unix seconds of this attempt (a redelivery gets a new one; the delivery id stays). */
  timestamp: number;
  body: string;
  taskId: string;
  configId: string;
  /** The gateway's name as receivers know it (its public URL when configured). */
  issuer: string;
  /** The config's HMAC secret, when its scheme is HMAC-SHA256. */
  secret?: string;
}

/** The X-Switchboard-* headers of one delivery attempt. Never rejects for a key that signingKey() returned. */
export async function signDelivery(key: SigningKey, d: DeliveryToSign): Promise<Record<string, string>> {
  const headers: Record<string, string> = {
    [DELIVERY_HEADERS.deliveryId]: d.deliveryId,
    [DELIVERY_HEADERS.timestamp]: String(d.timestamp),
    [DELIVERY_HEADERS.jwt]: await signJwt(key, {
      iss: d.issuer,
      iat: d.timestamp,
      jti: d.deliveryId,
      taskId: d.taskId,
      configId: d.configId,
      body_sha256: sha256Base64url(d.body),
    }),
  };
  if (d.secret) headers[DELIVERY_HEADERS.signature] = hmacSignature(d.secret, d.timestamp, d.deliveryId, d.body);
  return headers;
}

// ---------------------------------------------------------------------------------------------
// Verifying (what a receiver does; our tests use it as one)

/** Why a delivery was refused; the message names the check that failed. */
export class DeliveryVerificationError extends Error {
  override readonly name = 'DeliveryVerificationError';
}

export interface DeliveryClaims {
  iss: string;
  iat: number;
  jti: string;
  taskId: string;
  configId: string;
  body_sha256: string;
}

const nowSec = () => Math.floor(Date.now() / 1000);

function checkFresh(at: number, now: number, maxSkewSec: number, what: string): void {
  if (!Number.isFinite(at) || Math.abs(now - at) > maxSkewSec) {
    throw new DeliveryVerificationError(`${what} ${at} is outside the ${maxSkewSec} s window around ${now}: stale or replayed`);
  }
}

/** Constant-time check of an X-Switchboard-Signature value (a comma-separated list is accepted: any v1 may match). */
export function verifyHmac(d: { secret: string; timestamp: number | string; deliveryId: string; body: string | Buffer; signature: string }): boolean {
  const expected = Buffer.from(hmacSignature(d.secret, d.timestamp, d.deliveryId, d.body));
  return d.signature
    .split(',')
    .map((s) => Buffer.from(s.trim()))
    .some((given) => given.length === expected.length && timingSafeEqual(given, expected));
}

/**
 * Verifies an X-Switchboard-Jwt against a key set (jose's jwtVerify): ES256 only (the header's alg is not trusted
 * to choose), a kid of the set, the signature, and iat within the window. The body hash is checked by verifyDelivery.
 * @throws DeliveryVerificationError
 */
export async function verifyJwt(jwt: string, keySet: Jwks, opts: { now?: number; maxSkewSec?: number } = {}): Promise<DeliveryClaims> {
  let claims: DeliveryClaims;
  try {
    ({ payload: claims } = await jwtVerify<DeliveryClaims>(jwt, createLocalJWKSet(keySet as { keys: JWK[] }), { algorithms: ['ES256'] }));
  } catch (err) {
    throw new DeliveryVerificationError(joseRefusal(err, jwt));
  }
  checkFresh(claims.iat, opts.now ?? nowSec(), opts.maxSkewSec ?? DEFAULT_MAX_SKEW_SEC, 'JWT iat');
  return claims;
}

/** jose's refusal in a receiver's words, naming the header field at fault. */
function joseRefusal(err: unknown, jwt: string): string {
  const header = (): { alg?: unknown; kid?: unknown } => {
    try {
      return decodeProtectedHeader(jwt);
    } catch {
      return {};
    }
  };
  if (err instanceof errors.JOSEAlgNotAllowed) return `JWT alg ${header().alg} is not ES256`;
  if (err instanceof errors.JWKSNoMatchingKey) return `JWT kid ${header().kid} is not in the key set`;
  if (err instanceof errors.JWSSignatureVerificationFailed) return 'JWT signature does not verify';
  if (err instanceof errors.JOSEError) return `JWT refused: ${err.message}`;
  return `JWT refused: ${String(err)}`;
}

type HeaderBag = Headers | Record<string, string | string[] | undefined>;
function header(headers: HeaderBag, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const v = (headers as Record<string, string | string[] | undefined>)[name.toLowerCase()];
  return Array.isArray(v) ? v[0] : v;
}

export interface VerifyOptions {
  /** The raw request body, exactly as received. */
  body: string | Buffer;
  /** The gateway's key set (GET /.well-known/jwks.json). */
  jwks: Jwks;
  /** The config's HMAC secret: when given, X-Switchboard-Signature must be present and valid. */
  secret?: string;
  /** When given, the JWT's iss must equal it. */
  issuer?: string;
  now?: number;
  maxSkewSec?: number;
}

/**
 * Everything a receiver should check before acting on a delivery: the timestamp is fresh, the HMAC (when it
 * has a secret) and the JWT verify, and the JWT names this delivery and this exact body. Remember delivery
 * ids for the window and drop repeats: a redelivery is the same event again.
 * @throws DeliveryVerificationError naming the first check that failed.
 */
export async function verifyDelivery(headers: HeaderBag, o: VerifyOptions): Promise<{ deliveryId: string; timestamp: number; claims: DeliveryClaims }> {
  const now = o.now ?? nowSec();
  const maxSkewSec = o.maxSkewSec ?? DEFAULT_MAX_SKEW_SEC;
  const deliveryId = header(headers, DELIVERY_HEADERS.deliveryId);
  const timestampText = header(headers, DELIVERY_HEADERS.timestamp);
  const jwt = header(headers, DELIVERY_HEADERS.jwt);
  if (!deliveryId || !timestampText || !jwt) throw new DeliveryVerificationError('delivery id, timestamp or JWT header missing');
  const timestamp = Number(timestampText);
  checkFresh(timestamp, now, maxSkewSec, 'timestamp');
  if (o.secret !== undefined) {
    const signature = header(headers, DELIVERY_HEADERS.signature);
    if (!signature) throw new DeliveryVerificationError('HMAC signature header missing');
    if (!verifyHmac({ secret: o.secret, timestamp: timestampText, deliveryId, body: o.body, signature })) {
      throw new DeliveryVerificationError('HMAC signature does not match');
    }
  }
  const claims = await verifyJwt(jwt, o.jwks, { now, maxSkewSec });
  if (claims.jti !== deliveryId) throw new DeliveryVerificationError(`JWT jti ${claims.jti} is not delivery ${deliveryId}`);
  if (claims.body_sha256 !== sha256Base64url(o.body)) throw new DeliveryVerificationError('body does not match the JWT body_sha256');
  if (o.issuer !== undefined && claims.iss !== o.issuer) throw new DeliveryVerificationError(`JWT iss ${claims.iss} is not ${o.issuer}`);
  return { deliveryId, timestamp, claims };
}
