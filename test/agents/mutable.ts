// An echo agent whose card, caching headers, key set and endpoint behaviour a test can change while it runs:
// for the registry's refresh, liveness and signature tests. JSON-RPC is the real @a2a-js/sdk handler; the card
// route is its own so the test controls Cache-Control and ETag exactly and sees every conditional request.
import { createHash, generateKeyPairSync, type JsonWebKey, type KeyObject } from 'node:crypto';
import type express from 'express';
import { generateAgentCardSignature, type AgentCard } from '@a2a-js/sdk';
import { DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { jsonRpcHandler, UserBuilder } from '@a2a-js/sdk/server/express';
import { EchoExecutor } from './echo';
import { RPC_PATH, startAgentServer, type TestAgent } from './harness';
import { v1Card } from './v1';

export interface MutableAgentState {
  /** The card served (as JSON). Replace or edit it; the ETag follows its content. */
  card: Record<string, unknown>;
  /** The Cache-Control header of card responses; undefined = none. */
  cacheControl?: string;
  /** Send an ETag and answer a matching If-None-Match with 304 (default true). */
  etag: boolean;
  /** Served at /.well-known/jwks.json when set. */
  jwks?: { keys: JsonWebKey[] };
  /** Delay before the JSON-RPC endpoint answers. */
  rpcDelayMs: number;
  /** Answer every JSON-RPC request with this HTTP status instead (e.g. 503). */
  rpcStatus?: number;
  /** Answer card requests with this HTTP status instead (e.g. 500). */
  cardStatus?: number;
}

/** A second path serving the same JSON-RPC endpoint, for cards that move their interface. */
export const ALT_RPC_PATH = '/a2a/v2';

export interface CardRequest {
  ifNoneMatch?: string;
  status: number;
}

export interface MutableAgent extends TestAgent {
  state: MutableAgentState;
  cardRequests: CardRequest[];
  /** One entry per request for the key set. */
  jwksRequests: string[];
}

export interface MutableAgentOptions {
  name?: string;
  description?: string;
  /** Replaces the card's skills. */
  skills?: Record<string, unknown>[];
  cacheControl?: string;
}

export async function startMutableAgent(opts: MutableAgentOptions = {}): Promise<MutableAgent> {
  const name = opts.name ?? 'Mutable echo';
  const description = opts.description ?? 'Echoes, with a card that changes';
  const state: MutableAgentState = { card: {}, etag: true, rpcDelayMs: 0, cacheControl: opts.cacheControl };
  const cardRequests: CardRequest[] = [];
  const jwksRequests: string[] = [];

  const agent = await startAgentServer((app: express.Express, url: string) => {
    const card = v1Card(url, name, description, { streaming: false });
    state.card = JSON.parse(JSON.stringify(opts.skills ? { ...card, skills: opts.skills } : card));
    app.get('/.well-known/agent-card.json', (req, res) => {
      const body = JSON.stringify(state.card);
      const etag = `"${createHash('sha256').update(body).digest('hex').slice(0, 16)}"`;
      const ifNoneMatch = req.header('if-none-match') ?? undefined;
      if (state.cardStatus) {
        cardRequests.push({ ifNoneMatch, status: state.cardStatus });
        return void res.status(state.cardStatus).send('card unavailable');
      }
      if (state.cacheControl) res.setHeader('cache-control', state.cacheControl);
      if (state.etag) res.setHeader('etag', etag);
      const status = state.etag && ifNoneMatch === etag ? 304 : 200;
      cardRequests.push({ ifNoneMatch, status });
      if (status === 304) return void res.status(304).end();
      res.type('application/json').send(body);
    });
    app.get('/.well-known/jwks.json', (req, res) => {
      jwksRequests.push(req.url);
      if (!state.jwks) return void res.status(404).end();
      res.json(state.jwks);
    });
    const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new EchoExecutor());
    for (const path of [RPC_PATH, ALT_RPC_PATH]) {
      app.use(path, async (_req, res, next) => {
        if (state.rpcDelayMs) await new Promise((r) => setTimeout(r, state.rpcDelayMs));
        if (state.rpcStatus) return void res.status(state.rpcStatus).send('unavailable');
        next();
      });
      app.use(path, jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication, legacyCompat: { enabled: true } }));
    }
  });
  return Object.assign(agent, { state, cardRequests, jwksRequests });
}

// ---- signing, as an agent operator would with the A2A SDK ----

export interface SigningKey {
  kid: string;
  privateKey: KeyObject;
  /** The public key as published in a JWKS. */
  jwk: JsonWebKey;
}

export function newSigningKey(kid: string): SigningKey {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return { kid, privateKey, jwk: { ...publicKey.export({ format: 'jwk' }), kid, alg: 'ES256', use: 'sig' } };
}

/** The card with an ES256 signature by `key` (a2a-js generateAgentCardSignature); `header` adds jku/jwk. */
export async function signCard(card: Record<string, unknown>, key: SigningKey, header: Record<string, unknown> = {}): Promise<Record<string, unknown>> {
  const { signatures: _drop, ...unsigned } = card;
  const sign = generateAgentCardSignature(key.privateKey, { alg: 'ES256', typ: 'JOSE', kid: key.kid, ...header });
  return (await sign(unsigned as unknown as AgentCard)) as unknown as Record<string, unknown>;
}
