-- How the routing front door (POST /a2a) chose each task's agent: who asked, who executes, which skill, and
-- why. Written by the front door before the task's workflow starts (the workflow never reads it); a task
-- started at an agent's own endpoint (POST /agents/:id/a2a) has no row: it was asked of that agent directly.
CREATE TABLE task_routes (
  tenant     text        NOT NULL,
  task_id    text        NOT NULL,
  -- The requester account's owner; today the tenant (`requester:<tenant>` pays).
  requester  text        NOT NULL,
  agent_id   text        NOT NULL,
  -- The skill named in the message metadata, or the routed agent's skill that best matched the text (may be null).
  skill_id   text,
  reason     text        NOT NULL CHECK (reason IN ('metadata.agentId', 'metadata.skillId', 'search')),
  -- ts_rank of the winning search match (reason = search), else null.
  rank       real,
  -- The full-text query routing used (reason = search), else null.
  query      text,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, task_id)
);
