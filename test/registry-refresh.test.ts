// A registry that stays true: the deployment's refresh sweep (a long-lived Temporal workflow) refreshes each card (honouring Cache-Control and
// ETag) and probes its endpoint; the agent's status follows (healthy / degraded / down, with the reason and
// when it changed). Real Temporal dev server, PostgreSQL and @a2a-js/sdk agents.
// Run: TEMPORAL_CLI=$PWD/.tools/bin/temporal npx tsx --test test/registry-refresh.test.ts
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { ScheduleNotFoundError } from '@temporalio/client';
import { RefreshScheduler } from '../src/core/agents/refresh-schedules';
import { RPC_PATH } from './agents';
import { ALT_RPC_PATH, startMutableAgent, type MutableAgent } from './agents/mutable';
import { eventually } from './helpers/harness';
import { call, startRegistryGateway, TENANT, type RegistryGateway } from './helpers/registry-gateway';

let gw: RegistryGateway;
const agents: MutableAgent[] = [];

// Low thresholds keep the tests short: down after 2 failed probes, slow above 300 ms.
const POLICY = { downAfterFailures: 2, slowProbeMs: 300, requestTimeoutMs: 2_000 };

before(async () => {
  gw = await startRegistryGateway({ policy: POLICY });
});
after(async () => {
  await Promise.all(agents.map((a) => a.close()));
  await gw?.close();
});

async function newAgent(opts: Parameters<typeof startMutableAgent>[0] = {}) {
  const agent = await startMutableAgent(opts);
  agents.push(agent);
  return agent;
}

const getAgent = async (id: string) => (await call('GET', `${gw.url}/agents/${id}`)).body;

/** Registers the agent and waits for the first probe, which the new schedule runs at once. */
async function register(agent: MutableAgent, extra: Record<string, unknown> = {}) {
  const res = await call('POST', `${gw.url}/agents`, { url: agent.url, ...extra });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return eventually(async () => {
    const a = await getAgent(res.body.id);
    return a.liveness.lastProbe ? a : undefined;
  }, 20_000, `the first probe of ${res.body.id}`);
}

/** Refreshes the agent in a Temporal run of its own now, and waits for that run's probe to land. */
async function refreshInTemporal(id: string) {
  const before = (await getAgent(id)).liveness.lastProbe.at;
  await gw.scheduler!.refreshNow(TENANT, id);
  return eventually(async () => {
    const a = await getAgent(id);
    return a.liveness.lastProbe.at !== before ? a : undefined;
  }, 20_000, `a scheduled refresh of ${id}`);
}

describe('refresh in Temporal', () => {
  /** Ids of the schedules in the namespace (the listing is eventually consistent: poll for what must be there). */
  async function scheduleIds(): Promise<string[]> {
    const ids: string[] = [];
    for await (const s of gw.env!.client.schedule.list()) ids.push(s.scheduleId);
    return ids;
  }
  async function runsOf(type: string, idPrefix: string): Promise<string[]> {
    const found: string[] = [];
    for await (const wf of gw.env!.client.workflow.list({ query: `WorkflowType = '${type}' AND TaskQueue = '${gw.taskQueue}'` })) {
      if (wf.workflowId.startsWith(idPrefix)) found.push(wf.workflowId);
    }
    return found;
  }

  it('registration probes the new agent in a workflow run of its own, and makes no schedule for it; DELETE leaves nothing', async () => {
    const a = await register(await newAgent());
    const runs = await eventually(async () => {
      const r = await runsOf('agentRefreshWorkflow', gw.scheduler!.runIdPrefix(TENANT, a.id));
      return r.length ? r : undefined;
    }, 15_000, 'the first refresh run in visibility');
    assert.equal(runs.length, 1);
    assert.ok(!(await scheduleIds()).some((id) => id.includes(a.id)), 'no per-agent schedule');
    assert.equal((await call('DELETE', `${gw.url}/agents/${a.id}`)).status, 204);
    assert.equal((await call('DELETE', `${gw.url}/agents/${a.id}`)).status, 404, 'a second DELETE is 404');
  });

  /** Every execution (runs included) of the sweep workflow with this id, as Temporal's list shows them. */
  async function sweepRuns(workflowId: string): Promise<{ runId: string; status: string }[]> {
    const found: { runId: string; status: string }[] = [];
    for await (const wf of gw.env!.client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) found.push({ runId: wf.runId, status: wf.status.name });
    return found;
  }
  const stopSweep = (workflowId: string) =>
    gw.env!.client.workflow
      .getHandle(workflowId)
      .terminate('test done')
      .catch(() => undefined);

  it("reconcile starts the deployment's sweep workflow, deletes the schedules of earlier versions, and touches no other deployment's", async () => {
    const mine = await register(await newAgent());
    const otherQueue = `other-${randomUUID().slice(0, 6)}`;
    const paused = (scheduleId: string, agentId: string) =>
      gw.env!.client.schedule.create({
        scheduleId,
        spec: { intervals: [{ every: '1h' }] },
        action: { type: 'startWorkflow', workflowType: 'agentRefreshWorkflow', workflowId: scheduleId, taskQueue: 'nobody', args: [{ tenant: TENANT, agentId }] },
        state: { paused: true },
      });
    // This deployment's agent under both earlier id formats, this deployment's sweep schedule of the last version,
    // and another deployment's (same namespace) old one.
    const perAgent = `agent-refresh:${gw.taskQueue}:${TENANT}:${mine.id}`;
    const legacy = `agent-refresh:${TENANT}:${mine.id}`;
    const othersOld = `agent-refresh:${otherQueue}:${TENANT}:agent-of-another-deployment`;
    const formerSweep = gw.scheduler!.sweepId;
    // The other deployment started before (its start-up reconcile started its sweep), then its old schedule came.
    const other = new RefreshScheduler({ client: gw.env!.client, taskQueue: otherQueue, intervalMs: 3_600_000 });
    await other.reconcile(gw.db.pool);
    await Promise.all([paused(perAgent, mine.id), paused(legacy, mine.id), paused(othersOld, 'agent-of-another-deployment'), paused(formerSweep, mine.id)]);
    try {
      let seen: string[] = [];
      await eventually(async () => {
        seen = await scheduleIds();
        return [perAgent, legacy, othersOld, formerSweep].every((id) => seen.includes(id)) ? true : undefined;
      }, 30_000, 'the schedules in the listing').catch((err) => assert.fail(`${(err as Error).message}: ${seen.join(', ')}`));
      assert.deepEqual(await gw.scheduler!.reconcile(gw.db.pool), { created: 1, deleted: 2 });
      const described = await gw.env!.client.workflow.getHandle(gw.scheduler!.sweepId).describe();
      assert.equal(described.type, 'agentRefreshSweepWorkflow');
      assert.equal(described.status.name, 'RUNNING');
      assert.equal(gw.scheduler!.tickMs, 60_000, 'a tick is a fifth of the interval, at most a minute');
      for (const id of [perAgent, legacy, formerSweep]) await assert.rejects(gw.env!.client.schedule.getHandle(id).describe(), ScheduleNotFoundError, id);
      // The other deployment's schedule and sweep are still there (describe throws for a deleted schedule).
      await gw.env!.client.schedule.getHandle(othersOld).describe();
      assert.equal((await gw.env!.client.workflow.getHandle(other.sweepId).describe()).status.name, 'RUNNING');
      // Again (another process starting): nothing to start, nothing to delete, the same run.
      assert.deepEqual(await gw.scheduler!.reconcile(gw.db.pool), { created: 0, deleted: 0 });
      assert.equal((await gw.env!.client.workflow.getHandle(gw.scheduler!.sweepId).describe()).runId, described.runId);
    } finally {
      // The other tests count probes: no sweep of theirs.
      await Promise.all([stopSweep(gw.scheduler!.sweepId), stopSweep(other.sweepId)]);
      await gw.env!.client.schedule.getHandle(othersOld).delete().catch(() => undefined);
    }
  });

  it('the sweep refreshes every agent due, by itself, in one long-lived workflow run rather than a run per tick or per agent', async () => {
    const registered = [await register(await newAgent()), await register(await newAgent()), await register(await newAgent())];
    // The same deployment with a 1 s interval: the sweep looks every second.
    const fast = new RefreshScheduler({ client: gw.env!.client, taskQueue: gw.taskQueue!, intervalMs: 1_000 });
    await fast.reconcile(gw.db.pool);
    try {
      for (const a of registered) {
        const probes = await eventually(async () => {
          const res = await call('GET', `${gw.url}/agents/${a.id}/probes`);
          return res.body.probes.length >= 3 ? res.body.probes : undefined;
        }, 20_000, `three probes of ${a.id} (registration + two sweeps)`);
        assert.ok(probes.every((p: { ok: boolean }) => p.ok));
      }
      const runs = await eventually(async () => {
        const r = await sweepRuns(fast.sweepId);
        return r.length ? r : undefined;
      }, 15_000, 'the sweep in visibility');
      // (The test before terminated its own run of this id.)
      assert.deepEqual(runs.filter((r) => r.status !== 'TERMINATED').map((r) => r.status), ['RUNNING'], 'one execution, still running');
      // Each agent had one run of its own (its registration); every later probe came from the sweep.
      for (const a of registered) assert.equal((await runsOf('agentRefreshWorkflow', fast.runIdPrefix(TENANT, a.id))).length, 1);
    } finally {
      await stopSweep(fast.sweepId);
    }
  });
});

describe('card refresh', () => {
  it('registration stores the card and its validators; the schedule probes the endpoint at once', async () => {
    const agent = await newAgent();
    const res = await call('POST', `${gw.url}/agents`, { url: agent.url });
    assert.equal(res.status, 201);
    const a = res.body;
    assert.equal(a.status, 'healthy');
    assert.match(a.statusReason, /the first probe of the endpoint is under way/);
    assert.match(a.cardCache.etag, /^"[0-9a-f]{16}"$/);
    assert.equal(a.cardCache.freshUntil, null, 'no Cache-Control: revalidate on every refresh');
    assert.equal(a.signature.status, 'unsigned');
    assert.equal(agent.calls.length, 0, 'registering sends the agent nothing but the card request');

    const probed = await eventually(async () => {
      const x = await getAgent(a.id);
      return x.liveness.lastProbe ? x : undefined;
    }, 20_000, 'the first probe');
    assert.equal(probed.status, 'healthy');
    assert.match(probed.statusReason, /endpoint answered in \d+ ms/);
    assert.equal(probed.statusChangedAt, a.statusChangedAt, 'still healthy: the change time stays');
    assert.equal(probed.liveness.consecutiveFailures, 0);
    assert.equal(probed.liveness.lastProbe.ok, true);
    assert.equal(probed.liveness.lastProbe.card.outcome, 'not-modified', 'the first refresh revalidated the card with its ETag');
    // The probe asked the endpoint for a task that does not exist: a read that starts nothing.
    assert.equal(agent.calls.length, 1);
    assert.equal(agent.calls[0]!.method, 'GetTask');
    assert.equal(agent.calls[0]!.params.id, 'switchboard-liveness-probe');
  });

  it('picks up a changed card: stored card, a name taken from the card, the endpoint, and search', async () => {
    const agent = await newAgent({ name: 'Mutable one' });
    const a = await register(agent);
    // The same agent a second time, as another registration: a URL of its own (a tenant registers a URL once).
    const pinned = await register(agent, { name: 'Pinned name', url: `${agent.url}/?as=pinned` });

    agent.state.card = {
      ...agent.state.card,
      name: 'Renamed agent',
      description: 'Now forecasts zeppelin weather',
      supportedInterfaces: [{ url: `${agent.url}${ALT_RPC_PATH}`, protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
    };
    const after = await refreshInTemporal(a.id);
    assert.equal(after.liveness.lastProbe.card.outcome, 'changed');
    assert.equal(after.card.description, 'Now forecasts zeppelin weather');
    assert.equal(after.name, 'Renamed agent', 'a name that came from the card follows the card');
    assert.deepEqual(after.endpoint, { url: `${agent.url}${ALT_RPC_PATH}`, protocolVersion: '1.0', streaming: false, binding: 'JSONRPC' });
    assert.equal(after.status, 'healthy', 'the probe went to the new endpoint, which answers');
    assert.notEqual(after.cardCache.etag, a.cardCache.etag, 'the new validator is kept');

    const search = await call('GET', `${gw.url}/agents?q=zeppelin`);
    assert.deepEqual(search.body.agents.map((x: { id: string }) => x.id), [a.id], 'the search document follows the card');

    const pinnedAfter = await refreshInTemporal(pinned.id);
    assert.equal(pinnedAfter.name, 'Pinned name', 'a name the registrant chose is kept');
    assert.equal(pinnedAfter.card.name, 'Renamed agent');
  });

  it('ETag: the refresh asks with If-None-Match, a 304 keeps the card; a changed card is a 200 with a new ETag', async () => {
    const agent = await newAgent();
    const a = await register(agent);
    const seen = agent.cardRequests.length;
    const r1 = await refreshInTemporal(a.id);
    assert.deepEqual(agent.cardRequests.slice(seen), [{ ifNoneMatch: a.cardCache.etag, status: 304 }]);
    assert.equal(r1.liveness.lastProbe.card.outcome, 'not-modified');
    assert.deepEqual(r1.card, a.card);
    assert.equal(r1.cardCache.etag, a.cardCache.etag);
    assert.equal(r1.status, 'healthy');

    agent.state.card = { ...agent.state.card, description: 'changed once' };
    const r2 = await refreshInTemporal(a.id);
    assert.deepEqual(agent.cardRequests.at(-1), { ifNoneMatch: a.cardCache.etag, status: 200 });
    assert.equal(r2.liveness.lastProbe.card.outcome, 'changed');
    assert.equal(r2.card.description, 'changed once');
    assert.notEqual(r2.cardCache.etag, a.cardCache.etag);
  });

  it('Cache-Control max-age: the card is not asked for while fresh, the endpoint still is', async () => {
    const agent = await newAgent({ cacheControl: 'public, max-age=3600' });
    const a = await register(agent);
    const freshFor = Date.parse(a.cardCache.freshUntil) - Date.parse(a.liveness.lastProbe.at);
    assert.ok(Math.abs(freshFor - 3_600_000) < 5_000, `fresh for about an hour, got ${freshFor} ms`);
    const cardsSeen = agent.cardRequests.length;
    const probesSeen = agent.calls.length;
    agent.state.card = { ...agent.state.card, description: 'not seen until the hour is up' };
    const r = await refreshInTemporal(a.id);
    assert.equal(agent.cardRequests.length, cardsSeen, 'no card request within max-age');
    assert.equal(agent.calls.length, probesSeen + 1, 'one endpoint probe');
    assert.equal(r.liveness.lastProbe.card.outcome, 'fresh');
    assert.equal(r.card.description, a.card.description);
  });

  it('Cache-Control no-store: no validator is kept and every refresh asks unconditionally', async () => {
    const agent = await newAgent({ cacheControl: 'no-store' });
    const a = await register(agent);
    assert.deepEqual([a.cardCache.etag, a.cardCache.noStore, a.cardCache.freshUntil], [null, true, null]);
    const seen = agent.cardRequests.length;
    const r = await refreshInTemporal(a.id);
    assert.deepEqual(agent.cardRequests.slice(seen), [{ ifNoneMatch: undefined, status: 200 }]);
    assert.equal(r.liveness.lastProbe.card.outcome, 'unchanged');
  });
});

describe('liveness and status', () => {
  it('a dead agent turns degraded after one failed probe and down after two, with the reason and when', async () => {
    const agent = await newAgent();
    const a = await register(agent);
    assert.equal(a.status, 'healthy');
    await agent.close();

    const r1 = await refreshInTemporal(a.id);
    assert.equal(r1.status, 'degraded');
    assert.match(r1.statusReason, /endpoint probe failed \(1 of 2 before down\)/);
    assert.match(r1.statusReason, /ECONNREFUSED/);
    assert.ok(Date.parse(r1.statusChangedAt) >= Date.parse(a.statusChangedAt));
    assert.equal(r1.liveness.lastProbe.card.outcome, 'failed');

    const r2 = await refreshInTemporal(a.id);
    assert.equal(r2.status, 'down');
    assert.match(r2.statusReason, /2 endpoint probes failed in a row; last: .*ECONNREFUSED/);
    assert.equal(r2.liveness.consecutiveFailures, 2);
    assert.ok(Date.parse(r2.statusChangedAt) > Date.parse(r1.statusChangedAt), 'the change time moves with the status');

    const r3 = await refreshInTemporal(a.id);
    assert.equal(r3.status, 'down');
    assert.equal(r3.statusChangedAt, r2.statusChangedAt, 'staying down does not move the change time');

    const down = await call('GET', `${gw.url}/agents?status=down`);
    assert.ok(down.body.agents.some((x: { id: string }) => x.id === a.id), 'status=down lists it');
    const healthy = await call('GET', `${gw.url}/agents?status=healthy`);
    assert.ok(!healthy.body.agents.some((x: { id: string }) => x.id === a.id), 'status=healthy does not');

    const probes = (await call('GET', `${gw.url}/agents/${a.id}/probes`)).body.probes;
    assert.deepEqual(probes.slice(0, 4).map((p: { ok: boolean; status: string }) => [p.ok, p.status]), [
      [false, 'down'],
      [false, 'down'],
      [false, 'degraded'],
      [true, 'healthy'],
    ]);
  });

  it('an endpoint answering 503 counts as a failed probe', async () => {
    const agent = await newAgent();
    const a = await register(agent);
    agent.state.rpcStatus = 503;
    const r = await refreshInTemporal(a.id);
    assert.equal(r.status, 'degraded');
    assert.match(r.statusReason, /HTTP 503/);
  });

  it('a slow endpoint is degraded; when it speeds up it is healthy again', async () => {
    const agent = await newAgent();
    const a = await register(agent);
    agent.state.rpcDelayMs = 600;
    const slow = await refreshInTemporal(a.id);
    assert.equal(slow.status, 'degraded');
    assert.match(slow.statusReason, /slow: the endpoint answered in \d+ ms \(limit 300 ms\)/);
    assert.ok(slow.liveness.lastProbe.latencyMs >= 600);
    assert.equal(slow.liveness.consecutiveFailures, 0, 'slow is not failed');

    agent.state.rpcDelayMs = 0;
    const fast = await refreshInTemporal(a.id);
    assert.equal(fast.status, 'healthy');
    assert.ok(Date.parse(fast.statusChangedAt) > Date.parse(slow.statusChangedAt));
  });

  it('a card that cannot be fetched while the endpoint answers is degraded (partial failure), the card kept', async () => {
    const agent = await newAgent();
    const a = await register(agent);
    agent.state.cardStatus = 500;
    const r = await refreshInTemporal(a.id);
    assert.equal(r.status, 'degraded');
    assert.match(r.statusReason, /card not refreshed: .*HTTP 500/);
    assert.deepEqual(r.card, a.card);
    assert.deepEqual(r.endpoint, a.endpoint);

    agent.state.cardStatus = undefined;
    agent.state.card = { ...agent.state.card, skills: 'not a list' };
    const invalid = await refreshInTemporal(a.id);
    assert.equal(invalid.status, 'degraded');
    assert.match(invalid.statusReason, /card not refreshed: [\s\S]*skills/);
    assert.deepEqual(invalid.card, a.card, 'an invalid card is not stored');
  });

  it('POST /agents/:id/refresh refreshes in the request and answers with the result', async () => {
    const agent = await newAgent();
    const a = await register(agent);
    agent.state.rpcStatus = 502;
    const res = await call('POST', `${gw.url}/agents/${a.id}/refresh`);
    assert.equal(res.status, 200);
    assert.equal(res.body.status, 'degraded');
    assert.match(res.body.statusReason, /HTTP 502/);
    assert.equal((await call('POST', `${gw.url}/agents/nobody-000000/refresh`)).status, 404);
  });

  it('a refresh of an agent deleted meanwhile does nothing', async () => {
    const agent = await newAgent();
    const a = await register(agent);
    await gw.db.pool.query('DELETE FROM agents WHERE id = $1', [a.id]);
    const run = await gw.scheduler!.refreshNow(TENANT, a.id);
    assert.deepEqual(await run.result(), { agentId: a.id, gone: true });
  });
});

describe('0.3 agents', () => {
  it('are probed with tasks/get', async () => {
    const agent = await newAgent();
    agent.state.card = {
      protocolVersion: '0.3.0',
      name: 'Old style',
      description: 'A 0.3 card',
      version: '1.0.0',
      url: `${agent.url}${RPC_PATH}`,
      preferredTransport: 'JSONRPC',
      capabilities: {},
      defaultInputModes: ['text/plain'],
      defaultOutputModes: ['text/plain'],
      skills: [],
    };
    const a = await register(agent);
    assert.equal(a.endpoint.protocolVersion, '0.3');
    assert.equal(a.status, 'healthy', a.statusReason);
    assert.deepEqual(agent.calls.map((c) => c.method), ['tasks/get']);
  });
});
