/**
 * NANDA actions at POST /a2a (issue 12, seed 001): the seed's request verbatim; certificates issued, checked,
 * revoked and checked again, with the public Bitstring Status List decoding to exactly the revoked bits, and
 * concurrent revocations losing none; policies that deny a task before anything starts; an agent that answers
 * every probe but fails every task shown degraded and routed around; observer, telemetry, reputation and audit;
 * an action declared by an agent's skill; bad input. Real Temporal, PostgreSQL, @a2a-js/sdk agents and clients.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { gunzipSync } from 'node:zlib';
import { AGENT_CARD_PATH, type AgentSkill, type Message, SendMessageRequest, TaskState } from '@a2a-js/sdk';
import { DefaultRequestHandler, type ExecutionEventBus, InMemoryTaskStore, type RequestContext } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, UserBuilder } from '@a2a-js/sdk/server/express';
import { compactVerify, createLocalJWKSet } from 'jose';
import { AgentPool, RPC_PATH, type TestAgent } from './agents';
import { startAgentServer } from './agents/harness';
import { BaseExecutor, statusEvent, taskEvent, textOf, v1Card } from './agents/v1';
import { EchoExecutor } from './agents/echo';
import { type Gateway, clientFactory, eventually, register, rpc, startGateway } from './helpers/harness';
import { STATUS_LIST_SIZE } from '../src/core/nanda/status-list';

const V1 = { 'A2A-Version': '1.0' };
let gw: Gateway;
const agents = new AgentPool();

const skill = (id: string, name: string, description: string, tags: string[], examples: string[] = []): AgentSkill => ({
  id, name, description, tags, examples, inputModes: [], outputModes: [], securityRequirements: [],
});

/** Fails every task it is given, yet answers the liveness probe (GetTask of an unknown task) like any agent. */
class FailingExecutor extends BaseExecutor {
  async run(ctx: RequestContext, bus: ExecutionEventBus): Promise<void> {
    bus.publish(taskEvent(ctx, TaskState.TASK_STATE_WORKING));
    bus.publish(statusEvent(ctx.taskId, ctx.contextId, TaskState.TASK_STATE_FAILED, { text: `cannot: ${textOf(ctx.userMessage)}` }));
  }
}

/** A 1.0 (and 0.3) JSON-RPC agent with the given skills, on @a2a-js/sdk. */
function startSkilledAgent(name: string, skills: AgentSkill[], executor: BaseExecutor): Promise<TestAgent> {
  return startAgentServer((app, url) => {
    const card = { ...v1Card(url, name, skills.map((s) => s.description).join('. '), { streaming: false }), skills };
    const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), executor);
    app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: handler, legacyCompat: { enabled: true } }));
    app.use(RPC_PATH, jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication, legacyCompat: { enabled: true } }));
  });
}

/** An action request in the seed's exact shape (0.3 message/send, no messageId, no kinds), as raw JSON-RPC. */
async function act(fields: Record<string, unknown>, key = gw.keys.operator, id: string | number = 'req-001') {
  const res = await rpc(
    `${gw.url}/a2a`,
    { jsonrpc: '2.0', method: 'message/send', params: { message: { role: 'user', parts: [{ text: JSON.stringify(fields) }] } }, id },
    { authorization: `Bearer ${key}` },
  );
  const text = res.json?.result?.parts?.[0]?.text;
  let answer: any;
  try {
    answer = typeof text === 'string' ? JSON.parse(text) : undefined;
  } catch {
    answer = undefined; // an agent's own answer need not be JSON
  }
  return { ...res, answer };
}

/** The answer of an action that must succeed. */
async function ok(fields: Record<string, unknown>, key = gw.keys.operator): Promise<any> {
  const r = await act(fields, key);
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.error, undefined, `${fields.action}: ${JSON.stringify(r.json.error)}`);
  assert.equal(r.json.result.role, 'agent');
  return r.answer;
}

const userMessage = (text: string, extra: Record<string, unknown> = {}) => ({ messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...extra });

let echo: { id: string; agent: TestAgent };
let broken: { id: string; agent: TestAgent };

before(async () => {
  gw = await startGateway();
  const e = await agents.add(
    startSkilledAgent('Translator', [skill('translate', 'Translate', 'Translates short texts between languages', ['language', 'certified'], ['Translate hello into French', 'Translate thank you into German'])], new EchoExecutor()),
  );
  echo = { id: (await register(gw, e.url)).id, agent: e };
  const b = await agents.add(startSkilledAgent('Broken translator', [skill('translate-all', 'Translate anything', 'Translates texts into any language', ['language'], ['Translate hello into Spanish'])], new FailingExecutor()));
  broken = { id: (await register(gw, b.url)).id, agent: b };
});
after(async () => {
  await gw?.close();
  await agents.closeAll();
});

async function evaluated(agentId: string): Promise<any> {
  const started = await ok({ action: 'certificate.start', agent_id: agentId });
  assert.equal(started.state, 'running');
  return eventually(async () => {
    const s = await ok({ action: 'certificate.status', certification_id: started.certification_id });
    return s.state === 'running' ? undefined : s;
  }, 30_000, `evaluation of ${agentId}`);
}

/** The bits of a status list, as a verifier reads them: public URL, no key, gunzip the multibase base64url. */
async function statusBits(url: string): Promise<{ bits: Buffer; credential: any }> {
  const res = await fetch(url);
  assert.equal(res.status, 200);
  const credential = (await res.json()) as any;
  assert.deepEqual(credential.type, ['VerifiableCredential', 'BitstringStatusListCredential']);
  const encoded: string = credential.credentialSubject.encodedList;
  assert.equal(encoded[0], 'u', 'multibase base64url prefix');
  return { bits: gunzipSync(Buffer.from(encoded.slice(1), 'base64url')), credential };
}

/** Indexes of the set bits, index 0 being the most significant bit of the first byte (§3.2). */
function setBits(bits: Buffer): number[] {
  const out: number[] = [];
  for (let i = 0; i < bits.length; i++) for (let b = 0; b < 8; b++) if (bits[i]! & (0x80 >> b)) out.push(i * 8 + b);
  return out;
}

describe('the seed request', () => {
  test('the seed\'s example, byte for byte, is an action request: an unknown cert_id is -32602 naming it, with the seed\'s id', async () => {
    const seed = '{"jsonrpc":"2.0","method":"message/send","params":{"message":{"role":"user","parts":[{"text":"{\\"action\\": \\"certificate.check\\", \\"cert_id\\": \\"cert-abc-123\\"}"}]}},"id":"req-001"}';
    const res = await rpc(`${gw.url}/a2a`, seed);
    assert.equal(res.status, 200);
    assert.equal(res.json.id, 'req-001');
    assert.equal(res.json.error.code, -32602);
    assert.match(res.json.error.message, /cert_id/);
    assert.match(res.json.error.message, /cert-abc-123/);
  });

  test('unknown action -32601; missing or mistyped field -32602 naming it; plain text and non-action JSON still route as before', async () => {
    const unknown = await act({ action: 'certificate.frobnicate', cert_id: 'x' });
    assert.equal(unknown.json.error.code, -32601);
    assert.match(unknown.json.error.message, /certificate\.frobnicate/);
    const missing = await act({ action: 'certificate.revoke' });
    assert.equal(missing.json.error.code, -32602);
    assert.match(missing.json.error.message, /cert_id is required/);
    const typed = await act({ action: 'certificate.check', cert_id: 42 });
    assert.equal(typed.json.error.code, -32602);
    assert.match(typed.json.error.message, /cert_id must be a non-empty string/);
    const nul = await act({ action: 'certificate.revoke', cert_id: 'cert-1', reason: 'a\u0000b' });
    assert.equal(nul.json.error.code, -32602);
    assert.match(nul.json.error.message, /reason contains a NUL/);
    assert.match((await act({ action: 'policy.create', name: 'x'.repeat(2000), rules: { max_price_minor: 1 } })).json.error.message, /name is longer than 1024/);
    const rules = await act({ action: 'policy.create', name: 'bad', rules: { max_price_minor: -1 } });
    assert.equal(rules.json.error.code, -32602);
    assert.match(rules.json.error.message, /rules/);
    // No `action` string: not an action request, so the message goes to routing (nothing matches: -32051).
    const notAction = await rpc(`${gw.url}/a2a`, { jsonrpc: '2.0', id: 2, method: 'SendMessage', params: { message: userMessage('{"action": 7}') } }, V1);
    assert.equal(notAction.json.error.code, -32051);
    // The envelope rules of the core still hold in front of the actions.
    assert.equal((await rpc(`${gw.url}/a2a`, '{"jsonrpc":"2.0","method":"message/send",')).json.error.code, -32700);
    assert.equal((await rpc(`${gw.url}/a2a`, { jsonrpc: '2.0', id: 3, method: 'message/send', params: {} })).json.error.code, -32602);
  });

  test('roles: a client may check but not revoke, evaluate or create policies (403 naming the roles)', async () => {
    for (const fields of [
      { action: 'certificate.revoke', cert_id: 'cert-x' },
      { action: 'certificate.start', agent_id: echo.id },
      { action: 'policy.create', name: 'p', rules: { max_price_minor: 1 } },
      { action: 'audit.reconcile' },
    ]) {
      const r = await act(fields, gw.keys.client);
      assert.equal(r.status, 403, fields.action);
      assert.match(r.json.error.message, /needs the role admin or operator; this key's role is client/);
    }
    assert.equal((await act({ action: 'certificate.check', cert_id: 'cert-x' }, gw.keys.client)).json.error.code, -32602);
  });

  test('every binding\'s front door takes actions: HTTP+JSON answers one as a 1.0 bare message, refuses a role with 403; an agent\'s own endpoint takes none', async () => {
    const rest = (path: string, text: string, key = gw.keys.operator) =>
      rpc(`${gw.url}${path}`, { message: userMessage(text) }, { authorization: `Bearer ${key}`, 'A2A-Version': '1.0' });
    const policy = await rest('/rest/message:send', JSON.stringify({ action: 'policy.list' }));
    assert.equal(policy.status, 200, policy.text);
    assert.equal(policy.json.message.role, 'ROLE_AGENT');
    assert.ok(Array.isArray(JSON.parse(policy.json.message.parts[0].text).policies), policy.text);
    const refused = await rest('/rest/message:send', JSON.stringify({ action: 'audit.reconcile' }), gw.keys.client);
    assert.equal(refused.status, 403, refused.text);
    assert.match(refused.text, /needs the role admin or operator/);
    // At an agent's own endpoint the same text is a message for that agent (the echo agent answers it back).
    const own = await rest(`/agents/${echo.id}/rest/message:send`, JSON.stringify({ action: 'policy.list' }), gw.keys.client);
    assert.equal(own.status, 200, own.text);
    assert.equal(own.json.task?.status?.state, 'TASK_STATE_COMPLETED', own.text);
  });
});

describe('certificates', () => {
  test('evaluate, issue (VC 2.0, signed), check, revoke, check again; the public status list has exactly the revoked bit', async () => {
    const ev = await evaluated(echo.id);
    assert.equal(ev.state, 'passed', JSON.stringify(ev));
    assert.equal(ev.score, 1);
    assert.deepEqual(ev.results.map((r: any) => r.example), ['Translate hello into French', 'Translate thank you into German']);
    // The seed's bare lifecycle names are the same actions.
    assert.deepEqual(await ok({ action: 'status', certification_id: ev.certification_id }, gw.keys.client), ev);
    // The probes went through the forwarding path to the agent: it received each example once.
    const sent = echo.agent.calls.filter((c) => c.method === 'SendMessage' || c.method === 'message/send').map((c) => JSON.stringify(c.params));
    assert.ok(sent.some((p) => p.includes('Translate hello into French')) && sent.some((p) => p.includes('Translate thank you into German')));

    // Through a real @a2a-js/sdk client (1.0 SendMessage at the front door): the answer is a message, not a task.
    const client = await clientFactory(gw.keys.operator).createFromUrl(`${gw.url}/.well-known/agent-card.json`, '');
    const sdkAct = async (fields: Record<string, unknown>) => {
      const reply = (await client.sendMessage(SendMessageRequest.fromJSON({ message: userMessage(JSON.stringify(fields)) }))) as Message;
      assert.ok('messageId' in reply, 'a bare message');
      return JSON.parse(textOf(reply));
    };
    const issued = await sdkAct({ action: 'certificate.certificate', certification_id: ev.certification_id });
    assert.match(issued.cert_id, /^cert-/);
    const vc = issued.credential;
    assert.deepEqual(vc['@context'], ['https://www.w3.org/ns/credentials/v2']);
    assert.ok(vc.type.includes('VerifiableCredential'));
    assert.equal(vc.credentialSubject.agentId, echo.id);
    assert.equal(vc.credentialStatus.type, 'BitstringStatusListEntry');
    assert.equal(vc.credentialStatus.statusPurpose, 'revocation');
    assert.equal(vc.credentialStatus.statusListIndex, String(issued.status_list_index));
    // Signed with the gateway's published key: the JWS verifies against /.well-known/jwks.json and carries the VC.
    const jwks = await (await fetch(`${gw.url}/.well-known/jwks.json`)).json();
    const { payload, protectedHeader } = await compactVerify(issued.jwt, createLocalJWKSet(jwks as any));
    assert.equal(protectedHeader.typ, 'vc+jwt');
    assert.deepEqual(JSON.parse(new TextDecoder().decode(payload)), vc);
    // Asked again, the same credential.
    assert.equal((await sdkAct({ action: 'certificate.certificate', certification_id: ev.certification_id })).cert_id, issued.cert_id);

    const before = await ok({ action: 'certificate.check', cert_id: issued.cert_id }, gw.keys.client);
    assert.equal(before.status, 'active');
    assert.equal(before.revoked, false);
    assert.equal(before.status_list_index, issued.status_list_index);
    const listUrl = vc.credentialStatus.statusListCredential;
    const clean = await statusBits(listUrl);
    assert.ok(clean.bits.length * 8 >= 131_072 && clean.bits.length * 8 === STATUS_LIST_SIZE);
    assert.deepEqual(setBits(clean.bits), []);

    const revoked = await ok({ action: 'certificate.revoke', cert_id: issued.cert_id, reason: 'key compromised' });
    assert.equal(revoked.status, 'revoked');
    assert.equal(revoked.reason, 'key compromised');
    // Idempotent: revoking again keeps the first revocation.
    const again = await ok({ action: 'certificate.revoke', cert_id: issued.cert_id, reason: 'another reason' });
    assert.equal(again.revoked_at, revoked.revoked_at);
    assert.equal(again.reason, 'key compromised');
    const after = await ok({ action: 'certificate.check', cert_id: issued.cert_id }, gw.keys.client);
    assert.equal(after.status, 'revoked');
    assert.equal(after.revoked, true);
    assert.equal(after.status_list_index, issued.status_list_index);
    // The seed's answer shape for the seed's request (with a real cert_id).
    const seedShape = await act({ action: 'certificate.check', cert_id: issued.cert_id });
    assert.equal(seedShape.json.jsonrpc, '2.0');
    assert.equal(seedShape.json.id, 'req-001');
    assert.equal(seedShape.answer.cert_id, issued.cert_id);

    const { bits, credential } = await statusBits(listUrl);
    assert.equal(credential.id, listUrl);
    assert.deepEqual(setBits(bits), [issued.status_list_index]);
    // The signed form of the list verifies too.
    const signed = await (await fetch(listUrl, { headers: { accept: 'application/vc+jwt' } })).text();
    assert.equal(JSON.parse(new TextDecoder().decode((await compactVerify(signed, createLocalJWKSet(jwks as any))).payload)).id, listUrl);

    // Another tenant sees none of it.
    const admin = (path: string, body: unknown) => fetch(`${gw.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${gw.keys.admin}` }, body: JSON.stringify(body) });
    assert.equal((await admin('/tenants', { id: 'nanda-b', name: 'B' })).status, 201);
    const bOperator = ((await (await admin('/tenants/nanda-b/keys', { role: 'operator', name: 'b' })).json()) as { key: string }).key;
    const foreign = await act({ action: 'certificate.check', cert_id: issued.cert_id }, bOperator);
    assert.equal(foreign.json.error.code, -32602);
    assert.equal((await act({ action: 'certificate.revoke', cert_id: issued.cert_id }, bOperator)).json.error.code, -32602);
    assert.equal((await act({ action: 'certificate.start', agent_id: echo.id }, bOperator)).json.error.code, -32602);
  });

  test('an agent that fails its probes fails the evaluation and is not certified', async () => {
    const ev = await evaluated(broken.id);
    assert.equal(ev.state, 'failed');
    assert.equal(ev.score, 0);
    assert.equal(ev.results[0].state, 'TASK_STATE_FAILED');
    const r = await act({ action: 'certificate.certificate', certification_id: ev.certification_id });
    assert.equal(r.json.error.code, -32602);
    assert.match(r.json.error.message, /failed/);
  });

  test('50 concurrent issues get 50 distinct indexes; 50 concurrent revocations lose none', async () => {
    // Fixture: 50 passed evaluations (the evaluation itself is the test above; here only issuing and revoking race).
    const evals = Array.from({ length: 50 }, () => `eval-${randomUUID()}`);
    for (const id of evals) {
      await gw.db.pool.query(
        `INSERT INTO certifications (tenant, id, agent_id, state, score, results, requested_by, finished_at) VALUES ('default', $1, $2, 'passed', 1, '[]', 'test', now())`,
        [id, echo.id],
      );
    }
    const issued = await Promise.all(evals.map((id) => ok({ action: 'certificate.certificate', certification_id: id })));
    const indexes = issued.map((c) => c.status_list_index);
    assert.equal(new Set(indexes).size, 50, 'one index per credential');
    // Random, not in issuance order: 50 sorted indexes are not a run of consecutive numbers.
    const sorted = [...indexes].sort((x, y) => x - y);
    assert.ok(sorted[49]! - sorted[0]! > 49, `indexes spread over the list: ${sorted.join(',')}`);
    const listUrl = issued[0].status_list_credential;
    assert.ok(issued.every((c) => c.status_list_credential === listUrl));
    const earlier = setBits((await statusBits(listUrl)).bits);

    const results = await Promise.all(issued.map((c) => act({ action: 'certificate.revoke', cert_id: c.cert_id, reason: 'batch' })));
    assert.ok(results.every((r) => r.answer?.status === 'revoked'), JSON.stringify(results.find((r) => r.answer?.status !== 'revoked')?.json));
    const bits = setBits((await statusBits(listUrl)).bits);
    assert.deepEqual(bits, [...earlier, ...indexes].sort((x, y) => x - y), 'exactly the revoked bits are set, none lost');
    for (const c of issued.slice(0, 5)) assert.equal((await ok({ action: 'certificate.check', cert_id: c.cert_id })).status, 'revoked');
  });
});

describe('policies', () => {
  test('an enforced policy denies a task with an error naming it and starts nothing; evaluation and listing', async () => {
    const priced = await agents.add(startSkilledAgent('Pricey', [skill('haiku', 'Haiku', 'Writes haiku poems', ['poetry'])], new EchoExecutor()));
    const p = await register(gw, priced.url, { priceMinor: 10 });
    const policy = await ok({ action: 'policy.create', name: 'cheap-only', rules: { max_price_minor: 5, required_tags: ['poetry'] } });
    assert.equal(policy.enforced, false);
    assert.equal((await act({ action: 'policy.create', name: 'cheap-only', rules: { max_price_minor: 1 } })).json.error.code, -32602);
    const verdict = await ok({ action: 'policy.evaluate', agent_id: p.id }, gw.keys.client);
    const mine = verdict.verdicts.find((v: any) => v.policy_id === policy.id);
    assert.equal(mine.allowed, false);
    assert.deepEqual(mine.violations, ['price 10 is above 5']);
    assert.equal(verdict.allowed, true, 'not enforced yet');
    assert.ok((await ok({ action: 'policy.list' }, gw.keys.client)).policies.some((x: any) => x.id === policy.id));
    // Another tenant neither sees nor enforces it.
    const admin = (path: string, body: unknown) => fetch(`${gw.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${gw.keys.admin}` }, body: JSON.stringify(body) });
    assert.equal((await admin('/tenants', { id: 'nanda-c', name: 'C' })).status, 201);
    const cOperator = ((await (await admin('/tenants/nanda-c/keys', { role: 'operator', name: 'c' })).json()) as { key: string }).key;
    assert.deepEqual((await ok({ action: 'policy.list' }, cOperator)).policies, []);
    assert.equal((await act({ action: 'policy.enforce', policy_id: policy.id }, cOperator)).json.error.code, -32602);
    assert.equal((await act({ action: 'policy.evaluate', agent_id: p.id }, cOperator)).json.error.code, -32602);
    // Not enforced: the task runs.
    const first = await rpc(p.rpc, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: userMessage('a haiku about rain') } }, V1);
    assert.equal(first.json.result.task.status.state, 'TASK_STATE_COMPLETED');

    assert.equal((await ok({ action: 'policy.enforce', policy_id: policy.id })).enforced, true);
    const calls = priced.calls.length;
    const { rows: [{ n: tasksBefore }] } = await gw.db.pool.query('SELECT count(*)::int AS n FROM tasks');
    const denied = await rpc(p.rpc, { jsonrpc: '2.0', id: 2, method: 'SendMessage', params: { message: userMessage('another haiku') } }, V1);
    assert.equal(denied.json.error.code, -32060);
    assert.match(denied.json.error.message, /cheap-only/);
    assert.match(denied.json.error.message, /price 10 is above 5/);
    // At the front door too, by agent id and by text.
    const byId = await rpc(`${gw.url}/a2a`, { jsonrpc: '2.0', id: 3, method: 'SendMessage', params: { message: userMessage('haiku', { metadata: { agentId: p.id } }) } }, V1);
    assert.equal(byId.json.error.code, -32060);
    const byText = await rpc(`${gw.url}/a2a`, { jsonrpc: '2.0', id: 4, method: 'SendMessage', params: { message: userMessage('haiku poems') } }, V1);
    assert.equal(byText.json.error.code, -32060);
    // A barrier: a task the policy allows, sent later through the same front door, workflow and worker. Once its agent
    // has answered, a denied request that had started a task would have reached the priced agent too.
    const cheap = await agents.add(startSkilledAgent('Cheap verse', [skill('verse', 'Verse', 'Writes short verse', ['poetry'])], new EchoExecutor()));
    const allowed = await register(gw, cheap.url, { priceMinor: 1 });
    const barrier = await rpc(allowed.rpc, { jsonrpc: '2.0', id: 5, method: 'SendMessage', params: { message: userMessage('a verse') } }, V1);
    assert.equal(barrier.json.result?.task?.status.state, 'TASK_STATE_COMPLETED', JSON.stringify(barrier.json));
    // Unregistered again, so that it takes no later test's text routing.
    assert.equal((await fetch(`${gw.url}/agents/${allowed.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${gw.keys.operator}` } })).status, 204);
    assert.equal(priced.calls.length, calls, 'the agent was never called');
    const { rows: [{ n: tasksAfter }] } = await gw.db.pool.query('SELECT count(*)::int AS n FROM tasks WHERE task_id <> $1', [barrier.json.result.task.id]);
    assert.equal(tasksAfter, tasksBefore, 'no task started');
    // Lifted, the agent works again.
    assert.equal((await ok({ action: 'policy.enforce', policy_id: policy.id, enforced: false })).enforced, false);
    const lifted = await rpc(p.rpc, { jsonrpc: '2.0', id: 5, method: 'SendMessage', params: { message: userMessage('a third haiku') } }, V1);
    assert.equal(lifted.json.result.task.status.state, 'TASK_STATE_COMPLETED');
  });
});

describe('observer, telemetry, reputation, audit', () => {
  test('an agent answering every probe but failing every task is degraded, and text routing prefers the one that works', async () => {
    // Both translate; the failing one's card matches the request's words better, so text routing picks it first.
    const words = 'translate french poetry verses';
    const failing = await agents.add(startSkilledAgent('French poetry translator', [skill('fr-poetry', 'Translate French poetry', 'Translate French poetry verses', ['french', 'poetry'])], new FailingExecutor()));
    const working = await agents.add(startSkilledAgent('Translator two', [skill('fr', 'Translate', 'Translate into French', ['french'])], new EchoExecutor()));
    const f = await register(gw, failing.url, { retry: { maxAttempts: 1 } });
    const w = await register(gw, working.url);
    const route = async () => (await rpc(`${gw.url}/a2a`, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: userMessage(words) } }, V1)).json.result.task.metadata.switchboard.routing.agentId;
    assert.equal(await route(), f.id, 'the better text match wins while it has no record');
    for (let i = 0; i < 3; i++) {
      const r = await rpc(f.rpc, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: userMessage(`job ${i}`) } }, V1);
      assert.equal(r.json.result.task.status.state, 'TASK_STATE_FAILED');
    }
    assert.equal(await route(), w.id, 'routing prefers the agent that succeeds');
    const seen = await ok({ action: 'observer.status', agent_id: f.id }, gw.keys.client);
    assert.equal(seen.status, 'degraded');
    assert.match(seen.reason, /tasks all failed/);
    assert.equal(seen.work.failing, true);
    // The registry knows it as soon as the failed tasks settle (GET /agents shows it), and a probe, which the
    // endpoint passes, keeps it degraded while the work fails.
    await eventually(async () => ((await (await gw.fetch(`${gw.url}/agents/${f.id}`)).json()) as any).status === 'degraded' || undefined, 10_000, 'degraded in the registry');
    const probed = await ok({ action: 'observer.probe', agent_id: f.id });
    assert.equal(probed.registry_status, 'degraded');
    assert.match(probed.reason, /tasks all failed/);
    assert.equal(probed.last_probe.ok, true, 'the endpoint answered the probe');
    // Routing reads the recent work itself: in the window before the registry knows (a failed task not yet
    // settled; here the registry row set back to healthy), the failing agent still loses.
    await gw.db.pool.query(`UPDATE agents SET status = 'healthy' WHERE id = $1`, [f.id]);
    assert.equal(await route(), w.id, 'routing reads the recent work, not only the registry status');
    assert.equal((await ok({ action: 'observer.status', agent_id: w.id }, gw.keys.client)).status, 'healthy');
    assert.ok((await ok({ action: 'observer.status' }, gw.keys.client)).agents.length >= 2);
  });

  test('telemetry, reputation and audit read the probes, trust events and ledger of the tenant', async () => {
    const sent = await rpc(`${gw.url}/agents/${echo.id}/a2a`, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: userMessage('hello') } }, V1);
    const taskId = sent.json.result.task.id;
    const settled = await eventually(async () => {
      const a = await ok({ action: 'audit.settlement', task_id: taskId });
      return a.settlement ? a : undefined;
    }, 15_000, 'the settlement');
    assert.equal(settled.verified, true, JSON.stringify(settled.checks));
    assert.equal(settled.trust_outcome, 'completed');
    const audit = await ok({ action: 'audit.reconcile', agent_id: echo.id });
    assert.equal(audit.ok, true, JSON.stringify(audit.invariants.filter((i: any) => !i.ok)));
    assert.ok(audit.tasks >= 1);
    const tenant = await ok({ action: 'audit.reconcile' });
    assert.equal(tenant.ok, true, JSON.stringify(tenant.invariants.filter((i: any) => !i.ok)));
    const rep = await ok({ action: 'reputation', agent_id: echo.id }, gw.keys.client);
    assert.ok(rep.completed >= 1);
    assert.equal(rep.success_rate, 1);
    // This gateway runs no refresh schedule: a probe now gives the telemetry a probe latency.
    assert.equal((await ok({ action: 'observer.probe', agent_id: echo.id })).registry_status, 'healthy');
    const lat = await ok({ action: 'telemetry.latency', agent_id: echo.id }, gw.keys.client);
    assert.ok(lat.probes.count >= 1, JSON.stringify(lat));
    assert.equal(typeof lat.probes.latency_ms.p50, 'number');
    assert.ok(lat.tasks.completed >= 1);
    assert.equal((await act({ action: 'reputation', agent_id: 'nobody' }, gw.keys.client)).json.error.code, -32602);
    assert.equal((await act({ action: 'audit.settlement', task_id: randomUUID() })).json.error.code, -32602);
  });
});

describe('wallets and payment intents (audit.*, x402-NP)', () => {
  test('an admin funds a wallet once per key; a task\'s intent is authorized, then captured; each key reads only its own wallet', async () => {
    const priced = await agents.add(startSkilledAgent('Priced translator', [skill('tr-paid', 'Translate', 'Translates for a fee', ['language'])], new EchoExecutor()));
    const { id: agentId, rpc: agentRpc } = await register(gw, priced.url, { priceMinor: 100 });
    const key = randomUUID();
    const funded = await ok({ action: 'audit.fund', amount_minor: 1_000, idempotency_key: key }, gw.keys.admin);
    assert.equal(funded.created, true);
    assert.equal(funded.wallet.account, 'requester:default');
    const again = await ok({ action: 'audit.fund', amount_minor: 1_000, idempotency_key: key }, gw.keys.admin);
    assert.deepEqual([again.created, again.wallet.balanceMinor], [false, funded.wallet.balanceMinor], 'the same key adds nothing');
    const conflict = await act({ action: 'audit.fund', amount_minor: 5, idempotency_key: key }, gw.keys.admin);
    assert.equal(conflict.json.error.code, -32602);
    assert.match(conflict.json.error.message, /idempotency_key .*already used/);
    assert.match((await act({ action: 'audit.fund', amount_minor: 1.5, idempotency_key: randomUUID() }, gw.keys.admin)).json.error.message, /amount_minor must be a positive integer/);
    assert.match((await act({ action: 'audit.fund', account: `agent:${agentId}`, amount_minor: 5, idempotency_key: randomUUID() }, gw.keys.admin)).json.error.message, /must be a requester account/);
    assert.equal((await act({ action: 'audit.fund', amount_minor: 5, idempotency_key: randomUUID() })).status, 403, 'money in is an admin\'s');

    const sent = await rpc(agentRpc, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: userMessage('paid work') } }, V1);
    const taskId: string = sent.json.result.task.id;
    const intent = await eventually(async () => {
      const i = await ok({ action: 'audit.intent', task_id: taskId }, gw.keys.client);
      return i.state === 'held' ? undefined : i;
    }, 15_000, 'the intent closed');
    assert.deepEqual(
      { state: intent.state, payer: intent.payer, payee: intent.payee, authorized: intent.authorized_minor, captured: intent.captured_minor, released: intent.released_minor, stale: intent.stale },
      { state: 'captured', payer: 'requester:default', payee: `agent:${agentId}`, authorized: 100, captured: 100, released: 0, stale: false },
    );
    assert.equal((await ok({ action: 'audit.settlement', task_id: taskId })).verified, true);

    // The client's wallet is the tenant's requester account: the deposit and the capture are its latest entries.
    const wallet = await ok({ action: 'audit.wallet' }, gw.keys.client);
    assert.equal(wallet.account, 'requester:default');
    assert.ok(wallet.entries.some((e: any) => e.kind === 'deposit' && e.amountMinor === 1_000));
    assert.ok(wallet.entries.some((e: any) => e.taskId === taskId && e.amountMinor === -100), JSON.stringify(wallet.entries));
    const other = await act({ action: 'audit.wallet', account: `agent:${agentId}` }, gw.keys.client);
    assert.equal(other.json.error.code, -32600);
    assert.deepEqual(other.json.error.data.requiredRoles, ['admin', 'operator']);
    assert.match((await act({ action: 'audit.wallet', account: 'savings' })).json.error.message, /account must be requester:<id>/);
    // An agent key's wallet is its agent's account, paid by the capture; it sees its own agent's intents only.
    const made = await gw.fetch(`${gw.url}/tenants/default/keys`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ role: 'agent', agentId, name: 'priced translator' }),
    }, 'admin');
    const agentKey = ((await made.json()) as any).key as string;
    const paid = await ok({ action: 'audit.wallet' }, agentKey);
    assert.deepEqual([paid.account, paid.balanceMinor], [`agent:${agentId}`, 100]);
    assert.equal((await ok({ action: 'audit.intent', task_id: taskId }, agentKey)).captured_minor, 100);
    // Operators list every wallet, and the intents by state and agent.
    const all = await ok({ action: 'audit.wallet' });
    assert.ok(all.wallets.some((w: any) => w.account === `agent:${agentId}`));
    const captured = await ok({ action: 'audit.intents', state: 'captured', agent_id: agentId });
    assert.deepEqual(captured.intents.map((i: any) => i.task_id), [taskId]);
    assert.equal((await act({ action: 'audit.intents', state: 'pending' })).json.error.code, -32602);
    assert.equal((await act({ action: 'audit.intents' }, gw.keys.client)).status, 403);
  });

  test('a held intent whose task is gone is stale: audit.intents counts it and lists it apart', async () => {
    const taskId = randomUUID();
    await gw.db.pool.query(`INSERT INTO holds (tenant, task_id, account, agent_id, amount_minor, state) VALUES ('default', $1, 'requester:default', 'ghost', 7, 'held')`, [taskId]);
    try {
      const stale = await ok({ action: 'audit.intents', stale: true });
      assert.ok(stale.stale >= 1);
      assert.deepEqual(stale.intents.map((i: any) => [i.task_id, i.state, i.task_state, i.stale]), [[taskId, 'held', null, true]]);
      assert.ok(!(await ok({ action: 'audit.intents', stale: false })).intents.some((i: any) => i.task_id === taskId));
    } finally {
      await gw.db.pool.query(`DELETE FROM holds WHERE tenant = 'default' AND task_id = $1`, [taskId]);
    }
    assert.equal((await act({ action: 'audit.intent', task_id: taskId })).json.error.code, -32602);
  });
});

describe('actions declared by agents', () => {
  test('an action no own service has goes to the agent whose skill declares it (prefix.*), answered as a bare message', async () => {
    const weather = await agents.add(startSkilledAgent('Weather node', [skill('weather.*', 'Weather actions', 'Weather forecasts as NANDA actions', ['weather'])], new EchoExecutor()));
    const w = await register(gw, weather.url);
    const r = await act({ action: 'weather.forecast', city: 'Oslo' }, gw.keys.client);
    assert.equal(r.json.error, undefined, r.text);
    assert.equal(r.json.result.role, 'agent');
    assert.equal(r.json.result.metadata.switchboard.agentId, w.id);
    assert.equal(r.json.result.metadata.switchboard.skillId, 'weather.*');
    // The agent got the action's JSON as sent.
    assert.match(r.json.result.parts[0].text, /^echo: \{"action":"weather\.forecast","city":"Oslo"\}$/);
    assert.equal((await act({ action: 'rain.forecast' }, gw.keys.client)).json.error.code, -32601);
  });
});
