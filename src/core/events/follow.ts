/**
 * Reads a task's event log from a cursor, then follows its live tail: every event with seq > afterSeq,
 * in order, each exactly once, until the caller stops iterating or the signal aborts.
 */
import type { Pool } from 'pg';
import { type LoggedEvent, readEvents } from './event-log';
import type { EventHub } from './hub';

export interface FollowOptions {
  pool: Pool;
  hub: EventHub;
  tenant: string;
  taskId: string;
  afterSeq: number;
  signal?: AbortSignal;
}

const PAGE = 500;
/** In-process events held for a reader that has not taken them yet; past this it rereads the log instead. */
const MAX_PENDING = 10_000;

export async function* followEvents(o: FollowOptions): AsyncGenerator<LoggedEvent> {
  const { pool, hub, tenant, taskId, signal } = o;
  let cursor = o.afterSeq;
  // Events handed over by a writer in this process, contiguous from the cursor: no database read needed.
  let pending: LoggedEvent[] = [];
  // Set by a notice from another process, or by a hand-over that does not follow on: read the log next.
  let dirty = false;
  let wake: (() => void) | undefined;
  const poke = () => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  const unsubscribe = hub.subscribe(tenant, taskId, {
    onEvents(events) {
      for (const e of events) {
        const last = pending.length ? pending[pending.length - 1].seq : cursor;
        if (e.seq === last + 1 && pending.length < MAX_PENDING) pending.push(e);
        else if (e.seq > last) dirty = true; // a gap or an overflow: the log has them
      }
      poke();
    },
    onNotice(seq) {
      if (seq > cursor) dirty = true;
      poke();
    },
  });
  // Subscribed before the first read: anything committed from here on is either read or handed over.
  let mustRead = true;
  try {
    while (!signal?.aborted) {
      pending = pending.filter((e) => e.seq > cursor);
      if (pending.length && pending[0].seq === cursor + 1) {
        const batch = pending;
        pending = [];
        for (const e of batch) {
          if (e.seq !== cursor + 1) {
            mustRead = true; // a gap: the log has the rest
            break;
          }
          cursor = e.seq;
          yield e;
        }
        continue;
      }
      if (mustRead || dirty || pending.length) {
        mustRead = false;
        dirty = false;
        pending = [];
        const rows = await readEvents(pool, tenant, taskId, cursor, PAGE);
        for (const e of rows) {
          if (e.seq <= cursor) continue;
          cursor = e.seq;
          yield e;
        }
        mustRead = rows.length === PAGE;
        continue;
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          mustRead = true; // the poll: covers notices that never came
          done();
        }, hub.pollMs);
        signal?.addEventListener('abort', done, { once: true });
        wake = done;
        function done() {
          clearTimeout(timer);
          signal?.removeEventListener('abort', done);
          wake = undefined;
          resolve();
        }
      });
    }
  } finally {
    unsubscribe();
  }
}
