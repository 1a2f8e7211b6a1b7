-- Multi-agent jobs: a task an agent starts through Switchboard on behalf of another task is that task's child.
-- depth = number of hops from the root task (0); the hop limit is checked against it.
ALTER TABLE tasks ADD COLUMN parent_task_id text;
ALTER TABLE tasks ADD COLUMN depth integer NOT NULL DEFAULT 0 CHECK (depth >= 0);
CREATE INDEX tasks_by_parent ON tasks (tenant, parent_task_id) WHERE parent_task_id IS NOT NULL;
