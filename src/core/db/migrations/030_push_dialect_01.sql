-- A2A 0.1 clients' push configs (`tasks/pushNotification/set`, or `pushNotification` on `tasks/send`) receive 0.1's
-- webhook bodies (`{id, status, final}` / `{id, artifact}`), so a config's dialect may also be 0.1.
ALTER TABLE push_configs DROP CONSTRAINT IF EXISTS push_configs_dialect_check;
ALTER TABLE push_configs ADD CONSTRAINT push_configs_dialect_check CHECK (dialect IN ('1.0', '0.3', '0.1'));
