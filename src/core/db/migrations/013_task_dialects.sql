-- Tasks started in a dialect whose later calls cannot be told from the request alone: a 0.1 or NEXUS `tasks/get`
-- reads exactly like 0.3's, so the call is answered in the dialect its task was started in. Also what such a client
-- sent with the task that it gets back as task metadata (Society AI: requester, executor, skill_used, user_id,
-- chat_id). Written by the front door before the task's workflow starts; the first writer wins.
CREATE TABLE task_dialects (
  tenant     text        NOT NULL,
  task_id    text        NOT NULL,
  dialect    text        NOT NULL CHECK (dialect IN ('0.1', 'nexus')),
  metadata   jsonb       NOT NULL DEFAULT '{}'::jsonb,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, task_id)
);
