/**
 * Embeddings from a model service (issue 42): an OpenAI-compatible `POST <url>/embeddings` (Ollama, vLLM,
 * text-embeddings-inference, LocalAI and OpenAI all serve it), called through the guarded outbound client like
 * every other outbound call. Nothing here ranks: src/core/agents/search.ts does, in PostgreSQL.
 *
 * A model service that fails or is slow must never fail a search or hold up a registration: every call is bounded
 * by a timeout, and after a failure (refused, an error status, an answer of another shape) the service is left
 * alone for a while (queries then rank by full text at once and say why, rather than each asking it again).
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';

export interface EmbeddingsSettings {
  /** SWITCHBOARD_EMBEDDINGS_URL: the API base (`…/v1`); `/embeddings` is appended. */
  url: string;
  /** SWITCHBOARD_EMBEDDINGS_MODEL. */
  model: string;
  /** SWITCHBOARD_EMBEDDINGS_KEY: sent as `Authorization: Bearer`, when set. */
  key?: string;
  /** SWITCHBOARD_EMBEDDINGS_TIMEOUT_MS: the longest a search waits for its query's vector (default 2 s). */
  timeoutMs?: number;
  /** How long the service is left alone after a failure (default 10 s). */
  backoffMs?: number;
}

/** Inputs per request: large enough to embed a thousand cards in a few dozen calls, small enough for any server. */
export const EMBED_BATCH = 32;
// A query is embedded once per request; the same text again within this time reuses its vector.
const QUERY_CACHE_MS = 60_000;
const QUERY_CACHE_ENTRIES = 1_000;

const EmbeddingsAnswer = z.object({
  data: z.array(z.object({ index: z.number().int().min(0).optional(), embedding: z.array(z.number()).min(1).max(16_384) })),
});

/** Why no vector came: the service failed, was slow, or is being left alone after a failure. */
export class EmbeddingsUnavailable extends Error {}

export class Embeddings {
  readonly model: string;
  private readonly endpoint: string;
  readonly timeoutMs: number;
  private readonly backoffMs: number;
  private downUntil = 0;
  private downReason = '';
  private readonly queries = new Map<string, { vector: number[]; until: number }>();

  constructor(
    private readonly settings: EmbeddingsSettings,
    private readonly fetchFn: typeof globalThis.fetch,
  ) {
    this.model = settings.model;
    this.endpoint = `${settings.url.replace(/\/+$/, '')}/embeddings`;
    this.timeoutMs = settings.timeoutMs ?? 2_000;
    this.backoffMs = settings.backoffMs ?? 10_000;
  }

  /**
   * The vector of a search's text, cached per tenant for a minute (per tenant: one tenant's queries must not be
   * timed from another's).
   * @throws EmbeddingsUnavailable naming why.
   */
  async query(tenant: string, text: string, timeoutMs = this.timeoutMs): Promise<number[]> {
    const key = `${tenant}\u0000${text}`;
    const now = Date.now();
    const hit = this.queries.get(key);
    if (hit && hit.until > now) return hit.vector;
    const [vector] = await this.embed([text], timeoutMs);
    if (this.queries.size >= QUERY_CACHE_ENTRIES) this.queries.delete(this.queries.keys().next().value!);
    this.queries.set(key, { vector: vector!, until: now + QUERY_CACHE_MS });
    return vector!;
  }

  /**
   * Unit-length vectors of `texts`, in their order, in one request.
   * @throws EmbeddingsUnavailable when the service fails, answers in another shape, or takes longer than `timeoutMs`.
   */
  async embed(texts: string[], timeoutMs = this.timeoutMs): Promise<number[][]> {
    if (Date.now() < this.downUntil) throw new EmbeddingsUnavailable(`${this.downReason} (not asked again until ${new Date(this.downUntil).toISOString()})`);
    try {
      return await this.request(texts, timeoutMs);
    } catch (err) {
      // A slow answer bounds each search at the timeout, and leaves the service to the next one: a model still
      // loading (Ollama's first call) answers soon. A failure leaves it alone a while, so searches answer at once.
      if (err instanceof Error && err.name === 'TimeoutError') throw new EmbeddingsUnavailable(`the model service took longer than ${timeoutMs} ms`);
      this.downUntil = Date.now() + this.backoffMs;
      this.downReason = (err as Error).message;
      throw new EmbeddingsUnavailable(this.downReason);
    }
  }

  private async request(texts: string[], timeoutMs: number): Promise<number[][]> {
    const res = await this.fetchFn(this.endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(this.settings.key ? { authorization: `Bearer ${this.settings.key}` } : {}) },
      body: JSON.stringify({ model: this.model, input: texts }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (!res.ok) throw new Error(`the model service answered HTTP ${res.status}: ${(await res.text()).slice(0, 200)}`);
    const answer = EmbeddingsAnswer.safeParse(await res.json());
    if (!answer.success) throw new Error('the model service answered without data[].embedding');
    const { data } = answer.data;
    if (data.length !== texts.length) throw new Error(`the model service answered ${data.length} vectors for ${texts.length} inputs`);
    const ordered = data.some((d) => d.index !== undefined) ? [...data].sort((a, b) => (a.index ?? 0) - (b.index ?? 0)) : data;
    const dims = ordered[0]!.embedding.length;
    if (ordered.some((d) => d.embedding.length !== dims)) throw new Error('the model service answered vectors of different lengths');
    return ordered.map((d) => unit(d.embedding));
  }

  /** Why semantic ranking is off now, or undefined when the service may be asked. */
  unavailable(): string | undefined {
    return Date.now() < this.downUntil ? this.downReason : undefined;
  }
}

/** The vector scaled to length 1, so cosine similarity is a dot product; a zero vector stays zero. */
function unit(v: number[]): number[] {
  const norm = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
  return norm === 0 ? v : v.map((x) => x / norm);
}

/** What is embedded of a card: its name, description and skills (names, descriptions, tags, examples). */
export function cardText(name: string, card: Record<string, unknown>): string {
  const lines = [name];
  if (typeof card.description === 'string') lines.push(card.description);
  for (const s of (Array.isArray(card.skills) ? card.skills : []) as Record<string, unknown>[]) {
    const strings = (v: unknown) => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);
    const parts = [s.name, s.description].filter((x): x is string => typeof x === 'string');
    const tags = strings(s.tags);
    if (tags.length) parts.push(`tags: ${tags.join(', ')}`);
    parts.push(...strings(s.examples));
    if (parts.length) lines.push(parts.join('. '));
  }
  // Model services cap their input (8k tokens is common); a card's first 8,000 characters say what it does.
  return lines.join('\n').slice(0, 8_000);
}

export const textHash = (text: string): string => createHash('sha256').update(text).digest('base64url');
