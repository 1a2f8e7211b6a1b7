/**
 * NEXUS's asynchronous task API (seed 000, "NEXUS A2A Gateway"): `POST /api/v1/tasks {agentId, message}` answers at
 * once, HTTP 202, `Location: /api/v1/tasks/:id` and the submitted task; `GET /api/v1/tasks/:id` returns the task. Both
 * in NEXUS's shape (`{id, status: "<state>", messages, artifacts}`, `{type, data}` parts). The task runs like every
 * other: the RPC core starts it as a 1.0 SendMessage that returns immediately, and its workflow calls the agent.
 */
import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { nexusTask, nexusWireMessage } from '../a2a/dialects/nexus';
import type { A2AEndpoints } from '../a2a/endpoints';
import { A2A_ERRORS } from '../a2a/errors';
import type { Refused, RpcAnswer } from '../a2a/rpc-handler';
import type { WireTask } from '../../../task/wire';
import { access, callerOf } from '../../core/auth/caller';
import { baseUrlOf } from './base-url';
import { answer, describeOnly, errorBody, requestSchema } from './openapi';

const CreateTask = z.object({
  agentId: z.string().min(1).max(200),
  message: z.object({
    role: z.enum(['user', 'agent']).default('user'),
    parts: z.array(z.object({ type: z.string().min(1).max(64), data: z.unknown().optional(), text: z.string().optional() })).min(1),
    metadata: z.record(z.string(), z.unknown()).optional(),
  }),
  metadata: z.record(z.string(), z.unknown()).optional(),
});

/** The HTTP status of a JSON-RPC error code, for a REST answer. */
const HTTP_STATUS: Record<number, number> = {
  [A2A_ERRORS.ParseError.code]: 400,
  [A2A_ERRORS.InvalidRequest.code]: 400,
  [A2A_ERRORS.InvalidParams.code]: 400,
  [A2A_ERRORS.TaskNotFound.code]: 404,
  [A2A_ERRORS.Unroutable.code]: 404,
  [A2A_ERRORS.UnsupportedOperation.code]: 409,
  [A2A_ERRORS.InsufficientFunds.code]: 402,
  [A2A_ERRORS.HopLimit.code]: 400,
  [A2A_ERRORS.QuotaExceeded.code]: 429,
  [A2A_ERRORS.Unavailable.code]: 503,
};

/** A call refused before it ran, as HTTP shows such refusals. */
const REFUSED_STATUS: Record<Refused, number> = { permission: 403, 'no-endpoint': 404, busy: 429, unavailable: 503 };

export async function nexusTaskRoutes(app: FastifyInstance, deps: { endpoints: A2AEndpoints; publicUrl?: string }): Promise<void> {
  describeOnly(app);
  const { core } = deps.endpoints;

  /** One call through the RPC core, as an in-process 1.0 call: the task, or the REST refusal (status, error). */
  async function call(req: FastifyRequest, method: string, params: unknown, agentId?: string): Promise<{ task: WireTask } | { status: number; error: string }> {
    const gone = new AbortController();
    const out: RpcAnswer = await core.answer(
      {
        method,
        params,
        caller: callerOf(req),
        headers: req.headers,
        base: baseUrlOf(req, deps.publicUrl),
        signal: gone.signal,
        agentId,
        intent: { record: { dialect: 'nexus' } },
      },
      deps.endpoints.resolver(agentId),
    );
    if ('stream' in out) return { status: 500, error: `${method} answered with a stream` };
    if ('error' in out) return { status: (out.refused && REFUSED_STATUS[out.refused]) ?? HTTP_STATUS[out.error.code] ?? 502, error: out.error.message };
    const result = out.result as { task?: WireTask } & WireTask;
    return { task: result.task ?? result };
  }

  const createSchema = {
    tags: ['tasks'],
    summary: 'NEXUS: create a task for an agent; answers 202 at once with the submitted task (NEXUS shape), Location /api/v1/tasks/:id',
    body: requestSchema(CreateTask),
    response: {
      202: answer('The submitted task: {id, status, messages, artifacts}'),
      400: errorBody('Invalid body'),
      404: errorBody('No such agent'),
      402: errorBody('The requester account cannot cover the task'),
    },
  };
  app.post('/api/v1/tasks', { config: access.sender, schema: createSchema }, async (req, reply) => {
    const parsed = CreateTask.safeParse(req.body);
    if (!parsed.success) return reply.code(400).send({ error: `Invalid body: ${z.prettifyError(parsed.error)}` });
    const { agentId, message, metadata } = parsed.data;
    let wire;
    try {
      wire = nexusWireMessage(message, metadata);
    } catch (err) {
      return reply.code(400).send({ error: (err as Error).message });
    }
    const params = { message: { ...wire, messageId: randomUUID() }, configuration: { returnImmediately: true }, ...(metadata && { metadata }) };
    const r = await call(req, 'SendMessage', params, agentId);
    if ('error' in r) return reply.code(r.status as 400).send({ error: r.error });
    return reply.code(202).header('location', `/api/v1/tasks/${encodeURIComponent(r.task.id)}`).send(nexusTask(r.task));
  });

  const getSchema = {
    tags: ['tasks'],
    summary: 'NEXUS: a task of the tenant in NEXUS\'s shape ({id, status, messages, artifacts})',
    response: { 200: answer('The task: {id, status, messages, artifacts}'), 404: errorBody('No such task') },
  };
  app.get<{ Params: { id: string } }>('/api/v1/tasks/:id', { config: access.rpc, schema: getSchema }, async (req, reply) => {
    const r = await call(req, 'GetTask', { id: req.params.id });
    if ('error' in r) return reply.code(r.status as 400).send({ error: r.error });
    return nexusTask(r.task);
  });
}
