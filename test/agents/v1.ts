// Building blocks for protocol-1.0 agents on @a2a-js/sdk 1.x: event builders (ts-proto shapes), the card, the mount.
import { randomUUID } from 'node:crypto';
import type express from 'express';
import { A2A_PROTOCOL_VERSION, AGENT_CARD_PATH, Role, TaskState } from '@a2a-js/sdk';
import type { AgentCard, Message, Part } from '@a2a-js/sdk';
import { duplicateInterfacesForLegacy } from '@a2a-js/sdk/compat/v0_3';
import {
  AgentEvent,
  DefaultRequestHandler,
  InMemoryTaskStore,
  type AgentExecutor,
  type TaskStore,
  type ExecutionEventBus,
  type RequestContext,
} from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, UserBuilder } from '@a2a-js/sdk/server/express';
import { RPC_PATH, startAgentServer, type TestAgent } from './harness';

export interface AgentOptions {
  /** If set, the final (terminal) status update — and so the final task's metadata — carries {"cost": cost}. */
  cost?: number;
  /** capabilities.streaming in the card (default true). */
  streaming?: boolean;
  /** Also serve protocol 0.3 on the same endpoint via the SDK's compat layer (default true). */
  legacyCompat?: boolean;
  /** Where the SDK keeps the agent's tasks (default: its InMemoryTaskStore). */
  taskStore?: TaskStore;
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

export function v1Card(url: string, name: string, description: string, opts: AgentOptions = {}): AgentCard {
  const v1 = [{ url: `${url}${RPC_PATH}`, protocolBinding: 'JSONRPC', protocolVersion: A2A_PROTOCOL_VERSION, tenant: '' }];
  return {
    name,
    description,
    version: '1.0.0',
    // duplicateInterfacesForLegacy appends a {protocolVersion: '0.3'} twin of the JSONRPC interface.
    supportedInterfaces: opts.legacyCompat === false ? v1 : duplicateInterfacesForLegacy(v1, ['JSONRPC']),
    provider: { organization: 'Switchboard tests', url },
    capabilities: { streaming: opts.streaming ?? true, pushNotifications: false, extensions: [], extendedAgentCard: false },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: [{ id: 'main', name, description, tags: ['test'], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
    signatures: [],
  };
}

/** Mounts the card and the JSON-RPC endpoint of a 1.0 agent (optionally 0.3-compatible) on `app`. */
export function mountV1Agent(app: express.Express, url: string, executor: AgentExecutor, name: string, description: string, opts: AgentOptions = {}) {
  const requestHandler = new DefaultRequestHandler(v1Card(url, name, description, opts), opts.taskStore ?? new InMemoryTaskStore(), executor);
  const legacyCompat = { enabled: opts.legacyCompat !== false };
  app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: requestHandler, legacyCompat }));
  app.use(RPC_PATH, jsonRpcHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication, legacyCompat }));
}

export function startV1Agent(
  executor: AgentExecutor & { stop?(): void },
  name: string,
  description: string,
  opts: AgentOptions = {},
): Promise<TestAgent> {
  return startAgentServer((app, url) => {
    mountV1Agent(app, url, executor, name, description, opts);
    return executor.stop?.bind(executor);
  });
}
