/**
 * The hub's wire shapes (Society AI's WebSocket transport, A2A 0.1/0.2 style): parts `{type: "text", text}`,
 * `{type: "data", data}`, `{type: "file", file: {name, mimeType, bytes | uri}}` (0.3's `kind` is read too),
 * lower-case states, tasks `{id, sessionId, status: {state, message}, artifacts, metadata}`. Switchboard keeps
 * tasks in the 1.0 wire types (task/wire.ts); these functions translate at the socket.
 */
import { randomUUID } from 'node:crypto';
import { TASK_STATES, type TaskState, type WireArtifact, type WireMessage, type WirePart, type WireTask } from '../../../task/wire';
import { stateLabel } from '../../../task/rules';
import { V01_PART_SHAPES, fromV01Part, toV01Part } from '../../../task/v01-parts';

export type HubPart = Record<string, unknown>;
export interface HubMessage {
  role: 'user' | 'agent';
  parts: HubPart[];
  messageId?: string;
  metadata?: Record<string, unknown>;
}
export interface HubArtifact {
  name?: string;
  description?: string;
  index?: number;
  parts: HubPart[];
  append?: boolean;
  lastChunk?: boolean;
  metadata?: Record<string, unknown>;
}

/** Thrown for a frame whose params do not have the hub's shapes; answered -32602 naming the field. */
export class FrameError extends Error {}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A part of an agent's frame as the 1.0 wire form. @throws FrameError naming the field. */
function partFromHub(p: unknown, field: string): WirePart {
  const part = fromV01Part(p);
  if (!part) throw new FrameError(`${field} must be ${V01_PART_SHAPES}`);
  return part;
}

export function messageToHub(m: WireMessage): HubMessage {
  return {
    role: m.role === 'ROLE_AGENT' ? 'agent' : 'user',
    parts: m.parts.map(toV01Part),
    messageId: m.messageId,
    ...(m.metadata ? { metadata: m.metadata } : {}),
  };
}

/** An agent's message, with the gateway's ids (the agent's own ids, if any, are not the gateway's). */
export function messageFromHub(m: unknown, field: string, ids: { taskId: string; contextId: string }): WireMessage {
  if (!isObject(m) || !Array.isArray(m.parts)) throw new FrameError(`${field} must be a message {role, parts}`);
  return {
    messageId: typeof m.messageId === 'string' && m.messageId ? m.messageId : randomUUID(),
    role: m.role === 'user' ? 'ROLE_USER' : 'ROLE_AGENT',
    parts: m.parts.map((p, i) => partFromHub(p, `${field}.parts[${i}]`)),
    ...ids,
    ...(isObject(m.metadata) ? { metadata: m.metadata } : {}),
  };
}

/** `completed`, `input-required`… (0.1/0.2), or `TASK_STATE_…` as 1.0 writes it. */
export function stateFromHub(s: unknown, field: string): TaskState {
  const upper = typeof s === 'string' ? s.toUpperCase().replace(/-/g, '_') : '';
  const state = TASK_STATES.find((t) => t === upper || t === `TASK_STATE_${upper}`);
  if (!state) throw new FrameError(`${field} must be a task state (working, input-required, completed, failed, canceled, rejected, auth-required)`);
  return state;
}

export function artifactFromHub(a: unknown, field: string): WireArtifact & { append?: boolean; lastChunk?: boolean } {
  if (!isObject(a) || !Array.isArray(a.parts)) throw new FrameError(`${field} must be an artifact {name?, index?, parts}`);
  const id = typeof a.artifactId === 'string' ? a.artifactId : typeof a.name === 'string' ? a.name : `artifact-${typeof a.index === 'number' ? a.index : 0}`;
  return {
    artifactId: id,
    ...(typeof a.name === 'string' ? { name: a.name } : {}),
    ...(typeof a.description === 'string' ? { description: a.description } : {}),
    parts: a.parts.map((p, i) => partFromHub(p, `${field}.parts[${i}]`)),
    ...(isObject(a.metadata) ? { metadata: a.metadata } : {}),
    ...(a.append === true ? { append: true } : {}),
    ...(a.lastChunk === true ? { lastChunk: true } : {}),
  };
}

export function artifactToHub(a: WireArtifact, index: number): HubArtifact {
  return { name: a.name ?? a.artifactId, ...(a.description ? { description: a.description } : {}), index, parts: a.parts.map(toV01Part), ...(a.metadata ? { metadata: a.metadata } : {}) };
}

/** A gateway task as a 0.1/0.2 agent reads it (the answer to agent.send_task). */
export function taskToHub(t: WireTask): Record<string, unknown> {
  return {
    id: t.id,
    sessionId: t.contextId,
    status: { state: stateLabel(t.status.state), ...(t.status.message ? { message: messageToHub(t.status.message) } : {}), ...(t.status.timestamp ? { timestamp: t.status.timestamp } : {}) },
    artifacts: (t.artifacts ?? []).map(artifactToHub),
    ...(t.metadata ? { metadata: t.metadata } : {}),
  };
}

/** The task id an agent's update names: `id` (0.1/0.2) or `taskId` (0.3 events). */
export function taskIdOf(params: Record<string, unknown>): string {
  const id = params.id ?? params.taskId;
  if (typeof id !== 'string' || !id) throw new FrameError('params.id (the task id Switchboard sent) is required');
  return id;
}

export { isObject };
