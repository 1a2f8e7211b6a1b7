/**
 * A blocking turn's first exchange runs as a local activity inside the workflow task that starts the turn
 * (activities/forward-message.ts forwardFirstExchange): an agent that answers at once costs one workflow task and
 * no activity. A turn still running after FIRST_EXCHANGE_MS is handed to the forwarding activity, which adopts the
 * running turn: the message is sent once, a stream is never cut, and a cancel still reaches the agent.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Task, TaskState } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import type { ExecutionEventBus, RequestContext } from '@a2a-js/sdk/server';
import { defaultPayloadConverter } from '@temporalio/common';
import type { temporal } from '@temporalio/proto';
import { AgentPool, type TestAgent, startDelegatorAgent, startEchoAgent, startFailingAgent } from './agents';
import { CountingSlowExecutor, SlowExecutor, ignoresNonBlocking } from './agents/slow';
import { artifactEvent, startV1Agent, taskEvent, type AgentOptions } from './agents/v1';
import { type Gateway, agentKey, clientFactory, eventually, register, sendText, startGateway, textOf } from './helpers/harness';
import { workflowIdOf } from '../task/messages';
import { FIRST_EXCHANGE_MS } from '../task/contracts';

let gw: Gateway;
const agents = new AgentPool();

before(async () => {
  gw = await startGateway();
});
after(async () => {
  await gw?.close();
  await agents.closeAll();
});

/** Streams one artifact every 500 ms for `n` artifacts, then completes. */
class Streaming extends SlowExecutor {
  runs = 0;
  constructor(private readonly n: number) {
    super(0);
  }
  override async run(ctx: RequestContext, bus: ExecutionEventBus): Promise<void> {
    this.runs++;
    bus.publish(taskEvent(ctx, TaskState.TASK_STATE_WORKING));
    for (let i = 1; i <= this.n; i++) {
      await new Promise((r) => setTimeout(r, 500));
      bus.publish(artifactEvent(ctx, `part ${i}`));
    }
    this.complete(ctx, bus, 'done');
  }
}

async function clientFor(agentUrl: string): Promise<Client> {
  const { base } = await register(gw, agentUrl, { retry: { maxAttempts: 3, initialIntervalMs: 500, backoffCoefficient: 2, attemptTimeoutMs: 10_000 } });
  return clientFactory(gw.keys.client).createFromUrl(`${base}/.well-known/agent-card.json`, '');
}

const methods = (agent: TestAgent, ...names: string[]) => agent.calls.filter((c) => names.includes(c.method));

/**
 * The task's workflow history (once its workflow has ended, with `ended`): how many workflow tasks completed, which
 * one completed the client's update, and the inputs of the activities it scheduled.
 */
async function historyOf(taskId: string, ended = false) {
  const handle = gw.env.client.workflow.getHandle(workflowIdOf('default', taskId));
  if (ended) await handle.result();
  const events = (await handle.fetchHistory()).events ?? [];
  const completedWorkflowTasks = events.filter((e) => e.workflowTaskCompletedEventAttributes);
  const scheduled = events.map((e) => e.activityTaskScheduledEventAttributes).filter((a): a is temporal.api.history.v1.IActivityTaskScheduledEventAttributes => !!a);
  return {
    workflowTasks: completedWorkflowTasks.length,
    events: events.length,
    /** Which workflow task (1-based) answered the client's first message: its commands follow its completion. */
    answeredIn: completedWorkflowTasks.filter((t) => Number(t.eventId) < Number(events.find((e) => e.workflowExecutionUpdateCompletedEventAttributes)?.eventId ?? 0)).length,
    failedWorkflowTasks: events.filter((e) => e.workflowTaskFailedEventAttributes).length,
    localActivities: events.filter((e) => e.markerRecordedEventAttributes?.markerName === 'core_local_activity').length,
    /** Markers other than local activities' (a `patched()` call's, core_patch) and the search attributes upserted. */
    otherMarkers: events.map((e) => e.markerRecordedEventAttributes?.markerName).filter((m) => m && m !== 'core_local_activity'),
    upserted: events.flatMap((e) =>
      Object.entries(e.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields ?? {}).map(([k, v]) => `${k}=${defaultPayloadConverter.fromPayload(v)}`),
    ),
    activities: scheduled.map((a) => ({ type: a.activityType?.name, input: defaultPayloadConverter.fromPayload<Record<string, unknown>>(a.input!.payloads![0]!) })),
  };
}

// These answer within the first exchange's second: one at a time, so the hand-over tests' agents do not slow them past it.
describe('the first exchange of a blocking turn', () => {
  test('an agent that answers at once: recorded, settled and answered by the first workflow task, in two local activities', async () => {
    const echo = await agents.add(startEchoAgent({ streaming: false }));
    const task = await sendText(await clientFor(echo.url), 'hello');
    assert.equal(task.status.state, 'TASK_STATE_COMPLETED');
    // The answer leaves after the task's last write: the projection and the ledger have it as the client does.
    const { rows } = await gw.db.pool.query(
      'SELECT t.state, t.task, s.final_state FROM tasks t LEFT JOIN settlements s ON s.tenant = t.tenant AND s.task_id = t.task_id WHERE t.tenant = $1 AND t.task_id = $2',
      ['default', task.id],
    );
    assert.equal(rows.length, 1);
    assert.equal(rows[0].state, 'TASK_STATE_COMPLETED');
    assert.equal(rows[0].final_state, 'TASK_STATE_COMPLETED');
    // The workflow wrote the final record; the projection's task is the client's (its status time included).
    assert.deepEqual(rows[0].task.status, task.status);
    assert.deepEqual(rows[0].task.artifacts, task.artifacts);
    const h = await historyOf(task.id, true);
    assert.equal(h.answeredIn, 1, "the client's answer left with the first workflow task");
    assert.equal(h.workflowTasks, 1, 'the workflow ended in the same workflow task (patch level 7)');
    assert.deepEqual(h.activities, [], 'the agent was called by a local activity');
    assert.equal(h.localActivities, 1, 'the first exchange called the agent and wrote the final record and the settlement');
    assert.equal(h.events, 9, 'nine history events');
    // Started at the front door's patch level, the workflow takes its patched paths without asking (workflows/patches.ts).
    assert.deepEqual(h.otherMarkers, [], 'no patch markers');
    // No TemporalChangeVersion upserts, and `working` is not shown in the workflow task that ends the turn.
    assert.deepEqual(h.upserted, ['A2ATaskState=completed'], 'the state shown once: completed');
    assert.equal(methods(echo, 'SendMessage').length, 1);
  });

  test("a streaming agent that answers at once: its events precede the final state, which is one transaction with the settlement", async () => {
    const echo = await agents.add(startEchoAgent({ streaming: true }));
    const task = await sendText(await clientFor(echo.url), 'all at once');
    assert.equal(task.status.state, 'TASK_STATE_COMPLETED');
    // xmin: the transaction that wrote a row.
    const { rows: events } = await gw.db.pool.query('SELECT event_key, xmin::text AS tx FROM task_events WHERE tenant = $1 AND task_id = $2 ORDER BY seq', ['default', task.id]);
    const keys = events.map((e) => e.event_key as string);
    assert.deepEqual([keys[0], keys[1], keys.at(-1)], ['v0', 'v1', 'v2'], keys.join(' '));
    const relayed = events.filter((e) => e.event_key.startsWith('fwd/'));
    assert.ok(relayed.length >= 1, `the agent's artifact is logged: ${keys.join(' ')}`);
    const last = events.at(-1)!.tx;
    const { rows } = await gw.db.pool.query(
      'SELECT t.xmin::text AS task_tx, s.xmin::text AS settled_tx FROM tasks t JOIN settlements s ON s.tenant = t.tenant AND s.task_id = t.task_id WHERE t.tenant = $1 AND t.task_id = $2',
      ['default', task.id],
    );
    assert.deepEqual(rows, [{ task_tx: last, settled_tx: last }], 'the final record and the settlement: one transaction, the last event');
    // The `working` change was held with the agent's events (FINISH_HOLD_MS): the task's first row and its log after
    // the claim are one statement, so a simple task costs two (the claim, and this).
    assert.equal(events[1].tx, last, `the working change is logged in the same transaction: ${JSON.stringify(events)}`);
  });

  test('PostgreSQL refuses the finished task once: the workflow writes it again, the agent is not called again', async () => {
    const echo = await agents.add(startEchoAgent({ streaming: false }));
    const client = await clientFor(echo.url);
    // PostgreSQL refuses the finished task's record once (a sequence: nextval is not rolled back with the failed write).
    const marker = `finish-fault-${Date.now()}`;
    await gw.db.pool.query(`CREATE SEQUENCE ${marker.replace(/-/g, '_')}`);
    await gw.db.pool.query(`
      CREATE FUNCTION ${marker.replace(/-/g, '_')}() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.version = 2 AND NEW.task::text LIKE '%${marker}%' AND nextval('${marker.replace(/-/g, '_')}') = 1 THEN
          RAISE EXCEPTION 'injected: the finished task is refused once';
        END IF;
        RETURN NEW;
      END $$`);
    await gw.db.pool.query(`CREATE TRIGGER ${marker.replace(/-/g, '_')} BEFORE INSERT OR UPDATE ON tasks FOR EACH ROW EXECUTE FUNCTION ${marker.replace(/-/g, '_')}()`);
    try {
      const task = await sendText(client, marker);
      assert.equal(task.status.state, 'TASK_STATE_COMPLETED');
      const { rows } = await gw.db.pool.query(
        'SELECT t.task, s.final_state FROM tasks t JOIN settlements s ON s.tenant = t.tenant AND s.task_id = t.task_id WHERE t.tenant = $1 AND t.task_id = $2',
        ['default', task.id],
      );
      assert.equal(rows.length, 1, 'recorded and settled once');
      assert.deepEqual(rows[0].task.status, task.status, "the workflow's record is the client's: its status time");
      const h = await historyOf(task.id, true);
      assert.equal(h.localActivities, 2, "the workflow's own local activity wrote it, retried");
      assert.equal(h.answeredIn, 1);
      assert.equal(methods(echo, 'SendMessage').length, 1, 'the agent was called once');
      const { rows: tried } = await gw.db.pool.query(`SELECT last_value FROM ${marker.replace(/-/g, '_')}`);
      assert.ok(Number(tried[0].last_value) >= 2, 'the fault fired and the write was made again');
    } finally {
      await gw.db.pool.query(`DROP TRIGGER ${marker.replace(/-/g, '_')} ON tasks`);
      await gw.db.pool.query(`DROP FUNCTION ${marker.replace(/-/g, '_')}()`);
      await gw.db.pool.query(`DROP SEQUENCE ${marker.replace(/-/g, '_')}`);
    }
  });

  test("PostgreSQL refuses the task's working change once, after the agent answered: the turn re-attaches, the task completes", async () => {
    // The working change is written while it works.
    const echo = await agents.add(startV1Agent(new SlowExecutor(200), 'Slow', 'Answers in 200 ms', { streaming: true }));
    const client = await clientFor(echo.url);
    const marker = `working_fault_${Date.now()}`;
    await gw.db.pool.query(`CREATE SEQUENCE ${marker}`);
    // The refusal comes after a pause, so the agent has answered by then.
    await gw.db.pool.query(`
      CREATE FUNCTION ${marker}() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.version = 1 AND NEW.task::text LIKE '%${marker}%' AND nextval('${marker}') = 1 THEN
          PERFORM pg_sleep(0.4);
          RAISE EXCEPTION 'injected: the working change is refused once';
        END IF;
        RETURN NEW;
      END $$`);
    await gw.db.pool.query(`CREATE TRIGGER ${marker} BEFORE INSERT OR UPDATE ON tasks FOR EACH ROW EXECUTE FUNCTION ${marker}()`);
    try {
      const task = await sendText(client, marker);
      assert.equal(task.status.state, 'TASK_STATE_COMPLETED', JSON.stringify(task.status));
      assert.equal(textOf(task.artifacts[0].parts), `done: ${marker}`);
      assert.equal(methods(echo, 'SendStreamingMessage', 'SendMessage').length, 1, 'the agent was asked once: the retry re-attached to its task');
      const { rows } = await gw.db.pool.query(`SELECT last_value FROM ${marker}`);
      assert.ok(Number(rows[0].last_value) >= 2, 'the fault fired and the change was written again');
      const h = await historyOf(task.id, true);
      assert.equal(h.activities.length, 1, 'handed over to the activity');
    } finally {
      await gw.db.pool.query(`DROP TRIGGER ${marker} ON tasks`);
      await gw.db.pool.query(`DROP FUNCTION ${marker}()`);
      await gw.db.pool.query(`DROP SEQUENCE ${marker}`);
    }
  });

  test('an agent that starts a child task through Switchboard and answers at once: linked, settled, called once', async () => {
    // The child's link reaches the parent's workflow as a signal while its first exchange runs: were the parent to
    // complete in that workflow task, the server would refuse it and the first exchange (the agent call) run again.
    const leaf = await agents.add(startEchoAgent({ streaming: false }));
    const ids: Record<string, string> = {};
    let key = '';
    const top = await agents.add(startDelegatorAgent({ name: 'Top', gateway: () => ({ url: gw.url, agentId: ids.leaf, key }) }));
    ids.leaf = (await register(gw, leaf.url, { priceMinor: 5 })).id;
    const { id, base } = await register(gw, top.url);
    key = await agentKey(gw, id);
    const client = await clientFactory(gw.keys.client).createFromUrl(`${base}/.well-known/agent-card.json`, '');
    const task = await sendText(client, 'pass it on');
    assert.equal(task.status.state, 'TASK_STATE_COMPLETED', JSON.stringify(task.status));
    const h = await historyOf(task.id, true);
    assert.equal(h.failedWorkflowTasks, 0, 'no workflow task was refused');
    assert.equal(h.answeredIn, 1);
    assert.deepEqual(h.activities, []);
    assert.equal(methods(top, 'SendMessage').length, 1, 'the top agent was called once');
    assert.equal(methods(leaf, 'SendMessage').length, 1);
    const { rows } = await gw.db.pool.query('SELECT state FROM tasks WHERE parent_task_id = $1', [task.id]);
    assert.deepEqual(rows, [{ state: 'TASK_STATE_COMPLETED' }], 'the child, linked to its parent');
    // Settled once the child's link arrived: its cost in the parent's.
    const job = (Task.toJSON(await client.getTask({ tenant: '', id: task.id, historyLength: undefined })) as any).metadata.switchboard.job;
    assert.deepEqual(job.cost, { ownMinor: 0, childrenMinor: 5, totalMinor: 5 });
  });

  /** Runs `body` while PostgreSQL takes 300 ms over the first row of a top-level task whose text holds the marker it is given. */
  async function withSlowFirstRow(body: (marker: string) => Promise<void>): Promise<void> {
    const marker = `slow_record_${Date.now()}`;
    await gw.db.pool.query(`
      CREATE FUNCTION ${marker}() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.parent_task_id IS NULL AND NEW.task::text LIKE '%${marker}%' THEN PERFORM pg_sleep(0.3); END IF;
        RETURN NEW;
      END $$`);
    await gw.db.pool.query(`CREATE TRIGGER ${marker} BEFORE INSERT ON tasks FOR EACH ROW EXECUTE FUNCTION ${marker}()`);
    try {
      await body(marker);
    } finally {
      await gw.db.pool.query(`DROP TRIGGER ${marker} ON tasks`);
      await gw.db.pool.query(`DROP FUNCTION ${marker}()`);
    }
  }

  /** The task's event log by key, once its workflow has ended (a task with children is settled after its answer). */
  async function logKeys(taskId: string): Promise<string[]> {
    await historyOf(taskId, true);
    const { rows } = await gw.db.pool.query('SELECT event_key FROM task_events WHERE tenant = $1 AND task_id = $2 ORDER BY seq', ['default', taskId]);
    return rows.map((e) => e.event_key as string);
  }

  test("a streaming agent called while the task's working change is written: its events wait for it in the log", async () => {
    // It answers after the first exchange's hold (FINISH_HOLD_MS), which ends with the working change being written.
    const echo = await agents.add(startV1Agent(new SlowExecutor(200), 'Slow', 'Answers in 200 ms', { streaming: true }));
    const client = await clientFor(echo.url);
    await withSlowFirstRow(async (marker) => {
      const task = await sendText(client, marker);
      assert.equal(task.status.state, 'TASK_STATE_COMPLETED');
      const keys = await logKeys(task.id);
      assert.deepEqual(keys.slice(0, 2), ['v0', 'v1'], keys.join(' '));
      assert.equal(keys.at(-1), 'v2');
      assert.ok(keys.length > 3, "the agent's events are logged between them");
    });
  });

  test("the agent is called while the task's working change is written: a child started at once waits for its parent's row", async () => {
    const leaf = await agents.add(startEchoAgent({ streaming: false }));
    const ids: Record<string, string> = {};
    let key = '';
    const top = await agents.add(startDelegatorAgent({ name: 'Prompt', gateway: () => ({ url: gw.url, agentId: ids.leaf, key }) }));
    ids.leaf = (await register(gw, leaf.url)).id;
    const { id, base } = await register(gw, top.url);
    key = await agentKey(gw, id);
    const client = await clientFactory(gw.keys.client).createFromUrl(`${base}/.well-known/agent-card.json`, '');
    // PostgreSQL takes 300 ms over the parent's first row: its agent calls back through Switchboard before it exists.
    await withSlowFirstRow(async (marker) => {
      const task = await sendText(client, marker);
      assert.equal(task.status.state, 'TASK_STATE_COMPLETED', JSON.stringify(task.status));
      assert.equal(methods(top, 'SendMessage').length, 1, 'the top agent was called once');
      const { rows: children } = await gw.db.pool.query('SELECT state FROM tasks WHERE parent_task_id = $1', [task.id]);
      assert.deepEqual(children, [{ state: 'TASK_STATE_COMPLETED' }], "the child, started before its parent's row was written, waited for it");
      const keys = await logKeys(task.id);
      assert.deepEqual([keys[0], keys[1], keys.at(-1)], ['v0', 'v1', 'v2'], keys.join(' '));
    });
  });

  test('a first exchange that fails and backs off shows the task working before the backoff; the activity completes it', async () => {
    const flaky = await agents.add(startFailingAgent({ mode: 'http500', failTimes: 1 }));
    const task = await sendText(await clientFor(flaky.url), 'again');
    assert.equal(task.status.state, 'TASK_STATE_COMPLETED', JSON.stringify(task.status));
    const h = await historyOf(task.id, true);
    assert.deepEqual(h.activities.map((a) => a.type), ['forwardMessage'], 'the second attempt was the activity');
    assert.deepEqual(h.upserted, ['A2ATaskState=working', 'A2ATaskState=completed']);
    const events = (await gw.env.client.workflow.getHandle(workflowIdOf('default', task.id)).fetchHistory()).events ?? [];
    const working = events.findIndex((e) => e.upsertWorkflowSearchAttributesEventAttributes);
    const backoff = events.findIndex((e) => e.timerStartedEventAttributes);
    assert.ok(working >= 0 && backoff > working, `working (event ${working}) was upserted before the backoff timer (event ${backoff})`);
  });

  test('a cancel sent while the first exchange runs waits for its end: one terminal state, one run, no refused workflow task', async () => {
    // Done before the second look at its task (250 ms after the first): well within the first exchange's second.
    const executor = new CountingSlowExecutor(FIRST_EXCHANGE_MS / 5);
    const agent = await agents.add(startV1Agent(executor, 'Brief', 'Works a fifth of a second', { streaming: false }));
    const client = await clientFor(agent.url);
    let answered = false;
    const blocked = sendText(client, 'cancel me soon').finally(() => (answered = true));
    const sent = await eventually(() => methods(agent, 'SendMessage')[0], 15_000, 'the agent to be called');
    const taskId = sent.params.message.metadata.switchboard.taskId as string;
    assert.equal(answered, false, 'the cancel goes while the turn runs');
    // The update waits for the workflow task that runs the turn: the task has completed by then.
    await assert.rejects(client.cancelTask({ tenant: '', id: taskId, metadata: undefined }), /cannot be canceled|not cancelable/i);
    const task = await blocked;
    assert.equal(task.status.state, 'TASK_STATE_COMPLETED', JSON.stringify(task.status));
    assert.equal(methods(agent, 'SendMessage').length, 1, 'the message was sent once');
    assert.equal(executor.runs, 1);
    const h = await historyOf(taskId, true);
    assert.equal(h.failedWorkflowTasks, 0, 'no workflow task was refused');
    assert.deepEqual(h.activities, [], 'answered within the first exchange');
  });

});

describe('a blocking turn past its first exchange', { concurrency: true }, () => {
  for (const honours of [true, false]) {
    test(`an agent that ${honours ? 'honours' : 'ignores'} non-blocking and works past the first exchange: handed over, the message sent once`, async () => {
      const executor = new CountingSlowExecutor(3 * FIRST_EXCHANGE_MS);
      const agent = await agents.add(startV1Agent(executor, 'Patient', 'Works a while', { streaming: false } as AgentOptions, honours ? undefined : ignoresNonBlocking));
      const task = await sendText(await clientFor(agent.url), 'take your time');
      assert.equal(task.status.state, 'TASK_STATE_COMPLETED', JSON.stringify(task.status));
      assert.equal(textOf(task.artifacts[0].parts), 'done: take your time');
      assert.equal(executor.runs, 1, 'one run at the agent');
      assert.equal(methods(agent, 'SendMessage').length, 1, 'the message was sent once');
      const h = await historyOf(task.id);
      assert.deepEqual(h.activities.map((a) => a.type), ['forwardMessage'], 'the forwarding activity took the turn over');
      assert.deepEqual(h.upserted, ['A2ATaskState=working', 'A2ATaskState=completed'], 'working shown while the activity had the turn');
      assert.equal(typeof h.activities[0]!.input.adopt, 'string', 'and adopted the running turn');
      if (honours) assert.equal((h.activities[0]!.input.attach as { agentTaskId?: string }).agentTaskId, methods(agent, 'GetTask')[0]?.params.id, "the agent's task, named");
    });
  }

  test('a stream that outlasts the first exchange is carried on, never cut or re-attached', async () => {
    const executor = new Streaming(6);
    const agent = await agents.add(startV1Agent(executor, 'Streamer', 'Streams a while', { streaming: true }));
    const task = await sendText(await clientFor(agent.url), 'stream please');
    assert.equal(task.status.state, 'TASK_STATE_COMPLETED', JSON.stringify(task.status));
    assert.deepEqual(task.artifacts.map((a: { parts: { text?: string }[] }) => textOf(a.parts)).sort(), ['done', 'part 1', 'part 2', 'part 3', 'part 4', 'part 5', 'part 6']);
    assert.equal(executor.runs, 1);
    assert.equal(methods(agent, 'SendStreamingMessage').length, 1, 'one stream');
    assert.equal(methods(agent, 'SubscribeToTask').length, 0, 'never re-attached');
    assert.deepEqual((await historyOf(task.id)).activities.map((a) => a.type), ['forwardMessage']);
  });

  test('a cancel after the hand-over reaches the agent', async () => {
    const executor = new CountingSlowExecutor(60_000);
    const agent = await agents.add(startV1Agent(executor, 'Patient', 'Works a long time', { streaming: false }));
    const client = await clientFor(agent.url);
    const blocked = sendText(client, 'never mind');
    const agentTaskId = await eventually(() => methods(agent, 'GetTask')[0]?.params.id as string | undefined, 15_000, 'the agent to name its task');
    // The gateway's task id, as the agent got it (the parent of any task it starts through Switchboard).
    const taskId = methods(agent, 'SendMessage')[0]!.params.message.metadata.switchboard.taskId as string;
    // Handed over: the activity is scheduled (the workflow takes cancels again).
    await eventually(async () => ((await historyOf(taskId)).activities.length > 0 ? true : undefined), 15_000, 'the hand-over');
    const canceled = Task.toJSON(await client.cancelTask({ tenant: '', id: taskId, metadata: undefined })) as { status: { state: string } };
    assert.equal(canceled.status.state, 'TASK_STATE_CANCELED');
    assert.deepEqual(agent.cancels, [agentTaskId], 'the cancel reached the agent');
    assert.equal((await blocked).status.state, 'TASK_STATE_CANCELED', 'the waiting sender learns it');
    assert.equal(executor.runs, 1);
  });
});
