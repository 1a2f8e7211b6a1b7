/**
 * The agents of the seed systems, behind Switchboard unchanged (issue 11, the forwarding side). Each stand-in is
 * a plain node:http JSON-RPC server built here from its seed's documented wire shapes, with no SDK: a Society
 * AI-style A2A 0.1 agent (tasks/send, tasks/sendSubscribe, `type` parts, sessionId, a {usd, tokens} cost), NEXUS
 * agents (one with only /.well-known/agent.json, card-less ones at /rpc and at /, each registered with its URL
 * alone), a coding-agent-style 0.3 agent whose stream starts with a status-update and stays open at
 * input-required, and an agent answering a JSON-RPC error. A real @a2a-js/sdk client drives each through a real Switchboard (Temporal dev server, PostgreSQL).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { SendMessageRequest, StreamResponse, Task } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import { A2AClient as A2AClient03 } from 'a2a-sdk-03/client';
import { type Gateway, authFetch, clientFactory, eventually, register, rpc, startGateway } from './helpers/harness';

let gw: Gateway;
const servers: StandIn[] = [];

before(async () => {
  gw = await startGateway();
});
after(async () => {
  await gw?.close();
  await Promise.all(servers.map((s) => s.close()));
});

// ---- stand-ins: one HTTP server each, recording every JSON-RPC call ----

interface RpcCall {
  path: string;
  method: string;
  params: any;
}
interface StandIn {
  url: string;
  calls: RpcCall[];
  probes: RpcCall[];
  close(): Promise<void>;
}
type Reply = (res: ServerResponse) => void;
type Handler = (call: RpcCall & { id: unknown }) => Reply | undefined;

/** A server answering GET `cards` (path → JSON) and JSON-RPC POSTs at `rpcPaths` through `handle`; 404 elsewhere. */
async function standIn(cards: (base: string) => Record<string, unknown>, rpcPaths: string[], handle: Handler): Promise<StandIn> {
  const calls: RpcCall[] = [];
  const probes: RpcCall[] = [];
  const open = new Set<ServerResponse>();
  let base = '';
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = new URL(req.url ?? '/', base).pathname;
      const card = cards(base)[path];
      if (req.method === 'GET' && card) return json(res, 200, card);
      if (req.method !== 'POST' || !rpcPaths.includes(path)) return json(res, 404, { error: 'not found' });
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      const call = { path, method: body.method, params: body.params };
      // Switchboard's dialect probe (empty params, at registration) is kept apart from the calls tasks make.
      if (body.id === 'switchboard-dialect-probe') probes.push(call);
      else calls.push(call);
      let reply: Reply | undefined;
      try {
        reply = handle({ ...call, id: body.id });
      } catch {
        // What a JSON-RPC server answers a call whose params its method cannot read (Switchboard's dialect probe).
        return json(res, 200, { jsonrpc: '2.0', id: body.id, error: { code: -32602, message: 'Invalid params' } });
      }
      if (!reply) return json(res, 200, { jsonrpc: '2.0', id: body.id, error: { code: -32601, message: `Method not found: ${body.method}` } });
      open.add(res);
      res.on('close', () => open.delete(res));
      reply(res);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const s: StandIn = {
    url: base,
    calls,
    probes,
    close: async () => {
      for (const res of open) res.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  servers.push(s);
  return s;
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}
const result = (id: unknown, value: unknown): Reply => (res) => json(res, 200, { jsonrpc: '2.0', id, result: value });
/** An SSE answer: each event a JSON-RPC response; `open` leaves the stream open after the last one. */
const sse = (id: unknown, events: unknown[], open = false): Reply => (res) => {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  for (const e of events) res.write(`data: ${JSON.stringify({ jsonrpc: '2.0', id, result: e })}\n\n`);
  if (!open) res.end();
};

/** Seed 004's stream: each event the bare A2A event, no JSON-RPC envelope. */
const bareSse = (events: unknown[], open = false): Reply => (res) => {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  for (const e of events) res.write(`data: ${JSON.stringify(e)}\n\n`);
  if (!open) res.end();
};

const textOf = (parts: any[] = []) => parts.map((p) => p.text ?? p.data ?? '').join('');

/**
 * Society AI (seed 003), A2A 0.1: the card (no protocolVersion, an `authentication` object) at agent.json; the
 * client names the task; "ask" makes it input-required until the same task id is sent again.
 */
async function startV01Agent(opts: { streaming?: boolean; withCard?: boolean } = {}) {
  const tasks = new Map<string, any>();
  /** tasks/send of "take your time": answered only when the task is canceled (a long blocking call). */
  const held = new Map<string, { id: unknown; res: ServerResponse }>();
  const answer = (p: any) => {
    const text = textOf(p.message.parts);
    const prev = tasks.get(p.id);
    const reply = (t: string) => ({ role: 'agent', parts: [{ type: 'text', text: t }] });
    const task =
      text === 'ask' && !prev
        ? { id: p.id, sessionId: p.sessionId, status: { state: 'input-required', message: reply('Which city?') }, metadata: { executor: { name: 'v01-agent' } } }
        : {
            id: p.id,
            sessionId: p.sessionId,
            status: { state: 'completed', message: reply(prev ? `weather in ${text}: sunny` : `echo: ${text}`) },
            artifacts: [{ name: 'answer', index: 0, parts: [{ type: 'text', text: prev ? `sunny in ${text}` : `echo: ${text}` }] }],
            metadata: { executor: { name: 'v01-agent' }, cost: { usd: 0.42, tokens: 1234 } },
          };
    tasks.set(p.id, task);
    return task;
  };
  return standIn(
    (base) =>
      opts.withCard === false
        ? {}
        : {
            '/.well-known/agent.json': {
              name: 'research-agent',
              description: 'Deep research agent (A2A 0.1, Society AI style)',
              url: `${base}/tasks/process`,
              version: '1.0.0',
              capabilities: { streaming: opts.streaming ?? false, pushNotifications: false, stateTransitionHistory: true },
              skills: [{ id: 'research-topic', name: 'Topic Research', description: 'Research any topic', tags: ['research'] }],
              authentication: { schemes: ['bearer'], credentials: null },
            },
          },
    ['/tasks/process'],
    ({ id, method, params }) => {
      if (method === 'tasks/send' && textOf(params.message.parts) === 'take your time') return (res) => void held.set(params.id, { id, res });
      if (method === 'tasks/send') return result(id, answer(params));
      if (method === 'tasks/sendSubscribe') {
        const task = answer(params);
        const ids = { id: params.id, sessionId: params.sessionId };
        return sse(id, [
          { ...ids, status: { state: 'working', message: { role: 'agent', parts: [{ type: 'text', text: 'Researching...' }] } }, final: false },
          ...(task.artifacts ?? []).map((artifact: unknown) => ({ ...ids, artifact })),
          { ...ids, status: task.status, final: true, metadata: task.metadata },
        ]);
      }
      if (method === 'tasks/get') return tasks.has(params.id) ? result(id, tasks.get(params.id)) : (res) => json(res, 200, { jsonrpc: '2.0', id, error: { code: -32001, message: 'Task not found' } });
      if (method === 'tasks/cancel') {
        const t = tasks.get(params.id);
        if (t) t.status = { state: 'canceled' };
        const waiting = held.get(params.id);
        if (waiting && !waiting.res.writableEnded) json(waiting.res, 200, { jsonrpc: '2.0', id: waiting.id, result: { id: params.id, status: { state: 'canceled' } } });
        return result(id, t ?? { id: params.id, status: { state: 'canceled' } });
      }
      return undefined;
    },
  );
}

/** NEXUS (seed 000): message/send with {type, data} parts, answered {id, status, messages, artifacts}. */
async function startNexusAgent(opts: { card: boolean; rpcPath: '/' | '/rpc' }) {
  const tasks = new Map<string, any>();
  return standIn(
    (base) =>
      opts.card
        ? {
            '/.well-known/agent.json': {
              name: 'Echo Agent',
              description: 'A simple agent that echoes back messages.',
              url: base,
              version: '1.0.0',
              capabilities: { streaming: false, pushNotifications: false, stateTransitionHistory: false },
              skills: [{ id: 'echo', name: 'Echo', description: 'Echoes back the input message', tags: ['utility', 'testing'] }],
              authentication: { schemes: ['bearer'] },
            },
          }
        : {},
    [opts.rpcPath],
    ({ id, method, params }) => {
      if (method === 'message/send') {
        const text = textOf(params.message.parts);
        const task = {
          id: params.id,
          status: 'completed',
          messages: [params.message, { role: 'agent', parts: [{ type: 'text', data: `Here is the summary: ${text}` }] }],
          artifacts: [{ name: 'summary', description: 'Article summary', parts: [{ type: 'text', data: `summary of ${text}` }] }],
        };
        tasks.set(params.id, task);
        return result(id, task);
      }
      if (method === 'tasks/get') {
        const t = tasks.get(params.id);
        return t ? result(id, t) : (res) => json(res, 200, { jsonrpc: '2.0', id, error: { code: -32602, message: 'Invalid params: task not found' } });
      }
      return undefined;
    },
  );
}

/**
 * coding-agent-a2a (seed 004), 0.3: message/stream starts with a status-update (no Task). A prompt with "rm" asks
 * for approval: input-required, final: false, and the stream stays open; the answer (same taskId) resumes it.
 * `closesAtQuestion`: the question is `final: true` instead, and the agent ends its stream there.
 */
async function startCodingAgent(opts: { closesAtQuestion?: boolean } = {}) {
  const waiting = new Set<string>();
  const known = new Set<string>();
  const paused: ServerResponse[] = [];
  const agent = await standIn(
    (base) => ({
      '/.well-known/agent-card.json': {
        name: 'coding-agent-a2a (cursor)',
        description: 'Delegates coding tasks to the cursor agent and streams results back via the A2A protocol.',
        protocolVersion: '0.3.0',
        version: '0.1.0',
        url: `${base}/a2a/jsonrpc`,
        capabilities: { streaming: true, pushNotifications: false, stateTransitionHistory: true },
        defaultInputModes: ['text/plain'],
        defaultOutputModes: ['text/plain', 'application/json'],
        skills: [{ id: 'code-task', name: 'Execute coding task', description: 'Runs a coding task', tags: ['coding'] }],
      },
    }),
    ['/a2a/jsonrpc'],
    ({ id, method, params }) => {
      // tasks/cancel and tasks/get read `params.taskId` (the seed's spelling); a cancel of a known task ends it.
      if (method === 'tasks/cancel' || method === 'tasks/get') {
        if (!known.has(params.taskId)) return (res) => json(res, 200, { jsonrpc: '2.0', id, error: { code: -32001, message: 'TaskNotFound' } });
        if (method === 'tasks/cancel') waiting.delete(params.taskId);
        return result(id, { kind: 'task', id: params.taskId, contextId: 'c', status: { state: method === 'tasks/cancel' ? 'canceled' : 'input-required' } });
      }
      if (method !== 'message/stream') return undefined;
      const m = params.message;
      const resumed = m.taskId && waiting.has(m.taskId);
      const taskId = resumed ? m.taskId : randomUUID();
      known.add(taskId);
      const ids = { taskId, contextId: m.contextId ?? randomUUID() };
      const status = (state: string, final: boolean, text?: string) => ({
        kind: 'status-update', ...ids, final,
        status: { state, timestamp: new Date().toISOString(), ...(text ? { message: { kind: 'message', messageId: randomUUID(), role: 'agent', parts: [{ kind: 'text', text }] } } : {}) },
      });
      const artifact = (text: string) => ({ kind: 'artifact-update', ...ids, artifact: { artifactId: `res-${taskId}`, name: 'result', parts: [{ kind: 'text', text }] } });
      if (resumed) {
        waiting.delete(taskId);
        return bareSse([status('working', false), artifact(`approved with "${textOf(m.parts)}": build removed`), status('completed', true)]);
      }
      if (textOf(m.parts).includes('rm')) {
        waiting.add(taskId);
        return (res) => {
          paused.push(res);
          const question = status('input-required', opts.closesAtQuestion === true, 'Approve running `rm -rf build`? (y/n)');
          bareSse([status('working', false), question], !opts.closesAtQuestion)(res);
        };
      }
      return bareSse([status('working', false), artifact(`done: ${textOf(m.parts)}`), status('completed', true)]);
    },
  );
  return { ...agent, paused };
}

/**
 * An agent that refuses every new task with a JSON-RPC error of its own (streaming: as the stream's one SSE event);
 * `askFirst`: it asks for input on a new task, and refuses the follow-up instead.
 */
async function startErrorAgent(opts: { streaming?: boolean; askFirst?: boolean } = {}) {
  const error = { code: -32031, message: 'Model quota exhausted for this key' };
  return standIn(
    (base) => ({
      '/.well-known/agent-card.json': {
        name: 'Quota agent', description: 'Refuses', protocolVersion: '0.3.0', version: '1', url: `${base}/rpc`,
        capabilities: { streaming: opts.streaming ?? false }, defaultInputModes: [], defaultOutputModes: [], skills: [],
      },
    }),
    ['/rpc'],
    ({ id, method, params }) => {
      const message = (params as { message?: { taskId?: string; contextId?: string } } | undefined)?.message;
      if (method === 'message/send' && opts.askFirst && !message?.taskId) {
        const task = {
          kind: 'task', id: randomUUID(), contextId: message?.contextId ?? randomUUID(),
          status: { state: 'input-required', message: { kind: 'message', role: 'agent', messageId: randomUUID(), parts: [{ kind: 'text', text: 'Which model?' }] } },
        };
        return (res) => json(res, 200, { jsonrpc: '2.0', id, result: task });
      }
      if (method === 'message/send') return (res) => json(res, 200, { jsonrpc: '2.0', id, error });
      if (method === 'message/stream') {
        return (res) => {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.end(`data: ${JSON.stringify({ jsonrpc: '2.0', id, error })}\n\n`);
        };
      }
      return undefined;
    },
  );
}

// ---- the client side: a real SDK client of the agent's gateway endpoint ----

const clientOf = (agentId: string): Promise<Client> => clientFactory(gw.keys.client).createFromUrl(`${gw.url}/agents/${agentId}/.well-known/agent-card.json`, '');

async function send(client: Client, text: string, extra: Record<string, unknown> = {}): Promise<any> {
  const reply = await client.sendMessage(SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...extra } }));
  assert.ok(!('messageId' in reply), 'the gateway answers with a task');
  return Task.toJSON(reply as Task);
}

/** A 0.3 client (@a2a-js/sdk 0.3.13, as the coding-agent seed's users have) of the gateway's agent `id`, from its card. */
const client03Of = (id: string) => A2AClient03.fromCardUrl(`${gw.url}/agents/${id}/.well-known/agent-card.json`, { fetchImpl: authFetch(gw.keys.client) });

const message03 = (text: string) => ({ kind: 'message' as const, messageId: randomUUID(), role: 'user' as const, parts: [{ kind: 'text' as const, text }] });

const agentView = async (id: string): Promise<any> => (await gw.fetch(`${gw.url}/agents/${id}`, {}, 'operator')).json();

describe('A2A 0.1 agents (Society AI)', () => {
  test('a card without protocolVersion in 0.1 shape: tasks/send with the gateway task id and the client context as sessionId; answers, metadata and cost come back', async () => {
    const agent = await startV01Agent();
    const { id } = await register(gw, agent.url, { priceMinor: 500 });
    assert.equal((await agentView(id)).endpoint.protocolVersion, '0.1');
    const client = await clientOf(id);
    const contextId = `session-${randomUUID()}`;
    const task = await send(client, 'What is quantum computing?', { contextId });
    assert.equal(task.status.state, 'TASK_STATE_COMPLETED');
    assert.equal(textOf(task.status.message.parts), 'echo: What is quantum computing?');
    assert.equal(textOf(task.artifacts[0].parts), 'echo: What is quantum computing?');
    assert.equal(task.contextId, contextId);
    const call = agent.calls.find((c) => c.method === 'tasks/send')!;
    assert.equal(call.params.id, task.id, 'the 0.1 task id is the gateway task id');
    assert.equal(call.params.sessionId, contextId, "the client's context reaches the agent as sessionId");
    assert.deepEqual(call.params.message.parts, [{ type: 'text', text: 'What is quantum computing?' }]);
    assert.deepEqual(task.metadata.executor, { name: 'v01-agent' }, "the agent's task metadata reaches the client");
    assert.deepEqual(task.metadata.cost, { usd: 0.42, tokens: 1234 });
    const settled = await eventually(async () => (await gw.db.pool.query('SELECT amount_minor FROM settlements WHERE task_id = $1', [task.id])).rows[0], 15_000, 'settlement');
    assert.equal(Number(settled.amount_minor), 42, '{usd: 0.42} is charged as 42 minor units (cents), not the 500 list price');
  });

  test('input-required and the answer continue the same 0.1 task id; streaming agents get tasks/sendSubscribe', async () => {
    const agent = await startV01Agent({ streaming: true });
    const { id } = await register(gw, agent.url);
    const client = await clientOf(id);
    const first = await send(client, 'ask');
    assert.equal(first.status.state, 'TASK_STATE_INPUT_REQUIRED');
    assert.equal(textOf(first.status.message.parts), 'Which city?');
    const second = await send(client, 'Paris', { taskId: first.id, contextId: first.contextId });
    assert.equal(second.status.state, 'TASK_STATE_COMPLETED');
    assert.equal(textOf(second.artifacts[0].parts), 'sunny in Paris');
    const sends = agent.calls.filter((c) => c.method === 'tasks/sendSubscribe');
    assert.equal(sends.length, 2);
    assert.equal(sends[0]!.params.id, first.id);
    assert.equal(sends[1]!.params.id, first.id, 'the answer goes to the same 0.1 task');
  });

  test("a 0.1 client's params.metadata (the seed's requester, executor, skill_used, user_id) reaches 0.1 agents as params.metadata, every turn, sent or streamed", async () => {
    // Verbatim from the seed ("Request example"): Society AI's metadata.
    const metadata = { requester: { name: 'ai-chatbot' }, executor: { name: 'research-agent' }, skill_used: 'research-topic', user_id: 'user-uuid' };
    for (const streaming of [false, true]) {
      const agent = await startV01Agent({ streaming });
      const { rpc: rpcUrl } = await register(gw, agent.url);
      const taskId = `meta-${randomUUID()}`;
      const send = async (text: string) =>
        (await rpc(rpcUrl, { jsonrpc: '2.0', id: 'req-1', method: 'tasks/send', params: { id: taskId, sessionId: 'session-uuid', message: { role: 'user', parts: [{ type: 'text', text }] }, metadata } })).json;
      const asked = await send('ask');
      assert.equal(asked.result?.status.state, 'input-required', JSON.stringify(asked));
      const done = await send('Paris');
      assert.equal(done.result?.status.state, 'completed', JSON.stringify(done));
      const calls = agent.calls.filter((c) => c.method === (streaming ? 'tasks/sendSubscribe' : 'tasks/send'));
      assert.deepEqual(calls.map((c) => c.params.id), [taskId, taskId]);
      for (const call of calls) {
        assert.deepEqual(call.params.metadata, metadata, `${call.method}: the request's metadata, as the client sent it`);
        assert.equal(call.params.sessionId, 'session-uuid');
      }
      assert.deepEqual(calls.map((c) => c.params.message.parts), [[{ type: 'text', text: 'ask' }], [{ type: 'text', text: 'Paris' }]]);
    }
  });

  test('a card-less 0.1 agent registers with protocol, name and skills; cancel goes as tasks/cancel', async () => {
    const agent = await startV01Agent({ withCard: false });
    const { id } = await register(gw, `${agent.url}/tasks/process`, { protocol: '0.1', name: 'Card-less researcher', skills: [{ id: 'research-topic', name: 'Topic Research' }] });
    const view = await agentView(id);
    assert.equal(view.cardUrl, null);
    assert.equal(view.name, 'Card-less researcher');
    assert.deepEqual(view.card.skills.map((s: any) => s.id), ['research-topic']);
    const client = await clientOf(id);
    const asked = await send(client, 'ask');
    assert.equal(asked.status.state, 'TASK_STATE_INPUT_REQUIRED');
    const canceled = Task.toJSON(await client.cancelTask({ tenant: '', id: asked.id, metadata: undefined })) as any;
    assert.equal(canceled.status.state, 'TASK_STATE_CANCELED');
    await eventually(() => agent.calls.find((c) => c.method === 'tasks/cancel' && c.params.id === asked.id), 15_000, 'tasks/cancel at the agent');
  });

  test('a cancel during the first blocking call to a 0.1 agent reaches it as tasks/cancel, with the task id it was sent', async () => {
    const agent = await startV01Agent();
    const { id } = await register(gw, agent.url);
    const client = await clientOf(id);
    const sending = send(client, 'take your time').then((t) => t, (err: unknown) => err);
    const call = await eventually(() => agent.calls.find((c) => c.method === 'tasks/send'), 15_000, 'the blocking tasks/send at the agent');
    const canceled = Task.toJSON(await client.cancelTask({ tenant: '', id: call.params.id, metadata: undefined })) as any;
    assert.equal(canceled.status.state, 'TASK_STATE_CANCELED');
    const told = await eventually(() => agent.calls.find((c) => c.method === 'tasks/cancel'), 15_000, 'tasks/cancel at the agent');
    assert.equal(told.params.id, call.params.id, 'the 0.1 task id the call was sent with');
    const answered = (await sending) as any;
    assert.equal(answered.status?.state, 'TASK_STATE_CANCELED', String(answered));
  });
});

describe('NEXUS agents', () => {
  for (const shape of [
    { name: 'with only /.well-known/agent.json, answering at /', card: true, rpcPath: '/' as const },
    { name: 'with no card, answering at /rpc (found by probing)', card: false, rpcPath: '/rpc' as const },
    { name: 'with no card, answering at /', card: false, rpcPath: '/' as const },
  ]) {
    test(`${shape.name}: registered with its URL alone; message/send with {type, data} parts, the answer translated`, async () => {
      const agent = await startNexusAgent(shape);
      // The URL alone. With the seed's own Echo Agent card: the card is 0.x without a version, and the endpoint has
      // message/send but no tasks/send, so it is NEXUS. Without a card: the endpoint has message/send, and a
      // tasks/get of a task it does not have is the seed's -32602 (0.3's would be -32001), so it is NEXUS.
      const { id } = await register(gw, agent.url);
      const view = await agentView(id);
      assert.equal(view.endpoint.protocolVersion, 'nexus');
      if (!shape.card) assert.deepEqual(agent.probes.map((c) => c.method), ['tasks/send', 'message/send', 'tasks/get']);
      assert.equal(view.endpoint.url.replace(/\/$/, ''), `${agent.url}${shape.rpcPath === '/rpc' ? '/rpc' : ''}`);
      const client = await clientOf(id);
      const task = await send(client, 'Summarize this article...');
      assert.equal(task.status.state, 'TASK_STATE_COMPLETED');
      assert.equal(textOf(task.status.message.parts), 'Here is the summary: Summarize this article...');
      assert.equal(task.artifacts[0].name, 'summary');
      assert.equal(textOf(task.artifacts[0].parts), 'summary of Summarize this article...');
      const call = agent.calls.find((c) => c.method === 'message/send')!;
      assert.equal(call.params.id, task.id, 'params.id is the gateway task id');
      assert.deepEqual(call.params.message, { role: 'user', parts: [{ type: 'text', data: 'Summarize this article...' }] });
      // A refresh probes the endpoint found at registration, reads no card when there is none, and keeps the dialect.
      const refreshed = (await (await gw.fetch(`${gw.url}/agents/${id}/refresh`, { method: 'POST' }, 'operator')).json()) as any;
      assert.equal(refreshed.status, 'healthy', refreshed.statusReason);
      assert.equal(refreshed.liveness.lastProbe.card.outcome, shape.card ? 'unchanged' : 'none');
      assert.deepEqual(refreshed.endpoint, view.endpoint);
    });
  }

  test("a NEXUS client's image, file and other parts reach a NEXUS agent, and come back in its task, as they were sent", async () => {
    const agent = await startNexusAgent({ card: false, rpcPath: '/rpc' });
    const { rpc: endpoint } = await register(gw, agent.url);
    // The seed's Part is {type, data}, data "any": an image by URL, a file object, base64 content, a type of its own.
    const parts = [
      { type: 'text', data: 'Describe these' },
      { type: 'image', data: 'https://example.com/cat.png' },
      { type: 'file', data: { name: 'notes.txt', mimeType: 'text/plain', bytes: 'aGVsbG8=' } },
      { type: 'image', data: { url: 'https://example.com/dog.png', mimeType: 'image/png' } },
      { type: 'audio', data: 'UklGRiQ=' },
      { type: 'table', data: { columns: ['a'], rows: [[1]] } },
      { type: 'json', data: [1, 2] },
    ];
    const message = { role: 'user', parts };
    const answer = (await rpc(endpoint, { jsonrpc: '2.0', id: 1, method: 'message/send', params: { id: `nx-parts-${randomUUID()}`, message } })).json;
    assert.equal(answer.result?.status, 'completed', JSON.stringify(answer));
    const call = agent.calls.find((c) => c.method === 'message/send')!;
    assert.deepEqual(call.params.message, message, 'the agent gets the parts as the client sent them');
    // The agent's task echoes the message in `messages`: read back through Switchboard, it is the same again.
    assert.deepEqual(answer.result.messages[0], message);
  });

  test('a NEXUS registration with no endpoint at / or /rpc is refused, naming both', async () => {
    const nothing = await standIn(() => ({}), [], () => undefined);
    const res = await gw.fetch(`${gw.url}/agents`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ url: nothing.url, protocol: 'nexus' }) }, 'operator');
    assert.equal(res.status, 422);
    assert.match(((await res.json()) as { error: string }).error, /no NEXUS JSON-RPC endpoint answered at \/ or \/rpc/);
  });
});

describe('coding-agent-style streams (0.3)', () => {
  test('a stream that starts with a status-update completes the task', async () => {
    const agent = await startCodingAgent();
    const { id } = await register(gw, agent.url);
    const task = await send(await clientOf(id), 'Explain the main function');
    assert.equal(task.status.state, 'TASK_STATE_COMPLETED');
    assert.equal(textOf(task.artifacts[0].parts), 'done: Explain the main function');
  });

  test('input-required with the stream left open ends the turn at once; the answer resumes the same agent task', async () => {
    const agent = await startCodingAgent();
    const { id } = await register(gw, agent.url);
    const client = await clientOf(id);
    const started = Date.now();
    const asked = await send(client, 'rm the build directory');
    assert.equal(asked.status.state, 'TASK_STATE_INPUT_REQUIRED');
    assert.equal(textOf(asked.status.message.parts), 'Approve running `rm -rf build`? (y/n)', 'the prompt reaches the client');
    assert.ok(Date.now() - started < 10_000, `the turn ended when the agent asked (${Date.now() - started} ms), not at the attempt timeout`);
    await eventually(() => agent.paused.every((res) => res.destroyed || res.writableEnded), 5_000, 'the open agent stream to be closed');
    const done = await send(client, 'y', { taskId: asked.id, contextId: asked.contextId });
    assert.equal(done.status.state, 'TASK_STATE_COMPLETED');
    assert.equal(textOf(done.artifacts[0].parts), 'approved with "y": build removed');
    const streams = agent.calls.filter((c) => c.method === 'message/stream');
    assert.equal(streams.length, 2, 'the turn was sent once, never re-sent');
    assert.ok(streams[1]!.params.message.taskId, 'the answer names the agent task');
  });

  test("a 0.3 client's message/stream stays open at input-required when the agent's did (final: false), and ends at the task's end after the answer", async () => {
    const agent = await startCodingAgent();
    const { id } = await register(gw, agent.url);
    const client03 = await client03Of(id);
    const events: any[] = [];
    let answer: any;
    for await (const e of client03.sendMessageStream({ message: message03('rm the build directory') })) {
      events.push(e);
      if (e.kind === 'status-update' && e.status.state === 'input-required') {
        assert.equal(e.final, false, 'the question is not final: the stream stays open, as the agent keeps its own');
        // The seed's resume: message/send with the answer, on the same task; the open stream shows the rest.
        answer = await client03.sendMessage({ message: { ...message03('y'), taskId: e.taskId, contextId: e.contextId } });
      }
    }
    assert.ok(answer && !('error' in answer), JSON.stringify(answer));
    const shown = events.map((e) => [e.kind, e.status?.state ?? textOf(e.artifact?.parts), e.final ?? null]);
    assert.deepEqual(shown.at(-1), ['status-update', 'completed', true], JSON.stringify(shown));
    assert.ok(shown.some(([kind, what]) => kind === 'artifact-update' && what === 'approved with "y": build removed'), JSON.stringify(shown));
    assert.ok(shown.slice(0, -1).every(([, , final]) => final !== true), `only the last event is final: ${JSON.stringify(shown)}`);
    assert.equal(agent.calls.filter((c) => c.method === 'message/stream').length, 2, 'each message reached the agent once');
  });

  test('an agent that ends its stream at input-required (final: true) ends the 0.3 stream there; a 1.0 stream ends there either way', async () => {
    const closing = await startCodingAgent({ closesAtQuestion: true });
    const closingId = (await register(gw, closing.url)).id;
    const last03 = async (agentId: string) => {
      const events: any[] = [];
      for await (const e of (await client03Of(agentId)).sendMessageStream({ message: message03('rm the build directory') })) events.push(e);
      return events.at(-1);
    };
    const end03 = await last03(closingId);
    assert.deepEqual([end03.kind, end03.status?.state, end03.final], ['status-update', 'input-required', true]);
    // The agent that keeps its stream open, to a 1.0 client: 1.0 has no `final`, its stream ends with the turn.
    const open = await startCodingAgent();
    const client = await clientOf((await register(gw, open.url)).id);
    const states: string[] = [];
    const request = SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'rm the build directory' }] } });
    for await (const e of client.sendMessageStream(request)) {
      const json = StreamResponse.toJSON(e) as any;
      states.push(json.statusUpdate?.status.state ?? json.task?.status.state ?? Object.keys(json)[0]);
    }
    assert.equal(states.at(-1), 'TASK_STATE_INPUT_REQUIRED', JSON.stringify(states));
  });

  test("a cancel reaches the agent as the seed reads it ({taskId}) and the paused task ends canceled", async () => {
    const agent = await startCodingAgent();
    const { id } = await register(gw, agent.url);
    const client = await clientOf(id);
    const asked = await send(client, 'rm the build directory');
    assert.equal(asked.status.state, 'TASK_STATE_INPUT_REQUIRED');
    const canceled = Task.toJSON(await client.cancelTask({ tenant: '', id: asked.id, metadata: undefined })) as any;
    assert.equal(canceled.status.state, 'TASK_STATE_CANCELED');
    const cancel = agent.calls.find((c) => c.method === 'tasks/cancel');
    assert.ok(cancel?.params.taskId, JSON.stringify(agent.calls.map((c) => [c.method, c.params])));
  });
});

/**
 * A NANDA node (seed 001): no card, one POST /a2a endpoint, message/send with the action as JSON in the text part,
 * answered as `{"role":"agent","parts":[{"text":…}]}` (no `kind`); -32600 for a message/send without a message.
 */
async function startNandaNode() {
  return standIn(
    () => ({}),
    ['/a2a'],
    ({ id, method, params }) => {
      if (method !== 'message/send') return undefined;
      if (!params?.message) return (res) => json(res, 200, { jsonrpc: '2.0', id, error: { code: -32600, message: 'Invalid request: missing message' } });
      const { action, cert_id } = JSON.parse(params.message.parts[0].text);
      return result(id, { role: 'agent', parts: [{ text: JSON.stringify({ status: action === 'certificate.check' ? 'valid' : 'unknown', cert_id }) }] });
    },
  );
}

/**
 * A NANDA node that checks what the seed's -32600 names ("missing jsonrpc/method/message") before it looks at the
 * method: any call without a message is -32600, whatever its method; then a method other than message/send is
 * -32601, and an action it does not know -32601 too ("unknown action").
 */
async function startShapeFirstNandaNode() {
  return standIn(
    () => ({}),
    ['/a2a'],
    ({ id, method, params }) => {
      if (!params?.message) return (res) => json(res, 200, { jsonrpc: '2.0', id, error: { code: -32600, message: 'Invalid request: missing jsonrpc/method/message' } });
      if (method !== 'message/send') return undefined;
      const { action, cert_id } = JSON.parse(params.message.parts[0].text);
      if (action !== 'certificate.check') return (res) => json(res, 200, { jsonrpc: '2.0', id, error: { code: -32601, message: `Method not found: unknown action ${action}` } });
      return result(id, { role: 'agent', parts: [{ text: JSON.stringify({ status: 'valid', cert_id }) }] });
    },
  );
}

/** The seed's request, verbatim. */
const SEED_REQUEST = {
  jsonrpc: '2.0',
  method: 'message/send',
  params: { message: { role: 'user', parts: [{ text: '{"action": "certificate.check", "cert_id": "cert-abc-123"}' }] } },
  id: 'req-001',
};

describe('NANDA nodes', () => {
  test('a node that refuses a call without a message (-32600) before it looks at the method is found to speak message/send, not 0.1, and its actions work', async () => {
    const node = await startShapeFirstNandaNode();
    const { id, rpc: rpcUrl } = await register(gw, node.url);
    const view = await agentView(id);
    assert.deepEqual([view.endpoint.protocolVersion, view.endpoint.url], ['0.3', `${node.url}/a2a`], JSON.stringify(node.probes.map((p) => [p.method, p.params])));
    const raw = await rpc(rpcUrl, SEED_REQUEST);
    assert.deepEqual(raw.json.result?.role, 'agent', JSON.stringify(raw.json));
    assert.deepEqual(JSON.parse(raw.json.result.parts[0].text), { status: 'valid', cert_id: 'cert-abc-123' });
    assert.equal(node.calls.filter((c) => c.method !== 'message/send').length, 0, 'every call a task made was the seed\'s message/send');
  });

  test('"protocol": "nanda" registers a card-less node by its URL, found at /a2a, without asking which dialect', async () => {
    const node = await startShapeFirstNandaNode();
    const { id } = await register(gw, node.url, { protocol: 'nanda', name: 'certifier' });
    const view = await agentView(id);
    assert.deepEqual([view.endpoint.protocolVersion, view.endpoint.url, view.name], ['0.3', `${node.url}/a2a`, 'certifier']);
    assert.deepEqual(node.probes.map((c) => c.method), ['message/send'], 'asked at /a2a (the URL itself is no endpoint): message/send only');
    const res = await gw.fetch(`${gw.url}/agents`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ url: `${node.url}/nothing`, protocol: 'nanda' }) }, 'operator');
    assert.equal(res.status, 422);
  });

  test("the seed's request verbatim at the node's own endpoint (/agents/<id>/a2a) is answered with the seed's bare message", async () => {
    const node = await startNandaNode();
    const { rpc: rpcUrl } = await register(gw, node.url);
    const raw = await rpc(rpcUrl, SEED_REQUEST);
    assert.equal(raw.json.id, 'req-001');
    assert.equal(raw.json.result?.role, 'agent', JSON.stringify(raw.json));
    assert.deepEqual(JSON.parse(raw.json.result.parts[0].text), { status: 'valid', cert_id: 'cert-abc-123' });
    const sent = node.calls.find((c) => c.method === 'message/send');
    assert.equal(sent!.params.message.parts[0].text, SEED_REQUEST.params.message.parts[0].text, 'the node gets the action as the client sent it');
  });

  test('a node without a card registers with its URL alone (found by asking its endpoint) and its kind-less answers reach the client', async () => {
    const node = await startNandaNode();
    const { id } = await register(gw, node.url);
    const view = await agentView(id);
    assert.deepEqual([view.endpoint.protocolVersion, view.endpoint.url], ['0.3', `${node.url}/a2a`]);
    const text = JSON.stringify({ action: 'certificate.check', cert_id: 'cert-abc-123' });
    const reply = await (await clientOf(id)).sendMessage(SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] } }));
    const answer = JSON.stringify(reply);
    assert.match(answer, /\\"status\\":\\"valid\\"/, answer);
    assert.deepEqual(
      node.probes.map((c) => c.method),
      ['tasks/send', 'message/send', 'tasks/get'],
      'asked at /a2a (the URL itself is no endpoint): no tasks/send, a message/send, and a tasks/get answered -32601 (not NEXUS\'s -32602)',
    );
    const sent = node.calls.find((c) => c.method === 'message/send');
    assert.equal(sent!.params.message.parts[0].text, text, 'the action reaches the node as the text it was sent');
  });

  test('a URL where neither a card nor a JSON-RPC endpoint answers is refused, saying both', async () => {
    const nothing = await standIn(() => ({}), [], () => undefined);
    const res = await gw.fetch(`${gw.url}/agents`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ url: nothing.url }) }, 'operator');
    assert.equal(res.status, 422);
    assert.match(((await res.json()) as { error: string }).error, /no agent card could be fetched .*no JSON-RPC endpoint answered/);
  });
});

describe('agent errors', () => {
  test("an agent's JSON-RPC error on a new task is the client's error, code and message", async () => {
    const agent = await startErrorAgent();
    const { id, rpc: rpcUrl } = await register(gw, agent.url);
    await assert.rejects(send(await clientOf(id), 'hello'), (err: any) => {
      assert.equal(err.envelopeCode, -32031);
      assert.equal(err.message, 'Model quota exhausted for this key');
      return true;
    });
    const raw = await rpc(rpcUrl, { jsonrpc: '2.0', id: 7, method: 'message/send', params: { message: { kind: 'message', messageId: randomUUID(), role: 'user', parts: [{ kind: 'text', text: 'hi' }] } } });
    assert.deepEqual([raw.json.error.code, raw.json.error.message], [-32031, 'Model quota exhausted for this key'], 'the 0.3 dialect too');
    assert.equal(agent.calls.length, 2, 'not retried');
  });

  test("an agent's JSON-RPC error on a follow-up turn is the client's error too, and the task fails saying it", async () => {
    const agent = await startErrorAgent({ askFirst: true });
    const { id } = await register(gw, agent.url);
    const client = await clientOf(id);
    const asked = await send(client, 'summarize this');
    assert.equal(asked.status.state, 'TASK_STATE_INPUT_REQUIRED', JSON.stringify(asked));
    await assert.rejects(send(client, 'the big one', { taskId: asked.id, contextId: asked.contextId }), (err: any) => {
      assert.deepEqual([err.envelopeCode, err.message], [-32031, 'Model quota exhausted for this key']);
      return true;
    });
    const got = Task.toJSON(await client.getTask({ tenant: '', id: asked.id, historyLength: 0 })) as any;
    assert.equal(got.status.state, 'TASK_STATE_FAILED');
    assert.match(got.status.message.parts[0].text, /Model quota exhausted for this key/);
    assert.deepEqual(agent.calls.map((c) => c.method), ['message/send', 'message/send'], 'not retried');
  });

  test('the same error as the SSE event of a streaming agent', async () => {
    const agent = await startErrorAgent({ streaming: true });
    const { id } = await register(gw, agent.url);
    await assert.rejects(send(await clientOf(id), 'hello'), (err: any) => {
      assert.deepEqual([err.envelopeCode, err.message], [-32031, 'Model quota exhausted for this key']);
      return true;
    });
    assert.deepEqual(agent.calls.map((c) => c.method), ['message/stream'], 'not retried');
  });
});
