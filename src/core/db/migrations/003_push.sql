-- Push-notification configs (A2A §1.12): one row per webhook a client attached to a task. The row is also the
-- delivery cursor: `delivered_seq` is the last task_events.seq the webhook acknowledged with a 2xx, so a
-- retried or restarted delivery resumes exactly after it.
CREATE TABLE push_configs (
  tenant          text        NOT NULL,
  task_id         text        NOT NULL,
  config_id       text        NOT NULL,
  -- The dialect the config was created in decides the webhook body: 1.0 StreamResponse or bare 0.3 event.
  dialect         text        NOT NULL CHECK (dialect IN ('1.0', '0.3')),
  url             text        NOT NULL,
  token           text,
  -- {scheme, credentials?}; for the HMAC-SHA256 scheme only {scheme}: its secret lives in hmac_secret.
  authentication  jsonb,
  hmac_secret     text,
  delivered_seq   bigint      NOT NULL DEFAULT 0 CHECK (delivered_seq >= 0),
  attempts        bigint      NOT NULL DEFAULT 0,
  failures        bigint      NOT NULL DEFAULT 0,
  deliveries      bigint      NOT NULL DEFAULT 0,
  last_attempt_at timestamptz,
  last_success_at timestamptz,
  last_error      text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, task_id, config_id)
);

-- The gateway's keys for signing webhook deliveries (ES256 JWTs), published at /.well-known/jwks.json.
-- At most one active key per purpose: the partial unique index is what lets several processes race to create
-- it with INSERT … ON CONFLICT DO NOTHING and all end up with the same key. Retiring a key (setting
-- retired_at) makes room for the next one while the old one can stay published for late verifiers.
CREATE TABLE signing_keys (
  kid         text        PRIMARY KEY,
  purpose     text        NOT NULL,
  private_jwk jsonb       NOT NULL,
  public_jwk  jsonb       NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  retired_at  timestamptz
);
CREATE UNIQUE INDEX signing_keys_one_active ON signing_keys (purpose) WHERE retired_at IS NULL;
