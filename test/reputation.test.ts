/**
 * Trust: one trust event per terminal task, written with its settlement, and GET /agents/:id/reputation over a
 * known mix of outcomes (real Temporal, PostgreSQL and @a2a-js/sdk agents).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { AgentPool, startAskingAgent, startFailingAgent, startSlowAgent } from './agents';
import { type Gateway, eventually, register, rpc, startGateway } from './helpers/harness';

const V1 = { 'A2A-Version': '1.0' };
let gw: Gateway;
const agents = new AgentPool();

before(async () => {
  // Production's default: an unfunded tenant cannot pay; and a short input timeout so a task can expire.
  gw = await startGateway({ unfundedAccounts: 'enforce', inputTimeoutMs: 1_500 });
});
after(async () => {
  await gw?.close();
  await agents.closeAll();
});


const send = (rpcUrl: string, text: string, returnImmediately = false) =>
  rpc(
    rpcUrl,
    { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] }, configuration: { returnImmediately } } },
    V1,
  );

async function reputation(agentId: string) {
  const res = await gw.fetch(`${gw.url}/agents/${agentId}/reputation`);
  return { status: res.status, json: (await res.json()) as any };
}

async function settledCount(agentId: string, n: number) {
  await eventually(async () => {
    const { rows } = await gw.db.pool.query('SELECT count(*)::int AS n FROM settlements WHERE agent_id = $1', [agentId]);
    return rows[0].n === n || undefined;
  }, 20_000, `${n} settlements of ${agentId}`);
}

/** percentile_cont as PostgreSQL computes it (linear interpolation between the closest ranks). */
function percentile(sorted: number[], p: number): number {
  const pos = p * (sorted.length - 1);
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}

test('reputation counts each outcome once and computes latency percentiles from the task projection', async () => {
  // A: fails twice (a JSON-RPC error, not retried), then completes three times.
  const flaky = await agents.add(startFailingAgent({ mode: 'jsonrpc-error', failTimes: 2 }));
  const a = await register(gw, flaky.url, { retry: { maxAttempts: 1 } });
  for (let i = 0; i < 5; i++) await send(a.rpc, `a${i}`);

  // B: three completions of about 400 ms, and one task canceled while the agent works.
  const slow = await agents.add(startSlowAgent({ ms: 400 }));
  const b = await register(gw, slow.url);
  await Promise.all([send(b.rpc, 'b0'), send(b.rpc, 'b1'), send(b.rpc, 'b2')]);
  const slower = await agents.add(startSlowAgent({ ms: 60_000 }));
  const b2 = await register(gw, slower.url);
  const doomed = (await send(b2.rpc, 'stuck', true)).json.result.task;
  await eventually(() => slower.calls.length > 0 || undefined, 10_000, 'the call');
  await rpc(b2.rpc, { jsonrpc: '2.0', id: 2, method: 'CancelTask', params: { id: doomed.id } }, V1);

  // C: an agent that never answers: one timeout.
  const hang = await agents.add(startFailingAgent({ mode: 'hang' }));
  const c = await register(gw, hang.url, { retry: { maxAttempts: 1, attemptTimeoutMs: 1_000 } });
  assert.equal((await send(c.rpc, 'anyone?')).json.result.task.status.state, 'TASK_STATE_FAILED');

  // D: the client never answers the agent's question: expired, not the agent's fault.
  const asking = await agents.add(startAskingAgent());
  const d = await register(gw, asking.url);
  assert.equal((await send(d.rpc, 'greet me')).json.result.task.status.state, 'TASK_STATE_INPUT_REQUIRED');

  // E: a paid agent and no funds: refused before the call.
  const priced = await agents.add(startSlowAgent({ ms: 10 }));
  const e = await register(gw, priced.url, { priceMinor: 10 });
  assert.equal((await send(e.rpc, 'pay?')).json.error?.code, -32050);

  await Promise.all([settledCount(a.id, 5), settledCount(b.id, 3), settledCount(b2.id, 1), settledCount(c.id, 1), settledCount(d.id, 1), settledCount(e.id, 1)]);

  const ra = (await reputation(a.id)).json;
  assert.deepEqual(
    [ra.tasks, ra.completed, ra.failed, ra.timeouts, ra.canceled, ra.rejected, ra.expired, ra.unfunded, ra.successRate],
    [5, 3, 2, 0, 0, 0, 0, 0, 0.6],
  );

  const rb = (await reputation(b.id)).json;
  assert.deepEqual([rb.tasks, rb.completed, rb.failed, rb.successRate], [3, 3, 0, 1]);
  const { rows } = await gw.db.pool.query(
    `SELECT e.latency_ms, (EXTRACT(EPOCH FROM (t.status_timestamp - t.created_at)) * 1000)::bigint AS projection_ms
       FROM trust_events e JOIN tasks t USING (tenant, task_id) WHERE e.agent_id = $1 ORDER BY e.latency_ms`,
    [b.id],
  );
  const latencies = rows.map((r) => Number(r.latency_ms));
  for (const r of rows) assert.ok(Math.abs(Number(r.latency_ms) - Number(r.projection_ms)) <= 1, 'latency = the projection\'s created_at to its terminal status');
  assert.ok(latencies[0] >= 400, `each took the agent's 400 ms at least (${latencies})`);
  assert.deepEqual(rb.latencyMs, {
    p50: Math.round(percentile(latencies, 0.5)),
    p90: Math.round(percentile(latencies, 0.9)),
    p99: Math.round(percentile(latencies, 0.99)),
    max: latencies.at(-1),
    mean: Math.round(latencies.reduce((s, v) => s + v, 0) / latencies.length),
  });
  assert.ok(rb.lastTaskAt);

  const rb2 = (await reputation(b2.id)).json;
  assert.deepEqual([rb2.tasks, rb2.canceled, rb2.successRate, rb2.latencyMs.p50], [1, 1, null, null], 'a cancel is not held against the agent');

  const rc = (await reputation(c.id)).json;
  assert.deepEqual([rc.tasks, rc.timeouts, rc.failed, rc.successRate], [1, 1, 0, 0]);

  const rd = (await reputation(d.id)).json;
  assert.deepEqual([rd.tasks, rd.expired, rd.successRate], [1, 1, null]);

  const re = (await reputation(e.id)).json;
  assert.deepEqual([re.tasks, re.unfunded, re.successRate], [0, 1, null]);
  assert.equal(priced.calls.length, 0);

  // One trust event per terminal task, no more.
  const { rows: counts } = await gw.db.pool.query(
    `SELECT (SELECT count(*) FROM trust_events)::int AS events, (SELECT count(*) FROM settlements)::int AS settlements,
            (SELECT count(*) FROM (SELECT task_id FROM trust_events GROUP BY task_id HAVING count(*) > 1) d)::int AS dupes`,
  );
  assert.deepEqual(counts[0], { events: 12, settlements: 12, dupes: 0 });

  const unknown = await reputation('no-such-agent');
  assert.equal(unknown.status, 404);
  assert.match(unknown.json.error, /no-such-agent/);
});
