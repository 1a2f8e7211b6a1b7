-- NANDA actions (issue 12): Switchboard as a certifier (capability evaluations, W3C Verifiable Credentials and
-- their Bitstring Status List), governance policies, and the per-agent index that work health reads.

-- A capability evaluation of a registered agent: one certification workflow (workflowId = 'certification:' || id).
CREATE TABLE certifications (
  tenant      text        NOT NULL,
  id          text        NOT NULL,
  agent_id    text        NOT NULL,
  state       text        NOT NULL CHECK (state IN ('running', 'passed', 'failed')),
  -- Passed probes / probes, once finished.
  score       real,
  -- One entry per probe: the skill, the example sent, the task state the agent reached, pass or not.
  results     jsonb       NOT NULL DEFAULT '[]'::jsonb,
  requested_by text       NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz,
  PRIMARY KEY (tenant, id)
);

-- W3C Bitstring Status List (https://www.w3.org/TR/vc-bitstring-status-list/): one row per list, its bits in
-- one bytea. A revocation is `UPDATE … SET bits = set_bit(bits, …)`: concurrent revocations of one list queue on
-- the row lock and each re-reads the row it updates, so none is lost; nothing ever clears a bit.
CREATE TABLE status_lists (
  id         text        PRIMARY KEY,
  tenant     text        NOT NULL,
  -- Entries in the list (the spec's minimum is 131,072: enough for herd privacy).
  size       integer     NOT NULL CHECK (size >= 131072 AND size % 8 = 0),
  bits       bytea       NOT NULL,
  -- Indexes given out so far. Each credential's index is random (so an index says nothing about when or to whom
  -- it was issued); a list takes new credentials until half of it is given out, so a random pick rarely collides.
  allocated  integer     NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CHECK (octet_length(bits) * 8 = size AND allocated BETWEEN 0 AND size)
);
CREATE INDEX status_lists_open ON status_lists (tenant, created_at) WHERE allocated < size / 2;

-- Issued credentials: each has its own index in one status list, allocated once (the unique key makes a random
-- pick that collides pick again).
CREATE TABLE credentials (
  tenant           text        NOT NULL,
  id               text        NOT NULL,
  agent_id         text        NOT NULL,
  certification_id text        NOT NULL,
  list_id          text        NOT NULL REFERENCES status_lists (id),
  list_index       integer     NOT NULL,
  credential       jsonb       NOT NULL,
  jwt              text        NOT NULL,
  issued_at        timestamptz NOT NULL DEFAULT now(),
  revoked_at       timestamptz,
  revocation_reason text,
  PRIMARY KEY (tenant, id),
  UNIQUE (list_id, list_index),
  -- One credential per passed evaluation: asking again returns the one issued.
  UNIQUE (tenant, certification_id)
);

-- Governance rules for the tenant's agents; an enforced policy applies at routing and at task start.
CREATE TABLE policies (
  tenant     text        NOT NULL,
  id         text        NOT NULL,
  name       text        NOT NULL,
  rules      jsonb       NOT NULL,
  enforced   boolean     NOT NULL DEFAULT false,
  created_by text        NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, id),
  UNIQUE (tenant, name)
);

-- Work health reads each agent's most recent terminal tasks from the projection.
CREATE INDEX tasks_by_agent_time ON tasks (tenant, agent_id, status_timestamp DESC);
