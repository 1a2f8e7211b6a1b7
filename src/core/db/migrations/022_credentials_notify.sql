-- Every call to an agent presents its outbound credential (agent_credentials, sealed); each process keeps the
-- sealed rows in a short in-process cache (src/core/agents/agent-credentials.ts) so that a call does not wait for a
-- read first. Whoever changes a row (PUT /agents/:id/credentials, a delete, the cascade of an agent's delete, a
-- hand-run UPDATE) tells every process at commit on migration 018's channel, so a cache drops the row at once,
-- and with it an OAuth token fetched with the old credential.
-- Payload: {"kind":"agent_credentials","tenant":…,"id":<the agent's id>}.
CREATE FUNCTION switchboard_credentials_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  v_row record := CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
BEGIN
  PERFORM pg_notify('switchboard_config', json_build_object('kind', 'agent_credentials', 'tenant', v_row.tenant, 'id', v_row.agent_id)::text);
  RETURN NULL;
END
$$;

CREATE TRIGGER agent_credentials_config_changed AFTER INSERT OR UPDATE OR DELETE ON agent_credentials
  FOR EACH ROW EXECUTE FUNCTION switchboard_credentials_changed();
