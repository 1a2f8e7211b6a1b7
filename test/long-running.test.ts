/**
 * Agent tasks that outlast the retry policy's attempt timeout, and a cancel that reaches the agent: the policy
 * bounds each exchange with the agent (a send, a GetTask, a stream's first answer), not the agent's work.
 *
 * Real time kept short for CI: the long agent works 15 s against a 3 s attempt timeout (the example is 120 s
 * against 30 s: a larger ratio, shorter); the silent stream is quiet for 6 s twice, past this gateway's outbound
 * default body timeout (3 s here, 30 s in service) and the attempt timeout. The scenarios run concurrently.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type express from 'express';
import { Task, TaskState } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import type { ExecutionEventBus, RequestContext } from '@a2a-js/sdk/server';
import { AgentPool, type TestAgent } from './agents';
import { CountingSlowExecutor, SlowExecutor, ignoresNonBlocking } from './agents/slow';
import { artifactEvent, startV1Agent, taskEvent, textOf as agentText, type AgentOptions } from './agents/v1';
import { type Gateway, clientFactory, eventually, register, sendText, startGateway, textOf } from './helpers/harness';
import { agentTaskQuery, workflowIdOf } from '../task/messages';

let gw: Gateway;
const agents = new AgentPool();

before(async () => {
  // The outbound client's default body timeout, which agent calls replace with their own limits, is short here so
  // that a stream silent past it takes seconds, not the 30 s default.
  gw = await startGateway({ outboundBodyTimeoutMs: 3_000 });
});
after(async () => {
  await gw?.close();
  await agents.closeAll();
});

/** Streams `working`, then stays silent `silenceMs`, streams a chunk, is silent again, then completes. */
class SilentExecutor extends SlowExecutor {
  runs = 0;
  constructor(private readonly silenceMs: number) {
    super(0);
  }

  override async run(ctx: RequestContext, bus: ExecutionEventBus): Promise<void> {
    this.runs++;
    bus.publish(taskEvent(ctx, TaskState.TASK_STATE_WORKING));
    await new Promise((r) => setTimeout(r, this.silenceMs));
    bus.publish(artifactEvent(ctx, `after the silence: ${agentText(ctx.userMessage)}`));
    await new Promise((r) => setTimeout(r, this.silenceMs));
    this.complete(ctx, bus, 'done');
  }
}

async function startAgent<E extends SlowExecutor>(executor: E, opts: AgentOptions = {}, before?: (app: express.Express) => void) {
  const agent = await agents.add(startV1Agent(executor, 'Patient', 'Works for a long time', opts, before));
  return { agent, executor };
}

async function clientFor(agentUrl: string, retry: Record<string, number>): Promise<Client> {
  const { base } = await register(gw, agentUrl, { retry });
  return clientFactory(gw.keys.client).createFromUrl(`${base}/.well-known/agent-card.json`, '');
}

const methods = (agent: TestAgent, ...names: string[]) => agent.calls.filter((c) => names.includes(c.method));

describe('agent tasks that outlast the attempt timeout', { concurrency: true }, () => {
  test('a non-streaming agent that works 15 s, with a 3 s attempt timeout (3 attempts: 9 s): one send, one run at the agent, completed', async () => {
    const { agent, executor } = await startAgent(new CountingSlowExecutor(15_000), { streaming: false });
    const client = await clientFor(agent.url, { maxAttempts: 3, initialIntervalMs: 500, backoffCoefficient: 2, attemptTimeoutMs: 3_000 });
    const started = Date.now();
    const task = await sendText(client, 'take your time');
    assert.equal(task.status.state, 'TASK_STATE_COMPLETED', JSON.stringify(task.status));
    assert.ok(Date.now() - started >= 15_000, 'the gateway waited for the work');
    assert.equal(textOf(task.artifacts[0].parts), 'done: take your time');
    assert.equal(executor.runs, 1, 'one run at the agent');
    const sends = methods(agent, 'SendMessage');
    assert.equal(sends.length, 1, 'the message was sent once');
    assert.equal(sends[0]!.params.configuration.returnImmediately, true, 'non-blocking');
    assert.ok(methods(agent, 'GetTask').length >= 3, 'the task was followed with GetTask');
    assert.equal(agent.cancels.length, 0);
  });

  test('a stream silent for 6 s twice (past the outbound 3 s body timeout, and the 5 s attempt timeout) is followed to the end', async () => {
    const { agent, executor } = await startAgent(new SilentExecutor(6_000));
    const client = await clientFor(agent.url, { maxAttempts: 3, initialIntervalMs: 500, backoffCoefficient: 2, attemptTimeoutMs: 5_000 });
    const task = await sendText(client, 'quiet please');
    assert.equal(task.status.state, 'TASK_STATE_COMPLETED', JSON.stringify(task.status));
    assert.deepEqual(task.artifacts.map((a: { parts: { text?: string }[] }) => textOf(a.parts)).sort(), ['after the silence: quiet please', 'done'].sort());
    assert.equal(executor.runs, 1);
    assert.equal(methods(agent, 'SendStreamingMessage').length, 1);
    assert.equal(methods(agent, 'SubscribeToTask').length, 0, 'one stream, never cut');
  });

  test('a stream silent past retry.streamIdleTimeoutMs is re-attached (SubscribeToTask), not sent again', async () => {
    const { agent, executor } = await startAgent(new SilentExecutor(4_000));
    const client = await clientFor(agent.url, { maxAttempts: 3, initialIntervalMs: 200, backoffCoefficient: 2, attemptTimeoutMs: 5_000, streamIdleTimeoutMs: 1_500 });
    const task = await sendText(client, 'hush');
    assert.equal(task.status.state, 'TASK_STATE_COMPLETED', JSON.stringify(task.status));
    assert.deepEqual(task.artifacts.map((a: { parts: { text?: string }[] }) => textOf(a.parts)).sort(), ['after the silence: hush', 'done'].sort());
    assert.equal(executor.runs, 1, 'one run at the agent');
    assert.equal(methods(agent, 'SendStreamingMessage').length, 1, 'the message was sent once');
    assert.ok(methods(agent, 'SubscribeToTask').length >= 1, 'the silent stream was re-attached');
  });

  for (const streaming of [false, true]) {
    test(`an agent (${streaming ? 'streaming' : 'non-streaming'}) that restarts its HTTP server mid-task is re-attached: one task at the agent`, async () => {
      const { agent, executor } = await startAgent(new CountingSlowExecutor(8_000), { streaming });
      const client = await clientFor(agent.url, { maxAttempts: 5, initialIntervalMs: 500, backoffCoefficient: 2, attemptTimeoutMs: 5_000 });
      const pending = sendText(client, 'survive a restart');
      await eventually(() => executor.runs > 0 || undefined, 15_000, 'the agent to start');
      // Mid-task: the workflow knows the agent's task (the first exchange handed it over), so an attempt cut by the
      // restart re-attaches to it.
      const taskId = methods(agent, 'SendMessage', 'SendStreamingMessage')[0]!.params.message.metadata.switchboard.taskId as string;
      const workflow = gw.env.client.workflow.getHandle(workflowIdOf('default', taskId));
      await eventually(() => workflow.query(agentTaskQuery).catch(() => undefined), 15_000, "the workflow to know the agent's task");
      await agent.restart(2_000);
      const task = await pending;
      assert.equal(task.status.state, 'TASK_STATE_COMPLETED', JSON.stringify(task.status));
      assert.equal(executor.runs, 1, 'one task created at the agent');
      assert.equal(methods(agent, 'SendMessage', 'SendStreamingMessage').length, 1, 'the message was sent once');
      if (streaming) assert.ok(methods(agent, 'SubscribeToTask').length >= 1, 'the cut stream was re-attached');
      assert.equal(agent.cancels.length, 0);
    });
  }

  for (const streaming of [false, true]) {
    test(`an agent task (${streaming ? 'streaming, silent' : 'non-streaming'}) past retry.taskTimeoutMs fails the turn and is canceled at the agent`, async () => {
      const { agent, executor } = await startAgent(new CountingSlowExecutor(60_000), { streaming });
      const client = await clientFor(agent.url, { maxAttempts: 3, initialIntervalMs: 200, backoffCoefficient: 2, attemptTimeoutMs: 2_000, taskTimeoutMs: 4_000 });
      const started = Date.now();
      const task = await sendText(client, 'too long');
      assert.equal(task.status.state, 'TASK_STATE_FAILED');
      assert.match(textOf(task.status.message.parts), /timed out: the agent's task ran longer than retry\.taskTimeoutMs \(4000 ms\)/);
      assert.ok(Date.now() - started < 30_000, 'ended at the task timeout, not at the agent\'s 60 s');
      assert.equal(executor.runs, 1);
      assert.equal(agent.cancels.length, 1, 'the agent task was canceled');
    });
  }

  test('a task the gateway gives up following (GetTask keeps failing) is canceled at the agent: no run left behind', async () => {
    const executor = new CountingSlowExecutor(60_000);
    const agent = await agents.add(
      startV1Agent(executor, 'Unpollable', 'Answers the send, then 503 to GetTask', { streaming: false, fault: (c) => (c.method === 'GetTask' ? 'unavailable' : undefined) }),
    );
    const client = await clientFor(agent.url, { maxAttempts: 3, initialIntervalMs: 200, backoffCoefficient: 2, attemptTimeoutMs: 5_000 });
    const task = await sendText(client, 'lost');
    assert.equal(task.status.state, 'TASK_STATE_FAILED');
    assert.match(textOf(task.status.message.parts), /HTTP 503.*gave up following the agent's task/);
    assert.equal(executor.runs, 1);
    assert.equal(methods(agent, 'SendMessage').length, 1, 'the message was sent once (the retries re-attached)');
    const agentTaskId = agent.calls.find((c) => c.method === 'GetTask')!.params.id;
    assert.deepEqual(agent.cancels, [agentTaskId], 'the abandoned task was canceled at the agent');
  });
});

describe('a cancel during the first turn of a non-streaming agent', { concurrency: true }, () => {
  test('reaches an agent that honours non-blocking sends (CancelTask with its task id)', async () => {
    const { agent, executor } = await startAgent(new CountingSlowExecutor(60_000), { streaming: false });
    const client = await clientFor(agent.url, { maxAttempts: 3, initialIntervalMs: 500, backoffCoefficient: 2, attemptTimeoutMs: 10_000 });
    const task = await sendText(client, 'never mind', true);
    const agentTaskId = await eventually(() => agent.calls.find((c) => c.method === 'GetTask')?.params.id as string | undefined, 15_000, 'the agent to name its task');
    const canceled = Task.toJSON(await client.cancelTask({ tenant: '', id: task.id, metadata: undefined })) as any;
    assert.equal(canceled.status.state, 'TASK_STATE_CANCELED');
    assert.deepEqual(agent.cancels, [agentTaskId], 'the cancel reached the agent');
    assert.equal(executor.runs, 1);
  });

  test('is still correct with an agent that ignores non-blocking sends (it holds the send, then answers)', async () => {
    const { agent, executor } = await startAgent(new CountingSlowExecutor(3_000), { streaming: false }, ignoresNonBlocking);
    const client = await clientFor(agent.url, { maxAttempts: 3, initialIntervalMs: 500, backoffCoefficient: 2, attemptTimeoutMs: 10_000 });
    const task = await sendText(client, 'cancel me', true);
    await eventually(() => executor.runs > 0 || undefined, 15_000, 'the agent to be called');
    // The agent named no task before it answered, and its answer ends its run: the cancel wins (canceled) or the
    // answer does (completed, the cancel refused as the task is terminal). Either way one terminal state, one run,
    // and nothing left running at the agent.
    const final = await client.cancelTask({ tenant: '', id: task.id, metadata: undefined }).then(
      (t) => (Task.toJSON(t) as any).status.state as string,
      (err: Error) => (assert.match(err.message, /cannot be canceled/), 'refused'),
    );
    const got = Task.toJSON(await client.getTask({ tenant: '', id: task.id })) as any;
    if (final === 'refused') assert.equal(got.status.state, 'TASK_STATE_COMPLETED');
    else assert.equal(got.status.state, final);
    assert.ok(['TASK_STATE_CANCELED', 'TASK_STATE_COMPLETED'].includes(got.status.state));
    assert.equal(executor.runs, 1);
    assert.equal(agent.cancels.length, 0);
    assert.equal(methods(agent, 'SendMessage').length, 1);
  });

  test('an agent that ignores non-blocking and answers at once costs one exchange, as before', async () => {
    const { agent } = await startAgent(new CountingSlowExecutor(0), { streaming: false }, ignoresNonBlocking);
    const client = await clientFor(agent.url, { maxAttempts: 3, initialIntervalMs: 500, backoffCoefficient: 2, attemptTimeoutMs: 10_000 });
    const task = await sendText(client, 'quick');
    assert.equal(task.status.state, 'TASK_STATE_COMPLETED');
    assert.deepEqual(agent.calls.map((c) => c.method), ['SendMessage'], 'no GetTask, no signal round trip');
  });
});
