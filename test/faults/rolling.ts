/**
 * The rolling-restart drill (`FAULTS_ONLY=rolling npm run faults`): long tasks of every kind through graceful restarts
 * (SIGTERM, as a deploy or a rolling update of deploy/ sends it). Two phases, each on a Temporal dev server and a
 * PostgreSQL schema of its own:
 *  - one process (role `all`), started on an earlier build (a git worktree of FAULTS_UPGRADE_FROM) and restarted
 *    FAULTS_RESTARTS times 3 s apart; the restart in the middle is the upgrade to this checkout, whose workflow code
 *    differs, so tasks started (and waiting, and mid-turn) on the old code finish on the new;
 *  - a split cluster (an api process and two worker processes of this checkout): the workers restarted one at a time,
 *    then the api, 3 s apart.
 * The workload: tasks to an agent Switchboard polls and to one that streams (clients that poll GetTask, and streaming
 * clients that resume with Last-Event-ID), tasks waiting on input-required through the restarts (answered after), and
 * a multi-agent job (an agent that delegates to another through Switchboard). Each phase prints tasks completed and
 * failed, the agent sends per message, the cancels at agents, the longest pause a client saw and each stop's time.
 *
 * Env: FAULTS_RESTARTS (default 5); FAULTS_UPGRADE_FROM (a git ref; default the parent of the newest commit that
 * changed workflows/, so the upgrade changes the workflow; `none`: the first phase runs this checkout only).
 */
import { execFileSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '../..');
const RESTARTS = Number(process.env.FAULTS_RESTARTS ?? 5);
const TERMINAL = /COMPLETED|FAILED|CANCELED|REJECTED/;

export interface RollingFigures {
  phase: string;
  tasks: number;
  completed: number;
  failed: string[];
  /** Messages an agent was sent more than once. */
  messagesSentTwice: number;
  maxSendsPerMessage: number;
  cancelsAtAgents: number;
  /** The longest time a client got no answer: a GetTask that failed until one answered, a stream broken until a process took it again. */
  longestPauseMs: number;
  stopsMs: number[];
  notes: string[];
}

type Agent = { url: string; calls: { method: string; params: any }[]; cancels: string[]; close(): Promise<void> };

/** The ref the single process starts on, or undefined: the parent of the newest commit that changed workflows/. */
function upgradeFrom(): string | undefined {
  const wanted = process.env.FAULTS_UPGRADE_FROM;
  if (wanted === 'none') return undefined;
  const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();
  try {
    return git('rev-parse', '--verify', wanted ?? `${git('rev-list', '-n1', 'HEAD', '--', 'workflows/')}^`);
  } catch {
    return undefined; // a shallow clone: no earlier build to upgrade from
  }
}

/** A worktree of `ref` beside this checkout's dependencies (the same package-lock.json), or with its own. */
function checkout(ref: string): { dir: string; remove(): void } {
  const dir = mkdtempSync(path.join(os.tmpdir(), `sb-upgrade-${ref.slice(0, 8)}-`));
  rmSync(dir, { recursive: true });
  execFileSync('git', ['worktree', 'add', '--detach', dir, ref], { cwd: ROOT, stdio: 'ignore' });
  let sameLock = true;
  try {
    execFileSync('git', ['diff', '--quiet', ref, 'HEAD', '--', 'package-lock.json'], { cwd: ROOT, stdio: 'ignore' });
  } catch {
    sameLock = false; // exit 1: the lock file differs
  }
  if (sameLock && existsSync(path.join(ROOT, 'node_modules'))) symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'));
  else execFileSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: dir, stdio: 'ignore' });
  return { dir, remove: () => execFileSync('git', ['worktree', 'remove', '--force', dir], { cwd: ROOT, stdio: 'ignore' }) };
}

const userMessage = (text: string, extra: Record<string, unknown> = {}) => ({ messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...extra });

async function rpc(url: string, key: string, method: string, params: unknown, timeoutMs = 15_000): Promise<any> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, 'A2A-Version': '1.0' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    signal: AbortSignal.timeout(timeoutMs),
  });
  return res.json();
}

/** The longest time any client of the phase went without an answer. */
class Pauses {
  longest = 0;
  private since = new Map<string, number>();
  failed(client: string): void {
    if (!this.since.has(client)) this.since.set(client, Date.now());
  }
  answered(client: string): void {
    const t = this.since.get(client);
    if (t !== undefined) this.longest = Math.max(this.longest, Date.now() - t);
    this.since.delete(client);
  }
}

/** The phase's clients: each resolves with its task's final state, retrying through the restarts. */
class Clients {
  readonly pauses = new Pauses();
  readonly ended: Promise<{ taskId: string; state: string }>[] = [];
  constructor(
    private readonly base: () => string,
    private readonly key: string,
    private readonly deadline: number,
  ) {}

  private url(agentId: string) {
    return `${this.base()}/agents/${agentId}/a2a`;
  }

  /** A send, retried with the same messageId until a process takes it. */
  private async send(agentId: string, message: object, returnImmediately: boolean): Promise<any> {
    for (;;) {
      try {
        const r = await rpc(this.url(agentId), this.key, 'SendMessage', { message, configuration: { returnImmediately } }, 60_000);
        if (r.result?.task) return r.result.task;
        if (Date.now() > this.deadline) throw new Error(`send refused: ${JSON.stringify(r)}`);
      } catch (err) {
        if (Date.now() > this.deadline) throw err;
      }
      await new Promise((r) => setTimeout(r, 500));
    }
  }

  /** Polls GetTask until the task ends; a failed read counts toward the pause. */
  private async poll(name: string, taskId: string, until: (state: string) => boolean): Promise<string> {
    for (;;) {
      const state = await rpc(`${this.base()}/a2a`, this.key, 'GetTask', { id: taskId }).then(
        (r) => r.result?.status?.state as string | undefined,
        () => undefined,
      );
      if (state) this.pauses.answered(name);
      else this.pauses.failed(name);
      if (state && until(state)) return state;
      if (Date.now() > this.deadline) return state ?? 'unknown (no answer)';
      await new Promise((r) => setTimeout(r, 1_000));
    }
  }

  /** A client that sends without waiting, then polls. */
  polled(agentId: string, text: string): void {
    const name = `polled ${text}`;
    this.ended.push(
      this.send(agentId, userMessage(text), true).then(async (task) => ({ taskId: task.id, state: await this.poll(name, task.id, (s) => TERMINAL.test(s)) })),
    );
  }

  /** A streaming client: SendStreamingMessage, then SubscribeToTask with Last-Event-ID whenever the stream ends early. */
  streaming(agentId: string, text: string): void {
    const name = `streaming ${text}`;
    this.ended.push(
      (async () => {
        const { sse } = await import('../helpers/sse');
        let taskId = '';
        let last: { id?: number; state?: string } = {};
        const keep = (e: { id?: number; data: any }) => {
          if (e.data.error) return;
          taskId ||= e.data.result?.task?.id ?? '';
          last = { id: e.id, state: e.data.result?.statusUpdate?.status?.state ?? e.data.result?.task?.status?.state ?? last.state };
        };
        const headers = { authorization: `Bearer ${this.key}` };
        await sse(this.url(agentId), { method: 'SendStreamingMessage', params: { message: userMessage(text) }, headers, onEvent: keep }).catch(() => undefined);
        while (!TERMINAL.test(last.state ?? '') && Date.now() < this.deadline) {
          this.pauses.failed(name);
          if (!taskId) throw new Error(`${name}: the stream named no task`);
          // Answered once a process takes the stream again (a silent task sends nothing until it ends).
          const onOpen = (status: number) => status === 200 && this.pauses.answered(name);
          const read = await sse(this.url(agentId), { method: 'SubscribeToTask', params: { id: taskId }, headers, lastEventId: last.id ?? 0, onEvent: keep, onOpen }).catch(() => undefined);
          if (read?.status !== 200) await new Promise((r) => setTimeout(r, 500));
        }
        return { taskId, state: last.state ?? 'unknown' };
      })(),
    );
  }

  /** A task waiting on input-required through the restarts: asked now, answered by `answer()`. */
  waiting(agentId: string): () => void {
    const name = `waiting ${agentId}`;
    let answer!: () => void;
    const answered = new Promise<void>((r) => (answer = r));
    this.ended.push(
      (async () => {
        const task = await this.send(agentId, userMessage('hello'), false);
        await answered;
        await this.send(agentId, userMessage('Ada', { taskId: task.id }), true);
        return { taskId: task.id, state: await this.poll(name, task.id, (s) => TERMINAL.test(s)) };
      })(),
    );
    return answer;
  }
}

/** Messages sent to agents more than once, and the most sends of one. */
function sends(agents: Agent[]): { twice: number; max: number } {
  const counts = new Map<string, number>();
  for (const a of agents) {
    for (const c of a.calls) {
      if (!/^(SendMessage|SendStreamingMessage)$/.test(c.method)) continue;
      const id = c.params?.message?.messageId as string;
      counts.set(id, (counts.get(id) ?? 0) + 1);
    }
  }
  return { twice: [...counts.values()].filter((n) => n > 1).length, max: Math.max(0, ...counts.values()) };
}

interface Phase {
  name: string;
  /** Starts the phase's processes, working in PostgreSQL schema `schema`. @returns the URL clients call. */
  start(schema: string): Promise<string>;
  restarts(): AsyncGenerator<string, void>;
  stopsMs: number[];
  close(): Promise<void>;
}

/** Runs the workload through a phase's restarts. `taskMs`: how long the agents work on each task. */
async function runPhase(phase: Phase, taskMs: number): Promise<RollingFigures> {
  const { startSlowAgent, startChunkyAgent, startAskingAgent, startDelegatorAgent } = await import('../agents');
  const { createTestDb, TEST_ADMIN_KEY } = await import('../helpers/harness');
  const { KeyStore } = await import('../../src/core/auth/keys');
  const db = await createTestDb();
  let base = await phase.start(db.schema);
  const keys = new KeyStore(db.pool);
  const client = (await keys.create({ tenant: 'default', role: 'client', name: 'rolling drill' })).key;
  let delegatorTarget = { url: '', agentId: '', key: '' };
  const agents: Agent[] = await Promise.all([
    startSlowAgent({ ms: taskMs, streaming: false }),
    startChunkyAgent({ chunks: Math.round(taskMs / 250), delayMs: 250 }),
    startAskingAgent(),
    startDelegatorAgent({ gateway: () => delegatorTarget, retryForMs: 10 * 60_000 }),
  ]);
  const [slow, chunky, ask, delegator] = agents;
  try {
    const register = async (url: string) => {
      const res = await fetch(`${base}/agents`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${TEST_ADMIN_KEY}` }, body: JSON.stringify({ url }) });
      return ((await res.json()) as { id: string }).id;
    };
    const ids = { slow: await register(slow!.url), chunky: await register(chunky!.url), ask: await register(ask!.url), delegator: await register(delegator!.url) };
    const agentKey = (await keys.create({ tenant: 'default', role: 'agent', agentId: ids.delegator, name: 'delegator' })).key;
    delegatorTarget = { url: base, agentId: ids.slow, key: agentKey };
    const clients = new Clients(() => base, client, Date.now() + taskMs + 10 * 60_000);
    for (let i = 0; i < 3; i++) clients.polled(ids.slow, `polled ${i}`);
    for (let i = 0; i < 2; i++) clients.polled(ids.chunky, `streamed ${i}`);
    clients.streaming(ids.slow, 'polled agent, streaming client');
    clients.streaming(ids.chunky, 'streamed agent, streaming client');
    clients.polled(ids.delegator, 'a job with a child');
    const answers = [clients.waiting(ids.ask), clients.waiting(ids.ask)];
    await new Promise((r) => setTimeout(r, 3_000)); // every task under way
    for await (const next of phase.restarts()) {
      base = next;
      delegatorTarget = { ...delegatorTarget, url: base };
      await new Promise((r) => setTimeout(r, 3_000));
    }
    for (const answer of answers) answer();
    const ended = await Promise.all(clients.ended.map((p) => p.catch((err: Error) => ({ taskId: '?', state: `client failed: ${err.message}` }))));
    const sent = sends(agents);
    return {
      phase: phase.name,
      tasks: ended.length,
      completed: ended.filter((e) => e.state === 'TASK_STATE_COMPLETED').length,
      failed: ended.filter((e) => e.state !== 'TASK_STATE_COMPLETED').map((e) => `${e.taskId}: ${e.state}`),
      messagesSentTwice: sent.twice,
      maxSendsPerMessage: sent.max,
      cancelsAtAgents: agents.reduce((n, a) => n + a.cancels.length, 0),
      longestPauseMs: clients.pauses.longest,
      stopsMs: phase.stopsMs,
      notes: [],
    };
  } finally {
    await Promise.all(agents.map((a) => a.close()));
    await phase.close();
    await db.drop();
  }
}

/** The environment of a Switchboard process of the drill, in the phase's schema. */
async function processEnv(schema: string, temporalAddress: string, taskQueue: string, extra: Record<string, string> = {}): Promise<Record<string, string>> {
  const { childProcessEnv } = await import('../helpers/harness');
  return childProcessEnv({ temporalAddress, schema, taskQueue }, { SWITCHBOARD_UNFUNDED_ACCOUNTS: 'unlimited', ...extra });
}

type Proc = import('../helpers/process').SwitchboardProcess;

/** SIGTERM, timed to the process's exit. */
async function stop(p: Proc, stopsMs: number[]): Promise<void> {
  const t = Date.now();
  p.child.kill('SIGTERM');
  await p.exited;
  stopsMs.push(Date.now() - t);
}

export async function drillRolling(): Promise<RollingFigures[]> {
  const { startTemporal } = await import('../helpers/harness');
  const { startSwitchboard } = await import('../helpers/process');
  const figures: RollingFigures[] = [];
  const from = upgradeFrom();
  const old = from ? checkout(from) : undefined;
  const env = await startTemporal();
  try {
    // One process, upgraded in the middle.
    const upgradeAt = Math.ceil(RESTARTS / 2);
    let sb: Proc | undefined;
    let sbEnv: Record<string, string> = {};
    const single: Phase = {
      name: old ? `one process, ${RESTARTS} restarts, upgraded from ${from!.slice(0, 8)} at restart ${upgradeAt}` : `one process, ${RESTARTS} restarts`,
      stopsMs: [],
      async start(schema) {
        sbEnv = await processEnv(schema, env.address, `rolling-${randomBytes(3).toString('hex')}`);
        sb = await startSwitchboard(sbEnv, { cwd: old?.dir, readyTimeoutMs: 180_000 });
        return sb.url;
      },
      async *restarts() {
        for (let i = 1; i <= RESTARTS; i++) {
          await stop(sb!, this.stopsMs);
          sb = await startSwitchboard(sbEnv, { cwd: old && i < upgradeAt ? old.dir : undefined, readyTimeoutMs: 180_000 });
          yield sb.url;
        }
      },
      async close() {
        await sb?.kill();
      },
    };
    figures.push(await runPhase(single, 150_000));

    // A split cluster: the workers restarted one at a time, then the api.
    const procs: { api?: Proc; workers: Proc[]; envs: Record<string, string>[] } = { workers: [], envs: [] };
    const split: Phase = {
      name: 'split cluster (api + 2 workers): each worker restarted, then the api',
      stopsMs: [],
      async start(schema) {
        const taskQueue = `rolling-split-${randomBytes(3).toString('hex')}`;
        procs.envs = [
          await processEnv(schema, env.address, taskQueue, { SWITCHBOARD_ROLE: 'api' }),
          await processEnv(schema, env.address, taskQueue, { SWITCHBOARD_ROLE: 'worker' }),
          await processEnv(schema, env.address, taskQueue, { SWITCHBOARD_ROLE: 'worker' }),
        ];
        procs.workers = await Promise.all(procs.envs.slice(1).map((e) => startSwitchboard(e, { readyTimeoutMs: 180_000 })));
        procs.api = await startSwitchboard(procs.envs[0]!, { readyTimeoutMs: 180_000 });
        return procs.api.url;
      },
      async *restarts() {
        for (const i of [0, 1]) {
          await stop(procs.workers[i]!, this.stopsMs);
          procs.workers[i] = await startSwitchboard(procs.envs[i + 1]!, { readyTimeoutMs: 180_000 });
          yield procs.api!.url;
        }
        await stop(procs.api!, this.stopsMs);
        procs.api = await startSwitchboard(procs.envs[0]!, { readyTimeoutMs: 180_000 });
        yield procs.api.url;
      },
      async close() {
        await Promise.all([procs.api, ...procs.workers].map((p) => p?.kill()));
      },
    };
    figures.push(await runPhase(split, 60_000));
  } finally {
    await env.teardown();
    old?.remove();
  }
  return figures;
}

/** The drill's lines for `npm run faults`, and whether each phase met its targets. */
export function reportRolling(figures: RollingFigures[]): string[] {
  const lines = [
    '\n| rolling restarts | tasks | completed | failed | messages sent twice | most sends of one message | cancels at agents | longest client pause | stops (SIGTERM → exit) |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const f of figures) {
    lines.push(`| ${f.phase} | ${f.tasks} | ${f.completed} | ${f.failed.length} | ${f.messagesSentTwice} | ${f.maxSendsPerMessage} | ${f.cancelsAtAgents} | ${(f.longestPauseMs / 1000).toFixed(1)} s | ${f.stopsMs.map((ms) => `${(ms / 1000).toFixed(1)} s`).join(', ')} |`);
    for (const failed of f.failed) lines.push(`  not completed: ${failed}`);
  }
  return lines;
}

export const rollingMissed = (f: RollingFigures): boolean => f.completed !== f.tasks || f.messagesSentTwice > 0 || f.cancelsAtAgents > 0;
