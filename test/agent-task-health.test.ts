// An agent's health follows its tasks (issue 34): a task that cannot connect to the agent (its port closed) shows
// the agent `down` at once, in GET /agents/:id, GET /agents and the CLI's `agents ls`, without waiting for the next
// probe; once it is back and a task succeeds, it is `healthy` again. Real Temporal dev server, PostgreSQL, an
// @a2a-js/sdk agent stopped and started on its port, the CLI as a process.
// Run: TEMPORAL_CLI=$PWD/.tools/bin/temporal npx tsx --test test/agent-task-health.test.ts
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { AgentPool, startEchoAgent } from './agents';
import { type Gateway, register, rpc, startGateway } from './helpers/harness';
import { TaskHealth } from '../src/core/agents/task-health';

const BIN = path.join(__dirname, '..', 'bin', 'switchboard.js');
const V1 = { 'a2a-version': '1.0' };
let gw: Gateway;
const agents = new AgentPool();

before(async () => {
  gw = await startGateway();
});
after(async () => {
  await gw?.close();
  await agents.closeAll();
});

const send = (url: string, text: string) =>
  rpc(url, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] } } }, V1);

async function agentView(id: string) {
  const res = await gw.fetch(`${gw.url}/agents/${id}`, {}, 'operator');
  assert.equal(res.status, 200);
  return (await res.json()) as { status: string; statusReason: string };
}

async function listed(id: string): Promise<string | undefined> {
  const res = await gw.fetch(`${gw.url}/agents`, {}, 'operator');
  const body = (await res.json()) as { agents: { id: string; status: string }[] };
  return body.agents.find((a) => a.id === id)?.status;
}

function agentsLs(): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [BIN, 'agents', 'ls'], { env: { PATH: process.env.PATH, SWITCHBOARD_URL: gw.url, SWITCHBOARD_KEY: gw.keys.client }, timeout: 60_000 }, (err, stdout, stderr) =>
      err ? reject(new Error(`${err.message}: ${stderr}`)) : resolve(stdout),
    );
  });
}

describe('health from tasks', () => {
  test('a task refused a connection shows its agent down at once; a task that succeeds after it is back shows it healthy', async () => {
    const echo = await agents.add(startEchoAgent());
    // One attempt per task: the failed task is reported as soon as the connection is refused.
    const { id, rpc: agentRpc } = await register(gw, echo.url, { retry: { maxAttempts: 1 } });
    const ok = await send(agentRpc, 'hello');
    assert.equal(ok.json?.result?.task?.status?.state, 'TASK_STATE_COMPLETED', ok.text);
    assert.equal((await agentView(id)).status, 'healthy');

    await echo.stop();
    const failed = await send(agentRpc, 'anyone there?');
    const state = failed.json?.result?.task?.status?.state ?? failed.json?.error;
    assert.ok(state === 'TASK_STATE_FAILED' || failed.json?.error, `the task failed: ${failed.text}`);
    // At once: no probe ran meanwhile (the next is minutes away), the task's failure said it.
    const down = await agentView(id);
    assert.equal(down.status, 'down', JSON.stringify(down));
    assert.match(down.statusReason, /could not connect/);
    assert.equal(await listed(id), 'down');
    assert.match(await agentsLs(), new RegExp(`^${id}\\b.*\\bdown\\b`, 'm'));

    await echo.start();
    const back = await send(agentRpc, 'hello again');
    assert.equal(back.json?.result?.task?.status?.state, 'TASK_STATE_COMPLETED', back.text);
    const healthy = await agentView(id);
    assert.equal(healthy.status, 'healthy', JSON.stringify(healthy));
    assert.equal(await listed(id), 'healthy');
  });

  test('timeouts degrade, then down after the probes\' threshold; an answer mends; an answer from a healthy agent writes nothing', async () => {
    const echo = await agents.add(startEchoAgent());
    const { id } = await register(gw, echo.url);
    const health = new TaskHealth(gw.db.pool, { downAfterFailures: 2 });
    const timeout = { kind: 'timeout', detail: 'no answer within 1 ms' } as const;
    const row = async () => (await gw.db.pool.query('SELECT status, consecutive_failures, xmin::text AS xmin FROM agents WHERE id = $1', [id])).rows[0];
    await health.note('default', id, { kind: 'answered' });
    const untouched = await row();
    // The agent is healthy: the answer's check matched no row, and a second answer does not even ask.
    await health.note('default', id, { kind: 'answered' });
    assert.equal((await row()).xmin, untouched.xmin, 'no write for an agent that stays healthy');
    await health.note('default', id, timeout);
    assert.deepEqual({ ...(await row()), xmin: undefined }, { status: 'degraded', consecutive_failures: 1, xmin: undefined });
    await health.note('default', id, timeout);
    const down = await row();
    assert.deepEqual([down.status, down.consecutive_failures], ['down', 2]);
    await health.note('default', id, timeout);
    assert.equal((await row()).xmin, down.xmin, 'no write while nothing changes');
    await health.note('default', id, { kind: 'answered' });
    assert.deepEqual([(await row()).status, (await row()).consecutive_failures], ['healthy', 0]);
  });
});
