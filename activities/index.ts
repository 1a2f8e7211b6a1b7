/**
 * The activities of the task workflow, bound to their dependencies. Workflows import this module's *type* only.
 */
import type { Pool } from 'pg';
import { EventHub } from '../src/events/hub';
import type { SettlementRequest, TaskRecord } from '../workflows/types';
import { recordTask, settleTask } from './bookkeeping';
import { cancelAtAgent, type CancelAtAgentArgs } from './cancel-at-agent';
import { deliverPush, type DeliverPushArgs } from './deliver-push';
import { forwardMessage, type ForwardArgs } from './forward-message';

export interface ActivityDeps {
  pool: Pool;
  /** The guarded outbound fetch (src/http/outbound.ts): every call to an agent goes through it. */
  fetch: typeof fetch;
  /** Tells this process's streams about events as soon as they are committed (other processes hear NOTIFY). */
  hub?: EventHub;
  /** The `iss` of push-delivery JWTs: the gateway's public URL when it has one. */
  issuer?: string;
}

export function createActivities({ pool, fetch, hub = new EventHub(), issuer }: ActivityDeps) {
  return {
    forwardMessage: (args: ForwardArgs) => forwardMessage({ fetch, pool, hub }, args),
    cancelAtAgent: (args: CancelAtAgentArgs) => cancelAtAgent(fetch, args),
    recordTask: (rec: TaskRecord) => recordTask(pool, hub, rec),
    settleTask: (req: SettlementRequest) => settleTask(pool, req),
    deliverPush: (args: DeliverPushArgs) => deliverPush({ pool, fetch, hub, issuer }, args),
  };
}
