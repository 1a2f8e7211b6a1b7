/**
 * The event sink (src/core/events/event-sink.ts) writes nothing before the write it is told to follow: a fresh task's
 * `working` change, which its first attempt writes while the agent is called (activities/forward-message.ts
 * startTurn). Real PostgreSQL: the agent's events land after that change in the log, and its failure is the sink's;
 * events relayed together go in one batch; a held sink (a first exchange that may finish its task) gives its events
 * to the statement that finishes it.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Pool } from 'pg';
import { EventSink } from '../src/core/events/event-sink';
import { appendEvents } from '../src/core/events/event-log';
import { EventHub } from '../src/core/events/hub';
import { DATABASE_URL, type TestDb, createTestDb } from './helpers/harness';

let db: TestDb;
/**
 * One connection, so statements run in the order they were issued: a write issued later that has committed proves an
 * earlier one would have (barrier()). No pool timers either (idle or connect timeouts), so pg runs no timer code while
 * a test mocks setTimeout.
 */
let serial: Pool;
before(async () => {
  db = await createTestDb();
  serial = new Pool({ connectionString: DATABASE_URL, max: 1, idleTimeoutMillis: 0, options: `-c search_path=${db.schema}` });
});
after(async () => {
  await serial?.end();
  await db?.drop();
});

const status = (taskId: string, state: 'TASK_STATE_WORKING' | 'TASK_STATE_COMPLETED') => ({
  statusUpdate: { taskId, contextId: 'c', status: { state, timestamp: new Date().toISOString() } },
});

async function keysOf(taskId: string): Promise<string[]> {
  const { rows } = await db.pool.query('SELECT event_key FROM task_events WHERE tenant = $1 AND task_id = $2 ORDER BY seq', ['t', taskId]);
  return rows.map((r) => r.event_key as string);
}

/**
 * Resolves once an event pushed now into a fresh sink on `serial` has committed. A sink on `serial` that pushed
 * before would have written by then, had it not held back: its batch waits one turn of the event loop, as this
 * one's does, and queued first on the one connection.
 */
async function barrier(): Promise<void> {
  const taskId = `barrier-${randomUUID()}`;
  const sink = new EventSink(serial, new EventHub(), 't', taskId, 'b/');
  await sink.push(status(taskId, 'TASK_STATE_WORKING'));
  await sink.flush();
}

/**
 * Resolves when `hub` is told of the task's events: the sink publishes a batch once it has committed. Call it before
 * mocking timers: its deadline is a real one.
 */
function committed(hub: EventHub, taskId: string, ms = 15_000): Promise<void> {
  return new Promise((resolve, reject) => {
    const deadline = setTimeout(() => (off(), reject(new Error(`timed out waiting for the events of ${taskId} to commit`))), ms);
    const off = hub.subscribe('t', taskId, { onEvents: () => (clearTimeout(deadline), off(), resolve()), onNotice: () => undefined });
  });
}

test("events pushed before the awaited write commits are logged after it, in the order they were pushed", async () => {
  const taskId = 'sink-after';
  const sink = new EventSink(serial, new EventHub(), 't', taskId, 'fwd/1/');
  let commit!: () => void;
  const working = new Promise<void>((resolve) => (commit = resolve)).then(() =>
    appendEvents(db.pool, 't', taskId, [{ key: 'v1', event: status(taskId, 'TASK_STATE_WORKING') }]),
  );
  sink.after(working);
  await sink.push(status(taskId, 'TASK_STATE_WORKING'));
  await sink.push(status(taskId, 'TASK_STATE_COMPLETED'));
  await barrier();
  assert.deepEqual(await keysOf(taskId), [], 'nothing written before the awaited write');
  commit();
  await sink.flush();
  assert.deepEqual(await keysOf(taskId), ['v1', 'fwd/1/1', 'fwd/1/2']);
});

test('a failed awaited write fails the sink: its events are not logged', async () => {
  const taskId = 'sink-after-failed';
  const sink = new EventSink(db.pool, new EventHub(), 't', taskId, 'fwd/1/');
  const refused = Promise.reject(new Error('the working change was refused'));
  refused.catch(() => undefined); // the sink's to report
  sink.after(refused);
  await sink.push(status(taskId, 'TASK_STATE_WORKING'));
  await assert.rejects(sink.flush(), /the working change was refused/);
  await assert.rejects(sink.push(status(taskId, 'TASK_STATE_COMPLETED')), /the working change was refused/);
  assert.deepEqual(await keysOf(taskId), []);
});

test("events relayed a few microtasks apart (one chunk of the agent's stream) are logged in one batch", async () => {
  const taskId = 'sink-batch';
  const hub = new EventHub();
  const batches: number[] = [];
  hub.subscribe('t', taskId, { onEvents: (events) => batches.push(events.length), onNotice: () => undefined });
  const sink = new EventSink(db.pool, hub, 't', taskId, 'fwd/1/');
  // As the stream's reader relays them: each event a few awaits after the last (the SDK's async generators).
  for (const state of ['TASK_STATE_WORKING', 'TASK_STATE_WORKING', 'TASK_STATE_COMPLETED'] as const) {
    await sink.push(status(taskId, state));
    for (let i = 0; i < 10; i++) await Promise.resolve();
  }
  await sink.flush();
  assert.deepEqual(batches, [3], 'one transaction for the three');
  assert.deepEqual(await keysOf(taskId), ['fwd/1/1', 'fwd/1/2', 'fwd/1/3']);
});

test('a held sink writes nothing until its hold ends, its events are taken, or it is flushed; taken events given back are written', async () => {
  const taskId = 'sink-held';
  const sink = new EventSink(serial, new EventHub(), 't', taskId, 'fwd/1/');
  sink.hold(60_000);
  await sink.push(status(taskId, 'TASK_STATE_WORKING'));
  await sink.push(status(taskId, 'TASK_STATE_COMPLETED'));
  await barrier();
  assert.deepEqual(await keysOf(taskId), [], 'held');
  const taken = sink.take();
  assert.deepEqual(taken?.events.map((e) => e.key), ['fwd/1/1', 'fwd/1/2']);
  assert.equal(taken?.first, undefined, 'no first write was held');
  assert.equal(sink.take(), undefined, 'no longer held: nothing more to take');
  await sink.flush();
  assert.deepEqual(await keysOf(taskId), [], 'taken: the caller logs them');
  sink.giveBack(taken!); // the caller could not
  await sink.flush();
  assert.deepEqual(await keysOf(taskId), ['fwd/1/1', 'fwd/1/2']);

  const flushed = 'sink-held-flushed';
  const other = new EventSink(db.pool, new EventHub(), 't', flushed, 'fwd/1/');
  other.hold(60_000);
  await other.push(status(flushed, 'TASK_STATE_WORKING'));
  await other.flush();
  assert.deepEqual(await keysOf(flushed), ['fwd/1/1'], 'a flush ends the hold');
});

test("a held first write (the turn's working change) goes before the events: when the hold ends, or with them when taken and given back", async (t) => {
  const first = (taskId: string) => {
    let calls = 0;
    const write = async () => {
      calls++;
      await appendEvents(serial, 't', taskId, [{ key: 'v1', event: status(taskId, 'TASK_STATE_WORKING') }]);
    };
    return { write, calls: () => calls };
  };
  const ended = 'sink-first-ended';
  const a = first(ended);
  const hub = new EventHub();
  const sink = new EventSink(serial, hub, 't', ended, 'fwd/1/');
  const written = committed(hub, ended);
  t.mock.timers.enable({ apis: ['setTimeout'] });
  sink.hold(50, a.write);
  await sink.push(status(ended, 'TASK_STATE_WORKING'));
  assert.equal(a.calls(), 0, 'held');
  t.mock.timers.tick(50); // the hold's 50 ms: its timer makes the first write, then writes the events
  t.mock.timers.reset(); // the writes run on real timers
  await written;
  assert.deepEqual(await keysOf(ended), ['v1', 'fwd/1/1'], 'the hold ended: the first write, then the events');
  await sink.flush();
  assert.equal(a.calls(), 1);

  const released = 'sink-first-released';
  const b = first(released);
  const early = new EventSink(db.pool, new EventHub(), 't', released, 'fwd/1/');
  early.hold(60_000, b.write);
  early.release(); // a child task's front door waits for the row
  await early.flush();
  assert.deepEqual(await keysOf(released), ['v1'], 'released early, with no events yet');

  const taken = 'sink-first-taken';
  const c = first(taken);
  const caller = new EventSink(db.pool, new EventHub(), 't', taken, 'fwd/1/');
  caller.hold(60_000, c.write);
  await caller.push(status(taken, 'TASK_STATE_WORKING'));
  const held = caller.take();
  assert.equal(held?.first, c.write, 'the first write goes to the caller with the events');
  await caller.flush();
  assert.equal(c.calls(), 0, 'the caller makes it');
  caller.giveBack(held!); // the caller could not
  await caller.flush();
  assert.deepEqual(await keysOf(taken), ['v1', 'fwd/1/1'], 'given back: written in order by the flush');
  assert.equal(c.calls(), 1);
});

test('a hold ends by itself: the events are written then', async (t) => {
  const taskId = 'sink-hold-ends';
  const hub = new EventHub();
  const sink = new EventSink(serial, hub, 't', taskId, 'fwd/1/');
  const written = committed(hub, taskId);
  t.mock.timers.enable({ apis: ['setTimeout'] });
  sink.hold(50);
  await sink.push(status(taskId, 'TASK_STATE_WORKING'));
  t.mock.timers.tick(50); // the hold's 50 ms: its timer starts the write
  t.mock.timers.reset(); // the write runs on real timers
  await written;
  assert.deepEqual(await keysOf(taskId), ['fwd/1/1']);
  assert.equal(sink.take(), undefined, 'written: nothing to take');
});

test("a first write held apart from the events (holdFirst) is made when its own time is up, the events still held; taken before, it is the caller's", async (t) => {
  const taskId = 'sink-first-apart';
  let calls = 0;
  let commit!: () => void;
  const committedFirst = new Promise<void>((resolve) => (commit = resolve));
  const write = async () => {
    calls++;
    await appendEvents(serial, 't', taskId, [{ key: 'v1', event: status(taskId, 'TASK_STATE_WORKING') }]);
    commit();
  };
  const sink = new EventSink(serial, new EventHub(), 't', taskId, 'fwd/1/');
  t.mock.timers.enable({ apis: ['setTimeout'] });
  sink.holdFirst(write, 50);
  sink.holdEvents(50, 1_000);
  t.mock.timers.tick(20);
  await sink.push(status(taskId, 'TASK_STATE_WORKING')); // the events' hold restarts: 50 ms from now
  assert.equal(calls, 0, 'held');
  t.mock.timers.tick(30); // the first write's 50 ms; the events' hold has 20 ms to go
  t.mock.timers.reset(); // the writes run on real timers
  await committedFirst;
  await barrier();
  assert.deepEqual(await keysOf(taskId), ['v1'], 'the first write, the events still held');
  const taken = sink.take();
  assert.deepEqual(taken?.events.map((e) => e.key), ['fwd/1/1'], 'the events go to the caller');
  assert.equal(taken?.first, undefined, 'the first write was made already');
  await taken?.after; // what the caller awaits before it logs them
  assert.equal(calls, 1);

  const early = 'sink-first-apart-taken';
  let made = 0;
  const other = new EventSink(db.pool, new EventHub(), 't', early, 'fwd/1/');
  other.holdFirst(async () => void made++, 60_000);
  other.holdEvents(60_000, 60_000);
  await other.push(status(early, 'TASK_STATE_WORKING'));
  const held = other.take();
  assert.ok(held?.first, 'taken before its time: the first write is the caller’s');
  await other.flush();
  assert.equal(made, 0, 'and the sink never makes it');
  assert.deepEqual(await keysOf(early), []);
});
