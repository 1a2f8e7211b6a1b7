-- Withdrawals: money taken out of a requester account (unspent funds returned) or an agent account (a payout),
-- into `external:withdrawals`, once per idempotency key, as deposits are (005). The request's key and what it
-- asked for are kept, so a replay with other values is refused.
CREATE TABLE withdrawals (
  tenant          text        NOT NULL,
  idempotency_key text        NOT NULL,
  account         text        NOT NULL,
  amount_minor    bigint      NOT NULL CHECK (amount_minor > 0),
  created_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, idempotency_key)
);

-- A withdrawal's entries are a movement of their own kind.
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_kind;
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_kind CHECK (kind IN ('deposit', 'hold', 'capture', 'release', 'withdrawal'));
