/**
 * The MCP server at /mcp (issue 43), driven by the official MCP TypeScript SDK's client against a real Switchboard
 * and real A2A agents: tools are the tenant's agents, a tools/call is an ordinary (durable) Switchboard task with
 * progress, cancellation and input-required (by elicitation and by taskId), through a restart of Switchboard, and
 * another tenant's key sees none of it.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, CancelTaskResultSchema, CreateTaskResultSchema, ElicitRequestSchema, GetTaskResultSchema, ToolListChangedNotificationSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { AgentPool, chunkedText, startAskingAgent, startChunkyAgent, startEchoAgent, startReplyingAgent, startSlowAgent } from './agents';
import { type Gateway, TEST_ADMIN_KEY, agentKey, eventually, register, rpc, startGateway } from './helpers/harness';

let gw: Gateway;
const agents = new AgentPool();
let echo: { id: string };
let otherKey: string;
const clients: Client[] = [];

before(async () => {
  gw = await startGateway();
  echo = await register(gw, (await agents.add(startEchoAgent())).url);
  // A second tenant with a client key of its own.
  const admin = { 'content-type': 'application/json', authorization: `Bearer ${TEST_ADMIN_KEY}` };
  const made = await fetch(`${gw.url}/tenants`, { method: 'POST', headers: admin, body: JSON.stringify({ id: 'mcp-other', name: 'Other team' }) });
  assert.equal(made.status, 201, await made.text());
  const key = await fetch(`${gw.url}/tenants/mcp-other/keys`, { method: 'POST', headers: admin, body: JSON.stringify({ role: 'client', name: 'other client' }) });
  otherKey = ((await key.json()) as { key: string }).key;
});

after(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
  await gw?.close();
  await agents.closeAll();
});

interface ConnectOptions {
  url?: string;
  /** Sent as `Authorization: Bearer` unless `header` says otherwise. */
  key?: string;
  header?: 'authorization' | 'x-api-key';
  elicit?: (message: string) => { action: 'accept' | 'decline' | 'cancel'; content?: Record<string, string> };
}

async function connect(o: ConnectOptions = {}): Promise<Client> {
  const key = o.key ?? gw.keys.client;
  const headers: Record<string, string> = o.header === 'x-api-key' ? { 'x-api-key': key } : { authorization: `Bearer ${key}` };
  const client = new Client({ name: 'mcp-test', version: '1.0.0' }, { capabilities: o.elicit ? { elicitation: {} } : {} });
  if (o.elicit) {
    const elicit = o.elicit;
    client.setRequestHandler(ElicitRequestSchema, async (req) => elicit(req.params.message));
  }
  await client.connect(new StreamableHTTPClientTransport(new URL(`${o.url ?? gw.url}/mcp`), { requestInit: { headers } }));
  clients.push(client);
  return client;
}

const textOf = (r: CallToolResult) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');
/** The task a progress notification names (`_meta.taskId`). */
const progressTaskOf = (p: object) => (p as { _meta?: { taskId?: string } })._meta?.taskId;
const metaOf = (r: CallToolResult) => r._meta as { taskId: string; contextId: string; state: string };

async function callTool(client: Client, name: string, args: Record<string, unknown>, opts: Parameters<Client['callTool']>[2] = {}): Promise<CallToolResult> {
  return (await client.callTool({ name, arguments: args }, CallToolResultSchema, { timeout: 60_000, ...opts })) as CallToolResult;
}

async function taskState(taskId: string): Promise<string> {
  const res = await rpc(`${gw.url}/a2a`, { jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: taskId } });
  return res.json.result?.status?.state;
}

describe('MCP at /mcp: agents as tools', () => {
  test('a client initializes with a tenant key, finds the agent as a tool taking a message, and a call answers with its text as an ordinary task', async () => {
    const client = await connect();
    const { tools } = await client.listTools();
    const tool = tools.find((t) => t.name === echo.id);
    assert.ok(tool, `the echo agent is a tool: ${tools.map((t) => t.name).join(', ')}`);
    assert.equal((tool.inputSchema.properties as Record<string, { type: string }>).message.type, 'string');
    assert.deepEqual(tool.inputSchema.required, ['message']);
    assert.match(tool.description ?? '', /Echoes the text/);

    const result = await callTool(client, echo.id, { message: 'hello over MCP' });
    assert.equal(result.isError, undefined);
    assert.match(textOf(result), /echo: hello over MCP/);
    const meta = metaOf(result);
    assert.equal(meta.state, 'TASK_STATE_COMPLETED');
    // The call is a Switchboard task like any other: ListTasks finds it.
    const listed = await rpc(`${gw.url}/a2a`, { jsonrpc: '2.0', id: 1, method: 'ListTasks', params: {} });
    assert.ok((listed.json.result.tasks as { id: string }[]).some((t) => t.id === meta.taskId), 'ListTasks finds the call\'s task');
  });

  test('the key may come as X-API-Key too; a call in the same context continues it', async () => {
    const client = await connect({ header: 'x-api-key' });
    const first = await callTool(client, echo.id, { message: 'one' });
    const second = await callTool(client, echo.id, { message: 'two', contextId: metaOf(first).contextId });
    assert.equal(metaOf(second).contextId, metaOf(first).contextId);
    assert.match(textOf(second), /echo: two/);
  });

  test('an agent that answers with a message (no task of its own) is a tool too; an agent key may call another agent', async () => {
    const replier = await register(gw, (await agents.add(startReplyingAgent())).url);
    const client = await connect({ key: await agentKey(gw, echo.id) });
    const result = await callTool(client, replier.id, { message: 'hi' });
    assert.equal(result.isError, undefined);
    assert.match(textOf(result), /reply: hi/);
    assert.equal(metaOf(result).state, 'TASK_STATE_COMPLETED');
    assert.ok(metaOf(result).taskId, 'Switchboard made the exchange a task');
  });

  test('progress: the agent\'s streamed events arrive as notifications/progress with the client\'s token', async () => {
    const chunky = await register(gw, (await agents.add(startChunkyAgent({ chunks: 6, delayMs: 30 }))).url);
    const client = await connect();
    const seen: { progress: number; message?: string }[] = [];
    const result = await callTool(client, chunky.id, { message: 'stream please' }, { onprogress: (p) => seen.push(p) });
    assert.equal(textOf(result), chunkedText(6));
    assert.ok(seen.length >= 6, `progress for each event: ${seen.length}`);
    assert.deepEqual(seen.map((p) => p.progress), seen.map((_, i) => i + 1), 'progress counts up');
    assert.ok(seen.some((p) => p.message === 'c3 '), 'a chunk\'s text is a progress message');
    assert.equal(progressTaskOf(seen.at(-1)!), metaOf(result).taskId, 'progress names the task');
  });
});

/**
 * A fetch whose first tools/call response is cut after `events` SSE events (its connection closed), as a network drop
 * would: the SDK client then resumes the stream with Last-Event-ID.
 */
function droppingFetch(key: string, events: number): { fetch: typeof fetch; dropped: () => boolean } {
  let dropped = false;
  const dropping: typeof fetch = async (input, init) => {
    const headers = new Headers(init?.headers);
    headers.set('authorization', `Bearer ${key}`);
    const cut = !dropped && typeof init?.body === 'string' && init.body.includes('"tools/call"');
    const connection = new AbortController();
    const res = await fetch(input, { ...init, headers, signal: cut ? connection.signal : init?.signal });
    if (!cut || !res.body) return res;
    dropped = true;
    let seen = 0;
    const body = res.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          controller.enqueue(chunk);
          seen += Buffer.from(chunk).toString('utf8').split('\n\n').length - 1;
          if (seen >= events) {
            connection.abort();
            controller.error(new Error('network drop'));
          }
        },
      }),
    );
    return new Response(body, { status: res.status, headers: res.headers });
  };
  return { fetch: dropping, dropped: () => dropped };
}

describe('MCP at /mcp: durable tasks', () => {
  test('a client whose stream drops mid-call resumes it (Last-Event-ID) and gets the rest of the progress and the answer', async () => {
    const chunky = await register(gw, (await agents.add(startChunkyAgent({ chunks: 8, delayMs: 150 }))).url);
    const drop = droppingFetch(gw.keys.client, 4);
    const client = new Client({ name: 'mcp-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${gw.url}/mcp`), { fetch: drop.fetch, reconnectionOptions: { initialReconnectionDelay: 200, maxReconnectionDelay: 1_000, reconnectionDelayGrowFactor: 1.5, maxRetries: 5 } }));
    clients.push(client);
    const seen: number[] = [];
    const result = await callTool(client, chunky.id, { message: 'resume me' }, { onprogress: (p) => seen.push(p.progress) });
    assert.ok(drop.dropped(), 'the stream was cut');
    assert.equal(textOf(result), chunkedText(8));
    assert.equal(metaOf(result).state, 'TASK_STATE_COMPLETED');
    assert.ok(seen.length >= 8, `progress kept coming after the drop: ${seen.join(',')}`);
  });

  test('notifications/cancelled cancels the A2A task, and the agent is told', async () => {
    const slowAgent = await agents.add(startSlowAgent({ ms: 60_000 }));
    const slow = await register(gw, slowAgent.url);
    const client = await connect();
    const abort = new AbortController();
    let taskId: string | undefined;
    const call = callTool(client, slow.id, { message: 'take your time' }, { signal: abort.signal, onprogress: (p) => (taskId ??= progressTaskOf(p)) });
    call.catch(() => undefined);
    await eventually(async () => taskId && (await taskState(taskId)) === 'TASK_STATE_WORKING', 15_000, 'the task at work');
    abort.abort('enough');
    await assert.rejects(call);
    await eventually(async () => (await taskState(taskId!)) === 'TASK_STATE_CANCELED', 15_000, 'the task canceled');
    await eventually(() => slowAgent.cancels.length > 0, 15_000, 'the agent told');
  });

  test('input-required without elicitation: the result says the task waits, and a call with its taskId continues it', async () => {
    const asker = await register(gw, (await agents.add(startAskingAgent())).url);
    const client = await connect();
    const asked = await callTool(client, asker.id, { message: 'greet me' });
    assert.equal(asked.isError, undefined);
    assert.equal(metaOf(asked).state, 'TASK_STATE_INPUT_REQUIRED');
    assert.match(textOf(asked), /What is your name\?/);
    assert.match(textOf(asked), new RegExp(`"taskId": "${metaOf(asked).taskId}"`));
    const look = await callTool(client, asker.id, { message: '', taskId: metaOf(asked).taskId });
    assert.equal(metaOf(look).state, 'TASK_STATE_INPUT_REQUIRED', 'an empty message only looks at the task');
    const answered = await callTool(client, asker.id, { message: 'Ada', taskId: metaOf(asked).taskId });
    assert.equal(metaOf(answered).taskId, metaOf(asked).taskId, 'the same task');
    assert.equal(metaOf(answered).state, 'TASK_STATE_COMPLETED');
    assert.match(textOf(answered), /Hello, Ada!/);
    // The task is done: calling it again answers its result, and sends the agent nothing.
    const again = await callTool(client, asker.id, { message: 'ignored', taskId: metaOf(asked).taskId });
    assert.match(textOf(again), /Hello, Ada!/);
  });

  test('input-required with elicitation: the client is asked, and its answer continues the same task', async () => {
    const asker = await register(gw, (await agents.add(startAskingAgent())).url);
    const questions: string[] = [];
    const client = await connect({ elicit: (message) => (questions.push(message), { action: 'accept', content: { answer: 'Bob' } }) });
    const result = await callTool(client, asker.id, { message: 'greet me' });
    assert.deepEqual(questions, ['What is your name?']);
    assert.equal(metaOf(result).state, 'TASK_STATE_COMPLETED');
    assert.match(textOf(result), /Hello, Bob!/);
  });

  test('an elicitation declined leaves the task waiting for input, and the result says how to continue it', async () => {
    const asker = await register(gw, (await agents.add(startAskingAgent())).url);
    const client = await connect({ elicit: () => ({ action: 'decline' }) });
    const result = await callTool(client, asker.id, { message: 'greet me' });
    assert.equal(metaOf(result).state, 'TASK_STATE_INPUT_REQUIRED');
    const answered = await callTool(client, asker.id, { message: 'Cy', taskId: metaOf(result).taskId });
    assert.match(textOf(answered), /Hello, Cy!/);
  });

  test('a call that outlives its wait answers "still working" with its taskId, and a call with the taskId waits for the answer', async () => {
    const quick = await startGateway({ db: gw.db, temporal: { env: gw.env, taskQueue: gw.taskQueue }, worker: false, mcp: { callWaitMs: 500 } });
    try {
      const slow = await register(gw, (await agents.add(startSlowAgent({ ms: 2_500 }))).url);
      const client = await connect({ url: quick.url, key: quick.keys.client });
      const first = await callTool(client, slow.id, { message: 'long one' });
      assert.equal(metaOf(first).state, 'TASK_STATE_WORKING');
      assert.match(textOf(first), /still working/);
      let result = first;
      for (let i = 0; i < 20 && metaOf(result).state === 'TASK_STATE_WORKING'; i++) result = await callTool(client, slow.id, { message: '', taskId: metaOf(first).taskId });
      assert.equal(metaOf(result).state, 'TASK_STATE_COMPLETED');
      assert.match(textOf(result), /done: long one/);
    } finally {
      await quick.close();
    }
  });

  test('MCP tasks (2025-11-25): a task-augmented call answers the A2A task at once; tasks/get, tasks/result and tasks/cancel reach it', async () => {
    const slow = await register(gw, (await agents.add(startSlowAgent({ ms: 1_500 }))).url);
    const client = await connect();
    const augmented = (message: string) => client.request({ method: 'tools/call', params: { name: slow.id, arguments: { message }, task: { ttl: 60_000 } } }, CreateTaskResultSchema);
    const { task } = await augmented('as a task');
    assert.equal(task.status, 'working');
    assert.equal(await taskState(task.taskId), 'TASK_STATE_WORKING', 'the MCP task is the A2A task');
    const got = await client.request({ method: 'tasks/get', params: { taskId: task.taskId } }, GetTaskResultSchema);
    assert.equal(got.taskId, task.taskId);
    const result = (await client.request({ method: 'tasks/result', params: { taskId: task.taskId } }, CallToolResultSchema, { timeout: 30_000 })) as CallToolResult;
    assert.match(textOf(result), /done: as a task/);
    assert.equal((await client.request({ method: 'tasks/get', params: { taskId: task.taskId } }, GetTaskResultSchema)).status, 'completed');
    // One that would run a minute: canceled well before it could end by itself.
    const long = await register(gw, (await agents.add(startSlowAgent({ ms: 60_000 }))).url);
    const second = (await client.request({ method: 'tools/call', params: { name: long.id, arguments: { message: 'cancel me' }, task: { ttl: 60_000 } } }, CreateTaskResultSchema)).task;
    await eventually(async () => (await taskState(second.taskId)) === 'TASK_STATE_WORKING', 15_000, 'the second task at work');
    const canceled = await client.request({ method: 'tasks/cancel', params: { taskId: second.taskId } }, CancelTaskResultSchema);
    assert.equal(canceled.taskId, second.taskId);
    await eventually(async () => (await taskState(second.taskId)) === 'TASK_STATE_CANCELED', 15_000, 'the task canceled');
    const other = await connect({ key: otherKey });
    await assert.rejects(other.request({ method: 'tasks/get', params: { taskId: task.taskId } }, GetTaskResultSchema), (err: { code?: number }) => err.code === -32602);
  });

  test('a restart of Switchboard during a call: the task goes on, and a call with its taskId on the new process answers it', async () => {
    const slow = await register(gw, (await agents.add(startSlowAgent({ ms: 4_000 }))).url);
    // The front door the client talks to is its own process; the worker (one per process and task queue) is gw's, and
    // it restarts too.
    const first = await startGateway({ db: gw.db, temporal: { env: gw.env, taskQueue: gw.taskQueue }, worker: false });
    let taskId: string | undefined;
    const client = await connect({ url: first.url, key: first.keys.client });
    const call = callTool(client, slow.id, { message: 'survive' }, { timeout: 20_000, onprogress: (p) => (taskId ??= progressTaskOf(p)) });
    call.catch(() => undefined);
    await eventually(() => taskId, 15_000, 'the task started');
    await first.close(); // the process and its MCP sessions go away mid-call
    await assert.rejects(call);
    await gw.stopWorker();
    await gw.startWorker();
    const second = await startGateway({ db: gw.db, temporal: { env: gw.env, taskQueue: gw.taskQueue }, worker: false });
    try {
      const again = await connect({ url: second.url, key: second.keys.client });
      const result = await callTool(again, slow.id, { message: '', taskId: taskId! });
      assert.equal(metaOf(result).taskId, taskId);
      assert.equal(metaOf(result).state, 'TASK_STATE_COMPLETED');
      assert.match(textOf(result), /done: survive/);
    } finally {
      await second.close();
    }
  });
});

describe('MCP at /mcp: tenants, sessions and errors', () => {
  test('another tenant\'s key sees none of these tools and cannot call them, nor use this tenant\'s session', async () => {
    const other = await connect({ key: otherKey });
    const { tools } = await other.listTools();
    assert.deepEqual(tools, [], 'the other tenant has no agents');
    await assert.rejects(callTool(other, echo.id, { message: 'sneak' }), (err: { code?: number }) => err.code === -32602);
    const mine = await connect();
    const transport = mine.transport as StreamableHTTPClientTransport;
    const res = await fetch(`${gw.url}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${otherKey}`, 'mcp-session-id': transport.sessionId!, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
    });
    assert.equal(res.status, 404, 'a session is its key\'s only');
  });

  test('tools/list follows the registry: a new agent is announced with notifications/tools/list_changed', async () => {
    const client = await connect();
    let changed = 0;
    client.setNotificationHandler(ToolListChangedNotificationSchema, async () => void changed++);
    const before = (await client.listTools()).tools.length;
    const added = await register(gw, (await agents.add(startEchoAgent())).url);
    await eventually(() => changed > 0, 15_000, 'tools/list_changed');
    const { tools } = await client.listTools();
    assert.equal(tools.length, before + 1);
    assert.ok(tools.some((t) => t.name === added.id));
  });

  test('protocol errors are JSON-RPC errors: no key 401, unreadable JSON -32700, no session 400, an unknown session 404, bad arguments -32602', async () => {
    const post = (body: string, headers: Record<string, string> = {}) =>
      fetch(`${gw.url}/mcp`, { method: 'POST', headers: { authorization: `Bearer ${gw.keys.client}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers }, body });
    assert.equal((await fetch(`${gw.url}/mcp`, { method: 'POST', body: '{}' })).status, 401);
    const garbled = await post('{"jsonrpc": "2.0", ');
    assert.equal(garbled.status, 400);
    assert.equal(((await garbled.json()) as { error: { code: number } }).error.code, -32700);
    const list = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} });
    assert.equal((await post(list)).status, 400);
    const huge = await post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { pad: 'x'.repeat(2 * 1024 * 1024) } }));
    assert.equal(huge.status, 413);
    assert.equal(((await huge.json()) as { error: { code: number } }).error.code, -32600);
    assert.equal((await post(list, { 'mcp-session-id': 'no-such-session' })).status, 404);
    const client = await connect();
    await assert.rejects(callTool(client, echo.id, { text: 'no message' }), (err: { code?: number }) => err.code === -32602);
    await assert.rejects(callTool(client, 'no-such-agent', { message: 'x' }), (err: { code?: number }) => err.code === -32602);
  });

  test('sessions do not grow without bound: a tenant\'s oldest goes past its cap, an idle one expires, DELETE ends one', async () => {
    const capped = await startGateway({ db: gw.db, temporal: { env: gw.env, taskQueue: gw.taskQueue }, worker: false, mcp: { maxPerTenant: 2, idleMs: 1_500 } });
    try {
      const open = () => connect({ url: capped.url, key: capped.keys.client });
      const idOf = (client: Client) => (client.transport as StreamableHTTPClientTransport).sessionId!;
      const status = (id: string, method = 'POST') =>
        fetch(`${capped.url}/mcp`, {
          method,
          headers: { authorization: `Bearer ${capped.keys.client}`, 'mcp-session-id': id, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' },
          ...(method === 'POST' ? { body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }) } : {}),
        }).then(async (r) => (await r.body?.cancel(), r.status));
      const a = idOf(await open());
      const clientB = await open();
      const b = idOf(clientB);
      const c = idOf(await open());
      assert.equal(await status(a), 404, 'the least recently used session went when the tenant opened a third');
      assert.equal(await status(b), 200);
      assert.equal(await status(c, 'DELETE'), 200);
      assert.equal(await status(c), 404, 'a deleted session is gone');
      // A session with a client holding its notification stream is in use; once the client is gone it idles out.
      await clientB.close();
      await new Promise((r) => setTimeout(r, 3_500));
      assert.equal(await status(b), 404, 'the idle session expired');
    } finally {
      await capped.close();
    }
  });

  test('an operator key may not call tools (it reads tasks, it does not run them)', async () => {
    const res = await fetch(`${gw.url}/mcp`, { method: 'POST', headers: { authorization: `Bearer ${gw.keys.operator}`, 'content-type': 'application/json' }, body: '{}' });
    assert.equal(res.status, 403);
  });
});
