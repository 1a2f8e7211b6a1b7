-- Registered agents: their fetched card and how Switchboard calls them.
CREATE TABLE agents (
  tenant           text        NOT NULL,
  id               text        NOT NULL,
  name             text        NOT NULL,
  source_url       text        NOT NULL,
  card_url         text        NOT NULL,
  card             jsonb       NOT NULL,
  endpoint_url     text        NOT NULL,
  protocol_version text        NOT NULL CHECK (protocol_version IN ('1.0', '0.3')),
  streaming        boolean     NOT NULL DEFAULT false,
  price_minor      bigint      NOT NULL DEFAULT 0 CHECK (price_minor >= 0),
  retry            jsonb       NOT NULL DEFAULT '{}'::jsonb,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, id)
);

-- The task projection: the workflow writes every state change here (newest version wins), so tasks stay
-- readable and listable after Temporal's retention has removed the workflow.
CREATE TABLE tasks (
  tenant           text        NOT NULL,
  task_id          text        NOT NULL,
  context_id       text        NOT NULL,
  agent_id         text        NOT NULL,
  state            text        NOT NULL,
  status_timestamp timestamptz NOT NULL,
  version          integer     NOT NULL,
  task             jsonb       NOT NULL,
  created_at       timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, task_id)
);
-- ListTasks: newest status first, cursor on (status_timestamp, task_id).
CREATE INDEX tasks_by_status_time ON tasks (tenant, status_timestamp DESC, task_id DESC);
CREATE INDEX tasks_by_context ON tasks (tenant, context_id, status_timestamp DESC, task_id DESC);

-- One settlement per task, whatever retries happen: the unique key is the idempotency key.
CREATE TABLE settlements (
  id           bigserial   PRIMARY KEY,
  tenant       text        NOT NULL,
  task_id      text        NOT NULL,
  agent_id     text        NOT NULL,
  requester    text        NOT NULL,
  final_state  text        NOT NULL,
  amount_minor bigint      NOT NULL CHECK (amount_minor >= 0),
  created_at   timestamptz NOT NULL DEFAULT now(),
  UNIQUE (tenant, task_id)
);

-- Double-entry ledger: each settlement debits the requester and credits the agent; entries sum to zero.
CREATE TABLE ledger_entries (
  id            bigserial   PRIMARY KEY,
  settlement_id bigint      NOT NULL REFERENCES settlements (id),
  tenant        text        NOT NULL,
  account       text        NOT NULL,
  amount_minor  bigint      NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  UNIQUE (settlement_id, account)
);
CREATE INDEX ledger_by_account ON ledger_entries (tenant, account);
