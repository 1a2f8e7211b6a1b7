/** What the CLI's commands share: the exit codes, the client from the global options, and how tasks are printed. */
import { type Command, CommanderError } from 'commander';
import YAML from 'yaml';
import { Api, type TaskView } from './api';

/** 0 a read or a task that went well, 1 a task that failed or a refused call, 2 usage, 3 Switchboard unreachable. */
export const EXIT = { done: 0, failed: 1, usage: 2, unreachable: 3 } as const;
export const FAILED_STATES = new Set(['TASK_STATE_FAILED', 'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED']);
/** States where the task waits for someone: it goes on when answered. */
export const WAITING_STATES = new Set(['TASK_STATE_INPUT_REQUIRED', 'TASK_STATE_AUTH_REQUIRED']);
export const TERMINAL_STATES = new Set([...FAILED_STATES, 'TASK_STATE_COMPLETED']);

export const label = (state: string | undefined) => (state ?? 'unknown').replace(/^TASK_STATE_/, '').toLowerCase().replace(/_/g, '-');
export const textOf = (parts: { text?: string }[] | undefined) => (parts ?? []).map((p) => p.text ?? '').join('');

export interface Globals {
  url: string;
  key?: string;
  json?: boolean;
  output?: 'json' | 'yaml' | 'table';
  /** --tenant: the tenant an admin acts in (X-Switchboard-Tenant); `keys` commands name the keys' tenant with it. */
  tenant?: string;
}

export function api(cmd: Command): Api {
  const g = cmd.optsWithGlobals<Globals>();
  return new Api(g.url.replace(/\/+$/, ''), g.key, g.tenant);
}
/** How answers are printed: `-o json` (or `--json`), `-o yaml` (the same data), or for people (tables, lines). */
export function outputOf(cmd: Command): 'json' | 'yaml' | 'table' {
  const g = cmd.optsWithGlobals<Globals>();
  return g.json === true ? 'json' : (g.output ?? 'table');
}
export const asJson = (cmd: Command) => outputOf(cmd) === 'json';
export function print(cmd: Command, value: unknown, human: () => string): void {
  const output = outputOf(cmd);
  console.log(output === 'json' ? JSON.stringify(value, null, 2) : output === 'yaml' ? YAML.stringify(value).trimEnd() : human());
}

/** A usage error found by a command's action (exit 2): the reason, then the command's usage line. */
export function usageError(cmd: Command, reason: string): CommanderError {
  return new CommanderError(EXIT.usage, 'usage', `error: ${reason}\n${usageLine(cmd)}`);
}
export function usageLine(cmd: Command): string {
  const names: string[] = [];
  for (let c: Command | null = cmd; c; c = c.parent) names.unshift(c.name());
  return `Usage: ${names.join(' ')} ${cmd.usage()}`;
}

export function taskSummary(task: TaskView): string {
  const artifacts = (task.artifacts ?? []).map((a) => textOf(a.parts)).filter(Boolean);
  const message = textOf(task.status?.message?.parts);
  return [`task ${task.id} ${label(task.status?.state)}${message ? `: ${message}` : ''}`, ...artifacts].join('\n');
}

/** Fixed-width columns under a header, for listings (`--json` prints the API's answer instead). */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]))).join('  ').trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}
