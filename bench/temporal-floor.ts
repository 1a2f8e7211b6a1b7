/**
 * `npx tsx bench/temporal-floor.ts`: what bare Temporal round-trips cost on this machine (the same dev-server
 * binary and settings as the bench, no A2A, no PostgreSQL), to tell Temporal's floor from Switchboard's own
 * overhead. `npm run bench` measures the gateway shape's floor in its own run too (bench/floor.ts).
 * Env: FLOOR_N (calls per shape, default 50), FLOOR_N32 (gateway-shape calls at c=32, default 200),
 * FLOOR_SERVER_ARGS (extra dev-server flags to try).
 */
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { startTemporal } from '../test/helpers/harness';
import { measureFloor, printFloor } from './floor';
import { REPO_ROOT } from '../src/core/paths';

process.env.TEMPORAL_CLI ||= execFileSync('bash', [path.join(REPO_ROOT, 'scripts/ensure-temporal.sh')], { encoding: 'utf8' }).trim().split('\n').pop();

async function main() {
  const env = await startTemporal((process.env.FLOOR_SERVER_ARGS ?? '').split(' ').filter(Boolean));
  try {
    printFloor(await measureFloor(env, { n: Number(process.env.FLOOR_N ?? 50), n32: Number(process.env.FLOOR_N32 ?? 200), warmup: 10 }));
  } finally {
    await env.teardown();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
