/**
 * An example A2A agent to try Switchboard with (`npm run example:agent`; EXAMPLE_AGENT_PORT, default 9999). Built
 * with @a2a-js/sdk, A2A 1.0 with the 0.3 compat layer, streaming. What it does with a task's first message:
 *  - text containing "slow": works for a minute, streaming a line a second (cancel it);
 *  - otherwise: asks for your name (input-required), then streams a greeting word by word and completes.
 * It logs every message it gets (task, new or next turn, text) and every cancel, so what Switchboard sends it can be seen.
 */
import { randomUUID } from 'node:crypto';
import express from 'express';
import { A2A_PROTOCOL_VERSION, AGENT_CARD_PATH, type AgentCard, type Message, Role, TaskState } from '@a2a-js/sdk';
import { duplicateInterfacesForLegacy } from '@a2a-js/sdk/compat/v0_3';
import { AgentEvent, type AgentExecutor, DefaultRequestHandler, type ExecutionEventBus, InMemoryTaskStore, type RequestContext } from '@a2a-js/sdk/server';
import { UserBuilder, agentCardHandler, jsonRpcHandler } from '@a2a-js/sdk/server/express';

const PORT = Number(process.env.EXAMPLE_AGENT_PORT ?? 9999);
const URL_BASE = `http://127.0.0.1:${PORT}`;
const RPC_PATH = '/a2a/jsonrpc';

const text = (value: string) => ({ content: { $case: 'text' as const, value }, mediaType: 'text/plain', filename: '', metadata: undefined });
const textOf = (m: Message | undefined) => (m?.parts ?? []).map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');
const message = (ctx: RequestContext, value: string): Message => ({
  messageId: randomUUID(), contextId: ctx.contextId, taskId: ctx.taskId, role: Role.ROLE_AGENT, parts: [text(value)], metadata: undefined, extensions: [], referenceTaskIds: [],
});
const status = (ctx: RequestContext, state: TaskState, say?: string) =>
  AgentEvent.statusUpdate({ taskId: ctx.taskId, contextId: ctx.contextId, status: { state, message: say ? message(ctx, say) : undefined, timestamp: new Date().toISOString() }, metadata: undefined });
const chunk = (ctx: RequestContext, artifactId: string, value: string, append: boolean, lastChunk: boolean) =>
  AgentEvent.artifactUpdate({
    taskId: ctx.taskId, contextId: ctx.contextId, append, lastChunk, metadata: undefined,
    artifact: { artifactId, name: 'answer', description: '', parts: [text(value)], metadata: undefined, extensions: [] },
  });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const say = (line: string) => console.log(`${new Date().toISOString().slice(11, 23)} ${line}`);


class ExampleExecutor implements AgentExecutor {
  private readonly canceled = new Set<string>();

  async execute(ctx: RequestContext, bus: ExecutionEventBus): Promise<void> {
    const said = textOf(ctx.userMessage).trim();
    const followUp = ctx.task !== undefined; // the SDK hands over the stored task on the task's next message
    say(`message ${ctx.userMessage.messageId} for task ${ctx.taskId} (${followUp ? 'its next turn' : 'new'}): "${said.slice(0, 60)}"`);
    bus.publish(AgentEvent.task({ id: ctx.taskId, contextId: ctx.contextId, status: { state: TaskState.TASK_STATE_WORKING, message: undefined, timestamp: new Date().toISOString() }, artifacts: [], history: [], metadata: undefined }));
    if (!followUp && /slow/i.test(said)) return this.slow(ctx, bus);
    if (!followUp) {
      bus.publish(status(ctx, TaskState.TASK_STATE_INPUT_REQUIRED, 'Hello! What is your name?'));
      bus.finished();
      return;
    }
    const words = `Nice to meet you, ${said || 'stranger'}! Switchboard kept this task waiting for you.`.split(' ');
    const artifactId = randomUUID();
    for (const [i, word] of words.entries()) {
      bus.publish(chunk(ctx, artifactId, `${i ? ' ' : ''}${word}`, i > 0, i === words.length - 1));
      await sleep(100);
    }
    bus.publish(status(ctx, TaskState.TASK_STATE_COMPLETED));
    bus.finished();
  }

  private async slow(ctx: RequestContext, bus: ExecutionEventBus): Promise<void> {
    const artifactId = randomUUID();
    for (let s = 1; s <= 60 && !this.canceled.has(ctx.taskId); s++) {
      bus.publish(chunk(ctx, artifactId, `${s > 1 ? '\n' : ''}working… ${s}s`, s > 1, false));
      await sleep(1000);
    }
    if (this.canceled.has(ctx.taskId)) return;
    bus.publish(chunk(ctx, artifactId, '\ndone.', true, true));
    bus.publish(status(ctx, TaskState.TASK_STATE_COMPLETED));
    bus.finished();
  }

  async cancelTask(taskId: string, bus: ExecutionEventBus): Promise<void> {
    say(`cancel of task ${taskId}: stopping`);
    this.canceled.add(taskId);
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId: '', status: { state: TaskState.TASK_STATE_CANCELED, message: undefined, timestamp: new Date().toISOString() }, metadata: undefined }));
    bus.finished();
  }
}

const interfaces = [{ url: `${URL_BASE}${RPC_PATH}`, protocolBinding: 'JSONRPC', protocolVersion: A2A_PROTOCOL_VERSION, tenant: '' }];
const card: AgentCard = {
  name: 'Greeter',
  description: 'Asks your name, then greets you (streaming). Say "slow" for a long task you can cancel.',
  version: '1.0.0',
  supportedInterfaces: duplicateInterfacesForLegacy(interfaces, ['JSONRPC']),
  provider: { organization: 'Switchboard example', url: URL_BASE },
  capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
  securitySchemes: {},
  securityRequirements: [],
  defaultInputModes: ['text/plain'],
  defaultOutputModes: ['text/plain'],
  skills: [{ id: 'greet', name: 'Greet', description: 'Greets you by name', tags: ['greeting', 'example'], examples: ['hello'], inputModes: [], outputModes: [], securityRequirements: [] }],
  signatures: [],
};

const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new ExampleExecutor());
const app = express();
app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: handler, legacyCompat: { enabled: true } }));
app.use(RPC_PATH, jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication, legacyCompat: { enabled: true } }));
const server = app.listen(PORT, '127.0.0.1', () => console.log(`example agent at ${URL_BASE} (card: ${URL_BASE}/${AGENT_CARD_PATH})`));
process.on('SIGINT', () => server.close(() => process.exit(0)));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
