/**
 * Writes a JSON-RPC event stream as Server-Sent Events (§1.7): each event a full JSON-RPC response with the
 * request's id, and an `id:` line carrying its position in the task's event log, which is what a client
 * sends back as Last-Event-ID to resume. Idle streams get heartbeat comments; a reader that stops reading
 * is cut off once its buffer passes a cap and does not drain in time: no more events are produced for it,
 * and a last error event tells it the position to resume from.
 */
import type { FastifyReply } from 'fastify';


export interface SseOptions {
  /** A comment line is sent when nothing was written for this long (default 15 s). */
  heartbeatMs: number;
  /** Bytes buffered for a slow reader before the writer waits for it to drain. */
  maxBufferBytes: number;
  /** How long a full buffer may take to drain before the stream is closed. */
  drainTimeoutMs: number;
}

/** One Server-Sent Event: its `id:`, its event name (unset: a message), and its data, written as JSON. */
export interface SseFrame {
  id?: number;
  event?: string;
  data: unknown;
}

/** A stream to write: its frames, and the frames that end it early (an error, a reader cut off or a shutdown). */
export interface SseStream {
  stream: AsyncIterator<SseFrame>;
  errorFrame(err: unknown): SseFrame;
  cutOffFrame(message: string, lastEventId: number): SseFrame;
}

/** Frames mapped one by one (a binding's form of the core's), the source closed with the result. */
export async function* mapFrames<F>(frames: AsyncIterator<F>, map: (f: F) => SseFrame): AsyncGenerator<SseFrame, void, undefined> {
  try {
    for (;;) {
      const next = await frames.next();
      if (next.done) return;
      yield map(next.value);
    }
  } finally {
    await frames.return?.(undefined);
  }
}

type Stream = SseStream;

/**
 * Writes the stream's frames to the client; resolves when the stream has ended for any reason (the last
 * event, an error, the client leaving (`gone`), a slow reader cut off, or the server shutting down (`closing`):
 * then a last event tells the client where to resume, and the stream ends).
 */
export async function writeSse(reply: FastifyReply, s: Stream, gone: AbortSignal, o: SseOptions, closing?: AbortSignal): Promise<void> {
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

  let lastId = 0;
  const write = (frame: SseFrame) => {
    raw.write(`${frame.id !== undefined ? `id: ${frame.id}\n` : ''}${frame.event ? `event: ${frame.event}\n` : ''}data: ${JSON.stringify(frame.data)}\n\n`);
    if (frame.id !== undefined) lastId = frame.id;
    lastWrite = Date.now();
  };

  // The listener goes when the stream ends: `closing` is the app's, shared by every stream it ever serves.
  let onClosing: (() => void) | undefined;
  const shutdown = closing && new Promise<'closing'>((r) => {
    onClosing = () => r('closing');
    if (closing.aborted) onClosing();
    else closing.addEventListener('abort', onClosing, { once: true });
  });
  let cutOff = false;
  try {
    for (;;) {
      if (raw.writableLength > o.maxBufferBytes && !(await drained(raw, o.drainTimeoutMs, gone))) {
        if (gone.aborted) return;
        const message =
          `The client read too slowly (over ${o.maxBufferBytes} bytes waiting for ${o.drainTimeoutMs} ms); the stream is closed. ` +
          `Reconnect with Last-Event-ID: ${lastId} to continue.`;
        write(s.cutOffFrame(message, lastId));
        cutOff = true;
        return;
      }
      let next: IteratorResult<SseFrame> | 'closing';
      try {
        next = await Promise.race([s.stream.next(), ...(shutdown ? [shutdown] : [])]);
      } catch (err) {
        if (!gone.aborted) write(s.errorFrame(err));
        return;
      }
      if (next === 'closing') {
        write(s.cutOffFrame(`Switchboard is shutting down; reconnect with Last-Event-ID: ${lastId} to continue.`, lastId));
        // Ended before the stream is let go: the client's leaving (the end) is what releases the pending read.
        raw.end();
        return;
      }
      if (next.done || gone.aborted) return;
      try {
        write(next.value);
      } catch (err) {
        // Last resort: an event that cannot be written (e.g. a value JSON.stringify refuses) ends this stream
        // with an error event, logged; the process and every other stream go on.
        reply.log.error({ err, lastEventId: lastId }, 'SSE: an event could not be written; the stream is closed');
        if (!gone.aborted) write(s.errorFrame(err));
        return;
      }
    }
  } finally {
    clearInterval(heartbeat);
    if (onClosing) closing?.removeEventListener('abort', onClosing);
    await s.stream.return?.(undefined).catch(() => undefined);
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
