/**
 * The WebSocket hub (GET /hub), Society AI's transport: an agent connects OUT with its agent key and speaks the
 * seed's hub methods (agent.register, heartbeat, task.status, task.artifact, task.complete, agent.search,
 * agent.send_task); Switchboard sends it tasks/send per turn. Two real Switchboard processes (child processes
 * on one Temporal dev server and one PostgreSQL schema): the agent connects to one, clients send to the other.
 * The agent disconnects mid-task and reconnects (the turn is delivered once), the process holding the socket
 * is killed with SIGKILL mid-turn (the turn is delivered after the agent reconnects to the other process), and
 * bad frames, oversize frames, unknown methods and floods get clear errors without harming the process.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import WebSocket from 'ws';
import { SendMessageRequest, Task } from '@a2a-js/sdk';
import { AgentPool, startEchoAgent } from './agents';
import { TEST_ADMIN_KEY, clientFactory, createTestDb, DATABASE_URL, eventually, rememberKeys, rpc, startTemporal, type TestDb } from './helpers/harness';
import { KeyStore } from '../src/core/auth/keys';
import { AgentHub, type HubConnection } from '../src/api/hub/hub';
import { EventHub } from '../src/core/events/hub';
import { freePort, startSwitchboard, type SwitchboardProcess } from './helpers/process';

let env: TestWorkflowEnvironment;
let db: TestDb;
let sbEnv: Record<string, string>;
/** Two Switchboard processes sharing Temporal and PostgreSQL. */
let a: SwitchboardProcess;
let b: SwitchboardProcess;
let clientKey: string;
const agents = new AgentPool();
const sockets: HubAgent[] = [];

const HEARTBEAT_TIMEOUT_MS = 3000;
const MAX_FRAME_BYTES = 64 * 1024;
const FRAMES_PER_SECOND = 50;

before(async () => {
  [env, db] = await Promise.all([startTemporal(), createTestDb()]);
  const url = new URL(DATABASE_URL);
  url.searchParams.set('options', `-c search_path=${db.schema}`);
  sbEnv = {
    DATABASE_URL: url.toString(),
    TEMPORAL_ADDRESS: env.address,
    TEMPORAL_TASK_QUEUE: `hub-${randomBytes(3).toString('hex')}`,
    HOST: '127.0.0.1',
    SWITCHBOARD_ALLOW_PRIVATE_URLS: 'true',
    SWITCHBOARD_ADMIN_KEY: TEST_ADMIN_KEY,
    SWITCHBOARD_UNFUNDED_ACCOUNTS: 'unlimited',
    SWITCHBOARD_HUB_HEARTBEAT_TIMEOUT_MS: String(HEARTBEAT_TIMEOUT_MS),
    SWITCHBOARD_HUB_PING_MS: '1000',
    SWITCHBOARD_HUB_MAX_FRAME_BYTES: String(MAX_FRAME_BYTES),
    SWITCHBOARD_HUB_MAX_FRAMES_PER_SECOND: String(FRAMES_PER_SECOND),
    LOG_LEVEL: 'warn',
  };
  [a, b] = await Promise.all([startSwitchboard({ ...sbEnv, PORT: String(await freePort()) }), startSwitchboard({ ...sbEnv, PORT: String(await freePort()) })]);
  clientKey = (await new KeyStore(db.pool).create({ tenant: 'default', role: 'client', name: 'hub test client' })).key;
  for (const p of [a, b]) rememberKeys(p.url, { admin: TEST_ADMIN_KEY, operator: TEST_ADMIN_KEY, client: clientKey });
});

after(async () => {
  for (const s of sockets) s.ws.terminate();
  await Promise.all([a?.kill(), b?.kill()]);
  await agents.closeAll();
  await db?.drop();
  await env?.teardown();
});

/** A failed assertion shows what both processes printed. */
async function withOutput(fn: () => Promise<void>): Promise<void> {
  try {
    await fn();
  } catch (err) {
    if (err instanceof Error) err.message += `\n--- A ---\n${a?.output()}\n--- B ---\n${b?.output()}`;
    throw err;
  }
}

const admin = (url: string, path: string, body?: unknown) => as(TEST_ADMIN_KEY, url, body === undefined ? 'GET' : 'POST', path, body);

/** A call with `key` (and, for an admin, the tenant it acts in). */
const as = (key: string, url: string, method: string, path: string, body?: unknown, tenant?: string) =>
  fetch(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(tenant ? { 'x-switchboard-tenant': tenant } : {}), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  }).then(async (r) => ({ status: r.status, json: r.status === 204 ? undefined : ((await r.json()) as any) }));

/** Registers a hub agent (ws-agent://) and makes its agent key. */
async function hubAgentOf(name: string, extra: Record<string, unknown> = {}): Promise<{ id: string; key: string }> {
  const reg = await admin(a.url, '/agents', { url: 'ws-agent://', name, ...extra });
  assert.equal(reg.status, 201, JSON.stringify(reg.json));
  assert.match(reg.json.endpoint.url, /^ws-agent:\/\//);
  const key = await admin(a.url, '/tenants/default/keys', { role: 'agent', agentId: reg.json.id, name });
  assert.equal(key.status, 201, JSON.stringify(key.json));
  return { id: reg.json.id, key: key.json.key };
}

type Frame = { jsonrpc: '2.0'; id?: string | number | null; method?: string; params?: any; result?: any; error?: { code: number; message: string } };

/** A Society AI-style agent: connects out, answers turns with `onTurn`, keeps every frame it got. */
class HubAgent {
  readonly frames: Frame[] = [];
  closed?: { code: number; reason: string };
  private nextId = 1;
  private readonly answers = new Map<string | number, (f: Frame) => void>();
  onTurn: (f: Frame, agent: HubAgent) => void = () => undefined;

  private readonly beats: NodeJS.Timeout | undefined;

  /** @param heartbeatMs how often it sends `heartbeat` (0: never, an agent that goes quiet). */
  private constructor(
    readonly ws: WebSocket,
    heartbeatMs: number,
  ) {
    sockets.push(this);
    if (heartbeatMs) this.beats = setInterval(() => ws.readyState === ws.OPEN && this.notify('heartbeat', {}), heartbeatMs);
    ws.on('close', () => clearInterval(this.beats));
    ws.on('message', (data) => {
      const f = JSON.parse(data.toString()) as Frame;
      this.frames.push(f);
      if (f.method === 'tasks/send' || f.method === 'message/send') this.onTurn(f, this);
      else if (f.id !== undefined && f.id !== null && this.answers.has(f.id)) this.answers.get(f.id)!(f);
    });
    ws.on('close', (code, reason) => (this.closed = { code, reason: reason.toString() }));
  }

  static connect(url: string, key: string, heartbeatMs = 1000): Promise<HubAgent> {
    const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/hub`, { headers: { authorization: `Bearer ${key}` } });
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(new HubAgent(ws, heartbeatMs)));
      ws.once('unexpected-response', (_req, res) => reject(new Error(`HTTP ${res.statusCode}`)));
      ws.once('error', reject);
    });
  }

  call(method: string, params?: unknown): Promise<Frame> {
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.answers.set(id, resolve);
      this.ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, ...(params === undefined ? {} : { params }) }));
    });
  }

  notify(method: string, params: unknown): void {
    this.ws.send(JSON.stringify({ jsonrpc: '2.0', method, params }));
  }

  answer(turn: Frame, result: unknown): void {
    this.ws.send(JSON.stringify({ jsonrpc: '2.0', id: turn.id, result }));
  }

  turns(): Frame[] {
    return this.frames.filter((f) => f.method === 'tasks/send' || f.method === 'message/send');
  }

  closedWith(): Promise<{ code: number; reason: string }> {
    if (this.closed) return Promise.resolve(this.closed);
    return new Promise((resolve) => this.ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  }

  close(): Promise<unknown> {
    const closed = this.closedWith();
    this.ws.close();
    return closed;
  }
}

/** The card of the seed's example (research-agent), as the agent registers it. */
const researchCard = {
  name: 'research-agent',
  description: 'Deep research agent that synthesizes multiple sources',
  url: 'https://provider.example.com/tasks/process',
  version: '1.0.0',
  capabilities: { streaming: true, pushNotifications: false, stateTransitionHistory: true },
  skills: [{ id: 'research-topic', name: 'Topic Research', description: 'Research any topic with source citations', tags: ['research', 'papers', 'citations'], examples: ['Research the latest advances in quantum computing'] }],
  authentication: { schemes: ['bearer'], credentials: null },
};

const userMessage = (text: string) => ({ messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] });
const V1 = { 'a2a-version': '1.0' };

async function taskOf(url: string, agentId: string, taskId: string) {
  const got = await rpc(`${url}/agents/${agentId}/a2a`, { jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: taskId } }, { ...V1, authorization: `Bearer ${clientKey}` });
  return got.json.result;
}

describe('WebSocket hub', () => {
  test('the seed\'s frames: register, heartbeat, search, and a turn sent through the other process with a real SDK client', () =>
    withOutput(async () => {
      const nameless = await admin(a.url, '/agents', { url: 'ws-agent://' });
      assert.equal(nameless.status, 400);
      assert.match(nameless.json.error, /give "name"/);
      const { id, key } = await hubAgentOf('research-agent');
      assert.equal((await admin(a.url, `/agents/${id}`)).json.status, 'down', 'down until it connects');
      const agent = await HubAgent.connect(a.url, key);
      const registered = await agent.call('agent.register', researchCard);
      assert.equal(registered.result.url, `ws-agent://${id}`);
      const beat = await agent.call('heartbeat', {});
      assert.equal(beat.result.ok, true);
      const view = await admin(b.url, `/agents/${id}`);
      assert.equal(view.json.status, 'healthy');
      assert.equal(view.json.card.url, `ws-agent://${id}`);
      assert.equal(view.json.card.skills[0].id, 'research-topic');
      const found = await agent.call('agent.search', { q: 'research' });
      assert.ok(found.result.agents.some((x: { id: string }) => x.id === id), JSON.stringify(found));

      // The turn: progress, an artifact, then task.complete, as the seed's hub methods send them.
      agent.onTurn = (turn, ag) => {
        const taskId = turn.params.id;
        ag.notify('task.status', { id: taskId, status: { state: 'working', message: { role: 'agent', parts: [{ type: 'text', text: 'Researching...' }] } }, final: false });
        ag.notify('task.artifact', { id: taskId, artifact: { name: 'report', index: 0, parts: [{ type: 'text', text: 'Quantum computing uses qubits.' }] } });
        ag.notify('task.complete', { id: taskId, status: { state: 'completed', message: { role: 'agent', parts: [{ type: 'text', text: 'Done.' }] } }, metadata: { cost: 7 } });
      };
      const client = await clientFactory(clientKey).createFromUrl(`${b.url}/agents/${id}/a2a`);
      const reply = await client.sendMessage(SendMessageRequest.fromJSON({ message: userMessage('What is quantum computing?') }));
      assert.ok(!('messageId' in reply), 'the gateway answers with a task');
      const task = Task.toJSON(reply as Task) as any;
      assert.equal(task.status.state, 'TASK_STATE_COMPLETED', JSON.stringify(task));
      assert.equal(task.status.message.parts[0].text, 'Done.');
      assert.equal(task.artifacts[0].parts[0].text, 'Quantum computing uses qubits.');
      assert.deepEqual(task.metadata?.cost, 7, 'the cost task.complete reported is shown with the task, as an HTTP agent\'s is');
      const [turn] = agent.turns();
      assert.equal(turn.method, 'tasks/send');
      assert.equal(turn.params.id, task.id, 'the 0.1 task id is the gateway task id');
      assert.equal(turn.params.sessionId, task.contextId);
      assert.deepEqual(turn.params.message.parts, [{ type: 'text', text: 'What is quantum computing?' }]);
      // The agent's updates are in the task's event log, as an HTTP agent's are (streams and push read it).
      const events = await db.pool.query<{ kind: string; event: any }>('SELECT kind, event FROM task_events WHERE task_id = $1 ORDER BY seq', [task.id]);
      const kinds = events.rows.map((r) => r.kind);
      assert.ok(kinds.includes('artifactUpdate'), kinds.join());
      assert.ok(events.rows.some((r) => r.kind === 'statusUpdate' && r.event.statusUpdate.status.message?.parts?.[0]?.text === 'Researching...'), kinds.join());
      await agent.close();
    }));

  test('a card declaring 0.3 gets its turns as message/send (0.3 parts), and may answer with a message', () =>
    withOutput(async () => {
      const { id, key } = await hubAgentOf('modern-agent');
      const agent = await HubAgent.connect(a.url, key);
      const registered = await agent.call('agent.register', { ...researchCard, name: 'modern-agent', protocolVersion: '0.3.0' });
      assert.equal(registered.result.turnMethod, 'message/send');
      agent.onTurn = (turn, ag) => ag.answer(turn, { kind: 'message', role: 'agent', messageId: randomUUID(), parts: [{ kind: 'text', text: `echo: ${turn.params.message.parts[0].text}` }] });
      const sent = await rpc(`${b.url}/agents/${id}/a2a`, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: userMessage('hello') } }, V1);
      // The client gets the agent's Message (A2A §3.1.1), as it would from the agent; the gateway's task records it.
      const reply = sent.json.result.message;
      assert.equal(reply?.parts[0].text, 'echo: hello', JSON.stringify(sent.json));
      assert.equal(reply.taskId, undefined, 'the agent named no task');
      const [turn] = agent.turns();
      assert.equal(turn.method, 'message/send');
      assert.deepEqual(turn.params.message.parts, [{ kind: 'text', text: 'hello' }]);
      assert.equal(turn.params.message.kind, 'message');
      const got = await rpc(`${b.url}/agents/${id}/a2a`, { jsonrpc: '2.0', id: 2, method: 'GetTask', params: { id: turn.params.message.taskId } }, V1);
      assert.equal(got.json.result.status.state, 'TASK_STATE_COMPLETED', JSON.stringify(got.json));
      assert.equal(got.json.result.status.message.parts[0].text, 'echo: hello');
      await agent.close();
    }));

  test('agent.send_task: a child task to another agent joins the caller\'s job', () =>
    withOutput(async () => {
      const echo = await agents.add(startEchoAgent());
      const reg = await admin(a.url, '/agents', { url: echo.url });
      assert.equal(reg.status, 201, JSON.stringify(reg.json));
      const { id, key } = await hubAgentOf('delegating-agent');
      const agent = await HubAgent.connect(b.url, key);
      let child: Frame | undefined;
      agent.onTurn = (turn, ag) => {
        void ag.call('agent.send_task', { agentId: reg.json.id, message: { role: 'user', parts: [{ type: 'text', text: 'echo this' }] } }).then((answer) => {
          child = answer;
          ag.notify('task.complete', { id: turn.params.id, status: { state: 'completed', message: { role: 'agent', parts: [{ type: 'text', text: `child said ${answer.result?.status?.message?.parts?.[0]?.text}` }] } } });
        });
      };
      const sent = await rpc(`${a.url}/agents/${id}/a2a`, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: userMessage('delegate') } }, V1);
      const task = sent.json.result.task;
      assert.equal(task.status.state, 'TASK_STATE_COMPLETED', JSON.stringify(sent.json));
      assert.ok(child?.result, JSON.stringify(child));
      assert.equal(child.result.status.state, 'completed');
      const link = await db.pool.query('SELECT parent_task_id FROM tasks WHERE task_id = $1', [child.result.id]);
      assert.equal(link.rows[0]?.parent_task_id, task.id, 'the child is linked to the task the agent was working on');
      await agent.close();
    }));

  test('the agent disconnects mid-task and reconnects (to the other process): the turn is delivered once', () =>
    withOutput(async () => {
      const { id, key } = await hubAgentOf('flaky-agent');
      const first = await HubAgent.connect(a.url, key);
      let got: Frame | undefined;
      first.onTurn = (turn, ag) => {
        got = turn;
        ag.answer(turn, { id: turn.params.id, status: { state: 'working' } }); // acknowledged, then the connection drops
        ag.ws.terminate();
      };
      const sending = rpc(`${b.url}/agents/${id}/a2a`, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: userMessage('long job') } }, V1);
      await eventually(() => got && first.closed, 20_000, 'the turn and the disconnect');
      // The acknowledgement is recorded: every attempt at the turn reads it before sending (activities/hub.ts), so none
      // sends the turn again, in either process.
      const acked = () => db.pool.query(`SELECT 1 FROM hub_turns WHERE task_id = $1 AND message_id = $2 AND state = 'acked'`, [got!.params.id, got!.id]);
      await eventually(async () => (await acked()).rowCount === 1, 10_000, 'the ack recorded');
      const second = await HubAgent.connect(b.url, key);
      second.onTurn = (turn) => assert.fail(`the acknowledged turn came again: ${JSON.stringify(turn)}`);
      const done = await second.call('task.complete', { id: got!.params.id, status: { state: 'completed', message: { role: 'agent', parts: [{ type: 'text', text: 'finished after reconnecting' }] } } });
      assert.deepEqual(done.result, { ok: true });
      const answer = await sending;
      assert.equal(answer.json.result.task.status.state, 'TASK_STATE_COMPLETED', JSON.stringify(answer.json));
      assert.equal(answer.json.result.task.status.message.parts[0].text, 'finished after reconnecting');
      assert.equal(first.turns().length + second.turns().length, 1);
      await second.close();
    }));

  test('bad frames, oversize frames, unknown methods and a flood of heartbeats: clear errors, no crash', () =>
    withOutput(async () => {
      const { key } = await hubAgentOf('rude-agent');
      // Without a key, or with a client's: no socket.
      await assert.rejects(HubAgent.connect(a.url, 'nope'), /HTTP 401/);
      await assert.rejects(HubAgent.connect(a.url, clientKey), /HTTP 403/);
      const plain = await fetch(`${a.url}/hub`, { headers: { authorization: `Bearer ${key}` } });
      assert.equal(plain.status, 426);

      const agent = await HubAgent.connect(a.url, key, 0);
      const unknown = await agent.call('tasks/explode', {});
      assert.equal(unknown.error?.code, -32601);
      assert.match(unknown.error!.message, /Method not found: tasks\/explode/);
      const bad = await agent.call('task.status', { status: { state: 'working' } });
      assert.equal(bad.error?.code, -32602);
      assert.match(bad.error!.message, /params\.id/);
      const badState = await agent.call('task.status', { id: 'x', status: { state: 'sleeping' } });
      assert.equal(badState.error?.code, -32001, 'a task with no turn open for this agent');
      const notAnObject = await agent.call('heartbeat', [1, 2]);
      assert.equal(notAnObject.error?.code, -32602);

      // A flood: past the frame rate, requests are refused (-32053) and the socket stays open.
      const answers = await Promise.all(Array.from({ length: 500 }, () => agent.call('heartbeat', {})));
      const refused = answers.filter((f) => f.error?.code === -32053);
      assert.ok(refused.length > 0 && refused.length < 500, `${refused.length} refused`);
      assert.match(refused[0].error!.message, /Too many frames/);
      assert.equal(agent.closed, undefined);
      // Refused while the budget is empty; it refills at FRAMES_PER_SECOND.
      const refilled = await eventually(async () => {
        const f = await Promise.race([agent.call('heartbeat', {}), agent.closedWith().then((c) => assert.fail(`the socket closed: ${c.code} ${c.reason}`))]);
        return f.error?.code === -32053 ? undefined : f;
      }, 10_000, 'a heartbeat past the rate limit');
      assert.equal(refilled.result?.ok, true, 'the budget refills');

      // Not JSON: a parse error, then close 1007.
      agent.ws.send('{not json');
      assert.equal((await agent.closedWith()).code, 1007);
      assert.ok(agent.frames.some((f) => f.error?.code === -32700));
      // Binary: 1003. Over the frame cap: 1009.
      const binary = await HubAgent.connect(a.url, key);
      binary.ws.send(Buffer.from([1, 2, 3]));
      assert.equal((await binary.closedWith()).code, 1003);
      const big = await HubAgent.connect(a.url, key);
      big.ws.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'heartbeat', params: { pad: 'x'.repeat(MAX_FRAME_BYTES) } }));
      assert.equal((await big.closedWith()).code, 1009);
      // The process is fine.
      assert.equal((await fetch(`${a.url}/healthz`)).status, 200);
      const again = await HubAgent.connect(a.url, key);
      assert.equal((await again.call('heartbeat')).result?.ok, true);
      await again.close();
    }));

  test('a heartbeat timeout marks the agent down; reconnecting marks it healthy', () =>
    withOutput(async () => {
      const { id, key } = await hubAgentOf('sleepy-agent');
      const agent = await HubAgent.connect(a.url, key, 0); // it sends nothing: no heartbeat
      await eventually(async () => (await admin(a.url, `/agents/${id}`)).json.status === 'healthy', 5000, 'healthy once connected');
      const closed = await agent.closedWith();
      assert.equal(closed.code, 4000);
      assert.match(closed.reason, /heartbeat/);
      const down = await admin(a.url, `/agents/${id}`);
      assert.equal(down.json.status, 'down');
      assert.match(down.json.statusReason, /heartbeat/);
      const back = await HubAgent.connect(b.url, key);
      await eventually(async () => (await admin(a.url, `/agents/${id}`)).json.status === 'healthy', 5000, 'healthy again');
      // Gone without a word (the socket just closes) is a missed heartbeat too.
      back.ws.terminate();
      await eventually(async () => (await admin(a.url, `/agents/${id}`)).json.status === 'down', HEARTBEAT_TIMEOUT_MS + 5000, 'down after disconnecting');
    }));

  test('a client\'s cancel mid-turn reaches the agent as tasks/cancel; an input-required answer ends the turn and the next message is a new turn', () =>
    withOutput(async () => {
      const { id, key } = await hubAgentOf('asking-agent');
      const agent = await HubAgent.connect(a.url, key);
      agent.onTurn = (turn, ag) => {
        const text = turn.params.message.parts[0].text;
        if (text === 'book a flight') ag.answer(turn, { id: turn.params.id, status: { state: 'input-required', message: { role: 'agent', parts: [{ type: 'text', text: 'Where to?' }] } } });
        else ag.answer(turn, { id: turn.params.id, status: { state: 'working' } }); // acknowledged; works on it
      };
      const url = `${b.url}/agents/${id}/a2a`;
      const first = await rpc(url, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: userMessage('book a flight') } }, V1);
      const task = first.json.result.task;
      assert.equal(task.status.state, 'TASK_STATE_INPUT_REQUIRED', JSON.stringify(first.json));
      assert.equal(task.status.message.parts[0].text, 'Where to?');
      const follow = { ...userMessage('Lisbon'), taskId: task.id };
      const working = await rpc(url, { jsonrpc: '2.0', id: 2, method: 'SendMessage', params: { message: follow, configuration: { returnImmediately: true } } }, V1);
      assert.ok(working.json.result?.task, JSON.stringify(working.json));
      await eventually(() => agent.turns().length === 2, 20_000, 'the second turn');
      const second = agent.turns()[1];
      assert.equal(second.params.id, task.id, 'the same 0.1 task id continues the task');
      assert.equal(second.params.message.parts[0].text, 'Lisbon');
      await eventually(async () => (await db.pool.query(`SELECT 1 FROM hub_turns WHERE task_id = $1 AND state = 'acked'`, [task.id])).rowCount === 1, 10_000, 'the ack');
      const canceled = await rpc(url, { jsonrpc: '2.0', id: 3, method: 'CancelTask', params: { id: task.id } }, V1);
      assert.equal(canceled.json.result?.status?.state, 'TASK_STATE_CANCELED', JSON.stringify(canceled.json));
      await eventually(() => agent.frames.some((f) => f.method === 'tasks/cancel' && f.params.id === task.id), 10_000, 'tasks/cancel at the agent');
      await agent.close();
    }));

  test('enrollment: an operator mints a token; an agent connects with it, registers itself under its card\'s name, gets turns, and reconnects with the agent key it was given', () =>
    withOutput(async () => {
      const operatorKey = (await new KeyStore(db.pool).create({ tenant: 'default', role: 'operator', name: 'hub test operator' })).key;
      const other = `enroll-${randomBytes(3).toString('hex')}`;
      assert.equal((await admin(a.url, '/tenants', { id: other, name: 'Another tenant' })).status, 201);
      const otherOperator = (await new KeyStore(db.pool).create({ tenant: other, role: 'operator', name: 'other operator' })).key;
      // Minting: an operator for its own tenant (not another's), the secret once, validated fields.
      assert.equal((await as(otherOperator, a.url, 'POST', '/tenants/default/enrollment-tokens', {})).status, 403);
      const bad = await as(operatorKey, a.url, 'POST', '/tenants/default/enrollment-tokens', { uses: 0, expiresIn: 'forever' });
      assert.equal(bad.status, 400);
      assert.match(bad.json.error, /uses[\s\S]*expiresIn|expiresIn[\s\S]*uses/);
      const minted = await as(operatorKey, a.url, 'POST', '/tenants/default/enrollment-tokens', { name: 'research fleet', uses: 2, expiresIn: '1h' });
      assert.equal(minted.status, 201, JSON.stringify(minted.json));
      const token: string = minted.json.token;
      assert.match(token, /^sbe_/);
      assert.deepEqual([minted.json.uses, minted.json.used, minted.json.state], [2, 0, 'usable']);
      const listed = await as(operatorKey, b.url, 'GET', '/tenants/default/enrollment-tokens');
      const row = listed.json.tokens.find((t: { id: string }) => t.id === minted.json.id);
      assert.equal(row?.name, 'research fleet');
      assert.equal(row.token, undefined, 'the secret is shown once');
      const stored = await db.pool.query('SELECT token_hash FROM enrollment_tokens WHERE id = $1', [minted.json.id]);
      assert.notEqual(stored.rows[0].token_hash.toString(), token, 'only its hash is stored');
      // The token opens GET /hub only.
      assert.equal((await as(token, a.url, 'GET', '/agents')).status, 401);

      // The seed's agent: connects with the token, registers with its card, and is that agent from then on.
      const agent = await HubAgent.connect(a.url, token);
      const early = await agent.call('agent.search', { q: 'research' });
      assert.equal(early.error?.code, -32600);
      assert.match(early.error!.message, /register first/);
      const registered = await agent.call('agent.register', { ...researchCard, name: 'enrolled-research' });
      const { agentId, agentKey } = registered.result ?? {};
      assert.ok(agentId, JSON.stringify(registered));
      assert.equal(registered.result.url, `ws-agent://${agentId}`);
      assert.equal(registered.result.name, 'enrolled-research');
      assert.match(agentKey, /^sb_/);
      const view = await admin(b.url, `/agents/${agentId}`);
      assert.equal(view.json.name, 'enrolled-research');
      assert.equal(view.json.status, 'healthy');
      assert.equal(view.json.card.skills[0].id, 'research-topic');
      assert.equal(view.json.endpoint.url, `ws-agent://${agentId}`);
      agent.onTurn = (turn, ag) => ag.answer(turn, { id: turn.params.id, status: { state: 'completed', message: { role: 'agent', parts: [{ type: 'text', text: `researched: ${turn.params.message.parts[0].text}` }] } } });
      const sent = await rpc(`${b.url}/agents/${agentId}/a2a`, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: userMessage('qubits') } }, V1);
      assert.equal(sent.json.result?.task?.status.state, 'TASK_STATE_COMPLETED', JSON.stringify(sent.json));
      assert.equal(sent.json.result.task.status.message.parts[0].text, 'researched: qubits');

      // A second agent with the same token: the name taken is a clear error and uses nothing; a free one registers.
      const second = await HubAgent.connect(b.url, token);
      const taken = await second.call('agent.register', { ...researchCard, name: 'enrolled-research' });
      assert.equal(taken.error?.code, -32602, JSON.stringify(taken));
      assert.match(taken.error!.message, new RegExp(`name "enrolled-research" is taken .*${agentId}`));
      const writer = await second.call('agent.register', { ...researchCard, name: 'enrolled-writer' });
      assert.ok(writer.result?.agentId, JSON.stringify(writer));
      assert.notEqual(writer.result.agentId, agentId);
      // Used up (2 of 2): refused at the upgrade.
      await assert.rejects(HubAgent.connect(a.url, token), /HTTP 401/);
      const after = await as(operatorKey, a.url, 'GET', '/tenants/default/enrollment-tokens');
      assert.equal(after.json.tokens.find((t: { id: string }) => t.id === minted.json.id).state, 'used up');

      // The first agent reconnects with its agent key (the token is used up), to the other process: the same agent.
      await agent.close();
      const back = await HubAgent.connect(b.url, agentKey);
      const again = await back.call('agent.register', { ...researchCard, name: 'enrolled-research', description: 'v2' });
      assert.equal(again.result?.agentId, agentId, JSON.stringify(again));
      assert.equal(again.result.agentKey, undefined, 'a key is made only by the enrollment');
      const stolen = await back.call('agent.register', { ...researchCard, name: 'enrolled-writer' });
      assert.equal(stolen.error?.code, -32602, 'a rename to another agent\'s name is refused too');
      assert.match(stolen.error!.message, /name "enrolled-writer" is taken/);
      assert.equal((await admin(a.url, `/agents/${agentId}`)).json.name, 'enrolled-research');
      // The trail names the token's creation and the agents it registered.
      const audit = await admin(a.url, '/audit?pageSize=100');
      const actions = audit.json.entries.map((e: { action: string; target: string | null; actor: string }) => `${e.action} ${e.target} ${e.actor}`);
      assert.ok(actions.includes(`enrollment-token.create default/${minted.json.id} ${(await db.pool.query('SELECT id FROM api_keys WHERE name = $1', ['hub test operator'])).rows[0].id}`), actions.join('\n'));
      assert.ok(actions.includes(`agent.enroll ${agentId} ${minted.json.id}`), actions.join('\n'));

      // Tenancy: another tenant's token registers into that tenant only (the same name is free there).
      const theirs = await admin(a.url, `/tenants/${other}/enrollment-tokens`, {});
      assert.equal(theirs.status, 201, JSON.stringify(theirs.json));
      const foreign = await HubAgent.connect(a.url, theirs.json.token);
      const there = await foreign.call('agent.register', { ...researchCard, name: 'enrolled-research' });
      assert.ok(there.result?.agentId, JSON.stringify(there));
      assert.equal((await as(TEST_ADMIN_KEY, a.url, 'GET', `/agents/${there.result.agentId}`, undefined, other)).status, 200);
      assert.equal((await admin(a.url, `/agents/${there.result.agentId}`)).status, 404, 'not in the default tenant');

      // Revoked: an open, unregistered socket is closed (4001); a new one refused (401). Expired: refused.
      const spare = await as(operatorKey, a.url, 'POST', '/tenants/default/enrollment-tokens', { uses: 5 });
      // A header naming another tenant does not move a token: refused (403), as for a key.
      const ws = new WebSocket(`${a.url.replace(/^http/, 'ws')}/hub`, { headers: { authorization: `Bearer ${spare.json.token}`, 'x-switchboard-tenant': other } });
      const refused = await new Promise<number>((resolve) => ws.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0)));
      assert.equal(refused, 403);
      const waiting = await HubAgent.connect(a.url, spare.json.token);
      assert.equal((await as(operatorKey, a.url, 'DELETE', `/tenants/default/enrollment-tokens/${spare.json.id}`)).status, 204);
      const closed = await waiting.closedWith();
      assert.equal(closed.code, 4001);
      assert.match(closed.reason, /enrollment token/);
      await assert.rejects(HubAgent.connect(a.url, spare.json.token), /HTTP 401/);
      const brief = await as(operatorKey, a.url, 'POST', '/tenants/default/enrollment-tokens', { expiresIn: '1s' });
      await eventually(() => HubAgent.connect(a.url, brief.json.token).then((s) => void s.ws.terminate(), (err: Error) => (/HTTP 401/.test(err.message) ? true : undefined)), 10_000, 'the token to expire');
      await Promise.all([back.close(), second.close(), foreign.close()]);
    }));

  test('an agent\'s JSON-RPC error answers the client\'s blocking send, on a new task and on a follow-up turn', () =>
    withOutput(async () => {
      const { id, key } = await hubAgentOf('refusing-agent');
      const agent = await HubAgent.connect(a.url, key);
      const quota = { code: -32031, message: 'Model quota exhausted for this key' };
      agent.onTurn = (turn, ag) => {
        const text = turn.params.message.parts[0].text;
        if (text === 'ask me') ag.answer(turn, { id: turn.params.id, status: { state: 'input-required', message: { role: 'agent', parts: [{ type: 'text', text: 'Which model?' }] } } });
        else ag.ws.send(JSON.stringify({ jsonrpc: '2.0', id: turn.id, error: quota }));
      };
      const url = `${b.url}/agents/${id}/a2a`;
      const refusedNew = await rpc(url, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: userMessage('refuse me') } }, V1);
      assert.deepEqual([refusedNew.json.error?.code, refusedNew.json.error?.message], [quota.code, quota.message], JSON.stringify(refusedNew.json));
      const asked = await rpc(url, { jsonrpc: '2.0', id: 2, method: 'SendMessage', params: { message: userMessage('ask me') } }, V1);
      const task = asked.json.result.task;
      assert.equal(task.status.state, 'TASK_STATE_INPUT_REQUIRED', JSON.stringify(asked.json));
      const follow = await rpc(url, { jsonrpc: '2.0', id: 3, method: 'SendMessage', params: { message: { ...userMessage('the big one'), taskId: task.id } } }, V1);
      assert.deepEqual([follow.json.error?.code, follow.json.error?.message], [quota.code, quota.message], JSON.stringify(follow.json));
      const failed = await taskOf(b.url, id, task.id);
      assert.equal(failed.status.state, 'TASK_STATE_FAILED');
      assert.match(failed.status.message.parts[0].text, /Model quota exhausted for this key/);
      await agent.close();
    }));

  test('a cancel while the agent is away reaches it as tasks/cancel when it reconnects, later than the cancel\'s 5 s wait, once', () =>
    withOutput(async () => {
      const { id, key } = await hubAgentOf('away-agent');
      const agent = await HubAgent.connect(a.url, key);
      agent.onTurn = (turn, ag) => ag.answer(turn, { id: turn.params.id, status: { state: 'input-required', message: { role: 'agent', parts: [{ type: 'text', text: 'Where to?' }] } } });
      const url = `${b.url}/agents/${id}/a2a`;
      const asked = await rpc(url, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: userMessage('book a flight') } }, V1);
      const task = asked.json.result.task;
      assert.equal(task.status.state, 'TASK_STATE_INPUT_REQUIRED', JSON.stringify(asked.json));
      await agent.close();
      await eventually(async () => (await db.pool.query('SELECT 1 FROM hub_connections WHERE agent_id = $1', [id])).rowCount === 0, 10_000, 'the connection forgotten');
      const started = Date.now();
      const canceled = await rpc(url, { jsonrpc: '2.0', id: 2, method: 'CancelTask', params: { id: task.id } }, V1);
      assert.equal(canceled.json.result?.status?.state, 'TASK_STATE_CANCELED', JSON.stringify(canceled.json));
      assert.match(canceled.json.result.status.message.parts[0].text, /sent tasks\/cancel when it connects again/);
      assert.ok(Date.now() - started >= 5_000, 'the cancel waited its 5 s for the agent');
      await eventually(async () => (await db.pool.query('SELECT 1 FROM hub_turns WHERE task_id = $1 AND cancel_requested_at IS NOT NULL AND cancel_told_at IS NULL', [task.id])).rowCount === 1, 10_000, 'the cancel kept for the agent');
      const back = await HubAgent.connect(a.url, key);
      await eventually(() => back.frames.some((f) => f.method === 'tasks/cancel' && f.params.id === task.id), 10_000, 'tasks/cancel after reconnecting');
      assert.ok(Date.now() - started > 5_000);
      // Told once: the cancel is marked told, so no later connection (in any process) is told again.
      const untold = await db.pool.query('SELECT 1 FROM hub_turns WHERE task_id = $1 AND cancel_told_at IS NULL', [task.id]);
      assert.equal(untold.rowCount, 0);
      assert.equal(back.frames.filter((f) => f.method === 'tasks/cancel').length, 1);
      await back.close();
    }));

  test('a tasks/cancel whose write fails (the socket died under it) is given back, and told when the agent reconnects', () =>
    withOutput(async () => {
      const { id, key } = await hubAgentOf('dying-socket-agent');
      const agent = await HubAgent.connect(a.url, key);
      agent.onTurn = (turn, ag) => ag.answer(turn, { id: turn.params.id, status: { state: 'input-required', message: { role: 'agent', parts: [{ type: 'text', text: 'Which one?' }] } } });
      const asked = await rpc(`${b.url}/agents/${id}/a2a`, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: userMessage('pick one') } }, V1);
      const task = asked.json.result.task;
      assert.equal(task.status.state, 'TASK_STATE_INPUT_REQUIRED', JSON.stringify(asked.json));
      await agent.close();
      await eventually(async () => (await db.pool.query('SELECT 1 FROM hub_connections WHERE agent_id = $1', [id])).rowCount === 0, 10_000, 'the connection forgotten');
      // The cancel path of activities/hub.ts hubCancel, on a socket whose write fails: a dying socket cannot be timed
      // from outside, so its session is one that fails the write, and the hub and PostgreSQL are real.
      const hub = new AgentHub({ pool: db.pool, events: new EventHub(), log: { info() {}, warn() {}, error() {} }, taskQueue: 'dying-socket' });
      try {
        assert.equal(await hub.turns.claimCancelOf('default', task.id), true);
        const dying: HubConnection = {
          id: 'dying', tenant: 'default', agentId: id, closed: false, turnMethod: 'tasks/send',
          sendTurn: async () => {}, close() {},
          notifyAgent: async () => { throw new Error('write EPIPE'); },
        };
        await assert.rejects(hub.tellCancel(dying, task.id), /EPIPE/);
      } finally {
        hub.closeAll();
      }
      const { rows } = await db.pool.query('SELECT cancel_requested_at IS NOT NULL AS requested, cancel_told_at IS NULL AS untold FROM hub_turns WHERE task_id = $1', [task.id]);
      assert.deepEqual(rows, [{ requested: true, untold: true }], 'the cancel waits for the next connect');
      const back = await HubAgent.connect(a.url, key);
      await eventually(() => back.frames.some((f) => f.method === 'tasks/cancel' && f.params.id === task.id), 10_000, 'tasks/cancel after reconnecting');
      assert.equal((await db.pool.query('SELECT 1 FROM hub_turns WHERE task_id = $1 AND cancel_told_at IS NULL', [task.id])).rowCount, 0, 'told once');
      await back.close();
    }));

  // Last: it kills process A.
  test('kill -9 of the process holding the socket mid-turn: the turn is delivered after the agent reconnects to the other process', () =>
    withOutput(async () => {
      const { id, key } = await hubAgentOf('survivor-agent', { retry: { attemptTimeoutMs: 20_000, initialIntervalMs: 200, maxAttempts: 5 } });
      const first = await HubAgent.connect(a.url, key);
      const seen: Frame[] = [];
      // The turn reaches the agent on A, which dies before the agent answers anything.
      first.onTurn = (turn) => seen.push(turn);
      const message = userMessage('survive this');
      const sending = rpc(`${b.url}/agents/${id}/a2a`, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message } }, V1);
      await eventually(() => seen.length === 1, 20_000, 'the turn at the agent on A');
      assert.equal(await a.kill(), 'SIGKILL');
      await first.closedWith();
      const second = await HubAgent.connect(b.url, key);
      second.onTurn = (turn, ag) => {
        seen.push(turn);
        ag.answer(turn, { id: turn.params.id, sessionId: turn.params.sessionId, status: { state: 'completed', message: { role: 'agent', parts: [{ type: 'text', text: 'made it' }] } } });
      };
      const answer = await sending;
      const task = answer.json.result?.task;
      assert.equal(task?.status.state, 'TASK_STATE_COMPLETED', JSON.stringify(answer.json));
      assert.equal(task.status.message.parts[0].text, 'made it');
      assert.equal(seen.length, 2, 'sent on A (never acknowledged), then once on B');
      assert.equal(seen[1].params.id, seen[0].params.id);
      assert.equal(seen[1].params.message.messageId, message.messageId, 'the same messageId, so an agent that got both can tell');
      const stored = await taskOf(b.url, id, task.id);
      assert.equal(stored.status.state, 'TASK_STATE_COMPLETED');
      await second.close();
    }));
});
