/**
 * Fair admission per tenant (issue 46, src/api/a2a/fair-gate.ts), the gate alone: who gets a freed place, how long a
 * place is held, and what a send that waits too long is told. The gateway's use of it is in test/hostile-load.test.ts.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { FairGate } from '../src/api/a2a/fair-gate';
import { errorCodeOf } from '../src/api/a2a/errors';

const gate = (capacity: number, o: { holdMs?: number; maxWaitMs?: number } = {}) => new FairGate({ capacity, holdMs: o.holdMs ?? 60_000, maxWaitMs: o.maxWaitMs ?? 60_000 });

describe('fair admission', () => {
  test('a tenant alone is not held back: nobody else is there to share with', async () => {
    const g = gate(2);
    const held = await Promise.all([1, 2, 3, 4, 5].map(() => g.enter('a')));
    assert.deepEqual(g.load, { busy: 5, waiting: 0 });
    for (const r of held) r();
  });

  test('beside another tenant at most capacity sends are in; a freed place goes to the tenant holding the fewest, before a flood that queued first', async () => {
    const g = gate(2);
    (await g.enter('light'))(); // the light tenant is about now
    const flood = [await g.enter('flood'), await g.enter('flood')];
    const order: string[] = [];
    // Each admitted send gives its place back a moment later, so the next is admitted by the same rule.
    const queued = [1, 2, 3].map((i) => g.enter('flood').then((r) => (order.push(`flood ${i}`), setTimeout(r, 1))));
    await sleep(5);
    assert.deepEqual(g.load, { busy: 2, waiting: 3 }, 'the flood waits past capacity');
    const light = g.enter('light').then((r) => (order.push('light'), r));
    await sleep(5);
    assert.deepEqual(order, [], 'at capacity the light send waits too');
    flood[0]!();
    (await light)();
    assert.deepEqual(order, ['light'], 'the freed place went to the light tenant (none held), before the flood (one held)');
    flood[1]!();
    await Promise.all(queued);
    assert.deepEqual(order, ['light', 'flood 1', 'flood 2', 'flood 3'], 'the flood in its own order');
  });

  test('among waiting tenants a freed place goes to the one holding the fewest', async () => {
    const g = gate(2);
    const a = [await g.enter('a'), await g.enter('a')];
    const order: string[] = [];
    const all = ['b', 'a', 'b'].map((t, i) => g.enter(t).then((r) => (order.push(`${t}${i}`), setTimeout(r, 20))));
    await sleep(5);
    assert.deepEqual(g.load, { busy: 2, waiting: 3 }, 'b is about: places are counted, and a holds them all');
    a[0]!();
    await sleep(5);
    assert.deepEqual(order, ['b0'], 'b holds none, a one: b');
    a[1]!();
    await sleep(5);
    assert.deepEqual(order, ['b0', 'a1'], 'a holds none now, b one: a');
    await Promise.all(all);
    assert.deepEqual(order, ['b0', 'a1', 'b2']);
  });

  test('a place is given back after holdMs even while its send runs on (a task waiting on its agent)', async () => {
    const g = gate(1, { holdMs: 50 });
    (await g.enter('other'))(); // another tenant about: places are counted
    await g.enter('slow');
    const t0 = Date.now();
    const next = await g.enter('slow');
    assert.ok(Date.now() - t0 >= 40, 'admitted when the first place was given back');
    next();
    next(); // twice is harmless
    assert.deepEqual(g.load, { busy: 0, waiting: 0 });
  });

  test('a send that waits maxWaitMs is refused with -32053 naming the setting; one whose client left is dropped', async () => {
    const g = gate(1, { maxWaitMs: 50 });
    (await g.enter('b'))();
    const held = await g.enter('a');
    await assert.rejects(g.enter('a'), (err: Error) => errorCodeOf(err) === -32053 && /SWITCHBOARD_ADMISSION_WAIT_MS/.test(err.message) && /Nothing was started/.test(err.message));
    const left = new AbortController();
    const leaving = g.enter('a', left.signal);
    left.abort(new Error('client left'));
    await assert.rejects(leaving, /client left/);
    assert.deepEqual(g.load, { busy: 1, waiting: 0 });
    held();
    assert.deepEqual(g.load, { busy: 0, waiting: 0 });
  });
});
