/**
 * The params of the eight push-config methods (A2A §1.12; 1.0 Create/Get/List/DeleteTaskPushNotificationConfig,
 * 0.3 tasks/pushNotificationConfig/set|get|list|delete) and their dialect-neutral form, PushRequest. The RPC
 * core validates a call's params with PUSH_METHOD_PARAMS once and hands the result to toPushRequest.
 */
import { z } from 'zod';
import { taskError } from '../../../task/errors';
import type { Dialect } from '../../../task/wire';

/** The scheme name that makes `credentials` an HMAC secret for X-Switchboard-Signature instead of an Authorization header. */
export const HMAC_SCHEME = 'HMAC-SHA256';
export const isHmacScheme = (scheme: string | undefined) => scheme?.toUpperCase() === HMAC_SCHEME;


const tenant = z.string().max(256).optional();
const taskId = z.string().min(1).max(1024);
const configId = z.string().min(1).max(256);
// Token and credentials are sent verbatim as HTTP header values, so only printable ASCII (no CR/LF).
const headerValue = (max: number) => z.string().max(max).regex(/^[\x20-\x7e]*$/, 'must be printable ASCII (it is sent in an HTTP header)');
// RFC 9110 §11.1: an auth-scheme is a token.
const scheme = z.string().min(1).max(64).regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, 'must be an HTTP auth-scheme token, e.g. Bearer');
const credentials = headerValue(4096);
// Syntax only here; whether the host may be called needs DNS and is checked by PushStore.create.
const webhookUrl = z.url({ protocol: /^https?$/, error: 'must be an absolute http(s) URL' }).max(2048);
const metadata = z.record(z.string(), z.unknown()).optional();

/** An HMAC secret shorter than this is guessable; the scheme is ours (not A2A's), so the rule is ours too. */
const MIN_HMAC_SECRET = 16;
function hmacNeedsSecret(auth: { scheme?: string; credentials?: string } | undefined, ctx: z.RefinementCtx, path: (string | number)[]) {
  if (auth && isHmacScheme(auth.scheme) && (auth.credentials ?? '').length < MIN_HMAC_SECRET) {
    ctx.addIssue({ code: 'custom', path, message: `the ${HMAC_SCHEME} scheme needs credentials of at least ${MIN_HMAC_SECRET} characters (the HMAC secret)` });
  }
}

// 1.0 (PROTO): TaskPushNotificationConfig is flat; proto3 JSON may carry "" for an unset id or token.
export const CreatePushConfigParams = z
  .object({
    tenant,
    id: z.string().max(256).optional(),
    taskId,
    url: webhookUrl,
    token: headerValue(1024).optional(),
    authentication: z.object({ scheme, credentials: credentials.optional() }).optional(),
  })
  .superRefine((p, ctx) => hmacNeedsSecret(p.authentication, ctx, ['authentication', 'credentials']));
export const GetPushConfigParams = z.object({ tenant, taskId, id: configId });
export const ListPushConfigsParams = z.object({
  tenant,
  taskId,
  // proto3: 0 means "server default".
  pageSize: z.number().int().min(0).max(100).optional(),
  pageToken: z.string().max(512).optional(),
});
export const DeletePushConfigParams = z.object({ tenant, taskId, id: configId });

// 0.3: {taskId, pushNotificationConfig: {id?, url, token?, authentication?: {schemes[], credentials?}}}; the
// other three address the task by `id` and the config by `pushNotificationConfigId`.
export const LegacySetPushConfigParams = z
  .object({
    taskId,
    pushNotificationConfig: z.object({
      id: z.string().max(256).optional(),
      url: webhookUrl,
      token: headerValue(1024).optional(),
      authentication: z.object({ schemes: z.array(scheme).max(16), credentials: credentials.optional() }).optional(),
    }),
    metadata,
  })
  .superRefine((p, ctx) => {
    const auth = p.pushNotificationConfig.authentication;
    if (auth && auth.schemes.length === 0 && auth.credentials) {
      ctx.addIssue({ code: 'custom', path: ['pushNotificationConfig', 'authentication', 'schemes'], message: 'credentials need a scheme' });
    }
    hmacNeedsSecret(auth && { scheme: auth.schemes[0], credentials: auth.credentials }, ctx, ['pushNotificationConfig', 'authentication', 'credentials']);
  });
export const LegacyGetPushConfigParams = z.object({ id: taskId, pushNotificationConfigId: configId.optional(), metadata });
export const LegacyListPushConfigsParams = z.object({ id: taskId, metadata });
export const LegacyDeletePushConfigParams = z.object({ id: taskId, pushNotificationConfigId: configId, metadata });

/** The params schema of every push-config method, by dialect and method name (for the JSON-RPC method table). */
export const PUSH_METHOD_PARAMS = {
  '1.0': {
    CreateTaskPushNotificationConfig: CreatePushConfigParams,
    GetTaskPushNotificationConfig: GetPushConfigParams,
    ListTaskPushNotificationConfigs: ListPushConfigsParams,
    DeleteTaskPushNotificationConfig: DeletePushConfigParams,
  },
  '0.3': {
    'tasks/pushNotificationConfig/set': LegacySetPushConfigParams,
    'tasks/pushNotificationConfig/get': LegacyGetPushConfigParams,
    'tasks/pushNotificationConfig/list': LegacyListPushConfigsParams,
    'tasks/pushNotificationConfig/delete': LegacyDeletePushConfigParams,
  },
} as const;

/** A config as a client asked for it, whatever the dialect. */
export interface PushConfigInput {
  taskId: string;
  /** Minted (a UUID) when absent. */
  id?: string;
  url: string;
  token?: string;
  /** One scheme: 0.3 lists the receiver's schemes and the sender picks one, as @a2a-js/sdk does, the first. */
  authentication?: { scheme: string; credentials?: string };
}

/** One push-config call, dialect-neutral. `configId` absent on get: the task's newest config (0.2/0.3 had one per task). */
export type PushRequest =
  | { op: 'create'; config: PushConfigInput }
  | { op: 'get'; taskId: string; configId?: string }
  | { op: 'list'; taskId: string; pageSize?: number; pageToken?: string }
  | { op: 'delete'; taskId: string; configId: string };

const orUndefined = (s: string | undefined) => (s ? s : undefined);

/**
 * Validates the params of a push-config method and turns them into a PushRequest (for configs given inline
 * with SendMessage, which no method table has validated).
 * @throws TaskError InvalidParams (with field violations) when the params do not fit; Error for a method
 * that is not a push-config method (a programming error).
 */
export function parsePushRequest(method: string, params: unknown): { dialect: Dialect; request: PushRequest } {
  const dialect: Dialect | undefined = Object.hasOwn(PUSH_METHOD_PARAMS['1.0'], method)
    ? '1.0'
    : Object.hasOwn(PUSH_METHOD_PARAMS['0.3'], method)
      ? '0.3'
      : undefined;
  if (!dialect) throw new Error(`${method} is not a push-config method`);
  const schema = (PUSH_METHOD_PARAMS[dialect] as Record<string, z.ZodType>)[method];
  const parsed = schema.safeParse(params);
  if (!parsed.success) {
    const violations = parsed.error.issues.map((i) => ({ field: i.path.join('.'), description: i.message }));
    throw taskError('InvalidParams', `Invalid params for ${method}: ${z.prettifyError(parsed.error)}`, violations);
  }
  return { dialect, request: toPushRequest(method, parsed.data) };
}

/** The params of `method` after its schema (PUSH_METHOD_PARAMS) passed them. */
type Params<S extends z.ZodType> = z.infer<S>;

/** The PushRequest of a call whose params have passed the method's schema (PUSH_METHOD_PARAMS). */
export function toPushRequest(method: string, params: unknown): PushRequest {
  switch (method) {
    case 'CreateTaskPushNotificationConfig': {
      const p = params as Params<typeof CreatePushConfigParams>;
      return {
        op: 'create',
        config: { taskId: p.taskId, id: orUndefined(p.id), url: p.url, token: orUndefined(p.token), authentication: p.authentication },
      };
    }
    case 'tasks/pushNotificationConfig/set': {
      const p = params as Params<typeof LegacySetPushConfigParams>;
      const c = p.pushNotificationConfig;
      const auth = c.authentication?.schemes.length ? { scheme: c.authentication.schemes[0], credentials: c.authentication.credentials } : undefined;
      return { op: 'create', config: { taskId: p.taskId, id: orUndefined(c.id), url: c.url, token: orUndefined(c.token), authentication: auth } };
    }
    case 'GetTaskPushNotificationConfig': {
      const p = params as Params<typeof GetPushConfigParams>;
      return { op: 'get', taskId: p.taskId, configId: p.id };
    }
    case 'tasks/pushNotificationConfig/get': {
      const p = params as Params<typeof LegacyGetPushConfigParams>;
      return { op: 'get', taskId: p.id, configId: p.pushNotificationConfigId };
    }
    case 'ListTaskPushNotificationConfigs': {
      const p = params as Params<typeof ListPushConfigsParams>;
      return { op: 'list', taskId: p.taskId, pageSize: p.pageSize || undefined, pageToken: orUndefined(p.pageToken) };
    }
    case 'tasks/pushNotificationConfig/list':
      return { op: 'list', taskId: (params as Params<typeof LegacyListPushConfigsParams>).id };
    case 'DeleteTaskPushNotificationConfig': {
      const p = params as Params<typeof DeletePushConfigParams>;
      return { op: 'delete', taskId: p.taskId, configId: p.id };
    }
    case 'tasks/pushNotificationConfig/delete': {
      const p = params as Params<typeof LegacyDeletePushConfigParams>;
      return { op: 'delete', taskId: p.id, configId: p.pushNotificationConfigId };
    }
    default:
      throw new Error(`${method} is not a push-config method`);
  }
}
