-- The WebSocket hub (GET /hub): agents behind NAT connect out and get their turns over the socket.
-- Which process holds each agent's socket now: the Temporal task queue only that process's hub worker polls.
-- A reconnect (to any process) replaces the row; a closed socket deletes it only if it is still its own.
CREATE TABLE hub_connections (
  tenant        text        NOT NULL,
  agent_id      text        NOT NULL,
  connection_id text        NOT NULL,
  task_queue    text        NOT NULL,
  connected_at  timestamptz NOT NULL DEFAULT now(),
  -- Renewed by the holding process while the socket lives: a row past it belongs to a process that died (kill -9
  -- runs no cleanup), and turns are not routed to its queue.
  expires_at    timestamptz NOT NULL,
  PRIMARY KEY (tenant, agent_id)
);

-- One turn sent to a hub agent, keyed by the task and the client message it carries, so that whichever
-- process or activity attempt handles it knows how far it got: pending (not yet sent), sent (written to a
-- socket, not yet acknowledged), acked (the agent answered the request: never sent again), done (the agent
-- reported the turn's outcome, kept in `result`, which any process may have received).
CREATE TABLE hub_turns (
  tenant     text        NOT NULL,
  task_id    text        NOT NULL,
  message_id text        NOT NULL,
  agent_id   text        NOT NULL,
  context_id text        NOT NULL,
  state      text        NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sent', 'acked', 'done')),
  result     jsonb,
  -- The artifacts the agent sent with task.artifact so far (any process may have received them).
  artifacts  jsonb       NOT NULL DEFAULT '[]',
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, task_id, message_id)
);
-- The agent's updates name the task only: its open turn is found by (tenant, agent, task).
CREATE INDEX hub_turns_open ON hub_turns (tenant, agent_id, task_id) WHERE state <> 'done';
