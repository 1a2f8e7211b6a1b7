/**
 * Round trips of the seeds' flows that used to fail (issue 39, section 2): the seed's side unchanged, only the URL and a
 * key changed. NEXUS (000) parts whose data is an object keep every key, both ways, and a text part's data may be
 * anything; NEXUS's own path answers an unknown task as the seed says. A dialog of NEXUS and Society AI (0.1) clients
 * where the user gives the same answer twice in a row goes on (a retry is the same request: the same JSON-RPC id).
 * Real Switchboard (Temporal, PostgreSQL, worker), a real @a2a-js/sdk agent, and a NEXUS agent built from the seed's
 * text (plain node:http, no SDK). And the smaller surprises, fixed or kept on purpose (docs/dialects.md says why):
 * an agent's parent task, Switchboard's own NANDA action names, a reported cost without a hold, a hub agent's URL.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { TaskState } from '@a2a-js/sdk';
import type { ExecutionEventBus, RequestContext } from '@a2a-js/sdk/server';
import WebSocket from 'ws';
import { type TestAgent, startEchoAgent } from './agents';
import { startMutableAgent } from './agents/mutable';
import { BaseExecutor, startV1Agent, statusEvent, taskEvent, textOf } from './agents/v1';
import { type Gateway, agentKey, eventually, register, rpc, startGateway } from './helpers/harness';

let gw: Gateway;
const agents: TestAgent[] = [];
const closers: (() => Promise<void>)[] = [];
let dialog: { id: string; rpc: string; agent: TestAgent };

/** Three questions, one per turn; the third answer completes the task with every answer it got. */
const QUESTIONS = ['Proceed?', 'Are you sure?', 'Really sure?'];
class DialogExecutor extends BaseExecutor {
  /** Each task's answers, in the order they were delivered (the first message is the request, not an answer). */
  private readonly answers = new Map<string, string[]>();

  async run(ctx: RequestContext, bus: ExecutionEventBus): Promise<void> {
    bus.publish(taskEvent(ctx, TaskState.TASK_STATE_WORKING));
    const answers = this.answers.get(ctx.taskId) ?? [];
    if (ctx.task) answers.push(textOf(ctx.userMessage));
    this.answers.set(ctx.taskId, answers);
    if (answers.length < QUESTIONS.length) {
      bus.publish(statusEvent(ctx.taskId, ctx.contextId, TaskState.TASK_STATE_INPUT_REQUIRED, { text: QUESTIONS[answers.length]! }));
      return;
    }
    this.complete(ctx, bus, `done: ${answers.join(', ')}`);
  }
}

/**
 * A NEXUS agent as seed 000 describes one: `message/send` with `{type, data}` parts at its root URL, answered
 * `{id, status, messages, artifacts}`. It answers with the parts it was sent, and a few of its own.
 */
async function startNexusAgent() {
  const calls: any[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      // No card (the seed: "agents work without an agent card"): JSON-RPC POSTs at the root only.
      if (req.method !== 'POST' || req.url !== '/') return void res.writeHead(404).end();
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      const reply = (x: unknown) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: body.id, ...(x as object) }));
      const p = body.params ?? {};
      if (body.method !== 'message/send') return reply({ error: { code: -32601, message: `Method not found: ${body.method}` } });
      if (!p.message) return reply({ error: { code: -32602, message: 'Invalid params' } });
      calls.push(p);
      const own = [
        { type: 'image', data: { url: 'https://example.com/chart.png', alt: 'the chart', width: 640 } },
        { type: 'text', data: { summary: 'three parts', count: 3 } },
      ];
      const agent = { role: 'agent', parts: [{ type: 'text', data: 'Here they are' }] };
      reply({ result: { id: p.id, status: 'completed', messages: [p.message, agent], artifacts: [{ name: 'echo', parts: [...p.message.parts, ...own] }] } });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  closers.push(() => new Promise<void>((r) => server.close(() => r())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, calls };
}

before(async () => {
  gw = await startGateway({ hub: {} });
  const agent = await startV1Agent(new DialogExecutor(), 'Confirmer', 'Asks three times before it acts', {});
  agents.push(agent);
  dialog = { ...(await register(gw, agent.url)), agent };
});
after(async () => {
  await gw?.close();
  await Promise.all([...agents.map((a) => a.close().catch(() => {})), ...closers.map((c) => c())]);
});

const sends = (a: TestAgent) => a.calls.filter((c) => /^(SendMessage|SendStreamingMessage)$/.test(c.method)).length;

describe('NEXUS (seed 000) parts: data is "any"', () => {
  test('an object with url keeps alt, width and duration both ways, and a text part whose data is an object goes and comes back as it was', async () => {
    const nexus = await startNexusAgent();
    const { rpc: endpoint, id: agentId } = await register(gw, nexus.url, { protocol: 'nexus', name: 'Media agent' });
    const parts = [
      { type: 'text', data: 'Caption these' },
      { type: 'image', data: { url: 'https://example.com/cat.png', alt: 'a cat', width: 800, height: 600 } },
      { type: 'video', data: { url: 'https://example.com/clip.mp4', mimeType: 'video/mp4', duration: 12.5 } },
      { type: 'file', data: { uri: 'https://example.com/a.pdf', name: 'a.pdf', pages: 3 } },
      { type: 'text', data: { lang: 'en', text: 'structured' } },
      { type: 'text', data: 42 },
    ];
    const message = { role: 'user', parts };
    const taskId = `nx-media-${randomUUID()}`;
    const answer = (await rpc(endpoint, { jsonrpc: '2.0', id: taskId, method: 'message/send', params: { id: taskId, message } })).json;
    assert.equal(answer.result?.status, 'completed', JSON.stringify(answer));
    // Client → agent: the NEXUS agent gets every part as the client sent it.
    assert.deepEqual(nexus.calls[0].message, message);
    // Agent → client: its parts (the client's, echoed, and its own) come back as it wrote them.
    const own = [
      { type: 'image', data: { url: 'https://example.com/chart.png', alt: 'the chart', width: 640 } },
      { type: 'text', data: { summary: 'three parts', count: 3 } },
    ];
    assert.deepEqual(answer.result.artifacts[0].parts, [...parts, ...own]);
    assert.deepEqual(answer.result.messages[0], message);
    // A 1.0 client reading the same task sees a file part (the keys it has no field for in its metadata) and data parts.
    const v1 = (await rpc(`${gw.url}/agents/${agentId}/a2a`, { jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: taskId } }, { 'A2A-Version': '1.0' })).json.result;
    const image = v1.artifacts[0].parts[1];
    assert.equal(image.url, 'https://example.com/cat.png');
    assert.deepEqual(image.metadata.nexusData, { alt: 'a cat', width: 800, height: 600 });
    assert.deepEqual(v1.artifacts[0].parts[4].data, { lang: 'en', text: 'structured' });
  });

  test('a text part without data (nor text) is -32602 naming the field', async () => {
    const bad = (await rpc(`${gw.url}/api/v1/a2a`, { jsonrpc: '2.0', id: 'n1', method: 'message/send', params: { message: { role: 'user', parts: [{ type: 'text' }] } } })).json;
    assert.equal(bad.id, 'n1');
    assert.equal(bad.error.code, -32602);
    assert.deepEqual(bad.error.data.map((v: any) => v.field), ['message.parts.0.data']);
  });
});

describe("NEXUS's own path /api/v1/a2a names the dialect", () => {
  test('an unknown task is -32602 there, as the seed says; -32001 (the spec) on /a2a and at an agent', async () => {
    for (const method of ['tasks/get', 'tasks/cancel']) {
      const nexusPath = (await rpc(`${gw.url}/api/v1/a2a`, { jsonrpc: '2.0', id: 'u1', method, params: { id: 'no-such-task' } })).json;
      assert.deepEqual([nexusPath.id, nexusPath.error?.code], ['u1', -32602], JSON.stringify(nexusPath));
      assert.match(nexusPath.error.message, /no-such-task/);
      const spec = (await rpc(`${gw.url}/a2a`, { jsonrpc: '2.0', id: 'u2', method, params: { id: 'no-such-task' } })).json;
      assert.equal(spec.error?.code, -32001);
    }
    // 1.0 names its dialect itself: the spec's code on NEXUS's path too.
    const v1 = (await rpc(`${gw.url}/api/v1/a2a`, { jsonrpc: '2.0', id: 'u3', method: 'GetTask', params: { id: 'no-such-task' } }, { 'A2A-Version': '1.0' })).json;
    assert.equal(v1.error?.code, -32001);
  });
});

describe('the same answer twice in a row (NEXUS and Society AI 0.1)', () => {
  const nexusSend = (taskId: string, rpcId: string | number, data: string) =>
    rpc(dialog.rpc, { jsonrpc: '2.0', id: rpcId, method: 'message/send', params: { id: taskId, message: { role: 'user', parts: [{ type: 'text', data }] } } });
  const send01 = (taskId: string, rpcId: string | number, text: string) =>
    rpc(dialog.rpc, { jsonrpc: '2.0', id: rpcId, method: 'tasks/send', params: { id: taskId, sessionId: `s-${taskId}`, message: { role: 'user', parts: [{ type: 'text', text }] } } });
  const question = (t: any) => t.messages?.at(-1)?.parts[0].data ?? t.status?.message?.parts[0].text;

  test("NEXUS's gateway (the task id as every request's JSON-RPC id): yes, yes, yes each answer the next question", async () => {
    const taskId = `nx-dialog-${randomUUID()}`;
    const first = (await nexusSend(taskId, taskId, 'deploy')).json.result;
    assert.deepEqual([first.status, question(first)], ['input-required', 'Proceed?']);
    const second = (await nexusSend(taskId, taskId, 'yes')).json.result;
    assert.deepEqual([second.status, question(second)], ['input-required', 'Are you sure?']);
    const third = (await nexusSend(taskId, taskId, 'yes')).json.result;
    assert.deepEqual([third.status, question(third)], ['input-required', 'Really sure?'], JSON.stringify(third));
    const done = (await nexusSend(taskId, taskId, 'yes')).json.result;
    assert.deepEqual([done.status, done.artifacts[0].parts[0].data], ['completed', 'done: yes, yes, yes']);
  });

  test('a client that numbers every request 1: the same answer twice is two answers', async () => {
    const taskId = `one-${randomUUID()}`;
    assert.equal(question((await send01(taskId, 1, 'deploy')).json.result), 'Proceed?');
    assert.equal(question((await send01(taskId, 1, 'yes')).json.result), 'Are you sure?');
    assert.equal(question((await send01(taskId, 1, 'yes')).json.result), 'Really sure?');
    const done = (await send01(taskId, 1, 'yes')).json.result;
    assert.deepEqual([done.status.state, done.artifacts[0].parts[0].text], ['completed', 'done: yes, yes, yes']);
  });

  test('Society AI (a JSON-RPC id per request): a new id is a new answer; the same request again is a retry, answered and never delivered', async () => {
    const taskId = `soc-${randomUUID()}`;
    assert.equal(question((await send01(taskId, 'req-1', 'deploy')).json.result), 'Proceed?');
    // The first message again, as its own request (its answer lost): a retry, the task as it is.
    const before = sends(dialog.agent);
    assert.equal(question((await send01(taskId, 'req-1', 'deploy')).json.result), 'Proceed?');
    assert.equal(sends(dialog.agent), before, 'the retry reached nobody');
    assert.equal(question((await send01(taskId, 'req-2', 'yes')).json.result), 'Are you sure?');
    // req-2 again (its answer lost): a retry; then "yes" as req-3: the answer to "Are you sure?".
    assert.equal(question((await send01(taskId, 'req-2', 'yes')).json.result), 'Are you sure?');
    assert.equal(sends(dialog.agent), before + 1, 'the retry of req-2 reached nobody');
    assert.equal(question((await send01(taskId, 'req-3', 'yes')).json.result), 'Really sure?');
    // The first message as a new request is an answer too, whatever it says.
    const done = (await send01(taskId, 'req-4', 'deploy')).json.result;
    assert.deepEqual([done.status.state, done.artifacts[0].parts[0].text], ['completed', 'done: yes, yes, deploy']);
    const history = (await rpc(dialog.rpc, { jsonrpc: '2.0', id: 'h', method: 'tasks/get', params: { id: taskId } })).json.result.history;
    assert.deepEqual(history.filter((m: any) => m.role === 'user').map((m: any) => m.parts[0].text), ['deploy', 'yes', 'yes', 'deploy']);
  });
});

describe('smaller surprises (issue 39, section 2, item 6)', () => {
  const V1 = { 'A2A-Version': '1.0' };
  const userMessage = (text: string, metadata?: Record<string, unknown>) => ({ messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...(metadata && { metadata }) });
  const received = (a: TestAgent) => a.calls.filter((c) => /^(SendMessage|SendStreamingMessage)$/.test(c.method)).map((c) => c.params.message.metadata?.switchboard);

  test("fixed: an agent gets its task's id as metadata.switchboard.taskId, and parentTaskId only for a child task: its parent's", async () => {
    const parentAgent = await startEchoAgent();
    const childAgent = await startEchoAgent();
    agents.push(parentAgent, childAgent);
    const p = await register(gw, parentAgent.url);
    const c = await register(gw, childAgent.url);
    const root = (await rpc(p.rpc, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: userMessage('root') } }, V1)).json.result.task;
    assert.deepEqual(received(parentAgent), [{ taskId: root.id }], 'a root task has no parent');
    // The parent's agent starts a child with its agent key, naming the parent as the docs say (the header).
    const key = await agentKey(gw, p.id);
    const headers = { ...V1, authorization: `Bearer ${key}`, 'x-switchboard-parent-task': root.id };
    const child = (await rpc(c.rpc, { jsonrpc: '2.0', id: 2, method: 'SendMessage', params: { message: userMessage('child') } }, headers)).json.result.task;
    assert.deepEqual(received(childAgent), [{ taskId: child.id, parentTaskId: root.id }]);
  });

  test("kept: Switchboard's own NANDA action names stay Switchboard's; a node declaring certificate.* gets the prefix's other actions", async () => {
    const node = await startMutableAgent({ name: 'Certifier node', description: 'Certificates as NANDA actions', skills: [{ id: 'certificate.*', name: 'Certificates', description: 'certificate actions', tags: [] }] });
    agents.push(node);
    const { id } = await register(gw, node.url);
    const action = (fields: Record<string, unknown>) =>
      rpc(`${gw.url}/a2a`, { jsonrpc: '2.0', id: 'a', method: 'message/send', params: { message: { role: 'user', parts: [{ text: JSON.stringify(fields) }] } } });
    const before = node.calls.length;
    const own = (await action({ action: 'certificate.check', cert_id: 'cert-abc-123' })).json;
    assert.equal(own.result?.metadata?.switchboard?.agentId, undefined, JSON.stringify(own));
    assert.equal(node.calls.length, before, "Switchboard's own certificate.check never reaches the node");
    const theirs = (await action({ action: 'certificate.inspect', cert_id: 'cert-abc-123' })).json;
    assert.equal(theirs.result?.metadata?.switchboard?.agentId, id, JSON.stringify(theirs));
    assert.equal(theirs.result.metadata.switchboard.skillId, 'certificate.*');
  });

  test("kept: an agent's reported cost is charged up to the task's hold: nothing for an agent without a price, what it reports for one with", async () => {
    const free = await startEchoAgent({ cost: 42 });
    const priced = await startEchoAgent({ cost: 42 });
    agents.push(free, priced);
    const costOf = async (agentUrl: string, extra: Record<string, unknown>) => {
      const a = await register(gw, agentUrl, extra);
      const task = (await rpc(a.rpc, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: userMessage('work') } }, V1)).json.result.task;
      assert.equal(task.metadata.cost, 42, 'the reported cost is kept on the task either way');
      return eventually(async () => {
        const listed = (await (await gw.fetch(`${gw.url}/tasks?agentId=${a.id}`, {}, 'operator')).json()) as any;
        return listed.tasks.find((t: any) => t.id === task.id && t.costMinor !== null)?.costMinor;
      }, 15_000, 'the settlement');
    };
    assert.equal(await costOf(free.url, {}), 0, 'no price, no hold: nothing is charged');
    assert.equal(await costOf(priced.url, { priceMinor: 100 }), 42, 'the reported cost, within the hold');
  });

  test("kept: a hub agent's card says ws-agent://<its id>, where the gateway reaches it, not the ws-agent://<name> it sent", async () => {
    const reg = (await (await gw.fetch(`${gw.url}/agents`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ url: 'ws-agent://', name: 'openclaw' }) }, 'operator')).json()) as any;
    const key = await agentKey(gw, reg.id);
    const ws = new WebSocket(`${gw.url.replace(/^http/, 'ws')}/hub`, { headers: { authorization: `Bearer ${key}` } });
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    try {
      // Society AI's card, with the seed's example URL.
      const card = { name: 'openclaw', description: 'An agent behind NAT', url: 'ws-agent://openclaw-abc123', version: '1.0.0', capabilities: { streaming: false }, skills: [] };
      const answer = new Promise<any>((resolve) => ws.on('message', (d) => resolve(JSON.parse(d.toString()))));
      ws.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'agent.register', params: card }));
      assert.equal((await answer).result?.url, `ws-agent://${reg.id}`);
      const view = (await (await gw.fetch(`${gw.url}/agents/${reg.id}`, {}, 'operator')).json()) as any;
      assert.equal(view.card.url, `ws-agent://${reg.id}`);
      assert.equal(view.card.description, 'An agent behind NAT', 'the rest of the card as sent');
    } finally {
      ws.close();
    }
  });
});
