/**
 * Finding agents (GET /agents, routing by text, the hub's agent.search): a list, or a search by `q`.
 *
 * Full text: PostgreSQL's full-text query over the weighted search document (name A, skill names and tags B,
 * descriptions C, examples D; migration 004), ranked by ts_rank.
 * Hybrid (issue 42), when a model service is configured and answers: the same full-text matches, and the
 * SEMANTIC_CANDIDATES cards nearest the query's embedding (cosine similarity; migration 037), fused by reciprocal
 * rank fusion: score = Σ 1 / (RRF_K + rank) over the two lists an agent is in. A card that shares no word with the
 * query still ranks by meaning; a card in both lists beats one in only one at the same ranks. Filters (tag,
 * skill, status) narrow both lists. Without the setting, or when the service fails or is slow, the search is
 * full-text and the answer says which ranking it used and why.
 */
import { createHash } from 'node:crypto';
import type { Pool } from 'pg';
import { z } from 'zod';
import { cursorReal, cursorText, cursorTimestamp, decodePageToken, encodePageToken } from '../db/page-token';
import { type Agent, type AgentRow, COLUMN_NAMES, toAgent } from './agent-rows';
import type { AgentStatus } from './refresh';
import type { CardEmbedder } from './card-embedder';
import { EmbeddingsUnavailable } from './embeddings';

/** Where each list placed an agent (1 = first), and its cosine similarity to the query; null where it is not in that list. */
export interface SearchRanks {
  fullText: number | null;
  semantic: number | null;
  similarity: number | null;
}

/** An agent found by a search, with its score (higher is better): ts_rank, or the fused score of a hybrid search. */
export type RankedAgent = Agent & { rank?: number; ranks?: SearchRanks };

export interface AgentSearch {
  /** Free text, web-search syntax (`"exact phrase"`, `or`, `-not`): ranked by the weighted card text, and by meaning. */
  q?: string;
  /** The text embedded for the semantic rank, when it is not `q` (routing ORs the message's words for full text). */
  meaning?: string;
  /** Skill tags the agent must all have (any case). */
  tags?: string[];
  /** Skill ids the agent must all have. */
  skills?: string[];
  /** Statuses the agent may have (any of). */
  statuses?: AgentStatus[];
  /** 1–100, default 50. */
  pageSize?: number;
  pageToken?: string;
}

/** Which ranking a search with `q` used. */
export type Ranking = 'hybrid' | 'full-text';

export interface AgentPage {
  agents: RankedAgent[];
  /** '' on the last page. */
  nextPageToken: string;
  /** With `q`: the ranking used, and the semantic half's state (`on`, `off: …`, `unavailable: …`). */
  ranking?: Ranking;
  semantic?: string;
}

/** A search or list request that cannot be answered as asked, e.g. a page token from another query (HTTP 400). */
export class QueryError extends Error {}

const DEFAULT_PAGE_SIZE = 50;
/** The constant of reciprocal rank fusion (60, as in Cormack et al. 2009 and most hybrid search engines). */
export const RRF_K = 60;
/** How many cards nearest in meaning join the full-text matches. */
export const SEMANTIC_CANDIDATES = 100;
/** Without pgvector: how many cards, nearest by their sign bits, are rescored by exact cosine similarity. */
export const RESCORED = 300;
// How long a search waits for its query's vector and its tenant's newest cards' vectors when no timeout is configured.
const DEFAULT_SEMANTIC_WAIT_MS = 2_000;

export const SEMANTIC_OFF = 'off: SWITCHBOARD_EMBEDDINGS_URL is not set';

interface SearchRow extends AgentRow {
  search_rank: number | null;
  rank_key: string | null;
  created_key: string;
  text_r?: string | null;
  meaning_r?: string | null;
  sim?: number | null;
}

/**
 * Lists or searches agents (see the file's comment). Pages are keyset pages: a token carries the last row's sort
 * key, so agents registered meanwhile neither repeat nor shift a page.
 * @throws QueryError for a page token that is malformed or belongs to another query (or to another ranking).
 */
export async function searchAgents(pool: Pool, embedder: CardEmbedder | undefined, tenant: string, s: AgentSearch): Promise<AgentPage> {
  const q = s.q?.trim() || undefined;
  if (!q) return runSearch(pool, tenant, { ...s, q });
  if (!embedder) return { ...(await runSearch(pool, tenant, { ...s, q })), ranking: 'full-text', semantic: SEMANTIC_OFF };
  const meaning = await queryVector(embedder, tenant, s.meaning?.trim() || q);
  if (typeof meaning === 'string') return { ...(await runSearch(pool, tenant, { ...s, q })), ranking: 'full-text', semantic: meaning };
  const pgvector = await embedder.hasPgvector();
  const page = await runSearch(pool, tenant, { ...s, q }, { vector: meaning, model: embedder.embeddings.model, pgvector });
  return { ...page, ranking: 'hybrid', semantic: 'on' };
}

/**
 * The query's vector, once the tenant's cards waiting for theirs have them (both within one bounded wait), or why
 * there is none (`unavailable: …`).
 */
async function queryVector(embedder: CardEmbedder, tenant: string, text: string): Promise<number[] | string> {
  const waitMs = embedder.embeddings.timeoutMs ?? DEFAULT_SEMANTIC_WAIT_MS;
  const down = embedder.embeddings.unavailable();
  if (down) return `unavailable: ${down}`;
  const [vector] = await Promise.allSettled([embedder.embeddings.query(tenant, text, waitMs), embedder.catchUp(tenant, waitMs)]);
  if (vector.status === 'fulfilled') return vector.value;
  if (vector.reason instanceof EmbeddingsUnavailable) return `unavailable: ${vector.reason.message}`;
  throw vector.reason;
}

interface Semantic {
  vector: number[];
  model: string;
  pgvector: boolean;
}

async function runSearch(pool: Pool, tenant: string, s: AgentSearch, semantic?: Semantic): Promise<AgentPage> {
  const pageSize = s.pageSize ?? DEFAULT_PAGE_SIZE;
  const { q } = s;
  const fingerprint = queryFingerprint(s, semantic ? 'hybrid' : 'full-text');
  const params: unknown[] = [tenant];
  const p = (v: unknown) => `$${params.push(v)}`;

  const filters: string[] = [];
  // Tags are stored lower-cased by PostgreSQL's lower(); the same function on the filter keeps them comparable.
  if (s.tags?.length) filters.push(`a.skill_tags ?& lower(${p(s.tags)}::text[]::text)::text[]`);
  if (s.skills?.length) filters.push(`a.skill_ids ?& ${p(s.skills)}::text[]`);
  if (s.statuses?.length) filters.push(`a.status = ANY(${p(s.statuses)}::text[])`);
  const filtered = ['a.tenant = $1', ...filters].join(' AND ');

  const after: string[] = [];
  if (s.pageToken) {
    const token = decodeToken(s.pageToken);
    if (token.f !== fingerprint) throw new QueryError('pageToken belongs to another query, or the ranking changed since (see `ranking`): repeat the same q and filters, or start without it');
    // The fingerprint matched, so the key is of this query's kind, unless the token was made up.
    if (!(q ? cursorReal : cursorTimestamp).safeParse(token.k).success) throw new QueryError('pageToken is not a token this API issued');
    const kind = semantic ? 'float8' : 'real';
    after.push(
      q ? `(search_rank < ${p(token.k)}::${kind} OR (search_rank = ${p(token.k)}::${kind} AND id > ${p(token.id)}))`
        : `(created_at, id) > (${p(token.k)}::timestamptz, ${p(token.id)})`,
    );
  }
  const columns = COLUMN_NAMES.map((c) => `a.${c}`).join(', ');
  let inner: string;
  if (!q) {
    inner = `SELECT ${columns}, NULL::real AS search_rank, NULL::text AS rank_key, a.created_at::text AS created_key FROM agents a WHERE ${filtered}`;
  } else if (!semantic) {
    // ts_rank normalisation 1 divides by 1 + log(document length): an agent cannot climb by repeating a word
    // across a long card, while the weights still put a name match far above an example match.
    const rank = 'ts_rank(a.search, query, 1)';
    inner = `SELECT ${columns}, ${rank} AS search_rank, ${rank}::text AS rank_key, a.created_at::text AS created_key
               FROM agents a, websearch_to_tsquery('english', ${p(q)}) query WHERE ${filtered} AND a.search @@ query`;
  } else {
    inner = hybridQuery(columns, filtered, filters.length > 0, p(q), semantic, p);
  }
  const order = q ? 'search_rank DESC, id' : 'created_at, id';
  const { rows } = await pool.query<SearchRow>(
    `SELECT * FROM (${inner}) r ${after.length ? `WHERE ${after.join(' AND ')}` : ''} ORDER BY ${order} LIMIT ${p(pageSize + 1)}`,
    params,
  );
  const page = rows.slice(0, pageSize);
  const last = page[page.length - 1];
  const nextPageToken = rows.length > pageSize && last ? encodeToken({ f: fingerprint, k: (q ? last.rank_key : last.created_key)!, id: last.id }) : '';
  return { agents: page.map((r) => ranked(r, q !== undefined, semantic !== undefined)), nextPageToken };
}

/**
 * The hybrid search's rows: the full-text matches ranked by ts_rank, the SEMANTIC_CANDIDATES nearest cards ranked
 * by cosine similarity, fused by RRF. With pgvector, the nearest are read through its HNSW index (an approximate
 * search: the filters apply to what the index returns). Without, by a scan in two steps: the RESCORED cards
 * nearest by the Hamming distance of their vectors' sign bits (fast, in C), rescored by exact cosine similarity
 * (a plpgsql loop, ~100 times slower a card). A tenant of up to RESCORED cards (after the filters) is ranked exactly.
 * The first step reads the narrow covering index of migration 037 (the bits, not the vectors), and joins the agents
 * only when a filter needs them (`narrowed`).
 */
function hybridQuery(columns: string, filtered: string, narrowed: boolean, q: string, semantic: Semantic, p: (v: unknown) => string): string {
  const dims = semantic.vector.length;
  const vector = p(`{${semantic.vector.join(',')}}`);
  const model = p(semantic.model);
  // The dimension is a number from the model's answer, written into the SQL so the index expression matches.
  const nearest = semantic.pgvector
    ? `SELECT e.agent_id AS id, 1 - (e.vector::vector(${dims}) <=> ${vector}::float4[]::vector(${dims})) AS sim
         FROM agent_embeddings e JOIN agents a ON a.tenant = e.tenant AND a.id = e.agent_id
        WHERE e.tenant = $1 AND e.model = ${model} AND e.dims = ${dims} AND ${filtered}
        ORDER BY e.vector::vector(${dims}) <=> ${vector}::float4[]::vector(${dims}) LIMIT ${SEMANTIC_CANDIDATES}`
    : `SELECT c.id, embedding_similarity(v.vector, ${vector}::float4[]) AS sim FROM (
         SELECT e.agent_id AS id
           FROM agent_embeddings e ${narrowed ? 'JOIN agents a ON a.tenant = e.tenant AND a.id = e.agent_id' : ''}
          WHERE e.tenant = $1 AND e.model = ${model} AND e.dims = ${dims} ${narrowed ? `AND ${filtered}` : ''}
          ORDER BY bit_count(e.bits # embedding_bits(${vector}::float4[])), e.agent_id LIMIT ${RESCORED}
       ) c JOIN agent_embeddings v ON v.tenant = $1 AND v.agent_id = c.id
       ORDER BY sim DESC, c.id LIMIT ${SEMANTIC_CANDIDATES}`;
  return `WITH text_hits AS (
      SELECT a.id, row_number() OVER (ORDER BY ts_rank(a.search, query, 1) DESC, a.id) AS r
        FROM agents a, websearch_to_tsquery('english', ${q}) query WHERE ${filtered} AND a.search @@ query
    ), near AS (${nearest}),
    meaning_hits AS (SELECT id, sim, row_number() OVER (ORDER BY sim DESC, id) AS r FROM near),
    fused AS (
      SELECT coalesce(t.id, m.id) AS id, t.r AS text_r, m.r AS meaning_r, m.sim,
             coalesce(1.0::float8 / (${RRF_K} + t.r), 0) + coalesce(1.0::float8 / (${RRF_K} + m.r), 0) AS score
        FROM text_hits t FULL JOIN meaning_hits m ON t.id = m.id
    )
    SELECT ${columns}, f.score AS search_rank, f.score::text AS rank_key, a.created_at::text AS created_key, f.text_r, f.meaning_r, f.sim
      FROM fused f JOIN agents a ON a.tenant = $1 AND a.id = f.id`;
}

function ranked(r: SearchRow, searched: boolean, hybrid: boolean): RankedAgent {
  if (!searched) return toAgent(r);
  const agent: RankedAgent = { ...toAgent(r), rank: r.search_rank ?? 0 };
  if (hybrid) {
    const n = (v: string | null | undefined) => (v === null || v === undefined ? null : Number(v));
    agent.ranks = { fullText: n(r.text_r), semantic: n(r.meaning_r), similarity: r.sim ?? null };
  }
  return agent;
}

/** Which rank put an agent where it is: full text, meaning, or both. */
export function rankedBy(a: RankedAgent): 'full-text' | 'semantic' | 'both' {
  if (!a.ranks) return 'full-text';
  if (a.ranks.fullText !== null && a.ranks.semantic !== null) return 'both';
  return a.ranks.semantic !== null ? 'semantic' : 'full-text';
}

// ---- page tokens: base64url JSON {f: query fingerprint, k: last sort key, id: last id} ----

const PageToken = z.object({ f: z.string().max(64), k: z.string().max(64), id: cursorText });
type PageToken = z.infer<typeof PageToken>;

const encodeToken = (t: PageToken): string => encodePageToken(t);

function decodeToken(raw: string): PageToken {
  const t = decodePageToken(raw, PageToken);
  if (!t) throw new QueryError('pageToken is not a token this API issued');
  return t;
}

/** Identifies the query a token was issued for, and its ranking (not the page size, which may change between pages). */
function queryFingerprint(s: AgentSearch, ranking: Ranking): string {
  const key = JSON.stringify([s.q ?? null, [...(s.tags ?? [])].sort(), [...(s.skills ?? [])].sort(), [...(s.statuses ?? [])].sort(), s.q ? ranking : null, s.meaning ?? null]);
  return createHash('sha256').update(key).digest('base64url').slice(0, 12);
}
