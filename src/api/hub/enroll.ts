/**
 * Hub enrollment (issue 30): an agent that connected to GET /hub with an enrollment token registers itself with
 * `agent.register` and its card. In one transaction: the card's name must be free in the token's tenant (no agent of
 * the tenant has a name that compares equal to it: src/core/agents/agent-names.ts; the unique index decides races), one
 * of the token's uses is taken, the agent is stored as a hub agent (`ws-agent://<id>`, healthy: it is connected) with the card, and an agent key is made for it. The key is in agent.register's answer,
 * once: the agent reconnects with it (the token may be used up or expired by then), as any hub agent does.
 */
import { randomBytes } from 'node:crypto';
import type { Pool } from 'pg';
import { inTransaction } from '../../core/db/tx';
import { DEFAULT_RETRY } from '../../../task/contracts';
import { slug } from '../../core/agents/agent-names';
import { useEnrollmentToken } from '../../core/auth/enrollment';
import { generateKey, hashKey } from '../../core/auth/keys';
import { writeAudit } from '../../core/auth/audit';
import { type AgentRef, isNameConflict, nameHolder } from '../../core/agents/agent-names';
import { ERRORS } from '../../../task/errors';

/** Why an enrollment was refused: a JSON-RPC code and message; `lapsed` when the token no longer holds (the socket closes, 4001). */
export class EnrollError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly lapsed = false,
  ) {
    super(message);
  }
}

export interface Enrolled {
  agentId: string;
  url: string;
  /** The agent key made for it: the agent's credential for its next connections (shown once). */
  agentKey: string;
  keyId: string;
}

const INVALID_PARAMS = ERRORS.InvalidParams.code;
const INVALID_REQUEST = ERRORS.InvalidRequest.code;

/**
 * Registers the agent the card describes in the token's tenant, under the card's name.
 * @throws EnrollError: -32602 when the name is taken (naming the agent that has it), -32600 when the token no longer holds.
 */
export async function enrollHubAgent(pool: Pool, opts: { tenant: string; tokenId: string; card: Record<string, unknown>; name: string; requestId: string }): Promise<Enrolled> {
  const { tenant, tokenId, name } = opts;
  const refuse = (holder: AgentRef) =>
    new EnrollError(
      INVALID_PARAMS,
      `agent.register: the name "${name}" is taken in this tenant (agent ${holder.id}${holder.name === name ? '' : `, named "${holder.name}": names compare ignoring case, white space, invisible and look-alike characters`}); register under another name, or, if you are that agent, reconnect with the agent key your registration gave you`,
    );
  const enrolled = await inTransaction(pool, async (db) => {
    const { key, holder } = await nameHolder(db, tenant, name);
    if (!key) throw new EnrollError(INVALID_PARAMS, `agent.register: the card's name ${JSON.stringify(name)} has no visible character`);
    if (holder) throw refuse(holder);
    if (!(await useEnrollmentToken(db, tenant, tokenId))) {
      throw new EnrollError(INVALID_REQUEST, 'agent.register: the enrollment token no longer holds (revoked, expired or used up since the socket opened)', true);
    }
    const agentId = `${slug(name)}-${randomBytes(6).toString('hex')}`;
    const url = `ws-agent://${agentId}`;
    await db.query(
      `INSERT INTO agents (tenant, id, name, source_url, card_url, card, endpoint_url, protocol_version, streaming, price_minor, retry, status, status_reason, signature)
       VALUES ($1, $2, $3, $4, $4, $5, $4, '0.3', false, 0, $6, 'healthy', $7, $8)`,
      [tenant, agentId, name, url, { ...opts.card, url }, DEFAULT_RETRY, `registered on the hub with enrollment token ${tokenId}`, { status: 'unsigned', checkedAt: new Date().toISOString() }],
    );
    const agentKey = generateKey();
    const keyId = `key_${randomBytes(9).toString('base64url')}`;
    await db.query('INSERT INTO api_keys (id, tenant, role, agent_id, name, key_hash) VALUES ($1, $2, $3, $4, $5, $6)', [
      keyId, tenant, 'agent', agentId, `${name} (hub enrollment ${tokenId})`.slice(0, 200), hashKey(agentKey),
    ]);
    return { agentId, url, agentKey, keyId };
  }).catch(async (err: unknown) => {
    // The unique name index (migration 034) decides a race with another enrollment, an operator's registration or
    // a hub agent's rename: the holder is committed by now, and the token's use was rolled back with the rest.
    if (!isNameConflict(err)) throw err;
    const { holder } = await nameHolder(pool, tenant, name);
    throw holder ? refuse(holder) : err;
  });
  // The trail says which token registered which agent (and made which key), as an operator's registration would.
  await writeAudit(pool, { tenant, actor: tokenId, role: 'agent', action: 'agent.enroll', target: enrolled.agentId, status: 201, requestId: opts.requestId }).catch(() => undefined);
  return enrolled;
}
