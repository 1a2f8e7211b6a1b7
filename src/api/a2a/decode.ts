/**
 * The decode step of every call, after the caller was authorized: the request as its transport read it (a method
 * and params, not yet validated) becomes the engine call it runs as, a 1.0 or 0.3 method whose params passed its
 * schema. Nothing here starts work or touches a task: a request a client got wrong throws the A2A error that says
 * so (-32009 an A2A-Version, -32602 bad params, the dialect's own for a method it does not serve), and the RPC
 * core's one catch answers it in the caller's dialect.
 */
import type { Pool } from 'pg';
import { z } from 'zod';
import { type CallIntent, type DialectContext, type DialectDef, type InternalCall, type MethodDef, engineMethod, engineOf } from './dialects';
import { A2A_ERRORS, a2aError, errorCodeOf } from './errors';
import { withJsonNames } from './proto-json';
import { SUPPORTED_VERSION } from './versions';
import { pathOfNul } from '../../core/http/json-guard';
import { clientMetadataOf, firstRequestOf } from '../../core/db/task-dialects';
import { openTasksOfContext } from '../../core/db/task-store';
import type { TaskGateway } from '../../core/temporal/task-gateway';
import { isInterrupted } from '../../../task/rules';
import type { Dialect, WireTask } from '../../../task/wire';

/** What decoding reads of a request. */
export interface Encoded {
  method: string;
  params: unknown;
  /** The A2A-Version the client asked for, if any. */
  version?: string;
  /** An in-process caller's own translation (NEXUS's POST /api/v1/tasks); never from what a client sent. */
  intent?: CallIntent;
}

/** A decoded call: the engine call (its render, if the dialect renders answers) and the engine's dialect. */
export interface Decoded {
  internal: InternalCall;
  engine: Dialect;
}

/**
 * Decodes one call in its dialect: the version, the method's params (a field by its ProtoJSON name too) validated
 * once, then the dialect's translation to the engine call, validated like a call of that method: what runs is what
 * passed.
 */
export async function decode(req: Encoded, dialect: DialectDef, ctx: DialectContext): Promise<Decoded> {
  const { method } = req;
  const spec = dialect.methods[method]!;
  if (req.version !== undefined && !SUPPORTED_VERSION.test(req.version)) {
    throw a2aError('VersionNotSupported', `A2A-Version ${req.version} is not supported; this gateway speaks 1.0 and 0.3`);
  }
  if ('unsupported' in spec) throw a2aError(spec.unsupported, `${method}: ${spec.why}`);
  const params = validated(spec, method, withJsonNames(req.params));
  const nul = pathOfNul(params);
  if (nul !== undefined) {
    // PostgreSQL cannot store U+0000 in text or jsonb: refuse it here rather than fail later, mid-task.
    throw a2aError('InvalidParams', `Invalid params for ${method}: ${nul || 'params'} contains a NUL character (U+0000)`, [{ field: nul, description: 'must not contain U+0000' }]);
  }
  let internal = spec.translate ? await spec.translate(params, ctx) : { method, params, intent: req.intent };
  const engineSpec = engineMethod(internal.method);
  if (engineSpec && engineSpec !== spec && !('unsupported' in engineSpec)) internal = { ...internal, params: validated(engineSpec, internal.method, internal.params) };
  return { internal: { ...internal, render: internal.render ?? spec.render }, engine: engineOf(internal.method) };
}

/** A method's params checked against its schema: the parsed params; bad ones throw the -32602 error naming the fields. */
function validated(spec: MethodDef, method: string, params: unknown): unknown {
  const checked = spec.params.safeParse(params);
  if (checked.success) return checked.data;
  const violations = checked.error.issues.map((i) => ({ field: i.path.join('.'), description: i.message }));
  throw a2aError('InvalidParams', `Invalid params for ${method}: ${z.prettifyError(checked.error)}`, violations);
}

/** What a dialect's translation and rendering may look up, in the caller's tenant (and endpoint agent). */
export function dialectContext(deps: { gateway: TaskGateway; pool: Pool }, tenant: string, agentId: string | undefined, requestId?: string | number | null): DialectContext {
  const { gateway, pool } = deps;
  const task = async (taskId: string): Promise<WireTask | undefined> => {
    try {
      return await gateway.get(tenant, taskId);
    } catch (err) {
      if (errorCodeOf(err) === A2A_ERRORS.TaskNotFound.code) return undefined;
      throw err;
    }
  };
  return {
    tenant,
    requestId: requestId ?? undefined,
    task,
    // The projection can trail the workflow by the change being written (a client answering at once): a task it
    // shows as still working is asked directly.
    waitingInContext: async (contextId) => {
      const open = await openTasksOfContext(pool, tenant, contextId, agentId);
      const states = await Promise.all(open.map(async (t) => (isInterrupted(t.state as WireTask['status']['state']) ? t.state : (await task(t.taskId))?.status.state)));
      return open.filter((_, i) => states[i] === 'TASK_STATE_INPUT_REQUIRED').map((t) => t.taskId);
    },
    clientMetadata: (taskIds) => clientMetadataOf(pool, tenant, taskIds),
    firstRequest: (taskId) => firstRequestOf(pool, tenant, taskId),
  };
}
