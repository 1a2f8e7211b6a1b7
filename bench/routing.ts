/**
 * Routing overhead: blocking SendMessage to one echo agent through its own endpoint (`/agents/:id/a2a`), through
 * the front door with `metadata.agentId` (`/a2a`), and through the front door routed by the message text. The
 * three are interleaved call by call, so drift on a shared machine hits them alike. The differences of the p50s
 * are what routing adds (a lookup or a search, the message claim and the task_routes row).
 *
 * Env: BENCH_ROUTING_N (calls per scenario, default 200), BENCH_WARMUP. Used by bench/run.ts (BENCH_ONLY=routing).
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Gateway } from '../test/helpers/harness';

const int = (name: string, def: number) => (process.env[name] ? Number.parseInt(process.env[name]!, 10) : def);

export interface RoutingScenario {
  scenario: string;
  n: number;
  errors: number;
  p50: number;
  p99: number;
  mean: number;
}

export interface RoutingReport {
  scenarios: RoutingScenario[];
  /** p50 of /a2a with metadata.agentId minus p50 of the agent endpoint, ms. */
  addedP50AgentIdMs: number;
  /** p50 of /a2a routed by text minus p50 of the agent endpoint, ms. */
  addedP50SearchMs: number;
  agentsRegistered: number;
}

export async function benchRouting(gw: Gateway, agentUrl: string, deadline: number): Promise<RoutingReport> {
  const { register } = await import('../test/helpers/harness');
  const n = int('BENCH_ROUTING_N', 200);
  const warmup = int('BENCH_WARMUP', 20);
  const { id } = await register(gw, agentUrl, { name: 'Echo routing bench' });
  const call = async (path: string, text: string, metadata?: Record<string, unknown>) => {
    const res = await fetch(`${gw.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${gw.keys.client}` },
      body: JSON.stringify({
        jsonrpc: '2.0', id: 1, method: 'SendMessage',
        params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...(metadata && { metadata }) } },
      }),
    });
    const body = (await res.json()) as { result?: { task?: { status: { state: string } } }; error?: unknown };
    if (body.result?.task?.status.state !== 'TASK_STATE_COMPLETED') throw new Error(`not completed: ${JSON.stringify(body).slice(0, 200)}`);
  };
  const scenarios: [string, () => Promise<void>][] = [
    ['agent endpoint /agents/:id/a2a', () => call(`/agents/${id}/a2a`, 'hi')],
    ['front door /a2a, metadata.agentId', () => call('/a2a', 'hi', { agentId: id })],
    ['front door /a2a, routed by text', () => call('/a2a', 'echo routing bench please')],
  ];
  for (let i = 0; i < warmup; i++) for (const [, f] of scenarios) await f();
  const lat = scenarios.map(() => [] as number[]);
  const errors = scenarios.map(() => 0);
  for (let i = 0; i < n && Date.now() < deadline; i++) {
    for (const [k, [, f]] of scenarios.entries()) {
      const s = performance.now();
      try {
        await f();
        lat[k]!.push(performance.now() - s);
      } catch {
        errors[k]!++;
      }
    }
  }
  const stats = scenarios.map(([scenario], k) => {
    const xs = lat[k]!.sort((a, b) => a - b);
    const pct = (p: number) => xs[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))] ?? NaN;
    return { scenario, n: xs.length, errors: errors[k]!, p50: pct(50), p99: pct(99), mean: xs.reduce((a, b) => a + b, 0) / xs.length };
  });
  const { rows } = await gw.db.pool.query('SELECT count(*)::int AS n FROM agents');
  return { scenarios: stats, addedP50AgentIdMs: stats[1]!.p50 - stats[0]!.p50, addedP50SearchMs: stats[2]!.p50 - stats[0]!.p50, agentsRegistered: rows[0].n };
}

export function printRouting(r: RoutingReport) {
  console.log(`\nrouting overhead, blocking SendMessage to an echo agent, c=1, interleaved (${r.agentsRegistered} agents registered), ms`);
  console.log(`${'scenario'.padEnd(36)}     n  errors    p50    p99   mean`);
  for (const s of r.scenarios) {
    console.log(`${s.scenario.padEnd(36)}  ${String(s.n).padStart(4)}  ${String(s.errors).padStart(6)}  ${s.p50.toFixed(1).padStart(5)}  ${s.p99.toFixed(1).padStart(5)}  ${s.mean.toFixed(1).padStart(5)}`);
  }
  console.log(`added p50: metadata.agentId ${r.addedP50AgentIdMs.toFixed(1)} ms, text search ${r.addedP50SearchMs.toFixed(1)} ms`);
}
