/**
 * Switchboard's implementation of the A2A server interface of @a2a-js/sdk, for one registered agent.
 * The SDK's transport handlers parse and render both dialects; this class turns each call into work on the
 * task's workflow (through TaskGateway) or a read of the projection.
 */
import { randomUUID } from 'node:crypto';
import {
  AgentCard,
  type CancelTaskRequest,
  type GetTaskRequest,
  ListTasksRequest,
  type ListTasksResponse,
  type Message,
  SendMessageRequest,
  type StreamResponse,
  Task,
} from '@a2a-js/sdk';
import type { A2ARequestHandler } from '@a2a-js/sdk/server';
import type { Pool } from 'pg';
import { gatewayCard } from '../agents/cards';
import type { Agent } from '../agents/registry';
import { listTasks } from '../db/task-store';
import type { TaskGateway } from '../temporal/task-gateway';
import type { WireMessage, WireTask } from '../../workflows/types';
import { a2aError } from './errors';
import type { ListTasksQuery } from './schemas';

export interface HandlerDeps {
  gateway: TaskGateway;
  pool: Pool;
  inputTimeoutMs: number;
}

const toTask = (t: WireTask) => Task.fromJSON(t);

export class AgentRequestHandler implements A2ARequestHandler {
  constructor(
    private readonly agent: Agent,
    private readonly tenant: string,
    private readonly rpcUrl: string,
    private readonly deps: HandlerDeps,
  ) {}

  async getAgentCard(): Promise<AgentCard> {
    return AgentCard.fromJSON(gatewayCard(this.agent.card, this.rpcUrl));
  }

  async getAuthenticatedExtendedAgentCard(): Promise<AgentCard> {
    throw a2aError('UnsupportedOperation', 'Switchboard does not serve extended agent cards');
  }

  async sendMessage(params: SendMessageRequest): Promise<Message | Task> {
    const json = SendMessageRequest.toJSON(params) as { message: WireMessage; configuration?: { returnImmediately?: boolean; historyLength?: number } };
    const { message } = json;
    const args = {
      returnImmediately: json.configuration?.returnImmediately ?? false,
      historyLength: json.configuration?.historyLength,
    };
    if (message.taskId) {
      return toTask(await this.deps.gateway.continue(this.tenant, message.taskId, { ...args, message }));
    }
    // §3.1: task ids are the server's; a contextId the client gave is kept, otherwise one is minted.
    const taskId = randomUUID();
    const contextId = message.contextId || randomUUID();
    const { agent } = this;
    const task = await this.deps.gateway.start(
      {
        tenant: this.tenant,
        taskId,
        contextId,
        requester: this.tenant,
        inputTimeoutMs: this.deps.inputTimeoutMs,
        agent: { agentId: agent.id, endpoint: agent.endpoint, priceMinor: agent.priceMinor, retry: agent.retry },
      },
      { ...args, message: { ...message, contextId } },
    );
    return toTask(task);
  }

  async getTask(params: GetTaskRequest): Promise<Task> {
    return toTask(await this.deps.gateway.get(this.tenant, params.id, params.historyLength));
  }

  async cancelTask(params: CancelTaskRequest): Promise<Task> {
    return toTask(await this.deps.gateway.cancel(this.tenant, params.id));
  }

  async listTasks(params: ListTasksRequest): Promise<ListTasksResponse> {
    const q = ListTasksRequest.toJSON(params) as Omit<ListTasksQuery, 'status'> & { status?: string };
    if (q.status === 'TASK_STATE_UNSPECIFIED') delete q.status; // the proto default means no filter
    const page = await listTasks(this.deps.pool, this.tenant, this.agent.id, q as ListTasksQuery);
    return { ...page, tasks: page.tasks.map(toTask) };
  }

  // Streaming and push notifications are not offered by the gateway's cards yet; the JSON-RPC route answers
  // those methods before they reach this class. These satisfy the interface with the same answer.
  sendMessageStream(): AsyncGenerator<StreamResponse, void, undefined> {
    throw a2aError('UnsupportedOperation', 'streaming is not supported by this gateway yet');
  }
  resubscribe(): AsyncGenerator<StreamResponse, void, undefined> {
    throw a2aError('UnsupportedOperation', 'streaming is not supported by this gateway yet');
  }
  async createTaskPushNotificationConfig(): Promise<never> {
    throw a2aError('PushNotificationNotSupported', 'push notifications are not supported by this gateway yet');
  }
  async getTaskPushNotificationConfig(): Promise<never> {
    throw a2aError('PushNotificationNotSupported', 'push notifications are not supported by this gateway yet');
  }
  async listTaskPushNotificationConfigs(): Promise<never> {
    throw a2aError('PushNotificationNotSupported', 'push notifications are not supported by this gateway yet');
  }
  async deleteTaskPushNotificationConfig(): Promise<never> {
    throw a2aError('PushNotificationNotSupported', 'push notifications are not supported by this gateway yet');
  }
}
