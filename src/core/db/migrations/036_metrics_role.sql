-- Role `metrics` (issue 41): a Prometheus scraper's key, which reads GET /metrics and nothing else. Like every
-- non-admin key it belongs to a tenant. Replacing the CHECK reads api_keys once (a few rows) under a brief lock.
ALTER TABLE api_keys DROP CONSTRAINT api_keys_role_check;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_role_check CHECK (role IN ('admin', 'operator', 'client', 'agent', 'metrics'));
