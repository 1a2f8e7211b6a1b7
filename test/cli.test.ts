// The `switchboard` CLI run as a real process (node bin/switchboard.js) against a running gateway: agents, a
// blocking send, a stream printed as it arrives, a paused task resumed, a failed task, the ledger, and the exit
// codes (0 done, 1 failed, 2 usage, 3 unreachable).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { AgentPool, chunkedText, startAskingAgent, startChunkyAgent, startEchoAgent } from './agents';
import { startFaultyAgent } from './agents/faulty';
import { type Gateway, startGateway } from './helpers/harness';

const BIN = path.join(__dirname, '..', 'bin', 'switchboard.js');
let gw: Gateway;
const agents = new AgentPool();

before(async () => {
  gw = await startGateway();
});
after(async () => {
  await gw?.close();
  await agents.closeAll();
});

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function cli(args: string[], role: 'admin' | 'operator' | 'client' = 'client', env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      { env: { PATH: process.env.PATH, SWITCHBOARD_URL: gw.url, SWITCHBOARD_KEY: gw.keys[role], ...env }, timeout: 60_000 },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

async function addAgent(url: string): Promise<string> {
  const r = await cli(['--json', 'agents', 'add', url], 'operator');
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout).id;
}

describe('switchboard CLI', () => {
  test('agents add, ls, show and search', async () => {
    const echo = await agents.add(startEchoAgent());
    const id = await addAgent(echo.url);
    const ls = await cli(['agents', 'ls']);
    assert.equal(ls.code, 0, ls.stderr);
    assert.match(ls.stdout, new RegExp(`^${id}\\s+Echo`, 'm'));
    const shown = await cli(['--json', 'agents', 'show', id]);
    assert.equal(JSON.parse(shown.stdout).id, id);
    const found = await cli(['--json', 'agents', 'search', 'echoes']);
    assert.ok(JSON.parse(found.stdout).agents.some((a: { id: string }) => a.id === id));
  });

  test('send waits for the end of the turn and prints the result; the state changes go to stderr', async () => {
    const id = await addAgent((await agents.add(startEchoAgent())).url);
    const r = await cli(['send', id, 'hello', 'there']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), 'echo: hello there');
    assert.match(r.stderr, /: completed/);
  });

  test('stream prints the agent\'s chunks as they arrive, the whole text once', async () => {
    const id = await addAgent((await agents.add(startChunkyAgent({ chunks: 40 }))).url);
    const r = await cli(['stream', id, 'go']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), chunkedText(40).trim());
  });

  test('a task that asks for input: send says how to answer, resume continues the same task', async () => {
    const id = await addAgent((await agents.add(startAskingAgent())).url);
    const first = await cli(['send', id, 'hi']);
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stderr, /input-required/);
    const taskId = /switchboard resume (\S+)/.exec(first.stderr)?.[1];
    assert.ok(taskId, first.stderr);
    const second = await cli(['resume', taskId, 'Ada']);
    assert.equal(second.code, 0, second.stderr);
    assert.equal(second.stdout.trim(), 'Hello, Ada!');
    const got = await cli(['--json', 'tasks', 'get', taskId]);
    assert.equal(JSON.parse(got.stdout).status.state, 'TASK_STATE_COMPLETED');
    const listed = await cli(['tasks', 'ls']);
    assert.match(listed.stdout, new RegExp(`^${taskId}\\s+completed`, 'm'));
  });

  test('a failed task exits 1 with the reason', async () => {
    const id = await addAgent((await agents.add(startFaultyAgent({ mode: 'invalid-json', times: 10 }))).url);
    const r = await cli(['send', id, 'hi']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /failed: The agent could not complete the task/);
  });

  test('ledger reconcile, and what a role may not do is refused with exit 1', async () => {
    const ok = await cli(['ledger', 'reconcile'], 'operator');
    assert.equal(ok.code, 0, ok.stderr);
    assert.match(ok.stdout, /ledger ok/);
    const refused = await cli(['keys', 'create', '--role', 'client'], 'client');
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /HTTP 403/);
    const made = await cli(['--json', 'keys', 'create', '--role', 'client', '--name', 'from the cli'], 'admin');
    assert.equal(made.code, 0, made.stderr);
    assert.match(JSON.parse(made.stdout).key, /^sb_/);
  });

  test('exit codes: 2 for usage, 3 when Switchboard cannot be reached', async () => {
    assert.equal((await cli(['send', 'only-an-id'])).code, 2);
    assert.equal((await cli(['no-such-command'])).code, 2);
    assert.equal((await cli(['--help'])).code, 0);
    const down = await cli(['agents', 'ls'], 'client', { SWITCHBOARD_URL: 'http://127.0.0.1:9' });
    assert.equal(down.code, 3);
    assert.match(down.stderr, /cannot reach Switchboard at http:\/\/127\.0\.0\.1:9/);
  });
});
