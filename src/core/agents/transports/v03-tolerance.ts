/**
 * What real 0.2/0.3 agents send that the SDK's 0.3 JSON-RPC transport does not read, made readable on the way in
 * (and the one thing some of them read differently, on the way out), so such an agent works through Switchboard
 * unchanged. A fetch around the guarded one, for JSON-RPC agents of those versions only:
 * - SSE events that are the bare event (`data: {"kind":"status-update",…}`, seed 004's coding agent) rather than a
 *   JSON-RPC response: wrapped as the response to the request they answer;
 * - a message answered without `kind` (`{"role":"agent","parts":[{"text":…}]}`, seed 001's NANDA nodes), and
 *   parts without `kind`: given the kinds their shape says (`text`, `data`, `file`), and a messageId if it has none;
 * - `tasks/get`, `tasks/cancel` and `tasks/resubscribe` name the task both as the spec's `id` and as `taskId`
 *   (seed 004 reads `params.taskId`); an agent reading either finds it.
 * Everything else passes through byte for byte. One thing the SDK drops is noted on the way: whether a stream's
 * input-required or auth-required event is `final: false` (the agent keeps its stream open while the task waits).
 */
import { randomUUID } from 'node:crypto';

const TASK_REF_METHODS = new Set(['tasks/get', 'tasks/cancel', 'tasks/resubscribe']);

/** What the fetch notes of a stream for the turn reading it (HttpTrace.openAtInterruption). */
export interface StreamNotes {
  openAtInterruption?: boolean;
}

/** A fetch for a 0.2/0.3 JSON-RPC agent that reads the variants above as the SDK expects them. */
export function tolerant03Fetch(inner: typeof fetch, notes: StreamNotes = {}): typeof fetch {
  return async (input, init) => {
    const request = parseRequest(init?.body);
    const body = request ? withTaskRef(request) : undefined;
    const res = await inner(input, body === undefined ? init : { ...init, body });
    if (!request) return res;
    const type = res.headers.get('content-type') ?? '';
    if (type.startsWith('text/event-stream') && res.body) return rebuilt(res, res.body.pipeThrough(sseRewriter(request.id, notes)));
    if (type.includes('json') && request.method === 'message/send') {
      const text = await res.text();
      return rebuilt(res, normalizedAnswer(text));
    }
    return res;
  };
}

interface RpcRequest {
  id: unknown;
  method: string;
  params?: Record<string, unknown>;
}

function parseRequest(body: unknown): RpcRequest | undefined {
  if (typeof body !== 'string') return undefined;
  try {
    const parsed = JSON.parse(body) as RpcRequest;
    return parsed && typeof parsed.method === 'string' ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/** The request body with `taskId` beside `id` for the calls that name a task; undefined when nothing changes. */
function withTaskRef(request: RpcRequest): string | undefined {
  const params = request.params;
  if (!TASK_REF_METHODS.has(request.method) || !params || typeof params.id !== 'string' || params.taskId !== undefined) return undefined;
  return JSON.stringify({ ...request, params: { ...params, taskId: params.id } });
}

function rebuilt(res: Response, body: string | ReadableStream<Uint8Array>): Response {
  const headers = new Headers(res.headers);
  headers.delete('content-length');
  headers.delete('content-encoding');
  return new Response(body, { status: res.status, statusText: res.statusText, headers });
}

/** A JSON-RPC answer whose result is a kind-less message, with its kinds; anything else unchanged. */
function normalizedAnswer(text: string): string {
  let answer: { result?: unknown };
  try {
    answer = JSON.parse(text) as { result?: unknown };
  } catch {
    return text; // the SDK reports it as it does any answer that is not JSON
  }
  const result = answer?.result;
  if (!isObject(result) || result.kind !== undefined) return text;
  return JSON.stringify({ ...answer, result: withKinds(result) });
}

/** An object without `kind`: a message if it has role and parts (its parts given kinds too), else as it is. */
function withKinds(value: Record<string, unknown>): Record<string, unknown> {
  if (typeof value.role !== 'string' || !Array.isArray(value.parts)) return value;
  return { ...value, kind: 'message', messageId: typeof value.messageId === 'string' ? value.messageId : randomUUID(), parts: value.parts.map(partWithKind) };
}

function partWithKind(part: unknown): unknown {
  if (!isObject(part) || part.kind !== undefined) return part;
  if (typeof part.text === 'string') return { ...part, kind: 'text' };
  if (isObject(part.file)) return { ...part, kind: 'file' };
  if (part.data !== undefined) return { ...part, kind: 'data', data: isObject(part.data) ? part.data : { value: part.data } };
  return part;
}

/**
 * Rewrites an SSE stream event by event: an event whose data is not a JSON-RPC response (no `jsonrpc`, no
 * `result`/`error`) is wrapped as the result of request `id`; a kind-less message result gets its kinds.
 */
function sseRewriter(id: unknown, notes: StreamNotes): TransformStream<Uint8Array, Uint8Array> {
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  let buffer = '';
  const flushEvents = (controller: TransformStreamDefaultController<Uint8Array>, final: boolean) => {
    for (;;) {
      const match = /\r?\n\r?\n/.exec(buffer);
      if (!match) break;
      const block = buffer.slice(0, match.index);
      buffer = buffer.slice(match.index + match[0].length);
      controller.enqueue(encoder.encode(`${rewriteEvent(block, id, notes)}\n\n`));
    }
    if (final && buffer.trim()) controller.enqueue(encoder.encode(`${rewriteEvent(buffer, id, notes)}\n\n`));
  };
  return new TransformStream({
    transform(chunk, controller) {
      buffer += decoder.decode(chunk, { stream: true });
      flushEvents(controller, false);
    },
    flush(controller) {
      buffer += decoder.decode();
      flushEvents(controller, true);
    },
  });
}

function rewriteEvent(block: string, id: unknown, notes: StreamNotes): string {
  const lines = block.split(/\r?\n/);
  const data = lines.filter((l) => l.startsWith('data:')).map((l) => l.slice(5).replace(/^ /, ''));
  if (data.length === 0) return block;
  let payload: unknown;
  try {
    payload = JSON.parse(data.join('\n'));
  } catch {
    return block; // the SDK reports it
  }
  if (!isObject(payload)) return block;
  const isResponse = payload.jsonrpc !== undefined || payload.result !== undefined || payload.error !== undefined;
  const response = isResponse ? payload : { jsonrpc: '2.0', id, result: payload };
  const result = response.result;
  noteInterruption(result, notes);
  const fixed = isObject(result) && result.kind === undefined ? { ...response, result: withKinds(result) } : response;
  if (fixed === payload) return block;
  const others = lines.filter((l) => !l.startsWith('data:'));
  return [...others, `data: ${JSON.stringify(fixed)}`].join('\n');
}

/** A status-update to input-required or auth-required: whether the agent keeps its stream open after it. */
function noteInterruption(result: unknown, notes: StreamNotes): void {
  if (!isObject(result) || result.kind !== 'status-update' || !isObject(result.status)) return;
  if (result.status.state !== 'input-required' && result.status.state !== 'auth-required') return;
  notes.openAtInterruption = result.final === false;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
