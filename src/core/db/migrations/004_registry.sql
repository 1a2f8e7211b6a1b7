-- A registry that stays true (issue 4): each agent's health from liveness probes, how its card may be cached,
-- whether its card signature verified, and a full-text search document kept in the row.

ALTER TABLE agents
  -- healthy / degraded / down, why, and since when. An agent registered before this migration starts healthy
  -- with no reason; its first probe sets both.
  ADD COLUMN status               text        NOT NULL DEFAULT 'healthy' CHECK (status IN ('healthy', 'degraded', 'down')),
  ADD COLUMN status_reason        text        NOT NULL DEFAULT '',
  ADD COLUMN status_changed_at    timestamptz NOT NULL DEFAULT now(),
  -- Failed endpoint probes in a row; the status turns down when it reaches the configured threshold.
  ADD COLUMN consecutive_failures integer     NOT NULL DEFAULT 0,
  -- The last probe: {at, ok, latencyMs, endpoint: {ok, latencyMs, error?}, card: {outcome, latencyMs?, error?}}.
  ADD COLUMN last_probe           jsonb,
  -- HTTP caching of the agent's card (A2A 1.0 §8.6): the validator for If-None-Match, and until when the stored
  -- card is fresh (NULL = revalidate on every refresh). no-store forbids a conditional request.
  ADD COLUMN card_etag            text,
  ADD COLUMN card_no_store        boolean     NOT NULL DEFAULT false,
  ADD COLUMN card_fetched_at      timestamptz NOT NULL DEFAULT now(),
  ADD COLUMN card_fresh_until     timestamptz,
  -- The JWS check of the card's `signatures`: {status: verified|unsigned|invalid, reason?, kid?, alg?, keyUrl?, checkedAt}.
  ADD COLUMN signature            jsonb       NOT NULL DEFAULT '{"status": "unsigned"}'::jsonb,
  -- The search document, weighted as `GET /agents?q=` ranks it: the agent's name (A), skill names and tags (B),
  -- the card's and the skills' descriptions (C), skill examples (D). A generated column is recomputed by
  -- PostgreSQL on every write of name or card, so it can never go stale; 'english' stems ("booking" finds "book").
  ADD COLUMN search tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('english', name), 'A')
    || setweight(jsonb_to_tsvector('english', jsonb_path_query_array(card, '$.skills[*].name')
                                               || jsonb_path_query_array(card, '$.skills[*].tags[*]'), '["string"]'), 'B')
    || setweight(jsonb_to_tsvector('english', jsonb_path_query_array(card, '$.description')
                                               || jsonb_path_query_array(card, '$.skills[*].description'), '["string"]'), 'C')
    || setweight(jsonb_to_tsvector('english', jsonb_path_query_array(card, '$.skills[*].examples[*]'), '["string"]'), 'D')
  ) STORED,
  -- Filter keys: skill tags lower-cased (a tag filter ignores case), skill ids as published (they are identifiers).
  ADD COLUMN skill_tags jsonb GENERATED ALWAYS AS (lower(jsonb_path_query_array(card, '$.skills[*].tags[*]')::text)::jsonb) STORED,
  ADD COLUMN skill_ids  jsonb GENERATED ALWAYS AS (jsonb_path_query_array(card, '$.skills[*].id')) STORED;

CREATE INDEX agents_search ON agents USING gin (search);
-- jsonb_ops (the default) serves the ?& / ?| key-exists operators the tag and skill filters use.
CREATE INDEX agents_skill_tags ON agents USING gin (skill_tags);
CREATE INDEX agents_skill_ids ON agents USING gin (skill_ids);
CREATE INDEX agents_by_status ON agents (tenant, status);
CREATE INDEX agents_by_created ON agents (tenant, created_at, id);

-- Recent probes of each agent (the refresh keeps the newest 100 per agent): latency and outcome over time.
CREATE TABLE agent_probes (
  id          bigserial   PRIMARY KEY,
  tenant      text        NOT NULL,
  agent_id    text        NOT NULL,
  at          timestamptz NOT NULL,
  ok          boolean     NOT NULL,
  latency_ms  integer,
  status      text        NOT NULL,
  detail      jsonb       NOT NULL,
  FOREIGN KEY (tenant, agent_id) REFERENCES agents (tenant, id) ON DELETE CASCADE
);
CREATE INDEX agent_probes_by_agent ON agent_probes (tenant, agent_id, at DESC, id DESC);
