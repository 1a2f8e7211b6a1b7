/**
 * The certification workflow's activities: forwarding a probe is the task path's own activity; recording the
 * outcome is this one (the row `certificate.status` reads).
 */
import type { Pool } from 'pg';
import type { CertificationOutcome } from '../task/contracts';

/** Writes the evaluation's outcome once: a retried write of the same outcome changes nothing. */
export async function recordCertification(pool: Pool, o: CertificationOutcome): Promise<void> {
  await pool.query(
    `UPDATE certifications SET state = $3, score = $4, results = $5, finished_at = coalesce(finished_at, now())
      WHERE tenant = $1 AND id = $2 AND state = 'running'`,
    [o.tenant, o.certificationId, o.state, o.score, JSON.stringify(o.results)],
  );
}
