/**
 * The front door's caches of agents and enforced policies (src/core/events/config-cache.ts): a change made anywhere
 * applies to the next tasks in every gateway process on the database that had the old rows cached, as soon as
 * migration 018's trigger's notice reaches it (milliseconds), not when the caches' 2 s TTL ends. The process that
 * made a change through the API sees it on its very next task (nanda.test.ts: a policy enforced and lifted).
 * Real Temporal, PostgreSQL, @a2a-js/sdk agents.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { AgentPool, startEchoAgent } from './agents';
import { type Gateway, eventually, register, rpc, startGateway } from './helpers/harness';

const V1 = { 'A2A-Version': '1.0' };
let gw: Gateway;
/** A second front-door process: its own caches and LISTEN connection, the same database and Temporal. */
let other: Gateway;
const agents = new AgentPool();

const send = (url: string, text: string, metadata?: Record<string, unknown>) =>
  rpc(url, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], metadata } } }, V1);

/**
 * Sends until `answered` says the change is seen: a notice crosses processes in milliseconds (the answer to the
 * change and the next request can still outrun it), while a cache that missed it would serve the old row for 2 s.
 */
async function seenSoon(url: string, answered: (r: Awaited<ReturnType<typeof send>>) => boolean, what: string) {
  return eventually(async () => {
    const r = await send(url, what);
    return answered(r) ? r : undefined;
  }, 1_000, what);
}

async function operatorAct(fields: Record<string, unknown>) {
  const res = await rpc(
    `${gw.url}/a2a`,
    { jsonrpc: '2.0', id: 1, method: 'message/send', params: { message: { role: 'user', parts: [{ text: JSON.stringify(fields) }] } } },
    { authorization: `Bearer ${gw.keys.operator}` },
  );
  return JSON.parse(res.json.result.parts[0].text);
}

before(async () => {
  gw = await startGateway();
  other = await startGateway({ db: gw.db, temporal: { env: gw.env, taskQueue: gw.taskQueue }, worker: false });
});

after(async () => {
  await other?.close();
  await gw?.close();
  await agents.closeAll();
});

describe('agent and policy caches', () => {
  test('a policy enforced in one process denies tasks in the other as soon as its notice comes, and lifted lets them through', async () => {
    const agent = await agents.add(startEchoAgent());
    const { id } = await register(gw, agent.url, { priceMinor: 10 });
    const there = `${other.url}/agents/${id}/a2a`;
    // The other process reads (and caches) the agent and the tenant's policies: none yet.
    assert.equal((await send(there, 'warm')).json.result.task.status.state, 'TASK_STATE_COMPLETED');
    const policy = await operatorAct({ action: 'policy.create', name: `cheap-${id}`, rules: { max_price_minor: 5 }, enforce: true });
    const denied = await seenSoon(there, (r) => r.json.error?.code === -32060, 'denied in the other process');
    assert.match(denied.json.error.message, new RegExp(`cheap-${id}`));
    await operatorAct({ action: 'policy.enforce', policy_id: policy.id, enforced: false });
    await seenSoon(there, (r) => r.json.result?.task.status.state === 'TASK_STATE_COMPLETED', 'lifted in the other process');
  });

  test('an agent deleted in one process is gone for tasks in the other as soon as its notice comes', async () => {
    const agent = await agents.add(startEchoAgent());
    const { id } = await register(gw, agent.url);
    const there = `${other.url}/agents/${id}/a2a`;
    assert.equal((await send(there, 'warm')).json.result.task.status.state, 'TASK_STATE_COMPLETED');
    const res = await gw.fetch(`${gw.url}/agents/${id}`, { method: 'DELETE' }, 'operator');
    assert.equal(res.status, 204);
    await seenSoon(there, (r) => r.status === 404, 'gone in the other process');
  });

  test('an agent marked down by a write outside the registry (as probes and the hub do) is refused in both processes as soon as its notice comes', async () => {
    const agent = await agents.add(startEchoAgent());
    const { id } = await register(gw, agent.url);
    const byId = (url: string) => send(`${url}/a2a`, 'hello', { agentId: id });
    for (const url of [gw.url, other.url]) assert.equal((await byId(url)).json.result.task.status.state, 'TASK_STATE_COMPLETED');
    await gw.db.pool.query("UPDATE agents SET status = 'down', status_reason = 'test: marked down' WHERE id = $1", [id]);
    for (const url of [gw.url, other.url]) {
      const refused = await eventually(async () => {
        const r = await byId(url);
        return r.json.error?.code === -32051 ? r : undefined;
      }, 1_000, 'refused as down');
      assert.match(refused.json.error.message, /test: marked down/);
    }
  });
});
