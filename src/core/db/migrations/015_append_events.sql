-- One round trip per append to a task's event log (src/core/events/event-log.ts), instead of a transaction of four or
-- five statements: the head row locked, the keys already stored skipped, the events numbered and inserted, the new
-- head and the NOTIFY. PL/pgSQL takes a new snapshot for each statement (READ COMMITTED), so the lookup of stored
-- keys runs after the head row's lock is held and sees every writer of the task that committed before it, as the
-- separate statements did; numbers stay gapless and in commit order. Called on its own it is its own transaction;
-- inside a caller's transaction it is part of that one.
CREATE FUNCTION switchboard_append_events(p_tenant text, p_task_id text, p_events jsonb, p_fresh_keys boolean, p_channel text)
RETURNS TABLE (stored_seq bigint, stored_key text)
LANGUAGE plpgsql AS $$
DECLARE
  v_last bigint;
  v_count bigint;
BEGIN
  INSERT INTO task_event_heads AS h (tenant, task_id, last_seq) VALUES (p_tenant, p_task_id, 0)
    ON CONFLICT (tenant, task_id) DO UPDATE SET last_seq = h.last_seq
    RETURNING h.last_seq INTO v_last;
  -- The batch in order, each key once (its first occurrence), less the keys stored before (unless the caller
  -- knows its keys are new: then a repeated one fails on the unique constraint instead).
  RETURN QUERY
    WITH batch AS (
      SELECT x->>'k' AS k, x->>'kd' AS kd, x->'e' AS e, o FROM jsonb_array_elements(p_events) WITH ORDINALITY AS t(x, o)
    ), firsts AS (
      SELECT DISTINCT ON (b.k) b.k, b.kd, b.e, b.o FROM batch b ORDER BY b.k, b.o
    ), fresh AS (
      SELECT f.k, f.kd, f.e, v_last + row_number() OVER (ORDER BY f.o) AS s FROM firsts f
      WHERE p_fresh_keys
         OR NOT EXISTS (SELECT 1 FROM task_events te WHERE te.tenant = p_tenant AND te.task_id = p_task_id AND te.event_key = f.k)
    ), ins AS (
      INSERT INTO task_events (tenant, task_id, seq, event_key, kind, event)
      SELECT p_tenant, p_task_id, fresh.s, fresh.k, fresh.kd, fresh.e FROM fresh
      RETURNING task_events.seq, task_events.event_key
    )
    SELECT ins.seq, ins.event_key FROM ins ORDER BY ins.seq;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  IF v_count > 0 THEN
    UPDATE task_event_heads SET last_seq = v_last + v_count WHERE tenant = p_tenant AND task_id = p_task_id;
    PERFORM pg_notify(p_channel, json_build_object('tenant', p_tenant, 'taskId', p_task_id, 'seq', v_last + v_count)::text);
  END IF;
END
$$;
