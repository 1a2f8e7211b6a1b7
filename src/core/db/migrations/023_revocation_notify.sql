-- Revoking a key, deleting an agent or a tenant ends, in every process, what their callers hold open (SSE and
-- gRPC streams, hub sockets: src/core/auth/credential-watch.ts) and drops the key from every process's key cache
-- (src/core/auth/keys.ts). Whoever makes the change (DELETE /tenants/:id/keys/:keyId, DELETE /agents/:id, a hand-run
-- UPDATE or DELETE) tells every process at commit on migration 018's channel.
-- Payloads: {"kind":"api_keys","tenant":…,"id":<the key's id>} and {"kind":"tenants","tenant":<its id>,"id":null}.

-- A deleted agent's keys spoke for it alone: they are revoked with it (all of them, in its transaction), so no
-- process accepts them again, and a later agent of the same id does not bring them back.
CREATE FUNCTION switchboard_revoke_agent_keys() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE api_keys SET revoked_at = now() WHERE tenant = OLD.tenant AND agent_id = OLD.id AND revoked_at IS NULL;
  RETURN NULL;
END
$$;

CREATE TRIGGER agents_revoke_keys AFTER DELETE ON agents
  FOR EACH ROW EXECUTE FUNCTION switchboard_revoke_agent_keys();

CREATE FUNCTION switchboard_key_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  v_row record := CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
BEGIN
  PERFORM pg_notify('switchboard_config', json_build_object('kind', 'api_keys', 'tenant', v_row.tenant, 'id', v_row.id)::text);
  RETURN NULL;
END
$$;

-- Not last_used_at (written once a minute per key in use): only what decides whether a key is accepted.
CREATE TRIGGER api_keys_config_changed AFTER UPDATE OF revoked_at, expires_at, role, tenant, agent_id OR DELETE ON api_keys
  FOR EACH ROW EXECUTE FUNCTION switchboard_key_changed();

CREATE FUNCTION switchboard_tenant_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('switchboard_config', json_build_object('kind', 'tenants', 'tenant', OLD.id, 'id', NULL)::text);
  RETURN NULL;
END
$$;

CREATE TRIGGER tenants_deleted AFTER DELETE ON tenants
  FOR EACH ROW EXECUTE FUNCTION switchboard_tenant_deleted();
