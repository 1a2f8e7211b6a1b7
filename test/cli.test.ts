// The `switchboard` CLI run as a real process (node bin/switchboard.js) against a running gateway: agents, a
// blocking send, a stream printed as it arrives, a paused task resumed, a failed task, the ledger, every refusal
// with the server's reason, `tasks ls` past one page, `tasks watch`, the admin nouns (tenants, keys), and the exit
// codes (0 done or read, 1 failed or refused, 2 usage, 3 unreachable; JSON errors under --json).
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { AgentPool, chunkedText, startAskingAgent, startChunkyAgent, startEchoAgent, startSlowAgent } from './agents';
import { startFaultyAgent } from './agents/faulty';
import { randomUUID } from 'node:crypto';
import { type Gateway, rpc, startGateway } from './helpers/harness';
import YAML from 'yaml';
import { refusalOf } from '../src/cli/api';

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

function cli(args: string[], role: 'admin' | 'operator' | 'client' | 'none' = 'client', env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      { env: { PATH: process.env.PATH, SWITCHBOARD_URL: gw.url, ...(role === 'none' ? {} : { SWITCHBOARD_KEY: gw.keys[role] }), ...env }, timeout: 60_000 },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

async function addAgent(url: string): Promise<string> {
  const r = await cli(['--json', 'agents', 'add', url], 'operator');
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout).id;
}

/** Starts a task at the agent without waiting for it (returnImmediately); its id. */
async function startTask(agentId: string, text: string): Promise<string> {
  const params = { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] }, configuration: { returnImmediately: true } };
  const sent = await rpc(`${gw.url}/agents/${agentId}/a2a`, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params });
  const taskId = sent.json?.result?.task?.id as string;
  assert.ok(taskId, sent.text);
  return taskId;
}

describe('switchboard CLI', () => {
  test('agents add, ls, show, search and refresh; --tenant for an admin', async () => {
    const echo = await agents.add(startEchoAgent());
    const id = await addAgent(echo.url);
    const ls = await cli(['agents', 'ls']);
    assert.equal(ls.code, 0, ls.stderr);
    assert.match(ls.stdout, /^ID +NAME +STATUS +PRICE\n/, 'a table under a header');
    assert.match(ls.stdout, new RegExp(`^${id}\\s+Echo`, 'm'));
    const refreshed = await cli(['agents', 'refresh', id], 'operator');
    assert.equal(refreshed.code, 0, refreshed.stderr);
    assert.match(refreshed.stdout, new RegExp(`^${id}  Echo`));
    // An admin acts in the tenant it names: the default tenant's agent is there, another tenant has none.
    assert.match((await cli(['agents', 'ls', '--tenant', 'default'], 'admin')).stdout, new RegExp(`^${id}\\s`, 'm'));
    assert.equal((await cli(['tenants', 'add', 'cli-empty-tenant'], 'admin')).code, 0);
    const elsewhere = await cli(['--json', 'agents', 'ls', '--tenant', 'cli-empty-tenant'], 'admin');
    assert.equal(elsewhere.code, 0, elsewhere.stderr);
    assert.deepEqual(JSON.parse(elsewhere.stdout).agents, [], "the other tenant's list, not the default's");
    // -o json and -o yaml print the API's answer: the same data either way.
    const asYaml = YAML.parse((await cli(['-o', 'yaml', 'agents', 'ls'])).stdout) as { agents: { id: string }[] };
    assert.deepEqual(asYaml, JSON.parse((await cli(['-o', 'json', 'agents', 'ls'])).stdout));
    assert.ok(asYaml.agents.some((a) => a.id === id));
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

  test('stream takes the rest of the line as the text', async () => {
    const id = await addAgent((await agents.add(startEchoAgent())).url);
    const r = await cli(['stream', id, 'write', 'me', 'a', 'poem']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), 'echo: write me a poem');
  });

  test('stream prints the agent\'s chunks as they arrive, the whole text once', async () => {
    const id = await addAgent((await agents.add(startChunkyAgent({ chunks: 40 }))).url);
    const r = await cli(['stream', id, 'go']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), chunkedText(40).trim());
  });

  test('stream across an agent stream that broke off (re-attached): the whole text once, and the final status last', async () => {
    const id = await addAgent((await agents.add(startChunkyAgent({ chunks: 6, delayMs: 200, dropFirstAttemptAfter: 3 }))).url);
    const r = await cli(['stream', id, 'go']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim().split('\n').at(-1), chunkedText(6).trim(), r.stdout);
    assert.match(r.stderr.trim().split('\n').at(-1)!, /^task \S+ completed/, 'the last line is the final status');
  });

  test('a task that asks for input: send says how to answer, resume continues the same task', async () => {
    const id = await addAgent((await agents.add(startAskingAgent())).url);
    const first = await cli(['send', id, 'hi']);
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stderr, /input-required/);
    const taskId = /switchboard resume (\S+)/.exec(first.stderr)?.[1];
    assert.ok(taskId, first.stderr);
    // The answer is the rest of the line, as send's text is.
    const second = await cli(['resume', taskId, 'Ada', 'Lovelace']);
    assert.equal(second.code, 0, second.stderr);
    assert.equal(second.stdout.trim(), 'Hello, Ada Lovelace!');
    const got = await cli(['--json', 'tasks', 'get', taskId]);
    assert.equal(JSON.parse(got.stdout).status.state, 'TASK_STATE_COMPLETED');
    const listed = await cli(['tasks', 'ls']);
    assert.match(listed.stdout, new RegExp(`^${taskId}\\s+completed`, 'm'));
  });

  test('send with no worker polling says so within seconds, and that the message is kept', async () => {
    const id = await addAgent((await agents.add(startEchoAgent())).url);
    // A second front door on a task queue no worker polls (the same database and agents).
    const idle = await startGateway({ db: gw.db, temporal: { env: gw.env, taskQueue: `${gw.taskQueue}-idle` }, worker: false });
    const child = spawn(process.execPath, [BIN, 'send', id, 'anyone there?'], { env: { PATH: process.env.PATH, SWITCHBOARD_URL: idle.url, SWITCHBOARD_KEY: gw.keys.client } });
    try {
      let stderr = '';
      const said = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no note within 30 s; stderr: ${stderr}`)), 30_000);
        child.stderr.on('data', (chunk: Buffer) => {
          stderr += String(chunk);
          if (/no answer after/.test(stderr)) {
            clearTimeout(timer);
            resolve(stderr);
          }
        });
      });
      assert.match(said, /no answer after 5 s: if no worker polls the task queue, the message is kept/);
    } finally {
      child.kill();
      await idle.close();
    }
  });

  test('a failed task exits 1 with the reason', async () => {
    const id = await addAgent((await agents.add(startFaultyAgent({ mode: 'invalid-json', times: 10 }))).url);
    const r = await cli(['send', id, 'hi']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /failed: The agent could not complete the task/);
  });

  test('reading a task that did not complete (tasks get, tasks watch) exits 0: the read succeeded', async () => {
    const id = await addAgent((await agents.add(startSlowAgent({ ms: 60_000 }))).url);
    const taskId = await startTask(id, 'never mind');
    const canceled = await cli(['tasks', 'cancel', taskId]);
    assert.equal(canceled.code, 0, canceled.stderr);
    const got = await cli(['tasks', 'get', taskId]);
    assert.equal(got.code, 0, got.stderr);
    assert.match(got.stdout, new RegExp(`^task ${taskId} canceled`, 'm'));
    // Already over: its final state, exit 0.
    const watched = await cli(['tasks', 'watch', taskId]);
    assert.equal(watched.code, 0, watched.stderr);
    assert.match(watched.stdout, new RegExp(`^task ${taskId} canceled`, 'm'));
  });

  test('tasks watch follows a running task, prints its events and exits 0 at completed', async () => {
    const id = await addAgent((await agents.add(startSlowAgent({ ms: 1500 }))).url);
    const taskId = await startTask(id, 'slowly');
    const started = Date.now();
    const r = await cli(['tasks', 'watch', taskId]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^working$/m, r.stdout);
    assert.match(r.stdout, /^completed/m, r.stdout);
    assert.match(r.stdout, new RegExp(`^task ${taskId} completed\n(.*\n)*done: slowly`, 'm'), r.stdout);
    assert.ok(Date.now() - started < 30_000);
    // --json: one event a line, then the task.
    const again = await cli(['--json', 'tasks', 'watch', taskId]);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(JSON.parse(again.stdout.trim().split('\n').at(-1)!).task.status.state, 'TASK_STATE_COMPLETED');
  });

  test('tasks watch of a task that waits for input exits 0 and says how to answer', async () => {
    const id = await addAgent((await agents.add(startAskingAgent())).url);
    const taskId = await startTask(id, 'hi');
    const r = await cli(['tasks', 'watch', taskId]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`^task ${taskId} input-required`, 'm'), r.stdout);
    assert.match(r.stderr, new RegExp(`waits for input; answer with: switchboard resume ${taskId} <text>`), r.stderr);
  });

  test('tasks watch of an unknown task exits 1 with the error (as JSON under --json)', async () => {
    const r = await cli(['tasks', 'watch', 'no-such-task']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /^GetTask: .*no-such-task.* \(-32001\)$/m);
    const j = await cli(['--json', 'tasks', 'watch', 'no-such-task']);
    assert.equal(j.code, 1);
    const error = JSON.parse(j.stderr.trim()).error;
    assert.equal(error.code, 'refused');
    assert.match(error.message, /no-such-task/);
  });

  test('tenants ls, add and show; keys ls, add and revoke round-trip (admin); tables with a header', async () => {
    const tenant = `cli-${Date.now()}`;
    const added = await cli(['tenants', 'add', tenant, '--name', 'CLI team'], 'admin');
    assert.equal(added.code, 0, added.stderr);
    const ls = await cli(['tenants', 'ls'], 'admin');
    assert.equal(ls.code, 0, ls.stderr);
    assert.match(ls.stdout, /^ID\s+NAME\s+RETENTION\s+CREATED$/m);
    assert.match(ls.stdout, new RegExp(`^${tenant}\\s+CLI team\\s`, 'm'));
    assert.ok(JSON.parse((await cli(['--json', 'tenants', 'ls'], 'admin')).stdout).tenants.some((t: { id: string }) => t.id === tenant));
    const shown = await cli(['--json', 'tenants', 'show', tenant], 'admin');
    assert.equal(JSON.parse(shown.stdout).name, 'CLI team');

    const made = await cli(['--json', 'keys', 'add', '--tenant', tenant, '--role', 'client', '--name', 'ci'], 'admin');
    assert.equal(made.code, 0, made.stderr);
    const { id: keyId, key } = JSON.parse(made.stdout);
    assert.match(key, /^sb_/);
    const keys = await cli(['keys', 'ls', '--tenant', tenant], 'admin');
    assert.equal(keys.code, 0, keys.stderr);
    assert.match(keys.stdout, /^ID\s+ROLE\s+NAME\s+AGENT\s+STATE\s+CREATED\s+LAST USED$/m);
    assert.match(keys.stdout, new RegExp(`^${keyId}\\s+client\\s+ci\\s+-\\s+active\\s`, 'm'));
    assert.doesNotMatch(keys.stdout, new RegExp(key));
    // The new key works, then, revoked, does not.
    assert.equal((await cli(['tasks', 'ls'], 'none', { SWITCHBOARD_KEY: key })).code, 0);
    const revoked = await cli(['keys', 'revoke', keyId, '--tenant', tenant], 'admin');
    assert.equal(revoked.code, 0, revoked.stderr);
    assert.match(revoked.stdout, new RegExp(`^revoked ${keyId}$`, 'm'));
    const listed = JSON.parse((await cli(['--json', 'keys', 'ls', '--tenant', tenant], 'admin')).stdout).keys;
    assert.ok(listed.find((k: { id: string }) => k.id === keyId).revokedAt);
    const refused = await cli(['tasks', 'ls'], 'none', { SWITCHBOARD_KEY: key });
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /HTTP 401/);
    // A key the tenant does not have: the server's 404, exit 1. The default tenant's keys list too.
    const none = await cli(['keys', 'revoke', 'no-such-key', '--tenant', tenant], 'admin');
    assert.equal(none.code, 1);
    assert.match(none.stderr, /HTTP 404/);
    assert.equal((await cli(['keys', 'ls'], 'admin')).code, 0);
    // No DELETE /tenants/:id in this release: tenants rm says so.
    const rm = await cli(['tenants', 'rm', tenant], 'admin');
    assert.equal(rm.code, 1);
    assert.match(rm.stderr, /cannot remove tenants/, rm.stderr);
    // Not an admin: refused.
    assert.equal((await cli(['tenants', 'ls'], 'client')).code, 1);
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

  test("every refusal prints the server's status and reason, whatever the endpoint's error form", async () => {
    const echoId = await addAgent((await agents.add(startEchoAgent())).url);
    const wrongKey = { SWITCHBOARD_KEY: `sb_${'A'.repeat(43)}` };
    // JSON-RPC endpoints (send, stream, resume, tasks), Switchboard's own REST routes (agents, accounts, ledger).
    const calls: [string[], RegExp][] = [
      [['send', echoId, 'hello'], /^SendStreamingMessage: HTTP 401: The API key is not valid \(unknown, revoked or expired\) \(-32055\)$/m],
      [['stream', echoId, 'hello'], /^SendStreamingMessage: HTTP 401: The API key is not valid .*\(-32055\)$/m],
      [['resume', 'some-task', 'Ada'], /^SendStreamingMessage: HTTP 401: The API key is not valid .*\(-32055\)$/m],
      [['send', '--route', 'hello'], /^SendStreamingMessage: HTTP 401: The API key is not valid/m],
      [['tasks', 'ls'], /^GET \/tasks\?pageSize=50: HTTP 401: The API key is not valid \(unknown, revoked or expired\)$/m],
      [['tasks', 'get', 'x'], /^GetTask: HTTP 401: The API key is not valid .*\(-32055\)$/m],
      [['tasks', 'cancel', 'x'], /^CancelTask: HTTP 401: The API key is not valid .*\(-32055\)$/m],
      [['agents', 'ls'], /^GET \/agents: HTTP 401: The API key is not valid/m],
      [['accounts', 'show', 'requester:default'], /^GET \/accounts\/requester%3Adefault: HTTP 401: The API key is not valid/m],
      [['ledger', 'reconcile'], /^GET \/ledger\/reconcile: HTTP 401: The API key is not valid/m],
    ];
    for (const [args, reason] of calls) {
      const r = await cli(args, 'client', wrongKey);
      assert.equal(r.code, 1, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, reason, args.join(' '));
      assert.doesNotMatch(r.stderr, /undefined/, args.join(' '));
    }
    // No key at all: the server says how to send one.
    for (const args of [['send', echoId, 'hello'], ['tasks', 'ls'], ['agents', 'ls']]) {
      const r = await cli(args, 'none');
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, /HTTP 401: Authentication required: send Authorization: Bearer/, args.join(' '));
    }
    // A role that may not: 403 with the roles it needs.
    const denied = await cli(['send', echoId, 'hello'], 'operator');
    assert.equal(denied.code, 1);
    assert.match(denied.stderr, /^SendStreamingMessage: HTTP 403: SendStreamingMessage needs the role admin or client or agent; this key's role is operator \(-32056\)$/m);
    // A JSON-RPC error in a 200 answer: the method's own error.
    const missing = await cli(['tasks', 'get', 'no-such-task']);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /^GetTask: .*no-such-task.* \(-32001\)$/m);
    // An agent that is not registered: the endpoint answers 404 in its JSON-RPC form.
    const unknown = await cli(['send', 'no-such-agent', 'hello']);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /^SendStreamingMessage: HTTP 404: .*no-such-agent.* \(-32058\)$/m);
  });

  test('refusalOf reads the HTTP+JSON binding\'s AIP-193 errors too', async () => {
    const res = await fetch(`${gw.url}/rest/tasks`, { headers: { authorization: `Bearer sb_${'A'.repeat(43)}` } });
    assert.equal(res.status, 401);
    const body = await res.json();
    assert.equal((body as { error: { status: string } }).error.status, 'UNAUTHENTICATED', JSON.stringify(body));
    assert.equal(refusalOf(body), 'The API key is not valid (unknown, revoked or expired) (UNAUTHENTICATED)');
    assert.equal(refusalOf({ error: 'plain' }), 'plain');
    assert.equal(refusalOf({ jsonrpc: '2.0', id: null, error: { code: -32055, message: 'no' } }), 'no (-32055)');
    assert.equal(refusalOf('<html>Bad Gateway</html>', 'Bad Gateway'), '<html>Bad Gateway</html>');
    assert.equal(refusalOf('', 'Bad Gateway'), 'Bad Gateway');
  });

  test('tasks ls pages: --limit, a hint with the next token, --page-token, --all; the agent column; filters by agent and state', async () => {
    const a = await addAgent((await agents.add(startEchoAgent())).url);
    const b = await addAgent((await agents.add(startEchoAgent())).url);
    const send = async (agentId: string) => {
      const r = await rpc(`${gw.url}/agents/${agentId}/a2a`, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hi' }] } } });
      assert.equal(r.json?.result?.task?.status?.state, 'TASK_STATE_COMPLETED', r.text);
      return r.json.result.task.id as string;
    };
    const ofA: string[] = [];
    for (let i = 0; i < 7; i++) ofA.push(await send(a));
    const ofB = [await send(b), await send(b)];

    for (const role of ['operator', 'client'] as const) {
      // Filtered by agent, three at a time: the hint names the token, the token goes on where the page stopped.
      const first = await cli(['tasks', 'ls', '--agent', a, '--limit', '3'], role);
      assert.equal(first.code, 0, first.stderr);
      const [header, ...lines] = first.stdout.trim().split('\n');
      assert.match(header!, /^ID +STATE +AGENT +UPDATED$/, 'a table under a header');
      assert.equal(lines.length, 3, first.stdout);
      for (const line of lines) assert.match(line, new RegExp(`^\\S+ +completed +${a} +\\d{4}-`), `${role}: ${line}`);
      const hint = /^more tasks: switchboard tasks ls --agent (\S+) --limit 3 --page-token (\S+)  \(or --all\)$/m.exec(first.stderr);
      assert.ok(hint, `${role}: ${first.stderr}`);
      assert.equal(hint[1], a);
      const seen = lines.map((l) => l.split(/\s+/)[0]);
      let token: string | undefined = hint[2];
      while (token) {
        const next = await cli(['tasks', 'ls', '--agent', a, '--limit', '3', '--page-token', token], role);
        assert.equal(next.code, 0, next.stderr);
        seen.push(...next.stdout.trim().split('\n').slice(1).map((l) => l.split(/\s+/)[0]));
        token = /--page-token (\S+)/.exec(next.stderr)?.[1];
      }
      assert.deepEqual([...seen].sort(), [...ofA].sort(), `${role}: every task of agent a once, across pages`);
      assert.deepEqual(seen, [...ofA].reverse(), `${role}: newest first`);

      // --all past the server's page of 100 would need more tasks; past --limit's pages it needs these: pageSize 3.
      const all = await cli(['--json', 'tasks', 'ls', '--all', '--agent', b], role);
      assert.equal(all.code, 0, all.stderr);
      assert.deepEqual(JSON.parse(all.stdout).tasks.map((t: { id: string }) => t.id), [...ofB].reverse());
      assert.equal(JSON.parse(all.stdout).nextPageToken, '');
      assert.doesNotMatch(all.stderr, /more tasks/);
      const none = await cli(['tasks', 'ls', '--state', 'input-required', '--agent', a], role);
      assert.equal(none.code, 0, none.stderr);
      assert.equal(none.stdout.trim(), '(no tasks)');
    }
    // Operators see each task's agent without --agent (GET /tasks); both agents' tasks are there.
    const mixed = await cli(['tasks', 'ls', '--limit', '100'], 'operator');
    assert.match(mixed.stdout, new RegExp(`^${ofB[1]} +completed +${b} `, 'm'));
    assert.match(mixed.stdout, new RegExp(`^${ofA[0]} +completed +${a} `, 'm'));

    // A state that does not exist is a usage error listing the CLI's names, not the wire's.
    const bogus = await cli(['tasks', 'ls', '--state', 'bogus']);
    assert.equal(bogus.code, 2);
    assert.match(bogus.stderr, /not a task state; one of: submitted, working, input-required, auth-required, completed, failed, canceled, rejected/);
    assert.doesNotMatch(bogus.stderr, /TASK_STATE_/);
  });

  test('accounts deposit and withdraw: money in and out, once per --idempotency-key; more than is available is refused', async () => {
    const key = `cli-${Date.now()}`;
    const inn = await cli(['accounts', 'deposit', 'requester:cli-team', '500', '--idempotency-key', key], 'admin');
    assert.equal(inn.code, 0, inn.stderr);
    assert.match(inn.stdout, /^deposited: requester:cli-team balance 500$/m);
    const out = await cli(['accounts', 'withdraw', 'requester:cli-team', '200', '--idempotency-key', key], 'admin');
    assert.equal(out.code, 0, out.stderr);
    assert.match(out.stdout, /^withdrawn: requester:cli-team balance 300$/m);
    const again = await cli(['accounts', 'withdraw', 'requester:cli-team', '200', '--idempotency-key', key], 'admin');
    assert.match(again.stdout, /^already withdrawn: requester:cli-team balance 300$/m);
    const tooMuch = await cli(['accounts', 'withdraw', 'requester:cli-team', '301'], 'admin');
    assert.equal(tooMuch.code, 1);
    assert.match(tooMuch.stderr, /HTTP 409: requester:cli-team has 300 available/);
  });

  test('exit codes: 2 for usage, 3 when Switchboard cannot be reached', async () => {
    assert.equal((await cli(['send', 'only-an-id'])).code, 2);
    assert.equal((await cli(['stream', 'only-an-id'])).code, 2);
    assert.equal((await cli(['resume', 'only-a-task'])).code, 2);
    assert.equal((await cli(['tasks', 'ls', '--limit', '0'])).code, 2);
    assert.equal((await cli(['tasks', 'ls', '--limit', 'ten'])).code, 2);
    assert.equal((await cli(['agents', 'add', 'http://x.example', '--price', 'cheap'], 'operator')).code, 2);
    assert.equal((await cli(['accounts', 'deposit', 'requester:default', '-5'], 'admin')).code, 2);
    assert.equal((await cli(['accounts', 'withdraw', 'requester:default', '1.5'], 'admin')).code, 2);
    const missing = await cli(['tasks', 'get']);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /^Usage: switchboard tasks get /m);
    const unknown = await cli(['no-such-command']);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /unknown command 'no-such-command'/);
    assert.match(unknown.stderr, /^Usage: switchboard /m);
    const send = await cli(['send', 'only-an-id']);
    assert.match(send.stderr, /^Usage: switchboard send /m);
    assert.equal((await cli(['tasks', 'watch'])).code, 2);
    assert.equal((await cli(['keys', 'add'], 'admin')).code, 2, 'keys add without --role');
    assert.equal((await cli(['tasks', 'ls', '--bogus'])).code, 2);
    // Under --json a usage error is JSON too, with the usage line.
    const json = await cli(['--json', 'tasks', 'get']);
    assert.equal(json.code, 2);
    const error = JSON.parse(json.stderr.trim()).error;
    assert.equal(error.code, 'usage');
    assert.match(error.message, /missing required argument/);
    assert.match(error.usage, /^Usage: switchboard tasks get /);
    assert.equal((await cli(['--help'])).code, 0);
    const down = await cli(['agents', 'ls'], 'client', { SWITCHBOARD_URL: 'http://127.0.0.1:9' });
    assert.equal(down.code, 3);
    assert.match(down.stderr, /cannot reach Switchboard at http:\/\/127\.0\.0\.1:9/);
  });
});
