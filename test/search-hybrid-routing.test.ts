// Hybrid search where routing uses it (issue 42): the front door routes a message whose words no card shares to
// the agent nearest in meaning, and the routing answer says which rank chose it; the hub's agent.search ranks the
// same way. Real Temporal, PostgreSQL, @a2a-js/sdk agents, and an OpenAI-compatible embeddings service over HTTP
// (test/helpers/embedding-service.ts).
// Run: bash scripts/test.sh test/search-hybrid-routing.test.ts
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import WebSocket from 'ws';
import { startMutableAgent, type MutableAgent } from './agents/mutable';
import { type Gateway, agentKey, register, rpc, startGateway } from './helpers/harness';
import { type EmbeddingService, startEmbeddingService } from './helpers/embedding-service';

let gw: Gateway;
let service: EmbeddingService;
const agents: MutableAgent[] = [];
const ids: Record<string, string> = {};

const skill = (id: string, name: string, description: string, tags: string[]) => ({ id, name, description, tags, examples: [] });
// No card shares a word with the messages sent below.
const FIXTURE = {
  billing: { name: 'Billing desk', description: 'Handles invoices and billing disputes', skills: [skill('disputes', 'Disputes', 'Settles invoice disputes', ['finance'])] },
  travel: { name: 'Journey planner', description: 'Arranges journeys and itineraries', skills: [skill('itineraries', 'Itineraries', 'Plans trips by airport', ['travel'])] },
};

before(async () => {
  service = await startEmbeddingService();
  gw = await startGateway({ embeddings: { url: service.url, model: 'concepts' }, hub: {} });
  for (const [key, opts] of Object.entries(FIXTURE)) {
    const a = await startMutableAgent(opts);
    agents.push(a);
    ids[key] = (await register(gw, a.url)).id;
  }
});
after(async () => {
  await gw?.close();
  await service?.close();
  await Promise.all(agents.map((a) => a.close().catch(() => {})));
});

const send = (text: string) =>
  rpc(`${gw.url}/a2a`, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] } } });

describe('routing by message text', () => {
  test('goes to the agent nearest in meaning, and the routing answer says the semantic rank chose it', async () => {
    for (const [text, key] of [['I want my money back', 'billing'], ['get me on a plane to Lisbon', 'travel']] as const) {
      const res = await send(text);
      const routing = res.json.result?.task?.metadata?.switchboard?.routing;
      assert.ok(routing, JSON.stringify(res.json));
      assert.equal(routing.agentId, ids[key], text);
      assert.equal(routing.reason, 'search');
      assert.equal(routing.rankedBy, 'semantic');
      const stored = (await (await gw.fetch(`${gw.url}/tasks/${res.json.result.task.id}/route`)).json()) as any;
      assert.equal(stored.rankedBy, 'semantic');
    }
  });

  test('a word of the card chooses by both ranks', async () => {
    const res = await send('question about my invoices');
    const routing = res.json.result?.task?.metadata?.switchboard?.routing;
    assert.equal(routing.agentId, ids.billing);
    assert.equal(routing.rankedBy, 'both');
  });
});

describe("the hub's agent.search", () => {
  test('ranks by meaning too', async () => {
    const key = await agentKey(gw, (await register(gw, 'ws-agent://', { name: 'searcher' })).id);
    const ws = new WebSocket(`${gw.url.replace(/^http/, 'ws')}/hub`, { headers: { authorization: `Bearer ${key}` } });
    try {
      await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
      const answer = new Promise<any>((resolve) => ws.on('message', (data) => {
        const f = JSON.parse(data.toString());
        if (f.id === 7) resolve(f);
      }));
      ws.send(JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'agent.search', params: { q: 'I want my money back' } }));
      const found = await answer;
      assert.equal(found.result.ranking, 'hybrid', JSON.stringify(found));
      assert.equal(found.result.agents[0].id, ids.billing);
      assert.equal(found.result.agents[0].ranks.semantic, 1);
    } finally {
      ws.close();
    }
  });
});
