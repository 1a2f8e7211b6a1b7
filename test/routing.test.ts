/**
 * The routing front door: Switchboard's own card and JSON-RPC at POST /a2a (and /api/v1/a2a). New tasks go to
 * the agent the message metadata names (agent id, skill id) or to the best search match for the text among
 * healthy agents, ties broken by reputation; an unroutable message gets -32051 and starts nothing; existing
 * tasks of any agent are served. Real Temporal, PostgreSQL and @a2a-js/sdk agents.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { SendMessageRequest, Task } from '@a2a-js/sdk';
import { startAskingAgent, type TestAgent } from './agents';
import { startMutableAgent } from './agents/mutable';
import { A2AClient as A2AClient03 } from 'a2a-sdk-03/client';
import { type Gateway, authFetch, clientFactory, eventually, register, rpc, startGateway } from './helpers/harness';
import { sse } from './helpers/sse';

let gw: Gateway;
const agents: TestAgent[] = [];
const ids: Record<string, string> = {};
const called: Record<string, TestAgent> = {};

const skill = (id: string, name: string, description: string, tags: string[]) => ({ id, name, description, tags, examples: [] });

// A fixed set of agents with distinct cards; "Weather forecast" outranks "Meteo" on weather text while it is up.
const FIXTURE = {
  flights: { name: 'Flight booker', description: 'Books airline tickets', skills: [skill('book-flight', 'Book flights', 'Finds and books airline flights between airports', ['travel', 'airline'])] },
  currency: { name: 'Money desk', description: 'Converts money', skills: [skill('convert-currency', 'Convert currency', 'Converts amounts between currencies at exchange rates', ['finance', 'currency'])] },
  weather: { name: 'Weather forecast', description: 'Weather forecasts for any city', skills: [skill('weather-forecast', 'Weather forecast', 'Forecasts the weather for a city', ['weather'])] },
  meteo: { name: 'Meteo', description: 'Weather reports', skills: [skill('weather-report', 'Weather report', 'Reports the weather of a city', ['weather'])] },
};

before(async () => {
  gw = await startGateway();
  for (const [key, opts] of Object.entries(FIXTURE)) {
    const a = await startMutableAgent(opts);
    agents.push(a);
    called[key] = a;
    ids[key] = (await register(gw, a.url)).id;
  }
});
after(async () => {
  await gw?.close();
  await Promise.all(agents.map((a) => a.close().catch(() => {})));
});

const message = (text: string, metadata?: Record<string, unknown>) => ({ messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...(metadata && { metadata }) });
const send = (text: string, metadata?: Record<string, unknown>, path = '/a2a') =>
  rpc(`${gw.url}${path}`, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: message(text, metadata) } });
const routeOf = async (taskId: string) => (await gw.fetch(`${gw.url}/tasks/${taskId}/route`)).json() as Promise<any>;
const taskCount = async () => Number((await gw.db.pool.query('SELECT count(*) AS n FROM message_tasks')).rows[0].n);
const callsTo = (key: string) => called[key]!.calls.filter((c) => c.method === 'SendMessage' || c.method === 'message/send').length;

describe('the front door card', () => {
  test('is served at agent-card.json and agent.json, and an SDK client made from it runs a task end to end', async () => {
    for (const file of ['agent-card.json', 'agent.json']) {
      // Anyone may read the card; only a caller with a key sees its tenant's skills in it.
      const anonymous = (await (await fetch(`${gw.url}/.well-known/${file}`)).json()) as any;
      assert.deepEqual(anonymous.skills, [], 'no tenant, no skills');
      const res = await gw.fetch(`${gw.url}/.well-known/${file}`);
      assert.equal(res.status, 200);
      const card = (await res.json()) as any;
      assert.equal(card.name, 'Switchboard');
      if (file === 'agent-card.json') {
        assert.deepEqual(card.supportedInterfaces, [
          { url: `${gw.url}/a2a`, protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
          { url: `${gw.url}/a2a`, protocolBinding: 'JSONRPC', protocolVersion: '0.3' },
          { url: `${gw.url}/rest`, protocolBinding: 'HTTP+JSON', protocolVersion: '1.0' },
        ]);
      } else {
        assert.equal(card.url, `${gw.url}/a2a`, 'agent.json, the pre-1.0 path: a 0.3 card');
      }
      assert.equal(card.capabilities.streaming, true);
      assert.equal(card.capabilities.pushNotifications, true);
      const skillIds = card.skills.map((s: { id: string }) => s.id).sort();
      assert.deepEqual(skillIds, ['book-flight', 'convert-currency', 'weather-forecast', 'weather-report'], 'the skills of the registered agents');
    }
    const client = await clientFactory(gw.keys.client).createFromUrl(`${gw.url}/.well-known/agent-card.json`, '');
    const before = callsTo('currency');
    const answer = await client.sendMessage(SendMessageRequest.fromJSON({ message: message('convert 100 euros to yen at today’s exchange rate') }));
    const task = Task.toJSON(answer as Task) as any;
    assert.equal(task.status.state, 'TASK_STATE_COMPLETED');
    assert.match(task.artifacts[0].parts[0].text, /^echo: convert 100 euros/);
    assert.equal(callsTo('currency'), before + 1, 'the currency agent did the work');
    assert.equal(task.metadata.switchboard.routing.agentId, ids.currency);
    assert.equal(task.metadata.switchboard.routing.reason, 'search');
    const got = await client.getTask({ tenant: '', id: task.id, historyLength: undefined });
    assert.equal(got.id, task.id);
  });

  test('a 0.3 client (@a2a-js/sdk 0.3.13) made from the card, read with no A2A-Version, runs a routed task', async () => {
    const client = await A2AClient03.fromCardUrl(`${gw.url}/.well-known/agent-card.json`, { fetchImpl: authFetch(gw.keys.client) });
    assert.equal((await client.getAgentCard()).url, `${gw.url}/a2a`);
    const before = callsTo('currency');
    const sent = await client.sendMessage({
      message: { kind: 'message', messageId: randomUUID(), role: 'user', parts: [{ kind: 'text', text: 'convert 20 dollars to euros at today’s exchange rate' }] },
    });
    assert.ok(!('error' in sent) && sent.result.kind === 'task', JSON.stringify(sent));
    assert.equal((sent.result.metadata as any).switchboard.routing.agentId, ids.currency, 'the routing decision, in the answer');
    const taskId = sent.result.id;
    await eventually(async () => {
      const got = await client.getTask({ id: taskId });
      return 'result' in got && got.result.status.state === 'completed' ? got.result : undefined;
    });
    assert.equal(callsTo('currency'), before + 1, 'the currency agent did the work');
  });
});

describe('routing a new task', () => {
  test('by metadata.agentId, even against the text', async () => {
    const { json } = await send('weather in Paris please', { agentId: ids.flights });
    assert.equal(json.result.task.status.state, 'TASK_STATE_COMPLETED');
    const routing = json.result.task.metadata.switchboard.routing;
    assert.deepEqual({ agentId: routing.agentId, reason: routing.reason }, { agentId: ids.flights, reason: 'metadata.agentId' });
    const route = await routeOf(json.result.task.id);
    assert.equal(route.requestedVia, 'router');
    assert.equal(route.requester, 'default');
    assert.equal(route.agentId, ids.flights);
    const stored = await eventually(async () => (await gw.db.pool.query('SELECT agent_id FROM tasks WHERE task_id = $1', [json.result.task.id])).rows[0]);
    assert.equal(stored.agent_id, ids.flights, 'the task projection names the executing agent');
  });

  test('by metadata.skillId', async () => {
    const { json } = await send('anything at all', { skillId: 'convert-currency' });
    assert.equal(json.result.task.status.state, 'TASK_STATE_COMPLETED');
    assert.equal(json.result.task.metadata.switchboard.routing.agentId, ids.currency);
    const route = await routeOf(json.result.task.id);
    assert.deepEqual([route.reason, route.skillId], ['metadata.skillId', 'convert-currency']);
  });

  test('by text: the best full-text match among healthy agents, with the skill that matched', async () => {
    const cases: [string, string, string][] = [
      ['book me two airline flights to Lisbon', 'flights', 'book-flight'],
      ['how much is 50 dollars in another currency', 'currency', 'convert-currency'],
      ['what is the weather forecast for Oslo', 'weather', 'weather-forecast'],
    ];
    for (const [text, key, skillId] of cases) {
      const { json } = await send(text);
      assert.equal(json.result?.task?.status.state, 'TASK_STATE_COMPLETED', JSON.stringify(json));
      const routing = json.result.task.metadata.switchboard.routing;
      assert.equal(routing.agentId, ids[key], `${text} → ${key}`);
      assert.equal(routing.reason, 'search');
      assert.equal(routing.skillId, skillId);
      assert.ok(routing.rank > 0);
    }
  });

  test('/api/v1/a2a answers too, and 0.3 message/send is routed the same way', async () => {
    const { json } = await send('airline flights to Rome', undefined, '/api/v1/a2a');
    assert.equal(json.result.task.metadata.switchboard.routing.agentId, ids.flights);
    const legacy = await rpc(`${gw.url}/a2a`, {
      jsonrpc: '2.0', id: 2, method: 'message/send',
      params: { message: { kind: 'message', messageId: randomUUID(), role: 'user', parts: [{ kind: 'text', text: 'currency exchange rates' }] } },
    });
    assert.equal(legacy.json.result.kind, 'task');
    assert.equal(legacy.json.result.metadata.switchboard.routing.agentId, ids.currency);
  });

  test('SendStreamingMessage is routed too, and a reconnect with Last-Event-ID replays the same task', async () => {
    const m = message('airline flights to Porto');
    const read = await sse(`${gw.url}/a2a`, { method: 'SendStreamingMessage', params: { message: m } });
    assert.equal(read.events[0]?.data.result.task.status.state, 'TASK_STATE_SUBMITTED', JSON.stringify(read.json ?? read.events[0]));
    const taskId = read.events[0]!.data.result.task.id;
    assert.equal(read.events.at(-1)!.data.result.statusUpdate?.status.state, 'TASK_STATE_COMPLETED');
    assert.equal((await routeOf(taskId)).agentId, ids.flights);
    const again = await sse(`${gw.url}/a2a`, { method: 'SendStreamingMessage', params: { message: m }, lastEventId: 1 });
    assert.deepEqual(again.events.map((e) => e.id), read.events.slice(1).map((e) => e.id), 'the rest of the same log');
  });

  test('the same message sent again returns the same task from the same agent', async () => {
    const m = message('airline flights to Oslo');
    const first = await rpc(`${gw.url}/a2a`, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: m } });
    const again = await rpc(`${gw.url}/a2a`, { jsonrpc: '2.0', id: 2, method: 'SendMessage', params: { message: m } });
    assert.equal(again.json.result.task.id, first.json.result.task.id);
    assert.equal(again.json.result.task.metadata.switchboard.routing.agentId, ids.flights);
  });

  test('ties go to the better reputation', async () => {
    const twins = [];
    for (const name of ['Poet Alpha', 'Poet Omega']) {
      const a = await startMutableAgent({ name: 'Sonnet writer', description: 'Writes sonnets', skills: [skill('sonnet', 'Sonnet', 'Writes a sonnet', ['poetry'])] });
      agents.push(a);
      twins.push((await register(gw, a.url, { name })).id);
    }
    // One failure on record for the first twin, one success for the second.
    const now = new Date();
    for (const [agentId, outcome] of [[twins[0], 'failed'], [twins[1], 'completed']]) {
      await gw.db.pool.query(
        "INSERT INTO trust_events (tenant, task_id, agent_id, outcome, started_at, ended_at) VALUES ('default', $1, $2, $3, $4, $4)",
        [randomUUID(), agentId, outcome, now],
      );
    }
    const { json } = await send('a sonnet please');
    const routing = json.result.task.metadata.switchboard.routing;
    assert.equal(routing.agentId, twins[1]);
    assert.deepEqual(routing.tiedWith, [twins[0]]);
  });
});

describe('agents that cannot take the task', () => {
  test('a down agent is skipped by text routing and refused by name; its skill goes to another agent', async () => {
    const weather = called.weather as Awaited<ReturnType<typeof startMutableAgent>>;
    weather.state.rpcStatus = 503;
    for (let i = 0; i < 3; i++) await gw.fetch(`${gw.url}/agents/${ids.weather}/refresh`, { method: 'POST' }, 'operator');
    const status = ((await (await gw.fetch(`${gw.url}/agents/${ids.weather}`)).json()) as { status: string }).status;
    assert.equal(status, 'down');

    const { json } = await send('what is the weather forecast for Oslo');
    assert.equal(json.result.task.metadata.switchboard.routing.agentId, ids.meteo, 'the healthy weather agent');

    const tasks = await taskCount();
    const named = await send('weather', { agentId: ids.weather });
    assert.equal(named.json.error.code, -32051);
    assert.match(named.json.error.message, /is down/);
    const bySkill = await send('weather', { skillId: 'weather-forecast' });
    assert.equal(bySkill.json.error.code, -32051);
    assert.equal(await taskCount(), tasks, 'nothing was started');
    weather.state.rpcStatus = undefined;
  });

  test('unroutable messages get -32051 (or -32602 for bad metadata) and start nothing', async () => {
    const tasks = await taskCount();
    for (const [text, metadata] of [
      ['zzyzx qwrtplk', undefined],
      ['book a flight', { agentId: 'no-such-agent' }],
      ['book a flight', { skillId: 'no-such-skill' }],
      ['book a flight', { agentId: ids.flights, skillId: 'convert-currency' }],
    ] as const) {
      const { status, json } = await send(text, metadata);
      assert.equal(status, 200);
      assert.equal(json.error?.code, -32051, `${text} ${JSON.stringify(metadata)}: ${JSON.stringify(json)}`);
    }
    const bad = await send('book a flight', { agentId: 42 });
    assert.equal(bad.json.error.code, -32602);
    const streamed = await rpc(`${gw.url}/a2a`, { jsonrpc: '2.0', id: 3, method: 'SendStreamingMessage', params: { message: message('zzyzx qwrtplk') } });
    assert.equal(streamed.json.error.code, -32051, 'a stream that cannot be routed is a plain JSON-RPC error');
    assert.equal(await taskCount(), tasks, 'no message was claimed, no task started');
  });
});

describe('existing tasks through /a2a', () => {
  test('GetTask, a follow-up message, CancelTask and ListTasks work for a task of any agent', async () => {
    const asking = await startAskingAgent();
    agents.push(asking);
    const { id: askingId } = await register(gw, asking.url);
    const a2a = (method: string, params: unknown) => rpc(`${gw.url}/a2a`, { jsonrpc: '2.0', id: 1, method, params });

    const first = await a2a('SendMessage', { message: message('hi', { agentId: askingId }) });
    assert.equal(first.json.result.task.status.state, 'TASK_STATE_INPUT_REQUIRED');
    const taskId = first.json.result.task.id;
    const got = await a2a('GetTask', { id: taskId });
    assert.equal(got.json.result.status.state, 'TASK_STATE_INPUT_REQUIRED');
    const reply = await a2a('SendMessage', { message: { ...message('Ada'), taskId, contextId: first.json.result.task.contextId } });
    assert.equal(reply.json.result.task.status.state, 'TASK_STATE_COMPLETED');

    const second = await a2a('SendMessage', { message: message('hello', { agentId: askingId }) });
    const canceled = await a2a('CancelTask', { id: second.json.result.task.id });
    assert.equal(canceled.json.result.status.state, 'TASK_STATE_CANCELED');

    // ListTasks spans every agent: the asking agent's tasks and the others' (the projection is written by the workflow).
    const listed = await eventually(async () => {
      const r = await a2a('ListTasks', { pageSize: 100 });
      const agentIds = new Set(await Promise.all(r.json.result.tasks.map(async (t: { id: string }) => (await routeOf(t.id)).agentId)));
      const has = r.json.result.tasks.some((t: { id: string }) => t.id === second.json.result.task.id);
      return has && agentIds.has(ids.flights) && agentIds.has(askingId) ? r.json.result : undefined;
    });
    assert.ok(listed.tasks.some((t: { id: string }) => t.id === taskId));

    const unknown = await a2a('GetTask', { id: randomUUID() });
    assert.equal(unknown.json.error.code, -32001);
    const direct = await routeOf(randomUUID());
    assert.ok(direct.error);
  });

  test('a task started at the agent endpoint shows requestedVia agent', async () => {
    const { json } = await rpc(`${gw.url}/agents/${ids.flights}/a2a`, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: message('flights') } });
    const taskId = json.result.task.id;
    assert.equal(json.result.task.metadata?.switchboard, undefined, 'no routing on the per-agent endpoint');
    const route = await eventually(async () => {
      const r = await routeOf(taskId);
      return r.requestedVia ? r : undefined;
    });
    assert.deepEqual([route.requestedVia, route.agentId], ['agent', ids.flights]);
  });
});
