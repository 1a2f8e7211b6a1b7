/**
 * Task workflows recorded by earlier code replay with today's: a workflow in flight when Switchboard is upgraded
 * must continue, so every change to the commands a task workflow issues sits behind patched(). The histories in
 * test/fixtures/histories were recorded from real tasks (a real dev server, gateway and agents) before a change:
 * - task-*-before-finish-in-one: a task's final record and its settlement were two local activities.
 * - task-*-before-turn-start-in-forwarding: a first turn's `working` was recorded by a local activity before the
 *   forwarding activity was scheduled (a streaming agent's task, a non-streaming one's, and two turns).
 * - task-*-before-first-exchange-local: a blocking turn's agent call was the forwarding activity from the start,
 *   not a local activity first (blocking tasks: a streaming agent's, a non-streaming one's, and two turns).
 * - task-*-before-first-exchange-finishes: a task its agent completed at once was finished by a second local
 *   activity, not by its first exchange (no patch: the first exchange's recorded result, without `finish`, decides).
 * - task-*-before-unmarked-patches: started without a patch level (workflows/patches.ts), each patch was asked with
 *   `patched()` and left a marker (a streaming and a non-streaming agent's task answered at once, a task returned at
 *   once to its client, and two turns); today's workflows are started at a level and leave none.
 * - task-*-at-patch-level-1: the same four tasks started at patch level 1, without markers: a change behind a later
 *   level must replay them too.
 * - task-*-at-patch-level-2: the same at level 2, where the task's state is upserted only when it changes and a turn
 *   its first exchange ends shows no `working`.
 * - task-*-at-patch-level-3: recorded with scripts/record-histories.ts from the code before level 4 (a first exchange
 *   that finished its task itself, timers to order the workflow's end): a streaming and a non-streaming agent's task
 *   answered at once, one returned at once, two turns (input-required, then completed), and a canceled one.
 * - task-*-at-patch-level-4: the same five, recorded from the code before level 5 (a first exchange that logged its
 *   agent's events and counted the child tasks itself).
 * - task-*-at-patch-level-5: the same five, recorded from the code before level 6 (a cancel told a 0.1 or NEXUS agent
 *   only of a task id it had named).
 * - task-*-at-patch-level-6: the same five, recorded from the code before restarts were handed over (the agent call's
 *   attempts counted by Temporal, restarts included; no RESTARTS_ARE_NOT_THE_AGENTS marker).
 * - task-*-at-patch-level-6-restarts-handed-over: the same five, recorded from the code before level 7 (a first
 *   exchange that left the final record and the settlement to the workflow's finishTask, and a 1 ms timer before the
 *   workflow's end).
 * - task-*-at-patch-level-7: the same five at level 7 (a simple task in one workflow task).
 * Levels 0–2 are retired (workflows/levels.ts): a worker refuses their histories with a message that says how to drain
 * them; from level 3 on they replay.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { temporal } from '@temporalio/proto';
import { workflowBundle } from './helpers/harness';

const DIR = path.join(__dirname, 'fixtures/histories');

test('task workflow histories recorded by earlier code replay without nondeterminism', async () => {
  Runtime.install({ logger: new DefaultLogger('WARN') });
  const files = readdirSync(DIR).filter((f) => f.endsWith('.json'));
  assert.ok(files.length >= 28, 'the fixtures are there');
  const bundle = await workflowBundle();
  const replayed = files.filter((f) => /at-patch-level-([3-9])/.test(f));
  assert.ok(replayed.length >= 5, 'level-3 fixtures are there');
  for (const file of replayed) {
    // Proto JSON as fetchHistory's result serialises (enum names, int64 and bytes as strings). fromObject, not the
    // SDK's historyFromJSON: that one trips over the two copies of protobufjs in node_modules ('type must be a Type').
    const history = temporal.api.history.v1.History.fromObject(JSON.parse(readFileSync(path.join(DIR, file), 'utf8')));
    // Throws DeterminismViolationError (or a failed workflow task) when today's code issues other commands.
    await Worker.runReplayHistory({ workflowBundle: bundle }, history, file);
  }
});

test('histories of retired patch levels are refused with a message that says how to drain them', async () => {
  const files = readdirSync(DIR).filter((f) => f.endsWith('.json') && !/at-patch-level-([3-9])/.test(f));
  assert.ok(files.length >= 18, 'the fixtures are there');
  const bundle = await workflowBundle();
  for (const file of files) {
    const history = temporal.api.history.v1.History.fromObject(JSON.parse(readFileSync(path.join(DIR, file), 'utf8')));
    await assert.rejects(Worker.runReplayHistory({ workflowBundle: bundle }, history, file), (err: Error) => {
      assert.match(String(err.cause ?? err.message), /started at patch level [0-2]; this Switchboard runs task workflows from level 3 on/, file);
      return true;
    });
  }
});
