/**
 * NANDA actions (issue 12) against a plain message/send at the same front door (POST /a2a), both in the seed's
 * 0.3 shape over raw JSON-RPC: `certificate.check` of an issued certificate (two indexed reads, no Temporal),
 * `certificate.revoke` (one transaction: the credential row and the status list's bit), and a blocking
 * message/send routed by `metadata.agentId` to an echo agent (a task: claim, workflow, agent call, settlement).
 * Each at c=1 and c=32 (BENCH_NANDA_N calls each, default 400).
 */
import { randomUUID } from 'node:crypto';
import type { Gateway } from '../test/helpers/harness';
import { type Timing, timeCalls } from './measure';

export interface NandaScenario extends Timing {
  scenario: string;
  concurrency: number;
}
export type NandaReport = NandaScenario[];

export async function benchNanda(gw: Gateway, agentUrl: string, deadline: number): Promise<NandaReport> {
  const { register } = await import('../test/helpers/harness');
  const n = Number(process.env.BENCH_NANDA_N ?? 400);
  const { id } = await register(gw, agentUrl, { name: 'Echo NANDA bench' });
  const post = async (key: string, message: Record<string, unknown>) => {
    const res = await fetch(`${gw.url}/a2a`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({ jsonrpc: '2.0', id: 'bench', method: 'message/send', params: { message } }),
    });
    const body = (await res.json()) as { result?: { parts?: { text?: string }[]; status?: { state?: string } }; error?: unknown };
    if (body.error) throw new Error(JSON.stringify(body.error));
    return body.result!;
  };
  const act = async (fields: Record<string, unknown>, key = gw.keys.operator) =>
    JSON.parse((await post(key, { role: 'user', parts: [{ text: JSON.stringify(fields) }] })).parts![0]!.text!) as Record<string, any>;

  // One evaluation of the echo agent, and certificates to check and revoke (fixture evaluations, as the
  // evaluation's own cost is a workflow's, not the action's).
  const ev = await act({ action: 'certificate.start', agent_id: id });
  for (let s = await act({ action: 'certificate.status', certification_id: ev.certification_id }); s.state === 'running'; ) {
    await new Promise((r) => setTimeout(r, 100));
    s = await act({ action: 'certificate.status', certification_id: ev.certification_id });
  }
  const cert = await act({ action: 'certificate.certificate', certification_id: ev.certification_id });
  if (!cert.cert_id) throw new Error(`no certificate: ${JSON.stringify(cert)}`);
  const toRevoke: string[] = [];
  for (let i = 0; i < 2 * n + 100; i++) {
    const evalId = `eval-${randomUUID()}`;
    await gw.db.pool.query(
      `INSERT INTO certifications (tenant, id, agent_id, state, score, requested_by, finished_at) VALUES ('default', $1, $2, 'passed', 1, 'bench', now())`,
      [evalId, id],
    );
    toRevoke.push((await act({ action: 'certificate.certificate', certification_id: evalId })).cert_id);
  }

  const scenarios: [string, () => Promise<void>][] = [
    ['action certificate.check', async () => {
      if ((await act({ action: 'certificate.check', cert_id: cert.cert_id }, gw.keys.client)).status !== 'active') throw new Error('not active');
    }],
    ['action certificate.revoke', async () => {
      if ((await act({ action: 'certificate.revoke', cert_id: toRevoke.pop()!, reason: 'bench' })).status !== 'revoked') throw new Error('not revoked');
    }],
    ['message/send (a task)', async () => {
      const r = await post(gw.keys.client, { kind: 'message', messageId: randomUUID(), role: 'user', parts: [{ kind: 'text', text: 'hi' }], metadata: { agentId: id } });
      if (r.status?.state !== 'completed') throw new Error(`task ${r.status?.state}`);
    }],
  ];
  const out: NandaReport = [];
  for (const concurrency of [1, 32]) {
    for (const [scenario, call] of scenarios) {
      const t = await timeCalls(call, { concurrency, n, warmup: 10, deadline });
      out.push({ scenario, concurrency, ...t });
    }
  }
  return out;
}

export function printNanda(r: NandaReport) {
  console.log('\nNANDA actions vs. a plain message/send at POST /a2a (0.3, raw JSON-RPC), ms');
  console.log(`${'scenario'.padEnd(26)}  c     n     p50     p99   req/s  CPU ms/call`);
  for (const s of r) {
    console.log(`${s.scenario.padEnd(26)} ${String(s.concurrency).padStart(2)} ${String(s.n).padStart(5)} ${s.p50.toFixed(2).padStart(7)} ${s.p99.toFixed(2).padStart(7)} ${s.tps.toFixed(0).padStart(7)} ${s.cpuMs.toFixed(2).padStart(12)}`);
  }
}
