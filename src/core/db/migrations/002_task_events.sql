-- The append-only event log of every task: each event a client can receive (1.0 StreamResponse JSON),
-- numbered per task. It is written before the event is sent to anyone; SSE ids and Last-Event-ID are `seq`.
CREATE TABLE task_events (
  tenant     text        NOT NULL,
  task_id    text        NOT NULL,
  seq        bigint      NOT NULL CHECK (seq > 0),
  -- The writer's idempotency key: a retried write of the same event is a no-op.
  event_key  text        NOT NULL,
  kind       text        NOT NULL CHECK (kind IN ('task', 'statusUpdate', 'artifactUpdate')),
  event      jsonb       NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, task_id, seq),
  UNIQUE (tenant, task_id, event_key)
);

-- The last sequence number of each task. Writers lock this row, so numbers are gapless and in commit order.
CREATE TABLE task_event_heads (
  tenant   text   NOT NULL,
  task_id  text   NOT NULL,
  last_seq bigint NOT NULL,
  PRIMARY KEY (tenant, task_id)
);

-- Which task a client's first message started: a resent message (same messageId) finds its task again
-- instead of starting a second one.
CREATE TABLE message_tasks (
  tenant     text        NOT NULL,
  message_id text        NOT NULL,
  task_id    text        NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, message_id)
);
