/**
 * A raw SSE reader for the gateway's streaming JSON-RPC methods: what an SDK client hides (event ids,
 * comments, where a stream ended) is what the streaming tests check.
 */
import { randomUUID } from 'node:crypto';
import { keysFor } from './harness';

export interface SseEvent {
  id?: number;
  /** The `event:` name; absent for a plain message. */
  event?: string;
  data: any;
}

export interface SseRead {
  status: number;
  contentType: string;
  events: SseEvent[];
  comments: string[];
  /** The body when the answer was not a stream (a JSON-RPC error). */
  json?: any;
  /** true when the server ended the stream; false when we stopped reading. */
  ended: boolean;
}

export interface SseCall {
  method: string;
  params: unknown;
  lastEventId?: number | string;
  headers?: Record<string, string>;
  /** Stop reading (and close the connection) after this many events. */
  stopAfter?: number;
  /** Called for each event as it arrives. */
  onEvent?(e: SseEvent): void;
  /** Called for each comment (a heartbeat) as it arrives. */
  onComment?(text: string): void;
  /** Called once the answer's status and headers are in (a stream opened, or refused). */
  onOpen?(status: number): void;
  signal?: AbortSignal;
}

/** The test gateway's client key for `url`, unless the call brings credentials of its own. */
function authHeaders(url: string, headers: Record<string, string> = {}): Record<string, string> {
  if (Object.keys(headers).some((h) => /^(authorization|x-api-key)$/i.test(h))) return {};
  const key = keysFor(url)?.client;
  return key ? { authorization: `Bearer ${key}` } : {};
}

export async function sse(url: string, call: SseCall): Promise<SseRead> {
  const aborter = new AbortController();
  call.signal?.addEventListener('abort', () => aborter.abort());
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'text/event-stream',
      ...(call.method.includes('/') ? {} : { 'A2A-Version': '1.0' }),
      ...(call.lastEventId !== undefined ? { 'Last-Event-ID': String(call.lastEventId) } : {}),
      ...authHeaders(url, call.headers),
      ...call.headers,
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: randomUUID(), method: call.method, params: call.params }),
    signal: aborter.signal,
  });
  call.onOpen?.(res.status);
  const contentType = res.headers.get('content-type') ?? '';
  const out: SseRead = { status: res.status, contentType, events: [], comments: [], ended: false };
  if (!contentType.startsWith('text/event-stream')) {
    out.json = JSON.parse(await res.text());
    out.ended = true;
    return out;
  }
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) {
        out.ended = true;
        return out;
      }
      buffer += value;
      let cut: number;
      while ((cut = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const seen = out.comments.length;
        const event = parseBlock(block, out.comments);
        for (const c of out.comments.slice(seen)) call.onComment?.(c);
        if (!event) continue;
        out.events.push(event);
        call.onEvent?.(event);
        if (call.stopAfter !== undefined && out.events.length >= call.stopAfter) {
          aborter.abort();
          return out;
        }
      }
    }
  } catch (err) {
    if (aborter.signal.aborted) return out;
    throw err;
  }
}

function parseBlock(block: string, comments: string[]): SseEvent | undefined {
  let id: number | undefined;
  let name: string | undefined;
  const data: string[] = [];
  for (const line of block.split('\n')) {
    if (line.startsWith(':')) comments.push(line.slice(1).trim());
    else if (line.startsWith('id:')) id = Number(line.slice(3).trim());
    else if (line.startsWith('event:')) name = line.slice(6).trim();
    else if (line.startsWith('data:')) data.push(line.slice(5).trimStart());
  }
  if (data.length === 0) return undefined;
  return { id, ...(name ? { event: name } : {}), data: JSON.parse(data.join('\n')) };
}

/** The artifact text a 1.0 reader would assemble from `events` (append kept), dropping voided ranges. */
export function assembledText(events: SseEvent[]): string {
  const voided = new Set<number>();
  for (const e of events) {
    const v = e.data.result?.statusUpdate?.metadata?.switchboard?.void;
    if (v) for (let s = v.fromSeq; s <= v.toSeq; s++) voided.add(s);
  }
  const artifacts = new Map<string, string>();
  for (const e of events) {
    const u = e.data.result?.artifactUpdate;
    if (!u || (e.id !== undefined && voided.has(e.id))) continue;
    const text = u.artifact.parts.map((p: { text?: string }) => p.text ?? '').join('');
    artifacts.set(u.artifact.artifactId, (u.append ? (artifacts.get(u.artifact.artifactId) ?? '') : '') + text);
  }
  return [...artifacts.values()].join('');
}
