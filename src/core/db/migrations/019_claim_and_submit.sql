-- A new task's messageId claim (016) and its first event, `submitted` under key v0 (015), in one round trip and
-- one transaction (src/api/a2a/task-intake.ts): the event is appended only when the claim is new. A resent message
-- appends nothing (its first send appended in the same transaction as its claim), and a refused claim writes
-- nothing. The event names the candidate task id, which is the task's id whenever the claim is new. (A resent
-- message's caller appends its event itself: the front door's router claims before the intake does.)
CREATE FUNCTION switchboard_claim_and_submit(
  p_tenant text, p_message_id text, p_candidate text, p_agent_id text,
  p_new_tasks_per_day bigint, p_open_tasks bigint, p_terminal_states text[], p_unrecorded_window interval,
  p_events jsonb, p_channel text
)
RETURNS TABLE (task_id text, resent boolean, today bigint, open bigint, stored_seq bigint, stored_key text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_claim record;
BEGIN
  SELECT * INTO v_claim FROM switchboard_claim_within_quota(
    p_tenant, p_message_id, p_candidate, p_agent_id, p_new_tasks_per_day, p_open_tasks, p_terminal_states, p_unrecorded_window);
  IF v_claim.task_id IS NULL OR v_claim.resent THEN
    RETURN QUERY SELECT v_claim.task_id, v_claim.resent, v_claim.today, v_claim.open, NULL::bigint, NULL::text;
    RETURN;
  END IF;
  -- One row even when nothing was appended (a client-chosen task id whose log has v0 already).
  RETURN QUERY SELECT v_claim.task_id, false, v_claim.today, v_claim.open, a.stored_seq, a.stored_key
    FROM (SELECT 1) one LEFT JOIN switchboard_append_events(p_tenant, p_candidate, p_events, false, p_channel) a ON true;
END
$$;
