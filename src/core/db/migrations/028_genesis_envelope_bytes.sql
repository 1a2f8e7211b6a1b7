-- A published EVENT reaches subscribers as the bytes its publisher sent (seed 002's verifySignature re-serialises
-- the fields it received, so a reordered `from` fails it); jsonb keeps neither key order nor spacing.
ALTER TABLE genesis_messages ADD COLUMN IF NOT EXISTS envelope_text text;
