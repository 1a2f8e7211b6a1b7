/** How long an agent whose push was lost is polled as if it did not push, unless a push of it arrives meanwhile. */
export const PUSH_LOST_FOR_MS = 10 * 60_000;

/**
 * Whether each agent's pushes reach this process. A task the fallback poll found settled, with no push about it,
 * means the agent's pushes are lost (it cannot reach SWITCHBOARD_PUBLIC_URL, say): for PUSH_LOST_FOR_MS its turns
 * are polled as if it did not push (at once, then 250 ms doubling to 5 s), so each of them does not wait for the
 * fallback poll. They still send the push config, and a push that wakes one of them makes the agent trusted again.
 */
export class PushReach {
  private readonly lost = new Map<string, number>();

  /** Whether the agent's pushes are taken to be lost now. */
  isLost(tenant: string, agentId: string): boolean {
    const key = `${tenant}/${agentId}`;
    const until = this.lost.get(key);
    if (until === undefined) return false;
    if (until > Date.now()) return true;
    this.lost.delete(key);
    return false;
  }

  /** A task of the agent settled without a push waking its turn: its pushes are lost. */
  missed(tenant: string, agentId: string): void {
    if (this.lost.size >= 10_000) this.lost.clear();
    this.lost.set(`${tenant}/${agentId}`, Date.now() + PUSH_LOST_FOR_MS);
  }

  /** A push of the agent woke a turn: its pushes arrive. */
  arrived(tenant: string, agentId: string): void {
    this.lost.delete(`${tenant}/${agentId}`);
  }
}
