-- Hub enrollment (issue 30): an operator mints an enrollment token for a tenant; an agent connects to GET /hub
-- with it and registers itself (agent.register), named as it asks. Only the token's SHA-256 is stored, as for
-- API keys; each registration it makes uses one of its `max_uses`.
CREATE TABLE enrollment_tokens (
  id           text        PRIMARY KEY,
  tenant       text        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  name         text        NOT NULL,
  token_hash   bytea       NOT NULL UNIQUE,
  max_uses     integer     NOT NULL CHECK (max_uses > 0),
  uses         integer     NOT NULL DEFAULT 0 CHECK (uses >= 0),
  expires_at   timestamptz NOT NULL,
  revoked_at   timestamptz,
  created_at   timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz
);
CREATE INDEX enrollment_tokens_by_tenant ON enrollment_tokens (tenant, created_at);

-- A hub agent's cancels wait for it: a task canceled while its agent is not connected is told to the agent
-- (tasks/cancel) when it connects again, to whichever process. `cancel_requested_at`: the task was canceled
-- and the agent had been sent one of its turns; `cancel_told_at`: tasks/cancel was written to its socket.
ALTER TABLE hub_turns ADD COLUMN cancel_requested_at timestamptz, ADD COLUMN cancel_told_at timestamptz;
CREATE INDEX hub_turns_cancels_untold ON hub_turns (tenant, agent_id) WHERE cancel_requested_at IS NOT NULL AND cancel_told_at IS NULL;

-- Whichever way a task ends canceled (a client's cancel, its parent's, Temporal UI's), the turns its hub agent
-- was sent and not yet told of are marked, and every process hears of it on migration 018's channel (kind
-- `hub_cancels`, id: the agent): the one holding the agent's socket tells it at once.
CREATE FUNCTION switchboard_hub_task_canceled() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  v_agent text;
BEGIN
  WITH marked AS (
    UPDATE hub_turns SET cancel_requested_at = now()
     WHERE tenant = NEW.tenant AND task_id = NEW.task_id AND state <> 'pending' AND cancel_told_at IS NULL AND cancel_requested_at IS NULL
    RETURNING agent_id
  )
  SELECT min(agent_id) INTO v_agent FROM marked;
  IF v_agent IS NOT NULL THEN
    PERFORM pg_notify('switchboard_config', json_build_object('kind', 'hub_cancels', 'tenant', NEW.tenant, 'id', v_agent)::text);
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER tasks_hub_canceled AFTER INSERT OR UPDATE OF state ON tasks
  FOR EACH ROW WHEN (NEW.state = 'TASK_STATE_CANCELED') EXECUTE FUNCTION switchboard_hub_task_canceled();
