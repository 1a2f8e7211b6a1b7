-- Genesis Nexus envelopes (POST /genesis/messages): each agent's signing secret, the envelopes seen (replay
-- protection and the answers given), topic subscriptions, and the deliveries of published events.

-- An agent's Genesis secret (HMAC-SHA256 signatures, and the AES-256-GCM pair keys derived from it), sealed
-- like agent_credentials (AES-256-GCM under SWITCHBOARD_SECRETS_KEY, tenant and agent bound in).
CREATE TABLE genesis_secrets (
  tenant     text        NOT NULL,
  agent_id   text        NOT NULL,
  key_id     text        NOT NULL,
  sealed     bytea       NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, agent_id),
  FOREIGN KEY (tenant, agent_id) REFERENCES agents (tenant, id) ON DELETE CASCADE
);

-- One row per envelope id accepted: a replay within `remember_until` is answered with `answer` and applies
-- nothing. `answer` is NULL while the first one is still being handled. `task_id` for a COMMAND, `response`
-- for the RESPONSE an agent posted to it.
CREATE TABLE genesis_messages (
  tenant         text        NOT NULL,
  id             text        NOT NULL,
  type           text        NOT NULL,
  from_agent     text        NOT NULL,
  to_agent       text        NOT NULL,
  encrypted      boolean     NOT NULL,
  -- The envelope as it was applied (decrypted): EVENT deliveries send it.
  envelope       jsonb       NOT NULL,
  expires_at     timestamptz,
  remember_until timestamptz NOT NULL,
  task_id        text,
  answer         jsonb,
  response       jsonb,
  created_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, id)
);
CREATE INDEX genesis_messages_forget ON genesis_messages (remember_until);

CREATE TABLE genesis_subscriptions (
  id         text        PRIMARY KEY,
  tenant     text        NOT NULL,
  agent_id   text        NOT NULL,
  event_type text        NOT NULL,
  url        text        NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (tenant, agent_id, event_type, url),
  FOREIGN KEY (tenant, agent_id) REFERENCES agents (tenant, id) ON DELETE CASCADE
);
CREATE INDEX genesis_subscriptions_by_topic ON genesis_subscriptions (tenant, event_type);

-- One row per (event, subscriber): how its delivery stands.
CREATE TABLE genesis_deliveries (
  tenant          text        NOT NULL,
  message_id      text        NOT NULL,
  subscription_id text        NOT NULL,
  status          text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed', 'expired')),
  attempts        integer     NOT NULL DEFAULT 0,
  last_error      text,
  delivered_at    timestamptz,
  PRIMARY KEY (tenant, message_id, subscription_id)
);
