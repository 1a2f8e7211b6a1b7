/**
 * Children that must outlive a terminal's Ctrl-C but not this process: the embedded PostgreSQL (src/embedded/postgres.ts)
 * and the Temporal dev server (src/embedded/temporal.ts). Each runs in a session of its own (`detached`), so the
 * SIGINT a terminal sends to its foreground process group reaches only Switchboard, which stops them last, after
 * the worker has drained. A watchdog stops each when this process dies without doing so (kill -9, a crash).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';

/** Whether a signal can be sent to `pid` (it exists, ours or not). */
export const signalable = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/** `pid`'s state and parent (Linux: /proc), or undefined. */
export async function procStat(pid: number): Promise<{ state: string; ppid: number } | undefined> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  if (!stat) return undefined;
  // pid (comm) state ppid …; comm may hold spaces and parentheses, so read after the last ')'.
  const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { state: state!, ppid: Number(ppid) };
}

/** `pid`'s command line (Linux: /proc), or undefined. */
export async function commandLine(pid: number): Promise<string[] | undefined> {
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => undefined);
  return cmdline?.split('\0');
}

/** Whether `pid` runs: signalable, and not a zombie (an orphan's exit may wait long for its reaper). */
export async function running(pid: number): Promise<boolean> {
  return signalable(pid) && (await procStat(pid))?.state !== 'Z';
}

/** Waits until `pid` is gone; false if it still runs after `ms`. */
export async function waitGone(pid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (await running(pid)) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
  return true;
}

/**
 * A `sh` that waits for this process to die (its stdin, a pipe from here, reaches end of file: the kernel closes it
 * with the process however it ends) and then sends `signal` to `pid`. Its own session too, so a terminal's Ctrl-C
 * leaves it be. Kill it (SIGKILL) before `pid` is gone, so that it never signals a pid the system reused.
 * Undefined where there is no `sh` to run.
 */
export function startWatchdog(pid: number | undefined, signal: 'INT' | 'TERM'): ChildProcess | undefined {
  if (process.platform === 'win32' || pid === undefined) return undefined;
  const script = `trap "" INT HUP TERM; while read -r _; do :; done; kill -${signal} "$1" 2>/dev/null`;
  const dog = spawn('sh', ['-c', script, 'watchdog', String(pid)], { detached: true, stdio: ['pipe', 'ignore', 'ignore'] });
  dog.on('error', () => undefined);
  dog.unref();
  (dog.stdin as unknown as { unref?: () => void } | null)?.unref?.();
  return dog;
}
