/**
 * A2A 0.1/0.2 as Society AI speaks it (seed 003): `tasks/send`, `tasks/sendSubscribe`, `tasks/get`, `tasks/cancel`,
 * `tasks/resubscribe` (and Society AI's `task/resubscribe`), `tasks/list`, `tasks/pushNotification/set|get`;
 * `{type}` parts, `sessionId`, and a task id the client chooses. Each call runs as its 1.0 method (push configs as
 * 0.3's, their webhook bodies written in 0.1's shapes) and is answered in 0.1's shapes.
 *
 * Client-chosen task ids: the client's `id` IS the gateway task id. Workflow ids, the projection, the event log and
 * every table are keyed by (tenant, task id), so the id is scoped by tenant without a mapping table to keep in step,
 * and nothing needs translating back in answers, streams or lists. Races are settled where the id is claimed: the
 * first message of a new task carries a messageId derived from the task id (firstMessageId), so two sends of the same
 * new id claim it once (message_tasks) and reach one workflow (update-with-start, updateId = messageId), and a resend
 * while that first turn runs waits for it like the original.
 */
import { createHash, randomUUID } from 'node:crypto';
import { z } from 'zod';
import { endsTurn, isInterrupted, isTerminal } from '../../../../task/rules';
import { a2aError } from '../errors';
import { legacyError } from '../rpc-errors';
import type { PushDialect, WireMessage, WirePart, WireTask } from '../../../../task/wire';
import { fromV01Part, toV01Part } from '../../../../task/v01-parts';
import { type Event10, artifact01, event01, message01, status01 } from '../../../../task/v01-events';
import type { CallIntent, DialectContext, DialectDef, InternalCall, StreamRenderer } from './dialect';
import { type TaskRef, TaskRefParams, withId } from './v03';

const metadata = z.record(z.string(), z.unknown());
const historyLength = z.number().int().min(0).max(10_000);

/** A client-chosen task id: it becomes a workflow id and appears in URLs, so a safe alphabet and length. */
export const ClientTaskId = z
  .string()
  .regex(/^[A-Za-z0-9._:~@+=-]{1,256}$/, 'a task id is 1 to 256 characters of A-Z a-z 0-9 . _ : ~ @ + = -');

const FilePart = z
  .object({ name: z.string().max(1024).optional(), mimeType: z.string().max(256).optional(), bytes: z.string().optional(), uri: z.string().optional() })
  .refine((f) => (f.bytes === undefined) !== (f.uri === undefined), { message: 'a file carries exactly one of bytes or uri' });

// §1.4, 0.1 column.
const TypedPart = z.discriminatedUnion('type', [
  z.object({ type: z.literal('text'), text: z.string(), metadata: metadata.optional() }),
  z.object({ type: z.literal('file'), file: FilePart, metadata: metadata.optional() }),
  z.object({ type: z.literal('data'), data: metadata, metadata: metadata.optional() }),
]);
const Message01 = z.object({ role: z.enum(['user', 'agent']), parts: z.array(TypedPart).min(1), metadata: metadata.optional() });
const PushConfig01 = z.object({
  url: z.string(),
  token: z.string().optional(),
  authentication: z.object({ schemes: z.array(z.string()), credentials: z.string().optional() }).optional(),
});

const TaskSendParams = z.object({
  id: ClientTaskId,
  sessionId: z.string().min(1).max(1024).optional(),
  message: Message01,
  acceptedOutputModes: z.array(z.string()).optional(),
  pushNotification: PushConfig01.optional(),
  historyLength: historyLength.optional(),
  metadata: metadata.optional(),
});
type TaskSend = z.infer<typeof TaskSendParams>;
// 0.1 has no list method; Society AI's `tasks/list` ("scoped by auth") with the obvious filters, as 1.0 ListTasks.
const TaskListParams = z.object({
  sessionId: z.string().max(1024).optional(),
  state: z.enum(['submitted', 'working', 'input-required', 'completed', 'canceled', 'failed']).optional(),
  pageSize: z.number().int().min(1).max(100).optional(),
  limit: z.number().int().min(1).max(100).optional(),
  pageToken: z.string().max(512).optional(),
  historyLength: historyLength.optional(),
  metadata: metadata.optional(),
});
const PushSetParams = z.object({ id: ClientTaskId, pushNotificationConfig: PushConfig01, metadata: metadata.optional() });

/** Society AI's metadata kept with a task and returned with it (task metadata), besides what the agent reports. */
const CLIENT_METADATA = ['requester', 'executor', 'skill_used', 'user_id', 'chat_id'];

/** The messageId of a client-chosen task's first message: the same for every send of that new id (see top). */
export const firstMessageId = (taskId: string) => `first-message:${taskId}`;

/** A JSON-RPC request id as a key: hashed, so that any id fits in a message id, and `1` and `"1"` differ. */
export const requestKey = (id: string | number) => createHash('sha256').update(JSON.stringify(id)).digest('base64url').slice(0, 16);

/** A message id that names the request that sent the message (`rq.<requestKey>.<uuid>`), when it had an id. */
export const requestMessageId = (key: string | undefined) => (key === undefined ? randomUUID() : `rq.${key}.${randomUUID()}`);

const keyOfMessageId = (messageId: string) => /^rq\.([A-Za-z0-9_-]{16})\./.exec(messageId)?.[1];

/**
 * A send naming a client-chosen task id (0.1 `tasks/send`/`tasks/sendSubscribe`, NEXUS `message/send` with
 * `params.id`): a new task with that id; the next turn of the task when it waits for input; -32602 when the message
 * names another context than the task's. These clients send no messageId, so a retry is told by its content and its
 * JSON-RPC id (docs/dialects.md, "Resends"):
 * - a task that has ended: a send gets the task as it ended, a stream one event of its final status;
 * - the same message as one the task has had, while a later (or that) turn runs: a retry (nothing else may be sent
 *   then); while the task waits for input, only the latest message sent again by the same request (retriesLatest).
 *   A retry is delivered to nobody and answered as the original was, with the task once its turn in progress has
 *   ended (a stream: its status, then that turn's events);
 * - another message while a turn runs: -32004 from the task (busy), as in every dialect.
 */
export async function sendByClientId(
  ctx: DialectContext,
  send: { id: string; message: WireMessage; streaming: boolean; historyLength?: number; configuration?: Record<string, unknown>; metadata?: Record<string, unknown>; pushDialect?: PushDialect },
  record: NonNullable<NonNullable<InternalCall['intent']>['record']>,
  getTask: (task: WireTask) => InternalCall,
): Promise<InternalCall> {
  const { id, message, streaming, pushDialect } = send;
  const request = ctx.requestId === undefined ? undefined : requestKey(ctx.requestId);
  const method = streaming ? 'SendStreamingMessage' : 'SendMessage';
  const configuration = { ...send.configuration, ...(send.historyLength !== undefined && { historyLength: send.historyLength }) };
  const call = (m: WireMessage, intent?: CallIntent): InternalCall => ({
    method,
    params: { message: m, configuration, ...(send.metadata && { metadata: send.metadata }) },
    intent: intent || pushDialect ? { ...intent, ...(pushDialect && { pushDialect }) } : undefined,
  });
  const existing = await ctx.task(id);
  if (existing && message.contextId && message.contextId !== existing.contextId) {
    const field = 'sessionId';
    throw a2aError('InvalidParams', `session ${message.contextId} does not match task ${id}'s session ${existing.contextId}`, [{ field, description: `task ${id} is in ${existing.contextId}` }]);
  }
  const sent = (existing?.history ?? []).filter((m) => m.role === 'ROLE_USER');
  const firstTurn = !existing || (!endsTurn(existing.status.state) && sent.length <= 1);
  // The first turn, new or resent: its messageId is the claim's, so a resend reaches the same update and waits for it.
  if (firstTurn) return call({ ...message, messageId: firstMessageId(id) }, { taskId: id, record: { ...record, request } });
  const { state } = existing.status;
  if (isTerminal(state) && !streaming) return getTask(existing);
  const retry = isInterrupted(state) ? await retriesLatest(ctx, id, sent, message, request) : sent.some((m) => sameMessage(m, message));
  if (isTerminal(state) || retry) return call({ ...message, messageId: randomUUID(), taskId: id }, { resend: true });
  // Waiting for input: its next turn. Still working on a turn: the task refuses it (-32004, busy).
  return call({ ...message, messageId: requestMessageId(request), taskId: id });
}

/**
 * Whether a send to a task that waits for input is a retry of the message it waits on, not the answer (which may
 * well say the same: "yes", then "yes" to the next question). A retry resends the same request: the same message
 * with the same JSON-RPC id, an id that was that request's own. An id that names the task (NEXUS's gateway gives
 * every request of a task the task's id) or that the message before came with too (a client that numbers every
 * request 1) says nothing, and the send is an answer: a lost answer is then read with tasks/get, never resent.
 */
async function retriesLatest(ctx: DialectContext, taskId: string, sent: WireMessage[], message: WireMessage, request: string | undefined): Promise<boolean> {
  const latest = sent.at(-1);
  if (!latest || request === undefined || ctx.requestId === taskId || !sameMessage(latest, message)) return false;
  const keyOf = async (m: WireMessage | undefined) => (m === undefined ? undefined : m.messageId === firstMessageId(taskId) ? ctx.firstRequest(taskId) : keyOfMessageId(m.messageId));
  return (await keyOf(latest)) === request && (await keyOf(sent.at(-2))) !== request;
}

/** Whether two messages say the same (role, parts, metadata), whatever their ids: a retry of an id-less client's send. */
function sameMessage(a: WireMessage | undefined, b: WireMessage): boolean {
  const said = (m: WireMessage) => canonical({ role: m.role, parts: m.parts.map(toV01Part), metadata: m.metadata ?? {} });
  return a !== undefined && said(a) === said(b);
}

/** JSON with object keys sorted, so that two equal values read the same whatever their key order. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') {
    const entries = Object.entries(v).filter(([, x]) => x !== undefined).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0));
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${canonical(x)}`).join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

// ---- parts, messages, tasks and events: 0.1 ↔ the 1.0 wire form ----

/** A part the params schema (TypedPart) has already checked. */
const wirePart = (p: unknown): WirePart => fromV01Part(p)!;

/** Task metadata as a client sees it: what it sent with the task (recorded), then what the agent and gateway say. */
export function taskMetadata(t: WireTask, client?: Record<string, unknown>): Record<string, unknown> | undefined {
  const merged = { ...client, ...t.metadata };
  return Object.keys(merged).length ? merged : undefined;
}

function task01(t: WireTask, client?: Record<string, unknown>): Record<string, unknown> {
  const metadata = taskMetadata(t, client);
  return {
    id: t.id,
    sessionId: t.contextId,
    status: status01(t.status),
    ...(t.artifacts && { artifacts: t.artifacts.map(artifact01) }),
    ...(t.history && { history: t.history.map(message01) }),
    ...(metadata && { metadata }),
  };
}

/** 1.0 tasks (SendMessage's `{task}`, GetTask's, CancelTask's, ListTasks' page) in 0.1's shape, with client metadata. */
async function renderTasks<T>(tasks: WireTask[], ctx: DialectContext, shape: (t: WireTask, client?: Record<string, unknown>) => T): Promise<T[]> {
  const client = await ctx.clientMetadata(tasks.map((t) => t.id));
  return tasks.map((t) => shape(t, client.get(t.id)));
}
export const renderTask = (shape: (t: WireTask, client?: Record<string, unknown>) => unknown) => async (result: unknown, ctx: DialectContext) => {
  const r = result as { task?: WireTask } & WireTask;
  return (await renderTasks([r.task ?? r], ctx, shape))[0];
};

/** One 0.1 stream: each event a TaskStatusUpdateEvent or TaskArtifactUpdateEvent, `final: true` on the last. */
function stream01(): StreamRenderer {
  const indexes = new Map<string, number>();
  const index = (artifactId: string) => {
    if (!indexes.has(artifactId)) indexes.set(artifactId, indexes.size);
    return indexes.get(artifactId)!;
  };
  return (result, closing) => {
    const r = result as Event10;
    if (r.task) for (const a of r.task.artifacts ?? []) index(a.artifactId);
    return event01(r, closing, index) ?? result;
  };
}

function wireMessage01(p: TaskSend): WireMessage {
  // Society AI puts routing and attribution in the params' metadata: the message carries it to routing and the agent.
  const meta = { ...p.metadata, ...p.message.metadata };
  return {
    messageId: '',
    role: p.message.role === 'agent' ? 'ROLE_AGENT' : 'ROLE_USER',
    parts: p.message.parts.map(wirePart),
    ...(p.sessionId && { contextId: p.sessionId }),
    ...(Object.keys(meta).length && { metadata: meta }),
  };
}

function send01(streaming: boolean) {
  return (p: TaskSend, ctx: DialectContext) => {
    const push = p.pushNotification && {
      url: p.pushNotification.url,
      ...(p.pushNotification.token && { token: p.pushNotification.token }),
      ...(p.pushNotification.authentication?.schemes.length && {
        authentication: { scheme: p.pushNotification.authentication.schemes[0], credentials: p.pushNotification.authentication.credentials },
      }),
    };
    const recorded = Object.fromEntries(CLIENT_METADATA.filter((k) => p.metadata?.[k] !== undefined).map((k) => [k, p.metadata![k]]));
    return sendByClientId(
      ctx,
      {
        id: p.id,
        message: wireMessage01(p),
        streaming,
        historyLength: p.historyLength,
        configuration: { ...(push && { taskPushNotificationConfig: push }), ...(p.acceptedOutputModes && { acceptedOutputModes: p.acceptedOutputModes }) },
        metadata: p.metadata,
        pushDialect: '0.1',
      },
      { dialect: '0.1', metadata: recorded },
      (task) => ({ method: 'GetTask', params: { id: task.id, ...(p.historyLength !== undefined && { historyLength: p.historyLength }) } }),
    );
  };
}

const subscribe = { params: TaskRefParams, runs: 'SubscribeToTask', translate: (p: z.infer<typeof TaskRefParams>) => ({ method: 'SubscribeToTask', params: { id: withId(p).id } }) };
const pushResult = (r: unknown) => {
  const { taskId, ...rest } = r as { taskId: string };
  return { id: taskId, ...rest };
};

export const V01: DialectDef = {
  name: '0.1',
  methods: {
    'tasks/send': { params: TaskSendParams, runs: 'SendMessage', translate: send01(false), render: renderTask(task01) },
    'tasks/sendSubscribe': { params: TaskSendParams, runs: 'SendStreamingMessage', translate: send01(true) },
    'tasks/get': { params: TaskRefParams, runs: 'GetTask', translate: (p: TaskRef) => ({ method: 'GetTask', params: withId(p) }), render: renderTask(task01) },
    'tasks/cancel': { params: TaskRefParams, runs: 'CancelTask', translate: (p: TaskRef) => ({ method: 'CancelTask', params: { id: withId(p).id } }), render: renderTask(task01) },
    'tasks/resubscribe': subscribe,
    'task/resubscribe': subscribe,
    'tasks/list': {
      params: TaskListParams,
      runs: 'ListTasks',
      translate: (p: z.infer<typeof TaskListParams>) => ({
        method: 'ListTasks',
        params: {
          ...(p.sessionId && { contextId: p.sessionId }),
          ...(p.state && { status: `TASK_STATE_${p.state.toUpperCase().replace(/-/g, '_')}` }),
          ...((p.pageSize ?? p.limit) && { pageSize: p.pageSize ?? p.limit }),
          ...(p.pageToken && { pageToken: p.pageToken }),
          ...(p.historyLength !== undefined && { historyLength: p.historyLength }),
          includeArtifacts: true,
        },
      }),
      render: async (result, ctx) => {
        const page = result as { tasks?: WireTask[]; nextPageToken?: string; pageSize?: number; totalSize?: number };
        return { ...page, tasks: await renderTasks(page.tasks ?? [], ctx, task01) };
      },
    },
    'tasks/pushNotification/set': {
      params: PushSetParams,
      runs: 'tasks/pushNotificationConfig/set',
      // Run as 0.3's; its webhook bodies are 0.1's (deliver-push.ts).
      translate: (p: z.infer<typeof PushSetParams>) => ({
        method: 'tasks/pushNotificationConfig/set',
        params: { taskId: p.id, pushNotificationConfig: p.pushNotificationConfig },
        intent: { pushDialect: '0.1' },
      }),
      render: pushResult,
    },
    'tasks/pushNotification/get': {
      params: TaskRefParams,
      runs: 'tasks/pushNotificationConfig/get',
      translate: (p: TaskRef) => ({ method: 'tasks/pushNotificationConfig/get', params: { id: withId(p).id } }),
      render: pushResult,
    },
  },
  byTask: true,
  renderError: legacyError,
  renderEngineError: plainError,
  streamRenderer: stream01,
};

/** An engine (1.0) error without 1.0's google.rpc details: 0.x `data` is free-form (field violations for -32602). */
export function plainError(e: { code: number; message: string; data?: unknown }): { code: number; message: string; data?: unknown } {
  const details = Array.isArray(e.data) ? (e.data as { '@type'?: string; fieldViolations?: unknown }[]) : [];
  const violations = details.find((d) => d['@type']?.endsWith('google.rpc.BadRequest'))?.fieldViolations;
  return { code: e.code, message: e.message, ...(violations !== undefined ? { data: violations } : !Array.isArray(e.data) && e.data !== undefined ? { data: e.data } : {}) };
}

