-- Retention (issue 31): a task terminal for longer than its tenant's retention (SWITCHBOARD_TASK_RETENTION unless
-- the tenant sets its own) is purged by the retention sweep (activities/retention.ts): its projection row, event
-- log, push configs, hub turns, claims, routing and dialect rows, child links and Genesis envelope ids. The ledger,
-- the trust events and the audit trail are kept whole; a tombstone per purged task lets reconcile tell a purged
-- task's settlement from one whose task never existed.

-- A tenant's own retention (ms); NULL: the process default.
ALTER TABLE tenants ADD COLUMN retention_ms bigint CHECK (retention_ms IS NULL OR retention_ms >= 1000);

-- The sweep's candidates, oldest first, per tenant: only terminal rows are in the index. `updated_at` is the
-- database's clock at the last projection write, which for a terminal task is when it ended.
CREATE INDEX tasks_expiring ON tasks (tenant, updated_at)
  WHERE state IN ('TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED');

-- Genesis envelope ids are found by the task they started, when that task is purged.
CREATE INDEX genesis_messages_by_task ON genesis_messages (tenant, task_id) WHERE task_id IS NOT NULL;

-- One row per purged task: what the ledger's settlement of it is checked against (GET /ledger/reconcile).
CREATE TABLE purged_tasks (
  tenant    text        NOT NULL,
  task_id   text        NOT NULL,
  state     text        NOT NULL,
  ended_at  timestamptz NOT NULL,
  purged_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, task_id)
);

-- Purges the given tasks of a tenant that are still terminal and ended before p_before (a task written since the
-- sweep chose it is left alone), in the caller's transaction: one batch, so the row locks are held briefly.
-- Returns the ids purged.
CREATE FUNCTION switchboard_purge_tasks(p_tenant text, p_task_ids text[], p_before timestamptz)
RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
  v_ids text[];
BEGIN
  WITH gone AS (
    DELETE FROM tasks t
     WHERE t.tenant = p_tenant AND t.task_id = ANY (p_task_ids) AND t.updated_at < p_before
       AND t.state IN ('TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED')
    RETURNING t.task_id, t.state, t.updated_at
  ), tomb AS (
    INSERT INTO purged_tasks (tenant, task_id, state, ended_at)
    SELECT p_tenant, task_id, state, updated_at FROM gone
    ON CONFLICT (tenant, task_id) DO UPDATE SET state = EXCLUDED.state, ended_at = EXCLUDED.ended_at, purged_at = now()
  )
  SELECT coalesce(array_agg(task_id), '{}') INTO v_ids FROM gone;
  IF cardinality(v_ids) = 0 THEN
    RETURN;
  END IF;
  DELETE FROM task_events WHERE tenant = p_tenant AND task_id = ANY (v_ids);
  DELETE FROM task_event_heads WHERE tenant = p_tenant AND task_id = ANY (v_ids);
  DELETE FROM push_configs WHERE tenant = p_tenant AND task_id = ANY (v_ids);
  DELETE FROM hub_turns WHERE tenant = p_tenant AND task_id = ANY (v_ids);
  DELETE FROM message_tasks WHERE tenant = p_tenant AND task_id = ANY (v_ids);
  DELETE FROM task_routes WHERE tenant = p_tenant AND task_id = ANY (v_ids);
  DELETE FROM task_dialects WHERE tenant = p_tenant AND task_id = ANY (v_ids);
  DELETE FROM task_children WHERE tenant = p_tenant AND parent_task_id = ANY (v_ids);
  DELETE FROM genesis_deliveries d USING genesis_messages g
   WHERE g.tenant = p_tenant AND g.task_id = ANY (v_ids) AND d.tenant = g.tenant AND d.message_id = g.id;
  DELETE FROM genesis_messages WHERE tenant = p_tenant AND task_id = ANY (v_ids);
  RETURN QUERY SELECT unnest(v_ids);
END
$$;
