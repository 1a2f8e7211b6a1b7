/**
 * The durable task core end to end: @a2a-js/sdk clients → Switchboard (fastify + Temporal workflow per task)
 * → real @a2a-js/sdk agents, with the projection and the ledger in the local PostgreSQL.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Message, SendMessageRequest, Task } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import { Context, activityInfo } from '@temporalio/activity';
import { AgentPool, chunkedText, startAskingAgent, startChunkyAgent, startEchoAgent, startFailingAgent, startReplyingAgent, startSlowAgent } from './agents';
import { type Gateway, clientFactory, eventually, register, rpc, startGateway, textOf } from './helpers/harness';
import { workflowIdOf } from '../src/core/temporal/task-gateway';

let gw: Gateway;
const agents = new AgentPool();
/** While true, the first attempt of each settlement fails *after* committing: a crash at the worst moment. */
let crashAfterSettling = false;
/** Settlement attempts per task id (finishTask's). */
const settleAttempts = new Map<string, number>();
/** Agent calls whose message text is this behave as on a worker that dies the moment it learns of a cancel. */
const DIES_ON_CANCEL = 'die when canceled';
let diedOnCancel = 0;

before(async () => {
  gw = await startGateway({
    wrapActivities: (real) => ({
      ...real,
      async forwardMessage(args) {
        if (args.message.parts.map((p) => ('text' in p ? p.text : '')).join('') !== DIES_ON_CANCEL) return real.forwardMessage(args);
        // Heartbeats until the cancel reaches it, then never again: to Temporal, a worker that died with the
        // cancel requested. The attempt ends by heartbeat timeout (the late end of this one is discarded).
        const ctx = Context.current();
        const beat = setInterval(() => ctx.heartbeat(), 200);
        await new Promise<void>((resolve) => ctx.cancellationSignal.addEventListener('abort', () => resolve()));
        clearInterval(beat);
        diedOnCancel++;
        await new Promise((r) => setTimeout(r, 4_000));
        throw new Error('this worker is gone');
      },
      // A task settles in the workflow's finishTask (its final record and settlement in one transaction), or, a simple
      // one, in its first exchange's statement (patch level 7).
      async finishTask(rec, req, opts) {
        settleAttempts.set(req.taskId, (settleAttempts.get(req.taskId) ?? 0) + 1);
        const outcome = await real.finishTask(rec, req, opts);
        if (crashAfterSettling && activityInfo().attempt === 1) {
          throw new Error('simulated crash after the settlement committed');
        }
        return outcome;
      },
    }),
  });
});
after(async () => {
  await gw?.close();
  await agents.closeAll();
});


async function clientFor(agentUrl: string, extra: Record<string, unknown> = {}): Promise<{ client: Client; id: string; rpcUrl: string }> {
  const { id, base, rpc: rpcUrl } = await register(gw, agentUrl, extra);
  const client = await clientFactory(gw.keys.client).createFromUrl(`${base}/.well-known/agent-card.json`, '');
  return { client, id, rpcUrl };
}

const userMessage = (text: string, extra: Record<string, unknown> = {}) => ({
  messageId: randomUUID(),
  role: 'ROLE_USER',
  parts: [{ text }],
  ...extra,
});

async function send(client: Client, text: string, opts: { extra?: Record<string, unknown>; configuration?: Record<string, unknown> } = {}) {
  const reply = await client.sendMessage(SendMessageRequest.fromJSON({ message: userMessage(text, opts.extra), configuration: opts.configuration }));
  assert.ok(!('messageId' in reply), 'the gateway always answers with a task');
  return Task.toJSON(reply as Task) as any;
}


async function settlementsOf(taskId: string) {
  const { rows } = await gw.db.pool.query('SELECT * FROM settlements WHERE task_id = $1', [taskId]);
  return rows;
}

describe('blocking and non-blocking SendMessage', () => {
  test('a blocking send answers with the completed task, which GetTask, the projection and the ledger agree on', async () => {
    const echo = await agents.add(startEchoAgent());
    const { client, id: agentId } = await clientFor(echo.url, { priceMinor: 250 });
    const task = await send(client, 'hello');
    assert.equal(task.status.state, 'TASK_STATE_COMPLETED');
    assert.equal(textOf(task.artifacts[0].parts), 'echo: hello');
    assert.ok(task.contextId, 'a contextId is minted');

    const got = Task.toJSON(await client.getTask({ tenant: '', id: task.id })) as any;
    assert.equal(got.status.state, 'TASK_STATE_COMPLETED');
    assert.deepEqual(got.artifacts, task.artifacts);

    // The gateway's task id is its own: the agent saw a message without it.
    const call = echo.calls.at(-1)!;
    assert.notEqual(call.params.message.taskId, task.id);
    // Tracing is off unless configured (test/tracing.test.ts turns it on): no trace context leaves the gateway.
    assert.equal(call.headers.traceparent, undefined);

    const row = await eventually(async () => (await gw.db.pool.query('SELECT * FROM tasks WHERE task_id = $1', [task.id])).rows.find((r) => r.state === 'TASK_STATE_COMPLETED'), 10_000, 'projection');
    assert.equal(row.agent_id, agentId);
    assert.equal(row.context_id, task.contextId);
    const [settlement] = await eventually(async () => ((await settlementsOf(task.id)).length ? settlementsOf(task.id) : undefined), 10_000, 'settlement');
    assert.equal(Number(settlement.amount_minor), 250);
    const { rows: entries } = await gw.db.pool.query('SELECT account, amount_minor FROM ledger_entries WHERE settlement_id = $1 ORDER BY account', [settlement.id]);
    assert.deepEqual(entries.map((e) => [e.account, Number(e.amount_minor)]), [[`agent:${agentId}`, 250], ['requester:default', -250]]);
  });

  test('a client contextId is kept, and historyLength trims the history', async () => {
    const echo = await agents.add(startEchoAgent());
    const { client } = await clientFor(echo.url);
    const contextId = randomUUID();
    const task = await send(client, 'ctx', { extra: { contextId }, configuration: { historyLength: 0 } });
    assert.equal(task.contextId, contextId);
    assert.equal(task.history, undefined);
    const full = Task.toJSON(await client.getTask({ tenant: '', id: task.id, historyLength: 1 })) as any;
    assert.equal(full.history.length, 1);
  });

  test('returnImmediately answers at once with a working task that later completes', async () => {
    const slow = await agents.add(startSlowAgent({ ms: 3_000 }));
    const { client } = await clientFor(slow.url);
    const task = await send(client, 'take your time', { configuration: { returnImmediately: true } });
    // Not a clock: a gateway that waited for the agent would answer with the completed task.
    assert.ok(['TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING'].includes(task.status.state), task.status.state);
    const done = await eventually(async () => {
      const t = Task.toJSON(await client.getTask({ tenant: '', id: task.id })) as any;
      return t.status.state === 'TASK_STATE_COMPLETED' ? t : undefined;
    }, 15_000, 'completion');
    assert.equal(textOf(done.artifacts[0].parts), 'done: take your time');
  });

  test('the agent reports its own cost in metadata, and that is what is settled', async () => {
    const echo = await agents.add(startEchoAgent({ cost: 42 }));
    const { client } = await clientFor(echo.url, { priceMinor: 1000 });
    const task = await send(client, 'bill me');
    const [settlement] = await eventually(async () => ((await settlementsOf(task.id)).length ? settlementsOf(task.id) : undefined), 10_000, 'settlement');
    assert.equal(Number(settlement.amount_minor), 42);
  });
});

describe("an agent's Message answer (A2A §3.1.1)", () => {
  const ask = async (client: Client, message: Record<string, unknown>) => {
    const answer = await client.sendMessage(SendMessageRequest.fromJSON({ message }));
    assert.ok(!('status' in answer), `a Message, not a task: ${JSON.stringify(answer)}`);
    return Message.toJSON(answer as Message) as any;
  };

  test('the client gets the Message; the gateway keeps the exchange as a completed, settled task; the context goes on', async () => {
    for (const streaming of [true, false]) {
      const replier = await agents.add(startReplyingAgent({ streaming, cost: 3 }));
      const { client, id: agentId, rpcUrl } = await clientFor(replier.url, { priceMinor: 10 });
      const contextId = randomUUID();
      const message = userMessage('hello', { contextId });
      const reply = await ask(client, message);
      assert.deepEqual([reply.role, reply.parts[0].text, reply.contextId, reply.taskId], ['ROLE_AGENT', 'reply: hello', contextId, undefined]);
      // The task Switchboard made of it (the client never learned its id) is completed, with both messages, marked as
      // answered with a Message, and settled at the cost the agent reported.
      const { rows: [{ task_id: taskId }] } = await gw.db.pool.query('SELECT task_id FROM message_tasks WHERE message_id = $1', [message.messageId]);
      const task = (await rpc(rpcUrl, { jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: taskId } }, { 'A2A-Version': '1.0' })).json.result;
      assert.equal(task.status.state, 'TASK_STATE_COMPLETED');
      assert.deepEqual(task.history.map((m: any) => [m.role, m.parts[0].text]), [['ROLE_USER', 'hello'], ['ROLE_AGENT', 'reply: hello']]);
      assert.deepEqual(task.metadata.switchboard.answer, { kind: 'message', inTask: false, inReplyTo: message.messageId });
      const [settlement] = await eventually(async () => ((await settlementsOf(taskId)).length ? settlementsOf(taskId) : undefined), 10_000, 'settlement');
      assert.deepEqual([settlement.agent_id, settlement.final_state, Number(settlement.amount_minor)], [agentId, 'TASK_STATE_COMPLETED', 3]);
      // The same message again is the same exchange, answered the same; a new one in the context goes on there.
      assert.equal((await ask(client, message)).messageId, reply.messageId);
      const next = await ask(client, userMessage('more', { contextId }));
      assert.deepEqual([next.parts[0].text, next.contextId], ['reply: more', contextId]);
      assert.equal(replier.calls.filter((c) => c.method === (streaming ? 'SendStreamingMessage' : 'SendMessage')).length, 2, 'the agent was asked twice');
    }
  });

  test("a Message that names its task is shown with the gateway's id, which GetTask knows", async () => {
    const replier = await agents.add(startReplyingAgent({ inTask: true }));
    const { client } = await clientFor(replier.url);
    const message = userMessage('hello');
    const reply = await ask(client, message);
    const { rows: [{ task_id: taskId }] } = await gw.db.pool.query('SELECT task_id FROM message_tasks WHERE message_id = $1', [message.messageId]);
    assert.equal(reply.taskId, taskId);
    const task = Task.toJSON(await client.getTask({ tenant: '', id: reply.taskId })) as any;
    assert.deepEqual([task.status.state, task.contextId], ['TASK_STATE_COMPLETED', reply.contextId]);
  });

  test('0.3 message/send gets kind: message; 0.1 tasks/send and NEXUS message/send, which have no Message answer, keep the task', async () => {
    const replier = await agents.add(startReplyingAgent());
    const { rpcUrl } = await clientFor(replier.url);
    const legacy = await rpc(rpcUrl, { jsonrpc: '2.0', id: 1, method: 'message/send', params: { message: { kind: 'message', messageId: randomUUID(), role: 'user', parts: [{ kind: 'text', text: 'hi' }] } } });
    assert.deepEqual([legacy.json.result.kind, legacy.json.result.role, legacy.json.result.parts[0].text], ['message', 'agent', 'reply: hi']);
    const id = randomUUID();
    const v01 = await rpc(rpcUrl, { jsonrpc: '2.0', id: 2, method: 'tasks/send', params: { id, message: { role: 'user', parts: [{ type: 'text', text: 'hi' }] } } });
    assert.deepEqual([v01.json.result.id, v01.json.result.status.state, v01.json.result.status.message.parts[0].text], [id, 'completed', 'reply: hi']);
    const nexus = await rpc(rpcUrl, { jsonrpc: '2.0', id: 3, method: 'message/send', params: { message: { role: 'user', parts: [{ type: 'text', data: 'hi' }] } } });
    assert.equal(nexus.json.result.status, 'completed', JSON.stringify(nexus.json));
    assert.deepEqual(nexus.json.result.messages.map((m: any) => m.parts[0].data), ['hi', 'reply: hi']);
  });
});

describe('input-required', () => {
  test('the same task continues at the agent with the next message; a retried follow-up is applied once', async () => {
    const asking = await agents.add(startAskingAgent());
    const { client } = await clientFor(asking.url);
    const first = await send(client, 'greet me');
    assert.equal(first.status.state, 'TASK_STATE_INPUT_REQUIRED');
    assert.equal(textOf(first.status.message.parts), 'What is your name?');
    // The workflow sandbox's two frames (workflows/sandbox.ts) keep the SDK's per-promise stack traces cheap: Temporal
    // UI's Stack Trace names no workflow line (SWITCHBOARD_WORKFLOW_STACK_TRACES=true does: build.test.ts).
    const stack = await gw.env.client.workflow.getHandle(workflowIdOf('default', first.id)).query<string>('__stack_trace');
    assert.doesNotMatch(stack, /workflows\//);

    const followUp = userMessage('Ada', { taskId: first.id, contextId: first.contextId });
    const request = SendMessageRequest.fromJSON({ message: followUp });
    const done = Task.toJSON((await client.sendMessage(request)) as Task) as any;
    assert.equal(done.id, first.id);
    assert.equal(done.contextId, first.contextId);
    assert.equal(done.status.state, 'TASK_STATE_COMPLETED');
    assert.equal(textOf(done.artifacts[0].parts), 'Hello, Ada!');
    // The agent was addressed with its own task id for the follow-up.
    const agentFollowUp = asking.calls.filter((c) => c.params?.message?.messageId === followUp.messageId);
    assert.equal(agentFollowUp.length, 1);
    assert.ok(agentFollowUp[0].params.message.taskId, 'follow-up carries the agent task id');

    // The client did not hear the answer and sends the very same message again: same answer, no second call.
    const again = Task.toJSON((await client.sendMessage(request)) as Task) as any;
    assert.equal(again.status.state, 'TASK_STATE_COMPLETED');
    assert.equal(asking.calls.filter((c) => c.params?.message?.messageId === followUp.messageId).length, 1);
    assert.deepEqual(
      again.history.map((m: any) => m.role),
      ['ROLE_USER', 'ROLE_AGENT', 'ROLE_USER'],
      'history: question, the agent asking, the answer',
    );
  });

  test('a paused task survives a worker restart and resumes', async () => {
    const asking = await agents.add(startAskingAgent());
    const { client } = await clientFor(asking.url);
    const first = await send(client, 'greet me later');
    assert.equal(first.status.state, 'TASK_STATE_INPUT_REQUIRED');
    await gw.stopWorker();
    await gw.startWorker();
    const done = await send(client, 'Grace', { extra: { taskId: first.id } });
    assert.equal(done.status.state, 'TASK_STATE_COMPLETED');
    assert.equal(textOf(done.artifacts[0].parts), 'Hello, Grace!');
  });

  test('a conversation continues-as-new when Temporal suggests it and loses nothing', async () => {
    // A tiny history budget makes Temporal suggest continue-as-new after the first turn. (Suggested when a workflow
    // task starts: the first turn is sent non-blocking, so the agent's answer comes in a workflow task of its own; a
    // blocking first turn runs whole in the first workflow task, and the suggestion would come with the next turn.)
    const small = await startGateway({ temporalArgs: ['--dynamic-config-value', 'limit.historyCount.suggestContinueAsNew=10'] });
    try {
      const asking = await agents.add(startAskingAgent());
      const { base } = await register(small, asking.url);
      const client = await clientFactory(small.keys.client).createFromUrl(`${base}/.well-known/agent-card.json`, '');
      const sent = Task.toJSON((await client.sendMessage(SendMessageRequest.fromJSON({ message: userMessage('hi'), configuration: { returnImmediately: true } }))) as Task) as any;
      const first = await eventually(async () => {
        const t = Task.toJSON(await client.getTask({ tenant: '', id: sent.id })) as any;
        return t.status.state === 'TASK_STATE_INPUT_REQUIRED' ? t : undefined;
      }, 15_000, 'input-required');
      const workflowId = workflowIdOf('default', first.id);
      await eventually(async () => {
        const d = await small.env.client.workflow.getHandle(workflowId).describe();
        const firstRunId = d.raw.workflowExecutionInfo?.firstRunId;
        return (firstRunId && d.runId !== firstRunId) || undefined;
      }, 15_000, 'continue-as-new');
      const reply = await client.sendMessage(SendMessageRequest.fromJSON({ message: userMessage('Lin', { taskId: first.id }) }));
      const done = Task.toJSON(reply as Task) as any;
      assert.equal(done.status.state, 'TASK_STATE_COMPLETED');
      assert.equal(textOf(done.artifacts[0].parts), 'Hello, Lin!');
      assert.equal(done.history.length, 3, 'the history crossed the new run');
    } finally {
      await small.close();
    }
  });

  test('an input-required task that waits too long expires with a message saying why', async () => {
    const other = await startGateway({ inputTimeoutMs: 1_500 });
    try {
      const asking = await agents.add(startAskingAgent());
      const { base } = await register(other, asking.url);
      const client = await clientFactory(other.keys.client).createFromUrl(`${base}/.well-known/agent-card.json`, '');
      const first = Task.toJSON((await client.sendMessage(SendMessageRequest.fromJSON({ message: userMessage('hi') }))) as Task) as any;
      assert.equal(first.status.state, 'TASK_STATE_INPUT_REQUIRED');
      const expired = await eventually(async () => {
        const t = Task.toJSON(await client.getTask({ tenant: '', id: first.id })) as any;
        return t.status.state === 'TASK_STATE_FAILED' ? t : undefined;
      }, 15_000, 'expiry');
      assert.match(textOf(expired.status.message.parts), /No message arrived within 1\.5 second\(s\).*expired/);
    } finally {
      await other.close();
    }
  });
});

describe('cancel', () => {
  test('CancelTask stops the agent call, cancels at the agent, ends canceled; a second cancel returns the task', async () => {
    const slow = await agents.add(startSlowAgent({ ms: 60_000 }));
    const { client } = await clientFor(slow.url);
    const task = await send(client, 'forever', { configuration: { returnImmediately: true } });
    await eventually(() => slow.calls.length > 0 || undefined, 10_000, 'the agent to be called');
    const canceled = Task.toJSON(await client.cancelTask({ tenant: '', id: task.id, metadata: undefined })) as any;
    assert.equal(canceled.status.state, 'TASK_STATE_CANCELED');
    assert.equal(slow.cancels.length, 1, 'the cancel reached the agent');
    const again = Task.toJSON(await client.cancelTask({ tenant: '', id: task.id, metadata: undefined })) as any;
    assert.equal(again.status.state, 'TASK_STATE_CANCELED');
    const got = Task.toJSON(await client.getTask({ tenant: '', id: task.id })) as any;
    assert.equal(got.status.state, 'TASK_STATE_CANCELED');
    assert.match(got.status.message.parts[0].text, /^Canceled by the client/, 'the task says who canceled it');
    const [settlement] = await eventually(async () => ((await settlementsOf(task.id)).length ? settlementsOf(task.id) : undefined), 10_000, 'settlement');
    assert.equal(settlement.final_state, 'TASK_STATE_CANCELED');
    assert.equal(Number(settlement.amount_minor), 0);
  });

  test("Temporal UI's Request Cancellation is an A2A cancel: the agent told, the task canceled and settled, the workflow Canceled", async () => {
    const slow = await agents.add(startSlowAgent({ ms: 60_000 }));
    const { client } = await clientFor(slow.url);
    const task = await send(client, 'forever', { configuration: { returnImmediately: true } });
    await eventually(() => slow.calls.length > 0 || undefined, 10_000, 'the agent to be called');
    // What Temporal UI's button does: a workflow cancel request, through a real Temporal client.
    const handle = gw.env.client.workflow.getHandle(workflowIdOf('default', task.id));
    await eventually(async () => (await gw.db.pool.query('SELECT 1 FROM tasks WHERE task_id = $1', [task.id])).rows.length > 0 || undefined, 10_000, 'the task recorded');
    await handle.cancel();
    await assert.rejects(handle.result(), (err: Error) => err.name === 'WorkflowFailedError' && (err.cause as Error)?.name === 'CancelledFailure');
    assert.equal((await handle.describe()).status.name, 'CANCELLED', 'Temporal UI shows it Canceled');
    assert.equal(slow.cancels.length, 1, 'the cancel reached the agent');
    const got = Task.toJSON(await client.getTask({ tenant: '', id: task.id })) as any;
    assert.equal(got.status.state, 'TASK_STATE_CANCELED');
    assert.match(got.status.message.parts[0].text, /^Canceled from Temporal/, 'the task says who canceled it');
    assert.match(got.status.message.parts[0].text, /^Canceled from Temporal/, 'the task says who canceled it');
    const [settlement] = await eventually(async () => ((await settlementsOf(task.id)).length ? settlementsOf(task.id) : undefined), 10_000, 'settlement');
    assert.equal(settlement.final_state, 'TASK_STATE_CANCELED');
    assert.equal(Number(settlement.amount_minor), 0);
  });

  test('a streaming task canceled mid-stream keeps what it streamed: GetTask and the cancel answer show the partial artifact, marked', async () => {
    let allowed = 3;
    const waiting: (() => void)[] = [];
    const gate = (i: number) => (i < allowed ? Promise.resolve() : new Promise<void>((go) => waiting.push(go)));
    const chunky = await agents.add(startChunkyAgent({ chunks: 10, gate }));
    try {
      const { client } = await clientFor(chunky.url);
      const task = await send(client, 'stream a while', { configuration: { returnImmediately: true } });
      const streamed = async () => (await gw.db.pool.query("SELECT count(*)::int AS n FROM task_events WHERE task_id = $1 AND kind = 'artifactUpdate'", [task.id])).rows[0].n;
      await eventually(async () => ((await streamed()) >= 3 ? true : undefined), 15_000, 'three chunks streamed');
      const canceled = Task.toJSON(await client.cancelTask({ tenant: '', id: task.id, metadata: undefined })) as any;
      const got = Task.toJSON(await client.getTask({ tenant: '', id: task.id })) as any;
      for (const [what, t] of [['the cancel answer', canceled], ['GetTask', got]] as const) {
        assert.equal(t.status.state, 'TASK_STATE_CANCELED', what);
        assert.equal(t.artifacts?.length, 1, `${what}: ${JSON.stringify(t.artifacts)}`);
        assert.equal(textOf(t.artifacts[0].parts), chunkedText(3), `${what}: the three chunks, joined`);
        assert.equal(t.artifacts[0].metadata?.switchboard?.streamedBeforeCancel, true, `${what}: marked as streamed before the cancel`);
      }
    } finally {
      allowed = Infinity;
      for (const go of waiting.splice(0)) go();
    }
  });

  test('a blocking sender waiting on a canceled task gets the canceled task', async () => {
    const slow = await agents.add(startSlowAgent({ ms: 60_000 }));
    const { client } = await clientFor(slow.url);
    const contextId = randomUUID();
    const pending = send(client, 'block', { extra: { contextId } });
    const { rows } = await eventually(async () => {
      const r = await gw.db.pool.query('SELECT task_id FROM tasks WHERE context_id = $1', [contextId]);
      return r.rows.length ? r : undefined;
    }, 10_000, 'the task to be recorded');
    await eventually(() => slow.calls.length > 0 || undefined, 10_000, 'the agent to be called');
    await client.cancelTask({ tenant: '', id: rows[0].task_id, metadata: undefined });
    const blocked = await pending;
    assert.equal(blocked.status.state, 'TASK_STATE_CANCELED');
  });

  test('canceling a paused task needs no agent call in flight and still tells the agent', async () => {
    const asking = await agents.add(startAskingAgent());
    const { client } = await clientFor(asking.url);
    const first = await send(client, 'greet me');
    const canceled = Task.toJSON(await client.cancelTask({ tenant: '', id: first.id, metadata: undefined })) as any;
    assert.equal(canceled.status.state, 'TASK_STATE_CANCELED');
    assert.equal(asking.cancels.length, 1);
  });

  test('a cancel whose agent call then dies with its worker ends canceled, not failed (the attempt timed out after the cancel)', async () => {
    const slow = await agents.add(startSlowAgent({ ms: 60_000 }));
    const { client } = await clientFor(slow.url, { retry: { maxAttempts: 2, initialIntervalMs: 100, backoffCoefficient: 2, attemptTimeoutMs: 3_000 } });
    const task = await send(client, DIES_ON_CANCEL, { configuration: { returnImmediately: true } });
    const before = diedOnCancel;
    const canceled = Task.toJSON(await client.cancelTask({ tenant: '', id: task.id, metadata: undefined })) as any;
    assert.ok(diedOnCancel > before, 'the call saw the cancel, then stopped heartbeating');
    assert.equal(canceled.status.state, 'TASK_STATE_CANCELED', JSON.stringify(canceled.status));
    const [settlement] = await eventually(async () => ((await settlementsOf(task.id)).length ? settlementsOf(task.id) : undefined), 10_000, 'settlement');
    assert.equal(settlement.final_state, 'TASK_STATE_CANCELED');
    assert.equal(Number(settlement.amount_minor), 0);
  });

  test('cancel racing with completion ends in exactly one terminal state', async () => {
    const slow = await agents.add(startSlowAgent({ ms: 300 }));
    const { client, rpcUrl } = await clientFor(slow.url);
    const outcomes = await Promise.all(
      Array.from({ length: 6 }, async (_, i) => {
        const task = await send(client, `race ${i}`, { configuration: { returnImmediately: true } });
        await new Promise((r) => setTimeout(r, 250 + i * 20));
        const res = await rpc(rpcUrl, { jsonrpc: '2.0', id: i, method: 'CancelTask', params: { id: task.id } }, { 'A2A-Version': '1.0' });
        const final = await eventually(async () => {
          const t = Task.toJSON(await client.getTask({ tenant: '', id: task.id })) as any;
          return ['TASK_STATE_COMPLETED', 'TASK_STATE_CANCELED'].includes(t.status.state) ? t : undefined;
        }, 15_000, 'a terminal state');
        return { res, final, task };
      }),
    );
    for (const { res, final, task } of outcomes) {
      if (res.json.error) {
        assert.equal(res.json.error.code, -32002);
        assert.equal(final.status.state, 'TASK_STATE_COMPLETED');
      } else {
        assert.equal(res.json.result.status.state, 'TASK_STATE_CANCELED');
        assert.equal(final.status.state, 'TASK_STATE_CANCELED');
      }
      const settlements = await eventually(async () => ((await settlementsOf(task.id)).length ? settlementsOf(task.id) : undefined), 10_000, 'settlement');
      assert.equal(settlements.length, 1);
      assert.equal(settlements[0].final_state, final.status.state);
    }
  });
});

describe('failures and retries', () => {
  const fastRetry = { retry: { maxAttempts: 3, initialIntervalMs: 100, backoffCoefficient: 2, attemptTimeoutMs: 5_000 } };

  test('an agent that keeps answering 5xx is retried with the same messageId, then the task fails saying why', async () => {
    const failing = await agents.add(startFailingAgent({ mode: 'http500' }));
    const { client } = await clientFor(failing.url, fastRetry);
    const task = await send(client, 'doomed');
    assert.equal(task.status.state, 'TASK_STATE_FAILED');
    assert.match(textOf(task.status.message.parts), /HTTP 500/);
    const sent = failing.calls.filter((c) => c.params?.message);
    assert.equal(sent.length, 3, 'three attempts');
    assert.equal(new Set(sent.map((c) => c.params.message.messageId)).size, 1, 'one messageId on every attempt');

    // Temporal UI shows the workflow as Failed (after it recorded and settled the task), naming why.
    const handle = gw.env.client.workflow.getHandle(workflowIdOf('default', task.id));
    await assert.rejects(handle.result(), (err: Error & { cause?: { type?: string; message?: string } }) => {
      assert.equal(err.cause?.type, 'A2ATaskFailed');
      assert.match(err.cause?.message ?? '', /^A2A task failed: .*HTTP 500/);
      return true;
    });
    assert.equal((await handle.describe()).status.name, 'FAILED');
    // Its stack trace has the sandbox's two frames (workflows/sandbox.ts), mapped to the workflow's source.
    const failure = (await handle.fetchHistory()).events?.at(-1)?.workflowExecutionFailedEventAttributes?.failure;
    const frames = (failure?.stackTrace ?? '').split('\n').filter((l) => /^\s+at /.test(l));
    assert.equal(frames.length, 2, failure?.stackTrace ?? 'no stack trace');
    assert.match(frames[1], /workflows\/task-workflow\.ts:\d+:\d+/);
  });

  test('a transient failure is retried and the task completes', async () => {
    const failing = await agents.add(startFailingAgent({ mode: 'http500', failTimes: 2 }));
    const { client } = await clientFor(failing.url, fastRetry);
    const task = await send(client, 'eventually');
    assert.equal(task.status.state, 'TASK_STATE_COMPLETED');
    assert.equal(failing.calls.filter((c) => c.params?.message).length, 3);
    const handle = gw.env.client.workflow.getHandle(workflowIdOf('default', task.id));
    await handle.result();
    assert.equal((await handle.describe()).status.name, 'COMPLETED');
  });

  test('an answer that cannot succeed on retry (invalid-response) fails the task at once', async () => {
    const failing = await agents.add(startFailingAgent({ mode: 'invalid-response' }));
    const { client } = await clientFor(failing.url, fastRetry);
    const task = await send(client, 'no');
    assert.equal(task.status.state, 'TASK_STATE_FAILED');
    assert.equal(failing.calls.length, 1, 'not retried');
    assert.match(textOf(task.status.message.parts), /not a valid A2A response/);
  });

  test("an agent's JSON-RPC error on a new task is not retried, and is the client's error (issue 11)", async () => {
    const failing = await agents.add(startFailingAgent({ mode: 'jsonrpc-error' }));
    const { client } = await clientFor(failing.url, fastRetry);
    await assert.rejects(send(client, 'no'), (err: any) => {
      assert.deepEqual([err.envelopeCode, err.message], [-32603, 'agent exploded']);
      return true;
    });
    assert.equal(failing.calls.length, 1, 'not retried');
  });

  test('an agent that hangs times out per attempt and the task fails', async () => {
    const failing = await agents.add(startFailingAgent({ mode: 'hang' }));
    const { client } = await clientFor(failing.url, { retry: { maxAttempts: 2, initialIntervalMs: 100, attemptTimeoutMs: 1_000 } });
    const task = await send(client, 'anyone?');
    assert.equal(task.status.state, 'TASK_STATE_FAILED');
    assert.match(textOf(task.status.message.parts), /timed out/);
    assert.equal(failing.calls.length, 2);
  });

  test('a settlement retried after it committed is written exactly once', async () => {
    const echo = await agents.add(startEchoAgent());
    const { client } = await clientFor(echo.url, { priceMinor: 7 });
    crashAfterSettling = true;
    try {
      // Answered at once, so the workflow's finishTask settles it (a blocking send's first exchange settles a simple
      // task itself: a crash there is a rerun of its workflow task, test/first-exchange-rerun.test.ts).
      const task = await send(client, 'pay once', { configuration: { returnImmediately: true } });
      await eventually(() => (settleAttempts.get(task.id) ?? 0) >= 2 || undefined, 10_000, 'the settlement to be retried');
      const settlements = await settlementsOf(task.id);
      assert.equal(settlements[0]?.final_state, 'TASK_STATE_COMPLETED');
      assert.equal(settlements.length, 1);
      assert.equal(Number(settlements[0].amount_minor), 7);
      const { rows: entries } = await gw.db.pool.query('SELECT amount_minor FROM ledger_entries WHERE settlement_id = $1', [settlements[0].id]);
      assert.deepEqual(entries.map((e) => Number(e.amount_minor)).sort((a, b) => a - b), [-7, 7]);
    } finally {
      crashAfterSettling = false;
    }
  });
});

describe('GetTask, ListTasks and Temporal UI', () => {
  test('GetTask answers from the projection once Temporal no longer has the workflow', async () => {
    const echo = await agents.add(startEchoAgent());
    const { client, id } = await clientFor(echo.url);
    const task = await send(client, 'remember me');
    await eventually(async () => ((await settlementsOf(task.id)).length ? true : undefined), 10_000, 'settlement');
    // A gateway on the same database but a brand-new Temporal server: as after the retention period.
    const later = await startGateway({ db: gw.db });
    try {
      // The same agent (the registry is in the database), at the new gateway's address.
      const base = `${later.url}/agents/${id}`;
      const rpcUrl = `${base}/a2a`;
      const laterClient = await clientFactory(later.keys.client).createFromUrl(`${base}/.well-known/agent-card.json`, '');
      const got = Task.toJSON(await laterClient.getTask({ tenant: '', id: task.id })) as any;
      assert.equal(got.status.state, 'TASK_STATE_COMPLETED');
      assert.equal(textOf(got.artifacts[0].parts), 'echo: remember me');
      // A message to the finished task is refused the same way whether or not Temporal still has it.
      const res = await rpc(rpcUrl, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { ...userMessage('more'), taskId: task.id } } }, { 'A2A-Version': '1.0' });
      assert.equal(res.json.error.code, -32004);
      const cancel = await rpc(rpcUrl, { jsonrpc: '2.0', id: 2, method: 'CancelTask', params: { id: task.id } }, { 'A2A-Version': '1.0' });
      assert.equal(cancel.json.error.code, -32002);
      const unknown = await rpc(rpcUrl, { jsonrpc: '2.0', id: 3, method: 'GetTask', params: { id: randomUUID() } }, { 'A2A-Version': '1.0' });
      assert.equal(unknown.json.error.code, -32001);
    } finally {
      await later.close();
    }
  });

  test('ListTasks pages newest-first through one context and filters by status', async () => {
    const echo = await agents.add(startEchoAgent());
    const { client } = await clientFor(echo.url);
    const contextId = randomUUID();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await send(client, `list ${i}`, { extra: { contextId } })).id);
    await eventually(async () => {
      const { rows } = await gw.db.pool.query("SELECT count(*)::int AS n FROM tasks WHERE context_id = $1 AND state = 'TASK_STATE_COMPLETED'", [contextId]);
      return rows[0].n === 5 || undefined;
    }, 10_000, 'projection');
    const seen: string[] = [];
    let pageToken = '';
    let pages = 0;
    do {
      const page = await client.listTasks({ tenant: '', contextId, pageSize: 2, pageToken, status: 0, historyLength: 0, includeArtifacts: false } as any);
      pages++;
      assert.equal(page.totalSize, 5);
      assert.equal(page.pageSize, 2);
      for (const t of page.tasks) {
        const json = Task.toJSON(t) as any;
        assert.equal(json.artifacts?.length ?? 0, 0, 'artifacts omitted unless asked for');
        seen.push(json.id);
      }
      pageToken = page.nextPageToken;
    } while (pageToken && pages < 10);
    assert.equal(pages, 3);
    assert.deepEqual(seen, [...ids].reverse(), 'newest status first');
    const raw = await rpc(
      `${gw.url}/agents/${(await register(gw, echo.url)).id}/a2a`,
      { jsonrpc: '2.0', id: 1, method: 'ListTasks', params: { contextId, status: 'TASK_STATE_FAILED' } },
      { 'A2A-Version': '1.0' },
    );
    assert.deepEqual(raw.json.result.tasks, []);
    assert.equal(raw.json.result.nextPageToken, '');
  });

  test('operators find a task in Temporal by state, agent, context and tenant', async () => {
    const echo = await agents.add(startEchoAgent());
    const { client, id: agentId } = await clientFor(echo.url);
    const contextId = randomUUID();
    const task = await send(client, 'find me', { extra: { contextId } });
    const query = `A2AContextId = "${contextId}" AND A2AAgentId = "${agentId}" AND A2ATenant = "default" AND A2ATaskState = "completed"`;
    const found = await eventually(async () => {
      for await (const wf of gw.env.client.workflow.list({ query })) return wf;
      return undefined;
    }, 15_000, 'visibility');
    assert.equal(found.workflowId, workflowIdOf('default', task.id));
    const description = await gw.env.client.workflow.getHandle(found.workflowId).describe();
    assert.match((await description.staticSummary()) ?? '', new RegExp(task.id));
  });
});
