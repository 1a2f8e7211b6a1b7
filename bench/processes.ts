/**
 * CPU time of the machine's processes by role, from /proc (Linux; elsewhere all zero): this process (node), the
 * Temporal server (the `temporal` dev server the bench starts, a child of this process), PostgreSQL (every `postgres`
 * process: the cluster serves only the bench here), and the whole machine (/proc/stat, all CPUs). On a box where
 * the bench, the dev server and PostgreSQL share two cores, throughput follows the sum, not node's part alone.
 */
import { readdirSync, readFileSync } from 'node:fs';

export type ProcessGroup = 'node' | 'temporal server' | 'postgres' | 'rest of the machine';
export const PROCESS_GROUPS: ProcessGroup[] = ['node', 'temporal server', 'postgres', 'rest of the machine'];
export type ProcessCpu = Record<ProcessGroup, number>;

const TICK_MS = 10; // USER_HZ is 100 on Linux

interface Proc {
  pid: number;
  ppid: number;
  comm: string;
  ms: number;
}

function procs(): Proc[] {
  const out: Proc[] = [];
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((p) => /^\d+$/.test(p));
  } catch {
    return out;
  }
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const close = stat.lastIndexOf(')');
      const comm = stat.slice(stat.indexOf('(') + 1, close);
      const f = stat.slice(close + 2).split(' '); // f[0] is field 3 (state)
      out.push({ pid: Number(pid), ppid: Number(f[1]), comm, ms: (Number(f[11]) + Number(f[12])) * TICK_MS });
    } catch {
      // the process ended meanwhile
    }
  }
  return out;
}

/** Busy ms of all CPUs together (user, nice, system, irq, softirq, steal), from /proc/stat. */
export function machineBusyMs(): number {
  try {
    const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    const [user, nice, system, , , irq, softirq, steal] = cpu;
    return (user + nice + system + irq + softirq + (steal ?? 0)) * TICK_MS;
  } catch {
    return 0;
  }
}

/** The group of each process, or undefined for the rest of the machine. */
function groupOf(p: Proc, temporalPids: Set<number>): ProcessGroup | undefined {
  if (p.pid === process.pid) return 'node';
  if (temporalPids.has(p.pid)) return 'temporal server';
  if (p.comm === 'postgres') return 'postgres';
  return undefined;
}

/** Pids of this process's descendants named `temporal*` (the dev server; the bench's agent processes are `node`). */
function temporalServers(all: Proc[] = procs()): Set<number> {
  const children = new Map<number, Proc[]>();
  for (const p of all) children.set(p.ppid, [...(children.get(p.ppid) ?? []), p]);
  const out = new Set<number>();
  const stack = [...(children.get(process.pid) ?? [])];
  while (stack.length) {
    const p = stack.pop()!;
    if (p.comm.startsWith('temporal')) out.add(p.pid);
    stack.push(...(children.get(p.pid) ?? []));
  }
  return out;
}

/** The dev servers this process started (bench/peer.ts meters them by pid). */
export const temporalServerPids = (): number[] => [...temporalServers()];

/** CPU ms (user + system, all threads) of each of `pids` that is running, by pid. */
export function cpuMsOf(pids: number[]): Map<number, number> {
  const out = new Map<number, number>();
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.set(pid, (Number(f[11]) + Number(f[12])) * TICK_MS);
    } catch {
      // not running (or not Linux)
    }
  }
  return out;
}

/**
 * CPU ms per process group since the meter started, per process: one that started meanwhile counts from zero, one
 * that ended meanwhile (a PostgreSQL backend whose connection closed) is lost to its group. The rest of the machine
 * is what the groups do not explain (other processes, the kernel, those lost ones).
 */
export function processMeter(): { stop(): ProcessCpu } {
  const before = new Map(procs().map((p) => [p.pid, p.ms]));
  const busy0 = machineBusyMs();
  return {
    stop() {
      const all = procs();
      const busy = machineBusyMs() - busy0;
      const temporal = temporalServers(all);
      const out: ProcessCpu = { node: 0, 'temporal server': 0, postgres: 0, 'rest of the machine': 0 };
      for (const p of all) {
        const g = groupOf(p, temporal);
        if (g) out[g] += p.ms - (before.get(p.pid) ?? 0);
      }
      out['rest of the machine'] = Math.max(0, busy - out.node - out['temporal server'] - out.postgres);
      return out;
    },
  };
}

/** `total 93.0 ms: node 42.6, temporal server 30.1, postgres 8.2, rest of the machine 12.1` */
export function formatProcessCpu(c: ProcessCpu): string {
  const total = PROCESS_GROUPS.reduce((sum, g) => sum + c[g], 0);
  return `total ${total.toFixed(1)} ms: ${PROCESS_GROUPS.map((g) => `${g} ${c[g].toFixed(1)}`).join(', ')}`;
}
