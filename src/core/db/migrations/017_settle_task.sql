-- A terminal task's settlement in one round trip (activities/bookkeeping.ts), instead of a transaction of nine or
-- ten statements on the client's wait path: a task's answer leaves only after its last write. The same steps in
-- the same order and with the same locks as the TypeScript did: the settlement row (its unique (tenant, task_id)
-- key makes a retried settlement return the first one's outcome, created = false), the task's open hold read under
-- a row lock (the charge is capped by what was actually reserved, whatever raced or crashed before), the hold
-- captured up to the charge or released, the movement `settle:<task>` applied to both accounts and written to the
-- ledger, and the task's trust event. PL/pgSQL takes a new snapshot for each statement (READ COMMITTED), so a
-- settlement that a concurrent caller committed first is found after the insert waited for it.
-- Accounts are locked in name order, as post() in src/core/ledger/postings.ts locks them, so movements cannot deadlock:
-- 'agent:<id>' sorts before 'requester:<id>' (and deposits lock 'external:deposits' before 'requester:<id>').
-- A requester account created here starts unlimited when p_requesters_unlimited (SWITCHBOARD_UNFUNDED_ACCOUNTS=
-- unlimited). An available balance that would go negative still fails on the accounts' CHECK (23514).
-- Returns exactly one row. Called on its own it is its own transaction; inside a caller's statement or
-- transaction it is part of that one.
CREATE FUNCTION switchboard_settle_task(
  p_tenant text, p_task_id text, p_agent_id text, p_requester text, p_final_state text, p_amount_minor bigint,
  p_outcome text, p_started_at timestamptz, p_ended_at timestamptz, p_requesters_unlimited boolean
)
RETURNS TABLE (settlement_id bigint, created boolean, charged_minor bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_id bigint;
  v_charged bigint;
  v_held bigint;
  v_agent text := 'agent:' || p_agent_id;
  v_requester text := 'requester:' || p_requester;
BEGIN
  INSERT INTO settlements (tenant, task_id, agent_id, requester, final_state, amount_minor)
    VALUES (p_tenant, p_task_id, p_agent_id, p_requester, p_final_state, 0)
    ON CONFLICT (tenant, task_id) DO NOTHING
    RETURNING id INTO v_id;
  IF v_id IS NULL THEN
    RETURN QUERY SELECT s.id, false, s.amount_minor FROM settlements s WHERE s.tenant = p_tenant AND s.task_id = p_task_id;
    RETURN;
  END IF;
  SELECT h.amount_minor INTO v_held FROM holds h WHERE h.tenant = p_tenant AND h.task_id = p_task_id AND h.state = 'held' FOR UPDATE;
  v_charged := CASE WHEN p_final_state = 'TASK_STATE_COMPLETED' THEN least(p_amount_minor, coalesce(v_held, 0)) ELSE 0 END;
  UPDATE settlements SET amount_minor = v_charged WHERE id = v_id;
  IF v_held IS NOT NULL THEN
    UPDATE holds SET state = CASE WHEN v_charged > 0 THEN 'captured' ELSE 'released' END, captured_minor = v_charged, closed_at = now()
     WHERE tenant = p_tenant AND task_id = p_task_id;
  END IF;
  v_held := coalesce(v_held, 0);
  INSERT INTO accounts (tenant, account, kind, unlimited) VALUES (p_tenant, v_agent, 'agent', false)
    ON CONFLICT (tenant, account) DO NOTHING;
  UPDATE accounts SET balance_minor = balance_minor + v_charged, updated_at = now() WHERE tenant = p_tenant AND account = v_agent;
  INSERT INTO accounts (tenant, account, kind, unlimited) VALUES (p_tenant, v_requester, 'requester', p_requesters_unlimited)
    ON CONFLICT (tenant, account) DO NOTHING;
  UPDATE accounts SET balance_minor = balance_minor - v_charged, held_minor = held_minor - v_held, updated_at = now()
   WHERE tenant = p_tenant AND account = v_requester;
  INSERT INTO ledger_entries (settlement_id, tenant, account, amount_minor, held_minor, movement_key, kind, task_id)
    SELECT v_id, p_tenant, e.account, e.amount, e.held, 'settle:' || p_task_id, CASE WHEN v_charged > 0 THEN 'capture' ELSE 'release' END, p_task_id
      FROM (VALUES (1, v_agent, v_charged, 0::bigint), (2, v_requester, -v_charged, -v_held)) AS e(o, account, amount, held)
     ORDER BY e.o;
  INSERT INTO trust_events (tenant, task_id, agent_id, outcome, started_at, ended_at)
    VALUES (p_tenant, p_task_id, p_agent_id, p_outcome, p_started_at, p_ended_at)
    ON CONFLICT (tenant, task_id) DO NOTHING;
  RETURN QUERY SELECT v_id, true, v_charged;
END
$$;
