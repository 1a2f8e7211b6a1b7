/**
 * The CLI's way to a Switchboard: REST calls, JSON-RPC calls and SSE streams with the caller's key. Any failure to
 * reach the server is an Unreachable (the CLI exits 3); HTTP and JSON-RPC errors are ApiErrors (exit 1 or 2).
 */
import { randomUUID } from 'node:crypto';

export class Unreachable extends Error {}

export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly body?: unknown,
  ) {
    super(message);
  }
}

export interface StreamEvent {
  /** The event's position in the task's log (what Last-Event-ID resumes from). */
  id?: number;
  /** The JSON-RPC response the event carries. */
  data: { result?: any; error?: { code: number; message: string; data?: any } };
}

export class Api {
  constructor(
    readonly url: string,
    private readonly key: string | undefined,
  ) {}

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    return { ...(this.key ? { authorization: `Bearer ${this.key}` } : {}), ...extra };
  }

  private async fetch(path: string, init: RequestInit): Promise<Response> {
    try {
      return await fetch(`${this.url}${path}`, init);
    } catch (err) {
      const cause = (err as { cause?: { code?: string; message?: string; errors?: { code?: string }[] } }).cause;
      throw new Unreachable(`cannot reach Switchboard at ${this.url}: ${cause?.code ?? cause?.errors?.[0]?.code ?? cause?.message ?? (err as Error).message}`);
    }
  }

  /** A REST call; a non-2xx answer is an ApiError carrying the server's message. */
  async rest(method: string, path: string, body?: unknown): Promise<any> {
    const res = await this.fetch(path, {
      method,
      headers: this.headers(body === undefined ? {} : { 'content-type': 'application/json' }),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    const json = text ? safeJson(text) : undefined;
    if (!res.ok) throw new ApiError(`${method} ${path}: HTTP ${res.status}${(json as { error?: string })?.error ? `: ${(json as { error: string }).error}` : ''}`, res.status, json);
    return json;
  }

  /** A JSON-RPC call (A2A 1.0) at `path`; a JSON-RPC error is an ApiError. */
  async rpc(path: string, method: string, params: unknown): Promise<any> {
    const res = await this.fetch(path, {
      method: 'POST',
      headers: this.headers({ 'content-type': 'application/json', 'A2A-Version': '1.0' }),
      body: JSON.stringify({ jsonrpc: '2.0', id: randomUUID(), method, params }),
    });
    const json = safeJson(await res.text()) as { result?: unknown; error?: { code: number; message: string } } | undefined;
    if (json?.error) throw new ApiError(`${method}: ${json.error.message} (${json.error.code})`, res.status, json.error);
    if (!res.ok) throw new ApiError(`${method}: HTTP ${res.status}`, res.status, json);
    return json?.result;
  }

  /**
   * A streaming JSON-RPC call: yields its events until the server ends the stream. A JSON answer instead of a
   * stream (an error before the first event) is an ApiError.
   */
  async *stream(path: string, method: string, params: unknown, lastEventId?: number): AsyncGenerator<StreamEvent, void, undefined> {
    const res = await this.fetch(path, {
      method: 'POST',
      headers: this.headers({
        'content-type': 'application/json',
        accept: 'text/event-stream',
        'A2A-Version': '1.0',
        ...(lastEventId !== undefined ? { 'Last-Event-ID': String(lastEventId) } : {}),
      }),
      body: JSON.stringify({ jsonrpc: '2.0', id: randomUUID(), method, params }),
    });
    if (!(res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
      const json = safeJson(await res.text()) as { error?: { code: number; message: string } } | undefined;
      throw new ApiError(`${method}: ${json?.error ? `${json.error.message} (${json.error.code})` : `HTTP ${res.status}`}`, res.status, json?.error);
    }
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    for (;;) {
      let chunk: Awaited<ReturnType<typeof reader.read>>;
      try {
        chunk = await reader.read();
      } catch (err) {
        throw new Unreachable(`the stream broke off: ${(err as Error).message}`);
      }
      if (chunk.done) return;
      buffer += chunk.value;
      let cut: number;
      while ((cut = buffer.indexOf('\n\n')) >= 0) {
        const event = parseEvent(buffer.slice(0, cut));
        buffer = buffer.slice(cut + 2);
        if (event) yield event;
      }
    }
  }
}

function parseEvent(block: string): StreamEvent | undefined {
  let id: number | undefined;
  const data: string[] = [];
  for (const line of block.split('\n')) {
    if (line.startsWith('id:')) id = Number(line.slice(3).trim());
    else if (line.startsWith('data:')) data.push(line.slice(5).trimStart());
  }
  return data.length ? { id, data: JSON.parse(data.join('\n')) } : undefined;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return { error: text.slice(0, 200) };
  }
}
