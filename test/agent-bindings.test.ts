/**
 * Switchboard calls agents over the binding their card offers: HTTP+JSON (REST) and gRPC beside JSON-RPC.
 * The same scenarios run for every (client binding × agent binding) pair in PAIRS, with @a2a-js/sdk clients
 * and @a2a-js/sdk agents (test/agents/v1.ts serves REST with `restHandler` and gRPC with `grpcService`).
 * Today's clients speak JSON-RPC to the gateway; a client binding is one entry in CLIENTS.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { SendMessageRequest, StreamResponse, Task } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import { AgentPool, chunkedText, startAskingAgent, startChunkyAgent, startEchoAgent, startSlowAgent, type AgentOptions, type TestAgent } from './agents';
import type { InjectedFault, TestBinding } from './agents/v1';
import { RPC_PATH } from './agents/harness';
import { startMutableAgent } from './agents/mutable';
import { type Gateway, clientFactory, eventually, register, startGateway, textOf } from './helpers/harness';
import { agentClient, type HttpTrace } from '../src/core/agents/agent-client';
import { classify } from '../activities/forward-message';
import { probeEndpoint } from '../src/core/agents/refresh';
import { parseAgentCard } from '../src/core/agents/cards';
import { createOutbound, OutboundError } from '../src/core/http/outbound';
import { parseGrpcTarget, usesTls } from '../src/core/http/outbound-grpc';
import { PARENT_TASK_HEADER } from '../task/messages';
import type { AgentEndpoint } from '../task/contracts';

let gw: Gateway;
const agents = new AgentPool();

before(async () => {
  gw = await startGateway();
});
after(async () => {
  await gw?.close();
  await agents.closeAll();
});

// ---- the dimensions ----

/** How a test client reaches the gateway's task for an agent: one entry per client binding. */
const CLIENTS: Record<string, (agentId: string) => Promise<Client>> = {
  JSONRPC: (agentId) => clientFactory(gw.keys.client).createFromUrl(`${gw.url}/agents/${agentId}/.well-known/agent-card.json`, ''),
};
/** The agent bindings under test (JSON-RPC agents are every other test file's). */
const AGENT_BINDINGS: TestBinding[] = ['HTTP+JSON', 'GRPC'];
const PAIRS = Object.keys(CLIENTS).flatMap((client) => AGENT_BINDINGS.map((agent) => ({ client, agent })));

const fastRetry = { retry: { maxAttempts: 3, initialIntervalMs: 100, backoffCoefficient: 1, attemptTimeoutMs: 10_000 } };

/** Starts an agent serving only `binding`, registers it, and gives a client of the pair's binding. */
async function setUp(pair: { client: string; agent: TestBinding }, start: (o: AgentOptions) => Promise<TestAgent>, opts: AgentOptions = {}, extra: Record<string, unknown> = {}) {
  const agent = await agents.add(start({ bindings: [pair.agent], ...opts }));
  const { id } = await register(gw, agent.url, extra);
  const client = await CLIENTS[pair.client]!(id);
  return { agent, id, client };
}

const userMessage = (text: string, extra: Record<string, unknown> = {}) => ({ messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...extra });

async function send(client: Client, text: string, opts: { extra?: Record<string, unknown>; configuration?: Record<string, unknown> } = {}) {
  const reply = await client.sendMessage(SendMessageRequest.fromJSON({ message: userMessage(text, opts.extra), configuration: opts.configuration }));
  assert.ok(!('messageId' in reply), 'the gateway always answers with a task');
  return Task.toJSON(reply as Task) as any;
}

/** GET /agents/:id as the operator sees it. */
const agentView = async (id: string): Promise<any> => (await gw.fetch(`${gw.url}/agents/${id}`, {}, 'operator')).json();

const SENDS = new Set(['SendMessage', 'SendStreamingMessage']);
const sendsTo = (agent: TestAgent) => agent.calls.filter((c) => SENDS.has(c.method));
/** A header as the agent saw it: HTTP headers are strings, gRPC metadata values strings or buffers. */
const header = (call: { headers: Record<string, unknown> }, name: string) => {
  const v = call.headers[name];
  return Array.isArray(v) ? String(v[0]) : v === undefined ? undefined : String(v);
};

/** Fails the first `n` sends with `fault`, then lets them through. */
function faultFirst(n: number, fault: InjectedFault): AgentOptions['fault'] {
  let left = n;
  return (call) => (SENDS.has(call.method) && left-- > 0 ? fault : undefined);
}

// ---- the scenarios, per pair ----

for (const pair of PAIRS) {
  describe(`${pair.client} client → ${pair.agent} agent`, () => {
    test('blocking send: the agent is called over its binding with the credential and the parent header; a probe finds it healthy', async () => {
      const { agent, id, client } = await setUp(pair, startEchoAgent, {}, { credentials: { type: 'bearer', token: 'agent-secret-1' } });
      const task = await send(client, 'hello');
      assert.equal(task.status.state, 'TASK_STATE_COMPLETED');
      assert.equal(textOf(task.artifacts[0].parts), 'echo: hello');

      const [call, ...more] = sendsTo(agent);
      assert.equal(more.length, 0);
      assert.equal(call!.binding, pair.agent);
      assert.equal(call!.method, 'SendStreamingMessage', 'the card says streaming: the gateway streams');
      assert.equal(call!.params.message.messageId.length > 0, true);
      assert.equal(header(call!, 'authorization'), 'Bearer agent-secret-1');
      assert.equal(header(call!, PARENT_TASK_HEADER), task.id);

      const view = await agentView(id);
      assert.equal(view.endpoint.binding, pair.agent);
      // The probe (GetTask of a task that does not exist) goes over the binding too, with the credential.
      const probed = await (await gw.fetch(`${gw.url}/agents/${id}/refresh`, { method: 'POST' }, 'operator')).json() as any;
      assert.equal(probed.liveness.lastProbe.ok, true, JSON.stringify(probed.liveness.lastProbe));
      assert.equal(probed.status, 'healthy', probed.statusReason);
      const probe = agent.calls.find((c) => c.method === 'GetTask')!;
      assert.equal(header(probe, 'authorization'), 'Bearer agent-secret-1');
      assert.ok(agent.calls.some((c) => c.method === 'GetTask' && c.binding === pair.agent), 'the probe reached the agent over its binding');
    });

    test('streaming relay: every chunk reaches the client in order, then the completed status', async () => {
      const { agent, client } = await setUp(pair, startChunkyAgent, { chunks: 20 } as AgentOptions);
      const events: any[] = [];
      for await (const e of client.sendMessageStream(SendMessageRequest.fromJSON({ message: userMessage('go') }))) events.push(StreamResponse.toJSON(e));
      const chunks = events.filter((e) => e.artifactUpdate);
      assert.equal(chunks.length, 20);
      assert.equal(chunks.map((e) => e.artifactUpdate.artifact.parts[0].text).join(''), chunkedText(20));
      assert.equal(events.at(-1).statusUpdate.status.state, 'TASK_STATE_COMPLETED');
      assert.deepEqual(sendsTo(agent).map((c) => [c.binding, c.method]), [[pair.agent, 'SendStreamingMessage']]);
    });

    test('input-required, then the follow-up continues the same task at the agent', async () => {
      const { agent, client } = await setUp(pair, startAskingAgent);
      const first = await send(client, 'hi');
      assert.equal(first.status.state, 'TASK_STATE_INPUT_REQUIRED');
      assert.equal(textOf(first.status.message.parts), 'What is your name?');
      const done = await send(client, 'Ada', { extra: { taskId: first.id, contextId: first.contextId } });
      assert.equal(done.id, first.id);
      assert.equal(done.status.state, 'TASK_STATE_COMPLETED');
      assert.equal(textOf(done.artifacts[0].parts), 'Hello, Ada!');
      const [opening, followUp] = sendsTo(agent);
      assert.equal(opening!.params.message.taskId || undefined, undefined, 'the first message starts a task at the agent');
      assert.ok(followUp!.params.message.taskId, 'the follow-up names the agent task');
      assert.equal(agent.calls.filter((c) => c.binding === pair.agent && SENDS.has(c.method)).length, 2);
    });

    test('cancel reaches the agent over its binding', async () => {
      const { agent, client } = await setUp(pair, startSlowAgent);
      const task = await send(client, 'forever', { configuration: { returnImmediately: true } });
      await eventually(() => sendsTo(agent).length > 0 || undefined, 10_000, 'the agent to be called');
      const canceled = Task.toJSON(await client.cancelTask({ tenant: '', id: task.id, metadata: undefined })) as any;
      assert.equal(canceled.status.state, 'TASK_STATE_CANCELED');
      await eventually(() => agent.cancels.length > 0 || undefined, 10_000, 'the cancel at the agent');
      const cancel = agent.calls.find((c) => c.method === 'CancelTask')!;
      assert.equal(cancel.binding, pair.agent);
      assert.equal(agent.cancels.length, 1);
    });

    test('a transient failure (HTTP 503 / gRPC UNAVAILABLE) is retried with the same messageId', async () => {
      const { agent, client } = await setUp(pair, startEchoAgent, { fault: faultFirst(2, 'unavailable') }, fastRetry);
      const task = await send(client, 'again');
      assert.equal(task.status.state, 'TASK_STATE_COMPLETED');
      assert.equal(textOf(task.artifacts[0].parts), 'echo: again');
      const sends = sendsTo(agent);
      assert.equal(sends.length, 3, 'two failures, then success');
      assert.equal(new Set(sends.map((c) => c.params.message.messageId)).size, 1, 'one messageId on every attempt');
    });

    test('a request the agent refuses (HTTP 400 / gRPC INVALID_ARGUMENT) is not retried', async () => {
      const { agent, client } = await setUp(pair, startEchoAgent, { fault: faultFirst(Infinity, 'invalid-argument') }, fastRetry);
      const task = await send(client, 'no');
      assert.equal(task.status.state, 'TASK_STATE_FAILED');
      assert.match(textOf(task.status.message.parts), pair.agent === 'GRPC' ? /INVALID_ARGUMENT/ : /HTTP 400/);
      assert.equal(sendsTo(agent).length, 1, 'not retried');
    });
  });
}

// ---- registration ----

describe('registration picks the binding', () => {
  let all: TestAgent;
  before(async () => {
    all = await agents.add(startEchoAgent({ bindings: ['GRPC', 'HTTP+JSON', 'JSONRPC'] }));
  });

  test('JSON-RPC first when the card offers it, whatever the card order; `binding` picks another, and calls follow it', async () => {
    const byDefault = await register(gw, all.url);
    const view = await agentView(byDefault.id);
    assert.equal(view.endpoint.binding, 'JSONRPC');
    for (const binding of ['GRPC', 'HTTP+JSON'] as const) {
      const { id } = await register(gw, all.url, { binding });
      const v = await agentView(id);
      assert.equal(v.endpoint.binding, binding);
      const before = sendsTo(all).length;
      const task = await send(await CLIENTS.JSONRPC!(id), `over ${binding}`);
      assert.equal(task.status.state, 'TASK_STATE_COMPLETED');
      assert.deepEqual(sendsTo(all).slice(before).map((c) => c.binding), [binding]);
    }
  });

  test('a card refresh keeps the binding while the card still offers it (following its new URL), else takes the preferred one', async () => {
    const agent = await agents.add(startMutableAgent());
    const jsonRpc = { url: `${agent.url}${RPC_PATH}`, protocolBinding: 'JSONRPC', protocolVersion: '1.0' };
    const rest = (path: string) => ({ url: `${agent.url}${path}`, protocolBinding: 'HTTP+JSON', protocolVersion: '1.0' });
    agent.state.card = { ...agent.state.card, supportedInterfaces: [jsonRpc, rest('/rest-a')] };
    const { id } = await register(gw, agent.url, { binding: 'HTTP+JSON' });
    assert.deepEqual((await agentView(id)).endpoint, { url: `${agent.url}/rest-a`, protocolVersion: '1.0', streaming: false, binding: 'HTTP+JSON' });

    const refresh = async () => (await gw.fetch(`${gw.url}/agents/${id}/refresh`, { method: 'POST' }, 'operator')).json() as Promise<any>;
    agent.state.card = { ...agent.state.card, supportedInterfaces: [jsonRpc, rest('/rest-b')] };
    assert.deepEqual((await refresh()).endpoint, { url: `${agent.url}/rest-b`, protocolVersion: '1.0', streaming: false, binding: 'HTTP+JSON' });
    agent.state.card = { ...agent.state.card, supportedInterfaces: [jsonRpc] };
    assert.deepEqual((await refresh()).endpoint, { url: jsonRpc.url, protocolVersion: '1.0', streaming: false, binding: 'JSONRPC' });
  });

  test('HTTP+JSON before gRPC when the card offers no JSON-RPC', async () => {
    const agent = await agents.add(startEchoAgent({ bindings: ['GRPC', 'HTTP+JSON'] }));
    const { id } = await register(gw, agent.url);
    assert.equal((await agentView(id)).endpoint.binding, 'HTTP+JSON');
  });

  test('a binding the card lacks: 400 naming the ones it offers; an unknown binding: 400', async () => {
    const restOnly = await agents.add(startEchoAgent({ bindings: ['HTTP+JSON'] }));
    const post = (body: unknown) =>
      gw.fetch(`${gw.url}/agents`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }, 'operator');
    const lacking = await post({ url: restOnly.url, binding: 'GRPC' });
    assert.equal(lacking.status, 400);
    const { error } = (await lacking.json()) as { error: string };
    assert.match(error, /offers no GRPC interface/);
    assert.match(error, /it offers HTTP\+JSON/);
    const unknown = await post({ url: restOnly.url, binding: 'SOAP' });
    assert.equal(unknown.status, 400);
    assert.match(((await unknown.json()) as { error: string }).error, /binding/);
  });
});

// ---- the outbound rules on the new bindings ----

describe('private addresses are refused on every binding unless allowed', () => {
  const strict = createOutbound({ allowPrivate: false });
  after(() => strict.close());

  for (const binding of AGENT_BINDINGS) {
    test(`${binding}: the call, the probe and the cancel are refused before anything reaches the agent, and not retried`, async () => {
      const agent = await agents.add(startEchoAgent({ bindings: [binding] }));
      const endpoint: AgentEndpoint = { ...(await registeredEndpoint(agent)), binding };
      const link = { fetch: strict.fetch, grpc: strict.grpc };
      const trace: HttpTrace = {};
      const err = await (async () => {
        const client = await agentClient(endpoint, link, trace);
        return client.sendMessage(SendMessageRequest.fromJSON({ message: userMessage('x') }));
      })().then(
        () => assert.fail('refused'),
        (e: unknown) => e,
      );
      const outbound = err instanceof OutboundError ? err : ((err as { cause?: unknown }).cause as OutboundError);
      assert.ok(outbound instanceof OutboundError, String(err));
      assert.equal(outbound.code, 'BLOCKED_ADDRESS');
      assert.match(outbound.message, /127\.0\.0\.1.*SWITCHBOARD_ALLOW_PRIVATE_URLS/);
      const failure = classify(err, trace);
      assert.equal(failure.type, 'AgentUnreachable');
      assert.equal(failure.nonRetryable, true);

      const probe = await probeEndpoint(link, endpoint, 5_000);
      assert.equal(probe.ok, false);
      assert.match(probe.detail ?? '', /refusing to connect to 127\.0\.0\.1/);
      assert.equal(agent.calls.length, 0, 'nothing reached the agent');
    });
  }

  test('gRPC: a name that resolves to a private address is refused too (the lookup is checked, not only literals)', async () => {
    const lookup = ((_host: string, _opts: unknown, cb: (err: null, all: { address: string; family: number }[]) => void) =>
      cb(null, [{ address: '10.1.2.3', family: 4 }])) as unknown as typeof import('node:dns').lookup;
    const rebinding = createOutbound({ allowPrivate: false, lookup });
    try {
      await assert.rejects(rebinding.grpc.channel('agent.example.com:50051'), (e: unknown) => e instanceof OutboundError && e.code === 'BLOCKED_ADDRESS' && /10\.1\.2\.3/.test(e.message));
    } finally {
      await rebinding.close();
    }
  });
});

describe('gRPC URLs', () => {
  test('host:port, [v6]:port and http(s)/grpc(s) URLs; TLS unless the URL says plaintext (or private URLs are allowed and the port is not 443)', () => {
    assert.deepEqual(parseGrpcTarget('agent.example.com:50051'), { host: 'agent.example.com', port: 50051 });
    assert.deepEqual(parseGrpcTarget('agent.example.com'), { host: 'agent.example.com', port: 443 });
    assert.deepEqual(parseGrpcTarget('[::1]:7000'), { host: '::1', port: 7000 });
    assert.deepEqual(parseGrpcTarget('grpcs://a.example'), { host: 'a.example', port: 443, scheme: 'grpcs' });
    assert.deepEqual(parseGrpcTarget('http://127.0.0.1:9000'), { host: '127.0.0.1', port: 9000, scheme: 'http' });
    assert.throws(() => parseGrpcTarget('grpc://a.example'), /needs a port/);
    assert.throws(() => parseGrpcTarget('https://a.example/a2a'), /no path/);
    assert.throws(() => parseGrpcTarget('ftp://a.example:21'), /scheme/);
    assert.equal(usesTls(parseGrpcTarget('a.example:50051'), false), true);
    assert.equal(usesTls(parseGrpcTarget('a.example:50051'), true), false);
    assert.equal(usesTls(parseGrpcTarget('a.example:443'), true), true);
    assert.equal(usesTls(parseGrpcTarget('grpc://a.example:50051'), false), false);
    assert.equal(usesTls(parseGrpcTarget('https://a.example:50051'), true), true);
  });
});

/** The endpoint the registry reads from a test agent's card (registering would have it probed). */
async function registeredEndpoint(agent: TestAgent): Promise<AgentEndpoint> {
  return parseAgentCard(agent.card, `${agent.url}/.well-known/agent-card.json`).endpoint;
}
