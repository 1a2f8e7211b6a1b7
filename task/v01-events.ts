/**
 * A2A 0.1 tasks, messages and stream events in their 0.1 shape, from the 1.0 wire form: the 0.1 client dialect
 * (src/api/a2a/dialects/v01.ts, nexus.ts) answers and streams with them, the push delivery activity
 * (activities/deliver-push.ts) sends them to a 0.1 client's webhook. Pure functions over the wire types.
 */
import { stateLabel } from './rules';
import { toV01Part } from './v01-parts';
import type { StreamEvent, TaskState, WireArtifact, WireMessage, WireTaskStatus, WireTask } from './wire';

const role01 = (r: WireMessage['role']) => (r === 'ROLE_AGENT' ? 'agent' : 'user');

export function message01(m: WireMessage): Record<string, unknown> {
  return { role: role01(m.role), parts: m.parts.map(toV01Part), ...(m.metadata && Object.keys(m.metadata).length ? { metadata: m.metadata } : {}) };
}

/** 0.1 has no auth-required or rejected: the nearest of its states. */
export function state01(s: TaskState | string): string {
  if (s === 'TASK_STATE_AUTH_REQUIRED') return 'input-required';
  if (s === 'TASK_STATE_REJECTED') return 'failed';
  if (s === 'TASK_STATE_UNSPECIFIED') return 'unknown';
  return stateLabel(s as TaskState);
}

export const status01 = (s: WireTaskStatus) => ({ state: state01(s.state), ...(s.message && { message: message01(s.message) }), ...(s.timestamp && { timestamp: s.timestamp }) });

export const artifact01 = (a: WireArtifact, index: number) => ({
  ...(a.name && { name: a.name }),
  ...(a.description && { description: a.description }),
  parts: a.parts.map(toV01Part),
  index,
  ...(a.metadata && Object.keys(a.metadata).length ? { metadata: a.metadata } : {}),
});

export type Event10 = {
  task?: WireTask;
  statusUpdate?: { taskId: string; status: WireTaskStatus; metadata?: Record<string, unknown> };
  artifactUpdate?: { taskId: string; artifact: WireArtifact; append?: boolean; lastChunk?: boolean; metadata?: Record<string, unknown> };
};

/**
 * A 1.0 stream event in 0.1's shape: a TaskStatusUpdateEvent `{id, status, final}` (a task snapshot as its status) or
 * a TaskArtifactUpdateEvent `{id, artifact}`, the artifact numbered by `index`. Undefined for no such event.
 */
export function event01(r: Event10, final: boolean, index: (artifactId: string) => number): Record<string, unknown> | undefined {
  const extra = (metadata?: Record<string, unknown>) => (metadata && Object.keys(metadata).length ? { metadata } : {});
  if (r.artifactUpdate) {
    const { taskId, artifact, append, lastChunk, metadata } = r.artifactUpdate;
    const a = { ...artifact01(artifact, index(artifact.artifactId)), ...(append !== undefined && { append }), ...(lastChunk !== undefined && { lastChunk }) };
    return { id: taskId, artifact: a, ...extra(metadata) };
  }
  const update = r.statusUpdate ?? (r.task && { taskId: r.task.id, status: r.task.status, metadata: r.task.metadata });
  return update && { id: update.taskId, status: status01(update.status), final, ...extra(update.metadata) };
}

/**
 * A logged event as the webhook of a 0.1 client's push config gets it (activities/deliver-push.ts): as its stream
 * would show it, `final` on the event that ends the turn; `artifactIndex` numbers an artifact.
 */
export function pushBody01(event: StreamEvent, final: boolean, artifactIndex: number): Record<string, unknown> {
  return event01(event as Event10, final, () => artifactIndex) ?? {};
}
