// The README's quick start runs as written: its terminal-3 commands (the CLI), its curl session and its
// @a2a-js/sdk module, against a Switchboard started as `npm start` starts it (embedded PostgreSQL and Temporal,
// a data folder of its own) and the example agent. Only the host, the ports and the data folder are replaced.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { eventually } from './helpers/harness';
import { type SwitchboardProcess, freePort, startSwitchboard } from './helpers/process';

const ROOT = path.join(__dirname, '..');
const README = readFileSync(path.join(ROOT, 'README.md'), 'utf8');

/** The fenced blocks of the README's "Quick start" section, in order, with their language. */
function quickStartBlocks(): { lang: string; code: string }[] {
  const start = README.indexOf('## Quick start');
  const end = README.indexOf('\n## ', start + 1);
  const section = README.slice(start, end === -1 ? undefined : end);
  return [...section.matchAll(/```(\w+)\n([\s\S]*?)```/g)].map((m) => ({ lang: m[1]!, code: m[2]! }));
}

let gw: SwitchboardProcess;
let dataDir: string;
let agentUrl: string;
let stopAgent: () => void;

before(async () => {
  dataDir = mkdtempSync(path.join(tmpdir(), 'sb-readme-'));
  const port = await freePort();
  const agent = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'examples', 'agent.ts')], {
    env: { PATH: process.env.PATH, EXAMPLE_AGENT_PORT: String(port) },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  stopAgent = () => agent.kill('SIGTERM');
  agentUrl = `http://127.0.0.1:${port}`;
  await eventually(() => fetch(`${agentUrl}/.well-known/agent-card.json`).then((r) => r.ok || undefined, () => undefined), 30_000, 'the example agent');
  gw = await startSwitchboard(
    {
      PORT: String(await freePort()),
      TEMPORAL_PORT: String(await freePort()),
      TEMPORAL_UI_PORT: String(await freePort()),
      TEMPORAL_CLI: process.env.TEMPORAL_CLI ?? '',
      SWITCHBOARD_DATA_DIR: dataDir,
      SWITCHBOARD_ALLOW_PRIVATE_URLS: 'true',
    },
    { readyTimeoutMs: 120_000 },
  );
});
after(async () => {
  stopAgent?.();
  await gw?.kill();
  rmSync(dataDir, { recursive: true, force: true });
});

/** A README block as it runs here: this gateway's URL, the example agent's, the data folder. */
function localized(code: string): string {
  return code.replaceAll('http://127.0.0.1:8080', gw.url).replaceAll('http://127.0.0.1:9999', agentUrl).replaceAll('.data/', `${dataDir}/`);
}

function bash(script: string, env: Record<string, string> = {}): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn('bash', ['-c', script], { cwd: ROOT, env: { ...process.env, SWITCHBOARD_URL: gw.url, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.once('exit', (code) => resolve({ code, out }));
  });
}

test('the quick start: the CLI session, then the curl session, then the SDK module', async () => {
  const [servers, curl, sdk] = quickStartBlocks();
  assert.equal(servers?.lang, 'sh');
  assert.equal(curl?.lang, 'sh');
  assert.equal(sdk?.lang, 'ts');
  // Terminal 3 (terminals 1 and 2 are the gateway and the agent started above), then the curl session in the same
  // shell, as the README goes on; `wait` collects the canceled stream left in the background.
  const terminal3 = servers.code.slice(servers.code.indexOf('# 3:'));
  const session = await bash(`set -euo pipefail\n${localized(terminal3)}\n${localized(curl.code)}\nwait || true\necho "AGENT=$AGENT"`);
  assert.equal(session.code, 0, session.out);
  assert.match(session.out, /Nice to meet you, Ada!/, 'resume: the task that asked for a name goes on, its greeting streamed');
  assert.match(session.out, /completed/i, 'resume: the same task goes on to its end');
  assert.match(session.out, /canceled/i, 'the slow task is canceled');
  assert.match(session.out, /"TASK_STATE_COMPLETED"/, 'curl: the streamed answer completes the task');
  assert.match(session.out, /"code":-32002/, 'curl: canceling a completed task is TaskNotCancelable');
  const agent = /AGENT=(\S+)/.exec(session.out)![1]!;

  // The SDK module, run as the README says (node --import tsx), from a folder inside the checkout (its node_modules).
  const dir = path.join(ROOT, 'test-output');
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `readme-${process.pid}.mts`);
  writeFileSync(file, localized(sdk.code));
  try {
    const key = readFileSync(path.join(dataDir, 'admin-key'), 'utf8').trim();
    const run = await bash(`node --import tsx ${file}`, { AGENT: agent, SWITCHBOARD_KEY: key });
    assert.equal(run.code, 0, run.out);
    assert.match(run.out, /TASK_STATE_INPUT_REQUIRED|input.required/i, run.out);
  } finally {
    rmSync(file, { force: true });
  }
});
