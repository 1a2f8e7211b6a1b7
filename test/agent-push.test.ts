/**
 * Following an agent's task by its push notifications (issue 13): an @a2a-js/sdk agent that declares
 * `capabilities.pushNotifications` gets a push config with the non-blocking send, really pushes (the SDK's
 * DefaultPushNotificationSender, 0.3 bodies through its legacy-aware sender), and the task ends on the push.
 *
 * The main gateway polls a push-followed task only every 10 minutes: a task that ends there within the test ended
 * by push, and every GetTask the agent sees was asked for by a push. A second gateway, on the same Temporal
 * server with its own queue and schema, polls every 2 s, for the agent whose pushes are lost. Real Temporal,
 * PostgreSQL (NOTIFY wakes the activity), HTTP.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Task, TaskState } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import { DefaultPushNotificationSender, type ExecutionEventBus, type PushNotificationSender, type RequestContext } from '@a2a-js/sdk/server';
import { createLegacyAwarePushNotificationSender } from '@a2a-js/sdk/compat/v0_3/server';
import { AgentPool, type TestAgent } from './agents';
import { SlowExecutor } from './agents/slow';
import { BaseExecutor, startV1Agent, taskEvent, textOf as agentText, type AgentOptions } from './agents/v1';
import { type Gateway, clientFactory, eventually, register, sendText, startGateway, textOf } from './helpers/harness';

let gw: Gateway;
let polled: Gateway;
const agents = new AgentPool();
const NEVER_MS = 10 * 60_000;

before(async () => {
  gw = await startGateway({ agentPushPollMs: NEVER_MS });
  polled = await startGateway({ agentPushPollMs: 2_000, temporal: { env: gw.env, taskQueue: `${gw.taskQueue}-polled` } });
});
after(async () => {
  await polled?.close();
  await gw?.close();
  await agents.closeAll();
});

/** Works until the test releases it (by the message's text), then completes with `done: <text>`. */
class GatedExecutor extends BaseExecutor {
  /** The agent's task id of each message text. */
  readonly tasks = new Map<string, string>();
  private readonly gates = new Map<string, () => void>();

  async run(ctx: RequestContext, bus: ExecutionEventBus): Promise<void> {
    bus.publish(taskEvent(ctx, TaskState.TASK_STATE_WORKING));
    const text = agentText(ctx.userMessage);
    const released = new Promise<void>((r) => this.gates.set(text, r));
    this.tasks.set(text, ctx.taskId);
    await released;
    this.complete(ctx, bus, `done: ${text}`);
  }

  release(text: string): void {
    this.gates.get(text)?.();
  }

  stop(): void {
    for (const open of this.gates.values()) open();
  }
}

/** A push sender that loses every push (and counts them). */
class DroppingSender implements PushNotificationSender {
  dropped = 0;
  async send(): Promise<void> {
    this.dropped++;
  }
}

/** Loses the pushes while `losing`, else sends them as the SDK does. */
class SwitchableSender implements PushNotificationSender {
  losing = true;
  constructor(private readonly inner: PushNotificationSender) {}
  async send(...args: Parameters<PushNotificationSender['send']>): Promise<void> {
    if (!this.losing) await this.inner.send(...args);
  }
}

async function clientFor(g: Gateway, agentUrl: string, extra: Record<string, unknown> = {}): Promise<Client> {
  const { base } = await register(g, agentUrl, extra);
  return clientFactory(g.keys.client).createFromUrl(`${base}/.well-known/agent-card.json`, '');
}

const stateOf = async (client: Client, id: string) => (Task.toJSON(await client.getTask({ tenant: '', id })) as any).status.state as string;
const calls = (agent: TestAgent, ...methods: string[]) => agent.calls.filter((c) => methods.includes(c.method));
/** GetTasks (1.0 or 0.3) the agent saw for one of its tasks. */
const looks = (agent: TestAgent, agentTaskId: string) => calls(agent, 'GetTask', 'tasks/get').filter((c) => c.params?.id === agentTaskId).length;

/** The push config the agent was sent with the message whose text is `text` (1.0 or 0.3 shape). */
function pushConfigOf(agent: TestAgent, text: string): { url: string; token: string; id?: string } | undefined {
  const sendCall = calls(agent, 'SendMessage', 'message/send').find((c) => JSON.stringify(c.params?.message?.parts).includes(text));
  const conf = sendCall?.params?.configuration;
  return conf?.taskPushNotificationConfig ?? conf?.pushNotificationConfig;
}

async function push(url: string, token: string | undefined, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/a2a+json', ...(token ? { 'x-a2a-notification-token': token } : {}), ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : undefined, headers: res.headers };
}

const completedPush = (taskId: string) => ({ statusUpdate: { taskId, contextId: 'c', status: { state: 'TASK_STATE_COMPLETED' } } });

async function gatedAgent(name: string, opts: AgentOptions = {}) {
  const executor = new GatedExecutor();
  const agent = await agents.add(startV1Agent(executor, name, 'Works until released; pushes', { streaming: false, pushNotifications: true, ...opts }));
  return { agent, executor };
}

/** Sends `text` non-blocking and waits until the agent runs it: its task id and push config. */
async function started(client: Client, agent: TestAgent, executor: GatedExecutor, text: string) {
  const task = await sendText(client, text, true);
  const agentTaskId = await eventually(() => executor.tasks.get(text), 15_000, `the agent to run "${text}"`);
  const config = pushConfigOf(agent, text);
  assert.ok(config, 'the send carried a push config');
  return { task, agentTaskId, config: config as { url: string; token: string } };
}

describe('a task followed by the agent\'s push notifications', { concurrency: true }, () => {
  test('1.0: the task ends on the push with one GetTask; the same agent without push is polled several times', async () => {
    const pushing = await agents.add(startV1Agent(new SlowExecutor(4_000), 'Pushing', 'Pushes', { streaming: false, pushNotifications: true }));
    const polling = await agents.add(startV1Agent(new SlowExecutor(4_000), 'Polled', 'No pushes', { streaming: false }));
    const [byPush, byPoll] = await Promise.all([
      clientFor(gw, pushing.url).then((c) => sendText(c, 'push me')),
      clientFor(gw, polling.url).then((c) => sendText(c, 'poll me')),
    ]);
    assert.equal(byPush.status.state, 'TASK_STATE_COMPLETED', JSON.stringify(byPush.status));
    assert.equal(textOf(byPush.artifacts[0].parts), 'done: push me');
    assert.equal(byPoll.status.state, 'TASK_STATE_COMPLETED');

    const config = pushConfigOf(pushing, 'push me')!;
    assert.equal(config.id, 'switchboard');
    assert.match(config.url, new RegExp(`^${gw.url}/agent-push/[A-Za-z0-9_-]+$`));
    assert.match(config.token, /^v1\./);
    assert.equal(calls(pushing, 'SendMessage')[0]!.params.configuration.returnImmediately, true, 'still non-blocking');
    assert.equal(pushConfigOf(polling, 'poll me'), undefined, 'an agent that does not declare pushes gets no config');

    const pushGets = calls(pushing, 'GetTask').length;
    const pollGets = calls(polling, 'GetTask').length;
    // Followed by push: the one GetTask the completed push asked for (the fallback poll is 10 minutes away).
    assert.equal(pushGets, 1, `GetTasks with push: ${pushGets}`);
    assert.ok(pollGets >= 4, `GetTasks without push: ${pollGets}`);
  });

  test('0.3: the config goes as pushNotificationConfig, the bare 0.3 events the agent pushes end the task', async () => {
    const agent = await agents.add(
      startV1Agent(new SlowExecutor(2_000), 'Pushing 0.3', 'Pushes 0.3 bodies', {
        streaming: false,
        pushNotifications: { sender: (store) => createLegacyAwarePushNotificationSender(store) },
      }),
    );
    const client = await clientFor(gw, agent.url, { protocol: '0.3' });
    const task = await sendText(client, 'old school');
    assert.equal(task.status.state, 'TASK_STATE_COMPLETED', JSON.stringify(task.status));
    assert.equal(textOf(task.artifacts[0].parts), 'done: old school');
    const sent = calls(agent, 'message/send');
    assert.equal(sent.length, 1);
    assert.equal(sent[0]!.params.configuration.blocking, false);
    assert.match(sent[0]!.params.configuration.pushNotificationConfig.url, /\/agent-push\//);
    assert.equal(calls(agent, 'tasks/get').length, 1, 'one tasks/get, asked for by the push');
  });

  test('a bad token is refused (401), a bad body is 400, a huge one 413; a forged "completed" (through another process) costs one GetTask and changes nothing', async () => {
    const { agent, executor } = await gatedAgent('Gated');
    const client = await clientFor(gw, agent.url);
    const { task, agentTaskId, config } = await started(client, agent, executor, 'hold on');

    const missing = await push(config.url, undefined, completedPush(agentTaskId));
    assert.equal(missing.status, 401);
    assert.match(missing.json.error, /token is missing/);
    assert.match(missing.headers.get('www-authenticate') ?? '', /^Bearer realm="switchboard"/);
    const tampered = `${config.token.slice(0, -2)}${config.token.endsWith('AA') ? 'BB' : 'AA'}`;
    assert.equal((await push(config.url, tampered, completedPush(agentTaskId))).status, 401);
    assert.equal((await push(config.url, 'not-a-token', completedPush(agentTaskId))).status, 401);
    assert.equal((await push(config.url, undefined, completedPush(agentTaskId), { authorization: 'Bearer nope' })).status, 401);
    // The token is bound to its URL's id: another id (made up) refuses it.
    const unknown = await push(`${gw.url}/agent-push/${randomUUID()}`, config.token, completedPush(agentTaskId));
    assert.equal(unknown.status, 401);
    assert.match(unknown.json.error, /not the token issued for this push URL/);

    for (const body of ['not json', '[]', '{}', { statusUpdate: { taskId: agentTaskId, status: { state: 'bogus' } } }, { kind: 'weird', id: agentTaskId }]) {
      const res = await push(config.url, config.token, body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.match(res.json.error, /^Invalid push: /);
    }
    assert.equal((await push(config.url, config.token, 'x'.repeat(5 * 1024 * 1024))).status, 413);
    // Progress is accepted and wakes no one.
    const progress = await push(config.url, config.token, { statusUpdate: { taskId: agentTaskId, status: { state: 'TASK_STATE_WORKING' } } });
    assert.deepEqual([progress.status, progress.json], [200, { accepted: true, wake: false }]);
    assert.equal(looks(agent, agentTaskId), 0, 'nothing refused or progress-only made the gateway look');

    // A forged (or repeated) "completed" with the right token (as Authorization: Bearer), sent to another gateway
    // process (its own app, pool and hub, sharing the secrets key): its NOTIFY wakes the activity here, which looks,
    // sees the agent's task still working, and goes on waiting.
    const elsewhere = config.url.replace(gw.url, polled.url);
    assert.notEqual(elsewhere, config.url);
    const forged = await push(elsewhere, undefined, completedPush(agentTaskId), { authorization: `Bearer ${config.token}` });
    assert.deepEqual([forged.status, forged.json], [200, { accepted: true, wake: true }]);
    await eventually(() => looks(agent, agentTaskId) === 1 || undefined, 15_000, 'the GetTask the push asked for');
    assert.equal(await stateOf(client, task.id), 'TASK_STATE_WORKING', 'the push did not change the task');

    executor.release('hold on');
    await eventually(async () => (await stateOf(client, task.id)) === 'TASK_STATE_COMPLETED' || undefined, 30_000, 'the task to complete');
    assert.equal(looks(agent, agentTaskId), 2, 'one GetTask per settling push');
    assert.equal(calls(agent, 'SendMessage').length, 1);
  });

  test("a push for another tenant's task neither wakes nor alters it", async () => {
    const admin = (path: string, body: unknown) =>
      fetch(`${gw.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${gw.keys.admin}` }, body: JSON.stringify(body) }).then(
        async (r) => ({ status: r.status, json: (await r.json()) as any }),
      );
    assert.equal((await admin('/tenants', { id: 'push-b', name: 'Push B' })).status, 201);
    const bOperator = (await admin('/tenants/push-b/keys', { role: 'operator', name: 'b operator' })).json.key as string;
    const bClient = (await admin('/tenants/push-b/keys', { role: 'client', name: 'b client' })).json.key as string;

    const { agent, executor } = await gatedAgent('Shared');
    const clientA = await clientFor(gw, agent.url);
    const registered = await fetch(`${gw.url}/agents`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${bOperator}` },
      body: JSON.stringify({ url: agent.url }),
    }).then((r) => r.json() as Promise<{ id: string }>);
    const clientB = await clientFactory(bClient).createFromUrl(`${gw.url}/agents/${registered.id}/.well-known/agent-card.json`, '');

    const a = await started(clientA, agent, executor, 'tenant a');
    const b = await started(clientB, agent, executor, 'tenant b');
    assert.notEqual(a.config.url, b.config.url);

    // B's token at A's URL: refused.
    assert.equal((await push(a.config.url, b.config.token, completedPush(a.agentTaskId))).status, 401);
    // B's own URL and token, naming A's task: accepted there, but B's follower looks only at B's task, and A's
    // follower is not told at all.
    assert.equal((await push(b.config.url, b.config.token, completedPush(a.agentTaskId))).status, 200);
    assert.equal(await stateOf(clientA, a.task.id), 'TASK_STATE_WORKING');
    assert.equal(await stateOf(clientB, b.task.id), 'TASK_STATE_WORKING');

    executor.release('tenant a');
    executor.release('tenant b');
    await eventually(async () => (await stateOf(clientA, a.task.id)) === 'TASK_STATE_COMPLETED' || undefined, 30_000, 'A to complete');
    await eventually(async () => (await stateOf(clientB, b.task.id)) === 'TASK_STATE_COMPLETED' || undefined, 30_000, 'B to complete');
    // Each follower looked once, when its own task's completion was pushed: the forged pushes woke neither.
    assert.equal(looks(agent, a.agentTaskId), 1);
    assert.equal(looks(agent, b.agentTaskId), 1);
    const finalA = Task.toJSON(await clientA.getTask({ tenant: '', id: a.task.id })) as any;
    assert.equal(textOf(finalA.artifacts[0].parts), 'done: tenant a');
  });

  test('an agent whose pushes are lost is polled from its next task on, and trusted again once a push of it arrives', async () => {
    let sender!: SwitchableSender;
    const agent = await agents.add(
      startV1Agent(new SlowExecutor(3_000), 'Unreachable', 'Cannot reach the webhook for a while', {
        streaming: false,
        pushNotifications: { sender: (store) => (sender = new SwitchableSender(new DefaultPushNotificationSender(store))) },
      }),
    );
    const client = await clientFor(polled, agent.url);
    const getTasks = () => calls(agent, 'GetTask').length;
    // Pushes lost: the fallback poll (every 2 s here) finds the first task done, at its second look.
    assert.equal((await sendText(client, 'first')).status.state, 'TASK_STATE_COMPLETED');
    const first = getTasks();
    assert.ok(first <= 3, `followed by push, its fallback polled ${first} times`);
    // The next task is polled (at once, then 250 ms doubling): more looks, none waiting for the fallback.
    assert.equal((await sendText(client, 'second')).status.state, 'TASK_STATE_COMPLETED');
    const second = getTasks() - first;
    assert.ok(second >= 4, `polled as an agent without pushes: ${second} GetTasks`);
    assert.ok(pushConfigOf(agent, 'second'), 'still sent a push config');
    // Its pushes arrive again: the polled task is woken by its push, so the one after is followed by push again.
    sender.losing = false;
    assert.equal((await sendText(client, 'third')).status.state, 'TASK_STATE_COMPLETED');
    const third = getTasks() - first - second;
    assert.equal((await sendText(client, 'fourth')).status.state, 'TASK_STATE_COMPLETED');
    const fourth = getTasks() - first - second - third;
    // Followed by push: the 2 s fallback poll once (the task works 3 s), then the push's look.
    assert.ok(fourth <= 3, `trusted again: ${fourth} GetTasks (the third: ${third})`);
  });

  test('pushes that never arrive: the fallback poll ends the task', async () => {
    const sender = new DroppingSender();
    const agent = await agents.add(startV1Agent(new SlowExecutor(3_000), 'Lossy', 'Its pushes are lost', { streaming: false, pushNotifications: { sender: () => sender } }));
    const client = await clientFor(polled, agent.url);
    const task = await sendText(client, 'anyone there');
    assert.equal(task.status.state, 'TASK_STATE_COMPLETED', JSON.stringify(task.status));
    assert.equal(textOf(task.artifacts[0].parts), 'done: anyone there');
    assert.ok(pushConfigOf(agent, 'anyone there')?.url.startsWith(`${polled.url}/agent-push/`));
    assert.ok(sender.dropped >= 2, `the agent pushed (and lost) ${sender.dropped} events`);
    assert.ok(calls(agent, 'GetTask').length >= 1, 'the fallback poll read the task');
    assert.equal(calls(agent, 'SendMessage').length, 1);
  });
});
