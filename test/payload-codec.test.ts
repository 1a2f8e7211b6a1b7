/**
 * Temporal payload encryption (SWITCHBOARD_PAYLOAD_KEY): the codec on its own (round trip, rotation, tampering),
 * then a gateway whose client and worker use it: the Temporal history of a task holds no message text, the task
 * still answers in clear to its client, and POST /codec/decode (Temporal UI's codec server) shows operators the
 * text. Real Temporal dev server, PostgreSQL and an @a2a-js/sdk agent.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { temporal } from '@temporalio/proto';
import { AgentPool, startEchoAgent } from './agents';
import { type Gateway, register, rpc, startGateway } from './helpers/harness';
import type { Payload, SerializationContext } from '@temporalio/common';
import {
  CodecRequestError,
  ENCODING,
  EncryptionCodec,
  type PayloadOwner,
  PayloadKeyError,
  PayloadOwnerError,
  applyCodecToJson,
  generateKeySpec,
  ownerOf,
  parseKeyRing,
} from '../src/core/temporal/encryption-codec';
import { workflowIdOf } from '../task/messages';
import { certificationWorkflowId } from '../task/contracts';
import { eventWorkflowIdOf } from '../src/api/genesis/service';
import { orphanSweepId } from '../src/core/temporal/orphan-sweep';
import { RefreshScheduler } from '../src/core/agents/refresh-schedules';

const text = (s: string) => new TextEncoder().encode(s);
const json = (v: unknown): Payload => ({ metadata: { encoding: text('json/plain') }, data: text(JSON.stringify(v)) });

describe('EncryptionCodec', () => {
  const k1 = generateKeySpec('k1');

  test('round trip; ciphertext differs each time and holds no plaintext; non-encrypted payloads pass', async () => {
    const codec = new EncryptionCodec(parseKeyRing(k1));
    const payloads = [json({ text: 'a secret, ünïcødé' }), { metadata: { encoding: text('binary/null') } }, json('')];
    const sealed = await codec.encode(payloads);
    for (const p of sealed) assert.equal(new TextDecoder().decode(p.metadata!.encoding), ENCODING);
    assert.equal(Buffer.from(sealed[0]!.data!).includes('secret'), false);
    const again = await codec.encode(payloads);
    assert.notDeepEqual(Buffer.from(again[0]!.data!), Buffer.from(sealed[0]!.data!), 'a fresh IV each time');
    const opened = await codec.decode(sealed);
    assert.deepEqual(opened.map((p) => Buffer.from(p.data ?? []).toString()), payloads.map((p) => Buffer.from(p.data ?? []).toString()));
    assert.deepEqual(await codec.decode([payloads[0]!]), [payloads[0]], 'plain payloads pass through');
  });

  test('rotation: old ciphertext opens while its key is in the ring; a tampered byte or a missing key fails, naming the key', async () => {
    const sealed = await new EncryptionCodec(parseKeyRing(k1)).encode([json('x')]);
    const rotated = new EncryptionCodec(parseKeyRing(`${generateKeySpec('k2')},${k1}`));
    assert.equal(Buffer.from((await rotated.decode(sealed))[0]!.data!).toString(), '"x"');
    assert.equal(new TextDecoder().decode((await rotated.encode([json('y')]))[0]!.metadata!['encryption-key-id']), 'k2', 'the first key encrypts');
    await assert.rejects(new EncryptionCodec(parseKeyRing(generateKeySpec('k9'))).decode(sealed), /key k1/);
    const tampered = { ...sealed[0]!, data: Buffer.from(sealed[0]!.data!).map((b, i) => (i === 20 ? b ^ 1 : b)) };
    await assert.rejects(rotated.decode([tampered]), /does not decrypt/);
  });

  test('each payload is sealed for the tenant of the workflow it belongs to (system without one); its owner is bound into the tag', async () => {
    const codec = new EncryptionCodec(parseKeyRing(k1));
    const ns = 'default';
    const owners: [SerializationContext | undefined, PayloadOwner][] = [
      [{ type: 'workflow', namespace: ns, workflowId: workflowIdOf('acme', 'task-1') }, { tenant: 'acme' }],
      [{ type: 'activity', namespace: ns, workflowId: workflowIdOf('acme.eu', 'task-1'), isLocal: false }, { tenant: 'acme.eu' }],
      [{ type: 'workflow', namespace: ns, workflowId: certificationWorkflowId('t-2', 'c') }, { tenant: 't-2' }],
      [{ type: 'workflow', namespace: ns, workflowId: eventWorkflowIdOf('t_3', 'm:1') }, { tenant: 't_3' }],
      [{ type: 'workflow', namespace: ns, workflowId: orphanSweepId('switchboard') }, 'system'],
      [{ type: 'workflow', namespace: ns, workflowId: `${orphanSweepId('switchboard')}-2026-11-26T00:00:00Z` }, 'system'],
      [{ type: 'workflow', namespace: ns, workflowId: new RefreshScheduler({ client: undefined as never, taskQueue: 'q' }).runIdPrefix('acme', 'ag') + '1' }, 'system'],
      [{ type: 'workflow', namespace: ns, workflowId: new RefreshScheduler({ client: undefined as never, taskQueue: 'q' }).sweepId }, 'system'],
      [{ type: 'activity', namespace: ns, isLocal: false }, 'system'],
      [undefined, 'system'],
    ];
    for (const [context, owner] of owners) assert.deepEqual(ownerOf(context), owner, JSON.stringify(context));

    const [sealed] = await codec.encode([json('acme\'s')], owners[0]![0]);
    assert.equal(new TextDecoder().decode(sealed!.metadata!['encryption-scope']), 'tenant:acme');
    assert.equal(Buffer.from((await codec.decode([sealed!]))[0]!.data!).toString(), '"acme\'s"', 'the worker opens any owner\'s');
    assert.equal(Buffer.from((await codec.decodeFor([sealed!], { tenant: 'acme' }))[0]!.data!).toString(), '"acme\'s"');
    assert.equal(Buffer.from((await codec.decodeFor([sealed!], { admin: true }))[0]!.data!).toString(), '"acme\'s"');
    await assert.rejects(codec.decodeFor([sealed!], { tenant: 'globex' }), PayloadOwnerError);
    const rewritten = { ...sealed!, metadata: { ...sealed!.metadata, 'encryption-scope': new TextEncoder().encode('tenant:globex') } };
    await assert.rejects(codec.decodeFor([rewritten], { tenant: 'globex' }), PayloadKeyError, 'the owner is in the GCM tag');
    const [system] = await codec.encode([json('x')]);
    await assert.rejects(codec.decodeFor([system!], { tenant: 'acme' }), /Switchboard's own/);
    assert.ok(await codec.decodeFor([json('plain'), system!], { admin: true }));
  });

  test('a bad key spec is refused without echoing key material', () => {
    const material = Buffer.alloc(16, 9).toString('base64');
    for (const spec of ['', 'nokey', `k1:${material}`, `bad id:${Buffer.alloc(32).toString('base64')}`, `k1:${Buffer.alloc(32).toString('base64')},k1:${Buffer.alloc(32).toString('base64')}`]) {
      assert.throws(() => parseKeyRing(spec), (err: Error) => !err.message.includes(material) && /SWITCHBOARD_PAYLOAD_KEY/.test(err.message), spec);
    }
  });

  test('the codec-server JSON protocol round-trips, and refuses bodies of another shape', async () => {
    const codec = new EncryptionCodec(parseKeyRing(k1));
    const body = { payloads: [{ metadata: { encoding: Buffer.from('json/plain').toString('base64') }, data: Buffer.from('"hi"').toString('base64') }] };
    const encoded = await applyCodecToJson((p) => codec.seal(p, { tenant: 'a' }), body);
    assert.equal(Buffer.from(encoded.payloads[0]!.metadata!.encoding!, 'base64').toString(), ENCODING);
    assert.deepEqual(await applyCodecToJson((p) => codec.decodeFor(p, { tenant: 'a' }), encoded), body);
    for (const bad of [null, 'x', { payloads: 'no' }, { payloads: [{ data: 7 }] }, { payloads: [{ data: 'not base64!' }] }]) {
      await assert.rejects(applyCodecToJson((p) => codec.decode(p), bad), CodecRequestError, JSON.stringify(bad));
    }
  });
});

describe('a gateway with SWITCHBOARD_PAYLOAD_KEY', () => {
  let gw: Gateway;
  const agents = new AgentPool();
  const SECRET_TEXT = `the launch code is ${randomUUID()}`;

  before(async () => {
    gw = await startGateway({ payloadKey: generateKeySpec('k1') });
  });
  after(async () => {
    await gw?.close();
    await agents.closeAll();
  });

  test('the history holds only ciphertext; the client reads the task in clear; /codec/decode shows it to operators', async () => {
    const echo = await agents.add(startEchoAgent());
    const { rpc: rpcUrl } = await register(gw, echo.url);
    const res = await rpc(rpcUrl, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: SECRET_TEXT }] } } }, { 'A2A-Version': '1.0' });
    const task = res.json.result?.task;
    assert.equal(task?.status.state, 'TASK_STATE_COMPLETED', res.text);
    assert.equal(task.artifacts[0].parts[0].text, `echo: ${SECRET_TEXT}`);
    const got = await rpc(rpcUrl, { jsonrpc: '2.0', id: 2, method: 'GetTask', params: { id: task.id } }, { 'A2A-Version': '1.0' });
    assert.equal(got.json.result.history[0].parts[0].text, SECRET_TEXT, 'a query answer is decoded for the client');

    // The history as Temporal stores it: read with a client that has no codec.
    const handle = gw.env.client.workflow.getHandle(`a2a:default:${task.id}`);
    const history = await handle.fetchHistory();
    const bytes = Buffer.from(temporal.api.history.v1.History.encode(history).finish());
    assert.equal(bytes.includes(SECRET_TEXT), false, 'no message text in the history');
    assert.ok(bytes.includes(ENCODING), 'payloads are marked encrypted');

    // Temporal UI's codec server: the first event's input, decoded for an operator.
    const input = history.events![0]!.workflowExecutionStartedEventAttributes!.input!.payloads!;
    const body = {
      payloads: input.map((p) => ({
        metadata: Object.fromEntries(Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
        data: Buffer.from(p.data ?? []).toString('base64'),
      })),
    };
    const decode = (role: 'operator' | 'client', headers: Record<string, string> = {}) =>
      gw.fetch(`${gw.url}/codec/decode`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) }, role);
    const asOperator = await decode('operator', { origin: 'http://ui.test' });
    assert.equal(asOperator.status, 200);
    assert.equal(asOperator.headers.get('access-control-allow-origin'), 'http://ui.test');
    const decoded = (await asOperator.json()) as { payloads: { data: string }[] };
    assert.ok(decoded.payloads.some((p) => Buffer.from(p.data, 'base64').toString().includes(task.id)), 'the workflow input, in clear');
    assert.equal((await decode('client')).status, 403, 'clients do not decode histories');

    const preflight = await fetch(`${gw.url}/codec/decode`, { method: 'OPTIONS', headers: { origin: 'http://ui.test', 'access-control-request-method': 'POST' } });
    assert.equal(preflight.status, 204);
    assert.match(preflight.headers.get('access-control-allow-headers') ?? '', /authorization/);
    const foreign = await fetch(`${gw.url}/codec/decode`, { method: 'OPTIONS', headers: { origin: 'http://evil.test' } });
    assert.equal(foreign.headers.get('access-control-allow-origin'), null);
    const garbage = await gw.fetch(`${gw.url}/codec/decode`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"payloads": 3}' }, 'operator');
    assert.equal(garbage.status, 400);
  });
});
