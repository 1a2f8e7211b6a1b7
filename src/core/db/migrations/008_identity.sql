-- Who is calling (issue 14): tenants, their API keys, outbound credentials for agents, and the audit trail.
-- Every existing row already names tenant 'default', so an upgraded database keeps working: the tenant is
-- created here and every old task, agent and account belongs to it.

CREATE TABLE tenants (
  id         text        PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$'),
  name       text        NOT NULL,
  -- Per-tenant quotas; NULL means the process default (SWITCHBOARD_QUOTA_*). 0 is a real limit (nothing allowed).
  quotas     jsonb       NOT NULL DEFAULT '{}'::jsonb,
  created_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO tenants (id, name) VALUES ('default', 'Default tenant');

-- API keys. Only a SHA-256 hash of the key is kept (keys carry 32 random bytes, so a fast hash is enough);
-- the key itself is shown once, when it is created. An admin key has no tenant of its own (tenant NULL).
CREATE TABLE api_keys (
  id           text        PRIMARY KEY,
  tenant       text        REFERENCES tenants (id),
  role         text        NOT NULL CHECK (role IN ('admin', 'operator', 'client', 'agent')),
  -- For role 'agent': the registered agent this key speaks for.
  agent_id     text,
  name         text        NOT NULL,
  key_hash     bytea       NOT NULL UNIQUE,
  -- Requests per second for this key (NULL: the tenant's, then the process default).
  rate_limit   integer,
  expires_at   timestamptz,
  revoked_at   timestamptz,
  created_at   timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz,
  CHECK ((role = 'agent') = (agent_id IS NOT NULL)),
  CHECK (role = 'admin' OR tenant IS NOT NULL)
);
CREATE INDEX api_keys_by_tenant ON api_keys (tenant, created_at);

-- Outbound credentials Switchboard uses to call an agent: a sealed JSON document (AES-256-GCM under the key
-- named by key_id). Only activities and the registry read it, to build request headers; no API returns it.
CREATE TABLE agent_credentials (
  tenant     text        NOT NULL,
  agent_id   text        NOT NULL,
  kind       text        NOT NULL CHECK (kind IN ('bearer', 'apiKey', 'oauth2')),
  key_id     text        NOT NULL,
  sealed     bytea       NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, agent_id),
  FOREIGN KEY (tenant, agent_id) REFERENCES agents (tenant, id) ON DELETE CASCADE
);

-- Every mutation by an admin or operator: who, in which tenant, what, on what, when, in which request.
CREATE TABLE audit_log (
  id         bigserial   PRIMARY KEY,
  at         timestamptz NOT NULL DEFAULT now(),
  tenant     text,
  actor      text        NOT NULL,
  role       text        NOT NULL,
  action     text        NOT NULL,
  target     text,
  status     integer     NOT NULL,
  request_id text        NOT NULL
);
CREATE INDEX audit_by_tenant ON audit_log (tenant, id DESC);

-- Quotas (src/core/auth/quotas.ts): new tasks per tenant and UTC day, counted in the claim's transaction; open
-- tasks counted from the projection's non-terminal rows (a partial index keeps that to the open ones) plus
-- claims the projection has not recorded yet (recent message_tasks rows).
CREATE TABLE tenant_daily_tasks (
  tenant text    NOT NULL,
  day    date    NOT NULL,
  count  integer NOT NULL,
  PRIMARY KEY (tenant, day)
);
CREATE INDEX tasks_open ON tasks (tenant)
  WHERE state NOT IN ('TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED');
CREATE INDEX message_tasks_by_time ON message_tasks (tenant, created_at);

-- Public agent cards are found by agent id alone (a card is a discovery document, readable without a key), so
-- ids are unique across tenants; they always were in practice (a name slug plus random hex).
CREATE UNIQUE INDEX agents_id_unique ON agents (id);

-- The agent a task runs on, known from the moment its first message is claimed (the projection records it
-- only once the workflow runs): a per-agent endpoint answers only for its own agent's tasks.
ALTER TABLE message_tasks ADD COLUMN agent_id text;
CREATE INDEX message_tasks_by_task ON message_tasks (tenant, task_id);
