/**
 * `npm run conformance`: the official A2A TCKs (a2aproject/a2a-tck, in ../shared/conformance) run against their
 * @a2a-js/sdk systems under test directly, then against the same agents through Switchboard: the 1.0 suite on every
 * binding its card declares (JSON-RPC, HTTP+JSON, gRPC), and the 0.3 suite (v03/, its mandatory tests, over
 * JSON-RPC) against an @a2a-js/sdk 0.3.13 agent, as 0.3 clients, which name no A2A-Version, reach it. Prints each
 * suite's results and the tests that fail only through Switchboard, and exits 1 when there is any: "any A2A client
 * works through Switchboard as it does directly", measured.
 *
 * The 1.0 suite runs through Switchboard as it is run directly, unchanged: it reads the card with no A2A-Version,
 * and its system under test speaks 1.0 only, so the gateway card is the 1.0 card the agent itself answers such a
 * reader with (src/api/routes/card-reply.ts agentCardDialect). What the 0.3 suite cannot say for itself is added by a
 * proxy (./proxy.ts): it has no auth option and reads the card at the URL's root (the proxy adds the key and serves
 * the agent's gateway card there; the card, read with no A2A-Version, is the 0.3 card its 0.3 agent answers).
 *
 * Switchboard runs as `npm start` runs it (a child process, an embedded Temporal dev server, a fresh database: a
 * fresh data directory, or a fresh database on DATABASE_URL's server when that is set). Environment:
 * CONFORMANCE_DIR (default: ../shared/conformance beside the checkout), TEMPORAL_CLI (else scripts/ensure-temporal.sh),
 * CONFORMANCE_VERBOSE (print the suites' whole output through Switchboard).
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Client } from 'pg';
import { freePort, startSwitchboard, type SwitchboardProcess } from '../helpers/process';
import { startProxy } from './proxy';
import { compare, merge, parseTck, type TckResult } from './results';

const REPO_ROOT = resolve(__dirname, '../..');

function conformanceDir(): string {
  const candidates = [process.env.CONFORMANCE_DIR, resolve(REPO_ROOT, '../shared/conformance'), '/work/shared/conformance'].filter(Boolean) as string[];
  const found = candidates.find((d) => existsSync(join(d, 'run.sh')) && existsSync(join(d, 'sut.cjs')) && existsSync(join(d, 'v03/run.sh')));
  if (!found) throw new Error(`the A2A TCKs are not found (looked in ${candidates.join(', ')}): set CONFORMANCE_DIR to the folder holding run.sh, sut.cjs and v03/`);
  return found;
}

/**
 * Where the 0.3 system under test finds @a2a-js/sdk 0.3.13 (this checkout's a2a-sdk-03) and express: a NODE_PATH
 * folder, so nothing is installed into the suite's folder.
 */
function sdk03Modules(scratch: string): string {
  const modules = join(scratch, 'node_modules');
  mkdirSync(join(modules, '@a2a-js'), { recursive: true });
  symlinkSync(join(REPO_ROOT, 'node_modules/a2a-sdk-03'), join(modules, '@a2a-js/sdk'), 'dir');
  symlinkSync(join(REPO_ROOT, 'node_modules/express'), join(modules, 'express'), 'dir');
  return modules;
}

/** A system under test (`script [port]`) on a free port; resolves once it prints where it listens. */
async function startSut(script: string, env: Record<string, string> = {}): Promise<{ url: string; stop(): void }> {
  const port = await freePort();
  // Run from the checkout: its node_modules has @a2a-js/sdk, express and @grpc/grpc-js.
  const child = spawn(process.execPath, [script, String(port)], { cwd: REPO_ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
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

/** A suite's run.sh with `args`; its whole output is kept for the report. */
function runTck(runSh: string, args: string[]): Promise<{ result: TckResult; output: string }> {
  return new Promise((ok) => {
    const child = spawn('bash', [runSh, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.once('exit', () => ok({ result: parseTck(output), output }));
  });
}

const line = (r: TckResult) => `${r.passed.size} passed, ${r.failed.size} failed, ${r.skipped} skipped`;

/** One suite's run directly, checked to have run at all. */
async function direct(suite: string, runSh: string, args: string[]): Promise<TckResult> {
  const started = Date.now();
  const { result, output } = await runTck(runSh, args);
  console.log(`conformance: ${suite} directly: ${line(result)} (${Math.round((Date.now() - started) / 1000)} s)`);
  if (result.passed.size === 0) {
    console.log(output.slice(-4000));
    throw new Error(`the ${suite} TCK passed nothing against the agent directly: it did not run`);
  }
  return result;
}

/**
 * One suite's run through Switchboard (one or more runs of disjoint parts of it, taken together), compared with its
 * run directly; the number of tests failing only through Switchboard.
 */
async function through(suite: string, before: TckResult, runSh: string, runs: string[][]): Promise<number> {
  const started = Date.now();
  const outputs: string[] = [];
  let result: TckResult = { passed: new Set(), failed: new Map(), skipped: 0 };
  for (const args of runs) {
    const run = await runTck(runSh, args);
    result = merge(result, run.result);
    outputs.push(run.output);
  }
  console.log(`conformance: ${suite} through Switchboard: ${line(result)} (${Math.round((Date.now() - started) / 1000)} s)`);
  if (result.passed.size === 0) {
    console.log(outputs.map((o) => o.slice(-4000)).join('\n'));
    throw new Error(`the ${suite} TCK passed nothing through Switchboard: it did not run`);
  }
  const { onlyThrough, both } = compare(before, result);
  if (both.length) console.log(`conformance: ${suite}, failing directly too (the agent's own gaps, ${both.length}):\n${both.map((t) => `  ${t}`).join('\n')}`);
  console.log(`conformance: ${suite}, failing only through Switchboard: ${onlyThrough.length}`);
  for (const t of onlyThrough) console.log(`  ${t}${result.failed.get(t) ? ` - ${result.failed.get(t)}` : ''}`);
  if (process.env.CONFORMANCE_VERBOSE) console.log(outputs.join('\n'));
  return onlyThrough.length;
}

/**
 * The 0.3 test that sends a request with no credentials to see it refused: through the proxy that adds the key it
 * would measure the proxy, so it runs through one that adds none (the card is public).
 */
const WITHOUT_KEY_03 = 'test_authentication_required_when_declared';

/**
 * The TCKs' Python packages (both run.sh lists), installed once before the two suites run side by side: each run.sh
 * installs what it misses with apt-get, and two apt-gets at once fail on apt's lock (the suite then runs nothing).
 */
const TCK_PYTHON_PACKAGES = [
  'python3-pytest', 'python3-pytest-asyncio', 'python3-httpx', 'python3-jsonschema', 'python3-grpcio', 'python3-protobuf', 'python3-requests',
  'python3-yaml', 'python3-dotenv', 'python3-deepdiff', 'python3-packaging', 'python3-openssl', 'python3-responses',
];
const TCK_PYTHON_MODULES = 'pytest, pytest_asyncio, httpx, grpc, jsonschema, google.protobuf, requests, yaml, dotenv, deepdiff, OpenSSL';

function ensureTckPython(): void {
  const present = () => {
    try {
      execFileSync('/usr/bin/python3', ['-c', `import ${TCK_PYTHON_MODULES}`], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  };
  if (present()) return;
  console.log(`conformance: installing the TCKs' Python packages (${TCK_PYTHON_PACKAGES.length}, apt-get)`);
  const install = () => execFileSync('apt-get', ['install', '-y', '--no-install-recommends', ...TCK_PYTHON_PACKAGES], { stdio: 'ignore' });
  try {
    install();
  } catch {
    execFileSync('apt-get', ['update'], { stdio: 'ignore' });
    install();
  }
  if (!present()) throw new Error(`the TCKs' Python modules are still missing after apt-get (${TCK_PYTHON_MODULES})`);
}

async function main(): Promise<number> {
  const dir = conformanceDir();
  ensureTckPython();
  const v1Sh = join(dir, 'run.sh');
  const v03Sh = join(dir, 'v03/run.sh');
  const scratch = mkdtempSync(join(tmpdir(), 'sb-conformance-'));
  const dataDir = join(scratch, 'data');
  const adminKey = `sb-admin-${randomBytes(24).toString('hex')}`;
  const db = await freshDatabase();
  const stops: (() => unknown)[] = [];
  let gw: SwitchboardProcess | undefined;
  try {
    const sut = await startSut(join(dir, 'sut.cjs'));
    stops.push(() => sut.stop());
    const sut03 = await startSut(join(dir, 'v03/sut/tck03-sut.cjs'), { NODE_PATH: sdk03Modules(scratch) });
    stops.push(() => sut03.stop());
    console.log(`conformance: systems under test at ${sut.url} (1.0) and ${sut03.url} (0.3)`);
    // The two suites run side by side, each against its own agent (directly, then through Switchboard): neither
    // touches the other's tasks, and each waits mostly on its own calls. Switchboard starts meanwhile.
    const starting = (async () => {
      gw = await startGateway(dataDir, db?.url, adminKey);
      const agent = (await call(`${gw.url}/agents`, adminKey, { url: sut.url, name: 'tck-sut' })) as { id: string };
      const agent03 = (await call(`${gw.url}/agents`, adminKey, { url: sut03.url, name: 'tck03-sut' })) as { id: string };
      const { key } = (await call(`${gw.url}/tenants/default/keys`, adminKey, { role: 'client', name: 'conformance' })) as { key: string };
      return { url: gw.url, agent, agent03, key };
    })();
    starting.catch(() => undefined); // awaited by both suites below

    // The 1.0 TCK as it runs directly: its card read with no A2A-Version, every call straight to the gateway.
    const suite10 = async () => {
      const before = await direct('1.0', v1Sh, [sut.url]);
      const { url, agent, key } = await starting;
      console.log(`conformance: 1.0 through Switchboard at ${url}/agents/${agent.id} (gRPC tenant ${agent.id})`);
      return through('1.0', before, v1Sh, [[`${url}/agents/${agent.id}`, key, agent.id]]);
    };

    // The 0.3 TCK, as a 0.3 client: no A2A-Version anywhere; the proxy adds the key and serves the card at its root.
    const suite03 = async () => {
      const before = await direct('0.3', v03Sh, [`${sut03.url}/`]);
      const { url, agent03, key } = await starting;
      const cardPath = `/agents/${agent03.id}/.well-known/agent-card.json`;
      const auth03 = await startProxy(url, { key, cardPath, host: 'client' });
      const keyless03 = await startProxy(url, { cardPath, host: 'client' });
      stops.push(() => auth03.close(), () => keyless03.close());
      console.log(`conformance: 0.3 through Switchboard at ${url}/agents/${agent03.id}/a2a (no A2A-Version; the key added by a proxy)`);
      return through('0.3', before, v03Sh, [
        [`${auth03.url}/agents/${agent03.id}/a2a`, '--', '-k', `not ${WITHOUT_KEY_03}`],
        [`${keyless03.url}/agents/${agent03.id}/a2a`, '--', '-k', WITHOUT_KEY_03],
      ]);
    };
    const [only10, only03] = await Promise.all([suite10(), suite03()]);
    return only10 + only03 === 0 ? 0 : 1;
  } finally {
    for (const stop of stops.reverse()) await stop();
    await gw?.kill();
    await db?.drop().catch((err: Error) => console.error(`conformance: could not drop the database: ${err.message}`));
    rmSync(scratch, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (err: Error) => {
    console.error(`conformance: ${err.stack ?? err.message}`);
    process.exit(2);
  },
);
