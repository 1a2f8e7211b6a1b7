-- A new task's claim counts the tenant's open tasks: those the projection has not recorded terminal, and the claims
-- it has not recorded at all yet (016). The second count looked at every claim of the last five minutes and probed
-- the projection for each, under the tenant's claim lock: its cost grew with the tenant's rate (6–8 ms per claim
-- after 1,500 tasks, on the client's wait path, and serialising the tenant's new tasks). Now each claim carries
-- whether the projection has its task, set by triggers whoever writes either row, and a partial index keeps only the
-- unrecorded ones, which stay few: a task is recorded within moments of its claim.
ALTER TABLE message_tasks ADD COLUMN recorded boolean NOT NULL DEFAULT false;
UPDATE message_tasks m SET recorded = true WHERE EXISTS (SELECT 1 FROM tasks t WHERE t.tenant = m.tenant AND t.task_id = m.task_id);
CREATE INDEX message_tasks_unrecorded ON message_tasks (tenant, created_at) WHERE NOT recorded;

-- A claim of a task the projection already has (a resend's second claim, a client-chosen id) is recorded at once.
CREATE FUNCTION switchboard_claim_recorded() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  NEW.recorded := EXISTS (SELECT 1 FROM tasks t WHERE t.tenant = NEW.tenant AND t.task_id = NEW.task_id);
  RETURN NEW;
END
$$;
CREATE TRIGGER message_tasks_recorded BEFORE INSERT ON message_tasks
  FOR EACH ROW EXECUTE FUNCTION switchboard_claim_recorded();

-- The projection's first row of a task records its claims.
CREATE FUNCTION switchboard_task_recorded() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE message_tasks SET recorded = true WHERE tenant = NEW.tenant AND task_id = NEW.task_id AND NOT recorded;
  RETURN NULL;
END
$$;
CREATE TRIGGER tasks_record_claims AFTER INSERT ON tasks
  FOR EACH ROW EXECUTE FUNCTION switchboard_task_recorded();

-- 016's function with both counts read from partial indexes; everything else as it was.
CREATE OR REPLACE FUNCTION switchboard_claim_within_quota(
  p_tenant text, p_message_id text, p_candidate text, p_agent_id text,
  p_new_tasks_per_day bigint, p_open_tasks bigint, p_terminal_states text[], p_unrecorded_window interval
)
RETURNS TABLE (task_id text, resent boolean, today bigint, open bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_known text;
  v_today bigint;
  v_open bigint;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('new-task:' || p_tenant));
  SELECT m.task_id INTO v_known FROM message_tasks m WHERE m.tenant = p_tenant AND m.message_id = p_message_id;
  IF v_known IS NOT NULL THEN
    RETURN QUERY SELECT v_known, true, NULL::bigint, NULL::bigint;
    RETURN;
  END IF;
  SELECT
    (SELECT d.count FROM tenant_daily_tasks d WHERE d.tenant = p_tenant AND d.day = (now() AT TIME ZONE 'UTC')::date),
    -- The literal list is the tasks_open index's predicate (008), which a cached plan's parameter alone cannot match.
    (SELECT count(*) FROM tasks t WHERE t.tenant = p_tenant AND t.state <> ALL (p_terminal_states)
       AND t.state NOT IN ('TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED'))
    + (SELECT count(*) FROM message_tasks m WHERE m.tenant = p_tenant AND NOT m.recorded AND m.created_at > now() - p_unrecorded_window)
  INTO v_today, v_open;
  v_today := coalesce(v_today, 0);
  IF v_today >= p_new_tasks_per_day OR v_open >= p_open_tasks THEN
    RETURN QUERY SELECT NULL::text, false, v_today, v_open;
    RETURN;
  END IF;
  INSERT INTO message_tasks (tenant, message_id, task_id, agent_id) VALUES (p_tenant, p_message_id, p_candidate, p_agent_id);
  INSERT INTO tenant_daily_tasks AS d (tenant, day, count) VALUES (p_tenant, (now() AT TIME ZONE 'UTC')::date, 1)
    ON CONFLICT (tenant, day) DO UPDATE SET count = d.count + 1;
  RETURN QUERY SELECT p_candidate, false, v_today, v_open;
END
$$;
