/**
 * Every A2A binding, both ways: @a2a-js/sdk clients preferring JSON-RPC, HTTP+JSON (REST) and gRPC each run the
 * scenario table (test/helpers/binding-scenarios.ts) against SDK agents that serve only JSON-RPC, only HTTP+JSON or
 * only gRPC (3 × 3 pairs: a gRPC client reaches a REST-only agent and so on); then what
 * is particular to each binding: cards, event ids and resume on the wire, errors in each binding's own form,
 * authentication and roles, and the same task read identically through all three (TCK transport equivalence).
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { SendMessageRequest, TaskState } from '@a2a-js/sdk';
import { A2AService } from '@a2a-js/sdk/server/grpc';
import { type TestAgent, startAskingAgent, startChunkyAgent, startEchoAgent, startReplyingAgent, startSlowAgent } from './agents';
import { type Gateway, eventually, register, startGateway } from './helpers/harness';
import {
  CLIENT_BINDINGS,
  SCENARIOS,
  type ScenarioAgents,
  asTask,
  bindingFactory,
  readEverywhere,
  send,
} from './helpers/binding-scenarios';

/** How Switchboard reaches the agents: each agent binding with each client binding, 3 × 3 pairs. */
const AGENT_BINDINGS = ['JSONRPC', 'HTTP+JSON', 'GRPC'] as const;
type AgentBinding = (typeof AGENT_BINDINGS)[number];
const CHUNKS = 12;

let gw: Gateway;
/** The scenario agents per agent binding; `agents` (JSON-RPC ones) serve the binding-specific tests below. */
const agentsBy = {} as Record<AgentBinding, ScenarioAgents>;
let agents: ScenarioAgents;
const running: TestAgent[] = [];

async function startScenarioAgents(binding: AgentBinding): Promise<ScenarioAgents> {
  const bindings = [binding];
  const [echo, asking, slow, chunky, replying] = await Promise.all([
    startEchoAgent({ bindings }),
    startAskingAgent({ bindings }),
    startSlowAgent({ bindings }),
    startChunkyAgent({ chunks: CHUNKS, bindings }),
    startReplyingAgent({ bindings }),
  ]);
  running.push(echo, asking, slow, chunky, replying);
  return {
    echo: { id: (await register(gw, echo.url)).id, agent: echo },
    asking: { id: (await register(gw, asking.url)).id, agent: asking },
    slow: { id: (await register(gw, slow.url)).id, agent: slow },
    chunky: { id: (await register(gw, chunky.url)).id, agent: chunky, chunks: CHUNKS },
    replying: { id: (await register(gw, replying.url)).id, agent: replying },
  };
}

before(async () => {
  gw = await startGateway({ grpc: true });
  for (const binding of AGENT_BINDINGS) agentsBy[binding] = await startScenarioAgents(binding);
  agents = agentsBy.JSONRPC;
});

after(async () => {
  await gw?.close();
  await Promise.all(running.map((a) => a.close()));
});

for (const agentBinding of AGENT_BINDINGS) {
  for (const binding of CLIENT_BINDINGS) {
    describe(`client ${binding} → agent ${agentBinding}`, () => {
      for (const scenario of SCENARIOS) {
        test(scenario.name, async () => {
          await scenario.run({
            gw,
            binding,
            agents: agentsBy[agentBinding],
            client: async (agentId, key = gw.keys.client) => {
              const c = await bindingFactory(binding, key).createFromUrl(`${gw.url}/agents/${agentId}/`);
              assert.equal(c.transport.protocolName, binding, 'the client uses the binding it prefers');
              return c;
            },
          });
        });
      }
    });
  }
}

/** A raw gRPC client of the A2A service (no SDK client in between), for status codes and metadata. */
function rawGrpc(): grpc.Client & Record<string, (...args: unknown[]) => unknown> {
  const Ctor = grpc.makeGenericClientConstructor(A2AService as unknown as grpc.ServiceDefinition, 'A2AService');
  return new Ctor(gw.grpc!, grpc.credentials.createInsecure()) as never;
}

function unary(method: string, request: unknown, metadata: Record<string, string>): Promise<{ err?: grpc.ServiceError; res?: unknown }> {
  const client = rawGrpc();
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(metadata)) md.set(k, v);
  return new Promise((resolve) =>
    (client[method] as (r: unknown, m: grpc.Metadata, cb: (err: grpc.ServiceError | null, res: unknown) => void) => void)(request, md, (err, res) => {
      client.close();
      resolve(err ? { err } : { res });
    }),
  );
}

/** A SendMessage request in the SDK's proto type, for the raw gRPC client. */
const sendRequest = (tenant: string, text: string) =>
  SendMessageRequest.fromJSON({ tenant, message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] } });

describe('cards', () => {
  test('an agent\'s gateway card lists JSON-RPC (1.0, 0.3), HTTP+JSON and gRPC (tenant = the agent)', async () => {
    const card = (await (await fetch(`${gw.url}/agents/${agents.echo.id}/.well-known/agent-card.json`)).json()) as any;
    const port = gw.grpc!.split(':')[1];
    assert.deepEqual(card.supportedInterfaces, [
      { url: `${gw.url}/agents/${agents.echo.id}/a2a`, protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
      { url: `${gw.url}/agents/${agents.echo.id}/a2a`, protocolBinding: 'JSONRPC', protocolVersion: '0.3' },
      { url: `${gw.url}/agents/${agents.echo.id}/rest`, protocolBinding: 'HTTP+JSON', protocolVersion: '1.0' },
      { url: `127.0.0.1:${port}`, protocolBinding: 'GRPC', protocolVersion: '1.0', tenant: agents.echo.id },
    ]);
    const card03 = (await (await fetch(`${gw.url}/agents/${agents.echo.id}/.well-known/agent-card.json`, { headers: { 'A2A-Version': '0.3' } })).json()) as any;
    assert.deepEqual(card03.additionalInterfaces, [{ url: `${gw.url}/agents/${agents.echo.id}/a2a`, transport: 'JSONRPC' }]);
  });

  test('Switchboard\'s routing card lists the front door in all three bindings; routing works over REST and gRPC', async () => {
    const card = (await (await fetch(`${gw.url}/.well-known/agent-card.json`)).json()) as any;
    assert.deepEqual(
      card.supportedInterfaces.map((i: any) => [i.protocolBinding, i.url, i.tenant]),
      [
        ['JSONRPC', `${gw.url}/a2a`, undefined],
        ['JSONRPC', `${gw.url}/a2a`, undefined],
        ['HTTP+JSON', `${gw.url}/rest`, undefined],
        ['GRPC', gw.grpc, undefined],
      ],
    );
    for (const binding of ['HTTP+JSON', 'GRPC'] as const) {
      const c = await bindingFactory(binding, gw.keys.client).createFromUrl(gw.url);
      assert.equal(c.transport.protocolName, binding);
      const task = asTask(await c.sendMessage(send('routed', { metadata: { agentId: agents.echo.id } })));
      assert.equal((task.metadata as any)?.switchboard?.routing?.agentId, agents.echo.id);
      const route = await (await gw.fetch(`${gw.url}/tasks/${task.id}/route`)).json() as any;
      assert.equal(route.requestedVia, 'router');
      assert.equal((await c.getTask({ id: task.id, tenant: '' })).id, task.id);
    }
  });
});

describe('transport equivalence', () => {
  test('the same task reads identically through JSON-RPC, HTTP+JSON and gRPC', async () => {
    const c = await bindingFactory('JSONRPC', gw.keys.client).createFromUrl(`${gw.url}/agents/${agents.asking.id}/`);
    const asked = asTask(await c.sendMessage(send('hi')));
    const done = asTask(await c.sendMessage(send('Grace', { taskId: asked.id, contextId: asked.contextId })));
    const seen = await readEverywhere(gw, agents.asking.id, done.id);
    assert.deepEqual(seen['HTTP+JSON'], seen.JSONRPC);
    assert.deepEqual(seen.GRPC, seen.JSONRPC);
    assert.ok(((seen.JSONRPC as any).history ?? []).length >= 2, 'with its history');
  });
});

describe('REST on the wire', () => {
  const rest = (path: string, init: RequestInit = {}, key = gw.keys.client) =>
    fetch(`${gw.url}/agents/${agents.chunky.id}/rest${path}`, {
      ...init,
      headers: { 'a2a-version': '1.0', 'content-type': 'application/json', authorization: `Bearer ${key}`, ...(init.headers as Record<string, string>) },
    });

  test('SSE events carry id: (log positions 1, 2, …); Last-Event-ID on :subscribe replays exactly the rest', async () => {
    const res = await rest('/message:stream', { method: 'POST', body: JSON.stringify({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'go' }] } }) });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /text\/event-stream/);
    const frames = (await res.text()).split('\n\n').filter((f) => f.includes('data: '));
    const ids = frames.map((f) => Number(/^id: (\d+)$/m.exec(f)?.[1]));
    assert.deepEqual(ids, ids.map((_, i) => i + 1));
    const taskId = JSON.parse(frames[0].split('data: ')[1]).task.id;
    const again = await rest(`/tasks/${taskId}:subscribe`, { headers: { 'last-event-id': '4' } });
    const replay = (await again.text()).split('\n\n').filter((f) => f.includes('data: '));
    assert.deepEqual(replay, frames.slice(4));
  });

  test('errors: 404 NOT_FOUND Status body for an unknown task; 401 and 403 as on every route; 400 for bad JSON', async () => {
    const missing = await rest(`/tasks/${randomUUID()}`);
    assert.equal(missing.status, 404);
    const body = (await missing.json()) as any;
    assert.equal(body.error.status, 'NOT_FOUND');
    assert.equal(body.error.code, 404);
    assert.equal(body.error.details[0].reason, 'TASK_NOT_FOUND');

    const bad = await rest('/tasks', {}, 'sb_' + 'x'.repeat(43));
    assert.equal(bad.status, 401);
    assert.match(bad.headers.get('www-authenticate') ?? '', /Bearer/);
    assert.ok(((await bad.json()) as any).error);

    const denied = await rest('/message:send', { method: 'POST', body: JSON.stringify({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'x' }] } }) }, gw.keys.operator);
    assert.equal(denied.status, 403);
    const deniedBody = (await denied.json()) as any;
    assert.equal(deniedBody.error.status, 'PERMISSION_DENIED', 'AIP-193 on the HTTP+JSON binding');
    assert.equal(deniedBody.error.details[0].metadata.requiredRoles, 'admin,client,agent');
    // An operator may read.
    assert.equal((await rest('/tasks', {}, gw.keys.operator)).status, 200);

    const malformed = await rest('/message:send', { method: 'POST', body: '{not json' });
    assert.equal(malformed.status, 400);
    assert.equal(((await malformed.json()) as any).error.status, 'INVALID_ARGUMENT');
    const nowhere = await rest('/no/such/method');
    assert.equal(nowhere.status, 404);
  });
});

describe('gRPC on the wire', () => {
  test('a stream\'s response headers name its first event; last-event-id metadata resumes after it', async () => {
    let first: string | undefined;
    const c = await bindingFactory('GRPC', gw.keys.client, (md) => (first ??= md.get('switchboard-first-event-id')[0]?.toString())).createFromUrl(`${gw.url}/agents/${agents.chunky.id}/`);
    const all = [];
    for await (const e of c.sendMessageStream(send('go'))) all.push(e);
    assert.equal(first, '1');
    const taskId = all[0].payload?.$case === 'task' ? all[0].payload.value.id : '';
    let resumedFirst: string | undefined;
    const r = await bindingFactory('GRPC', gw.keys.client, (md) => (resumedFirst ??= md.get('switchboard-first-event-id')[0]?.toString())).createFromUrl(`${gw.url}/agents/${agents.chunky.id}/`);
    const rest = [];
    for await (const e of r.resubscribeTask({ id: taskId, tenant: '' }, { serviceParameters: { 'last-event-id': '5' } })) rest.push(e);
    assert.equal(resumedFirst, '6');
    assert.deepEqual(rest.map((e) => JSON.stringify(e)), all.slice(5).map((e) => JSON.stringify(e)));
  });

  test('status codes: NOT_FOUND, UNAUTHENTICATED, PERMISSION_DENIED; the tenant names the agent', async () => {
    const tenant = agents.echo.id;
    const missing = await unary('getTask', { tenant, id: randomUUID() }, { authorization: `Bearer ${gw.keys.client}`, 'a2a-version': '1.0' });
    assert.equal(missing.err?.code, grpc.status.NOT_FOUND, missing.err?.details);
    assert.ok(missing.err?.metadata.get('grpc-status-details-bin').length, 'with google.rpc.Status details');

    const none = await unary('getTask', { tenant, id: randomUUID() }, { 'a2a-version': '1.0' });
    assert.equal(none.err?.code, grpc.status.UNAUTHENTICATED);
    const bad = await unary('getTask', { tenant, id: randomUUID() }, { 'x-api-key': 'sb_' + 'y'.repeat(43), 'a2a-version': '1.0' });
    assert.equal(bad.err?.code, grpc.status.UNAUTHENTICATED);

    const denied = await unary('sendMessage', sendRequest(tenant, 'x'), { authorization: `Bearer ${gw.keys.operator}`, 'a2a-version': '1.0' });
    assert.equal(denied.err?.code, grpc.status.PERMISSION_DENIED);

    const unknownAgent = await unary('getTask', { tenant: 'no-such-agent', id: randomUUID() }, { authorization: `Bearer ${gw.keys.client}`, 'a2a-version': '1.0' });
    assert.equal(unknownAgent.err?.code, grpc.status.NOT_FOUND);

    // Another agent's task answers like an unknown one.
    const c = await bindingFactory('GRPC', gw.keys.client).createFromUrl(`${gw.url}/agents/${agents.echo.id}/`);
    const task = asTask(await c.sendMessage(send('mine')));
    const other = await unary('getTask', { tenant: agents.asking.id, id: task.id }, { authorization: `Bearer ${gw.keys.client}`, 'a2a-version': '1.0' });
    assert.equal(other.err?.code, grpc.status.NOT_FOUND);
  });

  test('requests over the size cap are refused with RESOURCE_EXHAUSTED', async () => {
    const big = await unary('sendMessage', sendRequest(agents.echo.id, 'x'.repeat(2 * 1024 * 1024)), { authorization: `Bearer ${gw.keys.client}`, 'a2a-version': '1.0' });
    assert.equal(big.err?.code, grpc.status.RESOURCE_EXHAUSTED, big.err?.details);
  });

  test('a deadline that passes ends the call with DEADLINE_EXCEEDED; the task lives on', async () => {
    const c = await bindingFactory('GRPC', gw.keys.client).createFromUrl(`${gw.url}/agents/${agents.slow.id}/`);
    const client = rawGrpc();
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${gw.keys.client}`);
    md.set('a2a-version', '1.0');
    const err = await new Promise<grpc.ServiceError | null>((resolve) =>
      (client.sendMessage as any)(sendRequest(agents.slow.id, 'slow'), md, { deadline: Date.now() + 1500 }, (e: grpc.ServiceError | null) => resolve(e)),
    );
    client.close();
    assert.equal(err?.code, grpc.status.DEADLINE_EXCEEDED, err?.details);
    // The task goes on without the caller: it is there, working, and is canceled here so that nothing waits on it.
    const working = await eventually(async () => {
      const page = await c.listTasks({ tenant: '', contextId: '', status: TaskState.TASK_STATE_WORKING, pageToken: '', includeArtifacts: false } as never);
      return page.tasks.length ? page.tasks : undefined;
    }, 20_000, 'the task to be working');
    for (const t of working) await c.cancelTask({ id: t.id, tenant: '', metadata: undefined });
  });

});
