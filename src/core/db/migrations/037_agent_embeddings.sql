-- Hybrid search (issue 42): each agent card's embedding from the configured model service, beside the full-text
-- document of migration 004, and the queue of cards waiting to be embedded.

-- One vector per agent, for the model that made it. A plain float4[] works on every PostgreSQL (the embedded one
-- and the machine's have no pgvector); where pgvector is installed, an HNSW index over `vector::vector(dims)` is
-- added at start for the model's dimension (src/core/agents/card-embedder.ts), so both paths read the same column.
-- Vectors are stored at unit length: cosine similarity is their dot product.
CREATE TABLE agent_embeddings (
  tenant      text        NOT NULL,
  agent_id    text        NOT NULL,
  model       text        NOT NULL,
  -- sha256 of the embedded text (name, description, skills): a refreshed card whose text is the same is not sent again.
  text_hash   text        NOT NULL,
  vector      float4[]    NOT NULL,
  dims        integer     GENERATED ALWAYS AS (cardinality(vector)) STORED,
  embedded_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, agent_id),
  FOREIGN KEY (tenant, agent_id) REFERENCES agents (tenant, id) ON DELETE CASCADE
);

-- Cards to embed: a row per agent registered, or whose name or card changed, until its vector for the current
-- model is stored. The trigger writes it in the registering transaction, so no card is missed whichever process
-- (API, refresh worker, hub) changed it; an embedder claims rows for a while (claimed_until) and deletes a row
-- only if it was not queued again meanwhile (queued_at unchanged).
CREATE TABLE agent_embed_queue (
  tenant        text        NOT NULL,
  agent_id      text        NOT NULL,
  queued_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
  claimed_until timestamptz,
  PRIMARY KEY (tenant, agent_id),
  FOREIGN KEY (tenant, agent_id) REFERENCES agents (tenant, id) ON DELETE CASCADE
);
CREATE INDEX agent_embed_queue_by_time ON agent_embed_queue (queued_at);

CREATE FUNCTION queue_agent_embedding() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO agent_embed_queue (tenant, agent_id) VALUES (NEW.tenant, NEW.id)
    ON CONFLICT (tenant, agent_id) DO UPDATE SET queued_at = clock_timestamp(), claimed_until = NULL;
  RETURN NULL;
END $$;
CREATE TRIGGER agents_queue_embedding_insert AFTER INSERT ON agents FOR EACH ROW EXECUTE FUNCTION queue_agent_embedding();
-- Probes rewrite the row often; only a change of what is embedded queues it.
CREATE TRIGGER agents_queue_embedding_update AFTER UPDATE OF name, card ON agents FOR EACH ROW
  WHEN (OLD.name IS DISTINCT FROM NEW.name OR OLD.card IS DISTINCT FROM NEW.card) EXECUTE FUNCTION queue_agent_embedding();

-- Cosine similarity of two unit vectors, where pgvector is absent: their dot product. A plpgsql loop over the
-- subscripts measured 1.7 times faster than `sum(x * y) FROM unnest(a, b)`, and still ~80 µs a vector of 384
-- dimensions on the bench box: too slow to score every card of a large tenant, so it only rescores the nearest
-- few hundred by the bits below.
CREATE FUNCTION embedding_similarity(a float4[], b float4[]) RETURNS float8 LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
  s float8 := 0;
BEGIN
  IF cardinality(a) <> cardinality(b) THEN
    RETURN NULL;
  END IF;
  FOR i IN 1 .. cardinality(a) LOOP
    s := s + a[i] * b[i];
  END LOOP;
  RETURN s;
END $$;

-- The vector's signs, one bit a dimension (binary quantization): the Hamming distance of two such strings,
-- bit_count(a # b), is computed in C at a few hundred nanoseconds a card, and orders cards roughly as cosine
-- similarity does. The plain path takes the nearest by it, then rescores those exactly (src/core/agents/search.ts).
CREATE FUNCTION embedding_bits(v float4[]) RETURNS varbit LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT string_agg(CASE WHEN x > 0 THEN '1' ELSE '0' END, '' ORDER BY i)::varbit FROM unnest(v) WITH ORDINALITY AS u(x, i)
$$;
ALTER TABLE agent_embeddings ADD COLUMN bits varbit GENERATED ALWAYS AS (embedding_bits(vector)) STORED;
-- The first step reads this, not the table: 48 bytes of bits a card instead of its 1.5 KB vector (384 dimensions).
CREATE INDEX agent_embeddings_bits ON agent_embeddings (tenant, model, dims) INCLUDE (agent_id, bits);

-- pgvector when the server has it (the compose file's image does); nothing when it has not, or the role may not
-- create extensions: the plain column above ranks the same, by a scan.
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector') THEN
    CREATE EXTENSION IF NOT EXISTS vector;
  END IF;
EXCEPTION WHEN insufficient_privilege THEN
  RAISE NOTICE 'pgvector is available but this role may not create it: semantic ranking scans the plain column';
END $$;

-- Which rank chose a routed agent: full-text, semantic, or both (hybrid); null for metadata routes and for routes
-- recorded before this migration.
ALTER TABLE task_routes ADD COLUMN ranked_by text CHECK (ranked_by IN ('full-text', 'semantic', 'both'));
