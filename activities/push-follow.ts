/**
 * Following an agent's task by its push notifications (src/core/push/agent-push.ts): the push config sent with the
 * message, and the wake-ups the webhook sends this activity (through the process's EventHub, which hears other
 * processes by NOTIFY). A wake-up only says "look now": the activity then reads the task with GetTask, and polls
 * as well, every `fallbackPollMs`, so a lost push costs latency, not the task. An agent whose pushes do not arrive
 * (PushReach) is polled like one that does not push, until a push of it arrives again.
 */
import type { EventHub } from '../src/core/events/hub';
import type { AgentPushNotice } from '../src/core/events/hub';
import { type AgentPushTokens, PUSH_CONFIG_ID, agentPushPath, followIdOf } from '../src/core/push/agent-push';
import type { PushReach } from '../src/core/push/push-reach';

export interface AgentPushDeps {
  tokens: AgentPushTokens;
  /** The URL agents reach Switchboard at (SWITCHBOARD_PUBLIC_URL); undefined: unknown, agents are polled. */
  baseUrl: () => string | undefined;
  /** How often a task followed by push is polled all the same (default DEFAULT_PUSH_POLL_MS). */
  fallbackPollMs?: number;
  /** Which agents' pushes reach this process (one per process; without it every agent's pushes are trusted). */
  reach?: PushReach;
}

/** The fallback poll while pushes are expected: a lost push costs up to this much latency. */
export const DEFAULT_PUSH_POLL_MS = 30_000;
/** The least time between two GetTasks a push asks for: repeated pushes do not become a stream of GetTasks. */
const MIN_LOOK_INTERVAL_MS = 250;


export interface PushTurn {
  workflowId: string;
  runId: string;
  activityId: string;
  /** When the token stops being valid: the turn's task deadline. */
  expiresAtMs: number;
}

/**
 * "Look now" for one waiting turn: notices wake it; between looks it waits for one, or for a poll's interval. Two
 * looks are at least MIN_LOOK_INTERVAL_MS apart, so repeated notices do not become a stream of GetTasks.
 */
export class Wake {
  private woken = false;
  private wakeUp?: () => void;
  private lastLook = 0;

  /** A notice arrived: the next look is now (or the one under way ends its wait). */
  notice(): void {
    this.woken = true;
    this.wakeUp?.();
  }

  /**
   * Waits until a notice says the task may have settled, or `ms` passes, or `cancel` aborts (rejects with its reason).
   * @returns whether a notice woke it.
   */
  async next(ms: number, cancel: AbortSignal): Promise<boolean> {
    const noticed = this.woken || (await this.wait(ms, cancel));
    this.woken = false;
    const spacing = this.lastLook + MIN_LOOK_INTERVAL_MS - Date.now();
    if (spacing > 0) await new Promise((r) => setTimeout(r, spacing));
    this.lastLook = Date.now();
    return noticed;
  }

  /** Resolves true on a notice, false after `ms`; rejects when `cancel` aborts. */
  private wait(ms: number, cancel: AbortSignal): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      const settle = (noticed: boolean) => {
        clearTimeout(timer);
        cancel.removeEventListener('abort', aborted);
        this.wakeUp = undefined;
        resolve(noticed);
      };
      const aborted = () => {
        clearTimeout(timer);
        this.wakeUp = undefined;
        reject(cancel.reason);
      };
      const timer = setTimeout(() => settle(false), ms);
      if (cancel.aborted) return aborted();
      cancel.addEventListener('abort', aborted, { once: true });
      this.wakeUp = () => settle(true);
    });
  }

  close(): void {
    this.wakeUp = undefined;
  }
}

export class PushFollow {
  /** The push config for the send (1.0 TaskPushNotificationConfig JSON, without taskId: SendMessageConfiguration). */
  readonly config: { id: string; url: string; token: string };
  readonly fallbackPollMs: number;
  private agentTaskId?: string;
  /** Agent tasks named by pushes before the agent's task was known (a push may beat the send's answer). */
  private readonly early = new Set<string>();
  private readonly wake = new Wake();
  private readonly unsubscribe: () => void;

  constructor(hub: EventHub, deps: AgentPushDeps, base: string, turn: PushTurn) {
    const id = followIdOf(turn.workflowId, turn.runId, turn.activityId);
    this.config = { id: PUSH_CONFIG_ID, url: `${base.replace(/\/+$/, '')}${agentPushPath(id)}`, token: deps.tokens.issue(id, turn.expiresAtMs) };
    this.fallbackPollMs = deps.fallbackPollMs ?? DEFAULT_PUSH_POLL_MS;
    // Subscribed before the send: a push may come before the agent's answer does.
    this.unsubscribe = hub.onAgentPush(id, (n) => this.pushed(n));
  }

  /** The agent's task is known: only pushes about it wake the turn. */
  following(agentTaskId: string): void {
    if (this.agentTaskId) return;
    this.agentTaskId = agentTaskId;
    if (this.early.has(agentTaskId)) this.wake.notice();
    this.early.clear();
  }

  private pushed(notice: AgentPushNotice): void {
    if (!this.agentTaskId) {
      if (this.early.size < 100) this.early.add(notice.taskId);
      return;
    }
    if (notice.taskId !== this.agentTaskId) return; // about another task: nothing to look at here
    this.wake.notice();
  }

  /**
   * Waits until a push says the task may have settled, or `ms` passes (the fallback poll), or the activity is
   * canceled (rejects with the cancel's reason).
   * @returns whether a push woke it.
   */
  next(ms: number, cancel: AbortSignal): Promise<boolean> {
    return this.wake.next(ms, cancel);
  }

  close(): void {
    this.unsubscribe();
    this.wake.close();
  }
}
