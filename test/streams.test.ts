/**
 * Streaming through Switchboard: SendStreamingMessage / message/stream and SubscribeToTask / tasks/resubscribe
 * over SSE, driven by @a2a-js/sdk clients and a raw SSE reader, against real streaming and non-streaming
 * agents. Every event comes from the task's event log, so a reader that reconnects with Last-Event-ID gets
 * exactly the rest.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { SendMessageRequest, StreamResponse } from '@a2a-js/sdk';
import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import { AgentPool, chunkedText, startAskingAgent, startChunkyAgent, startEchoAgent, startReplyingAgent } from './agents';
import { type Gateway, authFetch, clientFactory, eventually, register, rpc, startGateway } from './helpers/harness';
import { assembledText, sse, type SseEvent } from './helpers/sse';
import { workflowIdOf } from '../src/core/temporal/task-gateway';

let gw: Gateway;
const agents = new AgentPool();

before(async () => {
  gw = await startGateway({ streams: { heartbeatMs: 200, maxPerTask: 3, maxBufferBytes: 64 * 1024, drainTimeoutMs: 500 } });
});
after(async () => {
  await gw?.close();
  await agents.closeAll();
});


const userMessage = (text: string, extra: Record<string, unknown> = {}) => ({ messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...extra });
const legacyMessage = (text: string, extra: Record<string, unknown> = {}) => ({ kind: 'message', messageId: randomUUID(), role: 'user', parts: [{ kind: 'text', text }], ...extra });

const stateOf = (e: SseEvent): string | undefined => e.data.result?.statusUpdate?.status?.state ?? e.data.result?.task?.status?.state;
const taskIdOf = (e: SseEvent): string => e.data.result?.task?.id ?? e.data.result?.statusUpdate?.taskId ?? e.data.result?.artifactUpdate?.taskId;

/** Rejects after `ms`: a wait for something that must happen, bounded. */
const deadline = (ms: number, what: string) => new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms).unref());

function assertConsecutiveIds(events: SseEvent[], from: number) {
  assert.deepEqual(
    events.map((e) => e.id),
    events.map((_, i) => from + i),
    'SSE ids are the log positions, consecutive',
  );
}

describe('SendStreamingMessage', () => {
  test('relays every chunk of a 1,000-chunk stream in order, through an SDK client', async () => {
    const chunky = await agents.add(startChunkyAgent({ chunks: 1000, progressEvery: 250 }));
    const { base } = await register(gw, chunky.url);
    const client = await clientFactory(gw.keys.client).createFromUrl(`${base}/.well-known/agent-card.json`, '');
    const events: any[] = [];
    for await (const e of client.sendMessageStream(SendMessageRequest.fromJSON({ message: userMessage('go') }))) {
      events.push(StreamResponse.toJSON(e) as any);
    }
    assert.ok(events[0].task, 'the stream starts with the task');
    assert.equal(events[0].task.status.state, 'TASK_STATE_SUBMITTED');
    assert.equal(events[1].statusUpdate?.status.state, 'TASK_STATE_WORKING');
    const chunks = events.filter((e) => e.artifactUpdate);
    assert.equal(chunks.length, 1000);
    assert.equal(chunks.map((e) => e.artifactUpdate.artifact.parts[0].text).join(''), chunkedText(1000));
    assert.deepEqual(
      chunks.map((e) => [e.artifactUpdate.append ?? false, e.artifactUpdate.lastChunk ?? false]).filter((_, i) => i === 0 || i === 999),
      [
        [false, false],
        [true, true],
      ],
    );
    const progress = events.filter((e) => e.statusUpdate?.status.state === 'TASK_STATE_WORKING' && e.statusUpdate.status.message).map((e) => e.statusUpdate.status.message.parts[0].text);
    assert.deepEqual(progress, ['250 of 1000', '500 of 1000', '750 of 1000', '1000 of 1000']);
    const last = events[events.length - 1];
    assert.equal(last.statusUpdate?.status.state, 'TASK_STATE_COMPLETED', 'the stream closes at the terminal state');
    assert.ok(events.every((e) => (e.task?.id ?? e.statusUpdate?.taskId ?? e.artifactUpdate?.taskId) === events[0].task.id), "every event carries the gateway's task id");

    // GetTask agrees, and the workflow's history holds state changes, not chunks.
    const task = await client.getTask({ tenant: '', id: events[0].task.id, historyLength: undefined });
    assert.equal(task.status?.state, 3 /* COMPLETED */);
    const history = await gw.env.client.workflow.getHandle(workflowIdOf('default', events[0].task.id)).fetchHistory();
    assert.ok(history.events!.length < 40, `workflow history has ${history.events!.length} events`);
  });

  test('SSE ids are consecutive log positions; the raw stream ends with the terminal event', async () => {
    const chunky = await agents.add(startChunkyAgent({ chunks: 50 }));
    const { rpc } = await register(gw, chunky.url);
    const read = await sse(rpc, { method: 'SendStreamingMessage', params: { message: userMessage('go') } });
    assert.equal(read.status, 200);
    assert.ok(read.ended);
    assertConsecutiveIds(read.events, 1);
    assert.equal(assembledText(read.events), chunkedText(50));
    assert.equal(stateOf(read.events.at(-1)!), 'TASK_STATE_COMPLETED');
  });

  test('a 0.3 client: the SDK compat client streams, and the wire has kind objects with final: true last', async () => {
    const chunky = await agents.add(startChunkyAgent({ chunks: 20 }));
    const { base, rpc } = await register(gw, chunky.url);
    const legacyCompat = { enabled: true };
    const factory = new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        transports: [new JsonRpcTransportFactory({ legacyCompat, fetchImpl: authFetch(gw.keys.client) })],
        cardResolver: new DefaultAgentCardResolver({ legacyCompat }),
      }),
    );
    // The card a 0.3 client is served (it asks for A2A-Version 0.3).
    const card: any = await (await fetch(`${base}/.well-known/agent-card.json`, { headers: { 'A2A-Version': '0.3' } })).json();
    const client = await factory.createFromAgentCard(card as never);
    const seen: any[] = [];
    for await (const e of client.sendMessageStream(SendMessageRequest.fromJSON({ message: userMessage('go') }))) seen.push(StreamResponse.toJSON(e));
    assert.ok(seen[0].task);
    assert.equal(seen.filter((e) => e.artifactUpdate).length, 20);
    assert.equal(seen.at(-1).statusUpdate.status.state, 'TASK_STATE_COMPLETED');

    const read = await sse(rpc, { method: 'message/stream', params: { message: legacyMessage('go') } });
    const kinds = read.events.map((e) => e.data.result.kind);
    assert.equal(kinds[0], 'task');
    assert.equal(kinds.filter((k) => k === 'artifact-update').length, 20);
    const last = read.events.at(-1)!.data.result;
    assert.equal(last.kind, 'status-update');
    assert.equal(last.status.state, 'completed');
    assert.equal(last.final, true);
    assert.ok(read.events.slice(0, -1).every((e) => !e.data.result.final));
  });

  test('a follow-up to an input-required task streams too; each stream ends at its turn', async () => {
    const asker = await agents.add(startAskingAgent());
    const { rpc } = await register(gw, asker.url);
    const first = await sse(rpc, { method: 'SendStreamingMessage', params: { message: userMessage('hi') } });
    assert.ok(first.ended);
    assert.equal(stateOf(first.events.at(-1)!), 'TASK_STATE_INPUT_REQUIRED');
    const taskId = taskIdOf(first.events[0]);
    const second = await sse(rpc, { method: 'SendStreamingMessage', params: { message: userMessage('Ada', { taskId }) } });
    assert.equal(second.events[0].data.result.task.id, taskId, 'the turn starts with the task');
    assert.equal(second.events[0].id, first.events.at(-1)!.id! + 1, 'and continues the same log');
    assert.equal(stateOf(second.events.at(-1)!), 'TASK_STATE_COMPLETED');
    assert.equal(assembledText(second.events), 'Hello, Ada!');

    // The same in 0.3: the interrupted turn ends with final: true.
    const legacy = await sse(rpc, { method: 'message/stream', params: { message: legacyMessage('hi') } });
    const end = legacy.events.at(-1)!.data.result;
    assert.equal(end.status.state, 'input-required');
    assert.equal(end.final, true);
  });

  test("an agent's Message answer is the stream's one event (1.0, 0.3; streaming agent or not); 0.1's stream stays the task's", async () => {
    for (const streaming of [true, false]) {
      const replier = await agents.add(startReplyingAgent({ streaming }));
      const { rpc } = await register(gw, replier.url);
      const message = userMessage('hi');
      const read = await sse(rpc, { method: 'SendStreamingMessage', params: { message } });
      assert.ok(read.ended);
      assert.deepEqual(read.events.map((e) => Object.keys(e.data.result)), [['message']], `streaming ${streaming}: ${JSON.stringify(read.events)}`);
      const reply = read.events[0].data.result.message;
      assert.equal(reply.role, 'ROLE_AGENT');
      assert.equal(reply.parts[0].text, 'reply: hi');
      assert.equal(reply.taskId, undefined, 'no task was made');
      // The gateway's task of the exchange went submitted → completed (no `working`: the agent took on no task), and
      // the Message went out at the log position of that last change.
      const { rows: [{ task_id: taskId }] } = await gw.db.pool.query('SELECT task_id FROM message_tasks WHERE message_id = $1', [message.messageId]);
      const { rows } = await gw.db.pool.query('SELECT seq, event FROM task_events WHERE task_id = $1 ORDER BY seq', [taskId]);
      assert.deepEqual(rows.map((r) => r.event.task?.status.state ?? r.event.statusUpdate?.status.state), ['TASK_STATE_SUBMITTED', 'TASK_STATE_COMPLETED']);
      assert.equal(read.events[0].id, Number(rows[1].seq));

      const legacy = await sse(rpc, { method: 'message/stream', params: { message: legacyMessage('hi') } });
      assert.deepEqual(legacy.events.map((e) => [e.data.result.kind, e.data.result.parts?.[0].text]), [['message', 'reply: hi']]);
      // 0.1 has no Message answer: its stream is the task's, ending completed with the reply as the status message.
      const v01 = await sse(rpc, { method: 'tasks/sendSubscribe', params: { id: randomUUID(), message: { role: 'user', parts: [{ type: 'text', text: 'hi' }] } } });
      const end = v01.events.at(-1)!.data.result;
      assert.deepEqual([end.status.state, end.final, end.status.message.parts[0].text], ['completed', true, 'reply: hi']);
    }
  });

  test('a non-streaming agent: the task still streams its state changes and final artifacts', async () => {
    const echo = await agents.add(startEchoAgent({ streaming: false }));
    const { rpc } = await register(gw, echo.url);
    const read = await sse(rpc, { method: 'SendStreamingMessage', params: { message: userMessage('plain') } });
    assert.deepEqual(
      read.events.map((e) => Object.keys(e.data.result)[0]),
      ['task', 'statusUpdate', 'artifactUpdate', 'statusUpdate'],
    );
    assert.equal(assembledText(read.events), 'echo: plain');
    assert.equal(stateOf(read.events.at(-1)!), 'TASK_STATE_COMPLETED');
  });
});

describe('resubscribe and Last-Event-ID', () => {
  test('a client that drops after N events and reconnects with Last-Event-ID gets exactly the rest', async () => {
    const chunky = await agents.add(startChunkyAgent({ chunks: 300, delayMs: 2 }));
    const { rpc } = await register(gw, chunky.url);
    const message = userMessage('go');
    const part1 = await sse(rpc, { method: 'SendStreamingMessage', params: { message }, stopAfter: 40 });
    assert.equal(part1.events.length, 40);
    assert.ok(!part1.ended);
    const taskId = taskIdOf(part1.events[0]);
    const last = part1.events.at(-1)!.id!;

    // SubscribeToTask with Last-Event-ID...
    const part2 = await sse(rpc, { method: 'SubscribeToTask', params: { id: taskId }, lastEventId: last });
    assert.ok(part2.ended);
    assertConsecutiveIds(part2.events, last + 1);
    assert.equal(assembledText([...part1.events, ...part2.events]), chunkedText(300));
    assert.equal(stateOf(part2.events.at(-1)!), 'TASK_STATE_COMPLETED');

    // ...and a plain reconnect (the same request again) replay the same events; the message is not sent twice.
    const again = await sse(rpc, { method: 'SendStreamingMessage', params: { message }, lastEventId: last });
    assert.deepEqual(
      again.events.map((e) => [e.id, e.data.result]),
      part2.events.map((e) => [e.id, e.data.result]),
    );
    assert.equal(chunky.calls.filter((c) => c.method === 'SendStreamingMessage').length, 1);
    // tasks/resubscribe (0.3) honours Last-Event-ID too.
    const legacy = await sse(rpc, { method: 'tasks/resubscribe', params: { id: taskId }, lastEventId: last });
    assert.equal(legacy.events.length, part2.events.length);
    assert.equal(legacy.events.at(-1)!.data.result.final, true);
  });

  test('SubscribeToTask starts with the current task, then live events; several streams see the same events', async () => {
    const chunky = await agents.add(startChunkyAgent({ chunks: 200, delayMs: 5 }));
    const { rpc } = await register(gw, chunky.url);
    let taskId: string | undefined;
    let ready!: () => void;
    const started = new Promise<void>((r) => (ready = r));
    const sender = sse(rpc, {
      method: 'SendStreamingMessage',
      params: { message: userMessage('go') },
      onEvent: (e) => {
        taskId ??= taskIdOf(e);
        if (e.id === 10) ready();
      },
    });
    await started;
    const [a, b] = await Promise.all([
      sse(rpc, { method: 'SubscribeToTask', params: { id: taskId } }),
      sse(rpc, { method: 'SubscribeToTask', params: { id: taskId } }),
    ]);
    const full = await sender;
    for (const sub of [a, b]) {
      const snapshot = sub.events[0];
      assert.ok(snapshot.data.result.task, 'first event is the task');
      const seenChunks = snapshot.data.result.task.artifacts?.[0]?.parts.map((p: { text: string }) => p.text).join('') ?? '';
      assert.equal(seenChunks + assembledText(sub.events.slice(1)), chunkedText(200), 'snapshot + live = everything');
      assert.deepEqual(
        sub.events.slice(1).map((e) => e.id),
        full.events.filter((e) => e.id! > snapshot.id!).map((e) => e.id),
      );
    }
    // A terminal task has nothing to subscribe to (-32004) unless replaying with Last-Event-ID.
    const late = await sse(rpc, { method: 'SubscribeToTask', params: { id: taskId } });
    assert.equal(late.json.error.code, -32004);
    const missing = await sse(rpc, { method: 'SubscribeToTask', params: { id: randomUUID() } });
    assert.equal(missing.json.error.code, -32001);
    const bad = await sse(rpc, { method: 'SubscribeToTask', params: { id: taskId }, lastEventId: 'abc' });
    assert.equal(bad.json.error.code, -32602);
  });

  test('SubscribeToTask stays open past input-required, with heartbeats, until the answer ends the task: 1.0, 0.3, Last-Event-ID', async () => {
    const asker = await agents.add(startAskingAgent());
    const { rpc: url } = await register(gw, asker.url);
    const asked = await rpc(url, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: userMessage('hi') } }, { 'A2A-Version': '1.0' });
    const { id: taskId, status } = asked.json.result.task;
    assert.equal(status.state, 'TASK_STATE_INPUT_REQUIRED');
    const { rows: [{ last_seq: head }] } = await gw.db.pool.query('SELECT last_seq FROM task_event_heads WHERE task_id = $1', [taskId]);
    // Each stream waits: the follow-up is sent once every one has had a heartbeat (an idle stream kept alive).
    const heartbeats: Promise<void>[] = [];
    const open = (call: Omit<Parameters<typeof sse>[1], 'onComment'>) => {
      let beat!: () => void;
      const heard = new Promise<void>((r) => (beat = r));
      const read = sse(url, { ...call, onComment: (c) => c === 'keep-alive' && beat() });
      heartbeats.push(Promise.race([heard, read.then((r) => assert.fail(`the stream ended while the task waited: ${JSON.stringify(r.json ?? r.events)}`))]));
      return read;
    };
    const fresh = open({ method: 'SubscribeToTask', params: { id: taskId } });
    const legacy = open({ method: 'tasks/resubscribe', params: { id: taskId } });
    const resumed = open({ method: 'SubscribeToTask', params: { id: taskId }, lastEventId: Number(head) });
    await Promise.race([Promise.all(heartbeats), deadline(15_000, 'a heartbeat on every waiting stream')]);
    // The per-task cap (3) counts streams that wait.
    const refused = await sse(url, { method: 'SubscribeToTask', params: { id: taskId } });
    assert.equal(refused.status, 429);
    const done = await rpc(url, { jsonrpc: '2.0', id: 2, method: 'SendMessage', params: { message: userMessage('Ada', { taskId }) } }, { 'A2A-Version': '1.0' });
    assert.equal(done.json.result.task.status.state, 'TASK_STATE_COMPLETED');

    const [a, b, c] = await Promise.all([fresh, legacy, resumed]);
    for (const read of [a, b, c]) assert.ok(read.ended);
    assert.equal(stateOf(a.events[0]), 'TASK_STATE_INPUT_REQUIRED');
    assert.equal(a.events[0].id, Number(head));
    assert.equal(stateOf(a.events.at(-1)!), 'TASK_STATE_COMPLETED');
    assert.equal(assembledText(a.events), 'Hello, Ada!');
    assertConsecutiveIds(c.events, Number(head) + 1);
    assert.deepEqual(c.events.map((e) => e.data.result), a.events.slice(1).map((e) => e.data.result), 'the reconnect gets what followed the snapshot');
    // 0.3: only the terminal event is final.
    assert.equal(b.events[0].data.result.status.state, 'input-required');
    assert.deepEqual(b.events.map((e) => e.data.result.final ?? false), [...b.events.slice(1).map(() => false), true]);
    assert.equal(b.events.at(-1)!.data.result.status.state, 'completed');
  });

  test('REST :subscribe resumed at the head of a task waiting for input opens at once, with heartbeats, and ends at completed', async () => {
    const asker = await agents.add(startAskingAgent());
    const { base } = await register(gw, asker.url);
    const headers = { 'a2a-version': '1.0', 'content-type': 'application/json', authorization: `Bearer ${gw.keys.client}` };
    const send = async (message: Record<string, unknown>) => (await (await fetch(`${base}/rest/message:send`, { method: 'POST', headers, body: JSON.stringify({ message }) })).json()) as any;
    const { task } = await send(userMessage('hi'));
    assert.equal(task.status.state, 'TASK_STATE_INPUT_REQUIRED');
    const { rows: [{ last_seq: head }] } = await gw.db.pool.query('SELECT last_seq FROM task_event_heads WHERE task_id = $1', [task.id]);
    // Nothing follows the head yet: the response opens (headers, then heartbeats) before any event.
    const opening = fetch(`${base}/rest/tasks/${task.id}:subscribe`, { headers: { ...headers, 'last-event-id': String(head) } });
    const res = await Promise.race([opening, deadline(15_000, 'the response to open before its first event')]);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /text\/event-stream/);
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let text = '';
    while (!text.includes(': keep-alive')) {
      const { value, done } = await reader.read();
      assert.ok(!done, `the stream ended: ${text}`);
      text += value;
    }
    assert.ok(!text.includes('data:'), 'no event yet');
    assert.equal((await send(userMessage('Ada', { taskId: task.id }))).task.status.state, 'TASK_STATE_COMPLETED');
    for (let r = await reader.read(); !r.done; r = await reader.read()) text += r.value;
    const frames = text.split('\n\n').filter((f) => f.includes('data: '));
    assert.deepEqual(frames.map((f) => Number(/^id: (\d+)$/m.exec(f)?.[1])), frames.map((_, i) => Number(head) + 1 + i));
    assert.equal(JSON.parse(frames.at(-1)!.split('data: ')[1]).statusUpdate.status.state, 'TASK_STATE_COMPLETED');
  });

  test('a stream cut mid-way is re-attached: the task so far replaces the partial artifact, the output is whole, once', async () => {
    const chunky = await agents.add(startChunkyAgent({ chunks: 100, delayMs: 5, dropFirstAttemptAfter: 30 }));
    const { rpc } = await register(gw, chunky.url, { retry: { initialIntervalMs: 100 } });
    const read = await sse(rpc, { method: 'SendStreamingMessage', params: { message: userMessage('go') } });
    assert.equal(stateOf(read.events.at(-1)!), 'TASK_STATE_COMPLETED');
    assert.equal(chunky.calls.filter((c) => c.method === 'SendStreamingMessage').length, 1, 'the message was sent once');
    assert.ok(chunky.calls.some((c) => c.method === 'SubscribeToTask' || c.method === 'GetTask'), 'the task was re-attached');
    // The same attempt goes on (nothing to void); the re-attached task's artifact comes whole (append: false).
    assert.equal(read.events.filter((e) => e.data.result.statusUpdate?.metadata?.switchboard?.void).length, 0);
    const whole = read.events.filter((e) => e.data.result.artifactUpdate && !e.data.result.artifactUpdate.append);
    assert.ok(whole.length >= 2, 'the first chunk, then the artifact so far from the re-attached task');
    assert.equal(assembledText(read.events), chunkedText(100), 'the output is whole, once');
    assertConsecutiveIds(read.events, 1);
  });
});

describe('many processes, long streams', () => {
  test('a reconnect that lands on another Switchboard process on the same database gets the rest, live', async () => {
    // The second process has no worker and polls its log only once a minute: the live tail can only come
    // from the first process's NOTIFY.
    const other = await startGateway({ db: gw.db, temporal: { env: gw.env, taskQueue: gw.taskQueue }, worker: false, streams: { pollMs: 60_000 } });
    try {
      const chunky = await agents.add(startChunkyAgent({ chunks: 150, delayMs: 10 }));
      const { id } = await register(gw, chunky.url);
      const part1 = await sse(`${gw.url}/agents/${id}/a2a`, { method: 'SendStreamingMessage', params: { message: userMessage('go') }, stopAfter: 15 });
      const taskId = taskIdOf(part1.events[0]);
      const started = Date.now();
      const part2 = await sse(`${other.url}/agents/${id}/a2a`, { method: 'SubscribeToTask', params: { id: taskId }, lastEventId: part1.events.at(-1)!.id });
      assert.ok(part2.ended);
      assert.ok(Date.now() - started < 30_000, 'the tail arrived without waiting for a poll');
      assertConsecutiveIds(part2.events, part1.events.at(-1)!.id! + 1);
      assert.equal(assembledText([...part1.events, ...part2.events]), chunkedText(150));
      assert.equal(stateOf(part2.events.at(-1)!), 'TASK_STATE_COMPLETED');
    } finally {
      await other.close();
    }
  });

  test('10,000 chunks: every one streamed, once, in order; the workflow history stays small', async () => {
    const chunky = await agents.add(startChunkyAgent({ chunks: 10_000 }));
    const { rpc } = await register(gw, chunky.url);
    const read = await sse(rpc, { method: 'SendStreamingMessage', params: { message: userMessage('go') } });
    assert.equal(read.events.filter((e) => e.data.result.artifactUpdate).length, 10_000);
    assertConsecutiveIds(read.events, 1);
    assert.equal(assembledText(read.events), chunkedText(10_000));
    const taskId = taskIdOf(read.events[0]);
    const history = await gw.env.client.workflow.getHandle(workflowIdOf('default', taskId)).fetchHistory();
    const bytes = Buffer.byteLength(JSON.stringify(history));
    assert.ok(history.events!.length < 40, `workflow history has ${history.events!.length} events`);
    assert.ok(bytes < 2 * chunkedText(10_000).length + 100_000, `workflow history is ${bytes} bytes`);
  });
});

describe('stream limits', () => {
  test('idle streams get heartbeat comments', async () => {
    const chunky = await agents.add(startChunkyAgent({ chunks: 3, delayMs: 400 }));
    const { rpc } = await register(gw, chunky.url);
    const read = await sse(rpc, { method: 'SendStreamingMessage', params: { message: userMessage('go') } });
    assert.ok(read.comments.includes('keep-alive'), `comments: ${JSON.stringify(read.comments)}`);
  });

  test('a task takes at most maxPerTask streams; the next one gets HTTP 429 with a JSON-RPC error', async () => {
    const chunky = await agents.add(startChunkyAgent({ chunks: 40, delayMs: 50 }));
    const { rpc } = await register(gw, chunky.url);
    let taskId: string | undefined;
    let ready!: () => void;
    const started = new Promise<void>((r) => (ready = r));
    const first = sse(rpc, { method: 'SendStreamingMessage', params: { message: userMessage('go') }, onEvent: (e) => (taskId ??= taskIdOf(e), ready()) });
    await started;
    const more = [sse(rpc, { method: 'SubscribeToTask', params: { id: taskId } }), sse(rpc, { method: 'SubscribeToTask', params: { id: taskId } })];
    await eventually(() => gw.hub.readers('default', taskId!) === 3 || undefined, 10_000, 'three open streams');
    const refused = await sse(rpc, { method: 'SubscribeToTask', params: { id: taskId } });
    assert.equal(refused.status, 429, JSON.stringify(refused.json ?? refused.events.slice(0, 2)));
    assert.equal(refused.json.error.code, -32603);
    assert.match(refused.json.error.message, /already has 3 open streams/);
    for (const s of await Promise.all([first, ...more])) assert.equal(stateOf(s.events.at(-1)!), 'TASK_STATE_COMPLETED');
  });

  test('a process takes at most maxTotal streams; the next one gets HTTP 429', async () => {
    const small = await startGateway({ db: gw.db, temporal: { env: gw.env, taskQueue: gw.taskQueue }, worker: false, streams: { maxTotal: 1 } });
    try {
      const chunky = await agents.add(startChunkyAgent({ chunks: 30, delayMs: 50 }));
      const { id } = await register(gw, chunky.url);
      const url = `${small.url}/agents/${id}/a2a`;
      let ready!: () => void;
      const started = new Promise<void>((r) => (ready = r));
      const first = sse(url, { method: 'SendStreamingMessage', params: { message: userMessage('go') }, onEvent: () => ready() });
      await started;
      const refused = await sse(url, { method: 'SendStreamingMessage', params: { message: userMessage('another') } });
      assert.equal(refused.status, 429);
      assert.match(refused.json.error.message, /1 open streams \(SWITCHBOARD_MAX_STREAMS\)/);
      assert.equal(stateOf((await first).events.at(-1)!), 'TASK_STATE_COMPLETED');
      assert.equal(chunky.calls.length, 1, 'the refused message started nothing');
    } finally {
      await small.close();
    }
  });

  test('a reader that stops reading is cut off past the buffer cap, told the position it reached', async () => {
    const chunky = await agents.add(startChunkyAgent({ chunks: 3000, pad: 2000 }));
    const { rpc: rpcUrl } = await register(gw, chunky.url);
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendStreamingMessage', params: { message: userMessage('go') } });
    /** Resolves once the gateway has let go of the stream: the task had its reader, and has it no more. */
    const letGo = async () => {
      let opened = false;
      await eventually(() => {
        const taskId = chunky.calls[0]?.params?.message?.metadata?.switchboard?.taskId as string | undefined;
        const readers = taskId === undefined ? 0 : gw.hub.readers('default', taskId);
        opened ||= readers > 0;
        return opened && readers === 0;
      }, 30_000, 'the gateway to let go of the stream');
    };
    const text = await new Promise<string>((resolve, reject) => {
      const headers = { 'content-type': 'application/json', 'a2a-version': '1.0', authorization: `Bearer ${gw.keys.client}` };
      const req = http.request(rpcUrl, { method: 'POST', headers }, (res) => {
        res.pause(); // a reader that has stopped reading...
        letGo().then(() => {
          let all = '';
          res.setEncoding('utf8');
          res.on('data', (d) => (all += d));
          res.on('end', () => resolve(all));
          res.on('error', () => resolve(all));
          res.resume(); // ...and comes back after its stream was cut
        }, reject);
      });
      req.on('error', reject);
      req.end(body);
    });
    const events = text.split('\n\n').filter((b) => b.includes('data:'));
    const last = JSON.parse(events.at(-1)!.split('data: ')[1]);
    assert.equal(last.error?.code, -32603, `last event: ${events.at(-1)!.slice(0, 200)}`);
    assert.match(last.error.message, /read too slowly/);
    const ids = events.slice(0, -1).map((b) => Number(/^id: (\d+)/m.exec(b)![1]));
    assert.equal(last.error.data.lastEventId, ids.at(-1), 'the error names the last event sent');
    assert.ok(ids.length < 3000, `cut off after ${ids.length} events`);

    // The 6 MB artifact does not fit in workflow state: the task still completes, its artifact marked truncated.
    const taskId = JSON.parse(events[0].split('data: ')[1]).result.task.id;
    const done = await eventually(async () => {
      const r = await rpc(`${rpcUrl}`, { jsonrpc: '2.0', id: 2, method: 'GetTask', params: { id: taskId } }, { 'A2A-Version': '1.0' });
      return r.json.result?.status.state === 'TASK_STATE_COMPLETED' ? r.json.result : undefined;
    }, 30_000, 'the task to complete');
    assert.ok(done.artifacts[0].metadata.switchboard.truncated.totalParts > done.artifacts[0].metadata.switchboard.truncated.keptParts);
  });
});
