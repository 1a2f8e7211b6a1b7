/**
 * Races and a model (issue 8, F9 of reference/reliability-and-security.md §4.2, and §4.4's model-based run):
 * cancel against completion, the same follow-up sent many times at once, a follow-up after the end, each with
 * fast-check deciding the order; then random sequences of Send / FollowUp / Cancel / Get / Subscribe, with the
 * worker killed and the front door replaced in between, checked against a small model of A2A task states.
 * Real Temporal, PostgreSQL and @a2a-js/sdk agents; pinned seeds.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { AgentPool, startAskingAgent, startSlowAgent } from './agents';
import { type Gateway, eventually, register, rpc, startGateway } from './helpers/harness';
import { sse } from './helpers/sse';

const V1 = { 'A2A-Version': '1.0' };
const userMessage = (text: string, extra: Record<string, unknown> = {}) => ({ messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...extra });
const TERMINAL = new Set(['TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED']);

let gw: Gateway;
const agents = new AgentPool();
let slowRpc: string;
let askingRpc: string;
let asking: Awaited<ReturnType<typeof startAskingAgent>>;

before(async () => {
  gw = await startGateway();
  const slow = await agents.add(startSlowAgent({ ms: 300 }));
  asking = await agents.add(startAskingAgent());
  slowRpc = (await register(gw, slow.url, { priceMinor: 5 })).rpc;
  askingRpc = (await register(gw, asking.url)).rpc;
});
after(async () => {
  await gw?.close();
  await agents.closeAll();
});

const call = (url: string, method: string, params: unknown) => rpc(url, { jsonrpc: '2.0', id: 1, method, params }, V1);
const settlements = async (taskId: string) =>
  (await gw.db.pool.query<{ final_state: string; amount_minor: string }>('SELECT final_state, amount_minor FROM settlements WHERE task_id = $1', [taskId])).rows;

describe('F9 races', () => {
  test('cancel against completion: one terminal state, the same everywhere, settled once for it', { timeout: 180_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: 600 }), async (delay) => {
        const started = await call(slowRpc, 'SendMessage', { message: userMessage('race'), configuration: { returnImmediately: true } });
        const taskId = started.json.result.task.id as string;
        await new Promise((r) => setTimeout(r, delay));
        const cancel = await call(slowRpc, 'CancelTask', { id: taskId });
        const final = await waitTerminal(taskId);
        if (cancel.json.result) assert.equal(cancel.json.result.status.state, 'TASK_STATE_CANCELED');
        else assert.equal(cancel.json.error.code, -32002, JSON.stringify(cancel.json));
        assert.equal(final, cancel.json.result ? 'TASK_STATE_CANCELED' : 'TASK_STATE_COMPLETED');
        const rows = await waitSettled(taskId);
        assert.deepEqual(rows.map((r) => r.final_state), [final], 'one settlement, in the state the task ended in');
        assert.equal(Number(rows[0]!.amount_minor), final === 'TASK_STATE_COMPLETED' ? 5 : 0);
      }),
      { numRuns: 12, seed: 9 },
    );
  });

  test('the same follow-up many times at once, in any order: applied once, every answer the same task', { timeout: 180_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(fc.scheduler(), fc.integer({ min: 2, max: 6 }), async (s, copies) => {
        const first = await call(askingRpc, 'SendMessage', { message: userMessage('hi') });
        const taskId = first.json.result.task.id as string;
        const followUp = userMessage('Ada', { taskId });
        const before = asking.calls.length;
        const send = s.scheduleFunction(async () => call(askingRpc, 'SendMessage', { message: followUp }));
        const answers = Array.from({ length: copies }, () => send());
        await s.waitAll();
        const results = await Promise.all(answers);
        for (const r of results) {
          assert.equal(r.json.result?.task?.id, taskId, JSON.stringify(r.json));
          assert.equal(r.json.result.task.status.state, 'TASK_STATE_COMPLETED');
        }
        assert.equal(asking.calls.length - before, 1, 'the agent got the follow-up once');
        // After the end: refused, and nothing more is charged or sent.
        const late = await call(askingRpc, 'SendMessage', { message: userMessage('too late', { taskId }) });
        assert.equal(late.json.error?.code, -32004);
        assert.equal(asking.calls.length - before, 1);
        assert.equal((await waitSettled(taskId)).length, 1);
      }),
      { numRuns: 6, seed: 10 },
    );
  });
});

async function waitTerminal(taskId: string): Promise<string> {
  return eventually(async () => {
    const state = (await call(`${gw.url}/a2a`, 'GetTask', { id: taskId })).json.result?.status?.state as string | undefined;
    return state !== undefined && TERMINAL.has(state) ? state : undefined;
  }, 15_000, `task ${taskId} to end`);
}

async function waitSettled(taskId: string) {
  return eventually(async () => {
    const rows = await settlements(taskId);
    return rows.length ? rows : undefined;
  }, 15_000, `task ${taskId} to be settled`);
}

// ---- the model ----

type ModelState = 'input-required' | 'completed' | 'canceled';
interface Model {
  tasks: Map<string, ModelState>;
}
interface Real {
  /** The gateway clients talk to (replaced by RestartFrontDoor). */
  front: Gateway;
  ids: string[];
}

const stateOf = (s: string | undefined) => s?.replace('TASK_STATE_', '').toLowerCase().replace('_', '-');

class Send implements fc.AsyncCommand<Model, Real> {
  check = () => true;
  async run(m: Model, r: Real) {
    const res = await call(`${r.front.url}/agents/${r.ids[0]}/a2a`, 'SendMessage', { message: userMessage('hi') });
    const task = res.json.result?.task;
    assert.equal(task?.status?.state, 'TASK_STATE_INPUT_REQUIRED', res.text);
    m.tasks.set(task.id, 'input-required');
  }
  toString = () => 'Send';
}

class FollowUp implements fc.AsyncCommand<Model, Real> {
  constructor(readonly pick: number) {}
  check = (m: Readonly<Model>) => m.tasks.size > 0;
  async run(m: Model, r: Real) {
    const [id, state] = [...m.tasks][this.pick % m.tasks.size]!;
    const res = await call(`${r.front.url}/a2a`, 'SendMessage', { message: userMessage('Ada', { taskId: id }) });
    if (state === 'input-required') {
      assert.equal(res.json.result?.task?.status?.state, 'TASK_STATE_COMPLETED', res.text);
      m.tasks.set(id, 'completed');
    } else assert.equal(res.json.error?.code, -32004, res.text);
  }
  toString = () => `FollowUp(${this.pick})`;
}

class Cancel implements fc.AsyncCommand<Model, Real> {
  constructor(readonly pick: number) {}
  check = (m: Readonly<Model>) => m.tasks.size > 0;
  async run(m: Model, r: Real) {
    const [id, state] = [...m.tasks][this.pick % m.tasks.size]!;
    const res = await call(`${r.front.url}/a2a`, 'CancelTask', { id });
    if (state === 'completed') assert.equal(res.json.error?.code, -32002, res.text);
    else {
      assert.equal(res.json.result?.status?.state, 'TASK_STATE_CANCELED', res.text);
      m.tasks.set(id, 'canceled');
    }
  }
  toString = () => `Cancel(${this.pick})`;
}

class Get implements fc.AsyncCommand<Model, Real> {
  constructor(readonly pick: number) {}
  check = (m: Readonly<Model>) => m.tasks.size > 0;
  async run(m: Model, r: Real) {
    const [id, state] = [...m.tasks][this.pick % m.tasks.size]!;
    const res = await call(`${r.front.url}/agents/${r.ids[0]}/a2a`, 'GetTask', { id });
    assert.equal(stateOf(res.json.result?.status?.state), state, res.text);
  }
  toString = () => `Get(${this.pick})`;
}

class Subscribe implements fc.AsyncCommand<Model, Real> {
  constructor(readonly pick: number) {}
  check = (m: Readonly<Model>) => m.tasks.size > 0;
  async run(m: Model, r: Real) {
    const [id, state] = [...m.tasks][this.pick % m.tasks.size]!;
    // An interrupted task: its snapshot first; the stream stays open until the task ends (§3.1.6), so one event is read.
    const open = state === 'input-required';
    const read = await sse(`${r.front.url}/a2a`, { method: 'SubscribeToTask', params: { id }, ...(open ? { stopAfter: 1 } : {}) });
    if (open) {
      assert.equal(read.events.length, 1);
      assert.equal(stateOf(read.events[0]!.data.result.task.status.state), state);
    } else assert.equal(read.json?.error?.code, -32004, JSON.stringify(read));
    // Replay from the start: the log ends in the state the model holds (an open task's replay is read up to its head).
    const { rows } = await r.front.db.pool.query('SELECT last_seq FROM task_event_heads WHERE task_id = $1', [id]);
    const replay = await sse(`${r.front.url}/a2a`, { method: 'SubscribeToTask', params: { id }, lastEventId: 0, ...(open ? { stopAfter: Number(rows[0].last_seq) } : {}) });
    const last = replay.events.at(-1)?.data.result;
    assert.equal(stateOf(last?.statusUpdate?.status?.state ?? last?.task?.status?.state), state);
  }
  toString = () => `Subscribe(${this.pick})`;
}

class KillWorker implements fc.AsyncCommand<Model, Real> {
  check = () => true;
  async run() {
    await gw.stopWorker();
    await gw.startWorker();
  }
  toString = () => 'KillWorker';
}

class RestartFrontDoor implements fc.AsyncCommand<Model, Real> {
  check = () => true;
  async run(_m: Model, r: Real) {
    const old = r.front;
    r.front = await startGateway({ db: gw.db, temporal: { env: gw.env, taskQueue: gw.taskQueue }, worker: false });
    if (old !== gw) await old.close();
  }
  toString = () => 'RestartFrontDoor';
}

describe('model-based: Send / FollowUp / Cancel / Get / Subscribe, with the worker killed and the front door replaced', () => {
  test('every answer matches the model of A2A states', { timeout: 600_000 }, async () => {
    const pick = fc.nat(20);
    const commands = fc.commands(
      [
        fc.constant(new Send()),
        pick.map((p) => new FollowUp(p)),
        pick.map((p) => new Cancel(p)),
        pick.map((p) => new Get(p)),
        pick.map((p) => new Subscribe(p)),
        fc.constant(new KillWorker()),
        fc.constant(new RestartFrontDoor()),
      ],
      { maxCommands: 12 },
    );
    await fc.assert(
      fc.asyncProperty(commands, async (cmds) => {
        const real: Real = { front: gw, ids: [askingRpc.split('/agents/')[1]!.split('/')[0]!] };
        try {
          await fc.asyncModelRun(() => ({ model: { tasks: new Map() }, real }), cmds);
        } finally {
          if (real.front !== gw) await real.front.close();
        }
      }),
      { numRuns: 8, seed: 11 },
    );
  });
});
