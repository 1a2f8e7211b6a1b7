-- A first message's task id claimed within the tenant's quotas in one round trip (src/core/auth/quotas.ts), instead of
-- a transaction of seven statements. The same steps in the same order: the tenant's advisory lock (held to the
-- end of the caller's transaction, so concurrent sends cannot slip past a limit together), the message's earlier
-- claim, the day's count and the open tasks, then the claim and the day's count. PL/pgSQL takes a new snapshot
-- for each statement (READ COMMITTED), so the checks after the lock see every claim committed before it.
-- Returns the task id (null when a quota refuses: nothing is written then), whether it was an earlier claim,
-- and the counts the refusal names.
CREATE FUNCTION switchboard_claim_within_quota(
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
    (SELECT count(*) FROM tasks t WHERE t.tenant = p_tenant AND t.state <> ALL (p_terminal_states))
    + (SELECT count(*) FROM message_tasks m WHERE m.tenant = p_tenant AND m.created_at > now() - p_unrecorded_window
         AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.tenant = m.tenant AND t.task_id = m.task_id))
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
