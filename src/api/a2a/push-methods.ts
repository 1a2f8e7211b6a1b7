/**
 * The push-notification config methods of both dialects (1.0 Create/Get/List/DeleteTaskPushNotificationConfig,
 * 0.3 tasks/pushNotificationConfig/set|get|list|delete). They are answered here rather than through the SDK's
 * transport handlers because those rebuild results from the SDK's types and would drop `deliveryStatus`.
 * The RPC core (rpc-handler.ts) has validated their params.
 */
import type { Pool } from 'pg';
import { headSeq } from '../../core/events/event-log';
import type { PushStore } from '../../core/push/store';
import { parsePushRequest, toPushRequest } from '../../core/push/params';
import { renderConfig, renderList } from '../../core/push/render';
import type { Dialect, PushDialect } from '../../../task/wire';
import type { TaskGateway } from '../../core/temporal/task-gateway';
import { isTerminal } from '../../../task/rules';
import { a2aError } from './errors';
import { agentOfTask } from '../../core/db/task-store';

export interface PushMethodDeps {
  pool: Pool;
  store: PushStore;
  gateway: TaskGateway;
  tenant: string;
  /** At a per-agent endpoint: only this agent's tasks are reachable (another's answers as unknown). */
  agentId?: string;
}

/**
 * Answers a push-config call whose params have passed the method's schema (the RPC core's method table).
 * @param dialect the engine's (the answer's shape); `bodies`: the dialect a new config's webhook bodies are written
 *   in, when not that one (a 0.1 client's config, run as 0.3's, gets 0.1 bodies).
 */
export async function answerPushMethod(method: string, dialect: Dialect, params: unknown, d: PushMethodDeps, bodies: PushDialect = dialect): Promise<unknown> {
  const request = toPushRequest(method, params);
  const taskId = request.op === 'create' ? request.config.taskId : request.taskId;
  if (d.agentId !== undefined) {
    const agentId = await agentOfTask(d.pool, d.tenant, taskId);
    if (agentId !== undefined && agentId !== d.agentId) throw a2aError('TaskNotFound', `Task ${taskId} not found`);
  }
  switch (request.op) {
    case 'create': {
      const { taskId } = request.config;
      const task = await d.gateway.get(d.tenant, taskId); // TaskNotFound for an unknown task
      // A config made now receives the events from now on. A finished task's is stored and listed like any
      // (§3.1.7 names no error for it, and the SDK accepts it): it will receive nothing, there being no more events.
      const config = await d.store.create(d.tenant, bodies, request.config, { startAfterSeq: await headSeq(d.pool, d.tenant, taskId) });
      if (!isTerminal(task.status.state)) await d.gateway.watchPush(d.tenant, taskId, config.id);
      return renderConfig(dialect, config);
    }
    case 'get': {
      await d.gateway.get(d.tenant, request.taskId);
      const config = await d.store.get(d.tenant, request.taskId, request.configId);
      if (!config) throw a2aError('TaskNotFound', `Task ${request.taskId} has no push notification config${request.configId ? ` ${request.configId}` : ''}`);
      return renderConfig(dialect, config);
    }
    case 'list':
      await d.gateway.get(d.tenant, request.taskId);
      return renderList(dialect, await d.store.list(d.tenant, request.taskId, { pageSize: request.pageSize ?? (dialect === '0.3' ? 100 : undefined), pageToken: request.pageToken }));
    case 'delete':
      // An unknown task is TaskNotFound, as for get and list; an unknown config of a known task is a no-op.
      await d.gateway.get(d.tenant, request.taskId);
      await d.store.delete(d.tenant, request.taskId, request.configId);
      return null;
  }
}

/** Stores a config given inline with SendMessage for `taskId`, validated like a Create call; returns its id. */
export async function storeInlinePushConfig(store: PushStore, tenant: string, dialect: Dialect, taskId: string, inline: Record<string, unknown>, bodies: PushDialect = dialect): Promise<string> {
  const { request } = parsePushRequest('CreateTaskPushNotificationConfig', { ...inline, taskId });
  if (request.op !== 'create') throw new Error('unreachable');
  const config = await store.create(tenant, bodies, request.config);
  return config.id;
}
