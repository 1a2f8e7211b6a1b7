/**
 * GET /tasks: the tenant's recent tasks for operators (the console's list), with each task's agent, state,
 * settled cost, workflow id and, when Switchboard knows where Temporal UI is, a link to the workflow there.
 * Clients list their tasks with the A2A method ListTasks; this list adds what operators look at.
 * GET /tasks/versions: open tasks by the level of the workflow code that started them (admins, for upgrades).
 */
import type { FastifyInstance } from 'fastify';
import type { Pool } from 'pg';
import { z } from 'zod';
import { TASK_STATES } from '../../../task/wire';
import { listTaskSummaries } from '../../core/db/task-store';
import { PageTokenError } from '../../core/db/page-token';
import { access, callerOf } from '../../core/auth/caller';
import { workflowIdOf } from '../../core/temporal/task-gateway';
import { stateLabel } from '../../../task/rules';
import { answer, describeOnly, errorBody, requestSchema } from './openapi';

export interface TemporalUi {
  /** Temporal UI's base URL, e.g. http://127.0.0.1:8233. */
  url: string;
  namespace: string;
}

const STATE_BY_LABEL = new Map(TASK_STATES.map((s) => [stateLabel(s), s]));

/** Strict, like GET /agents: a misspelt parameter is an error, not a filter silently not applied. */
const TasksQuery = z.strictObject({
  state: z
    .enum([...STATE_BY_LABEL.keys()] as [string, ...string[]])
    .transform((s) => STATE_BY_LABEL.get(s)!)
    .optional(),
  agentId: z.string().min(1).max(200).optional(),
  /** One task by its id (the console's search): its row, or none. */
  taskId: z.string().min(1).max(1024).optional(),
  pageSize: z.coerce.number().int().min(1).max(100).default(20),
  pageToken: z.string().min(1).max(2000).optional(),
});

/** The workflow's page in Temporal UI (the UI opens its latest run). */
export function temporalUiLink(ui: TemporalUi, workflowId: string): string {
  return `${ui.url.replace(/\/+$/, '')}/namespaces/${encodeURIComponent(ui.namespace)}/workflows/${encodeURIComponent(workflowId)}`;
}

export async function taskRoutes(app: FastifyInstance, { pool, temporalUi }: { pool: Pool; temporalUi?: TemporalUi }): Promise<void> {
  describeOnly(app);
  const schema = {
    tags: ['tasks'],
    summary: "The tenant's recent tasks, newest status first, with agent, state, settled cost, workflow id and Temporal UI link (operators)",
    querystring: requestSchema(TasksQuery),
    response: { 200: answer('{ tasks: [...], nextPageToken? }'), 400: errorBody('Invalid query parameter or page token') },
  };
  app.get('/tasks', { config: access.operator, schema }, async (req, reply) => {
    const q = TasksQuery.safeParse(req.query);
    if (!q.success) return reply.code(400).send({ error: `Invalid query: ${z.prettifyError(q.error)}` });
    const { tenant } = callerOf(req);
    try {
      const page = await listTaskSummaries(pool, tenant, q.data);
      return {
        tasks: page.tasks.map((t) => {
          const workflowId = workflowIdOf(tenant, t.id);
          return { ...t, workflowId, ...(temporalUi ? { temporalUiUrl: temporalUiLink(temporalUi, workflowId) } : {}) };
        }),
        nextPageToken: page.nextPageToken,
      };
    } catch (err) {
      if (err instanceof PageTokenError) return reply.code(400).send({ error: err.message });
      throw err;
    }
  });

  // Which levels of the task workflow's code open tasks are on, every tenant's (an upgrade's question: may it
  // retire a level?). Admins only: it counts across tenants. docs/operations.md, "Upgrading".
  const versionsSchema = {
    tags: ['tasks'],
    summary: "Open tasks by the level of the task workflow's code that started them, every tenant's (admin): which levels an upgrade must still run",
    response: { 200: answer('{ newest, oldest, levels: [{ level, open }], retired, unlabelled }') },
  };
  app.get('/tasks/versions', { config: access.admin, schema: versionsSchema }, async () => app.temporal.gateway.openLevels());
}
