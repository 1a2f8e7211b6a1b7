-- When an agent's stored card last changed: the Last-Modified of the gateway card (A2A 1.0 §8.6). updated_at moves
-- with every probe, so it cannot say that.
ALTER TABLE agents ADD COLUMN card_changed_at timestamptz NOT NULL DEFAULT now();
UPDATE agents SET card_changed_at = coalesce(card_fetched_at, created_at);
