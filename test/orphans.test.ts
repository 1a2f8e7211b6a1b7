/**
 * Nothing left half-done (issue 45, point 5), by the orphan sweep: a task whose workflow an operator terminates while
 * its agent works is ended, and the agent is told to cancel its task; a first message claimed whose workflow never
 * started (its front door died between the claim and the start; the task id is then known to whoever reads the
 * claims, as the peer drill did) is started from what the claim recorded, and the same messageId then finds that task; a request refused after its claim leaves no claim for the sweep to start.
 * Real Temporal dev server, real PostgreSQL, real @a2a-js/sdk agents.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { AgentPool, startEchoAgent, startSlowAgent } from './agents';
import { type Gateway, eventually, register, rpc, startGateway } from './helpers/harness';
import { ensureOrphanSweep, triggerOrphanSweep } from '../src/core/temporal/orphan-sweep';
import { agentTaskQuery } from '../task/messages';

const V1 = { 'A2A-Version': '1.0' };
const userMessage = (text: string) => ({ messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] });
const send = (url: string, message: Record<string, unknown>, configuration?: Record<string, unknown>) =>
  rpc(url, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message, ...(configuration ? { configuration } : {}) } }, V1);
const getTask = (gw: Gateway, id: string) => rpc(`${gw.url}/a2a`, { jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id } }, V1);
const sends = (calls: { method?: string }[]) => calls.filter((c) => c.method === 'SendMessage' || c.method === 'SendStreamingMessage').length;

describe('nothing left half-done', () => {
  let gw: Gateway;
  const agents = new AgentPool();

  before(async () => {
    gw = await startGateway();
    // Sweeps only when asked (triggerOrphanSweep), besides its first round at start.
    await ensureOrphanSweep(gw.env.client, gw.taskQueue, 3_600_000);
  });
  after(async () => {
    await gw?.close();
    await agents.closeAll();
  });

  test('a workflow terminated while the agent works: the sweep cancels the agent\'s task, then ends the task failed', async () => {
    const slow = await agents.add(startSlowAgent({ ms: 120_000 }));
    const echo = await agents.add(startEchoAgent());
    const { rpc: slowRpc } = await register(gw, slow.url);
    const { rpc: echoRpc } = await register(gw, echo.url);
    // A task that ended normally is never canceled at its agent.
    assert.equal((await send(echoRpc, userMessage('done'))).json.result.task.status.state, 'TASK_STATE_COMPLETED');

    const task = (await send(slowRpc, userMessage('long'), { returnImmediately: true })).json.result.task;
    const handle = gw.temporal.workflow.getHandle(`a2a:default:${task.id}`);
    // The workflow knows the agent's task once the forwarding activity follows it.
    const ref = await eventually(() => handle.query(agentTaskQuery), 15_000, 'the workflow to know the agent\'s task');
    await handle.terminate('operator cleanup');

    const round = await triggerOrphanSweep(gw.env.client, gw.taskQueue);
    const ended = round.ended.find((e) => e.taskId === task.id);
    assert.ok(ended, JSON.stringify(round));
    assert.deepEqual(slow.cancels, [ref.agentTaskId], 'the agent is asked to cancel its task, once');
    assert.deepEqual(echo.cancels, []);
    const got = (await getTask(gw, task.id)).json.result;
    assert.equal(got.status.state, 'TASK_STATE_FAILED');
    assert.match(JSON.stringify(got.status.message), /terminated.*asked to cancel its task/);
    // A second round changes nothing and tells the agent nothing more.
    const second = await triggerOrphanSweep(gw.env.client, gw.taskQueue);
    assert.ok(!second.ended.some((e) => e.taskId === task.id), JSON.stringify(second));
    assert.equal(slow.cancels.length, 1);
  });

  test('a claim whose workflow never started is started by the sweep; the same messageId then finds that task', async () => {
    const slow = await agents.add(startSlowAgent({ ms: 4_000 }));
    const { rpc: slowRpc } = await register(gw, slow.url);
    const message = userMessage('left behind');

    // The front door dies between the claim and the start: the claim and the submitted event are written by the real
    // path, and the start never reaches Temporal (this process's client hangs there until the "process" is gone).
    const workflows = gw.temporal.workflow;
    const real = workflows.executeUpdateWithStart.bind(workflows);
    const died = new AbortController();
    workflows.executeUpdateWithStart = (() =>
      new Promise((_, reject) => {
        const die = () => reject(new Error('the process died'));
        if (died.signal.aborted) die();
        else died.signal.addEventListener('abort', die);
      })) as typeof workflows.executeUpdateWithStart;
    let taskId: string;
    try {
      const sent = send(slowRpc, message);
      taskId = await eventually(async () => (await gw.db.pool.query('SELECT task_id FROM message_tasks WHERE message_id = $1', [message.messageId])).rows[0]?.task_id, 10_000, 'the claim');
      died.abort();
      assert.ok((await sent).json.error, 'the client heard no answer');
    } finally {
      died.abort();
      workflows.executeUpdateWithStart = real;
    }
    assert.equal(sends(slow.calls), 0, 'nothing reached the agent');
    assert.equal((await getTask(gw, taskId)).json.error?.code, -32001, 'invisible until the sweep');

    // Within the grace a front door may still be starting it: the sweep leaves it. Past it, the sweep starts it.
    const early = await triggerOrphanSweep(gw.env.client, gw.taskQueue);
    assert.ok(!early.started?.some((s) => s.taskId === taskId), JSON.stringify(early));
    await gw.db.pool.query("UPDATE message_tasks SET created_at = now() - interval '1 minute' WHERE task_id = $1", [taskId]);
    const round = await triggerOrphanSweep(gw.env.client, gw.taskQueue);
    assert.deepEqual(round.started?.filter((s) => s.taskId === taskId), [{ tenant: 'default', taskId }], JSON.stringify(round));

    const working = await eventually(async () => {
      const r = (await getTask(gw, taskId)).json;
      return r.result?.status?.state === 'TASK_STATE_WORKING' ? r.result : undefined;
    }, 15_000, 'the started task to be working');
    assert.equal(working.id, taskId);
    // The same message, sent again: answered at once when asked to be, and at the end of the turn otherwise, with
    // the one task the sweep started; the agent got the message once.
    const t0 = Date.now();
    const now = (await send(slowRpc, message, { returnImmediately: true })).json;
    assert.equal(now.result?.task?.id, taskId, JSON.stringify(now));
    assert.ok(Date.now() - t0 < 2_000, `answered at once (${Date.now() - t0} ms)`);
    const done = (await send(slowRpc, message)).json;
    assert.equal(done.result?.task?.id, taskId, JSON.stringify(done));
    assert.equal(done.result.task.status.state, 'TASK_STATE_COMPLETED');
    assert.equal(sends(slow.calls), 1, 'the agent got the message once');
    const again = await triggerOrphanSweep(gw.env.client, gw.taskQueue);
    assert.ok(!again.started?.some((s) => s.taskId === taskId), JSON.stringify(again));
  });

  test('a send refused after its claim leaves no claim: the sweep starts nothing, and the messageId is free', async () => {
    const echo = await agents.add(startEchoAgent());
    const { rpc: echoRpc } = await register(gw, echo.url);
    const message = userMessage('refused');
    const refused = (await send(echoRpc, message, { taskPushNotificationConfig: { url: 'ftp://not-a-webhook.example/' } })).json;
    assert.equal(refused.error?.code, -32602, JSON.stringify(refused));
    const claims = await gw.db.pool.query('SELECT task_id FROM message_tasks WHERE message_id = $1', [message.messageId]);
    assert.deepEqual(claims.rows, [], 'the refused send\'s claim is released');
    await gw.db.pool.query("UPDATE message_tasks SET created_at = now() - interval '1 minute' WHERE message_id = $1", [message.messageId]);
    const round = await triggerOrphanSweep(gw.env.client, gw.taskQueue);
    assert.deepEqual(round.started ?? [], [], JSON.stringify(round));
    assert.equal(sends(echo.calls), 0);
    // Corrected, the same messageId makes the task.
    const ok = (await send(echoRpc, message)).json;
    assert.equal(ok.result?.task?.status?.state, 'TASK_STATE_COMPLETED', JSON.stringify(ok));
    assert.equal(sends(echo.calls), 1);
  });
});
