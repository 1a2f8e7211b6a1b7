/**
 * NEXUS (seed 000): `message/send` with `{type, data}` parts and the task id in `params.id`, answered as
 * `{id, status: "<state>", messages, artifacts}` with `{type, data}` parts; `tasks/get` (and `tasks/cancel`) on a task
 * started that way answer in the same shape. Each call runs as its 1.0 method. A `params.id` is a client-chosen task
 * id, as in 0.1 (see v01.ts); without one the gateway mints it, as NEXUS does ("auto-generated if omitted").
 */
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { A2A_ERRORS, a2aError } from '../errors';
import { legacyError } from '../rpc-errors';
import { fromNexusPart, toNexusPart } from '../../../../task/nexus-parts';
import type { WireArtifact, WireMessage, WirePart, WireTask } from '../../../../task/wire';
import type { DialectContext, DialectDef } from './dialect';
import { type TaskRef, TaskRefParams, withId } from './v03';
import { ClientTaskId, plainError, renderTask, requestKey, requestMessageId, sendByClientId, taskMetadata } from './v01';
import { state01 } from '../../../../task/v01-events';

const metadata = z.record(z.string(), z.unknown());

// NEXUS's Part: `type` ("text", "image", "file", …) and `data`, "any". A text part whose text is in `text` (0.1
// style) is taken too.
const NexusPart = z.object({ type: z.string().min(1).max(64), data: z.unknown().optional(), text: z.string().optional(), metadata: metadata.optional() });
const NexusMessage = z.object({ role: z.enum(['user', 'agent']), parts: z.array(NexusPart).min(1), metadata: metadata.optional() });
export const NexusSendParams = z.object({ id: ClientTaskId.optional(), message: NexusMessage, metadata: metadata.optional() });
export type NexusSend = z.infer<typeof NexusSendParams>;

function toWirePart(p: z.infer<typeof NexusPart>, i: number): WirePart {
  if (p.type === 'text' && p.data === undefined && p.text === undefined) {
    const field = `message.parts.${i}.data`;
    throw a2aError('InvalidParams', `Invalid params for message/send: ${field} is missing (a text part's content)`, [{ field, description: 'is required' }]);
  }
  return fromNexusPart(p.type, p.data, p.metadata, p.text);
}

/** A NEXUS message in the 1.0 wire form (it has no messageId: one is minted, or derived for a chosen task id). */
export function nexusWireMessage(m: z.infer<typeof NexusMessage>, params?: Record<string, unknown>): WireMessage {
  const meta = { ...params, ...m.metadata };
  return {
    messageId: randomUUID(),
    role: m.role === 'agent' ? 'ROLE_AGENT' : 'ROLE_USER',
    parts: m.parts.map(toWirePart),
    ...(Object.keys(meta).length && { metadata: meta }),
  };
}

const nexusMessage = (m: WireMessage) => ({ role: m.role === 'ROLE_AGENT' ? 'agent' : 'user', parts: m.parts.map(toNexusPart) });
const nexusArtifact = (a: WireArtifact) => ({ ...(a.name && { name: a.name }), ...(a.description && { description: a.description }), parts: a.parts.map(toNexusPart) });

/** A task in NEXUS's shape: `status` is the bare state, `messages` the history. */
export function nexusTask(t: WireTask, client?: Record<string, unknown>): Record<string, unknown> {
  const metadata = taskMetadata(t, client);
  return {
    id: t.id,
    status: state01(t.status.state),
    messages: (t.history ?? []).map(nexusMessage),
    artifacts: (t.artifacts ?? []).map(nexusArtifact),
    ...(metadata && { metadata }),
  };
}

/** message/send: a chosen id goes the 0.1 way (new, next turn, or the task as it ended); no id, a new task. */
export function nexusSend(p: NexusSend, ctx: DialectContext, configuration?: Record<string, unknown>) {
  const message = nexusWireMessage(p.message, p.metadata);
  const record = { dialect: 'nexus' as const };
  if (p.id === undefined) {
    // A new task of the gateway's id: its message names the request, as a later turn's does (v01.ts retriesLatest).
    message.messageId = requestMessageId(ctx.requestId === undefined ? undefined : requestKey(ctx.requestId));
    return { method: 'SendMessage', params: { message, ...(configuration && { configuration }), ...(p.metadata && { metadata: p.metadata }) }, intent: { record } };
  }
  return sendByClientId(ctx, { id: p.id, message, streaming: false, configuration, metadata: p.metadata }, record, (task) => ({ method: 'GetTask', params: { id: task.id } }));
}

/** NEXUS's message/send: a message without `kind` (0.3's has it) whose parts are `{type, data}`, or that names `params.id`. */
const nexusShaped = (params: unknown) => {
  const p = params as { id?: unknown; message?: { kind?: unknown; parts?: unknown } } | undefined;
  if (p?.message?.kind !== undefined) return false;
  const parts = Array.isArray(p?.message?.parts) ? (p.message.parts as Record<string, unknown>[]) : [];
  return p?.id !== undefined || parts.some((x) => x && typeof x === 'object' && 'type' in x && !('kind' in x));
};

/** NEXUS's own A2A endpoint (seed 000: "POST /api/v1/a2a"): the path names the dialect. */
export const NEXUS_PATH = '/api/v1/a2a';

/**
 * An error answered on NEXUS's path as the seed has it: a task-addressed call (`tasks/get`, `tasks/cancel`) of a task
 * the tenant does not have is -32602 ("bad parameters (e.g., task not found)"), not the spec's -32001. 1.0 methods
 * name their dialect themselves and keep the spec's code.
 */
export function onNexusPath(method: string, error: { code: number; message: string; data?: unknown }) {
  const taskAddressed = method === 'tasks/get' || method === 'tasks/cancel';
  if (!taskAddressed || error.code !== A2A_ERRORS.TaskNotFound.code) return error;
  return { code: A2A_ERRORS.InvalidParams.code, message: `Invalid params: ${error.message}`, data: [{ field: 'id', description: 'no such task' }] };
}

export const NEXUS: DialectDef = {
  name: 'nexus',
  methods: {
    'message/send': { params: NexusSendParams, runs: 'SendMessage', translate: (p: NexusSend, ctx) => nexusSend(p, ctx), render: renderTask(nexusTask) },
    'tasks/get': { params: TaskRefParams, runs: 'GetTask', translate: (p: TaskRef) => ({ method: 'GetTask', params: withId(p) }), render: renderTask(nexusTask) },
    'tasks/cancel': { params: TaskRefParams, runs: 'CancelTask', translate: (p: TaskRef) => ({ method: 'CancelTask', params: { id: withId(p).id } }), render: renderTask(nexusTask) },
  },
  claims: (method, params) => method === 'message/send' && nexusShaped(params),
  byTask: true,
  renderError: legacyError,
  renderEngineError: plainError,
  // NEXUS documents no stream method.
  streamRenderer: () => (result) => result,
};
