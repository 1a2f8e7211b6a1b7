-- Incremental reconcile (issue 31): GET /ledger/reconcile checks what changed since its last clean run (tasks that
-- ended, settlements made, movements written since) instead of the whole tenant; `?full=true` still checks all.

-- Per tenant: where the last clean run's window ended (the next one starts a little before it), and how far the
-- ledger's entries have been summed into reconcile_sums.
CREATE TABLE reconcile_runs (
  tenant          text        PRIMARY KEY,
  checked_at      timestamptz,
  entries_through timestamptz NOT NULL DEFAULT '-infinity'
);

-- Per account: the sums of its ledger entries written before reconcile_runs.entries_through. An account's balance is
-- checked against these plus the entries after (few), not against all its entries.
CREATE TABLE reconcile_sums (
  tenant       text   NOT NULL,
  account      text   NOT NULL,
  amount_minor bigint NOT NULL,
  held_minor   bigint NOT NULL,
  PRIMARY KEY (tenant, account)
);

-- The windowed checks' ways in: settlements and ledger entries by time within a tenant.
CREATE INDEX settlements_by_time ON settlements (tenant, created_at);
CREATE INDEX ledger_by_time ON ledger_entries (tenant, created_at);

-- ListTasks by state (growth bench, docs/growth.md): with only (tenant, status_timestamp) to go by, a state that is
-- rare in a large tenant made the first page read every task of the tenant to find 50 (or none).
CREATE INDEX tasks_by_state ON tasks (tenant, state, status_timestamp DESC, task_id DESC);
