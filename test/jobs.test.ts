/**
 * Multi-agent jobs: agents that start tasks through Switchboard on behalf of the task they work on. The
 * child is linked to its parent (header and metadata Switchboard sends), canceling the top of a job cancels
 * every level, the parent's cost includes its children's, and agents calling each other in a loop hit the
 * hop limit with a clear error.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { AgentPool, startDelegatorAgent, startEchoAgent, startSlowAgent, type TestAgent } from './agents';
import { type Gateway, agentKey, eventually, register, rpc, startGateway } from './helpers/harness';

let gw: Gateway;
const agents = new AgentPool();
const V1 = { 'A2A-Version': '1.0' };

before(async () => {
  gw = await startGateway({ maxHops: 3 });
});
after(async () => {
  await gw?.close();
  await agents.closeAll();
});


const send = (url: string, text: string, configuration: Record<string, unknown> = {}) =>
  rpc(url, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] }, configuration } }, V1);
const getTask = async (url: string, id: string) => (await rpc(url, { jsonrpc: '2.0', id: 2, method: 'GetTask', params: { id } }, V1)).json.result;

/** Registers a chain top → middle → leaf, where top and middle delegate through Switchboard. */
async function chain(leaf: TestAgent, prices: [number, number, number] = [0, 0, 0]) {
  const ids: Record<string, string> = {};
  const keys: Record<string, string> = {};
  const top = await agents.add(startDelegatorAgent({ name: 'Top', gateway: () => ({ url: gw.url, agentId: ids.middle, key: keys.top }) }));
  const middle = await agents.add(startDelegatorAgent({ name: 'Middle', gateway: () => ({ url: gw.url, agentId: ids.leaf, key: keys.middle }) }));
  ids.top = (await register(gw, top.url, { priceMinor: prices[0] })).id;
  ids.middle = (await register(gw, middle.url, { priceMinor: prices[1] })).id;
  ids.leaf = (await register(gw, leaf.url, { priceMinor: prices[2] })).id;
  keys.top = await agentKey(gw, ids.top);
  keys.middle = await agentKey(gw, ids.middle);
  return { ids, topRpc: `${gw.url}/agents/${ids.top}/a2a` };
}

describe('multi-agent jobs', () => {
  test('a three-level job: children linked, GetTask shows them, the cost rolls up to the top', async () => {
    const echo = await agents.add(startEchoAgent());
    const { ids, topRpc } = await chain(echo, [1, 10, 100]);
    const res = await send(topRpc, 'hello');
    const top = res.json.result?.task;
    assert.equal(top?.status.state, 'TASK_STATE_COMPLETED', JSON.stringify(res.json));
    assert.equal(top.artifacts[0].parts[0].text, 'echo: Top asks: Middle asks: hello'.replace('Top asks: Middle asks', 'Middle asks: Top asks'));

    const { rows } = await gw.db.pool.query('SELECT task_id, agent_id, parent_task_id, depth FROM tasks WHERE task_id = $1 OR parent_task_id IS NOT NULL ORDER BY depth', [top.id]);
    const job = rows.filter((r) => r.task_id === top.id || r.agent_id !== ids.top);
    const middleRow = job.find((r) => r.agent_id === ids.middle && r.parent_task_id === top.id);
    assert.ok(middleRow, 'the middle task names the top task as parent');
    const leafRow = job.find((r) => r.agent_id === ids.leaf && r.parent_task_id === middleRow.task_id);
    assert.ok(leafRow, 'the leaf task names the middle task as parent');
    assert.deepEqual([middleRow.depth, leafRow.depth], [1, 2]);

    const done = await eventually(async () => {
      const t = await getTask(topRpc, top.id);
      return t.metadata?.switchboard?.job?.cost ? t : undefined;
    }, 30_000, 'the job cost on the top task');
    const jobView = done.metadata.switchboard.job;
    assert.deepEqual(jobView.children.map((c: { taskId: string; state: string }) => [c.taskId, c.state]), [[middleRow.task_id, 'TASK_STATE_COMPLETED']]);
    assert.deepEqual(jobView.cost, { ownMinor: 1, childrenMinor: 110, totalMinor: 111 });
    // Each task is still charged only its own cost.
    const { rows: settled } = await gw.db.pool.query('SELECT task_id, amount_minor::int AS amount FROM settlements WHERE task_id = ANY($1) ORDER BY amount', [[top.id, middleRow.task_id, leafRow.task_id]]);
    assert.deepEqual(settled.map((r) => r.amount), [1, 10, 100]);
  });

  test('canceling the top of a three-level job cancels every level, down to the working agent', async () => {
    const slow = await agents.add(startSlowAgent({ ms: 60_000 }));
    const { ids, topRpc } = await chain(slow);
    const started = await send(topRpc, 'work', { returnImmediately: true });
    const topId = started.json.result.task.id;
    const leaf = await eventually(async () => {
      const { rows } = await gw.db.pool.query("SELECT task_id, parent_task_id FROM tasks WHERE agent_id = $1 AND state = 'TASK_STATE_WORKING'", [ids.leaf]);
      return rows[0];
    }, 20_000, 'the leaf task to be working');
    await eventually(() => slow.calls.some((c) => /SendMessage|SendStreamingMessage/.test(c.method)) || undefined, 10_000, 'the slow agent to be called');

    const canceled = await rpc(topRpc, { jsonrpc: '2.0', id: 3, method: 'CancelTask', params: { id: topId } }, V1);
    assert.equal(canceled.json.result?.status.state, 'TASK_STATE_CANCELED', JSON.stringify(canceled.json));
    const states = await eventually(async () => {
      const { rows } = await gw.db.pool.query('SELECT agent_id, state FROM tasks WHERE task_id = ANY($1)', [[topId, leaf.parent_task_id, leaf.task_id]]);
      return rows.length === 3 && rows.every((r) => r.state === 'TASK_STATE_CANCELED') ? rows : undefined;
    }, 30_000, 'all three levels canceled');
    assert.equal(states.length, 3);
    await eventually(() => slow.cancels.length > 0 || undefined, 10_000, 'the cancel to reach the working agent');
  });

  test('agents calling each other in a loop stop at the hop limit with a clear error', async () => {
    const ids: Record<string, string> = {};
    const keys: Record<string, string> = {};
    const ping = await agents.add(startDelegatorAgent({ name: 'Ping', gateway: () => ({ url: gw.url, agentId: ids.pong, key: keys.ping }) }));
    const pong = await agents.add(startDelegatorAgent({ name: 'Pong', gateway: () => ({ url: gw.url, agentId: ids.ping, key: keys.pong }) }));
    ids.ping = (await register(gw, ping.url)).id;
    ids.pong = (await register(gw, pong.url)).id;
    keys.ping = await agentKey(gw, ids.ping);
    keys.pong = await agentKey(gw, ids.pong);
    const res = await send(`${gw.url}/agents/${ids.ping}/a2a`, 'loop');
    const task = res.json.result.task;
    assert.equal(task.status.state, 'TASK_STATE_FAILED');
    const { rows } = await gw.db.pool.query('SELECT max(depth)::int AS deepest, count(*)::int AS n FROM tasks WHERE agent_id = ANY($1)', [[ids.ping, ids.pong]]);
    assert.deepEqual(rows[0], { deepest: 3, n: 4 }, 'the root and three hops, no more');
    // The refusal names the limit; each level passes the reason up.
    assert.match(JSON.stringify(task.status.message), /Hop limit reached/);

    // A parent that does not exist is refused the same way.
    const withParent = (parentTaskId: string, key: string) =>
      rpc(`${gw.url}/agents/${ids.ping}/a2a`, {
        jsonrpc: '2.0', id: 4, method: 'SendMessage',
        params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'x' }], metadata: { switchboard: { parentTaskId } } } },
      }, { ...V1, authorization: `Bearer ${key}` });
    const orphan = await withParent(randomUUID(), keys.pong);
    assert.equal(orphan.json.error?.code, -32052, JSON.stringify(orphan.json));
    assert.match(orphan.json.error.message, /does not exist/);
    // Linking is explicit: only an agent key names a parent, and only one of its own agent's tasks.
    const started = async () => (await gw.db.pool.query('SELECT count(*)::int AS n FROM message_tasks WHERE agent_id = $1', [ids.ping])).rows[0].n;
    const before = await started();
    const byClient = await withParent(task.id, gw.keys.client);
    assert.equal(byClient.json.error?.code, -32052);
    assert.match(byClient.json.error.message, /only be named with an agent key/);
    const notItsOwn = await withParent(task.id, keys.pong);
    assert.equal(notItsOwn.json.error?.code, -32052);
    assert.match(notItsOwn.json.error.message, /not run by this key's agent/);
    assert.equal(await started(), before, 'no refused call started a task');
  });
});
