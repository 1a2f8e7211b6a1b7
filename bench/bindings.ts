/**
 * Part of `npm run bench` (BENCH_ONLY=bindings): blocking SendMessage through Switchboard for each pair of client
 * binding (how the client reaches the gateway: JSON-RPC, HTTP+JSON, gRPC) and agent binding (how Switchboard calls
 * the agent), at concurrency 1 and 8, with the SDK echo agent serving only that binding. Reported against the
 * JSON-RPC → JSON-RPC pair measured in the same run: the added p50 and the throughput ratio.
 *
 * Env: BENCH_BINDINGS_N1 (calls per pair at c=1, default 100), BENCH_BINDINGS_N8 (at c=8, default 200).
 */
import { sendBlocking, timeCalls } from './measure';
import type { Gateway } from '../test/helpers/harness';
import type { TestAgent } from '../test/agents';

const int = (name: string, def: number) => (process.env[name] ? Number.parseInt(process.env[name]!, 10) : def);
const N1 = int('BENCH_BINDINGS_N1', 100);
const N8 = int('BENCH_BINDINGS_N8', 200);
const WARMUP = 10;
const BINDINGS = ['JSONRPC', 'HTTP+JSON', 'GRPC'] as const;
type Binding = (typeof BINDINGS)[number];

export interface BindingResult {
  client: Binding;
  agent: Binding;
  concurrency: number;
  n: number;
  errors: number;
  p50: number;
  p99: number;
  tps: number;
}
export type BindingsReport = BindingResult[];

export async function benchBindings(gw: Gateway, deadline: number): Promise<BindingsReport> {
  const { register } = await import('../test/helpers/harness');
  const { startEchoAgent } = await import('../test/agents');
  const { bindingFactory } = await import('../test/helpers/binding-scenarios');
  const agents: TestAgent[] = [];
  const out: BindingsReport = [];
  try {
    const idOf = {} as Record<Binding, string>;
    for (const agent of BINDINGS) {
      const echo = await startEchoAgent({ bindings: [agent] });
      agents.push(echo);
      idOf[agent] = (await register(gw, echo.url)).id;
    }
    for (const concurrency of [1, 8]) {
      for (const client of BINDINGS) {
        for (const agent of BINDINGS) {
          const c = await bindingFactory(client, gw.keys.client).createFromUrl(`${gw.url}/agents/${idOf[agent]}/`);
          const r = await timeCalls(() => sendBlocking(c), { concurrency, n: concurrency === 1 ? N1 : N8, warmup: WARMUP, deadline });
          console.error(`  bindings ${client} → ${agent} c=${concurrency}: ${r.n} ok, ${r.errors} errors`);
          out.push({ client, agent, concurrency, ...r });
        }
      }
    }
  } finally {
    await Promise.all(agents.map((a) => a.close()));
  }
  return out;
}

export function printBindings(results: BindingsReport): void {
  console.log('\nbindings: blocking SendMessage per client binding → agent binding, against JSON-RPC → JSON-RPC in the same run');
  console.log(`${'client → agent'.padEnd(24)}  c   n  errors  p50 ms  p99 ms  added p50 ms  tasks/s  tps ratio`);
  for (const r of results) {
    const base = results.find((b) => b.client === 'JSONRPC' && b.agent === 'JSONRPC' && b.concurrency === r.concurrency)!;
    console.log(
      `${`${r.client} → ${r.agent}`.padEnd(24)}  ${String(r.concurrency).padStart(1)}  ${String(r.n).padStart(3)}  ${String(r.errors).padStart(6)}  ` +
        `${r.p50.toFixed(1).padStart(6)}  ${r.p99.toFixed(1).padStart(6)}  ${(r.p50 - base.p50).toFixed(1).padStart(12)}  ${r.tps.toFixed(1).padStart(7)}  ${(r.tps / base.tps).toFixed(2).padStart(9)}`,
    );
  }
}
