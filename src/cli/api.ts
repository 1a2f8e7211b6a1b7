/**
 * The CLI's way to a Switchboard: REST calls, JSON-RPC calls and SSE streams with the caller's key. Any failure to
 * reach the server is an Unreachable (the CLI exits 3); a refusal is an ApiError (exit 1) whose message is the
 * server's own reason, read by refusalOf from whichever of Switchboard's three error forms the endpoint answers in.
 */
import { randomUUID } from 'node:crypto';

export class Unreachable extends Error {}

/** A call the server refused: `status` is the HTTP status (200 for a JSON-RPC error in a 200 answer or a stream). */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly body?: unknown,
  ) {
    super(message);
  }
}

/**
 * The server's reason for a refusal, from the body in any of the forms Switchboard answers in (README "Errors"):
 * - a JSON-RPC error on the A2A JSON-RPC endpoints: `{"jsonrpc": "2.0", "error": {"code": -32055, "message": …}}`;
 * - AIP-193 google.rpc.Status on the HTTP+JSON endpoints: `{"error": {"code": 401, "status": "UNAUTHENTICATED", "message": …}}`;
 * - Switchboard's own REST routes: `{"error": "<message>"}`.
 * Anything else (a proxy's HTML page, an empty body) is shown as the start of its text, or the HTTP status text.
 */
export function refusalOf(body: unknown, statusText = ''): string {
  const error = (body as { error?: unknown } | undefined)?.error;
  if (typeof error === 'string' && error) return error;
  if (error && typeof error === 'object') {
    const e = error as { code?: unknown; status?: unknown; message?: unknown };
    const message = typeof e.message === 'string' && e.message ? e.message : undefined;
    // JSON-RPC codes are negative; AIP-193's `code` repeats the HTTP status, its `status` names the gRPC code.
    const tag = typeof e.status === 'string' ? e.status : typeof e.code === 'number' && e.code < 0 ? String(e.code) : undefined;
    if (message || tag) return `${message ?? (statusText || 'refused')}${tag ? ` (${tag})` : ''}`;
  }
  if (typeof body === 'string' && body.trim()) return body.trim().slice(0, 200);
  return statusText || 'no reason given';
}

/** An ApiError for a non-2xx answer: `<what>: HTTP <status>: <the server's reason>[; retry after N s]`. */
async function refused(what: string, res: Response, text?: string): Promise<ApiError> {
  const raw = text ?? (await res.text().catch(() => ''));
  const body = safeJson(raw);
  const retry = res.headers.get('retry-after');
  const reason = refusalOf(body, res.statusText);
  return new ApiError(`${what}: HTTP ${res.status}: ${reason}${retry ? `; retry after ${retry} s` : ''}`, res.status, body);
}

/** What the CLI reads of Switchboard's answers (docs/api.md has the whole shapes); the rest is printed as is. */
export interface PartView {
  text?: string;
}
export interface StatusView {
  state?: string;
  timestamp?: string;
  message?: { parts?: PartView[] };
}
export interface TaskView {
  id: string;
  status?: StatusView;
  artifacts?: { artifactId: string; parts: PartView[] }[];
}
export interface StreamResult {
  task?: TaskView;
  /** `metadata.switchboard.void`: the events fromSeq…toSeq were an attempt a retry replaced (the agent is asked again). */
  statusUpdate?: { taskId: string; status?: StatusView; metadata?: { switchboard?: { void?: { attempt: number; fromSeq: number; toSeq: number } } } };
  artifactUpdate?: { artifact: { artifactId: string; parts: PartView[] }; append?: boolean };
}

export interface StreamEvent {
  /** The event's position in the task's log (what Last-Event-ID resumes from). */
  id?: number;
  /** The JSON-RPC response the event carries. */
  data: { result?: StreamResult; error?: { code: number; message: string; data?: { lastEventId?: unknown } } };
}

export class Api {
  constructor(
    readonly url: string,
    private readonly key: string | undefined,
    /** An admin's tenant to act in (X-Switchboard-Tenant); other keys act in their own. */
    private readonly tenant?: string,
  ) {}

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    return { ...(this.key ? { authorization: `Bearer ${this.key}` } : {}), ...(this.tenant ? { 'x-switchboard-tenant': this.tenant } : {}), ...extra };
  }

  private async fetch(path: string, init: RequestInit): Promise<Response> {
    try {
      return await fetch(`${this.url}${path}`, init);
    } catch (err) {
      const cause = (err as { cause?: { code?: string; message?: string; errors?: { code?: string }[] } }).cause;
      throw new Unreachable(`cannot reach Switchboard at ${this.url}: ${cause?.code ?? cause?.errors?.[0]?.code ?? cause?.message ?? (err as Error).message}`);
    }
  }

  /** A REST call answering `T`; a non-2xx answer is an ApiError carrying the server's message. */
  async rest<T>(method: string, path: string, body?: unknown): Promise<T> {
    const res = await this.fetch(path, {
      method,
      headers: this.headers(body === undefined ? {} : { 'content-type': 'application/json' }),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    if (!res.ok) throw await refused(`${method} ${path}`, res, text);
    return (text ? safeJson(text) : undefined) as T;
  }

  /** A JSON-RPC call (A2A 1.0) at `path` whose result is `T`; a JSON-RPC error is an ApiError. */
  async rpc<T>(path: string, method: string, params: unknown): Promise<T> {
    const res = await this.fetch(path, {
      method: 'POST',
      headers: this.headers({ 'content-type': 'application/json', 'A2A-Version': '1.0' }),
      body: JSON.stringify({ jsonrpc: '2.0', id: randomUUID(), method, params }),
    });
    const text = await res.text();
    if (!res.ok) throw await refused(method, res, text);
    const json = safeJson(text) as { result?: unknown; error?: unknown };
    // §9.5: a JSON-RPC error may come in a 200 answer (the A2A errors of the method itself, e.g. -32001).
    if (json.error !== undefined || json.result === undefined) throw new ApiError(`${method}: ${refusalOf(json, 'no result in the answer')}`, res.status, json);
    return json.result as T;
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
      if (!res.ok) throw await refused(method, res);
      const json = safeJson(await res.text());
      throw new ApiError(`${method}: ${refusalOf(json, 'the answer is not an event stream')}`, res.status, json);
    }
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    try {
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
    } finally {
      // A reader that stops early (`tasks watch` at input-required) closes the connection, or it would hold the process open.
      await reader.cancel().catch(() => undefined);
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

/** The body as JSON, else as its text (refusalOf shows the start of it). */
function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
