/**
 * The push-delivery activity: sends a task's logged events to one webhook config, in order, one POST each,
 * resuming after the config's delivery cursor (A2A §1.12: at-least-once, retried with backoff).
 *
 * The cursor only moves on a 2xx, and a failure throws a retryable ApplicationFailure, so Temporal's retry
 * policy is the backoff and every retry starts with the event that failed. Each event keeps one delivery id
 * (`<configId>:<seq>`) however often it is sent, so receivers can drop repeats.
 */
import { StreamResponse } from '@a2a-js/sdk';
import { V03PushNotificationSerializer } from '@a2a-js/sdk/compat/v0_3/server';
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Pool } from 'pg';
import { closesStream, headSeq, readEvents, type LoggedEvent } from '../src/core/events/event-log';
import type { StreamEvent } from '../task/wire';
import { followEvents } from '../src/core/events/follow';
import type { EventHub } from '../src/core/events/hub';
import { DELIVERY_HEADERS, signDelivery, signingKey, type SigningKey } from '../src/core/push/signing';
import { PushStore, type PushConfig } from '../src/core/push/store';
import { isHmacScheme } from '../src/core/push/params';
import { pushDeliveries } from '../src/core/metrics';
import { pushBody01 } from '../task/v01-events';

export interface DeliverPushDeps {
  pool: Pool;
  /** The guarded outbound fetch (src/core/http/outbound.ts): webhook URLs are user input. */
  fetch: typeof fetch;
  hub: EventHub;
  /** The JWT `iss`: the gateway's public URL when it has one. Default 'switchboard'. */
  issuer?: string;
}

export interface DeliverPushArgs {
  tenant: string;
  taskId: string;
  configId: string;
  /** Wait for new events (until one closes the stream, or none came for idleMs); false: stop at the end of the log. */
  follow: boolean;
  idleMs?: number;
}

export interface DeliverPushResult {
  /** The last seq the webhook acknowledged. */
  cursor: number;
  /** The last delivered event ended the stream (terminal or interrupted state). */
  closed: boolean;
  /** The config was deleted: nothing more to deliver to it. */
  gone: boolean;
}

/** §1.12: "the timeout should be 10–30 s". */
const POST_TIMEOUT_MS = 15_000;
const DEFAULT_IDLE_MS = 30_000;
const HEARTBEAT_MS = 1_000;

/**
 * @throws ApplicationFailure type PushDeliveryFailed (retryable) when the webhook did not answer 2xx;
 * CancelledFailure when the activity is cancelled.
 */
export async function deliverPush(deps: DeliverPushDeps, args: DeliverPushArgs): Promise<DeliverPushResult> {
  const { tenant, taskId, configId } = args;
  const store = new PushStore(deps.pool);
  const config = await store.get(tenant, taskId, configId);
  if (!config) return { cursor: 0, closed: false, gone: true };
  let cursor = config.status.deliveredSeq;

  const ctx = activityContext();
  const cancelled = ctx?.cancellationSignal;
  // Ends the follow: on idle, or (through `cancelled`) when the activity is cancelled.
  const stop = new AbortController();
  const signal = cancelled ? AbortSignal.any([cancelled, stop.signal]) : stop.signal;
  const idle = args.follow ? idleTimer(args.idleMs ?? DEFAULT_IDLE_MS, () => stop.abort()) : undefined;
  const beat = ctx && setInterval(() => ctx.heartbeat({ cursor }), HEARTBEAT_MS);

  try {
    // The end of the log, for follow: false (re-read when reached: the task may still be writing).
    let head = await headSeq(deps.pool, tenant, taskId);
    if (cursor >= head) {
      // Nothing new. If the last delivered event closed the stream (a run that delivered it but stopped before
      // returning), say so rather than wait for more.
      const closed = await closedAt(deps.pool, tenant, taskId, cursor);
      if (closed || !args.follow) return { cursor, closed, gone: false };
    }

    const key = await signingKey(deps.pool);
    idle?.start();
    for await (const logged of followEvents({ pool: deps.pool, hub: deps.hub, tenant, taskId, afterSeq: cursor, signal })) {
      idle?.pause(); // a slow webhook is not an idle task
      // Re-read per event: a deleted config stops at once, and a replaced one (same id) is used from the next POST.
      const current = await store.get(tenant, taskId, configId);
      if (!current) return { cursor, closed: false, gone: true };
      const stillThere = await deliverOne(deps, store, key, current, logged, cancelled);
      cursor = logged.seq;
      if (!stillThere) return { cursor, closed: false, gone: true }; // deleted while the POST was out
      ctx?.heartbeat({ cursor });
      if (closesStream(logged.event)) return { cursor, closed: true, gone: false };
      if (!args.follow && cursor >= head) {
        head = await headSeq(deps.pool, tenant, taskId);
        if (cursor >= head) return { cursor, closed: false, gone: false };
      }
      idle?.start();
    }
    // The follow ended without a closing event: idle, or cancelled.
    if (cancelled?.aborted) await ctx!.cancelled;
    return { cursor, closed: false, gone: false };
  } catch (err) {
    if (cancelled?.aborted) await ctx!.cancelled; // report the cancellation, not the abort it caused
    throw err;
  } finally {
    idle?.pause();
    clearInterval(beat);
  }
}

/**
 * POSTs one event and records the outcome.
 * @returns false when the 2xx could not be recorded because the config has been deleted meanwhile.
 * @throws ApplicationFailure PushDeliveryFailed unless the answer is 2xx.
 */
async function deliverOne(
  deps: DeliverPushDeps,
  store: PushStore,
  key: SigningKey,
  config: PushConfig,
  logged: LoggedEvent,
  cancelled?: AbortSignal,
): Promise<boolean> {
  const { body, contentType } = serialize(config.dialect, logged.event, config.dialect === '0.1' ? await artifactIndexOf(deps.pool, config, logged) : 0);
  const deliveryId = `${config.id}:${logged.seq}`;
  const headers = {
    'content-type': contentType,
    ...authHeaders(config),
    ...(await signDelivery(key, {
      deliveryId,
      timestamp: Math.floor(Date.now() / 1000),
      body,
      taskId: config.taskId,
      configId: config.id,
      issuer: deps.issuer ?? 'switchboard',
      secret: config.hmacSecret,
    })),
  };
  const timeout = AbortSignal.timeout(POST_TIMEOUT_MS);
  let failure: string;
  try {
    const res = await deps.fetch(config.url, {
      method: 'POST',
      headers,
      body,
      signal: cancelled ? AbortSignal.any([cancelled, timeout]) : timeout,
    });
    await res.body?.cancel().catch(() => undefined); // the answer's body means nothing to us; free the connection
    if (res.ok) {
      pushDeliveries.inc({ outcome: 'delivered' });
      return await store.recordSuccess(config.tenant, config.taskId, config.id, logged.seq);
    }
    failure = `webhook answered HTTP ${res.status}${res.statusText ? ` ${res.statusText}` : ''}`;
  } catch (err) {
    if (cancelled?.aborted) throw err; // not the webhook's failure
    failure = timeout.aborted ? `webhook did not answer within ${POST_TIMEOUT_MS / 1000} s` : `webhook unreachable: ${(err as Error).message}`;
  }
  pushDeliveries.inc({ outcome: 'failed' });
  await store.recordFailure(config.tenant, config.taskId, config.id, `delivery ${deliveryId}: ${failure}`);
  throw ApplicationFailure.retryable(`push delivery ${deliveryId} to ${config.url} failed: ${failure}`, 'PushDeliveryFailed');
}

/**
 * 1.0 configs get the logged StreamResponse as is (application/a2a+json); 0.3 configs get the bare 0.3 event
 * (`kind`, `final`) as application/json, translated by the SDK's own 0.3 push serializer; 0.1 configs (a 0.1
 * client's) get the event as its 0.1 stream shows it, `{id, status, final}` or `{id, artifact}`, as application/json.
 * @param artifactIndex 0.1's number for an artifact event's artifact.
 */
export function serialize(dialect: PushConfig['dialect'], event: StreamEvent, artifactIndex = 0): { body: string; contentType: string } {
  if (dialect === '1.0') return { body: JSON.stringify(event), contentType: 'application/a2a+json' };
  if (dialect === '0.1') return { body: JSON.stringify(pushBody01(event, closesStream(event), artifactIndex)), contentType: 'application/json' };
  return new V03PushNotificationSerializer().serialize(StreamResponse.fromJSON(event));
}

/** 0.1 numbers artifacts (it has no ids): an artifact's number is its order of first appearance in the task's log. */
async function artifactIndexOf(pool: Pool, config: PushConfig, logged: LoggedEvent): Promise<number> {
  if (!('artifactUpdate' in logged.event)) return 0;
  const { artifactId } = logged.event.artifactUpdate.artifact;
  const { rows } = await pool.query<{ id: string }>(
    `SELECT event->'artifactUpdate'->'artifact'->>'artifactId' AS id FROM task_events
      WHERE tenant = $1 AND task_id = $2 AND kind = 'artifactUpdate' AND seq <= $3 GROUP BY 1 ORDER BY min(seq)`,
    [config.tenant, config.taskId, logged.seq],
  );
  return Math.max(0, rows.findIndex((r) => r.id === artifactId));
}

/** The client's own credentials for its webhook (an HMAC secret is never sent: it signs instead). */
function authHeaders(config: PushConfig): Record<string, string> {
  const headers: Record<string, string> = {};
  if (config.token) headers[DELIVERY_HEADERS.token] = config.token;
  const auth = config.authentication;
  if (auth?.credentials && !isHmacScheme(auth.scheme)) headers.authorization = `${auth.scheme} ${auth.credentials}`;
  return headers;
}

/** Whether the event at `seq` ended the stream. */
async function closedAt(pool: Pool, tenant: string, taskId: string, seq: number): Promise<boolean> {
  if (seq === 0) return false;
  const [event] = await readEvents(pool, tenant, taskId, seq - 1, 1);
  return event?.seq === seq && closesStream(event.event);
}

/** The activity's context, or undefined when called outside an activity (tests, scripts). */
function activityContext(): Context | undefined {
  try {
    return Context.current();
  } catch {
    return undefined;
  }
}

/** Fires `onIdle` once `ms` pass between start() and pause(). */
function idleTimer(ms: number, onIdle: () => void) {
  let timer: NodeJS.Timeout | undefined;
  return {
    start() {
      clearTimeout(timer);
      timer = setTimeout(onIdle, ms);
    },
    pause() {
      clearTimeout(timer);
      timer = undefined;
    },
  };
}
