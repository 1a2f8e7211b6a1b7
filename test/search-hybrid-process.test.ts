// Hybrid search in a real Switchboard process configured only by its environment (issue 42's check): with
// SWITCHBOARD_EMBEDDINGS_URL, _MODEL and _KEY naming an OpenAI-compatible service, three agents whose cards share no
// word with the queries are each ranked first for theirs by GET /agents?q=, right after their registration; a
// plain full-text query still works; the service was called. Real Temporal, PostgreSQL, the process (src/main.ts).
// Run: bash scripts/test.sh test/search-hybrid-process.test.ts
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { startMutableAgent, type MutableAgent } from './agents/mutable';
import { createTestDb, DATABASE_URL, startTemporal, TEST_ADMIN_KEY, type TestDb } from './helpers/harness';
import { freePort, startSwitchboard, type SwitchboardProcess } from './helpers/process';
import { type EmbeddingService, startEmbeddingService } from './helpers/embedding-service';

let env: TestWorkflowEnvironment;
let db: TestDb;
let sb: SwitchboardProcess;
let service: EmbeddingService;
const agents: MutableAgent[] = [];

const skill = (id: string, name: string, description: string, tags: string[]) => ({ id, name, description, tags, examples: [] });
const FIXTURE = {
  billing: { name: 'Billing desk', description: 'Handles invoices and billing disputes', skills: [skill('disputes', 'Disputes', 'Settles invoice disputes', ['finance'])] },
  travel: { name: 'Journey planner', description: 'Arranges journeys and itineraries', skills: [skill('itineraries', 'Itineraries', 'Plans trips by airport', ['travel'])] },
  weather: { name: 'Sky watcher', description: 'Predicts sunshine and storm', skills: [skill('forecasts', 'Forecasts', 'Forecasts for skies anywhere', ['weather'])] },
};

before(async () => {
  [env, db, service] = await Promise.all([startTemporal(), createTestDb(), startEmbeddingService()]);
  const url = new URL(DATABASE_URL);
  url.searchParams.set('options', `-c search_path=${db.schema}`);
  sb = await startSwitchboard({
    DATABASE_URL: url.toString(),
    TEMPORAL_ADDRESS: env.address,
    TEMPORAL_TASK_QUEUE: `search-${randomBytes(3).toString('hex')}`,
    HOST: '127.0.0.1',
    PORT: String(await freePort()),
    SWITCHBOARD_ALLOW_PRIVATE_URLS: 'true',
    SWITCHBOARD_ADMIN_KEY: TEST_ADMIN_KEY,
    SWITCHBOARD_EMBEDDINGS_URL: service.url,
    SWITCHBOARD_EMBEDDINGS_MODEL: 'concepts',
    SWITCHBOARD_EMBEDDINGS_KEY: 'process-key',
    LOG_LEVEL: 'warn',
  });
});
after(async () => {
  await sb?.kill();
  await Promise.all(agents.map((a) => a.close().catch(() => {})));
  await service?.close();
  await db?.drop();
  await env?.teardown();
});

const admin = async (method: string, path: string, body?: unknown) => {
  const res = await fetch(`${sb.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${TEST_ADMIN_KEY}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as any };
};

test('each agent ranks first for a query it shares no word with, queried right after its registration', async () => {
  const ids: Record<string, string> = {};
  for (const [key, card] of Object.entries(FIXTURE)) {
    const a = await startMutableAgent(card);
    agents.push(a);
    const reg = await admin('POST', '/agents', { url: a.url });
    assert.equal(reg.status, 201, JSON.stringify(reg.json));
    ids[key] = reg.json.id;
  }
  for (const [text, key] of [['I want my money back', 'billing'], ['get me on a plane to Lisbon', 'travel'], ['should I carry an umbrella tomorrow', 'weather']] as const) {
    const found = await admin('GET', `/agents?q=${encodeURIComponent(text)}`);
    assert.equal(found.status, 200);
    assert.equal(found.json.ranking, 'hybrid', JSON.stringify(found.json.semantic));
    assert.equal(found.json.agents[0]?.id, ids[key], `${text}: ${found.json.agents.map((x: { name: string }) => x.name).join(', ')}`);
  }
  const plain = await admin('GET', '/agents?q=itineraries');
  assert.equal(plain.json.agents[0].id, ids.travel);
  assert.equal(plain.json.agents[0].ranks.fullText, 1);
  assert.ok(service.calls.some((c) => c.authorization === 'Bearer process-key' && c.input.includes('I want my money back')), 'the service was called for the query');
  assert.ok(service.calls.some((c) => c.input.some((i) => i.startsWith('Billing desk'))), 'and for the cards');
});
