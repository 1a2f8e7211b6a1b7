-- A child task's link to its parent, written by the front door before it signals the parent's workflow
-- (src/api/a2a/task-intake.ts). A blocking turn whose first exchange answers settles in the workflow task that called
-- the agent, so its answer leaves after its last write; the links of child tasks the agent started meanwhile are
-- signals that only the next workflow task brings, and their costs belong in the parent's settlement. The first
-- exchange reads how many children are linked here (activities/forward-message.ts) and the workflow waits for those
-- signals when it knows fewer.
CREATE TABLE task_children (
  tenant          text        NOT NULL,
  parent_task_id  text        NOT NULL,
  child_task_id   text        NOT NULL,
  linked_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, parent_task_id, child_task_id)
);
