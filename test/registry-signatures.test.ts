// JWS agent-card signatures: verified on registration and on refresh, with keys fetched through the guarded
// client from the card's origin or a trusted origin only. Cards are signed as an agent operator would, with
// @a2a-js/sdk's generateAgentCardSignature (and, for a 0.3 card, plain RFC 8785 JCS + node:crypto).
// Run: TEMPORAL_CLI=$PWD/.tools/bin/temporal npx tsx --test test/registry-signatures.test.ts
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { sign } from 'node:crypto';
import { jcs } from '../src/core/agents/signatures';
import { RPC_PATH } from './agents';
import { newSigningKey, signCard, startMutableAgent, type MutableAgent, type SigningKey } from './agents/mutable';
import { call, startRegistryGateway, type RegistryGateway } from './helpers/registry-gateway';

let gw: RegistryGateway;
/** A second host: somebody else's key server, on another origin. */
let keyHost: MutableAgent;
const agents: MutableAgent[] = [];
const key: SigningKey = newSigningKey('card-key-1');
const otherKey: SigningKey = newSigningKey('attacker-key');

before(async () => {
  // The registration path and POST /agents/:id/refresh run the same code as the scheduled activity, so these
  // tests need no Temporal.
  [gw, keyHost] = await Promise.all([startRegistryGateway({ temporal: false, policy: { requestTimeoutMs: 2_000 } }), startMutableAgent()]);
  agents.push(keyHost);
});
after(async () => {
  await Promise.all(agents.map((a) => a.close()));
  await gw?.close();
});

async function newAgent() {
  const agent = await startMutableAgent({ name: 'Signed agent' });
  agents.push(agent);
  return agent;
}

/** Registers the agent at `url`; registered already (its card changed since), the earlier registration is replaced: a URL is registered once per tenant. */
async function register(url: string, on = gw) {
  let res = await call('POST', `${on.url}/agents`, { url });
  if (res.status === 409 && res.body?.conflict === 'url') {
    assert.equal((await call('DELETE', `${on.url}/agents/${res.body.agentId}`)).status, 204);
    res = await call('POST', `${on.url}/agents`, { url });
  }
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body;
}

describe('card signatures at registration', () => {
  it('an unsigned card is "unsigned" (and no key set is asked for)', async () => {
    const agent = await newAgent();
    const a = await register(agent.url);
    assert.equal(a.signature.status, 'unsigned');
    assert.equal(agent.jwksRequests.length, 0);
  });

  it('signed, key at the origin\'s /.well-known/jwks.json: "verified" with the key id and where the key came from', async () => {
    const agent = await newAgent();
    agent.state.jwks = { keys: [key.jwk] };
    agent.state.card = await signCard(agent.state.card, key);
    const a = await register(agent.url);
    assert.equal(a.signature.status, 'verified', a.signature.reason);
    assert.equal(a.signature.kid, 'card-key-1');
    assert.equal(a.signature.alg, 'ES256');
    assert.equal(a.signature.keyUrl, `${agent.url}/.well-known/jwks.json`);
    assert.match(a.signature.reason, /a2a 1\.0/, 'the SDK signs the 1.0-normalised JCS form');
    assert.ok(!Number.isNaN(Date.parse(a.signature.checkedAt)));
    assert.equal(agent.jwksRequests.length, 1);
  });

  it('signed with a jku on the card\'s own origin: verified', async () => {
    const agent = await newAgent();
    agent.state.jwks = { keys: [key.jwk] };
    agent.state.card = await signCard(agent.state.card, key, { jku: `${agent.url}/.well-known/jwks.json` });
    const a = await register(agent.url);
    assert.equal(a.signature.status, 'verified', a.signature.reason);
  });

  it('a tampered card (changed after signing) is "invalid", saying so and naming the key', async () => {
    const agent = await newAgent();
    agent.state.jwks = { keys: [key.jwk] };
    const signed = await signCard(agent.state.card, key);
    agent.state.card = { ...signed, description: 'Now also wires money' };
    const a = await register(agent.url);
    assert.equal(a.signature.status, 'invalid');
    assert.match(a.signature.reason, /does not match the card/);
    assert.equal(a.signature.kid, 'card-key-1');
    assert.equal(a.status, 'healthy', 'the agent is registered; what it is signed with is shown, not enforced');
  });

  it('a jku on an untrusted origin is refused without a single request to it', async () => {
    const agent = await newAgent();
    // The attacker's key server really holds the key the card was signed with.
    keyHost.state.jwks = { keys: [otherKey.jwk] };
    agent.state.card = await signCard(agent.state.card, otherKey, { jku: `${keyHost.url}/.well-known/jwks.json` });
    const before = keyHost.jwksRequests.length;
    const a = await register(agent.url);
    assert.equal(a.signature.status, 'invalid');
    assert.match(a.signature.reason, /jku .* is not on the card's origin .* or a trusted origin; its keys were not fetched/);
    assert.equal(keyHost.jwksRequests.length, before, 'the untrusted key server was never contacted');
  });

  it('the same jku is used when its origin is on the trusted list', async () => {
    const trusting = await startRegistryGateway({ temporal: false, policy: { trustedJkuOrigins: [keyHost.url] } });
    try {
      const agent = await newAgent();
      keyHost.state.jwks = { keys: [key.jwk] };
      agent.state.card = await signCard(agent.state.card, key, { jku: `${keyHost.url}/.well-known/jwks.json` });
      const a = await register(agent.url, trusting);
      assert.equal(a.signature.status, 'verified', a.signature.reason);
      assert.equal(a.signature.keyUrl, `${keyHost.url}/.well-known/jwks.json`);
    } finally {
      await trusting.close();
    }
  });

  it('a key embedded in the header (jwk) that the origin does not publish is not trusted', async () => {
    const agent = await newAgent();
    agent.state.jwks = { keys: [key.jwk] };
    // Signed by another key under the published kid, carrying itself as jwk: self-certified, so worthless.
    const impostor = { ...otherKey, kid: key.kid };
    agent.state.card = await signCard(agent.state.card, impostor, { jwk: otherKey.jwk });
    const a = await register(agent.url);
    assert.equal(a.signature.status, 'invalid');
    assert.match(a.signature.reason, /embedded jwk is not the key card-key-1 published at/);
  });

  it('a missing key set or an unknown kid is invalid with the reason', async () => {
    const agent = await newAgent();
    agent.state.card = await signCard(agent.state.card, key);
    const noSet = await register(agent.url);
    assert.equal(noSet.signature.status, 'invalid');
    assert.match(noSet.signature.reason, /jwks\.json answered HTTP 404/);

    agent.state.jwks = { keys: [otherKey.jwk] };
    const unknown = await register(agent.url);
    assert.match(unknown.signature.reason, /key card-key-1 is not in/);
  });

  it('a 0.3 card signed over its RFC 8785 form verifies, and moving its url breaks the signature', async () => {
    const agent = await newAgent();
    agent.state.jwks = { keys: [key.jwk] };
    const card03: Record<string, unknown> = {
      protocolVersion: '0.3.0',
      name: 'Signed 0.3',
      description: 'A 0.3 card',
      version: '1.0.0',
      url: `${agent.url}${RPC_PATH}`,
      capabilities: {},
      defaultInputModes: ['text/plain'],
      defaultOutputModes: ['text/plain'],
      skills: [],
    };
    const protectedHeader = Buffer.from(JSON.stringify({ alg: 'ES256', typ: 'JOSE', kid: key.kid })).toString('base64url');
    const input = `${protectedHeader}.${Buffer.from(jcs(card03)).toString('base64url')}`;
    const signature = sign('sha256', Buffer.from(input), { key: key.privateKey, dsaEncoding: 'ieee-p1363' }).toString('base64url');
    agent.state.card = { ...card03, signatures: [{ protected: protectedHeader, signature }] };
    const a = await register(agent.url);
    assert.equal(a.signature.status, 'verified', a.signature.reason);
    assert.match(a.signature.reason, /RFC 8785/);

    // The 1.0 normalisation drops a 0.3 card's url; a signature must still cover the endpoint.
    agent.state.card = { ...agent.state.card, url: 'http://127.0.0.1:1/elsewhere' };
    const moved = await register(agent.url);
    assert.equal(moved.signature.status, 'invalid');
  });
});

describe('card signatures on refresh', () => {
  it('a verified card replaced by a tampered one is not adopted: the verified card stays, the agent is degraded', async () => {
    const agent = await newAgent();
    agent.state.jwks = { keys: [key.jwk] };
    agent.state.card = await signCard(agent.state.card, key);
    const a = await register(agent.url);
    assert.equal(a.signature.status, 'verified');

    agent.state.card = { ...agent.state.card, description: 'Send all payments to me' };
    const r = (await call('POST', `${gw.url}/agents/${a.id}/refresh`)).body;
    assert.equal(r.status, 'degraded');
    assert.match(r.statusReason, /card not adopted: the new card is invalid .*does not match.*; the last verified card is kept/);
    assert.deepEqual(r.card, a.card);
    assert.equal(r.signature.status, 'verified');
    assert.equal(r.liveness.lastProbe.card.outcome, 'rejected');

    // The operator re-signs the changed card: the next refresh adopts it.
    agent.state.card = await signCard(agent.state.card, key);
    const fixed = (await call('POST', `${gw.url}/agents/${a.id}/refresh`)).body;
    assert.equal(fixed.status, 'healthy');
    assert.equal(fixed.card.description, 'Send all payments to me');
    assert.equal(fixed.signature.status, 'verified');
  });

  it('an unsigned card that gets signed is verified on refresh; a revoked key makes it invalid (and the agent degraded)', async () => {
    const agent = await newAgent();
    const a = await register(agent.url);
    assert.equal(a.signature.status, 'unsigned');
    agent.state.jwks = { keys: [key.jwk] };
    agent.state.card = await signCard(agent.state.card, key);
    const signed = (await call('POST', `${gw.url}/agents/${a.id}/refresh`)).body;
    assert.equal(signed.signature.status, 'verified');
    assert.equal(signed.liveness.lastProbe.card.outcome, 'changed');

    // The operator revokes the key. The card itself is unchanged (the refresh gets a 304), yet it is re-checked.
    agent.state.jwks = { keys: [] };
    const revoked = (await call('POST', `${gw.url}/agents/${a.id}/refresh`)).body;
    assert.equal(revoked.liveness.lastProbe.card.outcome, 'not-modified');
    assert.equal(revoked.signature.status, 'invalid');
    assert.match(revoked.signature.reason, /key card-key-1 is not in/);
    assert.equal(revoked.status, 'degraded');
    assert.match(revoked.statusReason, /the card's signature no longer verifies: .*key card-key-1 is not in/);
  });
});
