/**
 * `tasks watch <id>`: follows an existing task with SubscribeToTask over SSE (resumed with Last-Event-ID when the
 * connection breaks), printing each event as it comes, until the task ends or waits for someone (input-required,
 * auth-required). A task that has already ended is printed as it is. Exit 0 whatever the task's state: a read
 * that failed (no such task, a refusal) exits 1, as every refused call does.
 */
import type { Command } from 'commander';
import { ApiError, type StreamEvent, type TaskView } from './api';
import { TERMINAL_STATES, WAITING_STATES, api, asJson, label, taskSummary, textOf } from './common';
import { FRONT_DOOR, type Verdict, follow } from './follow';
import { ERRORS } from '../../task/errors';

/** A2A's UnsupportedOperationError: SubscribeToTask of a task that has ended. */
const ENDED = ERRORS.UnsupportedOperation.code;

export function watchCommand(tasks: Command): void {
  tasks
    .command('watch <taskId>')
    .description("follow a task: print its events as they come; exits 0 when it ends or waits for input (a read that fails exits 1)")
    .action(async (taskId: string, _o: unknown, cmd: Command) => watch(cmd, taskId));
}

async function watch(cmd: Command, taskId: string): Promise<void> {
  const client = api(cmd);
  const json = asJson(cmd);
  // GetTask first: an unknown task is its error (exit 1); a task already over is printed as it is.
  const now = await client.rpc<TaskView>(FRONT_DOOR, 'GetTask', { id: taskId });
  if (ends(now.status?.state)) return finish(cmd, now);

  let state = now.status?.state;
  const onEvent = (e: StreamEvent): Verdict => {
    if (e.data.error) {
      if (typeof e.data.error.data?.lastEventId === 'number') return 'resume';
      throw new ApiError(`SubscribeToTask: ${e.data.error.message} (${e.data.error.code})`, 200, e.data.error);
    }
    const r = e.data.result ?? {};
    if (json) console.log(JSON.stringify(r));
    if (r.task) state = r.task.status?.state;
    if (r.statusUpdate) {
      state = r.statusUpdate.status?.state;
      const text = textOf(r.statusUpdate.status?.message?.parts);
      if (!json) console.log(`${label(state)}${text ? `: ${text}` : ''}`);
    }
    if (r.artifactUpdate && !json) console.log(`artifact ${r.artifactUpdate.artifact.artifactId}: ${textOf(r.artifactUpdate.artifact.parts)}`);
    if (r.task && !json) console.log(label(state));
    return ends(state) ? 'stop' : undefined;
  };
  try {
    await follow(client, client.stream(FRONT_DOOR, 'SubscribeToTask', { id: taskId }), onEvent, () => taskId, (text) => console.error(text));
  } catch (err) {
    // The task ended between GetTask and the subscription: the server has nothing left to stream.
    if (!(err instanceof ApiError && refusalCode(err.body) === ENDED)) throw err;
  }
  finish(cmd, await client.rpc<TaskView>(FRONT_DOOR, 'GetTask', { id: taskId }));
}

const ends = (state: string | undefined) => TERMINAL_STATES.has(state ?? '') || WAITING_STATES.has(state ?? '');

function refusalCode(body: unknown): unknown {
  const error = (body as { error?: { code?: unknown } } | undefined)?.error;
  return typeof error === 'object' && error ? error.code : undefined;
}

/** The task's end: the task itself (with --json, on stdout), and what a waiting task needs. */
function finish(cmd: Command, task: TaskView): void {
  const state = task.status?.state;
  if (asJson(cmd)) console.log(JSON.stringify({ task }));
  else console.log(taskSummary(task));
  if (WAITING_STATES.has(state ?? '')) {
    const verb = state === 'TASK_STATE_AUTH_REQUIRED' ? 'waits for authorization' : 'waits for input';
    console.error(`task ${task.id} ${verb}; answer with: switchboard resume ${task.id} <text>`);
  } else if (!TERMINAL_STATES.has(state ?? '')) {
    console.error(`task ${task.id} is ${label(state)}: the stream ended before the task did`);
  }
}
