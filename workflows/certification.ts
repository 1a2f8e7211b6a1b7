/**
 * A capability evaluation (NANDA `certificate.start`): the agent is sent each probe, one of its skills' examples,
 * through the same forwarding activity (and so the same guarded outbound client) as every task, and each answer
 * is scored: a completed task with some text in its answer passes. The outcome is written to the
 * `certifications` row that `certificate.status` reads; a passed evaluation may then be issued a credential.
 * Deterministic: only @temporalio/workflow APIs.
 */
import { ApplicationFailure, proxyActivities } from '@temporalio/workflow';
import type { CertificationActivities } from '../activities';
import type { CertificationInput, ForwardResult, ProbeResult } from '../task/contracts';

export async function certificationWorkflow(input: CertificationInput): Promise<{ state: 'passed' | 'failed'; score: number }> {
  // A probe is one attempt plus one retry for a blip: a capability that needs more is not a capability.
  const probing = proxyActivities<CertificationActivities>({ startToCloseTimeout: input.probeTimeoutMs, retry: { maximumAttempts: 2, initialInterval: '1 second' } });
  const { recordCertification } = proxyActivities<CertificationActivities>({ startToCloseTimeout: '30 seconds', retry: { initialInterval: '1 second', maximumInterval: '30 seconds' } });
  const results: ProbeResult[] = [];
  for (const [i, probe] of input.probes.entries()) {
    // The probe's own ids: the agent sees one message per probe however often the activity is retried.
    const id = `${input.certificationId}:${i}`;
    try {
      const r = await probing.forwardMessage({
        endpoint: input.endpoint,
        message: { messageId: id, role: 'ROLE_USER', parts: [{ text: probe.text }], metadata: { switchboard: { certificationId: input.certificationId, skillId: probe.skillId } } },
        tenant: input.tenant,
        agentId: input.agentId,
        gatewayTaskId: id,
        gatewayContextId: input.certificationId,
      });
      const passed = r.state === 'TASK_STATE_COMPLETED' && answerText(r).trim().length > 0;
      results.push({ skill_id: probe.skillId, example: probe.text, state: r.state, passed, ...(passed ? {} : { detail: r.state === 'TASK_STATE_COMPLETED' ? 'the answer has no text' : `the task ended ${r.state}` }) });
    } catch (err) {
      const detail = err instanceof ApplicationFailure || err instanceof Error ? (err.cause as Error | undefined)?.message ?? err.message : String(err);
      results.push({ skill_id: probe.skillId, example: probe.text, state: 'TASK_STATE_FAILED', passed: false, detail });
    }
  }
  const score = results.length ? results.filter((r) => r.passed).length / results.length : 0;
  const state = results.length > 0 && score >= input.passScore ? 'passed' : 'failed';
  await recordCertification({ tenant: input.tenant, certificationId: input.certificationId, state, score, results });
  return { state, score };
}

/** The text of an answer: the agent's status message and artifacts. */
function answerText(r: ForwardResult): string {
  const parts = [...(r.statusMessage?.parts ?? []), ...r.artifacts.flatMap((a) => a.parts ?? [])];
  return parts.map((p) => p.text ?? '').join('');
}
