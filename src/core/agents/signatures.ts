/**
 * JWS signatures on agent cards (A2A 0.3+ `signatures`, 1.0 §8.4): each entry is a flattened JWS
 * `{protected, signature, header?}` whose payload is the canonical card without `signatures` (RFC 8785 JCS).
 *
 * A valid signature only means something if the key belongs to whoever serves the card, so keys are fetched
 * (through the guarded outbound client) from the card's own origin or from origins the operator trusts, never
 * from wherever a `jku` points: otherwise anyone could re-sign a tampered card with their own key and name
 * their own key server. A key embedded in the header (`jwk`) proves nothing on its own for the same reason;
 * it is accepted only when the trusted key set publishes the same key.
 */
import { calculateJwkThumbprint, flattenedVerify, importJWK, type JWK } from 'jose';
import { canonicalizeAgentCard, type AgentCard } from '@a2a-js/sdk';

export type SignatureStatus = 'verified' | 'unsigned' | 'invalid';

/** What was found, stored with the agent and shown by `GET /agents/:id`. */
export interface SignatureCheck {
  status: SignatureStatus;
  /** Why a card is invalid (every signature's problem), or which canonical form verified. */
  reason?: string;
  /** The key that verified the card (verified), or the first signature's key id (invalid). */
  kid?: string;
  alg?: string;
  /** Where the verifying key was fetched from. */
  keyUrl?: string;
  checkedAt: string;
}

export interface SignatureOptions {
  /** The guarded outbound fetch: key sets are untrusted remote documents like the cards. */
  fetch: typeof fetch;
  /** Origins (e.g. `https://keys.example.com`) whose JWKS may be named by a `jku` besides the card's own. */
  trustedJkuOrigins?: readonly string[];
  /** Per key-set fetch. Default 10 s. */
  timeoutMs?: number;
}

/** Where a card without a `jku` is expected to publish its keys: the card's origin, like the card itself. */
export const DEFAULT_JWKS_PATH = '/.well-known/jwks.json';

// RFC 7518 algorithms accepted, with the key type each needs (checked, so that an RSA key cannot be used under an
// EC algorithm name and the like). `none` and the HMAC family are absent on purpose: a public card cannot be
// authenticated with a shared secret. jose does the verifying.
const ALGORITHMS: Record<string, { kty: string; crv?: string }> = {
  ES256: { kty: 'EC', crv: 'P-256' },
  ES384: { kty: 'EC', crv: 'P-384' },
  ES512: { kty: 'EC', crv: 'P-521' },
  RS256: { kty: 'RSA' },
  RS384: { kty: 'RSA' },
  RS512: { kty: 'RSA' },
  PS256: { kty: 'RSA' },
  PS384: { kty: 'RSA' },
  PS512: { kty: 'RSA' },
  EdDSA: { kty: 'OKP', crv: 'Ed25519' },
  Ed25519: { kty: 'OKP', crv: 'Ed25519' },
};

interface SignatureEntry {
  protected?: unknown;
  signature?: unknown;
  header?: unknown;
}

/** A problem with one signature; the message becomes part of the stored reason. */
class SignatureProblem extends Error {}

/**
 * Checks the card's signatures: `verified` when at least one verifies with a trusted key (as the A2A SDKs do),
 * `unsigned` when there are none, `invalid` otherwise with every signature's problem in `reason`.
 * Never throws: a network failure fetching keys makes the card `invalid` with that reason, to be rechecked on
 * the next refresh.
 */
export async function checkCardSignatures(card: Record<string, unknown>, cardUrl: string, opts: SignatureOptions): Promise<SignatureCheck> {
  const checkedAt = new Date().toISOString();
  const entries = card.signatures;
  if (entries === undefined || (Array.isArray(entries) && entries.length === 0)) return { status: 'unsigned', checkedAt };
  if (!Array.isArray(entries)) return { status: 'invalid', reason: '`signatures` is not an array', checkedAt };

  const payloads = canonicalPayloads(card);
  const keySets = new Map<string, Promise<JWK[]>>(); // one fetch per key set per check
  const problems: string[] = [];
  let firstKid: string | undefined;
  for (const [i, entry] of (entries as SignatureEntry[]).entries()) {
    try {
      const result = await verifyEntry(entry, payloads, cardUrl, opts, keySets);
      return { status: 'verified', kid: result.kid, alg: result.alg, keyUrl: result.keyUrl, reason: `canonical form: ${result.form}`, checkedAt };
    } catch (err) {
      firstKid ??= kidOf(entry);
      problems.push(`signature ${i + 1}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  return { status: 'invalid', reason: problems.join('; '), kid: firstKid, checkedAt };
}

/**
 * The byte strings a signer may have signed. The A2A 1.0 SDKs (a2a-js `canonicalizeAgentCard`, spec 1.0
 * §8.4.1) first normalise the card to the 1.0 schema and drop empty values; that form is tried first, for 1.0
 * cards only: the normalisation drops every field outside the 1.0 schema, and for a 0.3 card those include the
 * endpoint (`url`, `additionalInterfaces`), which a signature that does not cover it must not vouch for.
 * Everything Switchboard reads from a 1.0 card (name, skills, capabilities, supportedInterfaces) is in the
 * schema, so is covered. The plain RFC 8785 form of the card as served (and the same without empty values,
 * as the 0.3 Python SDK signs) are tried for every card; they cover every field.
 */
function canonicalPayloads(card: Record<string, unknown>): { form: string; bytes: Buffer }[] {
  const { signatures: _omit, ...unsigned } = card;
  const forms: [string, string][] = [];
  if (Array.isArray(card.supportedInterfaces)) {
    try {
      forms.push(['a2a 1.0 (JCS of the normalised card)', canonicalizeAgentCard(card as unknown as AgentCard)]);
    } catch {
      // a card the 1.0 model cannot read still has its plain forms
    }
  }
  forms.push(['RFC 8785 JCS of the card as served', jcs(unsigned)]);
  forms.push(['RFC 8785 JCS without empty values', jcs(withoutEmpty(unsigned) ?? {})]);
  const seen = new Set<string>();
  return forms.filter(([, text]) => !seen.has(text) && seen.add(text)).map(([form, text]) => ({ form, bytes: Buffer.from(text, 'utf8') }));
}

/**
 * RFC 8785 JSON Canonicalization Scheme. ECMAScript's JSON.stringify already serialises numbers and strings as
 * JCS requires (§3.2.2.3, §3.2.2.2); what remains is sorting object keys by UTF-16 code units, which is what
 * Array.prototype.sort does with no comparator.
 */
export function jcs(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map((v) => jcs(v === undefined ? null : v)).join(',')}]`;
  const obj = value as Record<string, unknown>;
  const keys = Object.keys(obj).filter((k) => obj[k] !== undefined).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${jcs(obj[k])}`).join(',')}}`;
}

function withoutEmpty(v: unknown): unknown {
  if (v === '' || v === null || v === undefined) return undefined;
  if (Array.isArray(v)) {
    const items = v.map(withoutEmpty).filter((x) => x !== undefined);
    return items.length ? items : undefined;
  }
  if (typeof v === 'object') {
    const entries = Object.entries(v as Record<string, unknown>).map(([k, x]) => [k, withoutEmpty(x)] as const).filter(([, x]) => x !== undefined);
    return entries.length ? Object.fromEntries(entries) : undefined;
  }
  return v;
}

function kidOf(entry: SignatureEntry): string | undefined {
  try {
    const kid = headersOf(entry).kid;
    return typeof kid === 'string' ? kid : undefined;
  } catch {
    return undefined;
  }
}

/** The protected header, with the unprotected `header` filling only what the protected one lacks. */
function headersOf(entry: SignatureEntry): Record<string, unknown> {
  if (typeof entry?.protected !== 'string' || typeof entry.signature !== 'string') {
    throw new SignatureProblem('an entry needs `protected` and `signature` strings');
  }
  let protectedHeader: unknown;
  try {
    protectedHeader = JSON.parse(Buffer.from(entry.protected, 'base64url').toString('utf8'));
  } catch {
    throw new SignatureProblem('the protected header is not base64url JSON');
  }
  if (!protectedHeader || typeof protectedHeader !== 'object' || Array.isArray(protectedHeader)) {
    throw new SignatureProblem('the protected header is not a JSON object');
  }
  const unprotected = entry.header && typeof entry.header === 'object' ? (entry.header as Record<string, unknown>) : {};
  return { ...unprotected, ...(protectedHeader as Record<string, unknown>) };
}

async function verifyEntry(
  entry: SignatureEntry,
  payloads: { form: string; bytes: Buffer }[],
  cardUrl: string,
  opts: SignatureOptions,
  keySets: Map<string, Promise<JWK[]>>,
): Promise<{ kid: string; alg: string; keyUrl: string; form: string }> {
  const header = headersOf(entry);
  const alg = header.alg;
  if (typeof alg !== 'string' || !ALGORITHMS[alg]) throw new SignatureProblem(`unsupported alg ${JSON.stringify(alg)}`);
  // RFC 7515 §4.1.11: a critical extension we do not implement (e.g. b64=false) makes the JWS invalid.
  if (header.crit !== undefined) throw new SignatureProblem(`unsupported critical header parameters ${JSON.stringify(header.crit)}`);
  const kid = header.kid;
  if (typeof kid !== 'string' || !kid) throw new SignatureProblem('the header names no key (`kid`)');

  const keyUrl = keySetUrl(header.jku, cardUrl, opts.trustedJkuOrigins ?? []);
  let set = keySets.get(keyUrl);
  if (!set) keySets.set(keyUrl, (set = fetchKeySet(keyUrl, opts)));
  const jwks = await set;
  const jwk = jwks.find((k) => k.kid === kid);
  if (!jwk) throw new SignatureProblem(`key ${kid} is not in ${keyUrl}`);
  if (header.jwk !== undefined && !(header.jwk && typeof header.jwk === 'object' && (await sameKey(header.jwk as JWK, jwk)))) {
    throw new SignatureProblem(`the embedded jwk is not the key ${kid} published at ${keyUrl}`);
  }
  const key = await publicKey(jwk, alg, kid);
  for (const payload of payloads) {
    const jws = { protected: entry.protected as string, signature: entry.signature as string, payload: payload.bytes.toString('base64url') };
    try {
      await flattenedVerify(entry.header && typeof entry.header === 'object' ? { ...jws, header: entry.header as Record<string, unknown> } : jws, key, { algorithms: [alg] });
      return { kid, alg, keyUrl, form: payload.form };
    } catch {
      // not this canonical form (or a malformed signature): try the next
    }
  }
  throw new SignatureProblem(`the signature by ${kid} (${alg}) does not match the card: the card was changed after signing, or signed in another form`);
}

/**
 * The JWKS to use: the `jku` if it is on the card's origin or a trusted origin, else the card origin's
 * well-known key set. An untrusted `jku` is refused before any request is made to it.
 */
function keySetUrl(jku: unknown, cardUrl: string, trusted: readonly string[]): string {
  const cardOrigin = new URL(cardUrl).origin;
  if (jku === undefined) return new URL(DEFAULT_JWKS_PATH, cardOrigin).toString();
  if (typeof jku !== 'string') throw new SignatureProblem('`jku` is not a string');
  let url: URL;
  try {
    url = new URL(jku, cardUrl);
  } catch {
    throw new SignatureProblem(`jku ${JSON.stringify(jku)} is not a URL`);
  }
  const trustedOrigins = new Set(trusted.map((o) => new URL(o).origin));
  if (url.origin !== cardOrigin && !trustedOrigins.has(url.origin)) {
    throw new SignatureProblem(`jku ${url} is not on the card's origin (${cardOrigin}) or a trusted origin; its keys were not fetched`);
  }
  return url.toString();
}

async function fetchKeySet(url: string, opts: SignatureOptions): Promise<JWK[]> {
  let res: Response;
  let body: unknown;
  try {
    res = await opts.fetch(url, { headers: { accept: 'application/jwk-set+json, application/json' }, signal: AbortSignal.timeout(opts.timeoutMs ?? 10_000) });
    body = await res.json().catch(() => undefined);
  } catch (err) {
    throw new SignatureProblem(`key set ${url} could not be fetched: ${(err as Error).message}`);
  }
  if (!res.ok) throw new SignatureProblem(`key set ${url} answered HTTP ${res.status}`);
  const keys = (body as { keys?: unknown } | undefined)?.keys;
  if (!Array.isArray(keys)) throw new SignatureProblem(`${url} is not a JWK set (no \`keys\` array)`);
  return keys.filter((k): k is JWK => !!k && typeof k === 'object');
}

async function publicKey(jwk: JWK, alg: string, kid: string) {
  const spec = ALGORITHMS[alg]!;
  if (jwk.kty !== spec.kty || (spec.crv && jwk.crv !== spec.crv)) {
    throw new SignatureProblem(`key ${kid} is ${jwk.kty}${jwk.crv ? ` ${jwk.crv}` : ''}, which cannot verify ${alg}`);
  }
  if (jwk.use !== undefined && jwk.use !== 'sig') throw new SignatureProblem(`key ${kid} is for use "${jwk.use}", not signatures`);
  // Only the public members: a published private key (`d`) must not turn into a signing key here.
  const { d: _d, p: _p, q: _q, dp: _dp, dq: _dq, qi: _qi, ...pub } = jwk;
  try {
    return await importJWK(pub, alg);
  } catch (err) {
    throw new SignatureProblem(`key ${kid} is not a usable public key: ${(err as Error).message}`);
  }
}

/** Whether two JWKs are the same key (RFC 7638 thumbprints); a malformed one is not. */
async function sameKey(a: JWK, b: JWK): Promise<boolean> {
  try {
    return (await calculateJwkThumbprint(a)) === (await calculateJwkThumbprint(b));
  } catch {
    return false;
  }
}
