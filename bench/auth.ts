/**
 * What authentication adds to a request (issue 14): the same cheap route, `GET /agents/:id/.well-known/agent-card.json`
 * (public, so it can be called with and without a key; its handler does not depend on the caller), called
 * anonymously and with a client key. With a key the request also resolves the key (a cache hit after the first
 * call), its tenant and quotas, and passes the tenant and key rate limiters; anonymously it passes only the
 * per-address limiter. The calls are interleaved at c=1 and run side by side at c=32, in the same process.
 * A second figure: a cache miss (a new key's first call, one indexed query).
 */
import { performance } from 'node:perf_hooks';
import type { Gateway } from '../test/helpers/harness';

const int = (name: string, d: number) => Number(process.env[name] ?? d);

export interface AuthScenario {
  scenario: string;
  n: number;
  p50: number;
  p99: number;
  perSecond?: number;
}

export interface AuthReport {
  c1: AuthScenario[];
  c32: AuthScenario[];
  addedP50Ms: number;
  throughputRatio: number;
  firstCallP50Ms: number;
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
};

export async function benchAuth(gw: Gateway, agentUrl: string, deadline: number): Promise<AuthReport> {
  const { register } = await import('../test/helpers/harness');
  const n = int('BENCH_AUTH_N', 2000);
  const { id } = await register(gw, agentUrl, { name: 'Echo auth bench' });
  const url = `${gw.url}/agents/${id}/.well-known/agent-card.json`;
  const anonymous = async () => {
    const res = await fetch(url);
    if (res.status !== 200) throw new Error(`anonymous: ${res.status}`);
    await res.arrayBuffer();
  };
  const keyed = (key: string) => async () => {
    const res = await fetch(url, { headers: { authorization: `Bearer ${key}` } });
    if (res.status !== 200) throw new Error(`with key: ${res.status}`);
    await res.arrayBuffer();
  };
  const withKey = keyed(gw.keys.client);
  for (let i = 0; i < 200; i++) {
    await anonymous();
    await withKey();
  }
  const lat = [[], []] as number[][];
  for (let i = 0; i < n && Date.now() < deadline; i++) {
    for (const [k, f] of [anonymous, withKey].entries()) {
      const s = performance.now();
      await f();
      lat[k]!.push(performance.now() - s);
    }
  }
  const c1 = ['anonymous', 'client key'].map((scenario, k) => ({ scenario, n: lat[k]!.length, p50: pct(lat[k]!, 50), p99: pct(lat[k]!, 99) }));

  // c=32: each side for a fixed count, alternating rounds so drift hits both alike.
  const c32Lat = [[], []] as number[][];
  const c32Time = [0, 0];
  const rounds = 4;
  for (let r = 0; r < rounds && Date.now() < deadline; r++) {
    for (const [k, f] of [anonymous, withKey].entries()) {
      const perRound = Math.floor(n / rounds);
      let next = 0;
      const t0 = performance.now();
      await Promise.all(
        Array.from({ length: 32 }, async () => {
          while (next++ < perRound) {
            const s = performance.now();
            await f();
            c32Lat[k]!.push(performance.now() - s);
          }
        }),
      );
      c32Time[k]! += performance.now() - t0;
    }
  }
  const c32 = ['anonymous', 'client key'].map((scenario, k) => ({
    scenario,
    n: c32Lat[k]!.length,
    p50: pct(c32Lat[k]!, 50),
    p99: pct(c32Lat[k]!, 99),
    perSecond: (c32Lat[k]!.length / c32Time[k]!) * 1000,
  }));

  // A key's first call: its lookup misses the cache (one indexed query on the key hash).
  const { KeyStore } = await import('../src/core/auth/keys');
  const store = new KeyStore(gw.db.pool);
  const first: number[] = [];
  for (let i = 0; i < 50; i++) {
    const { key } = await store.create({ tenant: 'default', role: 'client', name: `bench ${i}` });
    const s = performance.now();
    await keyed(key)();
    first.push(performance.now() - s);
  }
  return {
    c1,
    c32,
    addedP50Ms: c1[1]!.p50 - c1[0]!.p50,
    throughputRatio: c32[1]!.perSecond! / c32[0]!.perSecond!,
    firstCallP50Ms: pct(first, 50),
  };
}

export function printAuth(r: AuthReport) {
  console.log('\nauthentication cost: GET of a gateway agent card, anonymous vs. with a client key, ms');
  console.log(`${'scenario'.padEnd(16)}  c     n     p50     p99   req/s`);
  for (const [c, rows] of [[1, r.c1], [32, r.c32]] as const) {
    for (const s of rows) {
      console.log(`${s.scenario.padEnd(16)} ${String(c).padStart(2)} ${String(s.n).padStart(5)} ${s.p50.toFixed(2).padStart(7)} ${s.p99.toFixed(2).padStart(7)} ${s.perSecond ? s.perSecond.toFixed(0).padStart(7) : '      -'}`);
    }
  }
  console.log(`added p50 at c=1: ${r.addedP50Ms.toFixed(2)} ms (target < 1 ms); throughput ratio at c=32: ${r.throughputRatio.toFixed(3)} (target ≥ 0.95)`);
  console.log(`a key's first call (cache miss) p50: ${r.firstCallP50Ms.toFixed(2)} ms`);
}
