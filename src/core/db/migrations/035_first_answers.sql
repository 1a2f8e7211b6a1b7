-- The answer a fresh task's first exchange finished the task with (patch level 7): written by finishTask's statement
-- in the transaction that records and settles the task, beside the claim of the task's first message. A workflow
-- task that completes the workflow is refused by Temporal when a signal or an update arrived while it ran, and runs
-- again, its local activities with it: the first exchange then reads this answer instead of calling the agent a
-- second time (activities/bookkeeping.ts answeredBefore). At most 64 KB each (larger answers are not finished there).
-- Nullable without a default: adding it rewrites nothing. Retention deletes it with the claim.
ALTER TABLE message_tasks ADD COLUMN first_answer jsonb;
