/**
 * Writes a JSON-RPC event stream as Server-Sent Events (§1.7): each event a full JSON-RPC response with the
 * request's id, and an `id:` line carrying its position in the task's event log, which is what a client
 * sends back as Last-Event-ID to resume. Idle streams get heartbeat comments; a reader that stops reading
 * is cut off once its buffer passes a cap and does not drain in time: no more events are produced for it,
 * and a last error event tells it the position to resume from.
 */
import type { FastifyReply } from 'fastify';
import type { StreamCursor } from '../a2a/request-handler';

export interface SseOptions {
  /** A comment line is sent when nothing was written for this long (default 15 s). */
  heartbeatMs: number;
  /** Bytes buffered for a slow reader before the writer waits for it to drain. */
  maxBufferBytes: number;
  /** How long a full buffer may take to drain before the stream is closed. */
  drainTimeoutMs: number;
}

type RpcEvent = { jsonrpc: '2.0'; id: string | number | null; result?: unknown; error?: unknown };

/**
 * Streams `first` and the rest of `events` to the client; resolves when the stream has ended for any
 * reason (the last event, an error, the client leaving, a slow reader cut off).
 */
export async function writeSse(
  reply: FastifyReply,
  cursor: StreamCursor,
  first: RpcEvent,
  events: AsyncIterator<RpcEvent>,
  o: SseOptions & { legacy: boolean; onError(err: unknown): RpcEvent },
): Promise<void> {
  const raw = reply.raw;
  reply.hijack();
  raw.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
    'x-accel-buffering': 'no', // proxies (nginx) must not buffer the stream
  });
  let lastWrite = Date.now();
  const heartbeat = setInterval(() => {
    if (Date.now() - lastWrite >= o.heartbeatMs && !raw.writableEnded) {
      raw.write(': keep-alive\n\n');
      lastWrite = Date.now();
    }
  }, Math.max(50, Math.floor(o.heartbeatMs / 2)));

  const write = (event: RpcEvent, id?: number) => {
    raw.write(`${id !== undefined ? `id: ${id}\n` : ''}data: ${JSON.stringify(event)}\n\n`);
    lastWrite = Date.now();
  };
  const send = (event: RpcEvent) => {
    // 0.3 marks the event that ends the stream `final`; the SDK's translation only does so for terminal states.
    const result = event.result as { kind?: string; final?: boolean } | undefined;
    if (o.legacy && cursor.closing && result?.kind === 'status-update') result.final = true;
    write(event, cursor.seq);
  };

  let cutOff = false;
  try {
    send(first);
    for (;;) {
      if (raw.writableLength > o.maxBufferBytes && !(await drained(raw, o.drainTimeoutMs, cursor.signal))) {
        if (cursor.signal.aborted) return;
        write({
          jsonrpc: '2.0',
          id: first.id,
          error: {
            code: -32603,
            message: `The client read too slowly (over ${o.maxBufferBytes} bytes waiting for ${o.drainTimeoutMs} ms); the stream is closed. Reconnect with Last-Event-ID: ${cursor.seq} to continue.`,
            data: { lastEventId: cursor.seq },
          },
        });
        cutOff = true;
        return;
      }
      let next: IteratorResult<RpcEvent>;
      try {
        next = await events.next();
      } catch (err) {
        if (!cursor.signal.aborted) write(o.onError(err));
        return;
      }
      if (next.done || cursor.signal.aborted) return;
      send(next.value);
    }
  } finally {
    clearInterval(heartbeat);
    await events.return?.(undefined).catch(() => undefined);
    if (!raw.writableEnded) raw.end();
    // What is buffered (at most the cap, one event and the notice) waits for the reader to come back; a
    // reader that never does loses its socket after a minute of silence.
    if (cutOff) raw.socket?.setTimeout(60_000, () => raw.destroy());
  }
}

function drained(raw: NodeJS.WritableStream & { writableLength: number }, timeoutMs: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    const done = (ok: boolean) => {
      clearTimeout(timer);
      raw.removeListener('drain', onDrain);
      signal.removeEventListener('abort', onAbort);
      resolve(ok);
    };
    const onDrain = () => done(true);
    const onAbort = () => done(false);
    const timer = setTimeout(() => done(false), timeoutMs);
    raw.once('drain', onDrain);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
