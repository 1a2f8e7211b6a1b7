/**
 * Push notifications from agents to Switchboard (issue 13): an agent whose card declares
 * `capabilities.pushNotifications` and that is not streamed gets, with the non-blocking send, a push config whose
 * URL is `POST /agent-push/:id` and whose token only Switchboard can make. The webhook verifies the token and
 * wakes the forwarding activity that follows the agent's task (another process, through NOTIFY); the activity
 * then reads the task with GetTask. The push is a hint, GetTask the truth: a forged, repeated or late push costs
 * at most one GetTask, never a wrong state.
 *
 * Tokens are not stored anywhere: `v1.<keyId>.<expiry>.<HMAC-SHA256(key, id + expiry)>`, with a key derived from
 * SWITCHBOARD_SECRETS_KEY (every process has it), so a leaked database row or log line of ids lets no one forge
 * one, every attempt of a turn (another worker, after a crash) can make the same token again, and a rotated
 * key ring still verifies tokens of its older keys. The id is derived from the turn (workflow id, run, activity),
 * so it names one tenant's one turn; a token is valid for that id only, until the turn's task deadline.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { KeyRing } from '../temporal/encryption-codec';
import { TASK_STATES, type TaskState } from '../../../task/wire';
import { objectOr, stateOf } from '../agents/transports/json-rpc';


/** The route's path for a follow id (the agent is given the public base URL before it). */
export const agentPushPath = (id: string) => `/agent-push/${encodeURIComponent(id)}`;

/** The push config's id at the agent: one per agent task, so a follow-up turn's config replaces the previous one. */
export const PUSH_CONFIG_ID = 'switchboard';

/** The follow id of one turn (every attempt of the activity gets the same one). */
export function followIdOf(workflowId: string, runId: string, activityId: string): string {
  return createHash('sha256').update(`${workflowId}\u0000${runId}\u0000${activityId}`).digest('base64url').slice(0, 32);
}

const LABEL = 'switchboard/agent-push/v1';

export class AgentPushTokens {
  private readonly keys = new Map<string, Buffer>();
  private readonly current: string;

  /** Derives the token keys from SWITCHBOARD_SECRETS_KEY's ring (a key of their own, not the sealing key). */
  constructor(ring: KeyRing) {
    for (const [id, key] of ring.keys) this.keys.set(id, createHmac('sha256', key).update(LABEL).digest());
    this.current = ring.current;
  }

  /** The token for follow `id`, valid until `expiresAtMs`. */
  issue(id: string, expiresAtMs: number): string {
    const exp = Math.ceil(expiresAtMs / 1000).toString(36);
    return `v1.${this.current}.${exp}.${this.mac(this.keys.get(this.current)!, id, exp).toString('base64url')}`;
  }

  /** Whether `token` was issued for `id` and has not expired. Constant-time in the MAC. */
  verify(id: string, token: string, nowMs = Date.now()): boolean {
    const m = /^v1\.([A-Za-z0-9_.-]{1,64})\.([0-9a-z]{1,12})\.([A-Za-z0-9_-]{43})$/.exec(token);
    const key = m && this.keys.get(m[1]!);
    if (!m || !key) return false;
    const expected = this.mac(key, id, m[2]!);
    const given = Buffer.from(m[3]!, 'base64url');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return false;
    return parseInt(m[2]!, 36) * 1000 >= nowMs;
  }

  private mac(key: Buffer, id: string, exp: string): Buffer {
    return createHmac('sha256', key).update(`${id}\u0000${exp}`).digest();
  }
}

/** What a push says: the agent task it is about, and the state it reports when it reports one. */
export interface PushHint {
  taskId: string;
  state?: TaskState;
}

export class PushBodyError extends Error {}

/**
 * Reads an agent's push body: 1.0 sends a StreamResponse (`{"task": …}`, `{"statusUpdate": …}`,
 * `{"artifactUpdate": …}`, `{"message": …}`; SPEC §1.12), 0.3 the bare event (`kind` task / status-update /
 * artifact-update / message), and some 0.3 agents a bare Task without `kind`.
 * @throws PushBodyError when it is none of those, names no task, or reports a state no version has.
 */
export function pushHint(body: unknown): PushHint {
  const o = objectOr(body);
  if (!o) throw new PushBodyError('the push body must be a JSON object (an A2A StreamResponse, or a 0.3 event)');
  const [key, inner] = Object.entries(o).length === 1 ? Object.entries(o)[0]! : [undefined, undefined];
  const wrapped = key && ['task', 'statusUpdate', 'artifactUpdate', 'message'].includes(key) ? objectOr(inner) : undefined;
  let event: Record<string, unknown>;
  let kind: string;
  if (wrapped) {
    event = wrapped;
    kind = key!;
  } else {
    event = o;
    const k = o.kind;
    kind = k === 'status-update' ? 'statusUpdate' : k === 'artifact-update' ? 'artifactUpdate' : k === 'message' ? 'message' : k === undefined || k === 'task' ? 'task' : '';
    if (!kind) throw new PushBodyError(`the push is of an unknown kind ${JSON.stringify(k)}`);
  }
  const taskId = kind === 'task' ? event.id : event.taskId;
  if (typeof taskId !== 'string' || !taskId) throw new PushBodyError(`the push (${kind}) names no task`);
  if (kind !== 'task' && kind !== 'statusUpdate') return { taskId };
  const raw = objectOr(event.status)?.state;
  if (raw === undefined) throw new PushBodyError(`the push (${kind}) has no status.state`);
  return { taskId, state: readState(raw) };
}

/** A 1.0 state name, or a 0.x one (`completed`, `input-required`…: the 0.x transports' reading) as the 1.0 state. */
function readState(raw: unknown): TaskState {
  if (typeof raw === 'string' && raw.startsWith('TASK_STATE_') && raw !== 'TASK_STATE_UNSPECIFIED' && (TASK_STATES as readonly string[]).includes(raw)) {
    return raw as TaskState;
  }
  try {
    return stateOf(raw);
  } catch {
    throw new PushBodyError(`the push reports an unknown task state ${JSON.stringify(raw)}`);
  }
}

/** Whether a push reports a state the follower must look at (the turn may be over); progress does not wake it. */
export const wakes = (hint: PushHint): boolean => hint.state !== undefined && hint.state !== 'TASK_STATE_SUBMITTED' && hint.state !== 'TASK_STATE_WORKING';
