/**
 * A real OpenAI-compatible embeddings service over HTTP (`POST /v1/embeddings`), for the hybrid search tests: its
 * vectors come from a small rule of its own, words mapped to concepts (money, travel, weather, …), so texts that
 * share no word but mean alike point the same way. It can be made slow or failing, and records what it was asked.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** Words of each concept: a card and a query that share none of them still meet in the concept. */
export const CONCEPTS: Record<string, string[]> = {
  money: ['money', 'back', 'refund', 'refunds', 'invoice', 'invoices', 'billing', 'disputes', 'charge', 'charged', 'payment', 'reimbursed'],
  travel: ['plane', 'flight', 'fly', 'trip', 'trips', 'journey', 'journeys', 'itineraries', 'lisbon', 'holiday', 'airport'],
  weather: ['umbrella', 'rain', 'sunshine', 'forecast', 'forecasts', 'weather', 'storm', 'skies', 'predicts', 'tomorrow'],
  poetry: ['poem', 'poems', 'verse', 'rhymes', 'sonnet', 'stanza'],
};
const NAMES = Object.keys(CONCEPTS);
// Beside the concepts, a few dimensions from the words themselves, weak: unlike texts never get equal vectors.
const HASHED = 8;

export interface EmbeddingCall {
  model: string;
  input: string[];
  authorization?: string;
}

export interface EmbeddingService {
  /** The base URL to configure (SWITCHBOARD_EMBEDDINGS_URL): `http://127.0.0.1:<port>/v1`. */
  url: string;
  calls: EmbeddingCall[];
  /** `ok`, `down` (every request answered 503), or `slow` (answers after `delayMs`). */
  mode: 'ok' | 'down' | 'slow';
  delayMs: number;
  close(): Promise<void>;
}

/** The rule: concept counts, then hashed words at a tenth of the weight; model `…-v2` lists the dimensions reversed. */
export function vectorOf(text: string, model: string): number[] {
  const words = text.toLowerCase().match(/[a-z]+/g) ?? [];
  const v = new Array<number>(NAMES.length + HASHED).fill(0);
  for (const w of words) {
    const concept = NAMES.findIndex((n) => CONCEPTS[n]!.includes(w));
    if (concept >= 0) v[concept]! += 1;
    let h = 0;
    for (const c of w) h = (h * 31 + c.charCodeAt(0)) >>> 0;
    v[NAMES.length + (h % HASHED)]! += 0.1;
  }
  return model.endsWith('-v2') ? v.reverse() : v;
}

export async function startEmbeddingService(): Promise<EmbeddingService> {
  const state: Omit<EmbeddingService, 'url' | 'close'> = { calls: [], mode: 'ok', delayMs: 0 };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/embeddings') return void res.writeHead(404).end();
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { model: string; input: string | string[] };
      const input = Array.isArray(body.input) ? body.input : [body.input];
      state.calls.push({ model: body.model, input, authorization: req.headers.authorization });
      if (state.mode === 'down') return void res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":"model is loading"}');
      const answer = () => {
        if (res.destroyed) return;
        res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({ object: 'list', model: body.model, data: input.map((text, index) => ({ object: 'embedding', index, embedding: vectorOf(text, body.model) })) }),
        );
      };
      if (state.mode === 'slow') setTimeout(answer, state.delayMs);
      else answer();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return Object.assign(state, {
    url: `http://127.0.0.1:${port}/v1`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  });
}
