// Drives each test agent with the SDK's own client and proves the behaviour the gateway tests rely on.
// Run: npx tsx --test test/agents.test.ts
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { ListTasksRequest, Role, SendMessageRequest, TaskState, type Message, type Task } from '@a2a-js/sdk';
import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory, type Client } from '@a2a-js/sdk/client';
import {
  RPC_PATH,
  startAskingAgent,
  startEchoAgent,
  startFailingAgent,
  startLegacyAgent,
  startSlowAgent,
  type TestAgent,
} from './agents';
import { eventually } from './helpers/harness';

// ---- helpers ----

const agents: TestAgent[] = [];
after(() => Promise.all(agents.map((a) => a.close())));
const track = async (p: Promise<TestAgent>) => {
  const a = await p;
  agents.push(a);
  return a;
};

/** Builds a full ts-proto SendMessageRequest from wire-style JSON (fromJSON fills every defaulted field). */
const request = (text: string, extra: { taskId?: string; contextId?: string; messageId?: string } = {}) =>
  SendMessageRequest.fromJSON({
    message: { messageId: extra.messageId ?? randomUUID(), role: 'ROLE_USER', parts: [{ text }], taskId: extra.taskId, contextId: extra.contextId },
  });

const asTask = (r: Message | Task): Task => {
  assert.ok('status' in r, `expected a Task, got ${JSON.stringify(r)}`);
  return r;
};
const artifactText = (t: Task) => t.artifacts.flatMap((a) => a.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : ''))).join('');
const statusText = (t: Task) => t.status?.message?.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');

const rpc = async (agent: TestAgent, method: string, params: unknown, headers: Record<string, string> = {}, signal?: AbortSignal) =>
  fetch(`${agent.url}${RPC_PATH}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    signal,
  });
const json = async (res: Response | Promise<Response>): Promise<any> => (await res).json();
const v1Send = (text: string, messageId = randomUUID()) => ({ message: { messageId, role: 'ROLE_USER', parts: [{ text }] } });
const v03Send = (text: string, messageId = randomUUID()) => ({ message: { kind: 'message', messageId, role: 'user', parts: [{ kind: 'text', text }] } });

const client = (agent: TestAgent): Promise<Client> => new ClientFactory().createFromUrl(agent.url);

// ---- tests ----

describe('echo agent', () => {
  let agent: TestAgent;
  before(async () => (agent = await track(startEchoAgent({ cost: 7 }))));

  it('serves a 1.0 card (plus 0.3 twin) that points at its real port', () => {
    const card = agent.card as { supportedInterfaces: { url: string; protocolBinding: string; protocolVersion: string }[] };
    assert.deepEqual(
      card.supportedInterfaces.map((i) => [i.protocolBinding, i.protocolVersion, i.url]),
      [
        ['JSONRPC', '1.0', `${agent.url}${RPC_PATH}`],
        ['JSONRPC', '0.3', `${agent.url}${RPC_PATH}`],
      ],
    );
  });

  it('completes with one artifact `echo: <text>` and cost metadata; records the call as received', async () => {
    const req = request('hello');
    const task = asTask(await (await client(agent)).sendMessage(req));
    assert.equal(task.status?.state, TaskState.TASK_STATE_COMPLETED);
    assert.equal(task.artifacts.length, 1);
    assert.equal(artifactText(task), 'echo: hello');
    assert.deepEqual(task.metadata, { cost: 7 });

    const call = agent.calls.at(-1)!;
    assert.equal(call.method, 'SendMessage');
    assert.equal(call.params.message.messageId, req.message!.messageId);
    assert.equal(call.headers['a2a-version'], '1.0');
  });

  it('streams task -> artifactUpdate -> statusUpdate(completed)', async () => {
    const events = [];
    for await (const e of (await client(agent)).sendMessageStream(request('streamed'))) events.push(e.payload);
    assert.deepEqual(events.map((p) => p?.$case), ['task', 'artifactUpdate', 'statusUpdate']);
    const last = events.at(-1);
    assert.ok(last?.$case === 'statusUpdate');
    assert.equal(last.value.status?.state, TaskState.TASK_STATE_COMPLETED);
    assert.deepEqual(last.value.metadata, { cost: 7 });
  });

  it('speaks 0.3 too (legacyCompat): no A2A-Version header = 0.3, so a header-less SendMessage is -32601', async () => {
    const legacy = await json(rpc(agent, 'message/send', v03Send('old')));
    assert.equal(legacy.result.kind, 'task');
    assert.equal(legacy.result.status.state, 'completed');
    const noHeader = await json(rpc(agent, 'SendMessage', v1Send('new')));
    assert.equal(noHeader.error.code, -32601);
  });
});

describe('asking agent', () => {
  let agent: TestAgent;
  before(async () => (agent = await track(startAskingAgent())));

  it('goes input-required, then completes on a follow-up to the same task', async () => {
    const c = await client(agent);
    const first = asTask(await c.sendMessage(request('hi')));
    assert.equal(first.status?.state, TaskState.TASK_STATE_INPUT_REQUIRED);
    assert.equal(first.status?.message?.role, Role.ROLE_AGENT);
    assert.equal(statusText(first), 'What is your name?');

    const second = asTask(await c.sendMessage(request('Ada', { taskId: first.id, contextId: first.contextId })));
    assert.equal(second.id, first.id);
    assert.equal(second.status?.state, TaskState.TASK_STATE_COMPLETED);
    assert.equal(artifactText(second), 'Hello, Ada!');
    assert.equal(agent.calls.at(-1)!.params.message.taskId, first.id);
  });
});

describe('slow agent', () => {
  let agent: TestAgent;
  before(async () => (agent = await track(startSlowAgent({ cost: 1 }))));

  it('keeps a blocking SendMessage open until canceled; records the cancel', async () => {
    const c = await client(agent);
    let settled = false;
    const blocking = c.sendMessage(request('take your time')).finally(() => (settled = true));

    const working = await eventually(async () => (await c.listTasks(ListTasksRequest.fromJSON({}))).tasks[0], 10_000, 'the task listed');
    assert.equal(working.status?.state, TaskState.TASK_STATE_WORKING);
    // A barrier: a request sent after the task was working, answered. An answer to the blocking send written when the
    // task went working would have reached the client before it.
    await c.getTask({ tenant: '', id: working.id });
    assert.equal(settled, false, 'blocking SendMessage must still be open');

    const canceled = await c.cancelTask({ tenant: '', id: working.id, metadata: undefined });
    assert.equal(canceled.status?.state, TaskState.TASK_STATE_CANCELED);
    const result = asTask(await blocking);
    assert.equal(result.id, working.id);
    assert.equal(result.status?.state, TaskState.TASK_STATE_CANCELED);
    assert.deepEqual(agent.cancels, [working.id]);
  });

  it('completes by itself after `ms`', async () => {
    const quick = await track(startSlowAgent({ ms: 50 }));
    const task = asTask(await (await client(quick)).sendMessage(request('x')));
    assert.equal(task.status?.state, TaskState.TASK_STATE_COMPLETED);
    assert.equal(artifactText(task), 'done: x');
  });
});

describe('failing agent', () => {
  it('http500: fails failTimes times, then echoes; every attempt is recorded with the same messageId', async () => {
    const agent = await track(startFailingAgent({ mode: 'http500', failTimes: 2 }));
    const c = await client(agent);
    const req = request('retry me');
    await assert.rejects(c.sendMessage(req));
    await assert.rejects(c.sendMessage(req));
    const task = asTask(await c.sendMessage(req));
    assert.equal(artifactText(task), 'echo: retry me');
    assert.deepEqual(
      agent.calls.map((x) => x.params.message.messageId),
      [1, 2, 3].map(() => req.message!.messageId),
    );
  });

  it('jsonrpc-error: -32603 "agent exploded", then echoes', async () => {
    const agent = await track(startFailingAgent({ mode: 'jsonrpc-error', failTimes: 1 }));
    const res = await rpc(agent, 'SendMessage', v1Send('boom'), { 'A2A-Version': '1.0' });
    assert.equal(res.status, 200);
    assert.deepEqual((await json(res)).error, { code: -32603, message: 'agent exploded' });
    assert.equal(artifactText(asTask(await (await client(agent)).sendMessage(request('ok')))), 'echo: ok');
  });

  it('invalid-response: HTTP 200 without a JSON-RPC envelope, then echoes', async () => {
    const agent = await track(startFailingAgent({ mode: 'invalid-response', failTimes: 1 }));
    const c = await client(agent);
    await assert.rejects(c.sendMessage(request('huh')));
    assert.equal(artifactText(asTask(await c.sendMessage(request('ok')))), 'echo: ok');
    assert.equal(agent.calls.length, 2);
  });

  it('hang: never answers, then echoes', async () => {
    const agent = await track(startFailingAgent({ mode: 'hang', failTimes: 1 }));
    await assert.rejects(rpc(agent, 'SendMessage', v1Send('zzz'), { 'A2A-Version': '1.0' }, AbortSignal.timeout(300)));
    assert.equal(artifactText(asTask(await (await client(agent)).sendMessage(request('ok')))), 'echo: ok');
  });

  it('defaults to failing every request', async () => {
    const agent = await track(startFailingAgent({ mode: 'http500' }));
    for (let i = 0; i < 3; i++) assert.equal((await rpc(agent, 'SendMessage', v1Send('x'), { 'A2A-Version': '1.0' })).status, 500);
    assert.equal(agent.calls.length, 3);
  });
});

describe('legacy (0.3-only) agent', () => {
  let agent: TestAgent;
  before(async () => (agent = await track(startLegacyAgent({ cost: 2 }))));

  it('serves the 0.3 card at both well-known paths', async () => {
    for (const path of ['agent-card.json', 'agent.json']) {
      const card = await json(fetch(`${agent.url}/.well-known/${path}`));
      assert.equal(card.protocolVersion, '0.3.0');
      assert.equal(card.url, `${agent.url}${RPC_PATH}`);
      assert.equal(card.preferredTransport, 'JSONRPC');
      assert.equal(card.supportedInterfaces, undefined);
    }
  });

  it('answers message/send via the SDK client in legacy mode', async () => {
    const legacyCompat = { enabled: true };
    const factory = new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        transports: [new JsonRpcTransportFactory({ legacyCompat })],
        cardResolver: new DefaultAgentCardResolver({ legacyCompat }), // needed to parse a 0.3 card
      }),
    );
    const c = await factory.createFromUrl(agent.url);
    const req = request('old school');
    const task = asTask(await c.sendMessage(req));
    assert.equal(task.status?.state, TaskState.TASK_STATE_COMPLETED);
    assert.equal(artifactText(task), 'echo: old school');
    assert.deepEqual(task.metadata, { cost: 2 });
    const call = agent.calls.at(-1)!;
    assert.equal(call.method, 'message/send');
    assert.equal(call.params.message.kind, 'message');
    assert.equal(call.params.message.messageId, req.message!.messageId);
  });

  it('rejects 1.0 SendMessage with -32601', async () => {
    const body = await json(rpc(agent, 'SendMessage', v1Send('new school'), { 'A2A-Version': '1.0' }));
    assert.equal(body.error.code, -32601);
  });

  it('records tasks/cancel ids', async () => {
    const sent = await json(rpc(agent, 'message/send', v03Send('x')));
    const res = await json(rpc(agent, 'tasks/cancel', { id: sent.result.id }));
    assert.equal(res.error.code, -32002); // already completed: not cancelable
    assert.deepEqual(agent.cancels, [sent.result.id]);
  });
});
