-- Exact economics and trust (issue 4): accounts with balances and holds, every money movement in the ledger
-- under a unique key, and one trust event per terminal task.

-- One row per ledger account of a tenant: `requester:<id>` (who pays), `agent:<id>` (who is paid) and
-- `external:deposits` (where deposits come from; its balance is minus everything ever deposited). The row is a
-- cache of the ledger, updated in the same transaction as the entries: balance_minor = Σ amount_minor and
-- held_minor = Σ held_minor of its entries (GET /ledger/reconcile checks both).
CREATE TABLE accounts (
  tenant        text        NOT NULL,
  account       text        NOT NULL,
  kind          text        NOT NULL CHECK (kind IN ('requester', 'agent', 'external')),
  balance_minor bigint      NOT NULL DEFAULT 0,
  held_minor    bigint      NOT NULL DEFAULT 0 CHECK (held_minor >= 0),
  -- A requester account that has never been funded may run on credit (SWITCHBOARD_UNFUNDED_ACCOUNTS=unlimited).
  -- The first deposit that leaves it with a non-negative available balance turns the limit on for good.
  unlimited     boolean     NOT NULL DEFAULT false,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, account),
  CHECK (account LIKE kind || ':%'),
  -- available = balance − held never goes negative: the database refuses the write, whatever the code does.
  CONSTRAINT accounts_available_not_negative CHECK (kind = 'external' OR unlimited OR balance_minor - held_minor >= 0)
);

-- Ledger entries now record every movement, not only settlements. A movement is a set of entries sharing a
-- movement_key ('deposit:<idempotency key>', 'hold:<task id>', 'settle:<task id>'); the unique key is what makes
-- a retried, crashed or raced movement land once. amount_minor moves balance (a movement's amounts sum to zero);
-- held_minor moves the held part of the balance (a hold adds it, the settlement takes it off again).
ALTER TABLE ledger_entries
  ALTER COLUMN settlement_id DROP NOT NULL,
  ADD COLUMN movement_key text,
  ADD COLUMN kind         text,
  ADD COLUMN task_id      text,
  ADD COLUMN held_minor   bigint NOT NULL DEFAULT 0;

UPDATE ledger_entries e
   SET movement_key = 'settle:' || s.task_id, kind = CASE WHEN s.amount_minor > 0 THEN 'capture' ELSE 'release' END, task_id = s.task_id
  FROM settlements s
 WHERE s.id = e.settlement_id;

ALTER TABLE ledger_entries
  ALTER COLUMN movement_key SET NOT NULL,
  ALTER COLUMN kind SET NOT NULL,
  ADD CONSTRAINT ledger_entries_kind CHECK (kind IN ('deposit', 'hold', 'capture', 'release')),
  ADD CONSTRAINT ledger_entries_once UNIQUE (tenant, movement_key, account);
CREATE INDEX ledger_by_task ON ledger_entries (tenant, task_id) WHERE task_id IS NOT NULL;

-- Accounts for the settlements made before this migration. Requester accounts were never funded then, so
-- they are in debt and stay unlimited until funded.
INSERT INTO accounts (tenant, account, kind, balance_minor, unlimited)
SELECT tenant, account, split_part(account, ':', 1), sum(amount_minor), split_part(account, ':', 1) = 'requester' AND sum(amount_minor) < 0
  FROM ledger_entries
 WHERE split_part(account, ':', 1) IN ('requester', 'agent', 'external')
 GROUP BY tenant, account;

-- Deposits: the request's idempotency key, and what it asked for, so a replay with other values is refused.
CREATE TABLE deposits (
  tenant          text        NOT NULL,
  idempotency_key text        NOT NULL,
  account         text        NOT NULL,
  amount_minor    bigint      NOT NULL CHECK (amount_minor > 0),
  created_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, idempotency_key)
);

-- The hold of each paid task: reserved before the agent is called, closed by the task's settlement (captured
-- or released). A declined hold is kept too, so the decision is the same when the activity is retried.
CREATE TABLE holds (
  tenant         text        NOT NULL,
  task_id        text        NOT NULL,
  account        text        NOT NULL,
  agent_id       text        NOT NULL,
  amount_minor   bigint      NOT NULL CHECK (amount_minor > 0),
  state          text        NOT NULL CHECK (state IN ('held', 'declined', 'captured', 'released')),
  captured_minor bigint      CHECK (captured_minor >= 0 AND captured_minor <= amount_minor),
  created_at     timestamptz NOT NULL DEFAULT now(),
  closed_at      timestamptz,
  PRIMARY KEY (tenant, task_id)
);
CREATE INDEX holds_open ON holds (tenant, task_id) WHERE state = 'held';

-- Trust: one event per terminal task, written in the settlement's transaction (so exactly once). `outcome` is
-- finer than the A2A state: a failed task is 'timeout' when the agent call timed out, 'expired' when the client
-- never answered an input-required task; 'unfunded' tasks never reached the agent.
CREATE TABLE trust_events (
  tenant     text        NOT NULL,
  task_id    text        NOT NULL,
  agent_id   text        NOT NULL,
  outcome    text        NOT NULL CHECK (outcome IN ('completed', 'failed', 'timeout', 'expired', 'canceled', 'rejected', 'unfunded')),
  started_at timestamptz NOT NULL,
  ended_at   timestamptz NOT NULL,
  latency_ms bigint      GENERATED ALWAYS AS ((EXTRACT(EPOCH FROM (ended_at - started_at)) * 1000)::bigint) STORED,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, task_id)
);
CREATE INDEX trust_by_agent ON trust_events (tenant, agent_id, ended_at DESC);
