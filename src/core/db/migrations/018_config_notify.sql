-- The front door reads agents and enforced policies on every new task; each process keeps them in a short
-- in-process cache (src/core/events/config-cache.ts). Whoever changes a row (the registry, refresh and health
-- probes, the hub, the work-health check, policy actions, deletes, a hand-run UPDATE) tells every process at
-- commit through this channel, so a cache drops the entry at once instead of serving it until its TTL ends.
-- Payload: {"kind":"agents"|"policies","tenant":…,"id":…} (id: the agent's; policies are dropped per tenant).
CREATE FUNCTION switchboard_config_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  v_row record := CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
BEGIN
  PERFORM pg_notify('switchboard_config', json_build_object(
    'kind', TG_TABLE_NAME, 'tenant', v_row.tenant, 'id', CASE WHEN TG_TABLE_NAME = 'agents' THEN v_row.id END)::text);
  RETURN NULL;
END
$$;

CREATE TRIGGER agents_config_changed AFTER INSERT OR UPDATE OR DELETE ON agents
  FOR EACH ROW EXECUTE FUNCTION switchboard_config_changed();
CREATE TRIGGER policies_config_changed AFTER INSERT OR UPDATE OR DELETE ON policies
  FOR EACH ROW EXECUTE FUNCTION switchboard_config_changed();
