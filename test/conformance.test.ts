// What the official A2A TCK found, fixed and kept fixed (real gateway, SDK agents): ProtoJSON proto field names
// accepted beside JSON names, push-config delete of an unknown task is TaskNotFound, 0.3 tasks/resubscribe answers
// early errors as a stream's error event, and the per-agent card is found under the RPC URL.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { AgentPool, startAskingAgent, startEchoAgent } from './agents';
import { type Gateway, register, rpc, startGateway } from './helpers/harness';
import { sse } from './helpers/sse';

let gw: Gateway;
const agents = new AgentPool();
const v1 = { 'A2A-Version': '1.0' };

before(async () => {
  gw = await startGateway();
});
after(async () => {
  await gw?.close();
  await agents.closeAll();
});

describe('ProtoJSON: proto field names are accepted beside JSON names', () => {
  test('SendMessage with message_id, context_id, task_id; metadata keys are the caller\'s and stay as sent', async () => {
    const asking = await agents.add(startAskingAgent());
    const { rpc: url } = await register(gw, asking.url);
    const contextId = randomUUID();
    const first = await rpc(
      url,
      { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { message_id: randomUUID(), context_id: contextId, role: 'ROLE_USER', parts: [{ text: 'hi' }], metadata: { user_id: 'u-1' } } } },
      v1,
    );
    assert.equal(first.json.error, undefined, JSON.stringify(first.json));
    const task = first.json.result.task;
    assert.equal(task.contextId, contextId, 'context_id was read');
    assert.equal(task.status.state, 'TASK_STATE_INPUT_REQUIRED');
    const sent = asking.calls.find((c) => /^(SendMessage|SendStreamingMessage)$/.test(c.method))!;
    assert.deepEqual(sent.params.message.metadata?.user_id, 'u-1', 'a metadata key with an underscore is not renamed');

    const messageId = randomUUID();
    const second = await rpc(
      url,
      { jsonrpc: '2.0', id: 2, method: 'SendMessage', params: { message: { message_id: messageId, task_id: task.id, context_id: contextId, role: 'ROLE_USER', parts: [{ text: 'Ada' }] } } },
      v1,
    );
    assert.equal(second.json.result.task.id, task.id, 'task_id continued the task');
    assert.equal(second.json.result.task.status.state, 'TASK_STATE_COMPLETED');
    assert.ok(second.json.result.task.history.some((m: { messageId: string }) => m.messageId === messageId), 'message_id was read');

    const got = await rpc(url, { jsonrpc: '2.0', id: 3, method: 'GetTask', params: { id: task.id, history_length: 1 } }, v1);
    assert.equal(got.json.result.history.length, 1, 'history_length was read');
  });

  test('the push-config methods take task_id', async () => {
    const asking = await agents.add(startAskingAgent());
    const { rpc: url } = await register(gw, asking.url);
    const task = (await rpc(url, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hi' }] } } }, v1)).json.result.task;
    const created = await rpc(
      url,
      { jsonrpc: '2.0', id: 2, method: 'CreateTaskPushNotificationConfig', params: { task_id: task.id, url: 'https://hooks.example.com/a2a', token: 't' } },
      v1,
    );
    assert.equal(created.json.error, undefined, JSON.stringify(created.json));
    const configId = created.json.result.id;
    const got = await rpc(url, { jsonrpc: '2.0', id: 3, method: 'GetTaskPushNotificationConfig', params: { task_id: task.id, id: configId } }, v1);
    assert.equal(got.json.result.id, configId);
    const listed = await rpc(url, { jsonrpc: '2.0', id: 4, method: 'ListTaskPushNotificationConfigs', params: { task_id: task.id } }, v1);
    assert.equal(listed.json.error, undefined, JSON.stringify(listed.json));
    const deleted = await rpc(url, { jsonrpc: '2.0', id: 5, method: 'DeleteTaskPushNotificationConfig', params: { task_id: task.id, id: configId } }, v1);
    assert.deepEqual(deleted.json, { jsonrpc: '2.0', id: 5, result: null });
  });
});

describe('push-config delete of an unknown task', () => {
  for (const [method, params, headers] of [
    ['DeleteTaskPushNotificationConfig', { taskId: 'no-such-task', id: 'p' }, v1],
    ['tasks/pushNotificationConfig/delete', { id: 'no-such-task', pushNotificationConfigId: 'p' }, {}],
  ] as const) {
    test(`${method}: TaskNotFound (-32001), as get, list and create answer`, async () => {
      const echo = await agents.add(startEchoAgent());
      const { rpc: url } = await register(gw, echo.url);
      const res = await rpc(url, { jsonrpc: '2.0', id: 1, method, params }, headers);
      assert.equal(res.json.error?.code, -32001, JSON.stringify(res.json));
    });
  }
});

describe('early errors of streaming methods, in each dialect', () => {
  test('0.3 tasks/resubscribe for an unknown task: an SSE stream whose one event is the error', async () => {
    const echo = await agents.add(startEchoAgent());
    const { rpc: url } = await register(gw, echo.url);
    const read = await sse(url, { method: 'tasks/resubscribe', params: { id: 'no-such-task' } });
    assert.equal(read.status, 200);
    assert.match(read.contentType, /^text\/event-stream/);
    assert.equal(read.events.length, 1);
    assert.equal(read.events[0]!.event, 'error');
    assert.equal(read.events[0]!.data.error.code, -32001);
    assert.ok(read.ended);
  });

  test('1.0 SubscribeToTask and 0.3 message/stream answer an early error as a JSON-RPC response', async () => {
    const echo = await agents.add(startEchoAgent());
    const { rpc: url } = await register(gw, echo.url);
    const subscribed = await sse(url, { method: 'SubscribeToTask', params: { id: 'no-such-task' } });
    assert.match(subscribed.contentType, /^application\/json/);
    assert.equal(subscribed.json.error.code, -32001);
    const streamed = await sse(url, { method: 'message/stream', params: { message: { kind: 'message', messageId: randomUUID(), role: 'user', taskId: 'no-such-task', parts: [{ kind: 'text', text: 'x' }] } } });
    assert.match(streamed.contentType, /^application\/json/);
    assert.equal(streamed.json.error.code, -32001);
  });
});

test("the per-agent card is also served under the agent's RPC URL, where clients given only that URL look", async () => {
  const echo = await agents.add(startEchoAgent());
  const { base, rpc: url } = await register(gw, echo.url);
  for (const file of ['agent-card.json', 'agent.json']) {
    const [atBase, atRpc] = await Promise.all([fetch(`${base}/.well-known/${file}`), fetch(`${url}/.well-known/${file}`)]);
    assert.equal(atRpc.status, 200);
    assert.deepEqual(await atRpc.json(), await atBase.json());
  }
});

test('every binding\'s paths answer with a trailing slash too (clients holding a base URL post to `<url>/`)', async () => {
  const echo = await agents.add(startEchoAgent());
  const { base, rpc: url } = await register(gw, echo.url);
  const sent = await rpc(`${url}/`, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'slash' }] } } }, v1);
  assert.equal(sent.json.result?.task?.status?.state, 'TASK_STATE_COMPLETED', sent.text);
  const rest = await gw.fetch(`${base}/rest/tasks/${sent.json.result.task.id}/`, { headers: v1 });
  assert.equal(rest.status, 200);
  assert.equal(((await rest.json()) as { id: string }).id, sent.json.result.task.id);
  assert.equal((await fetch(`${base}/.well-known/agent-card.json/`)).status, 200);
});
