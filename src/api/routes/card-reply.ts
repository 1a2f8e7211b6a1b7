/**
 * How every card is sent (A2A 1.0 §8.6, "Caching"): `Cache-Control`, a strong `ETag` of the body, `Last-Modified`
 * when the card's change time is known, `Vary` on what picks the card (the A2A version, and for the front door the
 * caller), and 304 when the reader's copy is current (`If-None-Match`, else `If-Modified-Since`).
 */
import { createHash } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { cardDialectOf, type CardDialect } from '../../core/agents/gateway-card';
import { requestedVersion } from '../a2a/versions';
import { firstValue } from './base-url';

export interface CardReply {
  /** When the card last changed (to the second, as HTTP dates go). */
  lastModified?: Date;
  cacheControl: string;
  /** Request headers besides A2A-Version that change the card. */
  vary?: string[];
}

/** The card dialect this request asks for: its `A2A-Version` header, else its `A2A-Version` query parameter. */
export function requestedCardDialect(req: FastifyRequest): CardDialect {
  return cardDialectOf(requestedVersion(req));
}

/**
 * An agent's gateway card for this request: the dialect it asks for; asking none, the one the agent itself answers
 * such a reader with. An agent that speaks 0.x (its card is a 0.x card, or lists a 0.x interface; card-less 0.1,
 * NEXUS, NANDA and Genesis agents) serves 0.3 readers, who name no version (1.0 §3.6.2), so its gateway card is the
 * 0.3 card with the 1.0 interfaces beside it; an agent that speaks 1.0 only answers a reader that names none with its
 * 1.0 card, and so does its gateway card (a 1.0 client, such as the official TCK, that sends no version reads it; a
 * 0.3 client could not use that agent directly either). Either way, `A2A-Version` picks.
 */
export function agentCardDialect(req: FastifyRequest, agent: { card: Record<string, unknown>; endpoint: { protocolVersion: string } }): CardDialect {
  if (requestedVersion(req) !== undefined) return requestedCardDialect(req);
  return speaksOnly10(agent) ? '1.0' : '0.3';
}

function speaksOnly10({ card, endpoint }: { card: Record<string, unknown>; endpoint: { protocolVersion: string } }): boolean {
  if (!/^1\./.test(endpoint.protocolVersion)) return false;
  const legacy = (v: unknown) => typeof v === 'string' && /^0\./.test(v);
  if (legacy(card.protocolVersion) || typeof card.url === 'string') return false;
  const interfaces = [card.supportedInterfaces, card.additionalInterfaces].flatMap((l) => (Array.isArray(l) ? (l as { protocolVersion?: unknown }[]) : []));
  return !interfaces.some((i) => legacy(i?.protocolVersion));
}

export function sendCard(req: FastifyRequest, reply: FastifyReply, card: unknown, o: CardReply): FastifyReply {
  const body = JSON.stringify(card);
  const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`;
  reply.header('cache-control', o.cacheControl).header('vary', ['a2a-version', ...(o.vary ?? [])].join(', ')).header('etag', etag);
  const modified = o.lastModified && new Date(Math.floor(o.lastModified.getTime() / 1000) * 1000);
  if (modified) reply.header('last-modified', modified.toUTCString());
  if (notModified(req, etag, modified)) return reply.code(304).send();
  return reply.header('content-type', 'application/json; charset=utf-8').send(body);
}

/** RFC 9110 §13.1: If-None-Match wins over If-Modified-Since; a weak match is enough for a GET. */
function notModified(req: FastifyRequest, etag: string, modified: Date | undefined): boolean {
  const ifNoneMatch = firstValue(req.headers['if-none-match']);
  if (ifNoneMatch !== undefined) {
    return ifNoneMatch.trim() === '*' || ifNoneMatch.split(',').some((tag) => tag.trim().replace(/^W\//, '') === etag);
  }
  const since = Date.parse(firstValue(req.headers['if-modified-since']) ?? '');
  return modified !== undefined && !Number.isNaN(since) && modified.getTime() <= since;
}
