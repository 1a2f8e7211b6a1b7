/**
 * Part of `npm run bench` (BENCH_ONLY=hub): blocking SendMessage through Switchboard to the same echo behaviour
 * served two ways, in one run: an @a2a-js/sdk echo agent over HTTP (non-streaming, as a hub agent answers one
 * request per turn), and a Society AI-style agent connected to the WebSocket hub (GET /hub) that answers each
 * tasks/send with the completed task. Reported: the added p50 per turn and the throughput ratio, hub vs HTTP.
 *
 * Env: BENCH_HUB_N1 (calls at c=1, default 100), BENCH_HUB_N8 (at c=8, default 200).
 */
import WebSocket from 'ws';
import { sendBlocking, type Timing, timeCalls } from './measure';
import type { Gateway } from '../test/helpers/harness';

const int = (name: string, def: number) => (process.env[name] ? Number.parseInt(process.env[name]!, 10) : def);
const N1 = int('BENCH_HUB_N1', 100);
const N8 = int('BENCH_HUB_N8', 200);
const WARMUP = 10;

export interface HubResult extends Timing {
  via: 'http' | 'hub';
  concurrency: number;
}
export type HubReport = HubResult[];

/** A hub agent that echoes: answers every turn's request with the task completed, the user's text as its message. */
async function connectEchoHubAgent(gw: Gateway, key: string): Promise<WebSocket> {
  const ws = new WebSocket(`${gw.url.replace(/^http/, 'ws')}/hub`, { headers: { authorization: `Bearer ${key}` } });
  await new Promise((resolve, reject) => (ws.once('open', resolve), ws.once('error', reject)));
  ws.on('message', (data) => {
    const f = JSON.parse(data.toString());
    if (f.method !== 'tasks/send') return;
    const text = f.params.message.parts.map((p: { text?: string }) => p.text ?? '').join('');
    const status = { state: 'completed', message: { role: 'agent', parts: [{ type: 'text', text }] } };
    ws.send(JSON.stringify({ jsonrpc: '2.0', id: f.id, result: { id: f.params.id, sessionId: f.params.sessionId, status } }));
  });
  ws.send(JSON.stringify({ jsonrpc: '2.0', id: 'register', method: 'agent.register', params: { name: 'echo-hub', description: 'echoes', skills: [] } }));
  const beat = setInterval(() => ws.send(JSON.stringify({ jsonrpc: '2.0', method: 'heartbeat', params: {} })), 10_000);
  ws.on('close', () => clearInterval(beat));
  return ws;
}

export async function benchHub(gw: Gateway, deadline: number): Promise<HubReport> {
  const { register, agentKey, clientFactory, eventually } = await import('../test/helpers/harness');
  const { startEchoAgent } = await import('../test/agents');
  const http = await startEchoAgent({ streaming: false });
  let ws: WebSocket | undefined;
  const out: HubReport = [];
  try {
    const httpId = (await register(gw, http.url)).id;
    const hubId = (await register(gw, 'ws-agent://', { name: 'echo-hub' })).id;
    ws = await connectEchoHubAgent(gw, await agentKey(gw, hubId));
    await eventually(async () => (await gw.db.pool.query('SELECT 1 FROM hub_connections WHERE agent_id = $1', [hubId])).rowCount === 1, 10_000, 'the hub agent connected');
    const clients = {
      http: await clientFactory(gw.keys.client).createFromUrl(`${gw.url}/agents/${httpId}/`),
      hub: await clientFactory(gw.keys.client).createFromUrl(`${gw.url}/agents/${hubId}/`),
    };
    for (const concurrency of [1, 8]) {
      // Alternated, so load on a shared box falls on both alike.
      for (const via of ['http', 'hub'] as const) {
        const r = await timeCalls(() => sendBlocking(clients[via]), { concurrency, n: concurrency === 1 ? N1 : N8, warmup: WARMUP, deadline });
        console.error(`  hub bench ${via} c=${concurrency}: ${r.n} ok, ${r.errors} errors`);
        out.push({ via, concurrency, ...r });
      }
    }
  } finally {
    ws?.close();
    await http.close();
  }
  return out;
}

export function printHub(r: HubReport): void {
  const find = (via: 'http' | 'hub', c: number) => r.find((x) => x.via === via && x.concurrency === c);
  console.log('\nWebSocket hub vs HTTP (the same echo behaviour through Switchboard, blocking SendMessage)');
  console.log(`${'agent over'.padEnd(12)}  ${'c'.padStart(2)}  ${'n'.padStart(5)}  ${'errors'.padStart(6)}  ${'p50 ms'.padStart(8)}  ${'p99 ms'.padStart(8)}  ${'tasks/s'.padStart(8)}`);
  for (const x of r) {
    console.log(`${x.via.padEnd(12)}  ${String(x.concurrency).padStart(2)}  ${String(x.n).padStart(5)}  ${String(x.errors).padStart(6)}  ${x.p50.toFixed(1).padStart(8)}  ${x.p99.toFixed(1).padStart(8)}  ${x.tps.toFixed(1).padStart(8)}`);
  }
  for (const c of [1, 8]) {
    const http = find('http', c);
    const hub = find('hub', c);
    if (!http || !hub) continue;
    console.log(`c=${c}: the hub adds ${(hub.p50 - http.p50).toFixed(1)} ms at p50 per turn; tasks/s ${hub.tps.toFixed(1)} vs ${http.tps.toFixed(1)} (${(hub.tps / http.tps).toFixed(2)}×)`);
  }
}
