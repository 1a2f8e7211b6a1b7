/**
 * Genesis Nexus envelopes (BENCH_ONLY=genesis):
 * 1. What checking one envelope costs, in µs per message, in this process: JSON.parse of the envelope (the
 *    baseline), + its zod validation, + the HMAC-SHA256 signature check, + the AES-256-GCM decryption of its
 *    fields, + the typed validation (the gateway does all of these per request); and deriving a new pair's key
 *    (HKDF, once per pair: cached after). BENCH_GENESIS_N envelopes each.
 * 2. Pub-sub: BENCH_GENESIS_EVENTS exactly-once EVENTs published through POST /genesis/messages to a topic with
 *    10 subscribers (local HTTP servers answering 200): deliveries/s from the first publish to the last
 *    acknowledged delivery, each a durable Temporal activity.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { Envelope, EnvelopeHeader, decryptFields, encryptFields, pairKey, signEnvelope, verifySignature } from '../src/core/genesis/envelope';
import type { Gateway } from '../test/helpers/harness';

const int = (name: string, d: number) => Number(process.env[name] ?? d);
const SUBSCRIBERS = 10;

export interface GenesisReport {
  n: number;
  /** µs per message, cumulative: each step includes the ones before it. */
  perMessageUs: { jsonParse: number; validate: number; verify: number; decrypt: number; verifyAndDecrypt: number; newPairKey: number };
  pubsub: { events: number; subscribers: number; deliveries: number; seconds: number; deliveriesPerSec: number };
}

function envelopes(n: number, secret: string, from: string, to: string): string[] {
  const key = pairKey(secret, from, to);
  return Array.from({ length: n }, () => {
    const header = { id: randomUUID(), type: 'COMMAND', version: '1.0.0', timestamp: Date.now(), from, to };
    return JSON.stringify({
      ...header,
      signature: signEnvelope(header, secret),
      encryption: encryptFields(key, { action: 'summarize', payload: { parameters: { text: 'x'.repeat(200), n: 3 } } }),
      priority: 'normal',
      ttl: 60_000,
      requiresAck: false,
      requiresSignature: true,
    });
  });
}

/** µs per message of each step over every envelope: the median of ROUNDS rounds, the steps interleaved in each
 *  (so a burst of load on the shared box, or the JIT warming up, does not land on one step only). */
const ROUNDS = 5;
function perMessage<K extends string>(raw: string[], steps: Record<K, (s: string) => unknown>): Record<K, number> {
  const times = Object.fromEntries(Object.keys(steps).map((k) => [k, [] as number[]])) as Record<K, number[]>;
  for (let round = 0; round <= ROUNDS; round++) {
    for (const [k, step] of Object.entries(steps) as [K, (s: string) => unknown][]) {
      const t0 = performance.now();
      for (const s of raw) step(s);
      if (round > 0) times[k].push(((performance.now() - t0) * 1000) / raw.length); // round 0 warms up
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  return Object.fromEntries(Object.entries(times).map(([k, xs]) => [k, median(xs as number[])])) as Record<K, number>;
}

export async function benchGenesis(gw: Gateway, agentUrl: string, deadline: number): Promise<GenesisReport> {
  const { register } = await import('../test/helpers/harness');
  const n = int('BENCH_GENESIS_N', 10_000);
  const secret = 'f'.repeat(64);
  const raw = envelopes(n, secret, 'agent-a', 'agent-b');
  const validate = (s: string) => {
    const h = EnvelopeHeader.parse(JSON.parse(s));
    return h;
  };
  const verify = (s: string) => {
    const body = JSON.parse(s);
    const h = EnvelopeHeader.parse(body);
    if (!verifySignature(body, secret)) throw new Error('signature');
    return { body, h };
  };
  const decrypt = (s: string) => {
    const { body, h } = verify(s);
    const { encryption: _e, ...clear } = body;
    return { ...clear, ...decryptFields(pairKey(secret, 'agent-a', 'agent-b'), h.encryption!) };
  };
  const perMessageUs = perMessage(raw, {
    jsonParse: (s) => JSON.parse(s),
    validate,
    verify,
    decrypt,
    verifyAndDecrypt: (s) => Envelope.parse(decrypt(s)),
    // The steps above reuse one pair's key (cached after its first envelope); a new pair derives one (HKDF).
    newPairKey: (s) => pairKey(secret, s.slice(7, 43), 'agent-b'),
  });

  // ---- pub-sub fan-out ----
  const events = int('BENCH_GENESIS_EVENTS', 50);
  const call = async (method: string, path: string, body?: unknown, key = gw.keys.operator) => {
    const res = await fetch(`${gw.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return res.json() as Promise<any>;
  };
  const sender = (await register(gw, agentUrl, { name: 'Genesis bench sender' })).id;
  const senderSecret = (await call('POST', `/agents/${sender}/genesis-secret`)).secret as string;
  const topic = `bench-${randomUUID()}`;
  let acked = 0;
  let allDone: () => void = () => {};
  const done = new Promise<void>((r) => (allDone = r));
  const servers: http.Server[] = [];
  for (let i = 0; i < SUBSCRIBERS; i++) {
    const server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200).end();
        if (++acked === events * SUBSCRIBERS) allDone();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    servers.push(server);
    const agent = (await register(gw, agentUrl, { name: `Genesis bench subscriber ${i}` })).id;
    await call('POST', '/genesis/subscriptions', { agentId: agent, eventType: topic, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/` });
  }
  const publish = async () => {
    const header = { id: randomUUID(), type: 'EVENT', version: '1.0.0', timestamp: Date.now(), from: sender, to: '*' };
    const r = await call(
      'POST',
      '/genesis/messages',
      {
        ...header,
        signature: signEnvelope(header, senderSecret),
        eventType: topic,
        eventName: 'bench',
        payload: { data: { i: 1 }, metadata: { schemaVersion: '1', contentType: 'application/json' } },
        deliveryGuarantee: 'exactly-once',
        priority: 'normal',
        ttl: 0,
        requiresAck: false,
        requiresSignature: true,
      },
      gw.keys.client,
    );
    if (r.data?.subscribers !== SUBSCRIBERS) throw new Error(`publish: ${JSON.stringify(r)}`);
  };
  const t0 = performance.now();
  // Published 8 at a time, as several publishers would.
  let next = 0;
  await Promise.all(Array.from({ length: 8 }, async () => {
    while (next < events && Date.now() < deadline) {
      next++;
      await publish();
    }
  }));
  const timeout = new Promise<void>((r) => setTimeout(r, Math.max(10_000, deadline - Date.now())).unref());
  await Promise.race([done, timeout]);
  const seconds = (performance.now() - t0) / 1000;
  for (const s of servers) s.close();
  return { n, perMessageUs, pubsub: { events: next, subscribers: SUBSCRIBERS, deliveries: acked, seconds, deliveriesPerSec: acked / seconds } };
}

export function printGenesis(r: GenesisReport): void {
  const u = r.perMessageUs;
  console.log(`\nGenesis envelopes: cost per message over ${r.n} envelopes (µs, each line includes the ones above)`);
  console.log(`  JSON.parse (baseline)                     ${u.jsonParse.toFixed(1)}`);
  console.log(`  + zod header validation                   ${u.validate.toFixed(1)}`);
  console.log(`  + HMAC-SHA256 signature check             ${u.verify.toFixed(1)}`);
  console.log(`  + pair key (cached), AES-256-GCM decryption ${u.decrypt.toFixed(1)}`);
  console.log(`  + typed (per-type zod) validation         ${u.verifyAndDecrypt.toFixed(1)}   (added over the baseline: ${(u.verifyAndDecrypt - u.jsonParse).toFixed(1)})`);
  console.log(`  a new pair's key (HKDF-SHA256), once per pair  ${u.newPairKey.toFixed(1)}`);
  const p = r.pubsub;
  console.log(`Genesis pub-sub: ${p.events} exactly-once EVENTs × ${p.subscribers} subscribers: ${p.deliveries} deliveries in ${p.seconds.toFixed(1)} s = ${p.deliveriesPerSec.toFixed(1)} deliveries/s`);
}
