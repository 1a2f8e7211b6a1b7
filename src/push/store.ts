/**
 * Push-notification configs (A2A §1.12; reference/a2a-protocol.md §1.3, §1.12): the params of the eight
 * push-config methods (1.0 and 0.3), the PostgreSQL store, and the rendering of a config back to each dialect.
 *
 * Secrets go in and never come out: the token, the authentication credentials and the HMAC secret are stored
 * for deliveries (activities/deliver-push.ts) but no render function includes them. What a client gets back
 * instead is `deliveryStatus`, which is how it can tell whether its webhook is being reached.
 */
import { randomUUID } from 'node:crypto';
import * as dns from 'node:dns';
import type { Pool } from 'pg';
import { z } from 'zod';
import { a2aError } from '../a2a/errors';
import { isPrivateAddress } from '../http/outbound';

export type PushDialect = '1.0' | '0.3';

/** The scheme name that makes `credentials` an HMAC secret for X-Switchboard-Signature instead of an Authorization header. */
export const HMAC_SCHEME = 'HMAC-SHA256';
export const isHmacScheme = (scheme: string | undefined) => scheme?.toUpperCase() === HMAC_SCHEME;

// ---------------------------------------------------------------------------------------------
// Params of the JSON-RPC methods

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
 * Validates the params of a push-config method and turns them into a PushRequest.
 * @throws a2aError InvalidParams (with field violations) when the params do not fit; Error for a method
 * that is not a push-config method (a programming error).
 */
export function parsePushRequest(method: string, params: unknown): { dialect: PushDialect; request: PushRequest } {
  const dialect: PushDialect | undefined = Object.hasOwn(PUSH_METHOD_PARAMS['1.0'], method)
    ? '1.0'
    : Object.hasOwn(PUSH_METHOD_PARAMS['0.3'], method)
      ? '0.3'
      : undefined;
  if (!dialect) throw new Error(`${method} is not a push-config method`);
  const schema = (PUSH_METHOD_PARAMS[dialect] as Record<string, z.ZodType>)[method];
  const parsed = schema.safeParse(params);
  if (!parsed.success) {
    const violations = parsed.error.issues.map((i) => ({ field: i.path.join('.'), description: i.message }));
    throw a2aError('InvalidParams', `Invalid params for ${method}: ${z.prettifyError(parsed.error)}`, violations);
  }
  return { dialect, request: toRequest(method, parsed.data) };
}

// `p` has passed the method's schema (PUSH_METHOD_PARAMS), so its shape is known per case.
function toRequest(method: string, p: any): PushRequest {
  switch (method) {
    case 'CreateTaskPushNotificationConfig':
      return {
        op: 'create',
        config: { taskId: p.taskId, id: orUndefined(p.id), url: p.url, token: orUndefined(p.token), authentication: p.authentication },
      };
    case 'tasks/pushNotificationConfig/set': {
      const c = p.pushNotificationConfig;
      const auth = c.authentication?.schemes.length ? { scheme: c.authentication.schemes[0], credentials: c.authentication.credentials } : undefined;
      return { op: 'create', config: { taskId: p.taskId, id: orUndefined(c.id), url: c.url, token: orUndefined(c.token), authentication: auth } };
    }
    case 'GetTaskPushNotificationConfig':
      return { op: 'get', taskId: p.taskId, configId: p.id };
    case 'tasks/pushNotificationConfig/get':
      return { op: 'get', taskId: p.id, configId: p.pushNotificationConfigId };
    case 'ListTaskPushNotificationConfigs':
      return { op: 'list', taskId: p.taskId, pageSize: p.pageSize || undefined, pageToken: orUndefined(p.pageToken) };
    case 'tasks/pushNotificationConfig/list':
      return { op: 'list', taskId: p.id };
    case 'DeleteTaskPushNotificationConfig':
      return { op: 'delete', taskId: p.taskId, configId: p.id };
    case 'tasks/pushNotificationConfig/delete':
      return { op: 'delete', taskId: p.id, configId: p.pushNotificationConfigId };
    default:
      throw new Error(`${method} is not a push-config method`);
  }
}

// ---------------------------------------------------------------------------------------------
// Webhook URL policy

/**
 * Refuses a webhook Switchboard must not call (§1.12 SSRF): anything but http(s), user:password in the URL
 * (it would be echoed back as part of the URL), and unless allowPrivate, a host that is or resolves to a
 * private, loopback or link-local address. The outbound client checks the address again at every connect
 * (DNS can change); this check is so that the client hears "no" now rather than a webhook that never fires.
 * @throws a2aError InvalidParams naming the reason.
 */
export async function checkWebhookUrl(raw: string, allowPrivate: boolean): Promise<void> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw a2aError('InvalidParams', `webhook url is not a valid URL: ${raw}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw a2aError('InvalidParams', `webhook url must be http or https, got ${url.protocol}`);
  if (url.username || url.password) throw a2aError('InvalidParams', 'webhook url must not carry credentials; use authentication');
  if (allowPrivate) return;
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  for (const address of await resolve(host)) {
    if (isPrivateAddress(address)) {
      throw a2aError('InvalidParams', `webhook host ${host} is a private, loopback or link-local address (${address}); push webhooks must be public`);
    }
  }
}

async function resolve(host: string): Promise<string[]> {
  try {
    return (await dns.promises.lookup(host, { all: true, verbatim: true })).map((a) => a.address);
  } catch (err) {
    throw a2aError('InvalidParams', `webhook host ${host} does not resolve (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
}

// ---------------------------------------------------------------------------------------------
// Store

export interface DeliveryStatus {
  /** Successful POSTs (a redelivery of the same event counts again). */
  deliveries: number;
  attempts: number;
  failures: number;
  lastAttemptAt?: string;
  lastSuccessAt?: string;
  lastError?: string;
  /** The last event seq the webhook acknowledged: deliveries resume after it. */
  deliveredSeq: number;
}

/** A stored config, secrets included: for the delivery activity. Never render this directly. */
export interface PushConfig {
  tenant: string;
  taskId: string;
  id: string;
  dialect: PushDialect;
  url: string;
  token?: string;
  /** For HMAC-SHA256 only `{scheme}`: the secret is `hmacSecret`. */
  authentication?: { scheme: string; credentials?: string };
  hmacSecret?: string;
  status: DeliveryStatus;
  createdAt: string;
}

export interface PushConfigPage {
  configs: PushConfig[];
  /** "" on the last page (1.0 §ListTaskPushNotificationConfigs). */
  nextPageToken: string;
}

export interface CreateOptions {
  /** Where a new config's deliveries start: events with seq > this (default 0, the whole log). Ignored on replace. */
  startAfterSeq?: number;
}

interface PushConfigRow {
  tenant: string;
  task_id: string;
  config_id: string;
  dialect: PushDialect;
  url: string;
  token: string | null;
  authentication: { scheme: string; credentials?: string } | null;
  hmac_secret: string | null;
  delivered_seq: string;
  attempts: string;
  failures: string;
  deliveries: string;
  last_attempt_at: Date | null;
  last_success_at: Date | null;
  last_error: string | null;
  created_at: Date;
}

const DEFAULT_PAGE = 50;
const MAX_ERROR_CHARS = 500;

export class PushStore {
  /** @param allowPrivate SWITCHBOARD_ALLOW_PRIVATE_URLS: permit webhooks on private addresses (local receivers, tests). */
  constructor(
    private readonly pool: Pool,
    private readonly options: { allowPrivate: boolean } = { allowPrivate: false },
  ) {}

  /**
   * Stores a config. Creating with the id of an existing config of the task replaces its URL, token and
   * authentication, but keeps its delivery cursor and counters: a client retrying its create must not cause
   * every event to be sent again.
   * @throws a2aError InvalidParams for a webhook URL that may not be called (see checkWebhookUrl).
   */
  async create(tenant: string, dialect: PushDialect, input: PushConfigInput, opts: CreateOptions = {}): Promise<PushConfig> {
    await checkWebhookUrl(input.url, this.options.allowPrivate);
    const id = input.id || randomUUID();
    const auth = input.authentication;
    const hmac = isHmacScheme(auth?.scheme);
    const { rows } = await this.pool.query<PushConfigRow>(
      `INSERT INTO push_configs (tenant, task_id, config_id, dialect, url, token, authentication, hmac_secret, delivered_seq)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
       ON CONFLICT (tenant, task_id, config_id) DO UPDATE SET
         dialect = EXCLUDED.dialect, url = EXCLUDED.url, token = EXCLUDED.token,
         authentication = EXCLUDED.authentication, hmac_secret = EXCLUDED.hmac_secret, updated_at = now()
       RETURNING *`,
      [
        tenant,
        input.taskId,
        id,
        dialect,
        input.url,
        input.token ?? null,
        auth ? (hmac ? { scheme: auth.scheme } : auth) : null,
        hmac ? auth!.credentials : null,
        opts.startAfterSeq ?? 0,
      ],
    );
    return toConfig(rows[0]);
  }

  /** A config, or with configId undefined the task's newest one; undefined when there is none. */
  async get(tenant: string, taskId: string, configId?: string): Promise<PushConfig | undefined> {
    const { rows } =
      configId === undefined
        ? await this.pool.query<PushConfigRow>(
            'SELECT * FROM push_configs WHERE tenant = $1 AND task_id = $2 ORDER BY created_at DESC, config_id DESC LIMIT 1',
            [tenant, taskId],
          )
        : await this.pool.query<PushConfigRow>('SELECT * FROM push_configs WHERE tenant = $1 AND task_id = $2 AND config_id = $3', [
            tenant,
            taskId,
            configId,
          ]);
    return rows[0] && toConfig(rows[0]);
  }

  /**
   * A page of the task's configs in id order. Without pageSize: 50 (at most 100).
   * @throws a2aError InvalidParams for a pageToken this store did not issue.
   */
  async list(tenant: string, taskId: string, page: { pageSize?: number; pageToken?: string } = {}): Promise<PushConfigPage> {
    const size = Math.min(page.pageSize || DEFAULT_PAGE, 100);
    const after = page.pageToken ? decodePageToken(page.pageToken) : '';
    const { rows } = await this.pool.query<PushConfigRow>(
      'SELECT * FROM push_configs WHERE tenant = $1 AND task_id = $2 AND config_id > $3 ORDER BY config_id LIMIT $4',
      [tenant, taskId, after, size + 1],
    );
    const more = rows.length > size;
    const configs = rows.slice(0, size).map(toConfig);
    return { configs, nextPageToken: more ? encodePageToken(configs[configs.length - 1].id) : '' };
  }

  /** Deletes a config; deleting one that is not there is not an error (§1.12: delete is idempotent). @returns whether it existed. */
  async delete(tenant: string, taskId: string, configId: string): Promise<boolean> {
    const { rowCount } = await this.pool.query('DELETE FROM push_configs WHERE tenant = $1 AND task_id = $2 AND config_id = $3', [
      tenant,
      taskId,
      configId,
    ]);
    return (rowCount ?? 0) > 0;
  }

  /** Deletes every config of a task (when the task's push deliveries are over). @returns how many there were. */
  async deleteAll(tenant: string, taskId: string): Promise<number> {
    const { rowCount } = await this.pool.query('DELETE FROM push_configs WHERE tenant = $1 AND task_id = $2', [tenant, taskId]);
    return rowCount ?? 0;
  }

  /**
   * Records a 2xx for event `seq`. GREATEST keeps the cursor from moving back if two deliveries ever overlap.
   * @returns false when the config is gone.
   */
  async recordSuccess(tenant: string, taskId: string, configId: string, seq: number): Promise<boolean> {
    const { rowCount } = await this.pool.query(
      `UPDATE push_configs SET delivered_seq = GREATEST(delivered_seq, $4), attempts = attempts + 1, deliveries = deliveries + 1,
         last_attempt_at = now(), last_success_at = now()
       WHERE tenant = $1 AND task_id = $2 AND config_id = $3`,
      [tenant, taskId, configId, seq],
    );
    return (rowCount ?? 0) > 0;
  }

  /** Records a failed POST; the cursor stays, so the next attempt sends the same event again. */
  async recordFailure(tenant: string, taskId: string, configId: string, error: string): Promise<void> {
    await this.pool.query(
      `UPDATE push_configs SET attempts = attempts + 1, failures = failures + 1, last_attempt_at = now(), last_error = $4
       WHERE tenant = $1 AND task_id = $2 AND config_id = $3`,
      [tenant, taskId, configId, error.slice(0, MAX_ERROR_CHARS)],
    );
  }
}

const encodePageToken = (lastId: string) => Buffer.from(`c1:${lastId}`).toString('base64url');
function decodePageToken(token: string): string {
  const text = Buffer.from(token, 'base64url').toString();
  if (!text.startsWith('c1:') || text.length === 3) throw a2aError('InvalidParams', 'pageToken is not one this server issued');
  return text.slice(3);
}

function toConfig(r: PushConfigRow): PushConfig {
  return {
    tenant: r.tenant,
    taskId: r.task_id,
    id: r.config_id,
    dialect: r.dialect,
    url: r.url,
    token: r.token ?? undefined,
    authentication: r.authentication ?? undefined,
    hmacSecret: r.hmac_secret ?? undefined,
    status: {
      deliveries: Number(r.deliveries),
      attempts: Number(r.attempts),
      failures: Number(r.failures),
      lastAttemptAt: r.last_attempt_at?.toISOString(),
      lastSuccessAt: r.last_success_at?.toISOString(),
      lastError: r.last_error ?? undefined,
      deliveredSeq: Number(r.delivered_seq),
    },
    createdAt: r.created_at.toISOString(),
  };
}

// ---------------------------------------------------------------------------------------------
// Rendering: each dialect's TaskPushNotificationConfig plus deliveryStatus, without token or credentials

/** JSON.stringify drops undefined members; this keeps the rendered objects free of them for deepEqual too. */
function compact<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

const renderStatus = (s: DeliveryStatus): DeliveryStatus => compact({ ...s });

/** 1.0 TaskPushNotificationConfig (flat) + deliveryStatus. */
export function renderV1(c: PushConfig) {
  return compact({
    id: c.id,
    taskId: c.taskId,
    url: c.url,
    authentication: c.authentication && { scheme: c.authentication.scheme },
    deliveryStatus: renderStatus(c.status),
  });
}

/** 0.3 TaskPushNotificationConfig ({taskId, pushNotificationConfig}) + deliveryStatus. */
export function renderV03(c: PushConfig) {
  return {
    taskId: c.taskId,
    pushNotificationConfig: compact({ id: c.id, url: c.url, authentication: c.authentication && { schemes: [c.authentication.scheme] } }),
    deliveryStatus: renderStatus(c.status),
  };
}

export function renderConfig(dialect: PushDialect, c: PushConfig) {
  return dialect === '1.0' ? renderV1(c) : renderV03(c);
}

/** 1.0 ListTaskPushNotificationConfigsResponse; 0.3 answers a bare array (it has no paging). */
export function renderList(dialect: PushDialect, page: PushConfigPage) {
  return dialect === '1.0' ? { configs: page.configs.map(renderV1), nextPageToken: page.nextPageToken } : page.configs.map(renderV03);
}
