/**
 * An agent's health follows its tasks, not only its probes (issue 34): the liveness probe runs every few minutes,
 * and an agent that refuses connections meanwhile was shown healthy while every task to it failed. The outbound
 * agent client (agent-client.ts) tells what each exchange of a task showed, and this records it:
 *
 * - a connection that could not be made (refused, host unknown or unreachable) marks the agent `down` at once,
 *   with as many failures counted as the probes need for down, so the next failed probe keeps it down;
 * - a timeout (no answer within the attempt's time) counts one failure: `degraded`, and `down` once
 *   RefreshPolicy.downAfterFailures are reached in a row, as failed probes do;
 * - an answer (any HTTP status below 500, any gRPC status the agent sent) ends a failure streak: an agent marked
 *   `degraded` or `down` for failed connects, timeouts or failed probes is `healthy` again. Degraded for another
 *   reason (slow probes, a card or signature problem, failing work) it stays so: the next probe says.
 *
 * Writes are cheap: a failure writes only when it changes the row; an answer writes nothing while this process last
 * saw the agent answer (the common case: one map lookup), and otherwise an UPDATE that matches only a row to mend.
 * This process's view is re-checked in the background at most every RECHECK_MS, so a verdict another process or a
 * probe wrote is mended by the next answer after that. Hub agents (ws-agent://) are the hub's to judge: never
 * touched here.
 */
import type { Pool } from 'pg';
import { OutboundError } from '../http/outbound';

/** What one exchange with an agent showed about its reachability. */
export type ExchangeSignal =
  | { kind: 'answered' }
  /** No connection could be made: refused, unresolvable, unreachable. */
  | { kind: 'unreachable'; detail: string }
  /** Connected (or trying), but no answer within the time allowed. */
  | { kind: 'timeout'; detail: string };

/** How often an answer re-checks an agent this process last saw answering (in the background). */
export const RECHECK_MS = 30_000;
/** Agents remembered per process; past this the memory starts afresh (a re-check each, in the background). */
const MAX_KNOWN = 10_000;

/** Error codes of a connection that could not be made (node's, on the error or in its cause chain). */
const UNREACHABLE_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EHOSTDOWN', 'EADDRNOTAVAIL']);
/** Error codes of a request that got no answer in time (undici's and node's). */
const TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'ETIMEDOUT']);

/**
 * What a failed request to an agent says about it: `unreachable`, `timeout`, or nothing (an abort, a guard's refusal,
 * a cut connection: not a verdict on the agent).
 */
export function signalOfError(err: unknown): ExchangeSignal | undefined {
  const detail = err instanceof Error ? err.message : String(err);
  for (let e = err, depth = 0; e && depth < 6; e = (e as { cause?: unknown }).cause, depth++) {
    const codes = [(e as { code?: unknown }).code, ...((e as { errors?: { code?: unknown }[] }).errors ?? []).map((x) => x?.code)];
    if (codes.some((c) => typeof c === 'string' && UNREACHABLE_CODES.has(c))) return { kind: 'unreachable', detail };
    if (codes.some((c) => typeof c === 'string' && TIMEOUT_CODES.has(c))) return { kind: 'timeout', detail };
    if (e instanceof OutboundError && e.code === 'TIMEOUT') return { kind: 'timeout', detail };
  }
  return undefined;
}

/** gRPC: UNAVAILABLE without a connection (grpc-js's words), DEADLINE_EXCEEDED, or any status the agent sent. */
export function signalOfGrpcStatus(code: number, details: string): ExchangeSignal | undefined {
  const UNAVAILABLE = 14;
  const DEADLINE_EXCEEDED = 4;
  if (code === DEADLINE_EXCEEDED) return { kind: 'timeout', detail: `gRPC DEADLINE_EXCEEDED: ${details}` };
  if (code === UNAVAILABLE) {
    return /No connection established|ECONNREFUSED|ENOTFOUND|EHOSTUNREACH|ENETUNREACH|Name resolution failed/i.test(details)
      ? { kind: 'unreachable', detail: `gRPC UNAVAILABLE: ${details}` }
      : undefined;
  }
  return { kind: 'answered' };
}

export interface TaskHealthOptions {
  /** Failures in a row that make an agent down (RefreshPolicy.downAfterFailures). */
  downAfterFailures: number;
  /** Where a write that failed is reported (health is advisory: the task goes on). */
  warn?: (msg: string, err: unknown) => void;
  /** Default RECHECK_MS. */
  recheckMs?: number;
}

export class TaskHealth {
  /** Per `tenant\0agentId`: whether this process last saw the agent answer, and when it last checked the row. */
  private readonly known = new Map<string, { answered: boolean; at: number }>();
  /** Per agent, the last write queued: this process's writes for one agent run in the order they were noted. */
  private readonly queued = new Map<string, Promise<void>>();

  constructor(
    private readonly pool: Pick<Pool, 'query'>,
    private readonly opts: TaskHealthOptions,
  ) {}

  /**
   * Records what an exchange of a task showed. Resolves once a change of verdict is written (so a client told its
   * task failed finds the agent down); an answer from an agent this process saw answering resolves at once.
   */
  async note(tenant: string, agentId: string, signal: ExchangeSignal): Promise<void> {
    const key = `${tenant}\u0000${agentId}`;
    const seen = this.known.get(key);
    const now = Date.now();
    if (this.known.size >= MAX_KNOWN && !seen) this.known.clear();
    if (signal.kind === 'answered') {
      if (seen?.answered) {
        if (now - seen.at < (this.opts.recheckMs ?? RECHECK_MS)) return;
        this.known.set(key, { answered: true, at: now });
        void this.inOrder(key, () => this.mend(tenant, agentId));
        return;
      }
      this.known.set(key, { answered: true, at: now });
      // Never seen here: most agents are healthy, so the check runs beside the task. Seen failing: the agent is
      // back, and the task's client should find it so.
      const mended = this.inOrder(key, () => this.mend(tenant, agentId));
      if (seen) await mended;
      return;
    }
    this.known.set(key, { answered: false, at: now });
    await this.inOrder(key, () => this.fail(tenant, agentId, signal).catch((err: unknown) => this.opts.warn?.('agent health not recorded', err)));
  }

  /** Runs `write` after the writes queued before it for the same agent (a late check must not undo a later failure). */
  private inOrder(key: string, write: () => Promise<void>): Promise<void> {
    const done = (this.queued.get(key) ?? Promise.resolve()).then(write);
    this.queued.set(key, done);
    void done.then(() => {
      if (this.queued.get(key) === done) this.queued.delete(key);
    });
    return done;
  }

  /** Healthy again, when a failure streak (of tasks or probes) made it degraded or down. */
  private mend(tenant: string, agentId: string): Promise<void> {
    return this.pool
      .query(
        `UPDATE agents SET status = 'healthy', status_reason = 'a task reached the agent and it answered', consecutive_failures = 0,
                status_changed_at = now(), updated_at = now()
          WHERE tenant = $1 AND id = $2 AND status <> 'healthy' AND consecutive_failures > 0 AND endpoint_url NOT LIKE 'ws-agent:%'`,
        [tenant, agentId],
      )
      .then(
        () => undefined,
        (err: unknown) => this.opts.warn?.('agent health not recorded', err),
      );
  }

  private async fail(tenant: string, agentId: string, signal: Exclude<ExchangeSignal, { kind: 'answered' }>): Promise<void> {
    const down = this.opts.downAfterFailures;
    if (signal.kind === 'unreachable') {
      await this.pool.query(
        `UPDATE agents SET status = 'down', status_reason = $3, consecutive_failures = GREATEST(consecutive_failures + 1, $4),
                status_changed_at = now(), updated_at = now()
          WHERE tenant = $1 AND id = $2 AND status <> 'down' AND endpoint_url NOT LIKE 'ws-agent:%'`,
        [tenant, agentId, `a task could not connect to the agent: ${signal.detail}`, down],
      );
      return;
    }
    await this.pool.query(
      `UPDATE agents SET consecutive_failures = consecutive_failures + 1,
              status = CASE WHEN consecutive_failures + 1 >= $4 THEN 'down' ELSE 'degraded' END,
              status_reason = CASE WHEN consecutive_failures + 1 >= $4 THEN $5 ELSE $3 END,
              status_changed_at = CASE WHEN status = (CASE WHEN consecutive_failures + 1 >= $4 THEN 'down' ELSE 'degraded' END) THEN status_changed_at ELSE now() END,
              updated_at = now()
        WHERE tenant = $1 AND id = $2 AND status <> 'down' AND endpoint_url NOT LIKE 'ws-agent:%'`,
      [tenant, agentId, `a task's request to the agent timed out: ${signal.detail}`, down, `${down} requests or probes in a row failed; last, a task's timed out: ${signal.detail}`],
    );
  }
}
