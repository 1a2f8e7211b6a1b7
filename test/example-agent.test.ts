// The example agent (`npm run example:agent`, examples/agent.ts) run as a real process and used through a gateway
// the way the README's quick start does: a task that asks for a name and is resumed, streamed word by word, and
// a slow task that is canceled and told so.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { type Gateway, eventually, register, rpc, startGateway } from './helpers/harness';
import { freePort } from './helpers/process';
import { assembledText, sse } from './helpers/sse';

let gw: Gateway;
let agentUrl: string;
let stop: () => void;

before(async () => {
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(__dirname, '..', 'examples', 'agent.ts')], {
    env: { PATH: process.env.PATH, EXAMPLE_AGENT_PORT: String(port) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  stop = () => child.kill('SIGTERM');
  agentUrl = `http://127.0.0.1:${port}`;
  await eventually(() => fetch(`${agentUrl}/.well-known/agent-card.json`).then((r) => r.ok || undefined, () => undefined), 30_000, 'the example agent');
  gw = await startGateway();
});
after(async () => {
  stop?.();
  await gw?.close();
});

const userMessage = (text: string, extra: Record<string, unknown> = {}) => ({ messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...extra });
const V1 = { 'A2A-Version': '1.0' };

test('asks for a name, is resumed on the same task, and streams its greeting word by word', async () => {
  const { rpc: url } = await register(gw, agentUrl);
  const first = await rpc(url, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: userMessage('hello') } }, V1);
  const task = first.json.result.task;
  assert.equal(task.status.state, 'TASK_STATE_INPUT_REQUIRED');
  assert.match(JSON.stringify(task.status.message), /What is your name/);
  const second = await sse(url, { method: 'SendStreamingMessage', params: { message: userMessage('Ada', { taskId: task.id }) } });
  const chunks = second.events.filter((e) => e.data.result?.artifactUpdate);
  assert.ok(chunks.length > 5, `streamed in ${chunks.length} chunks`);
  assert.equal(assembledText(second.events), 'Nice to meet you, Ada! Switchboard kept this task waiting for you.');
  assert.equal(second.events.at(-1)!.data.result.statusUpdate.status.state, 'TASK_STATE_COMPLETED');
});

test('a slow task is canceled at the agent', async () => {
  const { rpc: url } = await register(gw, agentUrl);
  const sent = await rpc(url, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: userMessage('slow please'), configuration: { returnImmediately: true } } }, V1);
  const taskId = sent.json.result.task.id;
  await eventually(async () => {
    const got = await rpc(url, { jsonrpc: '2.0', id: 2, method: 'GetTask', params: { id: taskId } }, V1);
    return got.json.result?.status?.state === 'TASK_STATE_WORKING' || undefined;
  }, 15_000, 'the task working');
  const canceled = await rpc(url, { jsonrpc: '2.0', id: 3, method: 'CancelTask', params: { id: taskId } }, V1);
  assert.equal(canceled.json.result.status.state, 'TASK_STATE_CANCELED', JSON.stringify(canceled.json));
  assert.doesNotMatch(JSON.stringify(canceled.json.result.status.message ?? ''), /did not confirm/, 'the agent confirmed the cancel');
});
