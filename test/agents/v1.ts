// Building blocks for protocol-1.0 agents on @a2a-js/sdk 1.x: event builders (ts-proto shapes), the card, the mount.
import { randomUUID } from 'node:crypto';
import type express from 'express';
import { A2A_PROTOCOL_VERSION, AGENT_CARD_PATH, Role, TaskState } from '@a2a-js/sdk';
import type { AgentCard, Message, Part } from '@a2a-js/sdk';
import { duplicateInterfacesForLegacy } from '@a2a-js/sdk/compat/v0_3';
import {
  AgentEvent,
  DefaultPushNotificationSender,
  DefaultRequestHandler,
  InMemoryPushNotificationStore,
  InMemoryTaskStore,
  type PushNotificationSender,
  type PushNotificationStore,
  type AgentExecutor,
  type TaskStore,
  type ExecutionEventBus,
  type RequestContext,
} from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, restHandler, UserBuilder } from '@a2a-js/sdk/server/express';
import { A2AService, grpcService } from '@a2a-js/sdk/server/grpc';
import * as grpc from '@grpc/grpc-js';
import express_ from 'express';
import { REST_PATH, RPC_PATH, startAgentServer, type RecordedCall, type Recorder, type TestAgent } from './harness';

/** The bindings a test agent serves (A2A 1.0 `protocolBinding`). */
export type TestBinding = 'JSONRPC' | 'HTTP+JSON' | 'GRPC';

/**
 * A failure the agent answers a call with instead of handling it, in its binding's own form: `unavailable` is
 * HTTP 503 (JSON-RPC, REST) or gRPC UNAVAILABLE; `invalid-argument` is HTTP 400 or gRPC INVALID_ARGUMENT.
 */
export type InjectedFault = 'unavailable' | 'invalid-argument';

export interface AgentOptions {
  /** If set, the final (terminal) status update — and so the final task's metadata — carries {"cost": cost}. */
  cost?: number;
  /** capabilities.streaming in the card (default true). */
  streaming?: boolean;
  /** Also serve protocol 0.3 on the same endpoint via the SDK's compat layer (default true). */
  legacyCompat?: boolean;
  /** Where the SDK keeps the agent's tasks (default: its InMemoryTaskStore). */
  taskStore?: TaskStore;
  /**
   * The bindings served, in the card's order (default JSON-RPC only): HTTP+JSON on the same express app at
   * REST_PATH, gRPC on a @grpc/grpc-js server of its own on 127.0.0.1 (card URL `127.0.0.1:PORT`). The card
   * lists only these (plus their 0.3 twins for JSON-RPC and HTTP+JSON when legacyCompat is on).
   */
  bindings?: TestBinding[];
  /** Asked for every recorded call (after it is recorded): a fault makes the agent answer with it instead. */
  fault?: (call: RecordedCall) => InjectedFault | undefined;
  /**
   * capabilities.pushNotifications in the card (default false): the SDK keeps the push configs it is sent and
   * pushes every event to them, through `sender(store)` when given (default the SDK's DefaultPushNotificationSender).
   */
  pushNotifications?: boolean | { sender: (store: PushNotificationStore) => PushNotificationSender };
}

// ---- ts-proto object builders (in-memory SDK types are ts-proto objects, not wire JSON) ----

export const textPart = (text: string): Part => ({
  content: { $case: 'text', value: text },
  mediaType: 'text/plain',
  filename: '',
  metadata: undefined,
});

export const textOf = (message: Message | undefined): string =>
  (message?.parts ?? []).map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');

export const agentMessage = (taskId: string, contextId: string, text: string): Message => ({
  messageId: randomUUID(),
  contextId,
  taskId,
  role: Role.ROLE_AGENT,
  parts: [textPart(text)],
  metadata: undefined,
  extensions: [],
  referenceTaskIds: [],
});

const status = (state: TaskState, message?: Message) => ({ state, message, timestamp: new Date().toISOString() });

/** The first event of every execute() call (the SDK requires a task or message first, follow-ups included). */
export const taskEvent = (ctx: RequestContext, state: TaskState) =>
  AgentEvent.task({
    id: ctx.taskId,
    contextId: ctx.contextId,
    status: status(state),
    artifacts: [], // the SDK merges these with the stored task, so follow-ups keep history/artifacts
    history: [],
    metadata: undefined,
  });

export const statusEvent = (taskId: string, contextId: string, state: TaskState, opts: { text?: string; metadata?: object } = {}) =>
  AgentEvent.statusUpdate({
    taskId,
    contextId,
    status: status(state, opts.text === undefined ? undefined : agentMessage(taskId, contextId, opts.text)),
    metadata: opts.metadata ? { ...opts.metadata } : undefined, // merged into task.metadata by the SDK
  });

export const artifactEvent = (ctx: RequestContext, text: string) =>
  AgentEvent.artifactUpdate({
    taskId: ctx.taskId,
    contextId: ctx.contextId,
    artifact: { artifactId: randomUUID(), name: 'result', description: '', parts: [textPart(text)], metadata: undefined, extensions: [] },
    append: false,
    lastChunk: true,
    metadata: undefined,
  });

/**
 * Base executor: remembers each task's contextId so cancelTask can publish a proper `canceled` status, and
 * offers complete() = one text artifact + COMPLETED (with cost metadata).
 */
export abstract class BaseExecutor implements AgentExecutor {
  protected readonly contexts = new Map<string, string>();
  constructor(protected readonly cost?: number) {}

  abstract run(ctx: RequestContext, bus: ExecutionEventBus): Promise<void>;

  async execute(ctx: RequestContext, bus: ExecutionEventBus): Promise<void> {
    this.contexts.set(ctx.taskId, ctx.contextId);
    await this.run(ctx, bus);
  }

  /** The SDK calls this with the task's live bus and waits for a terminal event on it. */
  async cancelTask(taskId: string, bus: ExecutionEventBus): Promise<void> {
    bus.publish(statusEvent(taskId, this.contexts.get(taskId) ?? '', TaskState.TASK_STATE_CANCELED, { metadata: this.costMetadata() }));
  }

  protected complete(ctx: RequestContext, bus: ExecutionEventBus, text: string): void {
    bus.publish(artifactEvent(ctx, text));
    bus.publish(statusEvent(ctx.taskId, ctx.contextId, TaskState.TASK_STATE_COMPLETED, { metadata: this.costMetadata() }));
  }

  protected costMetadata() {
    return this.cost === undefined ? undefined : { cost: this.cost };
  }
}

export function v1Card(url: string, name: string, description: string, opts: AgentOptions & { grpcPort?: number } = {}): AgentCard {
  const urls: Record<TestBinding, string> = { JSONRPC: `${url}${RPC_PATH}`, 'HTTP+JSON': `${url}${REST_PATH}`, GRPC: `127.0.0.1:${opts.grpcPort}` };
  const v1 = (opts.bindings ?? ['JSONRPC']).map((b) => ({ url: urls[b], protocolBinding: b, protocolVersion: A2A_PROTOCOL_VERSION, tenant: '' }));
  return {
    name,
    description,
    version: '1.0.0',
    // duplicateInterfacesForLegacy appends a {protocolVersion: '0.3'} twin of the JSONRPC and HTTP+JSON interfaces.
    supportedInterfaces: opts.legacyCompat === false ? v1 : duplicateInterfacesForLegacy(v1, ['JSONRPC', 'HTTP+JSON']),
    provider: { organization: 'Switchboard tests', url },
    capabilities: { streaming: opts.streaming ?? true, pushNotifications: !!opts.pushNotifications, extensions: [], extendedAgentCard: false },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: [{ id: 'main', name, description, tags: ['test'], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
    signatures: [],
  };
}

/**
 * Mounts the card and the endpoints of a 1.0 agent (optionally 0.3-compatible) on `app`: JSON-RPC and HTTP+JSON
 * as `opts.bindings` says (`record` logs HTTP+JSON calls as the harness logs JSON-RPC ones).
 * @returns the request handler, for a gRPC service to serve too.
 */
export function mountV1Agent(
  app: express.Express,
  url: string,
  executor: AgentExecutor,
  name: string,
  description: string,
  opts: AgentOptions & { grpcPort?: number } = {},
  record?: Recorder,
): DefaultRequestHandler {
  const pushStore = new InMemoryPushNotificationStore();
  const push = opts.pushNotifications;
  const pushSender = typeof push === 'object' ? push.sender(pushStore) : new DefaultPushNotificationSender(pushStore);
  const requestHandler = new DefaultRequestHandler(v1Card(url, name, description, opts), opts.taskStore ?? new InMemoryTaskStore(), executor, undefined, pushStore, pushSender);
  const legacyCompat = { enabled: opts.legacyCompat !== false };
  const bindings = opts.bindings ?? ['JSONRPC'];
  const { fault } = opts;
  app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: requestHandler, legacyCompat }));
  if (bindings.includes('JSONRPC')) {
    if (fault && record) {
      app.post(RPC_PATH, (_req, res, next) => {
        const f = fault(record.calls.at(-1)!);
        if (!f) return next();
        res.status(f === 'unavailable' ? 503 : 400).json({ error: f });
      });
    }
    app.use(RPC_PATH, jsonRpcHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication, legacyCompat }));
  }
  if (bindings.includes('HTTP+JSON')) {
    app.use(REST_PATH, express_.text({ type: () => true, limit: '10mb' }), (req, res, next) => {
      try {
        req.body = req.body ? JSON.parse(req.body) : undefined;
      } catch {
        /* left raw: the SDK answers 400 */
      }
      const call: RecordedCall = { binding: 'HTTP+JSON', method: restMethod(req.method, req.path), params: req.body, headers: { ...req.headers } };
      if (call.method === 'CancelTask') call.params = { id: decodeURIComponent(/\/tasks\/([^/:]+):cancel$/.exec(req.path)![1]!) };
      record?.(call);
      const f = fault?.(call);
      if (!f) return next();
      const [code, status] = f === 'unavailable' ? [503, 'UNAVAILABLE'] : [400, 'INVALID_ARGUMENT'];
      res.status(code).json({ error: { code, status, message: `injected ${status}` } });
    });
    app.use(REST_PATH, restHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication, legacyCompat }));
  }
  return requestHandler;
}

/** The A2A method an HTTP+JSON request calls (1.0 paths, and 0.3's under /v1), named as in JSON-RPC 1.0. */
function restMethod(verb: string, path: string): string {
  const p = path.replace(/^\/v1(?=\/)/, '');
  if (verb === 'POST' && p === '/message:send') return 'SendMessage';
  if (verb === 'POST' && p === '/message:stream') return 'SendStreamingMessage';
  if (verb === 'POST' && /^\/tasks\/[^/]+:cancel$/.test(p)) return 'CancelTask';
  if (/^\/tasks\/[^/]+:subscribe$/.test(p)) return 'SubscribeToTask';
  if (verb === 'GET' && /^\/tasks\/[^/:]+$/.test(p)) return 'GetTask';
  if (verb === 'GET' && p === '/tasks') return 'ListTasks';
  return `${verb} ${p}`;
}

/**
 * A gRPC server on 127.0.0.1:0 serving A2AService through whatever handler `serve()` is given later (the card,
 * and so the handler, needs the port first). Every call is recorded with its metadata and may be faulted.
 */
async function startGrpcServer(record: () => Recorder, fault: AgentOptions['fault']) {
  let impl: Record<string, (...args: any[]) => void> | undefined;
  const server = new grpc.Server();
  const wrapped: grpc.UntypedServiceImplementation = {};
  for (const [key, def] of Object.entries(A2AService)) {
    const method = def.path.split('/').pop()!;
    wrapped[key] = (call: any, callback?: grpc.sendUnaryData<unknown>) => {
      const recorded: RecordedCall = { binding: 'GRPC', method, params: call.request, headers: call.metadata.getMap() as RecordedCall['headers'] };
      record()(recorded);
      const f = fault?.(recorded);
      if (f) {
        const error = { code: f === 'unavailable' ? grpc.status.UNAVAILABLE : grpc.status.INVALID_ARGUMENT, details: `injected ${f}` };
        if (callback) callback(error);
        else call.emit('error', error);
        return;
      }
      impl![key]!(call, callback);
    };
  }
  server.addService(A2AService, wrapped);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  return {
    port,
    serve(requestHandler: DefaultRequestHandler) {
      impl = grpcService({ requestHandler, userBuilder: UserBuilder.noAuthentication }) as unknown as typeof impl;
    },
    close: () => server.forceShutdown(),
  };
}

/**
 * Starts a 1.0 agent serving `opts.bindings` (default JSON-RPC). `before` may install middleware ahead of the
 * agent's own (on the express app).
 */
export async function startV1Agent(
  executor: AgentExecutor & { stop?(): void },
  name: string,
  description: string,
  opts: AgentOptions = {},
  before?: (app: express.Express) => void,
): Promise<TestAgent> {
  let recorder: Recorder | undefined;
  const grpcServer = opts.bindings?.includes('GRPC') ? await startGrpcServer(() => recorder!, opts.fault) : undefined;
  return startAgentServer((app, url, record) => {
    recorder = record;
    before?.(app);
    const handler = mountV1Agent(app, url, executor, name, description, { ...opts, grpcPort: grpcServer?.port }, record);
    grpcServer?.serve(handler);
    return () => {
      executor.stop?.();
      grpcServer?.close();
    };
  });
}
