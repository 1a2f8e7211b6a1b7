/**
 * Writes the events the forwarding activity relays into the task's event log, with group commit: while one
 * batch is being written the next one collects (and each batch waits one turn of the event loop for the events
 * relayed with it), so a fast agent stream costs one transaction per batch, not per event. An event reaches
 * readers only after its batch committed (the hub is told after the commit).
 */
import type { Pool } from 'pg';
import { appendEvents, type NewEvent } from './event-log';
import type { StreamEvent } from '../../../task/wire';
import type { EventHub } from './hub';

/** A refused write as a plain error that names what was being written. */
function writeError(what: string, err: unknown): Error {
  return new Error(`${what}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
}

const MAX_BATCH = 1000;
/** Queued events past which the relay waits for the log to catch up (the agent stream is paused meanwhile). */
const HIGH_WATER = 5000;

export class EventSink {
  private queue: NewEvent[] = [];
  private writing?: Promise<void>;
  private failure?: unknown;
  private count = 0;
  /** A write the log's first event waits for (the turn's `working` change): its failure is the sink's. */
  private before?: Promise<unknown>;
  /** That write, held back with the events (hold()): made when the hold ends, unless take() hands it to the caller. */
  private first?: () => Promise<unknown>;
  /** Writes are held (see hold()) until this timer releases them. */
  private held?: ReturnType<typeof setTimeout>;
  /** holdEvents()'s limit: the hold's timer restarts with it when the first event is queued. */
  private eachMs?: number;
  /** When the held first write is made at the latest, whether or not the events are still held (holdFirst()). */
  private firstDue?: ReturnType<typeof setTimeout>;

  /**
   * @param keyPrefix unique to this attempt of this activity, so a retried attempt's events never collide
   *   with the last one's (see voidEvent in forward-message.ts).
   */
  constructor(
    private readonly pool: Pool,
    private readonly hub: EventHub,
    private readonly tenant: string,
    private readonly taskId: string,
    readonly keyPrefix: string,
    /**
     * The error a refused write becomes. The forwarding activity passes its own (a retryable Temporal failure,
     * activities/forwarding/classify.ts writeFailed): this room knows no Temporal worker API.
     */
    private readonly failed: (what: string, err: unknown) => unknown = writeError,
  ) {}

  /** Writes nothing before `write` has committed (the turn's `working` change, written while the agent is called). */
  after(write: Promise<unknown>): void {
    this.before = write;
  }

  /**
   * Writes nothing for up to `ms`, unless flushed or its events taken first (take()): a turn that ends within it may
   * log what it relayed in its own last statement. Readers of the log see those events up to `ms` later. `first`,
   * the write the log's first event waits for (as after()), is held too: made when the hold ends, before the events.
   * The hold ends early when release() is called (a child task's front door waits for the row `first` writes).
   */
  hold(ms: number, first?: () => Promise<unknown>): void {
    clearTimeout(this.held);
    this.first = first ?? this.first;
    this.held = setTimeout(() => this.release(), ms);
  }

  /**
   * Holds the events (as hold(), with no first write), none for longer than `ms` after the first was queued: a turn
   * whose agent answers only at its end (its artifacts relayed then) is not cut short by the time the agent took.
   * Until an event is queued the hold lasts up to `backstopMs`.
   */
  holdEvents(ms: number, backstopMs: number): void {
    this.hold(backstopMs);
    this.eachMs = ms;
  }

  /**
   * Holds `first` (as hold()'s, the write the log's first event waits for) for up to `ms`, apart from the events: it is
   * made then even while they are still held (a child task's front door waits for the row it writes), or when the
   * sink starts writing, unless take() hands it to the caller first.
   */
  holdFirst(first: () => Promise<unknown>, ms: number): void {
    this.first = first;
    this.firstDue = setTimeout(() => this.startFirst(), ms);
  }

  /**
   * The queued events and the held first write, taken out of the sink for the caller to make, while it holds its
   * writes; undefined once it has begun writing. `after`: the write the events must follow (after(), or a first
   * write holdFirst() made already), for the caller to await. The sink writes what comes after as usual.
   */
  take(): { events: NewEvent[]; first?: () => Promise<unknown>; after?: Promise<unknown> } | undefined {
    if (!this.held || this.failure) return undefined;
    this.unhold();
    clearTimeout(this.firstDue);
    const taken = { events: this.queue, first: this.first, after: this.before };
    this.queue = [];
    this.first = undefined;
    return taken;
  }

  /** What take() took and the caller could not write: queued again, first, to be written by the next flush. */
  giveBack(taken: { events: NewEvent[]; first?: () => Promise<unknown> }): void {
    this.queue.unshift(...taken.events);
    this.first ??= taken.first;
  }

  /** Queues an event; resolves at once unless the log has fallen far behind. */
  async push(event: StreamEvent, key = `${this.keyPrefix}${++this.count}`): Promise<void> {
    if (this.failure) throw this.failure;
    this.queue.push({ key, event });
    if (this.held && this.eachMs !== undefined && this.queue.length === 1) this.hold(this.eachMs, this.first);
    if (this.held && this.queue.length >= HIGH_WATER) this.unhold();
    if (!this.held) this.write();
    if (this.queue.length >= HIGH_WATER) await this.writing;
  }

  /** Waits until every queued event is committed; throws if a write failed. */
  async flush(): Promise<void> {
    this.release();
    while (this.writing) await this.writing;
    if (this.failure) throw this.failure;
  }

  /** Ends a hold: the held first write and what was queued meanwhile are written now. */
  release(): void {
    this.unhold();
    this.write();
  }

  /** Starts writing: the held first write, if any, then the queue. */
  private write(): void {
    this.startFirst();
    if (this.queue.length > 0) this.writing ??= this.drain();
  }

  /** Makes the held first write, if any; the drain reports its failure (and waits for the hold to write the events). */
  private startFirst(): void {
    clearTimeout(this.firstDue);
    const first = this.first;
    this.first = undefined;
    if (!first) return;
    this.before = first();
    this.before.catch(() => undefined);
    this.writing ??= this.drain();
  }

  private unhold(): void {
    clearTimeout(this.held);
    this.held = undefined;
    this.eachMs = undefined;
  }

  private async drain(): Promise<void> {
    try {
      await this.before;
      while (this.queue.length > 0 && !this.held) {
        // One turn of the event loop first: the events of one chunk of the agent's stream (a status and an artifact,
        // say) are relayed a few microtasks apart, and go in one batch rather than one transaction each.
        await new Promise(setImmediate);
        await this.before; // a held first write started meanwhile (write()) precedes the batch
        const batch = this.queue.splice(0, MAX_BATCH);
        // Keys carry this attempt's prefix and a counter: never repeated, so no lookup of stored keys.
        const stored = await appendEvents(this.pool, this.tenant, this.taskId, batch, { freshKeys: true });
        this.hub.publish(this.tenant, this.taskId, stored);
      }
    } catch (err) {
      this.failure = this.failed("the agent's events could not be logged", err);
      this.queue = [];
    } finally {
      this.writing = undefined;
    }
  }
}
