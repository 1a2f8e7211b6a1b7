/**
 * Deploys are non-events: long tasks live through graceful restarts of the Switchboard process (SIGTERM, as a deploy
 * or a drained node sends it). Switchboard runs here as a real child process (`node --import tsx src/main.ts`, the
 * HTTP server and the worker in one) on a Temporal dev server and the local PostgreSQL.
 *
 * Ten long tasks (to an agent Switchboard polls and to one that streams; sent by clients that wait with GetTask and
 * by streaming clients that resume with Last-Event-ID), five graceful restarts 3 s apart: every task completes, each
 * agent was sent each message once (the next worker re-attaches to the agent's task: GetTask or SubscribeToTask),
 * nothing was canceled at an agent, and no stop ran into the worker's grace time. Then the retry policy: an agent
 * allowed one attempt keeps its task through a restart (a hand-over is not the agent's failure), and a kill -9 of the
 * worker (crash.test.ts) is not counted either.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { AgentPool, chunkedText, startChunkyAgent, startSlowAgent, type TestAgent } from './agents';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { TEST_ADMIN_KEY, childProcessEnv, createTestDb, eventually, keysFor, rememberKeys, rpc, startTemporal, type TestDb } from './helpers/harness';
import { OLDEST_LEVEL, PATCH_LEVEL } from '../task/contracts';
import { KeyStore } from '../src/core/auth/keys';
import { startSwitchboard, type SwitchboardProcess } from './helpers/process';
import { assembledText, sse, type SseEvent } from './helpers/sse';

let env: TestWorkflowEnvironment;
let db: TestDb;
let sbEnv: Record<string, string>;
let sb: SwitchboardProcess | undefined;
const agents = new AgentPool();
/** How long each graceful stop took, from SIGTERM to the process's exit. */
const stops: number[] = [];

/** The worker's shutdownGraceTime (src/worker/worker.ts): a stop that hands its turns over ends well before it. */
const GRACE_MS = 10_000;

before(async () => {
  [env, db] = await Promise.all([startTemporal(), createTestDb()]);
  sbEnv = await childProcessEnv({ temporalAddress: env.address, schema: db.schema, taskQueue: `restarts-${randomBytes(3).toString('hex')}` });
  sb = await startSwitchboard(sbEnv);
  const client = (await new KeyStore(db.pool).create({ tenant: 'default', role: 'client', name: 'restarts test' })).key;
  rememberKeys(sb.url, { admin: TEST_ADMIN_KEY, operator: TEST_ADMIN_KEY, client });
});

after(async () => {
  await sb?.kill();
  await agents.closeAll();
  await db?.drop();
  await env?.teardown();
});

/** SIGTERM, as a deploy sends it; the same URL, database and task queue come back after it has exited. */
async function gracefulRestart(t?: { diagnostic(m: string): void }): Promise<void> {
  const started = Date.now();
  sb!.child.kill('SIGTERM');
  const how = await sb!.exited;
  stops.push(Date.now() - started);
  t?.diagnostic(`stop ${stops.length}: ${stops.at(-1)} ms from SIGTERM to exit`);
  assert.equal(how, 'exit code 0', `the stop ended cleanly:\n${sb!.output()}`);
  const errors = sb!.output().split('\n').filter((l) => /"level":(50|60)|\[ERROR\]/.test(l));
  assert.deepEqual(errors, [], 'no error lines on the way down');
  sb = undefined;
  sb = await startSwitchboard(sbEnv);
}

async function register(agentUrl: string, retry: Record<string, number> = {}): Promise<string> {
  const res = await fetch(`${sb!.url}/agents`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${TEST_ADMIN_KEY}` },
    body: JSON.stringify({ url: agentUrl, retry: { attemptTimeoutMs: 5000, initialIntervalMs: 200, ...retry } }),
  });
  const body = (await res.json()) as { id: string };
  assert.equal(res.status, 201, JSON.stringify(body));
  return `${sb!.url}/agents/${body.id}/a2a`;
}

const userMessage = (text: string) => ({ messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] });
const stateOf = (e: SseEvent): string | undefined => e.data.result?.statusUpdate?.status?.state ?? e.data.result?.task?.status?.state;
const TERMINAL = /COMPLETED|FAILED|CANCELED|REJECTED/;

/** How many times the agent was sent each message (any send method), by messageId. */
function sendsByMessage(agent: TestAgent): Map<string, number> {
  const counts = new Map<string, number>();
  for (const c of agent.calls) {
    if (!/^(SendMessage|SendStreamingMessage|message\/send|message\/stream)$/.test(c.method)) continue;
    const id = c.params?.message?.messageId as string;
    counts.set(id, (counts.get(id) ?? 0) + 1);
  }
  return counts;
}

/** A client that sends without waiting, then polls GetTask until the task ends (through restarts: it retries). */
async function sendAndPoll(rpcUrl: string, message: { messageId: string }): Promise<{ taskId: string; ended: Promise<any> }> {
  const sent = await rpc(rpcUrl, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message, configuration: { returnImmediately: true } } });
  const taskId = sent.json?.result?.task?.id as string;
  assert.ok(taskId, JSON.stringify(sent.json));
  const ended = eventually(
    async () => {
      const got = await rpc(rpcUrl, { jsonrpc: '2.0', id: 2, method: 'GetTask', params: { id: taskId } }).catch(() => undefined);
      const state = got?.json?.result?.status?.state as string | undefined;
      return state && TERMINAL.test(state) ? got!.json.result : undefined;
    },
    240_000,
    `task ${taskId} to end`,
  );
  ended.catch(() => undefined); // awaited by the test
  return { taskId, ended };
}

/**
 * A streaming client: SendStreamingMessage, then, each time the stream ends before the task does (the process
 * stopping ends it with where to resume), SubscribeToTask with Last-Event-ID once a process answers again.
 * @returns every event it received, in order, the shutdown notices left out.
 */
async function streamThrough(rpcUrl: string, message: { messageId: string }): Promise<{ taskId: string; events: Promise<SseEvent[]> }> {
  const events: SseEvent[] = [];
  let named!: (taskId: string) => void;
  const taskIdKnown = new Promise<string>((resolve) => (named = resolve));
  const keep = (e: SseEvent) => {
    if (e.data.error) return; // "shutting down; reconnect with Last-Event-ID: n"
    if (events.push(e) === 1) named(e.data.result?.task?.id as string);
  };
  const ended = () => TERMINAL.test(stateOf(events.at(-1) ?? { data: {} }) ?? '');
  const done = (async () => {
    await sse(rpcUrl, { method: 'SendStreamingMessage', params: { message }, onEvent: keep }).catch(() => undefined);
    const taskId = await taskIdKnown;
    for (const deadline = Date.now() + 240_000; !ended(); ) {
      if (Date.now() > deadline) throw new Error(`the stream of task ${taskId} did not reach the task's end`);
      const read = await sse(rpcUrl, { method: 'SubscribeToTask', params: { id: taskId }, lastEventId: events.at(-1)?.id ?? 0, onEvent: keep }).catch(() => undefined);
      if (read?.status !== 200) await new Promise((r) => setTimeout(r, 500)); // no process answers yet
    }
    return events;
  })();
  done.catch(() => undefined); // awaited by the test
  return { taskId: await Promise.race([taskIdKnown, done.then(() => '')]), events: done };
}

/** The CLI (`npx switchboard`) against the running process, with the admin key unless another is given. */
function cli(args: string[], key = TEST_ADMIN_KEY): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [path.resolve(__dirname, '../bin/switchboard.js'), ...args], { env: { PATH: process.env.PATH, SWITCHBOARD_URL: sb!.url, SWITCHBOARD_KEY: key }, timeout: 60_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe('switchboard tasks versions', () => {
  test("counts open tasks by the level of the code that started them (admin only): an upgrade's question", async () => {
    const slow = await agents.add(startSlowAgent({ ms: 8_000, streaming: false }));
    const rpcUrl = await register(slow.url);
    const sent = await Promise.all([sendAndPoll(rpcUrl, userMessage('a')), sendAndPoll(rpcUrl, userMessage('b'))]);
    // Visibility is eventually consistent: the count catches up within a second or so.
    const json = await eventually(async () => {
      const r = await cli(['--json', 'tasks', 'versions']);
      assert.equal(r.code, 0, r.stderr);
      const v = JSON.parse(r.stdout);
      return v.levels[0].open === 2 ? v : undefined;
    }, 15_000, 'both open tasks to be counted');
    assert.deepEqual(json, { newest: PATCH_LEVEL, oldest: OLDEST_LEVEL, levels: json.levels, retired: 0, unlabelled: 0 });
    assert.deepEqual(json.levels.map((l: { level: number }) => l.level), Array.from({ length: PATCH_LEVEL - OLDEST_LEVEL + 1 }, (_, i) => PATCH_LEVEL - i));
    assert.ok(json.levels.slice(1).every((l: { open: number }) => l.open === 0));
    const human = await cli(['tasks', 'versions']);
    assert.match(human.stdout, new RegExp(`^level ${PATCH_LEVEL}: 2 open tasks \\(new tasks start here\\)$`, 'm'));
    assert.match(human.stdout, new RegExp(`^level ${OLDEST_LEVEL}: 0 open tasks \\(the oldest this release runs\\)$`, 'm'));
    assert.match(human.stdout, new RegExp(`^the oldest level open tasks need: ${PATCH_LEVEL}$`, 'm'));
    const asClient = await fetch(`${sb!.url}/tasks/versions`, { headers: { authorization: `Bearer ${keysFor(sb!.url)!.client}` } });
    assert.equal(asClient.status, 403, 'it counts every tenant\'s tasks: admins only');
    for (const { ended } of sent) assert.equal((await ended).status.state, 'TASK_STATE_COMPLETED');
  });
});

describe('graceful restarts (SIGTERM)', () => {
  test('ten long tasks through five restarts 3 s apart: all complete, each message sent once, nothing canceled at an agent', { timeout: 600_000 }, async (t) => {
    try {
      // Each task outlives the five restarts (each: a stop, a start of a few seconds, 3 s up).
      const polled = await agents.add(startSlowAgent({ ms: 75_000, streaming: false }));
      const CHUNKS = 300;
      const streamed = await agents.add(startChunkyAgent({ chunks: CHUNKS, delayMs: 250 }));
      const polledRpc = await register(polled.url);
      const streamedRpc = await register(streamed.url);

      const waiting = await Promise.all([
        ...Array.from({ length: 4 }, (_, i) => sendAndPoll(polledRpc, userMessage(`polled ${i}`))),
        ...Array.from({ length: 2 }, (_, i) => sendAndPoll(streamedRpc, userMessage(`streamed ${i}`))),
      ]);
      const streaming = await Promise.all([
        ...Array.from({ length: 2 }, (_, i) => streamThrough(polledRpc, userMessage(`polled, streaming client ${i}`))),
        ...Array.from({ length: 2 }, (_, i) => streamThrough(streamedRpc, userMessage(`streamed, streaming client ${i}`))),
      ]);
      // Every agent has its tasks running before the first restart.
      await eventually(() => sendsByMessage(polled).size === 6 && sendsByMessage(streamed).size === 4 || undefined, 30_000, 'every message to reach its agent');

      for (let i = 0; i < 5; i++) {
        await gracefulRestart(t);
        await new Promise((r) => setTimeout(r, 3_000));
      }

      for (const { taskId, ended } of waiting) {
        const task = await ended;
        assert.equal(task.status.state, 'TASK_STATE_COMPLETED', `task ${taskId}: ${JSON.stringify(task.status)}`);
      }
      for (const [i, { taskId, events }] of streaming.entries()) {
        const got = await events;
        assert.equal(stateOf(got.at(-1)!), 'TASK_STATE_COMPLETED', `task ${taskId}: ${JSON.stringify(got.at(-1)?.data)}`);
        const ids = got.map((e) => e.id!);
        assert.deepEqual(ids, Array.from({ length: ids.length }, (_, k) => k + 1), `task ${taskId}: the client's events are consecutive across the restarts`);
        if (i >= 2) assert.equal(assembledText(got), chunkedText(CHUNKS), `task ${taskId}: the whole streamed answer, once`);
      }
      for (const [name, agent] of [['polled', polled], ['streamed', streamed]] as const) {
        for (const [messageId, sends] of sendsByMessage(agent)) assert.equal(sends, 1, `${name} agent: message ${messageId} was sent ${sends} times`);
        assert.deepEqual(agent.cancels, [], `${name} agent: nothing was canceled there`);
      }
      assert.ok(
        streamed.calls.some((c) => c.method === 'SubscribeToTask'),
        'the streamed tasks were re-attached with SubscribeToTask',
      );
      assert.ok(
        stops.every((ms) => ms < GRACE_MS),
        `every stop handed its turns over instead of waiting out the ${GRACE_MS} ms grace time: ${stops.join(', ')} ms`,
      );
    } catch (err) {
      if (err instanceof Error) err.message += `\n--- Switchboard output ---\n${sb?.output() ?? '(not running)'}`;
      throw err;
    }
  });

  test('a blocking send waiting at SIGTERM is answered -32054 at once; sent again, the same message continues its task', { timeout: 120_000 }, async () => {
    const slow = await agents.add(startSlowAgent({ ms: 10_000, streaming: false }));
    const rpcUrl = await register(slow.url);
    const message = userMessage('wait for me');
    const waiting = rpc(rpcUrl, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message } });
    await eventually(() => slow.calls.some((c) => c.method === 'GetTask') || undefined, 15_000, 'the task to be under way');
    const stopping = gracefulRestart();
    const refused = await waiting;
    assert.equal(refused.status, 503, JSON.stringify(refused.json));
    assert.equal(refused.json.error.code, -32054);
    assert.match(refused.json.error.message, /send the request again/);
    await stopping;
    const again = await rpc(rpcUrl, { jsonrpc: '2.0', id: 2, method: 'SendMessage', params: { message } });
    assert.equal(again.json.result?.task?.status?.state, 'TASK_STATE_COMPLETED', JSON.stringify(again.json));
    assert.equal([...sendsByMessage(slow).values()].join(), '1', 'the agent was sent the message once');
  });

  test('an agent allowed one attempt keeps its task through a restart: the hand-over is not its failure', { timeout: 120_000 }, async () => {
    const slow = await agents.add(startSlowAgent({ ms: 12_000, streaming: false }));
    const rpcUrl = await register(slow.url, { maxAttempts: 1 });
    const { taskId, ended } = await sendAndPoll(rpcUrl, userMessage('one try'));
    await eventually(() => slow.calls.some((c) => c.method === 'GetTask') || undefined, 15_000, 'the task to be polled');
    await gracefulRestart();
    const task = await ended;
    assert.equal(task.status.state, 'TASK_STATE_COMPLETED', `task ${taskId}: ${JSON.stringify(task.status)}`);
    assert.equal([...sendsByMessage(slow).values()].join(), '1', 'the message was sent once');
    assert.deepEqual(slow.cancels, []);
  });
});
