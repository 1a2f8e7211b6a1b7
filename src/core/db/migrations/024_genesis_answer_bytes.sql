-- Genesis replays (issue 32). A replay is answered with the first answer's bytes: `answer` (jsonb) reorders an
-- object's keys, so the text sent is kept as sent. `content_digest` is the SHA-256 of the envelope's JSON with
-- its keys sorted (src/core/genesis/envelope.ts contentDigestOf): an id sent again with other content, even with the
-- same signed fields, is refused (409) instead of being answered as a replay. Rows from before have neither and
-- keep the old checks (the signed fields; the answer re-serialised).
ALTER TABLE genesis_messages
  ADD COLUMN content_digest text,
  ADD COLUMN answer_text    text;
