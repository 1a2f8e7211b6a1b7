/**
 * The A2A binding scenario table: each scenario runs with an @a2a-js/sdk client that prefers one client binding
 * (JSON-RPC, HTTP+JSON, gRPC) against agents reached over one agent binding. test/transports.test.ts runs every
 * scenario for every pair; the agent-side bindings (REST and gRPC agents) add rows to AGENT_BINDINGS's users
 * without touching the scenarios.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { type Message, Role, SendMessageRequest, type StreamResponse, Task, TaskState } from '@a2a-js/sdk';
import { TaskNotFoundError } from '@a2a-js/sdk/errors';
import {
  type Client,
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
} from '@a2a-js/sdk/client';
import { GrpcTransportFactory } from '@a2a-js/sdk/client/grpc';
import type { TestAgent } from '../agents';
import { authFetch, eventually, type Gateway } from './harness';

export const CLIENT_BINDINGS = ['JSONRPC', 'HTTP+JSON', 'GRPC'] as const;
export type ClientBinding = (typeof CLIENT_BINDINGS)[number];

/** The test agents a scenario may use, registered on the gateway, all reached over one agent binding. */
export interface ScenarioAgents {
  echo: { id: string; agent: TestAgent };
  asking: { id: string; agent: TestAgent };
  slow: { id: string; agent: TestAgent };
  chunky: { id: string; agent: TestAgent; chunks: number };
  /** Answers every message with a Message and makes no task. */
  replying: { id: string; agent: TestAgent };
}

export interface ScenarioContext {
  gw: Gateway;
  binding: ClientBinding;
  agents: ScenarioAgents;
  /** An SDK client for the agent's gateway card that prefers `binding`, carrying `key` (default: the client key). */
  client(agentId: string, key?: string): Promise<Client>;
}

export interface Scenario {
  name: string;
  run(ctx: ScenarioContext): Promise<void>;
}

/** A gRPC interceptor that sends `key` as `authorization: Bearer` and hands the response headers to `onHeaders`. */
export function grpcAuth(key: string, onHeaders?: (md: grpc.Metadata) => void): grpc.Interceptor {
  return (options, nextCall) =>
    new grpc.InterceptingCall(nextCall(options), {
      start(metadata, listener, next) {
        metadata.set('authorization', `Bearer ${key}`);
        next(metadata, {
          ...listener,
          onReceiveMetadata(md, nextMd) {
            onHeaders?.(md);
            nextMd(md);
          },
        });
      },
    });
}

/** An SDK client factory that prefers `binding` among the gateway card's interfaces. */
export function bindingFactory(binding: ClientBinding, key: string, onGrpcHeaders?: (md: grpc.Metadata) => void): ClientFactory {
  const fetchImpl = authFetch(key);
  return new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [
        new JsonRpcTransportFactory({ fetchImpl }),
        new RestTransportFactory({ fetchImpl }),
        new GrpcTransportFactory({ grpcCallOptions: { interceptors: [grpcAuth(key, onGrpcHeaders)] } }),
      ],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
      preferredTransports: [binding],
    }),
  );
}

export const send = (text: string, extra: Record<string, unknown> = {}) =>
  SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...extra } });

export function asTask(result: Message | Task): Task {
  assert.ok('status' in result, `expected a task, got ${JSON.stringify(result)}`);
  return result as Task;
}

export const textOfMessage = (m: Message) => m.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');

export const textOfTask = (t: Task) => t.artifacts.flatMap((a) => a.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : ''))).join('');

async function collect(stream: AsyncGenerator<StreamResponse>, stopAfter = Infinity): Promise<StreamResponse[]> {
  const out: StreamResponse[] = [];
  for await (const e of stream) {
    out.push(e);
    if (out.length >= stopAfter) break;
  }
  return out;
}

const json = (events: StreamResponse[]) => events.map((e) => JSON.stringify(e));

export const SCENARIOS: Scenario[] = [
  {
    name: 'blocking send: the task completes with the agent\'s answer',
    async run({ client, agents }) {
      const c = await client(agents.echo.id);
      const task = asTask(await c.sendMessage(send('hello')));
      assert.equal(task.status?.state, TaskState.TASK_STATE_COMPLETED);
      assert.match(textOfTask(task), /hello/);
    },
  },
  {
    name: 'non-blocking send answers at once; GetTask then shows the task completed',
    async run({ client, agents }) {
      const c = await client(agents.echo.id);
      const first = asTask(await c.sendMessage(SendMessageRequest.fromJSON({ ...SendMessageRequest.toJSON(send('later')) as object, configuration: { returnImmediately: true } })));
      assert.ok(first.id);
      const done = await eventually(async () => {
        const t = await c.getTask({ id: first.id, tenant: '' });
        return t.status?.state === TaskState.TASK_STATE_COMPLETED ? t : undefined;
      }, 20_000, 'the task to complete');
      assert.match(textOfTask(done), /later/);
    },
  },
  {
    name: 'stream, drop after 3 events, resume with Last-Event-ID: 3: exactly the rest',
    async run({ client, agents }) {
      const c = await client(agents.chunky.id);
      const head = await collect(c.sendMessageStream(send('go')), 3);
      assert.equal(head.length, 3);
      const taskId = head[0].payload?.$case === 'task' ? head[0].payload.value.id : undefined;
      assert.ok(taskId, 'the first event is the task');
      // A new task's events are log positions 1, 2, 3, …: the third received is position 3.
      const rest = await collect(c.resubscribeTask({ id: taskId, tenant: '' }, { serviceParameters: { 'Last-Event-ID': '3' } }));
      const all = await collect(c.resubscribeTask({ id: taskId, tenant: '' }, { serviceParameters: { 'Last-Event-ID': '0' } }));
      assert.deepEqual(json(head), json(all.slice(0, 3)));
      assert.deepEqual(json(rest), json(all.slice(3)));
      const last = all.at(-1)!;
      assert.equal(last.payload?.$case === 'statusUpdate' && last.payload.value.status?.state, TaskState.TASK_STATE_COMPLETED);
      assert.ok(all.length >= agents.chunky.chunks + 2, `every chunk streamed (${all.length} events)`);
    },
  },
  {
    name: 'input-required, then the answer on the same task completes it',
    async run({ client, agents }) {
      const c = await client(agents.asking.id);
      const asked = asTask(await c.sendMessage(send('hi')));
      assert.equal(asked.status?.state, TaskState.TASK_STATE_INPUT_REQUIRED);
      const done = asTask(await c.sendMessage(send('Ada', { taskId: asked.id, contextId: asked.contextId })));
      assert.equal(done.id, asked.id);
      assert.equal(done.status?.state, TaskState.TASK_STATE_COMPLETED);
      assert.match(textOfTask(done), /Hello, Ada!/);
    },
  },
  {
    name: 'SubscribeToTask stays open at input-required: the answer, sent on another connection, shows on it; it ends completed',
    async run({ client, agents }) {
      const c = await client(agents.asking.id);
      const asked = asTask(await c.sendMessage(send('hi')));
      assert.equal(asked.status?.state, TaskState.TASK_STATE_INPUT_REQUIRED);
      const events: StreamResponse[] = [];
      let subscribed!: () => void;
      const first = new Promise<void>((r) => (subscribed = r));
      const reading = (async () => {
        for await (const e of c.resubscribeTask({ id: asked.id, tenant: '' })) {
          events.push(e);
          subscribed();
        }
      })();
      reading.catch(() => subscribed());
      await first;
      // §3.1.6: the stream ends at a terminal state only; the follow-up comes from another client.
      const other = await client(agents.asking.id);
      const done = asTask(await other.sendMessage(send('Ada', { taskId: asked.id })));
      assert.equal(done.status?.state, TaskState.TASK_STATE_COMPLETED);
      await reading;
      assert.equal(events[0]?.payload?.$case === 'task' && events[0].payload.value.status?.state, TaskState.TASK_STATE_INPUT_REQUIRED, 'the task first');
      const last = events.at(-1)!;
      assert.equal(last.payload?.$case === 'statusUpdate' && last.payload.value.status?.state, TaskState.TASK_STATE_COMPLETED, 'the stream ends at completed');
      const text = events.flatMap((e) => (e.payload?.$case === 'artifactUpdate' ? e.payload.value.artifact!.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')) : []));
      assert.deepEqual(text, ['Hello, Ada!'], "the answer's artifact came on the stream");
    },
  },
  {
    name: "an agent's Message answer: SendMessage gets that Message, a stream that Message alone; its context goes on",
    async run({ client, agents }) {
      const c = await client(agents.replying.id);
      const answer = await c.sendMessage(send('hello'));
      assert.ok(!('status' in answer), `a Message, not a task: ${JSON.stringify(answer)}`);
      const reply = answer as Message;
      assert.equal(reply.role, Role.ROLE_AGENT);
      assert.equal(textOfMessage(reply), 'reply: hello');
      assert.equal(reply.taskId, '', 'no task was made');
      assert.ok(reply.contextId, 'the context to go on in');
      // §3.1.2 "Message-only stream": exactly one Message, then the end. A new message in the same context.
      const streamed = await collect(c.sendMessageStream(send('again', { contextId: reply.contextId })));
      assert.deepEqual(streamed.map((e) => e.payload?.$case), ['message']);
      const again = streamed[0]!.payload!.value as Message;
      assert.equal(textOfMessage(again), 'reply: again');
      assert.equal(again.contextId, reply.contextId);
    },
  },
  {
    name: 'cancel: the task ends canceled and the cancel reaches the agent',
    async run({ client, agents }) {
      const c = await client(agents.slow.id);
      const before = agents.slow.agent.cancels.length;
      const events = c.sendMessageStream(send('work'));
      // The agent names its task once it is working: then the cancel has somewhere to go.
      let taskId: string | undefined;
      for await (const e of events) {
        if (e.payload?.$case === 'task') taskId = e.payload.value.id;
        if (e.payload?.$case === 'statusUpdate' && e.payload.value.status?.state === TaskState.TASK_STATE_WORKING) break;
      }
      assert.ok(taskId);
      const canceled = await c.cancelTask({ id: taskId, tenant: '', metadata: undefined });
      assert.equal(canceled.status?.state, TaskState.TASK_STATE_CANCELED);
      await eventually(() => agents.slow.agent.cancels.length > before || undefined, 20_000, 'the agent to get the cancel');
    },
  },
  {
    name: 'get and list: the task is there, ListTasks finds it',
    async run({ client, agents }) {
      const c = await client(agents.echo.id);
      const task = asTask(await c.sendMessage(send('find me')));
      const got = await c.getTask({ id: task.id, tenant: '' });
      assert.equal(got.id, task.id);
      assert.equal(got.status?.state, TaskState.TASK_STATE_COMPLETED);
      const page = await c.listTasks({ tenant: '', contextId: task.contextId, status: TaskState.TASK_STATE_UNSPECIFIED, pageToken: '', includeArtifacts: false } as never);
      assert.deepEqual(page.tasks.map((t) => t.id), [task.id]);
    },
  },
  {
    name: 'push configs: create, get, list, delete',
    async run({ client, agents }) {
      const c = await client(agents.asking.id);
      const task = asTask(await c.sendMessage(send('hi')));
      const created = await c.createTaskPushNotificationConfig({ tenant: '', id: '', taskId: task.id, url: 'https://hooks.example.com/a2a', token: 'tok', authentication: undefined });
      assert.ok(created.id);
      assert.equal(created.url, 'https://hooks.example.com/a2a');
      const got = await c.getTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: created.id });
      assert.equal(got.id, created.id);
      assert.equal(got.url, 'https://hooks.example.com/a2a');
      const list = await c.listTaskPushNotificationConfig({ tenant: '', taskId: task.id, pageSize: 0, pageToken: '' });
      assert.deepEqual(list.configs.map((x) => x.id), [created.id]);
      await c.deleteTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: created.id });
      const after = await c.listTaskPushNotificationConfig({ tenant: '', taskId: task.id, pageSize: 0, pageToken: '' });
      assert.deepEqual(after.configs, []);
    },
  },
  {
    name: 'an unknown task is TaskNotFound in every binding',
    async run({ client, agents }) {
      const c = await client(agents.echo.id);
      await assert.rejects(c.getTask({ id: randomUUID(), tenant: '' }), (err) => err instanceof TaskNotFoundError);
      await assert.rejects(c.cancelTask({ id: randomUUID(), tenant: '', metadata: undefined }), (err) => err instanceof TaskNotFoundError);
    },
  },
];

/** A task as each binding's SDK client reads it, for the transport-equivalence check. */
export async function readEverywhere(gw: Gateway, agentId: string, taskId: string): Promise<Record<ClientBinding, unknown>> {
  const out = {} as Record<ClientBinding, unknown>;
  for (const b of CLIENT_BINDINGS) {
    const c = await bindingFactory(b, gw.keys.client).createFromUrl(`${gw.url}/agents/${agentId}/`);
    assert.equal(c.transport.protocolName, b);
    out[b] = Task.toJSON(await c.getTask({ id: taskId, tenant: '' }));
  }
  return out;
}
