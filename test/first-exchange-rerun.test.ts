/**
 * A simple task ends in the workflow task that took its message (patch level 7): its first exchange calls the agent
 * and settles the task, and the workflow completes in the same workflow task. Temporal refuses that completion when a
 * signal reached the workflow while the workflow task ran, and runs the workflow task again, its local activities with
 * it; the front door's update-with-start fails then ("unexpected workflow task failure") and is sent again. The first
 * test makes that happen and checks what the rerun does: it reads the answer the first run kept with the task's claim,
 * the agent gets the message once, the task is recorded and settled once. Updates that arrive meanwhile (a cancel, a
 * second message) do not make the server refuse the workflow task (measured: no failed workflow task): they are
 * refused as calls to a completed task are.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { SendMessageRequest, Task } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import { AgentPool, type TestAgent } from './agents';
import { CountingSlowExecutor } from './agents/slow';
import { startV1Agent } from './agents/v1';
import { type Gateway, clientFactory, eventually, register, startGateway } from './helpers/harness';
import { agentTaskSignal, workflowIdOf } from '../task/messages';

let gw: Gateway;
const agents = new AgentPool();

before(async () => {
  gw = await startGateway();
});
after(async () => {
  await gw?.close();
  await agents.closeAll();
});

/** An agent that works `ms` on each message (within the first exchange's second), counting the runs it was given. */
async function slowAgent(ms: number): Promise<{ agent: TestAgent; executor: CountingSlowExecutor; client: Client }> {
  const executor = new CountingSlowExecutor(ms);
  const agent = await agents.add(startV1Agent(executor, 'Counting', 'Counts its runs'));
  const { base } = await register(gw, agent.url);
  const client = await clientFactory(gw.keys.client).createFromUrl(`${base}/.well-known/agent-card.json`, '');
  return { agent, executor, client };
}

/** Sends a blocking message with a known messageId; resolves with its task id once the front door has claimed it. */
async function sendBlocking(client: Client, text: string): Promise<{ answer: Promise<Record<string, any>>; taskId: string }> {
  const messageId = randomUUID();
  const answer = client
    .sendMessage(SendMessageRequest.fromJSON({ message: { messageId, role: 'ROLE_USER', parts: [{ text }] } }))
    .then((r) => Task.toJSON(r as Task) as Record<string, any>);
  answer.catch(() => undefined); // awaited by the test
  const taskId = await eventually(async () => {
    const { rows } = await gw.db.pool.query('SELECT task_id FROM message_tasks WHERE tenant = $1 AND message_id = $2', ['default', messageId]);
    return rows[0]?.task_id as string | undefined;
  });
  return { answer, taskId };
}

/** The ended workflow's history: its failed workflow tasks (with their causes) and its completed ones. */
async function historyOf(taskId: string) {
  const handle = gw.env.client.workflow.getHandle(workflowIdOf('default', taskId));
  await handle.result().catch(() => undefined);
  const events = (await handle.fetchHistory()).events ?? [];
  return {
    failedCauses: events.map((e) => e.workflowTaskFailedEventAttributes?.cause).filter((c) => c !== undefined && c !== null).map(String),
    completedWorkflowTasks: events.filter((e) => e.workflowTaskCompletedEventAttributes).length,
  };
}

/** The task as PostgreSQL holds it, and its settlements. */
async function recorded(taskId: string) {
  const { rows: tasks } = await gw.db.pool.query('SELECT state, version, task FROM tasks WHERE tenant = $1 AND task_id = $2', ['default', taskId]);
  const { rows: settlements } = await gw.db.pool.query('SELECT final_state FROM settlements WHERE tenant = $1 AND task_id = $2', ['default', taskId]);
  return { task: tasks[0], settlements: settlements.map((s) => s.final_state as string) };
}

describe('a simple task that ends in its first workflow task, while a call races it', () => {
  test('a signal while the agent works: the workflow task runs again, and reads the answer instead of calling the agent again', async () => {
    const { executor, client } = await slowAgent(600);
    const { answer, taskId } = await sendBlocking(client, 'race a signal');
    await eventually(() => executor.runs === 1 || undefined, 10_000, 'the agent working'); // the first exchange runs
    // A signal as the gateway sends them (here the one a handed-over turn sends: the agent's task), straight to the workflow.
    await gw.env.client.workflow.getHandle(workflowIdOf('default', taskId)).signal(agentTaskSignal, { agentTaskId: 'told-meanwhile' });
    const task = await answer;
    assert.equal(task.status.state, 'TASK_STATE_COMPLETED');
    const h = await historyOf(taskId);
    assert.ok(h.failedCauses.length >= 1, `the server refused the workflow task that completed the workflow: ${JSON.stringify(h)}`);
    assert.equal(executor.runs, 1, 'the agent was given the message once');
    const r = await recorded(taskId);
    assert.equal(r.task.state, 'TASK_STATE_COMPLETED');
    assert.deepEqual(r.task.task.status, task.status, 'the client was answered with the task as recorded');
    assert.deepEqual(r.settlements, ['TASK_STATE_COMPLETED'], 'settled once');
  });

  test('a cancel while the agent works: refused as a cancel of the completed task is, and the task stays completed', async () => {
    const { agent, executor, client } = await slowAgent(600);
    const { answer, taskId } = await sendBlocking(client, 'race a cancel');
    await eventually(() => executor.runs === 1 || undefined, 10_000, 'the agent working');
    const cancel = client.cancelTask({ tenant: '', id: taskId, metadata: undefined });
    cancel.catch(() => undefined); // it may be refused before the answer is in: checked below
    const task = await answer;
    assert.equal(task.status.state, 'TASK_STATE_COMPLETED');
    await assert.rejects(cancel, /cannot be canceled|not cancelable/i);
    const h = await historyOf(taskId);
    assert.deepEqual(h.failedCauses, [], 'the workflow task that completed the workflow was not refused');
    assert.equal(executor.runs, 1, 'the agent was given the message once');
    assert.equal(agent.calls.filter((c) => c.method === 'CancelTask').length, 0, 'nothing to cancel at the agent');
    const r = await recorded(taskId);
    assert.equal(r.task.state, 'TASK_STATE_COMPLETED');
    assert.deepEqual(r.settlements, ['TASK_STATE_COMPLETED']);
    const seen = Task.toJSON(await client.getTask({ tenant: '', id: taskId, historyLength: undefined })) as Record<string, any>;
    assert.equal(seen.status.state, 'TASK_STATE_COMPLETED');
  });

  test('a second message while the agent works on the first: refused as one to a completed task is', async () => {
    const { executor, client } = await slowAgent(600);
    const { answer, taskId } = await sendBlocking(client, 'first');
    await eventually(() => executor.runs === 1 || undefined, 10_000, 'the agent working');
    const second = client.sendMessage(
      SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', taskId, parts: [{ text: 'second' }] } }),
    );
    second.catch(() => undefined); // refused perhaps before the first answer is in: checked below
    const task = await answer;
    assert.equal(task.status.state, 'TASK_STATE_COMPLETED');
    await assert.rejects(second, /terminal|completed|cannot/i);
    assert.equal(executor.runs, 1, 'the agent was given the first message once, and not the second');
    assert.deepEqual((await recorded(taskId)).settlements, ['TASK_STATE_COMPLETED']);
  });
});
