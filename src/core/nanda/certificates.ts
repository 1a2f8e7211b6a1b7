/**
 * Switchboard as a certifier (NANDA `certificate.*`): a capability evaluation of a registered agent
 * (workflows/certification.ts), a W3C Verifiable Credential (VC Data Model 2.0) for an agent that passed,
 * signed with the gateway's key (the one /.well-known/jwks.json publishes), and its revocation in a Bitstring
 * Status List (status-list.ts). Everything is per tenant: a tenant sees only its own evaluations and credentials.
 */
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import type { Agent, AgentRegistry } from '../agents/registry';
import { inTransaction } from '../db/tx';
import type { CertificationGateway } from '../temporal/certification-gateway';
import type { CertificationProbe, ProbeResult } from '../../../task/contracts';
import { invalidField } from './action-error';
import { VC_CONTEXT, countAllocation, openList, randomIndex, setStatusBit, signCredential, statusListUrl } from './status-list';

/** The share of probes an agent must pass. */
export const PASS_SCORE = 0.8;
/** At most this many probes per evaluation (the first examples of the card's skills, in card order). */
export const MAX_PROBES = 10;
/** How long an issued credential is valid. */
const VALIDITY_MS = 365 * 24 * 3600 * 1000;

export interface CertifierDeps {
  pool: Pool;
  registry: AgentRegistry;
  certifications: CertificationGateway;
}

export interface Evaluation {
  certification_id: string;
  agent_id: string;
  state: 'running' | 'passed' | 'failed';
  score: number | null;
  pass_score: number;
  results: ProbeResult[];
  started_at: string;
  finished_at: string | null;
}

/** What the agent is probed with: each skill's examples, or its name and description when it gives none. */
export function probesOf(agent: Agent): CertificationProbe[] {
  const probes: CertificationProbe[] = [];
  for (const s of (agent.card.skills ?? []) as { id?: unknown; name?: unknown; description?: unknown; examples?: unknown }[]) {
    if (typeof s.id !== 'string') continue;
    const examples = Array.isArray(s.examples) ? s.examples.filter((e): e is string => typeof e === 'string' && e.trim() !== '') : [];
    const texts = examples.length ? examples : [[s.name, s.description].filter((x) => typeof x === 'string').join(': ') || s.id];
    for (const text of texts) probes.push({ skillId: s.id, text });
  }
  return probes.slice(0, MAX_PROBES);
}

export async function startEvaluation(d: CertifierDeps, tenant: string, by: string, agentId: string): Promise<Evaluation> {
  const agent = await d.registry.get(tenant, agentId);
  if (!agent) throw invalidField('certificate.start', 'agent_id', `names no agent registered in this tenant (${agentId})`);
  const probes = probesOf(agent);
  if (probes.length === 0) throw invalidField('certificate.start', 'agent_id', `names an agent whose card lists no skills to evaluate (${agentId})`);
  const id = `eval-${randomUUID()}`;
  await d.pool.query('INSERT INTO certifications (tenant, id, agent_id, state, requested_by) VALUES ($1, $2, $3, $4, $5)', [tenant, id, agentId, 'running', by]);
  try {
    await d.certifications.start({
      tenant,
      certificationId: id,
      agentId,
      endpoint: agent.endpoint,
      probes,
      passScore: PASS_SCORE,
      probeTimeoutMs: agent.retry.attemptTimeoutMs,
    });
  } catch (err) {
    // Not started (Temporal away): no evaluation is left `running` forever.
    await d.pool.query('DELETE FROM certifications WHERE tenant = $1 AND id = $2', [tenant, id]).catch(() => undefined);
    throw err;
  }
  return (await evaluation(d.pool, tenant, id))!;
}

export async function evaluation(pool: Pool, tenant: string, id: string): Promise<Evaluation | undefined> {
  const { rows } = await pool.query('SELECT * FROM certifications WHERE tenant = $1 AND id = $2', [tenant, id]);
  const r = rows[0];
  return (
    r && {
      certification_id: r.id,
      agent_id: r.agent_id,
      state: r.state,
      score: r.score,
      pass_score: PASS_SCORE,
      results: r.results,
      started_at: r.created_at.toISOString(),
      finished_at: r.finished_at?.toISOString() ?? null,
    }
  );
}

export interface IssuedCredential {
  cert_id: string;
  status: 'active' | 'revoked';
  agent_id: string;
  certification_id: string;
  status_list_index: number;
  status_list_credential: string;
  credential: Record<string, unknown>;
  /** The credential secured as a compact JWS (`typ: vc+jwt`). */
  jwt: string;
}

/**
 * Issues the credential of a passed evaluation; asked again, returns the one issued.
 * @throws -32602 when the evaluation is unknown, still running or failed.
 */
export async function issueCredential(d: CertifierDeps, tenant: string, base: string, certificationId: string): Promise<IssuedCredential> {
  const action = 'certificate.certificate';
  const ev = await evaluation(d.pool, tenant, certificationId);
  if (!ev) throw invalidField(action, 'certification_id', `names no evaluation of this tenant (${certificationId})`);
  if (ev.state !== 'passed') throw invalidField(action, 'certification_id', `names an evaluation that ${ev.state === 'running' ? 'is still running' : `failed (score ${ev.score})`}; only a passed evaluation is certified`);
  const existing = await credentialOf(d.pool, tenant, { certificationId });
  if (existing) return existing;
  const agent = await d.registry.get(tenant, ev.agent_id);
  if (!agent) throw invalidField(action, 'certification_id', `names an evaluation of agent ${ev.agent_id}, which is no longer registered`);
  const certId = `cert-${randomUUID()}`;
  return inTransaction(d.pool, async (client) => {
    const { listId, size } = await openList(client, tenant);
    const listUrl = statusListUrl(base, listId);
    for (let pick = 1; ; pick++) {
      const index = randomIndex(size);
      const now = new Date();
      const credential = {
        '@context': [VC_CONTEXT],
        id: `urn:uuid:${certId.slice('cert-'.length)}`,
        type: ['VerifiableCredential', 'AgentCapabilityCredential'],
        issuer: base,
        validFrom: now.toISOString(),
        validUntil: new Date(now.getTime() + VALIDITY_MS).toISOString(),
        credentialSubject: {
          id: agent.cardUrl,
          agentId: agent.id,
          name: agent.name,
          skills: ev.results.map((r) => r.skill_id).filter((s, i, all) => all.indexOf(s) === i),
          evaluation: { id: ev.certification_id, score: ev.score, passScore: ev.pass_score, probes: ev.results.length, finishedAt: ev.finished_at },
        },
        credentialStatus: {
          id: `${listUrl}#${index}`,
          type: 'BitstringStatusListEntry',
          statusPurpose: 'revocation',
          statusListIndex: String(index),
          statusListCredential: listUrl,
        },
      };
      const jwt = await signCredential(d.pool, credential);
      // Either unique key may refuse the row: (list, index) when the random pick is taken, (tenant, evaluation)
      // when a concurrent issue of the same evaluation won.
      const { rows } = await client.query(
        `INSERT INTO credentials (tenant, id, agent_id, certification_id, list_id, list_index, credential, jwt) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT DO NOTHING RETURNING id`,
        [tenant, certId, agent.id, certificationId, listId, index, credential, jwt],
      );
      if (rows[0]) {
        await countAllocation(client, listId);
        return { cert_id: certId, status: 'active', agent_id: agent.id, certification_id: certificationId, status_list_index: index, status_list_credential: listUrl, credential, jwt };
      }
      const won = await credentialOf(client, tenant, { certificationId });
      if (won) return won;
      // The index was taken. At most about half a list is given out, so twenty misses in a row mean something else.
      if (pick >= 20) throw new Error(`no free index in status list ${listId} after ${pick} random picks`);
    }
  });
}

async function credentialOf(db: Pick<Pool, 'query'>, tenant: string, by: { certId?: string; certificationId?: string }): Promise<IssuedCredential | undefined> {
  const { rows } = await db.query(
    `SELECT c.*, get_bit(l.bits, (c.list_index & ~7) + (7 - (c.list_index & 7))) AS bit FROM credentials c JOIN status_lists l ON l.id = c.list_id
      WHERE c.tenant = $1 AND ${by.certId ? 'c.id = $2' : 'c.certification_id = $2'}`,
    [tenant, by.certId ?? by.certificationId],
  );
  const r = rows[0];
  return (
    r && {
      cert_id: r.id,
      // The status is the list's bit: what any verifier reading the public list sees.
      status: r.bit === 1 ? 'revoked' : 'active',
      agent_id: r.agent_id,
      certification_id: r.certification_id,
      status_list_index: r.list_index,
      status_list_credential: r.credential.credentialStatus.statusListCredential,
      credential: r.credential,
      jwt: r.jwt,
      ...(r.revoked_at ? { revoked_at: r.revoked_at.toISOString(), reason: r.revocation_reason } : {}),
    }
  );
}

export interface CertificateStatus {
  cert_id: string;
  status: 'active' | 'revoked';
  revoked: boolean;
  status_list_index: number;
  status_list_credential: string;
  agent_id: string;
  revoked_at?: string;
  reason?: string | null;
}

/** `certificate.check`: the status (the list's bit) and the index. @throws -32602 for an unknown cert_id. */
export async function checkCertificate(pool: Pool, tenant: string, certId: string, action = 'certificate.check'): Promise<CertificateStatus> {
  const c = await credentialOf(pool, tenant, { certId });
  if (!c) throw invalidField(action, 'cert_id', `names no certificate of this tenant (${certId})`);
  const { revoked_at, reason } = c as IssuedCredential & { revoked_at?: string; reason?: string | null };
  return {
    cert_id: c.cert_id,
    status: c.status,
    revoked: c.status === 'revoked',
    status_list_index: c.status_list_index,
    status_list_credential: c.status_list_credential,
    agent_id: c.agent_id,
    ...(revoked_at ? { revoked_at, reason } : {}),
  };
}

/**
 * `certificate.revoke`: sets the credential's bit. Idempotent (a second revoke answers the first one's time and
 * reason) and never reversible (nothing clears a bit).
 * @throws -32602 for an unknown cert_id.
 */
export async function revokeCertificate(pool: Pool, tenant: string, certId: string, reason: string | undefined): Promise<CertificateStatus> {
  await inTransaction(pool, async (client) => {
    const { rows } = await client.query<{ list_id: string; list_index: number }>(
      `UPDATE credentials SET revoked_at = now(), revocation_reason = $3 WHERE tenant = $1 AND id = $2 AND revoked_at IS NULL RETURNING list_id, list_index`,
      [tenant, certId, reason ?? null],
    );
    if (rows[0]) await setStatusBit(client, rows[0].list_id, rows[0].list_index);
  });
  return checkCertificate(pool, tenant, certId, 'certificate.revoke');
}
