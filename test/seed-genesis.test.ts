/**
 * Genesis Nexus (seed 002) as its own nodes use it, behind Switchboard (issue 39, §2 item 2). Each node is written
 * here from the seed's text alone: it receives envelopes POSTed to it, checks them with the seed's verifySignature
 * and its own secret, answers with a RESPONSE (`status`, `data`, `confidence`, `sources`) signed with the seed's
 * signMessage, and sends its own COMMANDs and EVENTs to POST /genesis/messages, reading the RESPONSE as the seed's
 * sender does (at the top). The only things changed on their side: the URL they post to, the key, their
 * registration by URL, and the secret Switchboard issued each.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Gateway, agentKey, eventually, register, startGateway } from './helpers/harness';

import { type A2AMessage, signMessage, verifySignature } from './fixtures/genesis-seed';

let gw: Gateway;
const nodes: GenesisNode[] = [];

before(async () => {
  gw = await startGateway();
});
after(async () => {
  await gw?.close();
  await Promise.all(nodes.map((n) => n.close()));
});

interface GenesisNode {
  url: string;
  /** Its Switchboard id, the secret issued for it, its agent key. */
  id: string;
  secret: string;
  key: string;
  /** Every envelope POSTed to it, and whether the seed's verifySignature passed with its own secret. */
  received: { envelope: A2AMessage; verified: boolean }[];
  close(): Promise<void>;
}

/**
 * A Genesis node (the seed's receiving side): a COMMAND `research` is answered PARTIAL at once (what it has so
 * far; the rest follows as a RESPONSE it POSTs later), anything else SUCCESS, both with `data`, `confidence` and
 * `sources`. EVENTs are acknowledged. Registered by URL and name, then given its secret and its agent key.
 */
async function startNode(name: string): Promise<GenesisNode> {
  const node: GenesisNode = { url: '', id: '', secret: '', key: '', received: [], close: async () => {} };
  const server = http.createServer((req, res) => {
    let text = '';
    req.on('data', (d) => (text += d));
    req.on('end', async () => {
      const send = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      let m: A2AMessage;
      try {
        m = JSON.parse(text);
      } catch {
        return send(400, { error: `not JSON: ${req.method} ${req.url} ${JSON.stringify(text.slice(0, 80))}` });
      }
      const verified = await verifySignature(m, node.secret);
      node.received.push({ envelope: m, verified });
      if (m.type === 'EVENT') return send(200, { received: true });
      const answer = async (status: string, fields: Record<string, unknown>) => {
        const r: A2AMessage = {
          id: randomUUID(), type: 'RESPONSE', version: '1.0.0', timestamp: Date.now(), from: m.to, to: m.from,
          correlationId: m.correlationId ?? m.id, requestId: m.id, status, ...fields, processingTime: 4,
          signature: '', priority: m.priority, ttl: 0, requiresAck: false, requiresSignature: true,
        };
        r.signature = await signMessage(r, node.secret);
        send(200, r);
      };
      if (m.action === 'research') return answer('PARTIAL', { data: { found: 2, of: 5 }, confidence: 0.4, sources: ['https://example.org/a'] });
      return answer('SUCCESS', { data: { did: m.action, parameters: m.payload?.parameters ?? null }, confidence: 0.82, sources: ['https://example.org/a', 'https://example.org/b'] });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  node.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/genesis`;
  node.close = () => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r())));
  nodes.push(node);
  node.id = (await register(gw, node.url, { name, protocol: 'genesis' })).id;
  node.secret = (await call(undefined, gw.keys.operator, `/agents/${node.id}/genesis-secret`)).json.secret;
  node.key = await agentKey(gw, node.id);
  return node;
}

async function call(body: unknown, key: string, path = '/genesis/messages', timeoutMs = 30_000) {
  const headers = { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) };
  const res = await fetch(`${gw.url}${path}`, { method: 'POST', headers, body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(timeoutMs) });
  return { status: res.status, json: (await res.json().catch(() => undefined)) as any };
}
async function get(path: string, key: string) {
  const res = await fetch(`${gw.url}${path}`, { headers: { authorization: `Bearer ${key}` } });
  return { status: res.status, json: (await res.json().catch(() => undefined)) as any };
}

/** The seed's CommandMessage from `from`, signed with its secret (`from`/`to` as given: ids or names). */
async function commandFrom(from: GenesisNode, to: unknown, action: string, extra: Record<string, unknown> = {}): Promise<A2AMessage> {
  const m: A2AMessage = {
    id: randomUUID(), type: 'COMMAND', version: '1.0.0', timestamp: Date.now(), from: from.id, to, action,
    payload: { parameters: { topic: 'tides' } }, signature: '', priority: 'normal', ttl: 120_000, requiresAck: false, requiresSignature: true,
    ...extra,
  };
  return { ...m, signature: await signMessage(m, from.secret) };
}

describe('Genesis nodes behind Switchboard', () => {
  let planner: GenesisNode;
  let researcher: GenesisNode;
  before(async () => {
    planner = await startNode('planner');
    researcher = await startNode('researcher');
  });

  test("a synchronous COMMAND answered SUCCESS: the receiver's data, confidence and sources are at the top of the RESPONSE, which verifies with the sender's secret", async () => {
    const m = await commandFrom(planner, researcher.id, 'summarize');
    const r = await call(m, planner.key);
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.deepEqual([r.json.type, r.json.status, r.json.requestId], ['RESPONSE', 'SUCCESS', m.id]);
    assert.deepEqual(r.json.data, { did: 'summarize', parameters: { topic: 'tides' } }, 'the seed sender reads data at the top');
    assert.equal(r.json.confidence, 0.82);
    assert.deepEqual(r.json.sources, ['https://example.org/a', 'https://example.org/b']);
    assert.equal(typeof r.json.processingTime, 'number');
    assert.equal(await verifySignature(r.json, planner.secret), true);
    assert.equal(researcher.received.find((x) => x.envelope.id === m.id)?.verified, true, "the receiver verifies with its own secret");
  });

  test('a synchronous COMMAND answered PARTIAL gets the partial RESPONSE at once; the final one the receiver POSTs later is the result', async () => {
    const m = await commandFrom(planner, researcher.id, 'research');
    const started = Date.now();
    const r = await call(m, planner.key, '/genesis/messages', 20_000);
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.ok(Date.now() - started < 15_000, `answered in ${Date.now() - started} ms`);
    assert.equal(r.json.status, 'PARTIAL');
    assert.deepEqual(r.json.data, { found: 2, of: 5 });
    assert.deepEqual([r.json.confidence, r.json.sources], [0.4, ['https://example.org/a']]);
    assert.equal(await verifySignature(r.json, planner.secret), true);

    // The receiver finishes and POSTs its final RESPONSE, as the seed's receiver would, with its own key.
    const final: A2AMessage = {
      id: randomUUID(), type: 'RESPONSE', version: '1.0.0', timestamp: Date.now(), from: researcher.id, to: planner.id, correlationId: m.id, requestId: m.id,
      status: 'SUCCESS', data: { found: 5, of: 5 }, confidence: 0.9, sources: ['https://example.org/a', 'https://example.org/c'],
      signature: '', priority: 'normal', ttl: 0, requiresAck: false, requiresSignature: true,
    };
    const posted = await call({ ...final, signature: await signMessage(final, researcher.secret) }, researcher.key);
    assert.equal(posted.status, 200, JSON.stringify(posted.json));
    const done = await eventually(async () => {
      const v = (await get(`/genesis/messages/${m.id}`, planner.key)).json;
      return v?.result?.status === 'SUCCESS' ? v.result : undefined;
    }, 20_000, 'the final RESPONSE as the result');
    assert.deepEqual([done.data, done.confidence, done.sources], [{ found: 5, of: 5 }, 0.9, ['https://example.org/a', 'https://example.org/c']]);
    assert.equal(await verifySignature(done, planner.secret), true);
  });

  test('senders address agents by the names they registered with', async () => {
    const m = await commandFrom(planner, 'researcher', 'summarize', { from: 'planner' });
    const r = await call(m, planner.key);
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.status, 'SUCCESS');
    assert.deepEqual([r.json.from, r.json.to], ['researcher', 'planner'], 'answered under the names it was sent with');
    assert.equal(await verifySignature(r.json, planner.secret), true);
    const got = researcher.received.find((x) => x.envelope.id === m.id);
    assert.deepEqual([got?.envelope.from, got?.envelope.to, got?.verified], ['planner', 'researcher', true]);
    // An identity object naming the agent by name works too (a name is one agent's in its tenant: test/agent-names.test.ts).
    const byObject = await call(await commandFrom(planner, { name: 'researcher' }, 'summarize'), planner.key);
    assert.equal(byObject.json.status, 'SUCCESS', JSON.stringify(byObject.json));
    const unknown = await call(await commandFrom(planner, 'nobody-by-that-name', 'summarize'), planner.key);
    assert.equal(unknown.status, 404);
  });

  test('every subscriber verifies an EVENT with its own secret', async () => {
    const listener = await startNode('listener');
    const auditor = await startNode('auditor');
    const topic = `tides-${randomUUID()}`;
    for (const n of [listener, auditor]) {
      const s = await call({ agentId: n.id, eventType: topic, url: n.url }, n.key, '/genesis/subscriptions');
      assert.equal(s.status, 201, JSON.stringify(s.json));
    }
    const e: A2AMessage = {
      id: randomUUID(), type: 'EVENT', version: '1.0.0', timestamp: Date.now(), from: { id: planner.id, name: 'planner' }, to: '*',
      eventType: topic, eventName: 'tide.turned', payload: { data: { height: 2.4 }, metadata: { schemaVersion: '1.0', contentType: 'application/json' } },
      deliveryGuarantee: 'at-least-once', signature: '', priority: 'normal', ttl: 60_000, requiresAck: false, requiresSignature: true,
    };
    const r = await call({ ...e, signature: await signMessage(e, planner.secret) }, planner.key);
    assert.equal(r.status, 202, JSON.stringify(r.json));
    for (const n of [listener, auditor]) {
      const got = await eventually(() => n.received.find((x) => x.envelope.id === e.id), 20_000, `the EVENT at ${n.id}`);
      assert.equal(got.verified, true, `${n.id} verifies with its own secret`);
      assert.deepEqual([got.envelope.from, got.envelope.to, got.envelope.timestamp, got.envelope.payload], [e.from, '*', e.timestamp, e.payload], 'the envelope as sent');
    }
  });
});
