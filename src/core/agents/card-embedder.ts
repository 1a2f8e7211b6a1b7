/**
 * Embeds agent cards in the background (issue 42): the queue migration 037's trigger fills on every registration
 * and card change is drained in batches through the model service, and the vectors stored per agent.
 *
 * When: at once after a registration in this process commits (`kick`), every few seconds for cards changed
 * elsewhere (a refresh in the worker, a hub agent's card, another API process), and, bounded, before a search
 * whose tenant still has cards waiting (`catchUp`), so an agent registered a moment before a query is ranked by
 * meaning too. A registration never waits on any of it.
 */
import type { Pool } from 'pg';
import { cardText, EMBED_BATCH, type Embeddings, textHash } from './embeddings';
import type { AgentCardJson } from './cards';

// A claim lasts this long: an embedder that died holding rows frees them for another after it.
const CLAIM_SECONDS = 60;
// Background batches may take longer than a query's wait: a CPU-bound model embeds 32 cards in seconds.
const BATCH_TIMEOUT_MS = 30_000;
const POLL_MS = 5_000;
// How many cards a search embeds for its tenant before it ranks: enough for any registration burst a person makes.
const CATCH_UP_CARDS = 4 * EMBED_BATCH;

interface Claimed {
  tenant: string;
  agent_id: string;
  /** As text: a JS Date would drop the microseconds the delete compares. */
  queued_at: string;
  name: string;
  card: AgentCardJson;
  text_hash: string | null;
}

export class CardEmbedder {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  private indexedDims = new Set<number>();
  private pgvector: Promise<boolean> | undefined;

  constructor(
    private readonly pool: Pool,
    readonly embeddings: Embeddings,
    private readonly log?: { warn(obj: object, msg: string): void },
  ) {}

  /** Queues the cards that have no vector of the current model (the first start with it, or a changed model), then drains the queue now and every few seconds. */
  async start(): Promise<void> {
    await this.pool.query(
      `INSERT INTO agent_embed_queue (tenant, agent_id)
       SELECT a.tenant, a.id FROM agents a
        WHERE NOT EXISTS (SELECT 1 FROM agent_embeddings e WHERE e.tenant = a.tenant AND e.agent_id = a.id AND e.model = $1)
       ON CONFLICT DO NOTHING`,
      [this.embeddings.model],
    );
    this.timer = setInterval(() => this.kick(), POLL_MS);
    this.timer.unref();
    this.kick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    await this.running;
  }

  /** Drains the queue in the background (a drain already under way goes round once more). */
  kick(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = (async () => {
      do {
        this.again = false;
        try {
          while (!this.stopped && (await this.batch(undefined, EMBED_BATCH, BATCH_TIMEOUT_MS)) > 0);
        } catch (err) {
          // The rows stay queued (their claim lapses): the next poll tries again.
          this.log?.warn({ err }, 'embedding agent cards failed; they stay queued');
        }
      } while (this.again && !this.stopped);
    })().finally(() => (this.running = undefined));
  }

  /**
   * Embeds the tenant's queued cards before a search ranks, waiting at most `waitMs` (rows another embedder holds
   * are waited for, not taken).
   * @returns whether none is left waiting.
   */
  async catchUp(tenant: string, waitMs: number): Promise<boolean> {
    const deadline = Date.now() + waitMs;
    let embedded = 0;
    while (Date.now() < deadline) {
      const { rows } = await this.pool.query<{ n: number; free: number }>(
        `SELECT count(*)::int AS n, count(*) FILTER (WHERE claimed_until IS NULL OR claimed_until < now())::int AS free
           FROM (SELECT claimed_until FROM agent_embed_queue WHERE tenant = $1 LIMIT ${CATCH_UP_CARDS + 1}) q`,
        [tenant],
      );
      const { n, free } = rows[0]!;
      if (n === 0) return true;
      // Many cards waiting (a changed model, a bulk import): the background drains them; ranking goes on with what is stored.
      if (n > CATCH_UP_CARDS || embedded >= CATCH_UP_CARDS) return false;
      if (free > 0) embedded += await this.batch(tenant, EMBED_BATCH, Math.max(1, deadline - Date.now()));
      else await new Promise((r) => setTimeout(r, 25));
    }
    return false;
  }

  /**
   * Claims up to `limit` queued cards (of one tenant, or any), embeds those whose text changed, stores the vectors
   * and deletes the rows not queued again meanwhile.
   * @returns how many rows were claimed (0: the queue has none free).
   */
  private async batch(tenant: string | undefined, limit: number, timeoutMs: number): Promise<number> {
    const { rows } = await this.pool.query<Claimed>(
      `WITH free AS (
         SELECT tenant, agent_id FROM agent_embed_queue
          WHERE (claimed_until IS NULL OR claimed_until < now()) AND ($3::text IS NULL OR tenant = $3)
          ORDER BY queued_at LIMIT $1 FOR UPDATE SKIP LOCKED
       ), claimed AS (
         UPDATE agent_embed_queue q SET claimed_until = now() + make_interval(secs => $2)
           FROM free WHERE q.tenant = free.tenant AND q.agent_id = free.agent_id
         RETURNING q.tenant, q.agent_id, q.queued_at
       )
       SELECT c.tenant, c.agent_id, c.queued_at::text AS queued_at, a.name, a.card, e.text_hash
         FROM claimed c JOIN agents a ON a.tenant = c.tenant AND a.id = c.agent_id
         LEFT JOIN agent_embeddings e ON e.tenant = c.tenant AND e.agent_id = c.agent_id AND e.model = $4`,
      [limit, CLAIM_SECONDS, tenant ?? null, this.embeddings.model],
    );
    if (rows.length === 0) return 0;
    const texts = rows.map((r) => cardText(r.name, r.card));
    const hashes = texts.map(textHash);
    // A card whose text is what was embedded (a refresh that changed only its signature or URLs) is not sent again.
    const todo = rows.map((r, i) => ({ r, text: texts[i]!, hash: hashes[i]! })).filter((x) => x.r.text_hash !== x.hash);
    let vectors: number[][] = [];
    try {
      if (todo.length) vectors = await this.embeddings.embed(todo.map((x) => x.text), timeoutMs);
    } catch (err) {
      // Free the rows at once: once the service is back, the next search or poll takes them, not a minute later.
      await this.pool.query(
        `UPDATE agent_embed_queue q SET claimed_until = NULL FROM unnest($1::text[], $2::text[], $3::timestamptz[]) AS u(t, a, at)
          WHERE q.tenant = u.t AND q.agent_id = u.a AND q.queued_at = u.at`,
        [rows.map((r) => r.tenant), rows.map((r) => r.agent_id), rows.map((r) => r.queued_at)],
      );
      throw err;
    }
    if (vectors.length) await this.ensureIndex(vectors[0]!.length);
    await this.pool.query(
      `INSERT INTO agent_embeddings (tenant, agent_id, model, text_hash, vector)
       SELECT t, a, $1, h, translate(v, '[]', '{}')::float4[] FROM unnest($2::text[], $3::text[], $4::text[], $5::text[]) AS u(t, a, h, v)
       ON CONFLICT (tenant, agent_id) DO UPDATE SET model = EXCLUDED.model, text_hash = EXCLUDED.text_hash, vector = EXCLUDED.vector, embedded_at = now()`,
      [this.embeddings.model, todo.map((x) => x.r.tenant), todo.map((x) => x.r.agent_id), todo.map((x) => x.hash), vectors.map((v) => JSON.stringify(v))],
    );
    await this.pool.query(
      `DELETE FROM agent_embed_queue q USING unnest($1::text[], $2::text[], $3::timestamptz[]) AS u(t, a, at)
        WHERE q.tenant = u.t AND q.agent_id = u.a AND q.queued_at = u.at`,
      [rows.map((r) => r.tenant), rows.map((r) => r.agent_id), rows.map((r) => r.queued_at)],
    );
    return rows.length;
  }

  /**
   * Where pgvector is installed: an HNSW index for vectors of this length (a model's vectors all have one). Not
   * exercised by the tests here, whose PostgreSQL has no pgvector (docs/limits.md).
   */
  private async ensureIndex(dims: number): Promise<void> {
    if (this.indexedDims.has(dims) || !(await this.hasPgvector())) return;
    this.indexedDims.add(dims);
    await this.pool.query(
      `CREATE INDEX IF NOT EXISTS agent_embeddings_hnsw_${dims} ON agent_embeddings USING hnsw ((vector::vector(${dims})) vector_cosine_ops) WHERE dims = ${dims}`,
    ).catch((err: Error) => this.log?.warn({ err }, 'pgvector: the HNSW index could not be made; semantic ranking scans'));
  }

  /** Whether the database has pgvector (migration 037 creates it where it can). */
  hasPgvector(): Promise<boolean> {
    this.pgvector ??= this.pool.query("SELECT 1 FROM pg_extension WHERE extname = 'vector'").then((r) => (r.rowCount ?? 0) > 0);
    return this.pgvector;
  }
}
