/**
 * The seed systems' clients, unchanged, against a real Switchboard (Temporal, PostgreSQL, worker) and real
 * @a2a-js/sdk agents: each seed's documented example requests, copied verbatim from /work/shared/seeds, round-trip
 * and are answered in the request's dialect. Society AI (003) speaks A2A 0.1/0.2, NEXUS (000) its `{type, data}`
 * hybrid, and the coding agent (004) 0.3 with `{taskId}` and resume by contextId. Bad input gets the spec's code in
 * the request's dialect.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { TaskState } from '@a2a-js/sdk';
import type { ExecutionEventBus, RequestContext } from '@a2a-js/sdk/server';
import { startAskingAgent, startEchoAgent, type TestAgent } from './agents';
import { startMutableAgent } from './agents/mutable';
import { BaseExecutor, startV1Agent, statusEvent, taskEvent, textOf as messageText } from './agents/v1';
import { type Gateway, eventually, register, rpc, startGateway } from './helpers/harness';
import { sse } from './helpers/sse';

let gw: Gateway;
const agents: TestAgent[] = [];
let echo: { id: string; rpc: string };
let asker: { id: string; rpc: string };
let researcher: TestAgent;
let gated: { id: string; rpc: string; agent: TestAgent; executor: GatedAskingExecutor };

/** The asking agent, whose answer's turn runs until the test opens its gate: a later turn a client's retry meets. */
class GatedAskingExecutor extends BaseExecutor {
  open!: () => void;
  private gate = new Promise<void>((r) => (this.open = r));

  async run(ctx: RequestContext, bus: ExecutionEventBus): Promise<void> {
    bus.publish(taskEvent(ctx, TaskState.TASK_STATE_WORKING));
    if (!ctx.task) {
      bus.publish(statusEvent(ctx.taskId, ctx.contextId, TaskState.TASK_STATE_INPUT_REQUIRED, { text: 'What is your name?' }));
      return;
    }
    await this.gate;
    this.complete(ctx, bus, `Hello, ${messageText(ctx.userMessage)}!`);
  }
}

/** A webhook receiver: records every POST (path, content type, JSON body) and answers 200. */
async function startReceiver() {
  const posts: { path: string; contentType: string; body: any }[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      posts.push({ path: req.url ?? '/', contentType: String(req.headers['content-type']), body: JSON.parse(Buffer.concat(chunks).toString('utf8')) });
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, posts, close: () => new Promise<void>((r) => server.close(() => r())) };
}
let receiver: Awaited<ReturnType<typeof startReceiver>>;

before(async () => {
  gw = await startGateway();
  const echoAgent = await startEchoAgent();
  const askingAgent = await startAskingAgent();
  // Society AI's example names its executor and skill: an agent of that name with that skill.
  researcher = await startMutableAgent({
    name: 'research-agent',
    description: 'Deep research agent that synthesizes multiple sources',
    skills: [{ id: 'research-topic', name: 'Topic Research', description: 'Research any topic with source citations', tags: ['research'], examples: [] }],
  });
  // NEXUS's front-door example says "Hello agent": an agent whose card matches those words.
  const greeter = await startMutableAgent({ name: 'Greeter', description: 'Says hello back to any agent' });
  const executor = new GatedAskingExecutor();
  const gatedAgent = await startV1Agent(executor, 'Gated asker', 'Asks for your name, then greets you when let', {});
  receiver = await startReceiver();
  agents.push(echoAgent, askingAgent, researcher, greeter, gatedAgent);
  gated = { ...(await register(gw, gatedAgent.url)), agent: gatedAgent, executor };
  echo = await register(gw, echoAgent.url);
  asker = await register(gw, askingAgent.url);
  await register(gw, researcher.url);
  await register(gw, greeter.url);
});
after(async () => {
  gated?.executor.open();
  await receiver?.close();
  await gw?.close();
  await Promise.all(agents.map((a) => a.close().catch(() => {})));
});

const front = () => `${gw.url}/a2a`;
const sendCalls = (a: TestAgent) => a.calls.filter((c) => /^(SendMessage|SendStreamingMessage|message\/send|message\/stream)$/.test(c.method)).length;

describe('Society AI (seed 003): A2A 0.1/0.2', () => {
  test("the issue's tasks/send: a task with the client's id and session, answered in 0.1's shape; the same id again returns it", async () => {
    // Verbatim from the issue (Society AI's tasks/send), at the agent's endpoint.
    const body = { jsonrpc: '2.0', id: 'req-send', method: 'tasks/send', params: { id: 't-1', sessionId: 's-1', message: { role: 'user', parts: [{ type: 'text', text: '…' }] } } };
    const { json: answer } = await rpc(echo.rpc, body);
    assert.equal(answer.id, 'req-send');
    assert.equal(answer.error, undefined, JSON.stringify(answer.error));
    const task = answer.result;
    assert.equal(task.id, 't-1');
    assert.equal(task.sessionId, 's-1');
    assert.equal(task.status.state, 'completed');
    assert.equal(task.kind, undefined, '0.1 has no kind');
    assert.deepEqual(task.artifacts.map((a: any) => [a.index, a.parts]), [[0, [{ type: 'text', text: 'echo: …' }]]]);
    assert.deepEqual(task.history[0], { role: 'user', parts: [{ type: 'text', text: '…' }] });

    // The gateway task is the client's id, scoped by tenant: 1.0 sees the same task.
    const v1 = (await rpc(echo.rpc, { jsonrpc: '2.0', id: 2, method: 'GetTask', params: { id: 't-1' } }, { 'A2A-Version': '1.0' })).json;
    assert.equal(v1.result.status.state, 'TASK_STATE_COMPLETED');
    assert.equal(v1.result.contextId, 's-1');

    // A second tasks/send with the same id: the terminal task as it ended, without calling the agent again.
    const agent = agents[0]!;
    const before = sendCalls(agent);
    const again = (await rpc(echo.rpc, body)).json;
    assert.equal(again.result.id, 't-1');
    assert.equal(again.result.status.state, 'completed');
    assert.equal(sendCalls(agent), before);
    // …and with another session, -32602.
    const mismatch = (await rpc(echo.rpc, { ...body, params: { ...body.params, sessionId: 's-2' } })).json;
    assert.equal(mismatch.error.code, -32602);
    assert.match(mismatch.error.message, /session s-2 does not match task t-1/);
    assert.deepEqual(mismatch.error.data, [{ field: 'sessionId', description: 'task t-1 is in s-1' }], '0.x errors: field violations, no google.rpc details');
  });

  test("the seed's tasks/sendSubscribe at the front door: routed by executor.name / skill_used, SSE of JSON-RPC responses, final on the last; metadata kept and returned", async () => {
    // Verbatim from the seed ("Request example").
    const params = {
      id: 'task-uuid',
      sessionId: 'session-uuid',
      message: { role: 'user', parts: [{ type: 'text', text: 'What is quantum computing?' }] },
      metadata: { requester: { name: 'ai-chatbot' }, executor: { name: 'research-agent' }, skill_used: 'research-topic', user_id: 'user-uuid' },
    };
    const before = sendCalls(researcher);
    const read = await sse(front(), { method: 'tasks/sendSubscribe', params });
    assert.equal(read.status, 200);
    assert.match(read.contentType, /text\/event-stream/);
    assert.ok(read.events.length >= 2, JSON.stringify(read.events));
    for (const e of read.events) {
      assert.equal(e.data.jsonrpc, '2.0');
      assert.equal(e.data.result.id, 'task-uuid');
    }
    const finals = read.events.filter((e) => e.data.result.status).map((e) => e.data.result.final);
    assert.deepEqual(finals, [...finals.slice(0, -1).map(() => false), true]);
    const last = read.events.at(-1)!.data.result;
    assert.equal(last.final, true);
    assert.equal(last.status.state, 'completed');
    const artifact = read.events.find((e) => e.data.result.artifact)?.data.result.artifact;
    assert.deepEqual(artifact.parts, [{ type: 'text', text: 'echo: What is quantum computing?' }]);
    assert.equal(artifact.index, 0);
    assert.equal(sendCalls(researcher), before + 1, 'executor.name routed the task to research-agent');

    // tasks/get (0.1, by the task it names): Society AI's metadata comes back with the task, beside the routing.
    const got = (await rpc(front(), { jsonrpc: '2.0', id: 'g', method: 'tasks/get', params: { id: 'task-uuid', historyLength: 1 } })).json.result;
    assert.equal(got.sessionId, 'session-uuid');
    assert.equal(got.history.length, 1);
    assert.deepEqual(got.metadata.requester, { name: 'ai-chatbot' });
    assert.equal(got.metadata.user_id, 'user-uuid');
    assert.equal(got.metadata.skill_used, 'research-topic');
    const route = await (await gw.fetch(`${gw.url}/tasks/task-uuid/route`)).json() as any;
    assert.equal(route.reason, 'metadata.agentId');
    assert.equal(route.skillId, 'research-topic');

    // tasks/list: the caller's tasks, 0.1 shapes, filtered by session.
    const list = (await rpc(front(), { jsonrpc: '2.0', id: 'l', method: 'tasks/list', params: { sessionId: 'session-uuid' } })).json.result;
    assert.deepEqual(list.tasks.map((t: any) => [t.id, t.sessionId, t.status.state]), [['task-uuid', 'session-uuid', 'completed']]);
    assert.equal(list.tasks[0].metadata.user_id, 'user-uuid');
  });

  test('input-required: a second tasks/send with the same id continues the task; task/resubscribe and tasks/cancel {taskId}', async () => {
    const send = (id: string, text: string) => rpc(asker.rpc, { jsonrpc: '2.0', id: 1, method: 'tasks/send', params: { id, sessionId: 'chat-9', message: { role: 'user', parts: [{ type: 'text', text }] } } });
    const first = (await send('ask-1', 'hi')).json.result;
    assert.equal(first.status.state, 'input-required');
    assert.deepEqual(first.status.message.parts, [{ type: 'text', text: 'What is your name?' }]);
    const second = (await send('ask-1', 'Ada')).json.result;
    assert.equal(second.id, 'ask-1');
    assert.equal(second.status.state, 'completed');
    assert.deepEqual(second.artifacts[0].parts, [{ type: 'text', text: 'Hello, Ada!' }]);

    // Society AI's task/resubscribe on a task waiting for input: its status, then every change until the task ends
    // (the cancel below), `final` on that last one only (A2A §3.1.6: a subscription ends at a terminal state).
    assert.equal((await send('ask-2', 'hi')).json.result.status.state, 'input-required');
    let subscribed!: () => void;
    const attached = new Promise<void>((r) => (subscribed = r));
    const resub = sse(asker.rpc, { method: 'task/resubscribe', params: { id: 'ask-2' }, onEvent: () => subscribed() });
    await Promise.race([attached, resub]);

    // tasks/pushNotification/set|get (0.1 names).
    const hook = 'http://127.0.0.1:9/hook';
    const set = (await rpc(asker.rpc, { jsonrpc: '2.0', id: 3, method: 'tasks/pushNotification/set', params: { id: 'ask-2', pushNotificationConfig: { url: hook } } })).json;
    assert.equal(set.result.id, 'ask-2', JSON.stringify(set));
    assert.equal(set.result.pushNotificationConfig.url, hook);
    const get = (await rpc(asker.rpc, { jsonrpc: '2.0', id: 4, method: 'tasks/pushNotification/get', params: { id: 'ask-2' } })).json;
    assert.equal(get.result.pushNotificationConfig.url, hook);

    // tasks/cancel with {taskId} (seed 004's spelling), answered in 0.1 because the task was started in it.
    const canceled = (await rpc(asker.rpc, { jsonrpc: '2.0', id: 5, method: 'tasks/cancel', params: { taskId: 'ask-2' } })).json.result;
    assert.equal(canceled.id, 'ask-2');
    assert.equal(canceled.status.state, 'canceled');
    assert.equal(canceled.sessionId, 'chat-9');
    const seen = (await resub).events.map((e) => [e.data.result.id, e.data.result.status?.state, e.data.result.final]);
    assert.deepEqual(seen[0], ['ask-2', 'input-required', false]);
    assert.deepEqual(seen.at(-1), ['ask-2', 'canceled', true]);
    assert.ok(seen.slice(0, -1).every(([, , final]) => final === false), JSON.stringify(seen));
  });

  test('a tasks/send resent while its task is on a later turn: answered as the first time, once that turn ends, and never delivered again', async () => {
    const metadata = { requester: { name: 'ai-chatbot' }, user_id: 'user-uuid' };
    const params = (text: string) => ({ id: 'retry-1', sessionId: 'chat-r', message: { role: 'user', parts: [{ type: 'text', text }] }, metadata });
    const send = (text: string) => rpc(gated.rpc, { jsonrpc: '2.0', id: text, method: 'tasks/send', params: params(text) });
    const first = (await send('hi')).json.result;
    assert.equal(first.status.state, 'input-required');
    // Its answer lost, the client sends it again while the task waits for the answer: the task as it is, not an answer.
    const again = (await send('hi')).json;
    assert.deepEqual([again.result?.status.state, again.result?.status.message.parts], ['input-required', [{ type: 'text', text: 'What is your name?' }]], JSON.stringify(again));
    assert.equal(sendCalls(gated.agent), 1, 'the repeated message was not sent to the agent');

    // The answer's turn runs at the agent (until the gate opens); the client repeats it, and the first message too.
    const answered = send('Ada');
    await eventually(() => sendCalls(gated.agent) === 2, 15_000, "the answer's turn at the agent");
    let settled = 0;
    const resends = [send('Ada'), send('hi')].map((p) => p.finally(() => settled++));
    let streaming!: () => void;
    const streamed = new Promise<void>((r) => (streaming = r));
    const stream = sse(gated.rpc, { method: 'tasks/sendSubscribe', params: params('Ada'), onEvent: () => streaming() });
    await Promise.race([streamed, stream]);
    assert.equal(settled, 0, 'the resends wait for the turn in progress (not -32004)');
    gated.executor.open();

    for (const res of await Promise.all([answered, ...resends])) {
      const task = res.json.result;
      assert.deepEqual([task?.id, task?.status.state, task?.artifacts?.[0].parts], ['retry-1', 'completed', [{ type: 'text', text: 'Hello, Ada!' }]], JSON.stringify(res.json));
    }
    const events = (await stream).events.map((e) => e.data.result);
    assert.deepEqual([events[0].id, events[0].status.state, events[0].final], ['retry-1', 'working', false]);
    assert.deepEqual([events.at(-1).status.state, events.at(-1).final], ['completed', true]);
    assert.ok(events.slice(0, -1).every((e) => e.final !== true), JSON.stringify(events));
    assert.deepEqual(events.find((e) => e.artifact)?.artifact.parts, [{ type: 'text', text: 'Hello, Ada!' }]);
    assert.equal(sendCalls(gated.agent), 2, 'each message reached the agent once');
    const history = (await rpc(gated.rpc, { jsonrpc: '2.0', id: 'h', method: 'tasks/get', params: { id: 'retry-1' } })).json.result.history;
    assert.deepEqual(history.filter((m: any) => m.role === 'user').map((m: any) => m.parts[0].text), ['hi', 'Ada']);
  });

  test('tasks/sendSubscribe on a task that has ended: a stream of one event, its final status, final: true', async () => {
    for (const text of ['…', 'something new']) {
      const read = await sse(echo.rpc, { method: 'tasks/sendSubscribe', params: { id: 't-1', sessionId: 's-1', message: { role: 'user', parts: [{ type: 'text', text }] } } });
      assert.equal(read.status, 200, JSON.stringify(read.json));
      assert.match(read.contentType, /text\/event-stream/);
      assert.deepEqual(read.events.map((e) => [e.data.result.id, e.data.result.status?.state, e.data.result.final]), [['t-1', 'completed', true]]);
      assert.equal(read.ended, true);
    }
  });

  test("0.1 push configs get 0.1's webhook bodies ({id, status, final} / {id, artifact}): inline on tasks/send, and set with tasks/pushNotification/set", async () => {
    const bodiesAt = (path: string) =>
      eventually(() => {
        const got = receiver.posts.filter((p) => p.path === path);
        return got.some((p) => p.body.final === true) ? got : undefined;
      }, 15_000, () => `the final delivery at ${path}: ${JSON.stringify(receiver.posts)}`);
    const check = (posts: { contentType: string; body: any }[], taskId: string, artifactText: string) => {
      for (const { body, contentType } of posts) {
        assert.match(contentType, /^application\/json/);
        assert.equal(body.id, taskId);
        const keys = Object.keys(body).filter((k) => k !== 'metadata').sort();
        assert.ok(JSON.stringify(keys) === '["final","id","status"]' || JSON.stringify(keys) === '["artifact","id"]', JSON.stringify(body));
      }
      const last = posts.at(-1)!.body;
      assert.deepEqual([last.status?.state, last.final], ['completed', true]);
      assert.ok(posts.slice(0, -1).every((p) => p.body.final !== true));
      const artifact = posts.find((p) => p.body.artifact)!.body.artifact;
      assert.deepEqual([artifact.index, artifact.parts], [0, [{ type: 'text', text: artifactText }]]);
    };

    const inline = (
      await rpc(echo.rpc, { jsonrpc: '2.0', id: 1, method: 'tasks/send', params: { id: 'push-01', message: { role: 'user', parts: [{ type: 'text', text: 'ping' }] }, pushNotification: { url: `${receiver.url}/inline` } } })
    ).json.result;
    assert.equal(inline.status.state, 'completed');
    check(await bodiesAt('/inline'), 'push-01', 'echo: ping');

    const ask = (text: string) => rpc(asker.rpc, { jsonrpc: '2.0', id: 2, method: 'tasks/send', params: { id: 'push-02', message: { role: 'user', parts: [{ type: 'text', text }] } } });
    assert.equal((await ask('hi')).json.result.status.state, 'input-required');
    const set = (await rpc(asker.rpc, { jsonrpc: '2.0', id: 3, method: 'tasks/pushNotification/set', params: { id: 'push-02', pushNotificationConfig: { url: `${receiver.url}/set` } } })).json;
    assert.equal(set.result?.pushNotificationConfig.url, `${receiver.url}/set`, JSON.stringify(set));
    assert.equal((await ask('Ada')).json.result.status.state, 'completed');
    check(await bodiesAt('/set'), 'push-02', 'Hello, Ada!');
  });

  test('0.1 parts round-trip: text, data and file (bytes and uri) come back as sent; a stream at input-required ends final', async () => {
    const parts = [
      { type: 'text', text: 'see attached' },
      { type: 'data', data: { rows: 3, ok: true } },
      { type: 'file', file: { name: 'a.png', mimeType: 'image/png', bytes: 'iVBORw0KGgo=' } },
      { type: 'file', file: { name: 'b.pdf', mimeType: 'application/pdf', uri: 'https://example.com/b.pdf' } },
    ];
    const sent = (await rpc(echo.rpc, { jsonrpc: '2.0', id: 1, method: 'tasks/send', params: { id: 'parts-1', message: { role: 'user', parts } } })).json.result;
    assert.equal(sent.status.state, 'completed');
    assert.deepEqual(sent.history[0].parts, parts);

    const read = await sse(asker.rpc, { method: 'tasks/sendSubscribe', params: { id: 'ask-stream', message: { role: 'user', parts: [{ type: 'text', text: 'hi' }] } } });
    const last = read.events.at(-1)!.data.result;
    assert.deepEqual([last.id, last.status.state, last.final], ['ask-stream', 'input-required', true]);
    assert.deepEqual(last.status.message.parts, [{ type: 'text', text: 'What is your name?' }]);
    assert.ok(read.events.slice(0, -1).every((e) => e.data.result.final !== true));
  });

  test('two tasks/send of the same new id at once: one task, the agent called once, both answered with it', async () => {
    const agent = agents[0]!;
    const before = sendCalls(agent);
    const body = { jsonrpc: '2.0', id: 1, method: 'tasks/send', params: { id: 'race-1', message: { role: 'user', parts: [{ type: 'text', text: 'once' }] } } };
    const answers = await Promise.all([rpc(echo.rpc, body), rpc(echo.rpc, body), rpc(echo.rpc, body)]);
    for (const a of answers) assert.deepEqual([a.json.result?.id, a.json.result?.status.state], ['race-1', 'completed'], JSON.stringify(a.json));
    assert.equal(sendCalls(agent), before + 1);
  });

  test("client-chosen ids are scoped by tenant: another team's t-1 is its own task, and it cannot see or list this team's", async () => {
    const adminCall = async (path: string, body: unknown, tenant?: string) =>
      (await fetch(`${gw.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${gw.keys.admin}`, ...(tenant && { 'x-switchboard-tenant': tenant }) },
        body: JSON.stringify(body),
      })).json() as Promise<any>;
    await adminCall('/tenants', { id: 'team-b', name: 'Team B' });
    const key = (await adminCall('/tenants/team-b/keys', { role: 'client', name: 'b' })).key;
    const theirs = await adminCall('/agents', { url: agents[0]!.url }, 'team-b');
    const auth = { authorization: `Bearer ${key}` };
    const send = { jsonrpc: '2.0', id: 1, method: 'tasks/send', params: { id: 't-1', sessionId: 'b-session', message: { role: 'user', parts: [{ type: 'text', text: 'team b' }] } } };
    const created = (await rpc(`${gw.url}/agents/${theirs.id}/a2a`, send, auth)).json.result;
    assert.deepEqual([created.id, created.sessionId, created.status.state, created.artifacts[0].parts[0].text], ['t-1', 'b-session', 'completed', 'echo: team b']);
    // Team A's t-1 is untouched (session s-1), and team B sees only its own tasks.
    assert.equal((await rpc(echo.rpc, { jsonrpc: '2.0', id: 2, method: 'tasks/get', params: { id: 't-1' } })).json.result.sessionId, 's-1');
    assert.equal((await rpc(`${gw.url}/a2a`, { jsonrpc: '2.0', id: 3, method: 'tasks/get', params: { id: 'task-uuid' } }, auth)).json.error.code, -32001);
    const listed = (await rpc(`${gw.url}/a2a`, { jsonrpc: '2.0', id: 4, method: 'tasks/list', params: {} }, auth)).json.result;
    assert.deepEqual(listed.tasks.map((t: any) => t.sessionId), ['b-session']);
  });

  test('bad input: -32602 naming the field, -32601 for an unknown method, in 0.x form with the request id', async () => {
    const kindParts = (await rpc(echo.rpc, { jsonrpc: '2.0', id: 'b1', method: 'tasks/send', params: { id: 'bad-1', message: { role: 'user', parts: [{ kind: 'text', text: 'x' }] } } })).json;
    assert.equal(kindParts.id, 'b1');
    assert.equal(kindParts.error.code, -32602);
    assert.ok(kindParts.error.data.some((v: any) => v.field.startsWith('message.parts.0')), JSON.stringify(kindParts.error));
    const badId = (await rpc(echo.rpc, { jsonrpc: '2.0', id: 'b2', method: 'tasks/send', params: { id: 'a b/c', message: { role: 'user', parts: [{ type: 'text', text: 'x' }] } } })).json;
    assert.equal(badId.error.code, -32602);
    assert.deepEqual(badId.error.data.map((v: any) => v.field), ['id']);
    const noId = (await rpc(echo.rpc, { jsonrpc: '2.0', id: 'b3', method: 'tasks/send', params: { message: { role: 'user', parts: [{ type: 'text', text: 'x' }] } } })).json;
    assert.equal(noId.error.code, -32602);
    const unknown = (await rpc(echo.rpc, { jsonrpc: '2.0', id: 'b4', method: 'tasks/sendd', params: {} })).json;
    assert.deepEqual([unknown.id, unknown.error.code], ['b4', -32601]);
    const missing = (await rpc(echo.rpc, { jsonrpc: '2.0', id: 'b5', method: 'tasks/get', params: { id: 'no-such-task' } })).json;
    assert.equal(missing.error.code, -32001);
    const nothing = (await rpc(echo.rpc, { jsonrpc: '2.0', id: 'b6', method: 'tasks/get', params: {} })).json;
    assert.equal(nothing.error.code, -32602);
  });
});

describe('NEXUS (seed 000)', () => {
  test("the seed's curl to POST /api/v1/a2a: message/send with {type, data} parts, routed, answered in NEXUS's shape", async () => {
    // Verbatim from the seed ("NEXUS A2A Endpoint").
    const body = { jsonrpc: '2.0', id: '1', method: 'message/send', params: { message: { role: 'user', parts: [{ type: 'text', data: 'Hello agent' }] } } };
    const res = await rpc(`${gw.url}/api/v1/a2a`, body);
    assert.equal(res.status, 200);
    const task = res.json.result;
    assert.equal(res.json.id, '1');
    assert.equal(task.status, 'completed', JSON.stringify(res.json));
    assert.deepEqual(task.messages[0], { role: 'user', parts: [{ type: 'text', data: 'Hello agent' }] });
    assert.deepEqual(task.artifacts[0].parts, [{ type: 'text', data: 'echo: Hello agent' }]);
    assert.equal(task.artifacts[0].name, 'result');
    assert.ok(task.metadata.switchboard.routing, 'the routing decision reaches the client as task metadata');
    // tasks/get on it, likewise.
    const got = (await rpc(`${gw.url}/api/v1/a2a`, { jsonrpc: '2.0', id: '2', method: 'tasks/get', params: { id: task.id } })).json.result;
    assert.equal(got.status, 'completed');
    assert.deepEqual(got.messages[0].parts, [{ type: 'text', data: 'Hello agent' }]);
  });

  test("the seed's Request Format at an agent's endpoint: params.id is the task id; tasks/get {id} answers NEXUS's shape", async () => {
    // Verbatim from the seed ("Request Format").
    const body = {
      jsonrpc: '2.0',
      id: 'task-uuid-here',
      method: 'message/send',
      params: { id: 'task-uuid-here', message: { role: 'user', parts: [{ type: 'text', data: 'Summarize this article...' }] } },
    };
    const answer = (await rpc(echo.rpc, body)).json;
    assert.equal(answer.id, 'task-uuid-here');
    assert.deepEqual(
      { id: answer.result.id, status: answer.result.status, artifacts: answer.result.artifacts.map((a: any) => a.parts) },
      { id: 'task-uuid-here', status: 'completed', artifacts: [[{ type: 'text', data: 'echo: Summarize this article...' }]] },
    );
    assert.deepEqual(answer.result.messages.map((m: any) => m.role), ['user']);
    const got = (await rpc(echo.rpc, { jsonrpc: '2.0', id: 'q', method: 'tasks/get', params: { id: 'task-uuid-here' } })).json.result;
    assert.equal(got.id, 'task-uuid-here');
    assert.equal(got.status, 'completed');
    // A 0.3 client's tasks/get of a 0.3 task is still 0.3 (nothing recorded): checked in the coding-agent tests.
  });

  test('message/send with params.id continues a task that waits for input', async () => {
    const send = (text: string) => rpc(asker.rpc, { jsonrpc: '2.0', id: 'nx', method: 'message/send', params: { id: 'nx-ask', message: { role: 'user', parts: [{ type: 'text', data: text }] } } });
    const first = (await send('hi')).json.result;
    assert.equal(first.status, 'input-required');
    assert.deepEqual(first.messages.at(-1), { role: 'agent', parts: [{ type: 'text', data: 'What is your name?' }] });
    const second = (await send('Grace')).json.result;
    assert.deepEqual([second.id, second.status, second.artifacts[0].parts[0].data], ['nx-ask', 'completed', 'Hello, Grace!']);
  });

  test('asynchronous creation: POST /api/v1/tasks → 202, Location, the submitted task; GET /api/v1/tasks/:id returns it', async () => {
    const res = await gw.fetch(`${gw.url}/api/v1/tasks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ agentId: echo.id, message: { role: 'user', parts: [{ type: 'text', data: 'later please' }] } }),
    });
    assert.equal(res.status, 202);
    const task = (await res.json()) as any;
    assert.equal(res.headers.get('location'), `/api/v1/tasks/${task.id}`);
    assert.ok(['submitted', 'working', 'completed'].includes(task.status), task.status);
    const done = await eventually(async () => {
      const r = (await (await gw.fetch(`${gw.url}/api/v1/tasks/${task.id}`)).json()) as any;
      return r.status === 'completed' ? r : undefined;
    }, 15_000, 'the task to complete');
    assert.deepEqual(done.artifacts[0].parts, [{ type: 'text', data: 'echo: later please' }]);
    // The same task over JSON-RPC tasks/get: NEXUS's shape (the task was started in it).
    assert.equal((await rpc(front(), { jsonrpc: '2.0', id: 1, method: 'tasks/get', params: { id: task.id } })).json.result.status, 'completed');

    const unknownAgent = await gw.fetch(`${gw.url}/api/v1/tasks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ agentId: 'no-such-agent', message: { role: 'user', parts: [{ type: 'text', data: 'x' }] } }),
    });
    assert.equal(unknownAgent.status, 404);
    assert.equal((await gw.fetch(`${gw.url}/api/v1/tasks/no-such-task`)).status, 404);
    const badBody = await gw.fetch(`${gw.url}/api/v1/tasks`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ agentId: echo.id }) });
    assert.equal(badBody.status, 400);
    assert.match(((await badBody.json()) as any).error, /message/);
  });

  test('bad input: a text part without data is -32602 in NEXUS (plain) form', async () => {
    const bad = (await rpc(`${gw.url}/api/v1/a2a`, { jsonrpc: '2.0', id: 'n1', method: 'message/send', params: { message: { role: 'user', parts: [{ type: 'text' }] } } })).json;
    assert.equal(bad.id, 'n1');
    assert.equal(bad.error.code, -32602);
    assert.deepEqual(bad.error.data.map((v: any) => v.field), ['message.parts.0.data']);
    const empty = (await rpc(`${gw.url}/api/v1/a2a`, { jsonrpc: '2.0', id: 'n2', method: 'message/send', params: { id: 'x1', message: { role: 'user', parts: [] } } })).json;
    assert.equal(empty.error.code, -32602);
    // A 0.3 message (it has `kind`) stays 0.3 even with a stray params.id.
    const v03 = (
      await rpc(echo.rpc, { jsonrpc: '2.0', id: 'n3', method: 'message/send', params: { id: 'stray', message: { kind: 'message', messageId: 'stray-1', role: 'user', parts: [{ kind: 'text', text: 'x' }] } } })
    ).json;
    assert.deepEqual([v03.result?.kind, v03.result?.status.state], ['task', 'completed'], JSON.stringify(v03));
  });
});

describe('coding agent (seed 004): 0.3 with {taskId} and resume by contextId', () => {
  test("the seed's message/send pauses at input-required; its resume message (same contextId, no taskId) continues the task", async () => {
    // Verbatim from the seed ("message/send … Request").
    const first = (
      await rpc(asker.rpc, {
        jsonrpc: '2.0',
        id: 1,
        method: 'message/send',
        params: {
          message: { kind: 'message', messageId: 'msg-uuid', role: 'user', parts: [{ kind: 'text', text: 'Add a health check endpoint' }] },
          configuration: { blocking: true },
        },
      })
    ).json.result;
    assert.equal(first.kind, 'task');
    assert.equal(first.status.state, 'input-required');
    // Verbatim from the seed ("Resuming after input-required"), with the contextId it says to repeat.
    const resumed = (
      await rpc(asker.rpc, {
        jsonrpc: '2.0',
        id: 4,
        method: 'message/send',
        params: { message: { kind: 'message', messageId: 'msg-2', role: 'user', contextId: first.contextId, parts: [{ kind: 'text', text: 'y' }] } },
      })
    ).json;
    assert.equal(resumed.result.id, first.id, JSON.stringify(resumed));
    assert.equal(resumed.result.status.state, 'completed');
    assert.equal(resumed.result.artifacts[0].parts[0].text, 'Hello, y!');

    // tasks/get and tasks/cancel with {taskId}: 0.3 answers (the task was started in 0.3).
    const got = (await rpc(asker.rpc, { jsonrpc: '2.0', id: 2, method: 'tasks/get', params: { taskId: first.id } })).json.result;
    assert.deepEqual([got.kind, got.id, got.status.state], ['task', first.id, 'completed']);
    // The seed's server: "Calling tasks/cancel on a task that is already in a terminal state is a no-op."
    const cancel = (await rpc(asker.rpc, { jsonrpc: '2.0', id: 3, method: 'tasks/cancel', params: { taskId: first.id } })).json;
    assert.deepEqual([cancel.result?.kind, cancel.result?.id, cancel.result?.status.state], ['task', first.id, 'completed'], JSON.stringify(cancel));
    // Spelled as the spec has it ({id}), the spec's answer: TaskNotCancelable.
    const specCancel = (await rpc(asker.rpc, { jsonrpc: '2.0', id: 3, method: 'tasks/cancel', params: { id: first.id } })).json;
    assert.equal(specCancel.error.code, -32002, 'a completed task cannot be canceled');
    const unknown = (await rpc(asker.rpc, { jsonrpc: '2.0', id: 2, method: 'tasks/get', params: { taskId: 'task-uuid-unknown' } })).json;
    assert.equal(unknown.error.code, -32001);
  });

  test('two tasks waiting in one context: a message without taskId is -32602 naming both; message/stream resumes the one left', async () => {
    const contextId = 'ctx-two-waiting';
    const start = async (messageId: string) =>
      (await rpc(asker.rpc, { jsonrpc: '2.0', id: 1, method: 'message/send', params: { message: { kind: 'message', messageId, role: 'user', contextId, parts: [{ kind: 'text', text: 'go' }] } } })).json.result;
    const a = await start('two-a');
    assert.equal(a.status.state, 'input-required');
    // While `a` waits, a 0.3 message in its context resumes it; 1.0 has no resume by contextId, so a second waiting
    // task in the same context is started with SendMessage.
    const b = (
      await rpc(asker.rpc, { jsonrpc: '2.0', id: 2, method: 'SendMessage', params: { message: { messageId: 'two-b', role: 'ROLE_USER', contextId, parts: [{ text: 'go' }] } } }, { 'A2A-Version': '1.0' })
    ).json.result.task;
    assert.equal(b.status.state, 'TASK_STATE_INPUT_REQUIRED');
    const ambiguous = (await rpc(asker.rpc, { jsonrpc: '2.0', id: 3, method: 'message/send', params: { message: { kind: 'message', messageId: 'two-c', role: 'user', contextId, parts: [{ kind: 'text', text: 'y' }] } } })).json;
    assert.equal(ambiguous.error.code, -32602);
    assert.match(ambiguous.error.message, new RegExp(`${a.id}`));
    assert.match(ambiguous.error.message, new RegExp(`${b.id}`));
    await rpc(asker.rpc, { jsonrpc: '2.0', id: 4, method: 'tasks/cancel', params: { id: b.id } });

    // Verbatim shape from the seed ("message/stream"), with the contextId: it resumes `a` and streams to the end.
    const read = await sse(asker.rpc, {
      method: 'message/stream',
      params: { message: { kind: 'message', messageId: 'test-1', role: 'user', contextId, parts: [{ kind: 'text', text: 'Explain the main function in src/index.ts' }] } },
    });
    const results = read.events.map((e) => e.data.result);
    assert.ok(results.every((r) => (r.taskId ?? r.id) === a.id), JSON.stringify(results));
    assert.equal(results.at(-1).kind, 'status-update');
    assert.equal(results.at(-1).status.state, 'completed');
    assert.equal(results.at(-1).final, true);
  });
});
