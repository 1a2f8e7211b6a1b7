/**
 * `npm run conformance`: the official A2A TCK (a2aproject/a2a-tck, in ../shared/conformance) run against the
 * @a2a-js/sdk system under test directly, then against the same agent through Switchboard, on every binding its
 * card declares (JSON-RPC, HTTP+JSON, gRPC). Prints both results and the tests that fail only through Switchboard,
 * and exits 1 when there is any: "any A2A client works through Switchboard as it does directly", measured.
 *
 * Switchboard runs as `npm start` runs it (a child process, an embedded Temporal dev server, a fresh database: a
 * fresh data directory, or a fresh database on DATABASE_URL's server when that is set). Environment:
 * CONFORMANCE_DIR (default: ../shared/conformance beside the checkout), TEMPORAL_CLI (else scripts/ensure-temporal.sh).
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Client } from 'pg';
import { freePort, startSwitchboard, type SwitchboardProcess } from '../helpers/process';
import { compare, parseTck, type TckResult } from './results';

const REPO_ROOT = resolve(__dirname, '../..');

function conformanceDir(): string {
  const candidates = [process.env.CONFORMANCE_DIR, resolve(REPO_ROOT, '../shared/conformance'), '/work/shared/conformance'].filter(Boolean) as string[];
  const found = candidates.find((d) => existsSync(join(d, 'run.sh')) && existsSync(join(d, 'sut.cjs')));
  if (!found) throw new Error(`the A2A TCK is not found (looked in ${candidates.join(', ')}): set CONFORMANCE_DIR to the folder holding run.sh and sut.cjs`);
  return found;
}

/** The SDK system under test, on a free port; resolves once it prints where it listens. */
async function startSut(dir: string): Promise<{ url: string; stop(): void }> {
  const port = await freePort();
  // Run from the checkout: its node_modules has @a2a-js/sdk, express and @grpc/grpc-js.
  const child = spawn(process.execPath, [join(dir, 'sut.cjs'), String(port)], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const url = await new Promise<string>((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`the system under test did not start:\n${out}`)), 30_000);
    const read = (d: Buffer) => {
      out += d.toString();
      const m = /SUT (\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        ok(m[1]!);
      }
    };
    child.stdout.on('data', read);
    child.stderr.on('data', read);
    child.once('exit', (code) => fail(new Error(`the system under test exited (${code}):\n${out}`)));
  });
  return { url, stop: () => void child.kill('SIGKILL') };
}

/** A database of its own on DATABASE_URL's server, dropped afterwards; undefined without DATABASE_URL (the embedded default). */
async function freshDatabase(): Promise<{ url: string; drop(): Promise<void> } | undefined> {
  const base = process.env.DATABASE_URL;
  if (!base) return undefined;
  const name = `sb_conformance_${randomBytes(4).toString('hex')}`;
  const admin = new URL(base);
  admin.pathname = '/postgres';
  const run = async (sql: string) => {
    const c = new Client({ connectionString: admin.toString() });
    await c.connect();
    try {
      await c.query(sql);
    } finally {
      await c.end();
    }
  };
  await run(`CREATE DATABASE ${name}`);
  const url = new URL(base);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => run(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}

async function startGateway(dataDir: string, databaseUrl: string | undefined, adminKey: string): Promise<SwitchboardProcess> {
  const temporalCli = process.env.TEMPORAL_CLI ?? execFileSync('bash', [join(REPO_ROOT, 'scripts/ensure-temporal.sh')], { encoding: 'utf8' }).trim().split('\n').pop()!;
  return startSwitchboard(
    {
      PORT: String(await freePort()),
      SWITCHBOARD_GRPC_PORT: String(await freePort()),
      TEMPORAL_PORT: String(await freePort()),
      TEMPORAL_UI_PORT: String(await freePort()),
      TEMPORAL_CLI: temporalCli,
      SWITCHBOARD_DATA_DIR: dataDir,
      SWITCHBOARD_ADMIN_KEY: adminKey,
      // The system under test listens on 127.0.0.1.
      SWITCHBOARD_ALLOW_PRIVATE_URLS: 'true',
      LOG_LEVEL: 'warn',
      ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
    },
    { readyTimeoutMs: 180_000 },
  );
}

async function call(url: string, key: string, body: unknown, method = 'POST'): Promise<any> {
  const res = await fetch(url, { method, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const json = await res.json();
  if (!res.ok) throw new Error(`${method} ${url}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

/** run.sh against one card host; its whole output is kept for the report. */
function runTck(dir: string, host: string, key?: string, tenant?: string): Promise<{ result: TckResult; output: string }> {
  return new Promise((ok) => {
    const child = spawn('bash', [join(dir, 'run.sh'), host, key ?? '', tenant ?? ''], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.once('exit', () => ok({ result: parseTck(output), output }));
  });
}

const line = (r: TckResult) => `${r.passed.size} passed, ${r.failed.size} failed, ${r.skipped} skipped`;

async function main(): Promise<number> {
  const dir = conformanceDir();
  const dataDir = mkdtempSync(join(tmpdir(), 'sb-conformance-'));
  const adminKey = `sb-admin-${randomBytes(24).toString('hex')}`;
  const db = await freshDatabase();
  const sut = await startSut(dir);
  let gw: SwitchboardProcess | undefined;
  try {
    console.log(`conformance: system under test at ${sut.url}`);
    const direct = await runTck(dir, sut.url);
    console.log(`conformance: directly: ${line(direct.result)}`);
    if (direct.result.passed.size === 0) {
      console.log(direct.output.slice(-4000));
      throw new Error('the TCK passed nothing against the agent directly: it did not run');
    }

    gw = await startGateway(dataDir, db?.url, adminKey);
    const agent = await call(`${gw.url}/agents`, adminKey, { url: sut.url, name: 'tck-sut' });
    const { key } = await call(`${gw.url}/tenants/default/keys`, adminKey, { role: 'client', name: 'conformance' });
    const host = `${gw.url}/agents/${agent.id}`;
    console.log(`conformance: through Switchboard at ${host} (gRPC tenant ${agent.id})`);
    const through = await runTck(dir, host, key, agent.id);
    console.log(`conformance: through Switchboard: ${line(through.result)}`);

    const { onlyThrough, both } = compare(direct.result, through.result);
    if (both.length) console.log(`conformance: failing directly too (the agent's own gaps, ${both.length}):\n${both.map((t) => `  ${t}`).join('\n')}`);
    console.log(`conformance: failing only through Switchboard: ${onlyThrough.length}`);
    for (const t of onlyThrough) console.log(`  ${t}${through.result.failed.get(t) ? ` - ${through.result.failed.get(t)}` : ''}`);
    if (process.env.CONFORMANCE_VERBOSE) console.log(through.output);
    return onlyThrough.length === 0 ? 0 : 1;
  } finally {
    sut.stop();
    await gw?.kill();
    await db?.drop().catch((err: Error) => console.error(`conformance: could not drop the database: ${err.message}`));
    rmSync(dataDir, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (err: Error) => {
    console.error(`conformance: ${err.stack ?? err.message}`);
    process.exit(2);
  },
);
