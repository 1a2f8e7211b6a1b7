/**
 * Genesis Nexus envelopes (seeds/002) end to end on real components: the seed's own signMessage and
 * verifySignature (verbatim) against POST /genesis/messages; every signed field tampered; replays; skew and ttl;
 * AES-256-GCM with a wrong tag; COMMAND/QUERY/RESPONSE/ack; an agent that speaks envelopes itself (the seed's
 * receiving side, written from its text) as a COMMAND's and a QUERY's target; priority under a saturated one-slot
 * worker; and pub-sub fan-out to three subscribers, one of them down for a while, counted per delivery guarantee.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createCipheriv, createDecipheriv, hkdfSync, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Worker } from '@temporalio/worker';
import { AgentPool, startEchoAgent, type TestAgent } from './agents';
import { DATABASE_URL, type Gateway, agentKey, clientFactory, eventually, register, sendText, startGateway, workflowBundle } from './helpers/harness';
import { Task } from '@a2a-js/sdk';
import { EventHub } from '../src/core/events/hub';
import { GenesisStore, responseFollowId } from '../src/core/genesis/store';
import { createActivities } from '../activities';
import { createWorker } from '../src/worker/worker';
import { workflowIdOf } from '../task/messages';
import { type Jwks, verifyDelivery } from '../src/core/push/signing';

import { type A2AMessage, signMessage, verifySignature } from './fixtures/genesis-seed';

let gw: Gateway;
const agents = new AgentPool();
let sender: string; // A: has a Genesis secret
let worker: string; // B: the echo agent COMMANDs go to
let secret: string;
let workerAgent: TestAgent;
/** Attempts at delivering an EVENT to a subscriber running in the worker now (the activity, counted). */
let deliveriesRunning = 0;

/** The pair key as docs/dialects.md "Genesis Nexus envelopes" defines it, computed here independently of the gateway. */
const pairKey = (s: string, from: string, to: string) => Buffer.from(hkdfSync('sha256', Buffer.from(s), 'genesis-nexus', `aes-256-gcm:${from}:${to}`, 32));

function encrypt(key: Buffer, fields: unknown) {
  const iv = Buffer.from(randomUUID().replace(/-/g, '').slice(0, 24), 'hex');
  const c = createCipheriv('aes-256-gcm', key, iv);
  const ciphertext = Buffer.concat([c.update(JSON.stringify(fields)), c.final()]);
  return { algorithm: 'AES-256-GCM', iv: iv.toString('base64'), ciphertext: ciphertext.toString('base64'), authTag: c.getAuthTag().toString('base64') };
}
function decrypt(key: Buffer, e: { iv: string; ciphertext: string; authTag: string }) {
  const d = createDecipheriv('aes-256-gcm', key, Buffer.from(e.iv, 'base64'));
  d.setAuthTag(Buffer.from(e.authTag, 'base64'));
  return JSON.parse(Buffer.concat([d.update(Buffer.from(e.ciphertext, 'base64')), d.final()]).toString());
}

/** A COMMAND as the seed's CommandMessage, unsigned. */
function command(action: string, extra: Record<string, unknown> = {}): A2AMessage {
  return {
    id: randomUUID(),
    type: 'COMMAND',
    version: '1.0.0',
    timestamp: Date.now(),
    from: sender,
    to: worker,
    action,
    payload: { parameters: { n: 1 } },
    signature: '',
    priority: 'normal',
    ttl: 60_000,
    requiresAck: false,
    requiresSignature: true,
    ...extra,
  };
}
const signed = async (m: A2AMessage, s = secret) => ({ ...m, signature: await signMessage(m, s) });

async function post(body: unknown, key = gw.keys.client, path = '/genesis/messages') {
  const headers = { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) };
  const res = await fetch(`${gw.url}${path}`, { method: 'POST', headers, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: res.status, json: (await res.json().catch(() => undefined)) as any };
}
/** POST as post() does, keeping the answer's bytes. */
async function postText(body: unknown, key = gw.keys.client) {
  const res = await fetch(`${gw.url}/genesis/messages`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, text: await res.text(), contentType: res.headers.get('content-type') };
}
async function get(path: string, key = gw.keys.client) {
  const res = await fetch(`${gw.url}${path}`, { headers: { authorization: `Bearer ${key}` } });
  return { status: res.status, json: (await res.json().catch(() => undefined)) as any };
}
/** The COMMAND actions the echo agent received, in order. */
const actionsReceived = (a: TestAgent) => a.calls.filter((c) => c.params?.message?.parts?.[0]?.text?.startsWith('{')).map((c) => JSON.parse(c.params.message.parts[0].text).action as string);

before(async () => {
  // One partition per task queue: Temporal orders a backlog by priority within a partition, and the dev server's
  // default of four spreads the test's eight tasks over them, so the order seen would depend on which partition
  // the one-slot worker polled first.
  const onePartition = ['matching.numTaskqueueReadPartitions=1', 'matching.numTaskqueueWritePartitions=1'];
  gw = await startGateway({
    pushRetryInitialMs: 200,
    temporalArgs: onePartition.flatMap((v) => ['--dynamic-config-value', v]),
    wrapActivities: (real) => ({
      ...real,
      async deliverGenesisEvent(args) {
        deliveriesRunning++;
        try {
          return await real.deliverGenesisEvent(args);
        } finally {
          deliveriesRunning--;
        }
      },
    }),
  });
  const a = await agents.add(startEchoAgent());
  workerAgent = await agents.add(startEchoAgent());
  sender = (await register(gw, a.url)).id;
  worker = (await register(gw, workerAgent.url)).id;
  const issued = await post(undefined, gw.keys.operator, `/agents/${sender}/genesis-secret`);
  assert.equal(issued.status, 201);
  secret = issued.json.secret;
  assert.match(secret, /^[0-9a-f]{64}$/);
});

after(async () => {
  await gw?.close();
  await agents.closeAll();
});

describe('signatures', () => {
  test('a COMMAND signed with the seed\'s signMessage runs a task on the to agent; the answer verifies with the seed\'s verifySignature', async () => {
    const m = await signed(command('summarize'));
    const r = await post(m);
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.type, 'RESPONSE');
    assert.equal(r.json.requestId, m.id);
    assert.equal(r.json.status, 'SUCCESS');
    assert.equal(r.json.data.state, 'completed');
    assert.match(JSON.stringify(r.json.data.artifacts), /echo: .*summarize/);
    assert.deepEqual([r.json.from, r.json.to], [worker, sender]);
    assert.equal(await verifySignature(r.json, secret), true);
    // The agent got the action and its parameters as the message.
    const call = workerAgent.calls.find((c) => c.params?.message?.messageId === m.id)!;
    assert.deepEqual(JSON.parse(call.params.message.parts[0].text), { action: 'summarize', parameters: { n: 1 } });
  });

  test('each signed field tampered (and the signature itself) is refused with 401, and nothing is applied', async () => {
    const before = workerAgent.calls.length;
    const tampers: Record<string, (m: A2AMessage) => A2AMessage> = {
      id: (m) => ({ ...m, id: randomUUID() }),
      type: (m) => ({ ...m, type: 'QUERY', action: 'get_status', payload: { resourceId: 'x' } }),
      from: (m) => ({ ...m, from: { id: sender } }),
      to: (m) => ({ ...m, to: sender }),
      timestamp: (m) => ({ ...m, timestamp: m.timestamp + 1 }),
      signature: (m) => ({ ...m, signature: m.signature.replace(/^./, (c: string) => (c === '0' ? '1' : '0')) }),
      'signature (short)': (m) => ({ ...m, signature: m.signature.slice(0, 10) }),
      'no signature from a sender with a secret': (m) => ({ ...m, signature: '', requiresSignature: false }),
    };
    for (const [field, tamper] of Object.entries(tampers)) {
      const m = tamper(await signed(command(`tampered-${field}`)));
      const r = await post(m);
      assert.equal(r.status, 401, `${field}: ${JSON.stringify(r.json)}`);
      assert.match(r.json.error, /signature|Genesis secret/);
      assert.equal((await get(`/genesis/messages/${m.id}`)).status, 404, field);
    }
    assert.equal(workerAgent.calls.length, before);
  });

  test('requiresSignature from a sender without a secret: 401; bad shapes: 400 naming the field', async () => {
    const unsigned = { ...command('x'), from: worker, to: sender };
    const r = await post(unsigned);
    assert.equal(r.status, 401);
    assert.match(r.json.error, /has no Genesis secret/);
    const bad = await post({ ...command('x'), priority: 'urgent' });
    assert.equal(bad.status, 400);
    assert.match(bad.json.error, /priority/);
    const noAction = await post(await signed({ ...command('x'), action: undefined }));
    assert.equal(noAction.status, 400);
    assert.match(noAction.json.error, /action/);
    assert.equal((await post({})).status, 400);
    assert.equal((await post(await signed({ ...command('x'), type: 'QUERY', action: 'get_everything', payload: { resourceId: 'x' } }))).status, 400);
  });

  test('senders and recipients are agents of the caller\'s tenant', async () => {
    const admin = { authorization: `Bearer ${gw.keys.admin}`, 'content-type': 'application/json' };
    await fetch(`${gw.url}/tenants`, { method: 'POST', headers: admin, body: JSON.stringify({ id: 'genesis-other', name: 'other' }) });
    const keyRes = await fetch(`${gw.url}/tenants/genesis-other/keys`, { method: 'POST', headers: admin, body: JSON.stringify({ role: 'client', name: 'c' }) });
    const key = ((await keyRes.json()) as { key: string }).key;
    const r = await post(await signed(command('cross-tenant')), key);
    assert.equal(r.status, 404);
    assert.match(r.json.error, /no agent/);
    // An agent key speaks only for its own agent.
    const asWorker = await post(await signed(command('impersonate')), await agentKey(gw, worker));
    assert.equal(asWorker.status, 403);
  });
});

describe('replay, skew and ttl', () => {
  test('a replayed id is answered as the first time, byte for byte, and applied once', async () => {
    const m = await signed(command('once'));
    const first = await postText(m);
    const again = await postText(m);
    assert.equal(first.status, 200);
    assert.equal(again.status, 200);
    assert.equal(again.text, first.text, 'the first answer\'s bytes (PostgreSQL\'s jsonb would reorder its keys)');
    assert.equal(again.contentType, first.contentType);
    // Its keys in another order are the same envelope.
    const reordered = Object.fromEntries(Object.entries(m).reverse());
    assert.equal((await postText(reordered)).text, first.text);
    assert.equal(actionsReceived(workerAgent).filter((a) => a === 'once').length, 1);
    // The same id with other content signed anew is not a replay: refused.
    const reused = await post(await signed({ ...m, timestamp: m.timestamp + 5 }));
    assert.equal(reused.status, 409);
  });

  test('the same id and signed fields with another payload is refused (409), and the first answer stands', async () => {
    const m = await signed(command('transfer', { payload: { parameters: { amount: 1 } } }));
    const first = await postText(m);
    assert.equal(first.status, 200);
    // The signature covers id, type, from, to and timestamp only: an attacker who saw m can keep it and swap the rest.
    for (const swapped of [{ ...m, payload: { parameters: { amount: 1_000_000 } } }, { ...m, action: 'drain' }, { ...m, priority: 'critical' }, { ...m, correlationId: 'x' }]) {
      const r = await post(swapped);
      assert.equal(r.status, 409, JSON.stringify(r.json));
      assert.match(r.json.error, new RegExp(`id ${m.id} was already used by an envelope with other content`));
    }
    assert.equal((await postText(m)).text, first.text, 'the envelope itself still replays');
    assert.deepEqual(actionsReceived(workerAgent).filter((a) => a === 'transfer' || a === 'drain'), ['transfer']);
    // Both at once, before either is recorded: one is applied and answered, the other refused.
    const n = await signed(command('race', { payload: { parameters: { amount: 1 } } }));
    const raced = await Promise.all([post(n), post({ ...n, payload: { parameters: { amount: 2 } } })]);
    assert.deepEqual(raced.map((r) => r.status).sort(), [200, 409], JSON.stringify(raced));
    // The same envelope twice at once: applied once, both answered with the same bytes.
    const o = await signed(command('twice'));
    const [x, y] = await Promise.all([postText(o), postText(o)]);
    assert.equal(x.status, 200);
    assert.equal(y.text, x.text);
    assert.equal(actionsReceived(workerAgent).filter((a) => a === 'twice').length, 1);
  });

  test('a timestamp outside the skew and a passed ttl are refused; nothing is applied', async () => {
    const old = await signed(command('stale', { timestamp: Date.now() - 10 * 60_000, ttl: 0 }));
    const r = await post(old);
    assert.equal(r.status, 400);
    assert.match(r.json.error, /timestamp/);
    const expired = await signed(command('expired', { timestamp: Date.now() - 2000, ttl: 1000 }));
    const e = await post(expired);
    assert.equal(e.status, 400);
    assert.match(e.json.error, /ttl: the envelope expired/);
    assert.equal((await get(`/genesis/messages/${expired.id}`)).status, 404);
    assert.deepEqual(actionsReceived(workerAgent).filter((a) => a === 'stale' || a === 'expired'), []);
  });
});

describe('ttl while queued', () => {
  test('a COMMAND whose ttl passes while its task waits in the queue is never delivered, and is recorded as expired', async () => {
    await gw.stopWorker();
    const m = await signed(command('queued-too-long', { ttl: 1500, requiresAck: true }));
    const sent = post(m);
    try {
      await eventually(async () => {
        const { rows } = await gw.db.pool.query<{ task_id: string }>('SELECT task_id FROM genesis_messages WHERE id = $1 AND task_id IS NOT NULL', [m.id]);
        return rows[0] && gw.env.client.workflow.getHandle(workflowIdOf('default', rows[0].task_id)).describe().then(() => true, () => undefined);
      });
      // Queued until the ttl has passed (the worker compares the envelope's timestamp + ttl with its clock, this one).
      await eventually(() => Date.now() > m.timestamp + m.ttl, 10_000, "the envelope's ttl to pass");
    } finally {
      await gw.startWorker();
    }
    assert.equal((await sent).status, 202);
    const view = await eventually(async () => {
      const v = await get(`/genesis/messages/${m.id}`);
      return v.json.result?.status === 'FAILURE' ? v.json : undefined;
    });
    assert.equal(view.result.data.state, 'rejected');
    assert.match(JSON.stringify(view.result.data.message), /ttl passed .* it was not delivered/);
    assert.deepEqual(actionsReceived(workerAgent).filter((a) => a === 'queued-too-long'), []);
    // Not held against the agent, which never saw it.
    const outcome = await eventually(async () => (await gw.db.pool.query<{ outcome: string }>('SELECT outcome FROM trust_events WHERE task_id = $1', [view.taskId])).rows[0]?.outcome);
    assert.equal(outcome, 'expired');
  });
});

describe('encryption', () => {
  test('an encrypted COMMAND is decrypted with the pair key, and its answer is encrypted with it', async () => {
    const key = pairKey(secret, sender, worker);
    const { action: _a, payload: _p, ...clear } = command('');
    const m = await signed({ ...clear, encryption: encrypt(key, { action: 'secret-plan', payload: { parameters: { q: 'classified' } } }) });
    const r = await post(m);
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.data, undefined, 'the answer\'s data is not in the clear');
    const inner = decrypt(key, r.json.encryption);
    assert.equal(inner.data.state, 'completed');
    assert.match(JSON.stringify(inner.data.artifacts), /secret-plan/);
    assert.equal(await verifySignature(r.json, secret), true);
    // GET shows the result encrypted too.
    const view = await get(`/genesis/messages/${m.id}`);
    assert.equal(decrypt(key, view.json.result.encryption).data.state, 'completed');
  });

  test('a wrong GCM tag (or a wrong key) is refused and nothing is applied', async () => {
    const before = workerAgent.calls.length;
    const key = pairKey(secret, sender, worker);
    const { action: _a, payload: _p, ...clear } = command('');
    const enc = encrypt(key, { action: 'tampered-ciphertext' });
    const tag = Buffer.from(enc.authTag, 'base64');
    tag[0] ^= 1;
    const m = await signed({ ...clear, encryption: { ...enc, authTag: tag.toString('base64') } });
    const r = await post(m);
    assert.equal(r.status, 400);
    assert.match(r.json.error, /authentication tag does not match/);
    const wrongKey = await signed({ ...clear, id: randomUUID(), encryption: encrypt(pairKey('not-the-secret', sender, worker), { action: 'x' }) });
    assert.equal((await post(wrongKey)).status, 400);
    assert.equal((await get(`/genesis/messages/${m.id}`)).status, 404);
    assert.equal(workerAgent.calls.length, before);
  });
});

describe('COMMAND, QUERY, RESPONSE, ack', () => {
  test('requiresAck: an immediate ack envelope, then the result at GET /genesis/messages/:id', async () => {
    const m = await signed(command('acked', { requiresAck: true }));
    const r = await post(m);
    assert.equal(r.status, 202);
    assert.equal(r.json.action, 'ack');
    assert.equal(r.json.status, 'PARTIAL');
    assert.equal(r.json.data.acknowledged, true);
    const done = await eventually(async () => {
      const v = await get(`/genesis/messages/${m.id}`);
      return v.json.result?.status === 'SUCCESS' ? v.json : undefined;
    });
    assert.equal(done.result.data.state, 'completed');
    assert.equal(done.result.requestId, m.id);
  });

  test('QUERY get_status, get_state and get_metrics', async () => {
    const cmd = await signed(command('to-query', { priority: 'high' }));
    await post(cmd);
    const q = async (action: string, resourceId: string) => post(await signed({ ...command(''), type: 'QUERY', action, payload: { resourceId } }));
    const status = await q('get_status', cmd.id);
    assert.equal(status.status, 200);
    assert.equal(status.json.data.state, 'completed');
    // The task's workflow ends in a workflow task after the one that answered (workflows/task-workflow.ts).
    const state = await eventually(async () => {
      const r = await q('get_state', cmd.id);
      return r.json.data.workflow.status === 'COMPLETED' ? r : undefined;
    }, 10_000, 'the workflow to end');
    assert.equal(state.json.data.workflow.priority.priorityKey, 2);
    const metrics = await q('get_metrics', worker);
    assert.equal(metrics.json.data.agentId, worker);
    assert.ok(metrics.json.data.reputation.completed >= 1);
    const unknown = await q('get_status', randomUUID());
    assert.equal(unknown.json.status, 'FAILURE');
    assert.equal(unknown.json.error.code, -32001);
  });

  test('RESPONSE from the agent a request went to is recorded on it, its status mapped to a task state', async () => {
    const cmd = await signed(command('to-answer', { requiresAck: true }));
    await post(cmd);
    const response = {
      id: randomUUID(),
      type: 'RESPONSE',
      version: '1.0.0',
      timestamp: Date.now(),
      from: worker,
      to: sender,
      correlationId: cmd.id,
      requestId: cmd.id,
      status: 'PARTIAL',
      data: { progress: 0.5 },
      signature: '',
      priority: 'normal',
      ttl: 0,
      requiresAck: false,
      requiresSignature: false,
    };
    const r = await post(response, await agentKey(gw, worker));
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.data.taskState, 'working');
    const view = await get(`/genesis/messages/${cmd.id}`);
    assert.equal(view.json.response.status, 'PARTIAL');
    assert.deepEqual(view.json.response.data, { progress: 0.5 });
    // Only the addressee answers.
    const forged = await post(await signed({ ...response, id: randomUUID(), from: sender, to: worker }));
    assert.equal(forged.status, 403);
  });
});

// ---- an agent that speaks envelopes (the seed's receiving side) ----

interface EnvelopeAgent {
  url: string;
  /** Its Genesis secret, once Switchboard has issued it (set by the test: the agent's operator hands it over). */
  secret?: string;
  /** Every envelope received (decrypted), whether its signature verified, and whether it came encrypted. */
  received: { envelope: A2AMessage; verified: boolean; encrypted: boolean }[];
  close(): Promise<void>;
}

const identityId = (i: unknown) => (i && typeof i === 'object' ? (i as { id: string }).id : String(i));

/**
 * An agent written from seed 002's text: envelopes POSTed to it, checked with the seed's verifySignature when they
 * require a signature, decrypted with the pair key of its own secret, and answered with a RESPONSE envelope signed
 * with the seed's signMessage (encrypted back when the request was). Its actions: `fail` answers FAILURE with an
 * error; `flaky` answers 503 the first time an envelope id comes; `forge` answers SUCCESS signed with another
 * secret; `later` acknowledges (202) and answers later
 * (the test POSTs its RESPONSE to /genesis/messages, as the agent); anything else SUCCESS with what it did. A QUERY
 * get_status names a COMMAND it received (SUCCESS) or not (FAILURE).
 */
async function startEnvelopeAgent(): Promise<EnvelopeAgent> {
  const agent: EnvelopeAgent = { url: '', received: [], close: async () => {} };
  const seen = new Set<string>();
  const server = http.createServer((req, res) => {
    let text = '';
    req.on('data', (d) => (text += d));
    req.on('end', async () => {
      const send = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      if (req.method !== 'POST') return send(404, { error: 'not found' }); // no card: the seed describes none
      let m: A2AMessage;
      try {
        m = JSON.parse(text);
      } catch {
        return send(400, { error: 'not JSON' });
      }
      const verified = !!agent.secret && (await verifySignature(m, agent.secret));
      if (m.requiresSignature && !verified) return send(401, { error: 'signature does not verify' });
      let e = m;
      if (m.encryption) {
        const { encryption, ...clear } = m;
        e = { ...clear, ...decrypt(pairKey(agent.secret!, identityId(m.from), identityId(m.to)), encryption) };
      }
      agent.received.push({ envelope: e, verified, encrypted: !!m.encryption });
      const reply = async (httpStatus: number, status: string, fields: Record<string, unknown>, action?: string) => {
        const r: A2AMessage = {
          id: randomUUID(), type: 'RESPONSE', version: '1.0.0', timestamp: Date.now(), from: m.to, to: m.from,
          correlationId: m.correlationId ?? m.id, requestId: m.id, status, ...(action ? { action } : {}),
          ...(m.encryption ? { encryption: encrypt(pairKey(agent.secret!, identityId(m.to), identityId(m.from)), fields) } : fields),
          signature: '', priority: m.priority, ttl: 0, requiresAck: false, requiresSignature: !!agent.secret, processingTime: 3,
        };
        // `forge`: a RESPONSE as someone without the agent's secret would make it.
        if (agent.secret) r.signature = await signMessage(r, e.action === 'forge' ? 'not-the-agents-secret' : agent.secret);
        send(httpStatus, r);
      };
      if (e.type === 'QUERY') {
        const known = agent.received.some((x) => x.envelope.type === 'COMMAND' && x.envelope.id === e.payload.resourceId);
        return known ? reply(200, 'SUCCESS', { data: { resourceId: e.payload.resourceId, state: 'done' } }) : reply(200, 'FAILURE', { error: { code: 'NOT_FOUND', message: `no resource ${e.payload.resourceId}` } });
      }
      if (e.action === 'fail') return reply(200, 'FAILURE', { error: { code: 'E_REFUSED', message: 'refused: the plan is unsafe' } });
      if (e.action === 'flaky' && !seen.has(m.id)) return seen.add(m.id), send(503, { error: 'busy' });
      if (e.action === 'later') return reply(202, 'PARTIAL', { data: { acknowledged: true } }, 'ack');
      return reply(200, 'SUCCESS', { data: { did: e.action, parameters: e.payload?.parameters ?? null }, confidence: 0.9 });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  agent.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/genesis`;
  agent.close = () => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r())));
  return agent;
}

describe('an agent that speaks envelopes', () => {
  let envelopeAgent: EnvelopeAgent;
  let envelopeAgentId: string;
  before(async () => {
    envelopeAgent = await startEnvelopeAgent();
    // The URL alone: it answers Switchboard's unsigned QUERY envelope with a RESPONSE, so it is taken for Genesis.
    envelopeAgentId = (await register(gw, envelopeAgent.url, { retry: { initialIntervalMs: 50 } })).id;
    const issued = await post(undefined, gw.keys.operator, `/agents/${envelopeAgentId}/genesis-secret`);
    envelopeAgent.secret = issued.json.secret;
  });
  after(() => envelopeAgent?.close());
  const to = () => envelopeAgentId;
  const receivedOf = (id: string) => envelopeAgent.received.filter((r) => r.envelope.id === id);

  test('registered with its URL alone; a COMMAND reaches it as an envelope signed with its secret, and its RESPONSE completes the task', async () => {
    const view = (await get(`/agents/${envelopeAgentId}`, gw.keys.operator)).json;
    assert.equal(view.endpoint.protocolVersion, 'genesis');
    assert.equal(view.endpoint.url, envelopeAgent.url);
    const m = await signed(command('summarize', { to: to(), from: { id: sender, name: 'planner' }, payload: { workflowId: 'wf-1', parameters: { n: 2 } } }));
    const r = await post(m);
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.status, 'SUCCESS');
    assert.deepEqual(r.json.result, { taskId: r.json.result.taskId, state: 'completed' });
    assert.deepEqual(r.json.data, { did: 'summarize', parameters: { n: 2 } }, "the agent's own RESPONSE data, at the top where the seed's sender reads it");
    assert.equal(r.json.confidence, 0.9);
    assert.equal(await verifySignature(r.json, secret), true, 'the sender checks the answer as before');
    const [got] = receivedOf(m.id);
    assert.ok(got, 'the agent got the envelope under the COMMAND\'s id');
    assert.equal(got.verified, true, "the seed's verifySignature with the agent's own secret");
    assert.deepEqual(
      [got.envelope.type, got.envelope.from, got.envelope.to, got.envelope.timestamp, got.envelope.action, got.envelope.payload],
      ['COMMAND', { id: sender, name: 'planner' }, to(), m.timestamp, 'summarize', { workflowId: 'wf-1', parameters: { n: 2 } }],
      'the envelope as its sender sent it',
    );
    // A task like any other: the gateway's own record of it agrees.
    const status = await post(await signed({ ...command(''), type: 'QUERY', action: 'get_status', payload: { resourceId: m.id } }));
    assert.equal(status.json.data.state, 'completed');
  });

  test('FAILURE fails the task and its error reaches the sender; an HTTP 503 is retried with the same envelope id', async () => {
    const failed = await post(await signed(command('fail', { to: to() })));
    assert.equal(failed.status, 200, JSON.stringify(failed.json));
    assert.equal(failed.json.status, 'FAILURE');
    assert.equal(failed.json.result.state, 'failed');
    assert.deepEqual(failed.json.error, { code: 'E_REFUSED', message: 'refused: the plan is unsafe' });
    const m = await signed(command('flaky', { to: to() }));
    const r = await post(m);
    assert.equal(r.json.status, 'SUCCESS', JSON.stringify(r.json));
    const sent = receivedOf(m.id);
    assert.equal(sent.length, 2, 'refused once, then answered');
    assert.deepEqual(sent[1]!.envelope, sent[0]!.envelope, 'the same envelope (id, timestamp, signature) on the retry');
  });

  test('a RESPONSE not signed with the agent\'s secret does not complete the task', async () => {
    const r = await post(await signed(command('forge', { to: to() })));
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.status, 'FAILURE');
    assert.equal(r.json.data.state, 'failed');
    assert.match(JSON.stringify(r.json.data.message), /not signed with its Genesis secret/);
  });

  test('an acknowledged COMMAND stays working through a PARTIAL RESPONSE and completes with the RESPONSE the agent POSTs later', async () => {
    const m = await signed(command('later', { to: to(), requiresAck: true }));
    const acked = await post(m);
    assert.equal(acked.status, 202);
    await eventually(() => receivedOf(m.id).length > 0, 10_000, 'the envelope at the agent');
    const agentAnswers = await agentKey(gw, envelopeAgentId);
    const respond = async (status: string, data: unknown) => {
      const r: A2AMessage = {
        id: randomUUID(), type: 'RESPONSE', version: '1.0.0', timestamp: Date.now(), from: to(), to: sender, correlationId: m.id, requestId: m.id,
        status, data, signature: '', priority: 'normal', ttl: 0, requiresAck: false, requiresSignature: true,
      };
      return post({ ...r, signature: await signMessage(r, envelopeAgent.secret!) }, agentAnswers);
    };
    const partial = await respond('PARTIAL', { progress: 0.5 });
    assert.equal(partial.status, 200, JSON.stringify(partial.json));
    assert.equal(partial.json.data.taskState, 'working');
    const view = (await get(`/genesis/messages/${m.id}`)).json;
    assert.deepEqual([view.response.status, view.result.status, view.result.data.state], ['PARTIAL', 'PARTIAL', 'working']);
    assert.equal((await respond('SUCCESS', { summary: 'all done' })).status, 200);
    const done = await eventually(async () => {
      const v = (await get(`/genesis/messages/${m.id}`)).json;
      return v.result?.status === 'SUCCESS' ? v : undefined;
    }, 15_000, 'the task completed by the later RESPONSE');
    assert.equal(done.result.result.state, 'completed');
    assert.deepEqual(done.result.data, { summary: 'all done' });
    assert.equal(receivedOf(m.id).length, 1, 'sent once');
  });

  test('an encrypted COMMAND reaches it encrypted with the pair key of its own secret; its encrypted RESPONSE is read', async () => {
    const { action: _a, payload: _p, ...clear } = command('', { to: to() });
    const m = await signed({ ...clear, encryption: encrypt(pairKey(secret, sender, to()), { action: 'secret-plan', payload: { parameters: { q: 'classified' } } }) });
    const r = await post(m);
    assert.equal(r.status, 200, JSON.stringify(r.json));
    const inner = decrypt(pairKey(secret, sender, to()), r.json.encryption);
    assert.equal(inner.result.state, 'completed');
    assert.deepEqual(inner.data, { did: 'secret-plan', parameters: { q: 'classified' } });
    const [got] = receivedOf(m.id);
    assert.equal(got!.encrypted, true, 'not in the clear on the way to the agent');
    assert.equal(got!.verified, true);
    assert.equal(got!.envelope.action, 'secret-plan');
  });

  test('a QUERY to it is answered by the agent itself', async () => {
    const cmd = await signed(command('to-ask-about', { to: to() }));
    await post(cmd);
    const q = async (resourceId: string) => post(await signed({ ...command(''), to: to(), type: 'QUERY', action: 'get_status', payload: { resourceId } }));
    const known = await q(cmd.id);
    assert.equal(known.json.status, 'SUCCESS', JSON.stringify(known.json));
    assert.deepEqual(known.json.data, { resourceId: cmd.id, state: 'done' });
    const unknown = await q('nothing-here');
    assert.equal(unknown.json.status, 'FAILURE');
    assert.deepEqual(unknown.json.error, { code: 'NOT_FOUND', message: 'no resource nothing-here' });
    assert.equal(envelopeAgent.received.filter((x) => x.envelope.type === 'QUERY' && x.verified).length, 2);
  });

  test('an A2A client\'s message to it is a COMMAND from the gateway', async () => {
    const client = await clientFactory(gw.keys.client).createFromUrl(`${gw.url}/agents/${envelopeAgentId}/.well-known/agent-card.json`, '');
    const task = await sendText(client, JSON.stringify({ action: 'translate', parameters: { to: 'fr' } }));
    assert.equal(task.status.state, 'TASK_STATE_COMPLETED', JSON.stringify(task));
    assert.deepEqual(task.artifacts[0].parts[0].data, { did: 'translate', parameters: { to: 'fr' } });
    const got = envelopeAgent.received.find((x) => x.envelope.action === 'translate')!;
    assert.deepEqual([got.envelope.from, got.envelope.to, got.verified], ['switchboard', to(), true]);
  });

  test("an A2A client's message it acknowledges completes with the RESPONSE it POSTs later, to the gateway", async () => {
    const client = await clientFactory(gw.keys.client).createFromUrl(`${gw.url}/agents/${envelopeAgentId}/.well-known/agent-card.json`, '');
    const task = await sendText(client, JSON.stringify({ action: 'later', parameters: { n: 1 } }), true);
    const sent = await eventually(() => envelopeAgent.received.find((x) => x.envelope.action === 'later' && x.envelope.from === 'switchboard'), 10_000, 'the COMMAND at the agent');
    const e = sent.envelope;
    const read = async (): Promise<any> => Task.toJSON(await client.getTask({ tenant: '', id: task.id }));
    assert.equal((await read()).status.state, 'TASK_STATE_WORKING', 'working until the RESPONSE comes');
    // The seed's agent answers whoever sent the request: `to` is the gateway.
    const r: A2AMessage = {
      id: randomUUID(), type: 'RESPONSE', version: '1.0.0', timestamp: Date.now(), from: to(), to: e.from, correlationId: e.correlationId, requestId: e.id,
      status: 'SUCCESS', data: { translated: 'un' }, signature: '', priority: 'normal', ttl: 0, requiresAck: false, requiresSignature: true,
    };
    const recorded = await post({ ...r, signature: await signMessage(r, envelopeAgent.secret!) }, await agentKey(gw, envelopeAgentId));
    assert.equal(recorded.status, 200, JSON.stringify(recorded.json));
    const done = await eventually(async () => {
      const t = await read();
      return t.status.state === 'TASK_STATE_COMPLETED' ? t : undefined;
    }, 15_000, 'the task completed by the later RESPONSE');
    assert.deepEqual(done.artifacts[0].parts[0].data, { translated: 'un' });
    // Only the agent the request went to may answer it.
    const other = { ...r, id: randomUUID(), from: sender };
    assert.equal((await post(await signed(other as never))).status, 403);
  });

  test('a recorded RESPONSE wakes the turn waiting for it, through PostgreSQL, in any process', async () => {
    const heard: string[] = [];
    // Another process's hub: it hears the NOTIFY that the gateway's store sends, as a worker elsewhere would.
    const listener = new EventHub({ connection: { connectionString: DATABASE_URL } });
    await listener.start();
    try {
      const id = randomUUID();
      const stop = listener.onAgentPush(responseFollowId('default', id), (n) => heard.push(n.taskId));
      const store = new GenesisStore(gw.db.pool);
      await store.rememberSent({ tenant: 'default', id, type: 'COMMAND', toAgent: envelopeAgentId, encrypted: false, envelope: { id }, taskId: randomUUID() });
      await store.setResponse('default', id, { status: 'SUCCESS' });
      await eventually(() => heard.length === 1 || undefined, 10_000, 'the wake-up heard');
      assert.deepEqual(heard, [id]);
      await store.setResponse('default', randomUUID(), { status: 'SUCCESS' }); // no such request: nothing recorded, nobody woken
      await store.setResponse('default', id, { status: 'FAILURE' });
      await eventually(() => heard.length === 2 || undefined, 10_000, 'the second wake-up');
      stop();
    } finally {
      await listener.close();
    }
  });
});

describe('priority', () => {
  test('under a saturated one-slot worker, high-priority COMMANDs are dispatched before the low ones queued earlier', async () => {
    const target = await agents.add(startEchoAgent());
    const targetId = (await register(gw, target.url)).id;
    await gw.stopWorker();
    let saturated: Worker | undefined;
    let run: Promise<void> | undefined;
    try {
      const send = (action: string, priority: string) => signed(command(action, { to: targetId, priority, requiresAck: true })).then(post);
      // Queue lows first, then highs, while no worker polls: all wait in the task queue's backlog.
      const lows = ['low-1', 'low-2', 'low-3', 'low-4'].map((a) => send(a, 'low'));
      await waitForTasks(4);
      const highs = ['high-1', 'high-2', 'high-3', 'high-4'].map((a) => send(a, 'high'));
      await waitForTasks(8);
      saturated = await createWorker({
        connection: gw.env.nativeConnection,
        namespace: gw.env.namespace ?? 'default',
        taskQueue: gw.taskQueue,
        pool: gw.db.pool,
        fetch: gw.outbound.fetch,
        workflowBundle: await workflowBundle(),
        activities: createActivities({ pool: gw.db.pool, fetch: gw.outbound.fetch, hub: gw.hub, unfundedAccounts: 'unlimited' }),
        tuning: { maxConcurrentWorkflowTaskExecutions: 2, maxConcurrentActivityTaskExecutions: 1, maxConcurrentLocalActivityExecutions: 1 },
      });
      run = saturated.run();
      for (const r of await Promise.all([...lows, ...highs])) assert.equal(r.status, 202);
      const order = await eventually(() => (actionsReceived(target).length === 8 ? actionsReceived(target) : undefined), 60_000, 'all eight at the agent');
      // Queued first, the lows would arrive first without priority. A task is several workflow and activity
      // tasks, each dispatched by priority but run as slots free up, so the order is by and large, not strict.
      const meanRank = (band: string) => order.flatMap((a, i) => (a.startsWith(band) ? [i] : [])).reduce((x, y) => x + y, 0) / 4;
      assert.ok(order[0].startsWith('high') && meanRank('high') < meanRank('low'), `dispatch order: ${order.join(', ')}`);
      const { rows } = await gw.db.pool.query<{ task_id: string }>("SELECT task_id FROM genesis_messages WHERE to_agent = $1 AND envelope->>'action' = 'high-1'", [targetId]);
      const described = await gw.env.client.workflow.getHandle(workflowIdOf('default', rows[0].task_id)).describe();
      assert.equal(described.priority?.priorityKey, 2, 'the priority key is on the workflow (Temporal UI shows it)');
    } finally {
      saturated?.shutdown();
      await run;
      await gw.startWorker();
    }

    /** Waits until `n` COMMAND tasks to the target have their workflow in Temporal. */
    async function waitForTasks(n: number) {
      await eventually(async () => {
        const { rows } = await gw.db.pool.query<{ task_id: string }>("SELECT task_id FROM genesis_messages WHERE to_agent = $1 AND task_id IS NOT NULL", [targetId]);
        if (rows.length < n) return undefined;
        const described = await Promise.all(rows.map((r) => gw.env.client.workflow.getHandle(workflowIdOf('default', r.task_id)).describe().then(() => true, () => false)));
        return described.every(Boolean) || undefined;
      }, 30_000, `${n} queued task workflows`);
    }
  });
});

// ---- publish-subscribe ----

interface Subscriber {
  url: string;
  /** Every POST received: the event's id, the delivery id, whether it was acknowledged (2xx), and whether its signature verified. */
  posts: { eventId: string; deliveryId: string; acked: boolean; verified: boolean; body: string }[];
  down: boolean;
  close(): Promise<void>;
}

/** A subscriber endpoint; while `down` it answers 503 (a delivery reaches it but is not acknowledged). */
async function startSubscriber(): Promise<Subscriber> {
  const sub: Subscriber = { url: '', posts: [], down: false, close: async () => {} };
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', async () => {
      const acked = !sub.down;
      // Signed like a push delivery: the gateway's JWT over this exact body, checked against its JWKS.
      const jwks = (await (await fetch(`${gw.url}/.well-known/jwks.json`)).json()) as Jwks;
      const verified = await verifyDelivery(req.headers, { body, jwks }).then(() => true, () => false);
      sub.posts.push({ eventId: JSON.parse(body).id, deliveryId: String(req.headers['x-switchboard-delivery-id']), acked, verified, body });
      res.writeHead(acked ? 200 : 503).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  sub.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/events`;
  sub.close = () => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r())));
  return sub;
}

describe('publish-subscribe', () => {
  const subs: Subscriber[] = [];
  let topic: string;
  before(async () => {
    topic = `orders-${randomUUID()}`;
    for (let i = 0; i < 3; i++) {
      const s = await startSubscriber();
      subs.push(s);
      const agent = (await register(gw, (await agents.add(startEchoAgent())).url)).id;
      const r = await post({ agentId: agent, eventType: topic, url: s.url }, gw.keys.operator, '/genesis/subscriptions');
      assert.equal(r.status, 201, JSON.stringify(r.json));
    }
  });
  after(async () => {
    for (const s of subs) await s.close();
  });

  const event = (guarantee: string, extra: Record<string, unknown> = {}) =>
    signed({
      ...command(''),
      action: undefined,
      type: 'EVENT',
      to: '*',
      eventType: topic,
      eventName: 'order.created',
      payload: { data: { orderId: randomUUID() }, metadata: { schemaVersion: '1.0', contentType: 'application/json' } },
      deliveryGuarantee: guarantee,
      ...extra,
    });

  const fanOut = (m: { id: string }) => gw.env.client.workflow.getHandle(`genesis-event:default:${m.id}`);
  /** Resolves once the third subscriber, down, has refused a delivery of `m`. */
  const refused = (m: { id: string }) => eventually(() => subs[2].posts.some((p) => p.eventId === m.id && !p.acked), 30_000, 'a delivery refused by the subscriber that is down');

  /** Publishes with the third subscriber down until `upWhen` resolves, and waits for the fan-out to end. */
  async function publish(guarantee: string, upWhen: (m: { id: string }) => Promise<unknown>, extra: Record<string, unknown> = {}) {
    const m = await event(guarantee, extra);
    subs[2].down = true;
    const r = await post(m);
    assert.equal(r.status, 202, JSON.stringify(r.json));
    assert.equal(r.json.data.subscribers, 3);
    await upWhen(m);
    subs[2].down = false;
    const outcome = await fanOut(m).result();
    const counts = subs.map((s) => s.posts.filter((p) => p.eventId === m.id));
    assert.ok(counts.flat().every((p) => p.verified), 'every delivery carries a valid signature');
    return { m, outcome, counts, view: (await get(`/genesis/messages/${m.id}`)).json };
  }

  test('at-most-once: one try each; the subscriber that was down never gets it', async () => {
    const { counts, view } = await publish('at-most-once', refused);
    assert.deepEqual(counts.map((c) => c.filter((p) => p.acked).length), [1, 1, 0]);
    assert.deepEqual(counts.map((c) => c.length), [1, 1, 1], 'one attempt each, no retry');
    assert.deepEqual(view.deliveries.map((d: any) => d.status).sort(), ['delivered', 'delivered', 'failed']);
  });

  test('at-least-once: retried until acknowledged; each attempt a new delivery id', async () => {
    const { counts, view } = await publish('at-least-once', refused);
    assert.deepEqual(counts.map((c) => c.filter((p) => p.acked).length), [1, 1, 1]);
    assert.ok(counts[2].length > 1, 'the down subscriber was retried');
    assert.equal(new Set(counts[2].map((p) => p.deliveryId)).size, counts[2].length);
    assert.deepEqual(view.deliveries.map((d: any) => d.status), ['delivered', 'delivered', 'delivered']);
  });

  test('exactly-once: retried until acknowledged, every attempt with the same delivery id to dedupe on', async () => {
    const { counts, view } = await publish('exactly-once', refused);
    assert.ok(counts[2].length > 1, 'the down subscriber was retried');
    assert.deepEqual(counts.map((c) => new Set(c.map((p) => p.deliveryId)).size), [1, 1, 1], 'deduped by delivery id: exactly one each');
    assert.deepEqual(counts.map((c) => c.filter((p) => p.acked).length), [1, 1, 1]);
    assert.deepEqual(view.deliveries.map((d: any) => d.status), ['delivered', 'delivered', 'delivered']);
  });

  test('ttl: a delivery still queued when the envelope expires is dropped and recorded as expired', async () => {
    // Down until the fan-out has ended: its ttl passed with the subscriber never acknowledging.
    const ended = (m: { id: string }) => eventually(async () => (await fanOut(m).describe()).status.name !== 'RUNNING', 30_000, 'the fan-out to end');
    const { counts, outcome, view } = await publish('at-least-once', ended, { ttl: 1500 });
    assert.deepEqual(counts.map((c) => c.filter((p) => p.acked).length), [1, 1, 0]);
    assert.deepEqual(Object.values(outcome).sort(), ['delivered', 'delivered', 'expired']);
    assert.deepEqual(view.deliveries.map((d: any) => d.status).sort(), ['delivered', 'delivered', 'expired']);
    // Nothing is sent after it expired: its workflow has ended, so Temporal starts no more attempts; an attempt still
    // running would send now, so wait for every running one to end.
    const after = subs[2].posts.length;
    await eventually(() => deliveriesRunning === 0, 10_000, 'the running delivery attempts to end');
    assert.equal(subs[2].posts.length, after);
  });

  test("subscribers get the envelope's bytes as sent, so the seed's verifySignature holds; numeric enum members are read by name", async () => {
    // `from` as {name, id} (the seed's AgentIdentity, keys in the sender's order), type and priority as numbers
    // (TypeScript numeric enums: EVENT is 2; priority 2 is high), and spacing of the sender's own.
    const m = await signed({ ...(await event('at-least-once')), from: { name: 'Publisher', id: sender }, type: 2, priority: 2 });
    const text = JSON.stringify(m, null, 1);
    const res = await fetch(`${gw.url}/genesis/messages`, { method: 'POST', headers: { authorization: `Bearer ${gw.keys.client}`, 'content-type': 'application/json' }, body: text });
    assert.equal(res.status, 202, await res.text());
    await fanOut(m).result();
    const received = subs.map((s) => s.posts.find((p) => p.eventId === m.id)!.body);
    assert.deepEqual(received, [text, text, text], 'byte for byte');
    assert.equal(await verifySignature(JSON.parse(received[0]), secret), true, "the seed's own check passes at the subscriber");
    assert.match((await (await fanOut(m).describe()).staticSummary()) ?? '', /priority high/);
  });

  test('a replayed EVENT fans out once', async () => {
    const m = await event('exactly-once');
    const first = await post(m);
    const again = await post(m);
    assert.deepEqual(again, first);
    await gw.env.client.workflow.getHandle(`genesis-event:default:${m.id}`).result();
    assert.deepEqual(subs.map((s) => s.posts.filter((p) => p.eventId === m.id).length), [1, 1, 1]);
  });
});
