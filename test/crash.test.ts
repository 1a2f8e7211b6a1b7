/**
 * A crash of the Switchboard process loses nothing a client was promised. Switchboard runs here as a real child
 * process (`node --import tsx src/main.ts`, the HTTP server and the Temporal worker in one process) on a Temporal
 * dev server and the local PostgreSQL, and is killed with SIGKILL, so no shutdown code runs:
 *
 *  - mid-stream: the client's SSE stream breaks while the agent is still streaming. A new process on the same
 *    URL takes over. Temporal retries the agent call once the dead worker's heartbeat times out; the retry
 *    voids the first attempt's partial output with an event and asks the agent again with the same messageId.
 *    The client resubscribes with Last-Event-ID and gets exactly the rest: ids consecutive across the crash, no
 *    gap and no duplicate, and the text it assembles is the agent's whole answer, once.
 *  - idle in input-required: a task waiting for the client's next message survives the crash, and the follow-up
 *    sent to the new process continues the same task (and the same event log) to completion.
 *  - an attempt lost with the process is not the agent's failure: with one attempt allowed, the retry re-attaches
 *    to the agent's task and the task completes; nothing is canceled at the agent.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { AgentPool, chunkedText, startAskingAgent, startChunkyAgent, startEchoAgent, startSlowAgent } from './agents';
import { agentTaskQuery, workflowIdOf } from '../task/messages';
import { TEST_ADMIN_KEY, childProcessEnv, createTestDb, eventually, rememberKeys, rpc, startTemporal, type TestDb } from './helpers/harness';
import { KeyStore } from '../src/core/auth/keys';
import { freePort, startSwitchboard, type SwitchboardProcess } from './helpers/process';
import { assembledText, sse, type SseEvent } from './helpers/sse';

let env: TestWorkflowEnvironment;
let db: TestDb;
/** The environment of every Switchboard process in this file: the same port, database schema and task queue. */
let sbEnv: Record<string, string>;
let sb: SwitchboardProcess | undefined;
const agents = new AgentPool();

before(async () => {
  [env, db] = await Promise.all([startTemporal(), createTestDb()]);
  sbEnv = await childProcessEnv({ temporalAddress: env.address, schema: db.schema, taskQueue: `crash-${randomBytes(3).toString('hex')}` });
  sb = await startSwitchboard(sbEnv);
  // The clients of this file use a client key of tenant default; every restart keeps the URL (and the key).
  const client = (await new KeyStore(db.pool).create({ tenant: 'default', role: 'client', name: 'crash test' })).key;
  rememberKeys(sb.url, { admin: TEST_ADMIN_KEY, operator: TEST_ADMIN_KEY, client });
});

after(async () => {
  await sb?.kill();
  await agents.closeAll();
  await db?.drop();
  await env?.teardown();
});

/** Kills the running Switchboard with SIGKILL and starts a new one on the same URL, database and task queue. */
async function crashAndRestart(): Promise<void> {
  const how = await sb!.kill();
  assert.equal(how, 'SIGKILL');
  sb = undefined;
  sb = await startSwitchboard(sbEnv);
}


async function register(agentUrl: string, extra: Record<string, unknown> = {}): Promise<string> {
  const res = await fetch(`${sb!.url}/agents`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${TEST_ADMIN_KEY}` },
    body: JSON.stringify({ url: agentUrl, ...extra }),
  });
  const body = (await res.json()) as { id: string };
  assert.equal(res.status, 201, `registration: ${JSON.stringify(body)}`);
  const stored = await db.pool.query('SELECT 1 FROM agents WHERE id = $1', [body.id]);
  assert.equal(stored.rowCount, 1, "the child process works in this file's schema");
  // The JSON-RPC URL stays valid across restarts: the same host and port.
  return `${sb!.url}/agents/${body.id}/a2a`;
}

const userMessage = (text: string, extra: Record<string, unknown> = {}) => ({ messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...extra });
const stateOf = (e: SseEvent): string | undefined => e.data.result?.statusUpdate?.status?.state ?? e.data.result?.task?.status?.state;
const taskIdOf = (e: SseEvent): string => e.data.result?.task?.id ?? e.data.result?.statusUpdate?.taskId ?? e.data.result?.artifactUpdate?.taskId;
const voidOf = (e: SseEvent): { attempt: number; fromSeq: number; toSeq: number } | undefined => e.data.result?.statusUpdate?.metadata?.switchboard?.void;
const ids = (events: SseEvent[]) => events.map((e) => e.id);
const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

/** A failed assertion shows what the Switchboard process printed. */
async function withOutput(fn: () => Promise<void>): Promise<void> {
  try {
    await fn();
  } catch (err) {
    if (err instanceof Error) err.message += `\n--- Switchboard output ---\n${sb?.output() ?? '(not running)'}`;
    throw err;
  }
}

describe('Switchboard killed with SIGKILL and restarted', () => {
  test('mid-stream: the agent call is re-attached, the client resumes with Last-Event-ID and misses nothing', () =>
    withOutput(async () => {
      const CHUNKS = 400;
      const KILL_AFTER = 50;
      // 400 chunks 10 ms apart: the agent is still streaming when the client has 50 events. The heartbeat
      // timeout (min(attemptTimeoutMs, 10 s)) is how soon Temporal gives up on the dead worker's attempt.
      const chunky = await agents.add(startChunkyAgent({ chunks: CHUNKS, delayMs: 10 }));
      const rpc = await register(chunky.url, { retry: { attemptTimeoutMs: 8000, initialIntervalMs: 200, maxAttempts: 5 } });
      const message = userMessage('go');

      // Read until the 50th event, then kill the process serving the stream.
      const received: SseEvent[] = [];
      let killed: Promise<string> | undefined;
      const broken = await sse(rpc, {
        method: 'SendStreamingMessage',
        params: { message },
        onEvent(e) {
          received.push(e);
          if (received.length === KILL_AFTER) killed = sb!.kill();
        },
      }).then(
        (read) => read.ended && 'the stream ended cleanly',
        (err: Error) => err,
      );
      assert.ok(killed, `the stream ended after ${received.length} events, before the kill`);
      assert.ok(broken instanceof Error || broken === 'the stream ended cleanly', String(broken));
      assert.equal(await killed, 'SIGKILL');
      assert.ok(received.length >= KILL_AFTER);
      assert.notEqual(stateOf(received.at(-1)!), 'TASK_STATE_COMPLETED', 'the task was not finished at the kill');
      assert.deepEqual(ids(received), range(1, received.length), 'ids before the crash are consecutive from 1');
      const taskId = taskIdOf(received[0]);
      const lastSeen = received.at(-1)!.id!;

      // A new process on the same URL; the client resubscribes from the last event it has.
      sb = undefined;
      sb = await startSwitchboard(sbEnv);
      const resumed = await sse(rpc, { method: 'SubscribeToTask', params: { id: taskId }, lastEventId: lastSeen });
      assert.equal(resumed.status, 200, JSON.stringify(resumed.json));
      assert.ok(resumed.ended, 'the resumed stream ends at the terminal event');
      assert.deepEqual(ids(resumed.events), range(lastSeen + 1, resumed.events.length), 'the resumed ids continue from Last-Event-ID + 1');
      const all = [...received, ...resumed.events];
      assert.equal(stateOf(all.at(-1)!), 'TASK_STATE_COMPLETED');
      assert.equal(assembledText(all), chunkedText(CHUNKS), 'the assembled text is the whole answer, once');

      // The agent was asked once: the retried attempt re-attached to the task it had named (SubscribeToTask, or
      // GetTask once it had ended) instead of sending the message again, and voided what the first attempt relayed.
      const calls = chunky.calls.filter((c) => c.method === 'SendStreamingMessage');
      const voids = all.filter((e) => voidOf(e));
      assert.equal(calls.length, 1, 'the message was sent once');
      assert.equal(calls[0]!.params.message.messageId, message.messageId);
      if (voids.length === 0) return; // the agent had finished before the kill and the attempt was reported
      assert.equal(voids.length, 1, 'one void: the dead worker\'s attempt');
      assert.ok(chunky.calls.some((c) => c.method === 'SubscribeToTask' || c.method === 'GetTask'), 'the retry re-attached');
      const first = voidOf(voids[0])!;
      assert.equal(first.attempt, 1);
      const firstAttempt = all.filter((e) => e.id! < voids[0].id! && e.data.result.artifactUpdate);
      assert.ok(firstAttempt.length >= KILL_AFTER - 5, `attempt 1 relayed ${firstAttempt.length} chunks`);
      assert.ok(
        firstAttempt.every((e) => e.id! >= first.fromSeq && e.id! <= first.toSeq),
        `every chunk of attempt 1 is in the voided range ${first.fromSeq}-${first.toSeq}`,
      );
    }));

  test('idle in input-required: the follow-up through the new process completes the same task', () =>
    withOutput(async () => {
      const asker = await agents.add(startAskingAgent());
      const rpc = await register(asker.url);
      const first = await sse(rpc, { method: 'SendStreamingMessage', params: { message: userMessage('hi') } });
      assert.ok(first.ended);
      assert.equal(stateOf(first.events.at(-1)!), 'TASK_STATE_INPUT_REQUIRED');
      const taskId = taskIdOf(first.events[0]);
      // Killed the moment the stream said input-required: the workflow step that reached that state may not
      // be saved yet (its event is logged by a local activity inside it). The follow-up must still be taken:
      // the gateway waits for the redone step instead of calling the task busy.
      await crashAndRestart();

      const second = await sse(rpc, { method: 'SendStreamingMessage', params: { message: userMessage('Ada', { taskId }) } });
      assert.equal(second.status, 200, JSON.stringify(second.json));
      assert.ok(second.ended);
      assert.equal(second.events[0].data.result.task?.id, taskId, 'the same task continues');
      assert.deepEqual(ids(second.events), range(first.events.at(-1)!.id! + 1, second.events.length), 'in the same event log');
      assert.equal(stateOf(second.events.at(-1)!), 'TASK_STATE_COMPLETED');
      assert.equal(assembledText(second.events), 'Hello, Ada!');
      assert.equal(asker.calls.filter((c) => c.method === 'SendStreamingMessage').length, 2, 'each message reached the agent once');
    }));

  test("a turn whose attempt dies with its worker is re-attached, not counted against the agent's attempts: the task completes, nothing canceled at the agent", () =>
    withOutput(async () => {
      // One attempt allowed: the dead worker's attempt (its heartbeat times out after 2 s) is not the agent's failure,
      // so Temporal retries it, and the retry follows the task the agent named instead of sending the message again.
      const slow = await agents.add(startSlowAgent({ ms: 15_000, streaming: false }));
      const rpcUrl = await register(slow.url, { retry: { attemptTimeoutMs: 2000, maxAttempts: 1 } });
      const sent = await rpc(rpcUrl, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: userMessage('lost'), configuration: { returnImmediately: true } } });
      const taskId = sent.json?.result?.task?.id as string;
      assert.ok(taskId, JSON.stringify(sent.json));
      // (The gateway's liveness probe GetTasks a made-up id: the task is the one polled after the send.)
      const polled = () => {
        const sent = slow.calls.findIndex((c) => c.method === 'SendMessage');
        return sent < 0 ? undefined : slow.calls.slice(sent).find((c) => c.method === 'GetTask');
      };
      const agentTaskId = await eventually(() => polled()?.params.id as string | undefined, 15_000, 'the agent to name its task');
      // The activity tells the workflow the task it follows (a signal), so the workflow knows it after the crash.
      const workflow = env.client.workflow.getHandle(workflowIdOf('default', taskId));
      await eventually(async () => (await workflow.query(agentTaskQuery))?.agentTaskId === agentTaskId || undefined, 15_000, 'the workflow to know the agent task');
      await crashAndRestart();

      const completed = await eventually(async () => {
        const got = await rpc(rpcUrl, { jsonrpc: '2.0', id: 2, method: 'GetTask', params: { id: taskId } });
        const state = got.json?.result?.status?.state as string | undefined;
        return state && state !== 'TASK_STATE_WORKING' && state !== 'TASK_STATE_SUBMITTED' ? got.json.result : undefined;
      }, 45_000, 'the task to end');
      assert.equal(completed.status.state, 'TASK_STATE_COMPLETED', JSON.stringify(completed.status));
      assert.deepEqual(slow.cancels, [], 'nothing was canceled at the agent');
      assert.equal(slow.calls.filter((c) => c.method === 'SendMessage').length, 1, 'the message was sent once');
      assert.ok(slow.calls.filter((c) => c.method === 'GetTask' && c.params.id === agentTaskId).length >= 2, 'the retry followed the same agent task');
    }));
});

describe('Ctrl-C', () => {
  test('a stream open at SIGINT gets a last event saying where to resume; the process exits 0 with no error lines; the task goes on', () =>
    withOutput(async () => {
      const chunky = await agents.add(startChunkyAgent({ chunks: 300, delayMs: 10 }));
      const rpc = await register(chunky.url, { retry: { attemptTimeoutMs: 8000, initialIntervalMs: 200, maxAttempts: 5 } });
      const received: SseEvent[] = [];
      let stopped: Promise<string> | undefined;
      const read = await sse(rpc, {
        method: 'SendStreamingMessage',
        params: { message: userMessage('go') },
        onEvent(e) {
          received.push(e);
          if (received.length === 20) {
            sb!.child.kill('SIGINT');
            stopped = sb!.exited;
          }
        },
      });
      assert.ok(read.ended, 'the server ended the stream');
      const last = received.at(-1)!;
      assert.equal(last.data.error?.code, -32603, JSON.stringify(last.data));
      assert.match(last.data.error.message, /shutting down; reconnect with Last-Event-ID: \d+/);
      const resumeFrom = last.data.error.data.lastEventId as number;
      assert.equal(resumeFrom, received.at(-2)!.id, 'the position is the last event the client got');
      assert.equal(await stopped, 'exit code 0');
      const errors = sb!.output().split('\n').filter((l) => /"level":(50|60)|\[ERROR\]/.test(l));
      assert.deepEqual(errors, [], 'no error lines on the way down');

      // The task was not lost with the process: a new one runs it to the end, and the client resumes.
      sb = await startSwitchboard(sbEnv);
      const rest = await sse(rpc, { method: 'SubscribeToTask', params: { id: taskIdOf(received[0]) }, lastEventId: resumeFrom });
      assert.ok(rest.ended);
      assert.deepEqual(ids(rest.events), range(resumeFrom + 1, rest.events.length), 'exactly the rest');
      assert.equal(stateOf(rest.events.at(-1)!), 'TASK_STATE_COMPLETED');
      assert.equal(assembledText([...received.slice(0, -1), ...rest.events]), chunkedText(300));
    }));
});

describe('SWITCHBOARD_ROLE', () => {
  test('an api process without a worker says so (/readyz, a bounded blocking send); a worker process that comes runs the tasks kept for it, and is watched on its PORT', { timeout: 240_000 }, (t) =>
    withOutput(async () => {
      const split = { ...sbEnv, TEMPORAL_TASK_QUEUE: `${sbEnv.TEMPORAL_TASK_QUEUE}-split` };
      const api = await startSwitchboard({ ...split, SWITCHBOARD_ROLE: 'api', PORT: String(await freePort()) });
      let workerOnly: SwitchboardProcess | undefined;
      try {
        const client = (await new KeyStore(db.pool).create({ tenant: 'default', role: 'client', name: 'split' })).key;
        rememberKeys(api.url, { admin: TEST_ADMIN_KEY, operator: TEST_ADMIN_KEY, client });
        const admin = { authorization: `Bearer ${TEST_ADMIN_KEY}` };
        const registerAt = async (url: string) => {
          const res = await fetch(`${api.url}/agents`, { method: 'POST', headers: { ...admin, 'content-type': 'application/json' }, body: JSON.stringify({ url }) });
          assert.equal(res.status, 201);
          return ((await res.json()) as { id: string }).id;
        };
        const echoId = await registerAt((await agents.add(startEchoAgent())).url);
        const echoRpc = `${api.url}/agents/${echoId}/a2a`;
        assert.match(api.output(), /api only: workers run elsewhere/);

        // No worker has ever polled this queue: the api is not ready, and says why.
        const notReady = await fetch(`${api.url}/readyz`);
        const notReadyBody = (await notReady.json()) as { missing?: string[]; checks: { workers?: { polling: number } } };
        assert.equal(notReady.status, 503);
        assert.deepEqual(notReadyBody.missing, ['worker']);
        assert.equal(notReadyBody.checks.workers?.polling, 0);

        // A blocking send is answered within seconds, not held until a worker comes: -32054 naming the queue and the
        // task, which is kept. Non-blocking, the answer is the task as it is, submitted, with the reason.
        const started = Date.now();
        const blocked = await rpc(echoRpc, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: userMessage('kept 1') } }, { 'A2A-Version': '1.0' });
        const waited = Date.now() - started;
        assert.equal(blocked.status, 503, blocked.text);
        assert.equal(blocked.json.error.code, -32054);
        const kept = /no worker is polling the task queue \S+-split: task (\S+) is kept/.exec(blocked.json.error.message)?.[1];
        assert.ok(kept, blocked.json.error.message);
        assert.ok(waited < 15_000, `answered after ${waited} ms`);
        t.diagnostic(`a blocking send with no worker polling was answered after ${waited} ms`);
        const queued = await rpc(echoRpc, { jsonrpc: '2.0', id: 2, method: 'SendMessage', params: { message: userMessage('kept 2'), configuration: { returnImmediately: true } } }, { 'A2A-Version': '1.0' });
        assert.equal(queued.json.result.task.status.state, 'TASK_STATE_SUBMITTED', queued.text);
        assert.match(queued.json.result.task.status.message.parts[0].text, /no worker is polling the task queue/);

        // A worker process comes: both tasks run, and the api is ready.
        const workerPort = String(await freePort());
        workerOnly = await startSwitchboard({ ...split, SWITCHBOARD_ROLE: 'worker', PORT: workerPort });
        for (const [id, text] of [[kept, 'kept 1'], [queued.json.result.task.id as string, 'kept 2']]) {
          const done = await eventually(async () => {
            const got = await rpc(echoRpc, { jsonrpc: '2.0', id: 3, method: 'GetTask', params: { id } }, { 'A2A-Version': '1.0' });
            return got.json.result?.status.state === 'TASK_STATE_COMPLETED' ? got.json.result : undefined;
          }, 30_000, `task ${id} to complete once a worker polls`);
          assert.equal(done.artifacts[0].parts[0].text, `echo: ${text}`);
        }
        await eventually(async () => ((await fetch(`${api.url}/readyz`)).status === 200 ? true : undefined), 10_000, 'the api to be ready');

        // Both turns of an asking agent run on the worker process; the api process has no worker.
        const askingRpc = `${api.url}/agents/${await registerAt((await agents.add(startAskingAgent())).url)}/a2a`;
        const first = await sse(askingRpc, { method: 'SendStreamingMessage', params: { message: userMessage('hi') } });
        assert.equal(stateOf(first.events.at(-1)!), 'TASK_STATE_INPUT_REQUIRED');
        const second = await sse(askingRpc, { method: 'SendStreamingMessage', params: { message: userMessage('Ada', { taskId: taskIdOf(first.events[0]) }) } });
        assert.equal(stateOf(second.events.at(-1)!), 'TASK_STATE_COMPLETED');
        assert.equal(assembledText(second.events), 'Hello, Ada!');

        // The worker process is watched on its PORT: liveness, readiness (its worker polls), and the tasks' series,
        // which are counted where the workflows run, with the SDK's own in the same answer; an admin's, as on the api.
        const worker = `http://127.0.0.1:${workerPort}`;
        assert.equal((await fetch(`${worker}/healthz`)).status, 200);
        const ready = (await (await fetch(`${worker}/readyz`)).json()) as { ready: boolean; checks: { worker?: { running: boolean } } };
        assert.deepEqual([ready.ready, ready.checks.worker?.running], [true, true]);
        assert.equal((await fetch(`${worker}/metrics`)).status, 401);
        const workerMetrics = await (await fetch(`${worker}/metrics`, { headers: admin })).text();
        assert.match(workerMetrics, new RegExp(`^switchboard_tasks_ended_total\\{agent="${echoId}",state="completed"\\} 2$`, 'm'));
        assert.match(workerMetrics, /^temporal_\w+/m);
        assert.equal((await fetch(`${worker}/agents`, { headers: admin })).status, 404, 'nothing but the probes');
        const apiMetrics = await (await fetch(`${api.url}/metrics`, { headers: admin })).text();
        assert.doesNotMatch(apiMetrics, /^switchboard_tasks_ended_total\{/m, 'the api process runs no workflow');
        assert.match(workerOnly.output(), /worker is running .*\n +probes: +http:\/\/127\.0\.0\.1:\d+\/healthz/);
      } finally {
        await Promise.all([api.kill(), workerOnly?.kill()]);
      }
    }));

  test('an api process runs the embedded PostgreSQL; a worker process uses it through the DATABASE_URL it prints', () =>
    withOutput(async () => {
      const dataDir = await mkdtemp(join(tmpdir(), 'sb-shared-pg-'));
      const { DATABASE_URL: _db, ...noDb } = sbEnv;
      const split = { ...noDb, TEMPORAL_TASK_QUEUE: `${sbEnv.TEMPORAL_TASK_QUEUE}-shared-pg` };
      const api = await startSwitchboard({ ...split, SWITCHBOARD_DATA_DIR: dataDir, SWITCHBOARD_ROLE: 'api', PORT: String(await freePort()) });
      let workerOnly: SwitchboardProcess | undefined;
      try {
        // The banner names the database and the file with its password (never the password itself).
        const shown = /PostgreSQL: +(postgres:\/\/\S+) \(embedded, .*password in (\S+):/.exec(api.output());
        assert.ok(shown, api.output());
        const databaseUrl = shown[1]!.replace('postgres@', `postgres:${(await readFile(shown[2]!, 'utf8')).trim()}@`);
        workerOnly = await startSwitchboard({ ...split, DATABASE_URL: databaseUrl, SWITCHBOARD_ROLE: 'worker', PORT: String(await freePort()) });
        const echo = await agents.add(startEchoAgent());
        const headers = { 'content-type': 'application/json', authorization: `Bearer ${TEST_ADMIN_KEY}` };
        const res = await fetch(`${api.url}/agents`, { method: 'POST', headers, body: JSON.stringify({ url: echo.url }) });
        assert.equal(res.status, 201);
        const rpc = `${api.url}/agents/${((await res.json()) as { id: string }).id}/a2a`;
        // The api process wrote the agent and the task into its embedded database; the worker, which runs the turn and
        // records its outcome, reads and writes the same one.
        const sent = await fetch(rpc, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: userMessage('shared') } }) });
        const task = ((await sent.json()) as { result?: { task?: { status: { state: string }; artifacts?: { parts: { text: string }[] }[] } } }).result?.task;
        assert.equal(task?.status.state, 'TASK_STATE_COMPLETED');
        assert.equal(task?.artifacts?.[0]?.parts[0]?.text, 'echo: shared');
      } finally {
        await workerOnly?.kill();
        await api.kill();
        // The api's watchdog stops its PostgreSQL; wait for that before removing the data under it.
        await eventually(async () => !(await stat(join(dataDir, 'postgres', 'postmaster.pid')).catch(() => undefined)) || undefined, 30_000, 'the embedded PostgreSQL to stop');
        await rm(dataDir, { recursive: true, force: true });
      }
    }));

  test('a split role without TEMPORAL_ADDRESS is refused at start, naming the variable', async () => {
    const { TEMPORAL_ADDRESS: _temporal, ...noTemporal } = sbEnv;
    const child = await startSwitchboard({ ...noTemporal, SWITCHBOARD_ROLE: 'api', PORT: String(await freePort()) }, { readyTimeoutMs: 20_000 }).then(
      () => assert.fail('it started'),
      (err: Error) => err,
    );
    assert.match(child.message, /exit code 2/);
    assert.match(child.message, /SWITCHBOARD_ROLE: api needs TEMPORAL_ADDRESS/);
  });
});

describe('the first start of a Switchboard without SWITCHBOARD_ADMIN_KEY', () => {
  test('makes an admin key, prints it once, keeps it in the data dir (0600), and later starts only point at it', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'sb-admin-'));
    const { SWITCHBOARD_ADMIN_KEY: _none, ...withoutKey } = sbEnv;
    const env = { ...withoutKey, SWITCHBOARD_DATA_DIR: dataDir, PORT: String(await freePort()), TEMPORAL_TASK_QUEUE: `${sbEnv.TEMPORAL_TASK_QUEUE}-first` };
    let proc = await startSwitchboard(env);
    try {
      const printed = await eventually(() => /admin key \(shown once[^:]*\): (sb_[A-Za-z0-9_-]{43})/.exec(proc.output())?.[1], 15_000, 'the printed key');
      const file = join(dataDir, 'admin-key');
      assert.equal((await readFile(file, 'utf8')).trim(), printed);
      assert.equal((await stat(file)).mode & 0o777, 0o600);
      assert.equal((await stat(join(dataDir, 'secrets-key'))).mode & 0o777, 0o600, 'the credential-sealing key too');
      const asAdmin = await fetch(`${proc.url}/tenants`, { headers: { authorization: `Bearer ${printed}` } });
      assert.equal(asAdmin.status, 200);
      const stored = await db.pool.query("SELECT key_hash FROM api_keys WHERE role = 'admin'");
      assert.equal(stored.rowCount, 1);
      assert.equal(JSON.stringify(stored.rows).includes(printed), false, 'only its hash is stored');

      await proc.kill();
      proc = await startSwitchboard(env);
      await eventually(() => /admin key: +\S*admin-key/.test(proc.output()) || undefined, 15_000, 'the second start naming the file');
      assert.equal(proc.output().includes(printed), false, 'not printed again');
      assert.equal((await fetch(`${proc.url}/tenants`, { headers: { authorization: `Bearer ${printed}` } })).status, 200);
    } finally {
      await proc.kill();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
