/**
 * `switchboard`: the command line for a running Switchboard (`npx switchboard --help`). Reads SWITCHBOARD_URL
 * (default http://127.0.0.1:8080) and SWITCHBOARD_KEY. `--json` prints machine-readable answers.
 * Exit codes: 0 done (a read that succeeded, whatever the task's state), 1 a task sent that failed, was canceled or
 * rejected, or the server refused the call, 2 usage, 3 Switchboard unreachable (main()).
 */
import { randomUUID } from 'node:crypto';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { TASK_STATES } from '../../task/wire';
import { Api, ApiError, type StreamEvent, type TaskView, Unreachable, refusalOf } from './api';
import { EXIT, FAILED_STATES, WAITING_STATES, api, asJson, label, print, table, taskSummary, textOf, usageError } from './common';
import { FRONT_DOOR, type Verdict, follow } from './follow';
import { watchCommand } from './watch';
import { keysCommand, tenantsCommand } from './admin';
import { agentsCommand } from './agents';
import type { OpenLevels } from '../core/temporal/task-gateway';

/** The task states as the CLI prints and takes them (input-required, working, …), not the wire's TASK_STATE_*. */
const STATE_NAMES = TASK_STATES.map(label);

/** What the CLI prints of an account (the whole answer with --json). */
interface AccountView {
  balanceMinor: number;
  heldMinor: number;
  availableMinor: number;
}

/** Seconds without any event before a send says why it may be waiting. */
const QUIET_S = 5;

const message = (text: string, taskId?: string) => ({ messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...(taskId ? { taskId } : {}) });

/**
 * Sends a message as a stream and follows its task to the end of the turn: state changes on stderr (a spinner on a
 * terminal), artifact text on stdout (as it arrives with `live`, else at the end). A stream that breaks off (the
 * server restarting, a last event naming where to resume) is resumed with Last-Event-ID. Sets the exit code.
 */
async function converse(cmd: Command, path: string, params: Record<string, unknown>, live: boolean): Promise<void> {
  const client = api(cmd);
  const json = asJson(cmd);
  const status = new StatusLine(!json);
  const artifacts = new Map<string, string>();
  let taskId: string | undefined;
  let state: string | undefined;
  let statusMessage: string | undefined;
  // Nothing after a few seconds: say why it may be (a send's first event comes from a worker) and that nothing is lost.
  let heard = false;
  const quiet = setTimeout(() => {
    if (!heard && !json) status.note(`no answer after ${QUIET_S} s: if no worker polls the task queue, the message is kept and its task runs when one does (Ctrl-C does not cancel it)`);
  }, QUIET_S * 1000);
  const onEvent = (e: StreamEvent): Verdict => {
    heard = true;
    if (e.data.error) {
      const at = e.data.error.data?.lastEventId;
      if (typeof at === 'number' && taskId) return 'resume';
      throw new ApiError(`SendStreamingMessage: ${refusalOf(e.data)}`, 200, e.data.error);
    }
    const r = e.data.result ?? {};
    if (r.task) {
      taskId = r.task.id;
      state = r.task.status?.state;
      status.show(taskId!, state);
    }
    const voided = r.statusUpdate?.metadata?.switchboard?.void;
    if (voided) {
      // An attempt of the agent call failed and is retried: what it streamed is void, and the output starts over.
      artifacts.clear();
      status.note(`the agent is asked again (attempt ${voided.attempt} failed): its output starts over`);
      if (live && !json) process.stdout.write('\n');
      return undefined;
    }
    if (r.statusUpdate) {
      taskId ??= r.statusUpdate.taskId;
      state = r.statusUpdate.status?.state;
      const text = textOf(r.statusUpdate.status?.message?.parts);
      if (text) statusMessage = text;
      status.show(taskId!, state);
    }
    if (r.artifactUpdate) {
      const { artifact, append } = r.artifactUpdate;
      const text = textOf(artifact.parts);
      const before = artifacts.get(artifact.artifactId);
      artifacts.set(artifact.artifactId, (append ? (before ?? '') : '') + text);
      // A chunk without `append` replaces its artifact: printed live, the new text starts on a line of its own.
      if (live && !json) process.stdout.write(append || (before === undefined && artifacts.size === 1) ? text : `\n${text}`);
    }
    return undefined;
  };

  try {
    await follow(client, client.stream(path, 'SendStreamingMessage', params), onEvent, () => taskId, (text) => status.note(text));
  } finally {
    clearTimeout(quiet);
    status.stop();
  }

  // The task as it stands now, not as the last event had it: its state and message are the last line.
  if (!taskId) throw new ApiError('SendStreamingMessage: the stream ended before it named its task', 200, undefined);
  const task = await client.rpc<TaskView>(FRONT_DOOR, 'GetTask', { id: taskId });
  state = task.status?.state ?? state;
  statusMessage = textOf(task.status?.message?.parts) || statusMessage;
  if (json) {
    console.log(JSON.stringify(task, null, 2));
  } else {
    if (!live) {
      for (const text of artifacts.values()) if (text) console.log(text);
    } else if (artifacts.size) process.stdout.write('\n');
    const line = `${label(state)}${statusMessage ? `: ${statusMessage}` : ''}`;
    console.error(`task ${taskId} ${line}`);
    if (WAITING_STATES.has(state ?? '')) {
      console.error(`answer with: switchboard resume ${taskId} <text>`);
    }
  }
  process.exitCode = FAILED_STATES.has(state ?? '') ? EXIT.failed : EXIT.done;
}

/** The task's state as it changes: a spinner line on a terminal, one line per change otherwise. */
class StatusLine {
  private timer?: NodeJS.Timeout;
  private text = '';
  private last = '';
  private readonly tty = process.stderr.isTTY === true;

  constructor(private readonly enabled: boolean) {}

  show(taskId: string, state: string | undefined): void {
    if (!this.enabled) return;
    const text = `task ${taskId}: ${label(state)}`;
    if (text === this.last) return;
    this.last = text;
    if (!this.tty) {
      console.error(text);
      return;
    }
    this.text = text;
    const frames = '⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏';
    let i = 0;
    this.timer ??= setInterval(() => process.stderr.write(`\r${frames[i++ % frames.length]} ${this.text}\x1b[K`), 80);
  }

  note(text: string): void {
    if (this.enabled) console.error(this.tty ? `\r${text}\x1b[K` : text);
  }

  stop(): void {
    if (this.timer) {
      clearInterval(this.timer);
      process.stderr.write('\r\x1b[K');
    }
  }
}

export function program(): Command {
  const root = new Command('switchboard')
    .description('Command line for a running Switchboard (A2A gateway)')
    .addOption(new Option('--url <url>', 'Switchboard base URL').env('SWITCHBOARD_URL').default('http://127.0.0.1:8080'))
    .addOption(new Option('--key <key>', 'API key (admin, operator, client or agent)').env('SWITCHBOARD_KEY'))
    .addOption(new Option('--tenant <id>', 'for an admin key: the tenant to act in (X-Switchboard-Tenant)').env('SWITCHBOARD_TENANT'))
    .option('--json', 'print machine-readable JSON (the same as -o json)')
    .addOption(new Option('-o, --output <format>', 'how answers are printed: table (for people), json or yaml').choices(['table', 'json', 'yaml']))
    .showHelpAfterError()
    .addHelpText(
      'after',
      `
Exit codes: 0 done (a read that succeeded, whatever the task's state), 1 a task sent that failed, was canceled or
rejected, or a call the server refused, 2 usage, 3 Switchboard unreachable. With --json an error is JSON on stderr:
{"error":{"code":"usage"|"refused"|"unreachable","message":...}}.`,
    )
    .configureOutput({ writeErr: (text) => (heldErr ? heldErr.push(text) : process.stderr.write(text)) })
    // Before any subcommand is added, which inherits it: commander's own usage errors would otherwise exit 1 from
    // inside the subcommand, where main() cannot make them exit 2.
    .exitOverride();

  agentsCommand(root);

  root
    .command('send')
    .argument('<agentId|text...>', 'the agent, then the text; with --route only the text')
    .description('send a message as a new task and wait for the end of its turn (--route: Switchboard picks the agent)')
    .option('--route', 'send through the routing front door instead of to one agent')
    .action(async (words: string[], o: { route?: boolean }, cmd: Command) => {
      const [agentId, ...rest] = words;
      if (!o.route && rest.length === 0) throw usageError(cmd, 'give the agent, then the text (or --route, then the text)');
      const path = o.route ? FRONT_DOOR : `/agents/${encodeURIComponent(agentId)}/a2a`;
      await converse(cmd, path, { message: message((o.route ? words : rest).join(' ')) }, false);
    });
  root
    .command('stream')
    .argument('<agentId>', 'the agent')
    .argument('<text...>', 'the message: the rest of the line')
    .description("send a message as a new task and print the agent's output as it arrives")
    .action(async (agentId: string, words: string[], _o: unknown, cmd: Command) =>
      converse(cmd, `/agents/${encodeURIComponent(agentId)}/a2a`, { message: message(words.join(' ')) }, true),
    );
  root
    .command('resume')
    .argument('<taskId>', 'the task that waits for input')
    .argument('<text...>', 'the answer: the rest of the line')
    .description('answer a task that waits for input; the same task goes on')
    .action(async (taskId: string, words: string[], _o: unknown, cmd: Command) => converse(cmd, FRONT_DOOR, { message: message(words.join(' '), taskId) }, true));

  const tasks = root.command('tasks').description('tasks of your tenant');
  tasks
    .command('ls')
    .description('list tasks, newest first, with their agent (--limit rows, default 50; --all for every one)')
    .option('--state <state>', `only tasks in this state: ${STATE_NAMES.join(', ')}`, stateName)
    .option('--agent <agentId>', "only this agent's tasks")
    .option('--limit <n>', 'at most this many tasks (default 50)', positiveInteger)
    .option('--all', 'every task, page after page')
    .option('--page-token <token>', 'go on from where a listing stopped (the token it printed)')
    .action(async (o: ListOptions, cmd: Command) => listTasks(cmd, o));
  tasks
    .command('get <taskId>')
    .description('a task as it is now')
    .action(async (taskId: string, _o: unknown, cmd: Command) => {
      const task = await api(cmd).rpc<TaskView>(FRONT_DOOR, 'GetTask', { id: taskId });
      // A read that succeeded: exit 0 whatever the task's state (send and resume say how the task went).
      print(cmd, task, () => taskSummary(task));
    });
  watchCommand(tasks);
  versionsCommand(tasks);
  tasks
    .command('cancel <taskId>')
    .description('cancel a task (the agent is told)')
    .action(async (taskId: string, _o: unknown, cmd: Command) => {
      const task = await api(cmd).rpc<TaskView>(FRONT_DOOR, 'CancelTask', { id: taskId });
      print(cmd, task, () => taskSummary(task));
    });

  const accounts = root.command('accounts').description('accounts and money');
  accounts
    .command('show <account>')
    .description('an account, e.g. requester:default or agent:<id>')
    .action(async (account: string, _o: unknown, cmd: Command) => {
      const a = await api(cmd).rest<AccountView>('GET', `/accounts/${encodeURIComponent(account)}`);
      print(cmd, a, () => `${account}: balance ${a.balanceMinor}, held ${a.heldMinor}, available ${a.availableMinor}`);
    });
  for (const m of [
    { verb: 'deposit', path: 'deposits', done: 'deposited', what: 'fund a requester account (admin)', again: 'adds nothing' },
    { verb: 'withdraw', path: 'withdrawals', done: 'withdrawn', what: 'take available money out of a requester or agent account (admin)', again: 'takes nothing more' },
  ]) {
    accounts
      .command(`${m.verb} <account> <amountMinor>`)
      .description(`${m.what}; --idempotency-key makes a retry safe`)
      .option('--idempotency-key <key>', `the same key again ${m.again}`, randomUUID())
      .action(async (account: string, amount: string, o: { idempotencyKey: string }, cmd: Command) => {
        const amountMinor = Number(amount);
        if (!Number.isSafeInteger(amountMinor) || amountMinor <= 0) throw usageError(cmd, 'amountMinor must be a positive integer');
        const r = await api(cmd).rest<{ created: boolean; account: AccountView }>('POST', `/accounts/${encodeURIComponent(account)}/${m.path}`, { amountMinor, idempotencyKey: o.idempotencyKey });
        print(cmd, r, () => `${r.created ? m.done : `already ${m.done}`}: ${account} balance ${r.account.balanceMinor}`);
      });
  }

  root
    .command('ledger')
    .description('the ledger')
    .command('reconcile')
    .description('check the ledger invariants (exit 1 when one fails)')
    .action(async (_o: unknown, cmd: Command) => {
      const r = await api(cmd).rest<{ ok: boolean }>('GET', '/ledger/reconcile');
      print(cmd, r, () => (r.ok ? 'ledger ok' : `ledger NOT ok:\n${JSON.stringify(r, null, 2)}`));
      if (!r.ok) process.exitCode = EXIT.failed;
    });

  tenantsCommand(root);
  keysCommand(root);

  return root;
}

/** Option parsers: a bad value is a usage error (exit 2) naming what is wanted, before anything is sent. */
function stateName(v: string): string {
  if (!STATE_NAMES.includes(v)) throw new InvalidArgumentError(`not a task state; one of: ${STATE_NAMES.join(', ')}`);
  return v;
}
function positiveInteger(v: string): number {
  const n = Number(v);
  if (!/^\d+$/.test(v) || !Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError('a whole number, 1 or more');
  return n;
}

interface ListOptions {
  state?: string;
  agent?: string;
  limit?: number;
  all?: boolean;
  pageToken?: string;
}

/** `tasks versions`: GET /tasks/versions (docs/operations.md, "Upgrading"). */
function versionsCommand(tasks: Command): void {
  tasks
    .command('versions')
    .description("open tasks (every tenant's) by the level of the task workflow's code that started them: which levels an upgrade must still run (admin)")
    .action(async (_o: unknown, cmd: Command) => {
      const v = await api(cmd).rest<OpenLevels>('GET', '/tasks/versions');
      print(cmd, v, () => levelLines(v).join('\n'));
    });
}

/** `tasks versions` for people: a line per level, then what an upgrade may do. */
function levelLines(v: OpenLevels): string[] {
  const tasks = (n: number) => `${n} open task${n === 1 ? '' : 's'}`;
  const lines = v.levels.map(({ level, open }) => {
    const note = level === v.newest ? ' (new tasks start here)' : level === v.oldest ? ' (the oldest this release runs)' : '';
    return `level ${level}: ${tasks(open)}${note}`;
  });
  lines.push(`below level ${v.oldest}: ${tasks(v.retired)}${v.retired ? ' (this release refuses them: drain them with the release that started them)' : ''}`);
  lines.push(`unlabelled: ${tasks(v.unlabelled)}${v.unlabelled ? ` (started before tasks were labelled with their level: level ${v.oldest} to ${v.newest}, or below)` : ''}`);
  const oldestNeeded = [...v.levels].reverse().find((l) => l.open > 0)?.level;
  if (v.retired === 0 && v.unlabelled === 0) lines.push(oldestNeeded === undefined ? 'no open task: every level may be retired' : `the oldest level open tasks need: ${oldestNeeded}`);
  return lines;
}

/** One page of tasks from whichever list the key may read; `rows` as the human listing prints them. */
interface TaskPage {
  raw: unknown[];
  rows: { id: string; state: string; agent: string; updated: string }[];
  nextPageToken?: string;
}

/**
 * `tasks ls`: GET /tasks (operators and admins: each task's agent and cost), else, for the roles that may not
 * read it (clients, agents), the A2A method ListTasks (at the agent's endpoint with --agent). Pages until --limit
 * rows (--all: until the end); when more are left, says how to go on.
 */
async function listTasks(cmd: Command, o: ListOptions): Promise<void> {
  const client = api(cmd);
  const limit = o.all ? Number.POSITIVE_INFINITY : (o.limit ?? 50);
  const raw: unknown[] = [];
  const rows: TaskPage['rows'] = [];
  let token = o.pageToken;
  let operatorList = true;
  for (;;) {
    const pageSize = Math.min(100, limit - rows.length);
    let page: TaskPage;
    try {
      page = operatorList ? await operatorTaskPage(client, o, pageSize, token) : await a2aTaskPage(client, o, pageSize, token);
    } catch (err) {
      // 403: this key's role may not read GET /tasks; ListTasks lists the same tenant's tasks for any role.
      if (!(err instanceof ApiError && err.status === 403 && operatorList)) throw err;
      operatorList = false;
      continue;
    }
    raw.push(...page.raw);
    rows.push(...page.rows);
    token = page.nextPageToken || undefined;
    if (!token || rows.length >= limit) break;
  }

  print(cmd, { tasks: raw, nextPageToken: token ?? '' }, () => (rows.length ? table(['ID', 'STATE', 'AGENT', 'UPDATED'], rows.map((r) => [r.id, r.state, r.agent, r.updated])) : '(no tasks)'));
  if (token && !asJson(cmd)) {
    const filters = `${o.state ? ` --state ${o.state}` : ''}${o.agent ? ` --agent ${o.agent}` : ''}${o.limit ? ` --limit ${o.limit}` : ''}`;
    console.error(`more tasks: switchboard tasks ls${filters} --page-token ${token}  (or --all)`);
  }
}

async function operatorTaskPage(client: Api, o: ListOptions, pageSize: number, pageToken: string | undefined): Promise<TaskPage> {
  const q = new URLSearchParams({ pageSize: String(pageSize) });
  if (o.state) q.set('state', o.state);
  if (o.agent) q.set('agentId', o.agent);
  if (pageToken) q.set('pageToken', pageToken);
  const page = await client.rest<{ tasks: { id: string; state: string; agentId: string; updatedAt: string }[]; nextPageToken?: string }>('GET', `/tasks?${q}`);
  const tasks = page.tasks;
  return { raw: tasks, rows: tasks.map((t) => ({ id: t.id, state: t.state, agent: t.agentId, updated: t.updatedAt })), nextPageToken: page.nextPageToken };
}

async function a2aTaskPage(client: Api, o: ListOptions, pageSize: number, pageToken: string | undefined): Promise<TaskPage> {
  const params = {
    pageSize,
    ...(o.state ? { status: `TASK_STATE_${o.state.toUpperCase().replace(/-/g, '_')}` } : {}),
    ...(pageToken ? { pageToken } : {}),
  };
  const page = await client.rpc<{ tasks: TaskView[]; nextPageToken?: string }>(o.agent ? `/agents/${encodeURIComponent(o.agent)}/a2a` : FRONT_DOOR, 'ListTasks', params);
  const tasks = page.tasks;
  // ListTasks' tasks do not name their agent: only --agent (the endpoint listed) does.
  const rows = tasks.map((t) => ({ id: t.id, state: label(t.status?.state), agent: o.agent ?? '-', updated: t.status?.timestamp ?? '' }));
  return { raw: tasks, rows, nextPageToken: page.nextPageToken };
}


/** Under --json, what commander would write on stderr (its error and the usage), held to be printed as JSON. */
let heldErr: string[] | undefined;

/**
 * Runs the CLI; sets the exit code: 0 a read or a task that went well, 1 a refused call or a task that failed,
 * 2 usage (the reason and the usage line on stderr), 3 unreachable. Under --json an error is one JSON line on
 * stderr: `{"error":{"code":"usage"|"refused"|"unreachable","message":…}}` (a refusal adds the HTTP status and the
 * server's body, a usage error the usage line).
 */
export async function main(argv = process.argv): Promise<void> {
  // Read before parsing: commander's own usage errors come before the options are.
  const args = argv.slice(2);
  const json = args.some((a, i) => a === '--json' || a === '-ojson' || a === '--output=json' || ((a === '-o' || a === '--output') && args[i + 1] === 'json'));
  heldErr = json ? [] : undefined;
  const fail = (exit: number, code: string, message: string, extra: Record<string, unknown> = {}) => {
    process.exitCode = exit;
    console.error(json ? JSON.stringify({ error: { code, message, ...extra } }) : message);
  };
  const root = program();
  try {
    await root.parseAsync(argv);
  } catch (err) {
    if (err instanceof CommanderError) {
      // --help and --version end here too, with exit code 0.
      if (err.exitCode === 0) process.exitCode = 0;
      else if (!json) {
        // Commander has printed its own errors and the help; a command's own usage error is printed here.
        if (err.code === 'usage') console.error(err.message);
        process.exitCode = EXIT.usage;
      } else {
        const said = err.code === 'usage' ? err.message : (heldErr ?? []).join('');
        const reason = /^error: (.*)$/m.exec(said)?.[1] ?? (err.code === 'commander.help' ? 'a subcommand is needed' : err.message);
        fail(EXIT.usage, 'usage', reason, { usage: /^Usage: .*$/m.exec(said)?.[0] });
      }
    } else if (err instanceof Unreachable) {
      fail(EXIT.unreachable, 'unreachable', err.message);
    } else if (err instanceof ApiError) {
      fail(EXIT.failed, 'refused', err.message, { status: err.status, ...(err.body !== undefined ? { body: err.body } : {}) });
    } else throw err;
  }
}
