/**
 * The growth bench's data (bench/growth.ts): the measured tenant's working set, the same in both schemas, and the
 * year of traffic the full schema gets besides, in bulk.
 */
import { performance } from 'node:perf_hooks';
import type { Pool, PoolClient } from 'pg';
import { insertAgents } from './search';

export const TENANT = 'default';
export const TERMINAL = `('TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED')`;
/** The working set's registry; the full schema's registry adds `agent-1000` … `agent-99999`. */
export const WORKING_AGENTS = 1000;
export const FULL_AGENTS = 100_000;
/**
 * The search bench's query: a word that only the working set's cards carry (10 of them), so that both registries
 * hold the same matches and the filler agents add nothing but size. The card generator never produces it.
 */
export const SEARCH_WORD = 'kestrel';

const log = (msg: string) => console.error(`growth: ${msg}`);
const round = (x: number, d = 1) => Math.round(x * 10 ** d) / 10 ** d;

/**
 * The measured tenant's working set, the same in both schemas, written afresh (a kept full schema is reset to it
 * first): 2,000 tasks in 20 contexts over the last 5.5 hours and their claims, one task of 1,000 logged events,
 * the terminal tasks settled (hold, settlement, ledger movements, trust event, as switchboard_settle_task writes
 * them), the accounts those leave (51: the requester and 50 agents), and 1,000 agents, 10 of whose cards name
 * SEARCH_WORD. The full schema's older history of the tenant (fill()) is not touched.
 */
export async function workingSet(pool: Pool): Promise<void> {
  await resetWorkingSet(pool);
  await pool.query(
    `INSERT INTO tasks (tenant, task_id, context_id, agent_id, state, status_timestamp, version, task, created_at, updated_at)
     SELECT $1, 'bt' || i, 'bc' || (i % 20), 'agent-' || (i % 50), st, ts, 3,
            jsonb_build_object('id', 'bt' || i, 'contextId', 'bc' || (i % 20), 'kind', 'task', 'status', jsonb_build_object('state', st, 'timestamp', ts)), ts, ts
       FROM generate_series(1, 2000) i,
            LATERAL (SELECT (ARRAY['TASK_STATE_COMPLETED', 'TASK_STATE_COMPLETED', 'TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_INPUT_REQUIRED'])[1 + i % 5] AS st,
                            now() - i * interval '10 seconds' AS ts) x`,
    [TENANT],
  );
  await pool.query(
    `INSERT INTO tasks (tenant, task_id, context_id, agent_id, state, status_timestamp, version, task, created_at, updated_at)
     VALUES ($1, 'bt-big', 'bc-big', 'agent-1', 'TASK_STATE_COMPLETED', now() - interval '1 hour', 3,
             '{"id":"bt-big","contextId":"bc-big","kind":"task","status":{"state":"TASK_STATE_COMPLETED"}}', now() - interval '1 hour', now() - interval '1 hour')`,
    [TENANT],
  );
  await pool.query(
    `INSERT INTO task_events (tenant, task_id, seq, event_key, kind, event)
     SELECT $1, 'bt-big', s, 'k' || s, 'artifactUpdate',
            jsonb_build_object('artifactUpdate', jsonb_build_object('taskId', 'bt-big', 'contextId', 'bc-big', 'append', true,
              'artifact', jsonb_build_object('artifactId', 'a', 'parts', jsonb_build_array(jsonb_build_object('text', repeat('x', 40) || s)))))
       FROM generate_series(1, 1000) s`,
    [TENANT],
  );
  await pool.query(`INSERT INTO task_event_heads (tenant, task_id, last_seq) VALUES ($1, 'bt-big', 1000)`, [TENANT]);
  await claims(pool, 'bt%');
  await settle(pool, 'bt%');
  await syncAccounts(pool);
  await insertAgents(pool, WORKING_AGENTS);
  await pool.query(
    `UPDATE agents SET card = jsonb_set(card, '{description}', to_jsonb((card->>'description') || ' Reads ${SEARCH_WORD} telemetry.'))
      WHERE tenant = $1 AND id = ANY($2::text[])`,
    [TENANT, Array.from({ length: WORKING_AGENTS / 100 }, (_, k) => `agent-${k * 100 + 7}`)],
  );
}

/** Removes what workingSet() writes and what the measured calls left (claims, tasks, the daily count). */
async function resetWorkingSet(pool: Pool): Promise<void> {
  const working = `task_id LIKE 'bt%' OR task_id LIKE 'rt%'`;
  for (const sql of [
    `DELETE FROM ledger_entries WHERE tenant = $1 AND (${working})`,
    `DELETE FROM settlements WHERE tenant = $1 AND (${working})`,
    `DELETE FROM trust_events WHERE tenant = $1 AND (${working})`,
    `DELETE FROM holds WHERE tenant = $1 AND (${working})`,
    `DELETE FROM task_events WHERE tenant = $1`,
    `DELETE FROM task_event_heads WHERE tenant = $1`,
    `DELETE FROM message_tasks WHERE tenant = $1`,
    `DELETE FROM tasks WHERE tenant = $1`,
    `DELETE FROM tenant_daily_tasks WHERE tenant = $1`,
    `DELETE FROM reconcile_runs WHERE tenant = $1`,
    `DELETE FROM reconcile_sums WHERE tenant = $1`,
    `DELETE FROM accounts WHERE tenant = $1`,
    `DELETE FROM agents WHERE tenant = $1 AND id = ANY($2::text[])`,
  ]) {
    await pool.query(sql, sql.includes('$2') ? [TENANT, Array.from({ length: WORKING_AGENTS }, (_, i) => `agent-${i}`)] : [TENANT]);
  }
}

/**
 * The claims of the measured tenant's tasks whose id is LIKE `pattern` (every task has one; recorded, as the
 * projection's row records it). Without them the statistics would not know the tenant has claims, and the count of
 * its unrecorded ones would be planned as if it had none.
 */
async function claims(pool: Pool, pattern: string): Promise<void> {
  await pool.query(
    `INSERT INTO message_tasks (tenant, message_id, task_id, agent_id, created_at, recorded)
     SELECT tenant, 'bm-' || task_id, task_id, agent_id, created_at, true FROM tasks WHERE tenant = $1 AND task_id LIKE $2`,
    [TENANT, pattern],
  );
}

/**
 * Settles the measured tenant's terminal tasks whose id is LIKE `pattern`, as a task's hold and settlement leave
 * the books: a hold of 10 (captured when completed, else released), the settlement (10 charged when completed),
 * the movements `hold:<task>` and `settle:<task>`, and the trust event.
 */
export async function settle(db: Pool | PoolClient, pattern: string): Promise<void> {
  await db.query(
    `WITH s AS (
       INSERT INTO settlements (tenant, task_id, agent_id, requester, final_state, amount_minor, created_at)
       SELECT tenant, task_id, agent_id, tenant, state, CASE WHEN state = 'TASK_STATE_COMPLETED' THEN 10 ELSE 0 END, status_timestamp
         FROM tasks WHERE tenant = $1 AND task_id LIKE $2 AND state IN ${TERMINAL}
       RETURNING id, tenant, task_id, agent_id, requester, final_state, amount_minor, created_at
     ), h AS (
       INSERT INTO holds (tenant, task_id, account, agent_id, amount_minor, state, captured_minor, created_at, closed_at)
       SELECT tenant, task_id, 'requester:' || requester, agent_id, 10, CASE WHEN amount_minor > 0 THEN 'captured' ELSE 'released' END,
              amount_minor, created_at - interval '1 second', created_at
         FROM s
     ), e AS (
       INSERT INTO ledger_entries (settlement_id, tenant, account, amount_minor, held_minor, movement_key, kind, task_id, created_at)
       SELECT x.sid, s.tenant, x.account, x.amount, x.held, x.movement, x.kind, s.task_id, x.at
         FROM s, LATERAL (VALUES
           (NULL::bigint, 'requester:' || s.requester, 0::bigint, 10::bigint, 'hold:' || s.task_id, 'hold', s.created_at - interval '1 second'),
           (s.id, 'agent:' || s.agent_id, s.amount_minor, 0::bigint, 'settle:' || s.task_id, CASE WHEN s.amount_minor > 0 THEN 'capture' ELSE 'release' END, s.created_at),
           (s.id, 'requester:' || s.requester, -s.amount_minor, -10::bigint, 'settle:' || s.task_id, CASE WHEN s.amount_minor > 0 THEN 'capture' ELSE 'release' END, s.created_at)
         ) x(sid, account, amount, held, movement, kind, at)
     )
     INSERT INTO trust_events (tenant, task_id, agent_id, outcome, started_at, ended_at, created_at)
     SELECT tenant, task_id, agent_id, lower(replace(final_state, 'TASK_STATE_', '')), created_at - interval '1 second', created_at, created_at FROM s`,
    [TENANT, pattern],
  );
}

/** The measured tenant's accounts as its ledger entries leave them (requesters run on credit: unlimited). */
export async function syncAccounts(pool: Pool): Promise<void> {
  await pool.query(
    `INSERT INTO accounts AS a (tenant, account, kind, balance_minor, held_minor, unlimited)
     SELECT $1, account, split_part(account, ':', 1), sum(amount_minor), sum(held_minor), true FROM ledger_entries WHERE tenant = $1 GROUP BY account
     ON CONFLICT (tenant, account) DO UPDATE SET balance_minor = EXCLUDED.balance_minor, held_minor = EXCLUDED.held_minor`,
    [TENANT],
  );
}

/**
 * The measured tenant's activity of the last minute (`tag` keeps the ids of repeated calls apart): 20 tasks that
 * ended 3 to 60 s ago, settled. Incremental reconcile checks what was written since its last run (less 5 minutes):
 * this is what it finds there, the same in both schemas.
 */
export async function recentActivity(pool: Pool, tag: string): Promise<void> {
  await pool.query(
    `INSERT INTO tasks (tenant, task_id, context_id, agent_id, state, status_timestamp, version, task, created_at, updated_at)
     SELECT $1, id, 'rc' || (j % 4), 'agent-' || (j % 50), st, ts, 3,
            jsonb_build_object('id', id, 'contextId', 'rc' || (j % 4), 'kind', 'task', 'status', jsonb_build_object('state', st, 'timestamp', ts)), ts - interval '1 minute', ts
       FROM generate_series(1, 20) j,
            LATERAL (SELECT 'rt' || $2::text || '-' || j AS id, CASE WHEN j % 4 = 0 THEN 'TASK_STATE_FAILED' ELSE 'TASK_STATE_COMPLETED' END AS st,
                            now() - j * interval '3 seconds' AS ts) x`,
    [TENANT, tag],
  );
  await claims(pool, `rt${tag}-%`);
  await settle(pool, `rt${tag}-%`);
  await syncAccounts(pool);
}

/**
 * Everything else a year of traffic leaves, in bulk: `tasks` tasks of `events` events and their claims over 100
 * other tenants, the measured tenant's history as retention leaves it (the tasks gone, their ledger kept), and the
 * registry's 99,000 other agents (none names SEARCH_WORD). The measured tenant's working set comes after.
 */
export async function fill(pool: Pool, tasks: number, events: number): Promise<void> {
  await pool.query(`INSERT INTO tenants (id, name) SELECT 'g' || lpad(i::text, 3, '0'), 'growth ' || i FROM generate_series(0, 99) i`);
  // Bulk rows are written whole (claims recorded, as the triggers of 020 would leave them): the triggers' per-row
  // statements, planned while the tables were empty, would otherwise scan every claim for each task.
  const client = await pool.connect();
  try {
    await client.query(`SET session_replication_role = replica`);
    await fillTasks(client, tasks, events);
    await history(client, Math.floor(tasks / 5));
  } finally {
    await client.query(`RESET session_replication_role`);
    client.release();
  }
  await insertAgents(pool, FULL_AGENTS, WORKING_AGENTS);
  log(`filled ${FULL_AGENTS - WORKING_AGENTS} more agents`);
}

/**
 * The measured tenant's past as retention leaves it: `purged` tasks that ended 31 to 31 + purged/864 days ago were
 * settled (holds, settlements, ledger movements, trust events), then purged (tombstones); their books are kept.
 */
async function history(client: PoolClient, purged: number): Promise<void> {
  await client.query(
    `INSERT INTO tasks (tenant, task_id, context_id, agent_id, state, status_timestamp, version, task, created_at, updated_at)
     SELECT $1, 'ht' || i, 'hc' || (i / 5), 'agent-' || (i % 50), st, ts, 3, '{}', ts - interval '1 minute', ts
       FROM generate_series(1, $2::int) i,
            LATERAL (SELECT CASE WHEN i % 5 = 0 THEN 'TASK_STATE_FAILED' ELSE 'TASK_STATE_COMPLETED' END AS st,
                            now() - interval '31 days' - i * interval '100 seconds' AS ts) x`,
    [TENANT, purged],
  );
  await settle(client, 'ht%');
  await client.query(
    `WITH gone AS (DELETE FROM tasks WHERE tenant = $1 AND task_id LIKE 'ht%' RETURNING tenant, task_id, state, updated_at)
     INSERT INTO purged_tasks (tenant, task_id, state, ended_at, purged_at) SELECT tenant, task_id, state, updated_at, updated_at + interval '30 days' FROM gone`,
    [TENANT],
  );
  log(`filled the measured tenant's history (${purged} purged tasks, settled)`);
}

/** The tasks, their events, heads and claims, in chunks of 100,000. */
async function fillTasks(client: PoolClient, tasks: number, events: number): Promise<void> {
  const chunk = 100_000;
  for (let from = 1; from <= tasks; from += chunk) {
    const to = Math.min(tasks, from + chunk - 1);
    const t0 = performance.now();
    await client.query(
      `INSERT INTO tasks (tenant, task_id, context_id, agent_id, state, status_timestamp, version, task, created_at, updated_at)
       SELECT 'g' || lpad((i % 100)::text, 3, '0'), 'gt' || i, 'gc' || (i / 5), 'ga' || (i % 1000), st, ts, 3,
              jsonb_build_object('id', 'gt' || i, 'contextId', 'gc' || (i / 5), 'kind', 'task', 'status', jsonb_build_object('state', st, 'timestamp', ts)), ts, ts
         FROM generate_series($1::int, $2::int) i,
              LATERAL (SELECT (ARRAY['TASK_STATE_COMPLETED', 'TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED'])[1 + i % 4] AS st,
                              now() - interval '1 day' - (i % 2592000) * interval '1 second' AS ts) x`,
      [from, to],
    );
    await client.query(
      `INSERT INTO task_events (tenant, task_id, seq, event_key, kind, event, created_at)
       SELECT 'g' || lpad((i % 100)::text, 3, '0'), 'gt' || i, s, 'k' || s, 'statusUpdate',
              jsonb_build_object('statusUpdate', jsonb_build_object('taskId', 'gt' || i, 'contextId', 'gc' || (i / 5), 'status', jsonb_build_object('state', 'TASK_STATE_WORKING'))),
              now() - interval '1 day'
         FROM generate_series($1::int, $2::int) i, generate_series(1, $3::int) s`,
      [from, to, events],
    );
    await client.query(
      `INSERT INTO task_event_heads (tenant, task_id, last_seq) SELECT 'g' || lpad((i % 100)::text, 3, '0'), 'gt' || i, $3 FROM generate_series($1::int, $2::int) i`,
      [from, to, events],
    );
    await client.query(
      `INSERT INTO message_tasks (tenant, message_id, task_id, agent_id, created_at, recorded)
       SELECT 'g' || lpad((i % 100)::text, 3, '0'), 'gm' || i, 'gt' || i, 'ga' || (i % 1000), now() - interval '1 day', true FROM generate_series($1::int, $2::int) i`,
      [from, to],
    );
    log(`filled tasks ${from}–${to} (${round((performance.now() - t0) / 1000)} s)`);
  }
}
