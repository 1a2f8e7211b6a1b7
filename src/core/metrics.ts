/**
 * Prometheus metrics (`GET /metrics`, for an admin or a `metrics` key: the labels name every tenant's agents). One registry per
 * process, counted where things happen and read at scrape time where a count is state (open streams, agents by
 * status, ledger totals). Tasks, settlements and agent calls are counted by the workflows' activities, so in the
 * processes that run workers (`all`, `worker`: a worker process serves /metrics too); quota refusals and agents'
 * pushes where the request came in (`all`, `api`). The Temporal SDK runtime's own metrics (`temporal_*`, of this
 * process's client and workers) are served by the runtime on a loopback port; `/metrics` appends them, so each
 * process is one scrape target. prom-client's default metrics (`process_*`, `nodejs_*`: memory, CPU, event-loop
 * lag, GC) and the HTTP requests this process answered (src/api/plugins/http-metrics.ts) are on the same registry.
 *
 * The gauges read from PostgreSQL (`switchboard_agents`, `switchboard_tasks`, `switchboard_ledger_*`) say the same
 * in every process: aggregate them across targets with max(), never sum() (docs/operations.md).
 */
import type { Pool } from 'pg';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { TASK_STATES, type TaskState } from '../../task/wire';
import { isTerminal, stateLabel } from '../../task/rules';

export const registry = new Registry();
collectDefaultMetrics({ register: registry });

/** The label of a request no route serves (`route`): one value for every unknown URL, so scanners add no series. */
export const UNMATCHED_ROUTE = 'unmatched';
export const httpRequests = new Counter({
  name: 'switchboard_http_requests_total',
  help: 'HTTP requests answered, by route pattern (e.g. /agents/:id/a2a; unmatched: no route), method and status code',
  labelNames: ['route', 'method', 'status'] as const,
  registers: [registry],
});
export const httpRequestDuration = new Histogram({
  name: 'switchboard_http_request_duration_seconds',
  help: 'Time from receiving an HTTP request to its answer sent, by route pattern, method and status code (a stream: until it ends)',
  labelNames: ['route', 'method', 'status'] as const,
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
  registers: [registry],
});

export const tasksStarted = new Counter({
  name: 'switchboard_tasks_started_total',
  help: 'Tasks whose workflow started working (first state change recorded), by agent',
  labelNames: ['agent'] as const,
  registers: [registry],
});
export const tasksEnded = new Counter({
  name: 'switchboard_tasks_ended_total',
  help: 'Tasks settled in a terminal state, by agent and state',
  labelNames: ['agent', 'state'] as const,
  registers: [registry],
});
export const settledMinor = new Counter({
  name: 'switchboard_settled_minor_total',
  help: 'Amount charged at settlement (minor units), by agent',
  labelNames: ['agent'] as const,
  registers: [registry],
});
export const forwardDuration = new Histogram({
  name: 'switchboard_forward_duration_seconds',
  help: 'One attempt of forwarding a message to an agent, by agent and outcome (ok, or the failure type)',
  labelNames: ['agent', 'outcome'] as const,
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
  registers: [registry],
});
export const forwardAttempts = new Counter({
  name: 'switchboard_forward_attempts_total',
  help: 'Attempts of forwarding a message to an agent (retries included), by agent',
  labelNames: ['agent'] as const,
  registers: [registry],
});
export const forwardRetries = new Counter({
  name: 'switchboard_forward_retries_total',
  help: 'Attempts after the first (Temporal retries of the forwarding activity), by agent',
  labelNames: ['agent'] as const,
  registers: [registry],
});
export const pushDeliveries = new Counter({
  name: 'switchboard_push_deliveries_total',
  help: 'Webhook POSTs of push notifications, by outcome (delivered: a 2xx; failed: anything else)',
  labelNames: ['outcome'] as const,
  registers: [registry],
});
export const agentPushes = new Counter({
  name: 'switchboard_agent_pushes_total',
  help: 'Push notifications agents sent to POST /agent-push/:id, by outcome (woke: the follower reads the task; progress: nothing to read yet; refused: bad token; malformed: bad body)',
  labelNames: ['outcome'] as const,
  registers: [registry],
});
export const quotaRefusals = new Counter({
  name: 'switchboard_quota_refusals_total',
  help: 'Calls refused by a tenant quota or rate limit, by quota',
  labelNames: ['quota'] as const,
  registers: [registry],
});

export const admissionWaiting = new Gauge({
  name: 'switchboard_admission_waiting',
  help: 'Sends waiting for a place in a saturated gateway (fair admission per tenant, src/api/a2a/fair-gate.ts)',
  registers: [registry],
});

export interface ScrapeSources {
  pool: Pool;
  /** Open SSE streams in this process. */
  openStreams: () => number;
}

/** The apps reading gauges in this process, latest last (the tests build several, and close them in any order). */
const live: ScrapeSources[] = [];
let sources: ScrapeSources | undefined;

/**
 * Where the scrape-time gauges read from: the app's pool and streams (the latest app built in this process that is
 * still open). @returns a function that stops reading from them (on app close).
 */
export function readGaugesFrom(s: ScrapeSources): () => void {
  live.push(s);
  sources = s;
  return () => {
    const at = live.indexOf(s);
    if (at >= 0) live.splice(at, 1);
    sources = live.at(-1);
  };
}

/** A database-backed gauge: a source that does not answer (an outage) leaves it empty, and the scrape succeeds. */
async function rowsOf<T extends object>(sql: string): Promise<T[]> {
  if (!sources) return [];
  return sources.pool.query<T & Record<string, unknown>>(sql).then((r) => r.rows, () => []);
}

new Gauge({
  name: 'switchboard_open_streams',
  help: 'Open SSE streams in this process',
  registers: [registry],
  collect() {
    this.set(sources?.openStreams() ?? 0);
  },
});
new Gauge({
  name: 'switchboard_agents',
  help: 'Registered agents by health status',
  labelNames: ['status'] as const,
  registers: [registry],
  async collect() {
    this.reset();
    for (const r of await rowsOf<{ status: string; n: string }>('SELECT status, count(*) AS n FROM agents GROUP BY status')) this.set({ status: r.status }, Number(r.n));
  },
});
/** Open (non-terminal) task states, in the projection's spelling. */
const OPEN_STATES = TASK_STATES.filter((s) => !isTerminal(s));
new Gauge({
  name: 'switchboard_tasks',
  help: 'Open tasks (not in a terminal state) by state (submitted, working, input-required, auth-required), from the tasks projection; the same in every process: max(), not sum()',
  labelNames: ['state'] as const,
  registers: [registry],
  async collect() {
    this.reset();
    // Served by the partial index tasks_open (migration 008), which holds only the open tasks' rows. Every open
    // state is a series (0 when none), except while the database does not answer: then there are none at all.
    const rows = await sources?.pool
      .query<{ state: string; n: string }>(
        `SELECT state, count(*) AS n FROM tasks WHERE state NOT IN ('TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED') GROUP BY state`,
      )
      .then((r) => r.rows, () => undefined);
    if (!rows) return;
    for (const s of OPEN_STATES) this.set({ state: stateLabel(s) }, 0);
    for (const r of rows) {
      const known = (TASK_STATES as readonly string[]).includes(r.state);
      this.set({ state: known ? stateLabel(r.state as TaskState) : r.state }, Number(r.n));
    }
  },
});
for (const [column, help] of [
  ['balance_minor', 'Sum of account balances (minor units), by account kind (requester, agent, external)'],
  ['held_minor', 'Sum of open holds (minor units), by account kind'],
] as const) {
  new Gauge({
    name: `switchboard_ledger_${column}`,
    help,
    labelNames: ['kind'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      for (const r of await rowsOf<{ kind: string; total: string }>(`SELECT kind, coalesce(sum(${column}), 0) AS total FROM accounts GROUP BY kind`)) {
        this.set({ kind: r.kind }, Number(r.total));
      }
    },
  });
}

/** The text of `/metrics`: Switchboard's metrics, then the SDK runtime's (when its endpoint answers within a second). */
export async function metricsText(runtimeMetricsUrl?: string): Promise<string> {
  const own = await registry.metrics();
  if (!runtimeMetricsUrl) return own;
  const runtime = await fetch(runtimeMetricsUrl, { signal: AbortSignal.timeout(1000) })
    .then((r) => (r.ok ? r.text() : ''))
    .catch(() => '');
  return runtime ? `${own}\n# Temporal SDK runtime (this process's client and workers)\n${runtime}` : own;
}
