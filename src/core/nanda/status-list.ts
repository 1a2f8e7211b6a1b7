/**
 * W3C Bitstring Status List v1.0 (https://www.w3.org/TR/vc-bitstring-status-list/) for the credentials
 * Switchboard issues: each credential gets one random index in one list (allocated once, never reused); revoking it
 * sets that bit, which nothing ever clears. A list is served as a status list credential at a public URL
 * (GET /credentials/status/:listId), its bits GZIP-compressed and base64url-encoded with the multibase `u` prefix.
 */
import { randomInt, randomUUID } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { CompactSign } from 'jose';
import type { Pool, PoolClient } from 'pg';
import { signingKey } from '../push/signing';

/** Entries per list: the spec's minimum (§2.1), 16 KiB of bits, enough that a list shows no one's status. */
export const STATUS_LIST_SIZE = 131_072;
export const VC_CONTEXT = 'https://www.w3.org/ns/credentials/v2';

/** Where a list is served, under the gateway's base URL. */
export const statusListUrl = (base: string, listId: string) => `${base}/credentials/status/${listId}`;

/**
 * The tenant's list that takes new credentials (under half given out), or a new one. The index within it is the
 * caller's random pick (`randomIndex`), claimed by inserting the credential under the (list, index) unique key.
 */
export async function openList(client: PoolClient, tenant: string): Promise<{ listId: string; size: number }> {
  const { rows } = await client.query<{ id: string; size: number }>(
    'SELECT id, size FROM status_lists WHERE tenant = $1 AND allocated < size / 2 ORDER BY created_at LIMIT 1',
    [tenant],
  );
  if (rows[0]) return { listId: rows[0].id, size: rows[0].size };
  const { rows: made } = await client.query<{ id: string; size: number }>(
    `INSERT INTO status_lists (id, tenant, size, bits) VALUES ($1, $2, $3, decode(repeat('00', $3 / 8), 'hex')) RETURNING id, size`,
    [`sl-${randomUUID()}`, tenant, STATUS_LIST_SIZE],
  );
  return { listId: made[0]!.id, size: made[0]!.size };
}

/**
 * A random index of a list of `size` entries. Sequential indexes would tell a verifier the order of issuance and
 * let it guess whose credential sits next to whose; random ones keep a list's herd privacy.
 */
export const randomIndex = (size: number) => randomInt(size);

/** Counts an index as given out (a list stops taking credentials at half its size). */
export async function countAllocation(client: PoolClient, listId: string): Promise<void> {
  await client.query('UPDATE status_lists SET allocated = allocated + 1, updated_at = now() WHERE id = $1', [listId]);
}

/**
 * Sets the bit of `index`. §3.2: index 0 is the left-most bit of the bitstring, i.e. the most significant bit of
 * its first byte; PostgreSQL's set_bit numbers bits from the least significant one of each byte, hence the flip.
 * One UPDATE of the list's row: concurrent revocations queue on its lock and each applies to the latest bits.
 */
export async function setStatusBit(db: Pick<Pool, 'query'>, listId: string, index: number): Promise<void> {
  await db.query('UPDATE status_lists SET bits = set_bit(bits, $2, 1), updated_at = now() WHERE id = $1', [listId, (index & ~7) + (7 - (index & 7))]);
}

/** The list's bitstring, GZIP-compressed, base64url, multibase `u` prefix (§2.1 `encodedList`). */
export function encodeList(bits: Buffer): string {
  return `u${gzipSync(bits).toString('base64url')}`;
}

export interface StatusListCredential {
  credential: Record<string, unknown>;
  /** The same credential secured as a compact JWS (VC-JOSE-COSE, `typ: vc+jwt`), signed with the gateway's key. */
  jwt: string;
}

/** The status list credential of `listId`, or undefined when there is no such list. */
export async function statusListCredential(pool: Pool, base: string, listId: string): Promise<StatusListCredential | undefined> {
  const { rows } = await pool.query<{ bits: Buffer; created_at: Date; updated_at: Date }>('SELECT bits, created_at, updated_at FROM status_lists WHERE id = $1', [listId]);
  if (!rows[0]) return undefined;
  const url = statusListUrl(base, listId);
  const credential = {
    '@context': [VC_CONTEXT],
    id: url,
    type: ['VerifiableCredential', 'BitstringStatusListCredential'],
    issuer: base,
    validFrom: rows[0].created_at.toISOString(),
    credentialSubject: { id: `${url}#list`, type: 'BitstringStatusList', statusPurpose: 'revocation', encodedList: encodeList(rows[0].bits) },
  };
  return { credential, jwt: await signCredential(pool, credential) };
}

/** A credential secured with JOSE (VC-JOSE-COSE §3.1.1): the credential is the JWS payload, signed ES256. */
export async function signCredential(pool: Pool, credential: Record<string, unknown>): Promise<string> {
  const key = await signingKey(pool);
  return new CompactSign(new TextEncoder().encode(JSON.stringify(credential)))
    .setProtectedHeader({ alg: 'ES256', kid: key.kid, typ: 'vc+jwt', cty: 'vc' })
    .sign(key.privateKey);
}
