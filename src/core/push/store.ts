/**
 * Push-notification configs in PostgreSQL (A2A §1.12): the SQL, and the stored shape with its delivery status.
 * Secrets (token, authentication credentials, HMAC secret) are stored for deliveries (activities/deliver-push.ts);
 * what a client sees is rendered by ./render.ts, which leaves them out. Params are ./params.ts's.
 */
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { z } from 'zod';
import { taskError } from '../../../task/errors';
import type { PushDialect } from '../../../task/wire';
import { cursorText, decodePageToken, encodePageToken } from '../db/page-token';
import { isHmacScheme, type PushConfigInput } from './params';
import { checkWebhookUrl } from './webhook-url';


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
   * @throws TaskError InvalidParams for a webhook URL that may not be called (see checkWebhookUrl).
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
   * @throws TaskError InvalidParams for a pageToken this store did not issue.
   */
  async list(tenant: string, taskId: string, page: { pageSize?: number; pageToken?: string } = {}): Promise<PushConfigPage> {
    const size = Math.min(page.pageSize || DEFAULT_PAGE, 100);
    const after = page.pageToken ? decodeConfigToken(page.pageToken) : '';
    const { rows } = await this.pool.query<PushConfigRow>(
      'SELECT * FROM push_configs WHERE tenant = $1 AND task_id = $2 AND config_id > $3 ORDER BY config_id LIMIT $4',
      [tenant, taskId, after, size + 1],
    );
    const more = rows.length > size;
    const configs = rows.slice(0, size).map(toConfig);
    return { configs, nextPageToken: more ? encodeConfigToken(configs[configs.length - 1].id) : '' };
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

const ConfigCursor = z.object({ c1: cursorText });
const encodeConfigToken = (lastId: string) => encodePageToken({ c1: lastId });
function decodeConfigToken(token: string): string {
  const cursor = decodePageToken(token, ConfigCursor);
  if (!cursor) throw taskError('InvalidParams', 'pageToken is not one this server issued');
  return cursor.c1;
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
