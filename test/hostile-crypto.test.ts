/**
 * Issue 32, tried again as an attacker would, on real components (a gateway with SWITCHBOARD_PAYLOAD_KEY, a
 * Temporal dev server, PostgreSQL, @a2a-js/sdk agents):
 * - tenant A's operator sends tenant B's payloads to Temporal UI's codec server (/codec/decode), as they are in
 *   B's history, and with their owner rewritten to A;
 * - an agent's error text, with a payload key, in the history of the task it failed;
 * - a housekeeping Schedule sealed under a payload key the deployment no longer has, met at start-up;
 * - tampered page tokens on every list that takes one (JSON-RPC, HTTP+JSON, GET /tasks, /agents, /audit).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createCipheriv, randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { Client, ScheduleNotFoundError } from '@temporalio/client';
import type { Payload, PayloadCodec } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { TaskState } from '@a2a-js/sdk';
import type { ExecutionEventBus, RequestContext } from '@a2a-js/sdk/server';
import { AgentPool, RPC_PATH, startAskingAgent, startEchoAgent } from './agents';
import { startAgentServer } from './agents/harness';
import { BaseExecutor, mountV1Agent, startV1Agent, statusEvent, taskEvent, textOf as messageText } from './agents/v1';
import { EchoExecutor } from './agents/echo';
import { type Gateway, register, rpc, startGateway } from './helpers/harness';
import { ENCODING, EncryptionCodec, dataConverterOf, generateKeySpec, parseKeyRing } from '../src/core/temporal/encryption-codec';
import { ensureOrphanSweep, orphanSweepId } from '../src/core/temporal/orphan-sweep';
import { RefreshScheduler } from '../src/core/agents/refresh-schedules';
import { createLogger } from '../src/core/log';
import { getTaskQuery, workflowIdOf } from '../task/messages';

const KEY = generateKeySpec('k1');
const A2A = { 'A2A-Version': '1.0' };

/** Fails every task it is given, saying why in words that must not reach Temporal's database in clear. */
class RefusingExecutor extends BaseExecutor {
  constructor(private readonly reason: (text: string) => string) {
    super();
  }
  async run(ctx: RequestContext, bus: ExecutionEventBus): Promise<void> {
    bus.publish(taskEvent(ctx, TaskState.TASK_STATE_WORKING));
    bus.publish(statusEvent(ctx.taskId, ctx.contextId, TaskState.TASK_STATE_FAILED, { text: this.reason(messageText(ctx.userMessage)) }));
  }
}

/** Every sealed payload anywhere in a history, with where it was. */
function sealedPayloads(node: unknown, at = 'history', out: { at: string; payload: Payload }[] = []): { at: string; payload: Payload }[] {
  if (!node || typeof node !== 'object') return out;
  const p = node as Payload;
  if (p.metadata && p.metadata.encoding && Buffer.from(p.metadata.encoding).toString() === ENCODING) {
    out.push({ at, payload: p });
    return out;
  }
  for (const [k, v] of Object.entries(node)) if (v && typeof v === 'object' && !(v instanceof Uint8Array)) sealedPayloads(v, `${at}.${k}`, out);
  return out;
}

/** Payloads as Temporal's codec-server protocol carries them. */
const asCodecBody = (payloads: Payload[]) => ({
  payloads: payloads.map((p) => ({
    metadata: Object.fromEntries(Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
    data: Buffer.from(p.data ?? []).toString('base64'),
  })),
});
const decodedText = (body: { payloads: { data: string }[] }) => body.payloads.map((p) => Buffer.from(p.data, 'base64').toString()).join('\n');

async function historyBytes(client: Client, workflowId: string) {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  return { history, bytes: Buffer.from(temporal.api.history.v1.History.encode(history).finish()) };
}

/**
 * The previous codec's format (before payloads named their owner): AES-256-GCM with the key id alone as the
 * additional data, and no owner in the metadata. What a running deployment's histories hold at the upgrade.
 */
function legacyCodec(spec: string): PayloadCodec {
  const ring = parseKeyRing(spec);
  const key = ring.keys.get(ring.current)!;
  return {
    async encode(payloads) {
      return payloads.map((p) => {
        const iv = Buffer.alloc(12, 1);
        const cipher = createCipheriv('aes-256-gcm', key, iv).setAAD(Buffer.from(ring.current));
        const plain = temporal.api.common.v1.Payload.encode(p).finish();
        return {
          metadata: { encoding: Buffer.from(ENCODING), 'encryption-key-id': Buffer.from(ring.current) },
          data: Buffer.concat([iv, cipher.update(plain), cipher.final(), cipher.getAuthTag()]),
        };
      });
    },
    decode: (payloads) => new EncryptionCodec(ring).decode(payloads),
  };
}

let gw: Gateway;
const agents = new AgentPool();
/** Tenant b's operator and client keys (tenant `default` is A: gw.keys). */
const b = { operator: '', client: '' };

async function adminPost(path: string, body: unknown) {
  const res = await gw.fetch(`${gw.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }, 'admin');
  const json = (await res.json()) as any;
  assert.equal(res.status, 201, JSON.stringify(json));
  return json;
}
const as = (key: string) => ({ authorization: `Bearer ${key}` });

async function decode(key: string, payloads: Payload[]) {
  const res = await fetch(`${gw.url}/codec/decode`, { method: 'POST', headers: { 'content-type': 'application/json', ...as(key) }, body: JSON.stringify(asCodecBody(payloads)) });
  return { status: res.status, body: (await res.json()) as any };
}

/** Sends one message to an agent of a tenant and returns the task (1.0 JSON). */
async function send(rpcUrl: string, key: string, text: string) {
  const res = await rpc(rpcUrl, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] } } }, { ...A2A, ...as(key) });
  assert.ok(res.json?.result?.task, res.text);
  return res.json.result.task;
}

before(async () => {
  gw = await startGateway({ payloadKey: KEY });
  await adminPost('/tenants', { id: 'b', name: 'Tenant B' });
  b.operator = (await adminPost('/tenants/b/keys', { role: 'operator', name: 'b operator' })).key;
  b.client = (await adminPost('/tenants/b/keys', { role: 'client', name: 'b client' })).key;
});
after(async () => {
  await gw?.close();
  await agents.closeAll();
});

describe('the codec server decodes only the caller\'s tenant', () => {
  test('tenant A\'s operator gets none of B\'s payloads, as stored or with their owner rewritten; B\'s operator and an admin read them', async () => {
    const echo = await agents.add(startEchoAgent());
    const bAgent = await fetch(`${gw.url}/agents`, { method: 'POST', headers: { 'content-type': 'application/json', ...as(b.operator) }, body: JSON.stringify({ url: echo.url }) });
    const { id: bAgentId } = (await bAgent.json()) as { id: string };
    const secret = `B's launch code is ${randomUUID()}`;
    const task = await send(`${gw.url}/agents/${bAgentId}/a2a`, b.client, secret);
    assert.equal(task.status.state, 'TASK_STATE_COMPLETED');

    const { history, bytes } = await historyBytes(gw.env.client, workflowIdOf('b', task.id));
    assert.equal(bytes.includes(secret), false, 'no message text in B\'s history');
    const sealed = sealedPayloads(history);
    assert.ok(sealed.length >= 3, `B's history has sealed payloads (${sealed.length})`);
    const payloads = sealed.map((s) => s.payload);

    // As stored: refused without decrypting, one payload or all of them.
    for (const batch of [payloads, [payloads[0]!]]) {
      const asA = await decode(gw.keys.operator, batch);
      assert.equal(asA.status, 403, JSON.stringify(asA.body));
      assert.match(asA.body.error, /belongs to another tenant.*tenant default/);
      assert.equal(JSON.stringify(asA.body).includes(secret), false);
    }
    // With the owner in the metadata rewritten to A's: it no longer decrypts (the owner is in the GCM tag).
    const forged = payloads.map((p) => ({ ...p, metadata: { ...p.metadata, 'encryption-scope': Buffer.from('tenant:default') } }));
    const asAForged = await decode(gw.keys.operator, forged);
    assert.equal(asAForged.status, 422, JSON.stringify(asAForged.body));
    assert.match(asAForged.body.error, /does not decrypt/);
    // Without an owner, as if sealed before owners: an operator may not; an admin's try fails the tag as well.
    const stripped = payloads.map((p) => ({ ...p, metadata: Object.fromEntries(Object.entries(p.metadata!).filter(([k]) => k !== 'encryption-scope')) }));
    assert.equal((await decode(gw.keys.operator, stripped)).status, 403);
    assert.equal((await decode(b.operator, stripped)).status, 403);
    assert.equal((await decode(gw.keys.admin, stripped)).status, 422);

    // B's own operator, and an admin, read every payload of B's history.
    for (const key of [b.operator, gw.keys.admin]) {
      const ok = await decode(key, payloads);
      assert.equal(ok.status, 200, JSON.stringify(ok.body));
      assert.ok(decodedText(ok.body).includes(secret), 'the message text, in clear');
    }
    // A's operator reads A's own tasks.
    const mine = await agents.add(startEchoAgent());
    const { rpc: aRpc } = await register(gw, mine.url);
    const aTask = await send(aRpc, gw.keys.client, 'A\'s own words');
    const aPayloads = sealedPayloads((await historyBytes(gw.env.client, workflowIdOf('default', aTask.id))).history).map((s) => s.payload);
    const own = await decode(gw.keys.operator, aPayloads);
    assert.equal(own.status, 200, JSON.stringify(own.body));
    assert.ok(decodedText(own.body).includes('A\'s own words'));
    // Encoding seals for the caller's tenant: B's operator cannot read what A's operator encoded.
    const enc = await fetch(`${gw.url}/codec/encode`, { method: 'POST', headers: { 'content-type': 'application/json', ...as(gw.keys.operator) }, body: JSON.stringify(asCodecBody([{ metadata: { encoding: Buffer.from('json/plain') }, data: Buffer.from('"A wrote this"') }])) });
    const encoded = ((await enc.json()) as { payloads: { metadata: Record<string, string>; data: string }[] }).payloads;
    const back = encoded.map((p) => ({ metadata: Object.fromEntries(Object.entries(p.metadata).map(([k, v]) => [k, Buffer.from(v, 'base64')])), data: Buffer.from(p.data, 'base64') }));
    assert.equal((await decode(b.operator, back)).status, 403);
    assert.equal(decodedText((await decode(gw.keys.operator, back)).body), '"A wrote this"');
  });

  test('payloads sealed by the previous version (no owner) still open in the worker and for admins; operators are told why not', async () => {
    const echo = await agents.add(startEchoAgent());
    const { rpc: rpcUrl } = await register(gw, echo.url);
    const task = await send(rpcUrl, gw.keys.client, 'from before the upgrade');
    // A client of the previous version asks the task workflow (its query argument sealed the old way): the worker
    // opens it and answers.
    const legacy = legacyCodec(KEY);
    const sent: Payload[] = [];
    const recording: PayloadCodec = { encode: async (p) => ((await legacy.encode(p)).map((x) => (sent.push(x), x))), decode: (p) => legacy.decode(p) };
    const old = new Client({ connection: gw.env.nativeConnection, namespace: gw.env.namespace ?? 'default', dataConverter: { payloadCodecs: [recording] } });
    const answered = await old.workflow.getHandle(workflowIdOf('default', task.id)).query(getTaskQuery, 1);
    assert.equal(answered.status.state, 'TASK_STATE_COMPLETED');
    assert.equal(sent.length, 1);
    assert.equal(sent[0]!.metadata!['encryption-scope'], undefined, 'sealed the old way');

    const asOperator = await decode(gw.keys.operator, sent);
    assert.equal(asOperator.status, 403);
    assert.match(asOperator.body.error, /sealed before payloads were bound to a tenant.*admin/);
    const asAdmin = await decode(gw.keys.admin, sent);
    assert.equal(asAdmin.status, 200, JSON.stringify(asAdmin.body));
    assert.equal(decodedText(asAdmin.body), '1');
  });
});

describe('failures are sealed too', () => {
  test('an agent\'s error text is not in the history of the task it failed; the client, GET /tasks and the codec server show it', async () => {
    const refusing = await agents.add(startV1Agent(new RefusingExecutor((t) => `refused: the vault rejected ${t}`), 'Refuser', 'Fails every task'));
    const { rpc: rpcUrl } = await register(gw, refusing.url);
    const secret = `key-${randomUUID()}`;
    const task = await send(rpcUrl, gw.keys.client, secret);
    assert.equal(task.status.state, 'TASK_STATE_FAILED');
    assert.match(task.status.message.parts[0].text, new RegExp(`the vault rejected ${secret}`));

    const workflowId = workflowIdOf('default', task.id);
    await assert.rejects(gw.temporal.workflow.getHandle(workflowId).result(), (err: Error & { cause?: Error }) => {
      assert.match(err.cause?.message ?? '', new RegExp(secret), 'the client reads the failure in clear');
      return true;
    });
    const { history, bytes } = await historyBytes(gw.env.client, workflowId);
    assert.equal(bytes.includes(secret), false, 'the agent\'s error text is not in the history in clear');
    const failed = history.events!.at(-1)!.workflowExecutionFailedEventAttributes!.failure!;
    assert.equal(failed.message, 'Encoded failure');
    assert.ok(failed.encodedAttributes, 'message and stack trace are in a sealed payload');

    // The console's list reads the reason from PostgreSQL's projection.
    const list = await gw.fetch(`${gw.url}/tasks?pageSize=100`, {}, 'operator');
    const row = ((await list.json()) as { tasks: { id: string; statusMessage?: string }[] }).tasks.find((t) => t.id === task.id);
    assert.match(row?.statusMessage ?? '', new RegExp(secret));
    // Temporal UI, through the codec server, shows the operator the failure's message.
    const opened = await decode(gw.keys.operator, [failed.encodedAttributes as Payload]);
    assert.equal(opened.status, 200, JSON.stringify(opened.body));
    assert.match(decodedText(opened.body), new RegExp(`A2A task failed: .*${secret}`));
  });

  test('an agent\'s JSON-RPC error text is not in the history either: the activity\'s failure, the update\'s, the workflow\'s', async () => {
    const secret = `token-${randomUUID()}`;
    const erring = await agents.add(
      startAgentServer((app, url) => {
        app.post(RPC_PATH, (req, res) => void res.json({ jsonrpc: '2.0', id: req.body?.id ?? null, error: { code: -32603, message: `database password ${secret} expired` } }));
        mountV1Agent(app, url, new EchoExecutor(), 'Erring', 'Answers every call with an error');
      }),
    );
    const { rpc: rpcUrl } = await register(gw, erring.url);
    const res = await rpc(rpcUrl, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hi' }] } } }, A2A);
    assert.match(res.json?.error?.message ?? '', new RegExp(secret), `the client gets the agent's error: ${res.text}`);
    const taskId = (await gw.db.pool.query<{ task_id: string }>('SELECT task_id FROM tasks WHERE agent_id = $1', [rpcUrl.split('/').at(-2)])).rows[0]!.task_id;
    const { history, bytes } = await historyBytes(gw.env.client, workflowIdOf('default', taskId));
    // The forwarding activity's failure (a local activity's, in its marker) and the workflow's own.
    assert.ok(history.events!.some((e) => e.activityTaskFailedEventAttributes || e.markerRecordedEventAttributes?.failure), 'the forwarding activity failed');
    assert.ok(history.events!.some((e) => e.workflowExecutionFailedEventAttributes));
    assert.equal(bytes.includes(secret), false, 'the agent\'s error text is not in the history in clear');
  });
});

/** A logger whose lines the test reads. */
function capturedLog() {
  const lines: any[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  return { log: createLogger('info', stream), lines };
}

describe('start-up and housekeeping sealed under a key no longer configured', () => {
  test('the orphan sweep and agent-refresh workflows are started again under the new key, with a warning naming the old key id', async () => {
    const connection = gw.env.nativeConnection;
    const namespace = gw.env.namespace ?? 'default';
    // No worker polls this queue: the runs stay open, as a deployment's do between rounds.
    const taskQueue = `sched-${randomUUID().slice(0, 8)}`;
    const before = new Client({ connection, namespace, dataConverter: dataConverterOf(new EncryptionCodec(parseKeyRing(generateKeySpec('retired')))) });
    await ensureOrphanSweep(before, taskQueue, 60_000);
    const oldScheduler = new RefreshScheduler({ client: before, taskQueue, intervalMs: 60_000 });
    await oldScheduler.reconcile(gw.db.pool);
    const ids = [orphanSweepId(taskQueue), oldScheduler.sweepId];
    const oldRuns = await Promise.all(ids.map(async (id) => (await before.workflow.getHandle(id).describe()).runId));
    // The orphan sweep's Schedule of the version before, sealed under the retired key too: deleted all the same.
    // Another deployment's schedule in the namespace, its memo sealed under a key this one never had: listed past.
    const foreign = `other-deployment-${taskQueue}`;
    await before.schedule.create({ scheduleId: foreign, spec: { intervals: [{ every: 3_600_000 }] }, action: { type: 'startWorkflow', workflowType: 'orphanSweepWorkflow', taskQueue: foreign, args: [] }, memo: { owner: 'someone else' }, state: { paused: true } });
    await before.schedule.create({ scheduleId: orphanSweepId(taskQueue), spec: { intervals: [{ every: 3_600_000 }] }, action: { type: 'startWorkflow', workflowType: 'orphanSweepWorkflow', taskQueue, args: [] }, memo: { owner: 'a retired key' }, state: { paused: true } });

    // The deployment starts again with another key (the old one is gone from SWITCHBOARD_PAYLOAD_KEY).
    const now = new Client({ connection, namespace, dataConverter: dataConverterOf(new EncryptionCodec(parseKeyRing(generateKeySpec('k2')))) });
    await assert.rejects(now.workflow.getHandle(orphanSweepId(taskQueue)).describe(), /key retired/, 'the old run does not decode');
    const { log, lines } = capturedLog();
    assert.equal(await ensureOrphanSweep(now, taskQueue, 30_000, log), 'restarted');
    const scheduler = new RefreshScheduler({ client: now, taskQueue, intervalMs: 120_000, log });
    assert.equal((await scheduler.reconcile(gw.db.pool)).created, 1);

    for (const [i, id] of ids.entries()) {
      const described = await now.workflow.getHandle(id).describe();
      assert.equal(described.status.name, 'RUNNING', id);
      assert.notEqual(described.runId, oldRuns[i], `a new run of ${id}`);
      const old = await now.workflowService.describeWorkflowExecution({ namespace, execution: { workflowId: id, runId: oldRuns[i] } });
      assert.equal(old.workflowExecutionInfo?.status, temporal.api.enums.v1.WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_TERMINATED, `the old run of ${id} is terminated`);
      const warned = lines.find((l) => l.workflowId === id);
      assert.equal(warned?.level, 40, `a warning for ${id}: ${JSON.stringify(lines)}`);
      assert.equal(warned.keyId, 'retired');
      assert.match(warned.msg, /starting it again/);
    }
    await assert.rejects(now.schedule.getHandle(orphanSweepId(taskQueue)).describe(), ScheduleNotFoundError, 'the former schedule is gone');
    // A start after that finds them readable: nothing to start again, no warning, the same runs.
    lines.length = 0;
    const runs = await Promise.all(ids.map(async (id) => (await now.workflow.getHandle(id).describe()).runId));
    assert.equal(await ensureOrphanSweep(now, taskQueue, 30_000, log), 'running');
    assert.equal((await scheduler.reconcile(gw.db.pool)).created, 0);
    assert.deepEqual(lines.filter((l) => l.level >= 40), []);
    assert.deepEqual(await Promise.all(ids.map(async (id) => (await now.workflow.getHandle(id).describe()).runId)), runs);
    for (const id of ids) await now.workflow.getHandle(id).terminate('test done');
    await now.schedule.getHandle(foreign).delete();
  });
});

/** A page token as an attacker makes one: base64url of any JSON. */
const token = (v: unknown) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');
const readToken = (t: string) => JSON.parse(Buffer.from(t, 'base64url').toString());
/** What a database error looks like in an answer. */
const DB_TEXT = /syntax|invalid input|out of range|postgres|relation|bind message|violates|column|type real|type bigint|type timestamp|displacement/i;

describe('tampered page tokens are the caller\'s error, never a database message', () => {
  let rpcUrl: string;
  let restBase: string;

  before(async () => {
    const echo = await agents.add(startEchoAgent());
    const r = await register(gw, echo.url);
    rpcUrl = r.rpc;
    restBase = `${r.base}/rest`;
    for (let i = 0; i < 3; i++) await send(rpcUrl, gw.keys.client, `page ${i}`);
    await register(gw, (await agents.add(startEchoAgent())).url);
  });

  /** Cursor fields tampered with, each as a real token's JSON with one field replaced. */
  const tasksCursors = (real: { t: string; id: string }) => [
    { ...real, t: '1 2' },
    { ...real, t: '0000-01-01T00:00:00.000000Z' },
    { ...real, t: '2021-02-29T00:00:00.000000Z' },
    { ...real, t: '2021-01-01T00:00:00.000000+16:00' },
    { ...real, t: '2021-01-01T25:00:00.000000Z' },
    { ...real, t: 'infinity' },
    { ...real, id: 'a\u0000b' },
    { ...real, id: 7 },
    { t: real.t },
  ];
  const garbage = ['', '!!!', token('not json'), token('null'), token('[]'), 'A'.repeat(600)];

  test('ListTasks (JSON-RPC): -32602; the HTTP+JSON binding: 400; GET /tasks: 400', async () => {
    const listRpc = (pageToken: unknown) => rpc(rpcUrl, { jsonrpc: '2.0', id: 1, method: 'ListTasks', params: { pageSize: 1, pageToken } }, A2A);
    const first = await listRpc(undefined);
    const real = readToken(first.json.result.nextPageToken);
    assert.equal((await listRpc(first.json.result.nextPageToken)).json.result.tasks.length, 1, 'a real token pages');
    for (const bad of [...tasksCursors(real).map(token), ...garbage.filter(Boolean)]) {
      const r = await listRpc(bad);
      assert.equal(r.json?.error?.code, -32602, `${bad}: ${r.text}`);
      assert.doesNotMatch(r.text, DB_TEXT);
      const rest = await gw.fetch(`${restBase}/tasks?pageSize=1&pageToken=${encodeURIComponent(bad)}`, { headers: A2A });
      const restText = await rest.text();
      assert.equal(rest.status, 400, `${bad}: ${restText}`);
      assert.doesNotMatch(restText, DB_TEXT);
    }
    const console = await gw.fetch(`${gw.url}/tasks?pageSize=1`, {}, 'operator');
    const realSummary = readToken(((await console.json()) as { nextPageToken: string }).nextPageToken);
    for (const bad of [...tasksCursors(realSummary).map(token), ...garbage.filter(Boolean)]) {
      const r = await gw.fetch(`${gw.url}/tasks?pageSize=1&pageToken=${encodeURIComponent(bad)}`, {}, 'operator');
      const text = await r.text();
      assert.equal(r.status, 400, `${bad}: ${text}`);
      assert.doesNotMatch(text, DB_TEXT);
    }
    // A bad statusTimestampAfter meets the same cast: refused before it.
    for (const after of ['0000-01-01T00:00:00Z', '2021-01-01T00:00:00+16:00']) {
      const r = await rpc(rpcUrl, { jsonrpc: '2.0', id: 1, method: 'ListTasks', params: { statusTimestampAfter: after } }, A2A);
      assert.equal(r.json?.error?.code, -32602, r.text);
      assert.doesNotMatch(r.text, DB_TEXT);
    }
  });

  test('GET /agents and GET /audit: 400', async () => {
    const agentsPage = async (q: string, pageToken?: string) => {
      const r = await gw.fetch(`${gw.url}/agents?pageSize=1${q}${pageToken === undefined ? '' : `&pageToken=${encodeURIComponent(pageToken)}`}`, {}, 'operator');
      return { status: r.status, text: await r.text() };
    };
    for (const q of ['', '&q=echo']) {
      const first = JSON.parse((await agentsPage(q)).text);
      const real = readToken(first.nextPageToken);
      assert.equal((await agentsPage(q, first.nextPageToken)).status, 200, 'a real token pages');
      const keys = q
        ? ['0x10', '1e-50', '1e999', 'NaN', ' 1', '1_0', '-']
        : ['9999-99-99 99:99:99+00', '2021-02-29 00:00:00+00', '0000-01-01 00:00:00+00', '2021-01-01 00:00:00+16', '1 2'];
      for (const bad of [...keys.map((k) => token({ ...real, k })), token({ ...real, id: '\u0000' }), ...garbage.filter(Boolean)]) {
        const r = await agentsPage(q, bad);
        assert.equal(r.status, 400, `${q} ${bad}: ${r.text}`);
        assert.doesNotMatch(r.text, DB_TEXT);
      }
    }
    const audit = await gw.fetch(`${gw.url}/audit?pageSize=1`, {}, 'admin');
    const realAudit = readToken(((await audit.json()) as { nextPageToken: string }).nextPageToken);
    assert.ok(realAudit.a);
    for (const bad of [token({ a: '9999999999999999999' }), token({ a: '99999999999999999999' }), token({ a: '-1' }), token({ a: 1 }), ...garbage.filter(Boolean)]) {
      const r = await gw.fetch(`${gw.url}/audit?pageSize=1&pageToken=${encodeURIComponent(bad)}`, {}, 'admin');
      const text = await r.text();
      assert.equal(r.status, 400, `${bad}: ${text}`);
      assert.doesNotMatch(text, DB_TEXT);
    }
  });

  test('ListTaskPushNotificationConfigs: -32602', async () => {
    // A task that waits for input still takes webhooks.
    const { rpc: askingRpc } = await register(gw, (await agents.add(startAskingAgent())).url);
    const task = await send(askingRpc, gw.keys.client, 'with webhooks');
    assert.equal(task.status.state, 'TASK_STATE_INPUT_REQUIRED');
    for (const id of ['c1', 'c2']) {
      const r = await rpc(askingRpc, { jsonrpc: '2.0', id: 1, method: 'CreateTaskPushNotificationConfig', params: { taskId: task.id, id, url: 'http://127.0.0.1:9/hook' } }, A2A);
      assert.ok(!r.json.error, r.text);
    }
    const list = (pageToken?: string) => rpc(askingRpc, { jsonrpc: '2.0', id: 1, method: 'ListTaskPushNotificationConfigs', params: { taskId: task.id, pageSize: 1, pageToken } }, A2A);
    const first = await list();
    assert.ok(first.json.result?.nextPageToken, first.text);
    for (const bad of [token({ c1: '\u0000' }), token({ c1: '' }), token({ c1: 5 }), ...garbage.filter(Boolean)]) {
      const r = await list(bad);
      assert.equal(r.json?.error?.code, -32602, `${bad}: ${r.text}`);
      assert.doesNotMatch(r.text, DB_TEXT);
    }
    assert.equal((await list(first.json.result.nextPageToken)).json.result?.configs?.length, 1, 'a real token pages');
  });
});
