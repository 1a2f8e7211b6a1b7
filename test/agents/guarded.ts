// An agent that demands a credential on every request (card, JSON-RPC): 401 without it. It works slowly, so a
// test can cancel a running task; every request's path and headers are kept, card fetches included.
import { RPC_PATH, startAgentServer, type TestAgent } from './harness';
import { SlowExecutor } from './slow';
import { mountV1Agent } from './v1';

export interface GuardedAgent extends TestAgent {
  /** Every request, the refused ones too: method, path, headers, and whether it was let in. */
  seen: { method: string; path: string; headers: Record<string, string | string[] | undefined>; admitted: boolean }[];
  /** What the agent accepts from now on. */
  accept(check: (headers: Record<string, string | string[] | undefined>) => boolean): void;
}

export async function startGuardedAgent(opts: { accept: (headers: Record<string, string | string[] | undefined>) => boolean; ms?: number }): Promise<GuardedAgent> {
  const seen: GuardedAgent['seen'] = [];
  let accept = opts.accept;
  let warmingUp = true; // startAgentServer reads the card once itself, without credentials
  const executor = new SlowExecutor(opts.ms ?? 1_000);
  const agent = await startAgentServer((app, url) => {
    app.use((req, res, next) => {
      const admitted = warmingUp || accept(req.headers);
      seen.push({ method: req.method, path: req.path, headers: { ...req.headers }, admitted });
      if (!admitted) {
        res.status(401).json({ error: 'credentials required' });
        return;
      }
      next();
    });
    mountV1Agent(app, url, executor, 'Guarded', 'Works slowly, and only for callers with the right credential');
    return () => executor.stop();
  });
  warmingUp = false;
  seen.length = 0;
  return Object.assign(agent, { seen, accept: (check: typeof accept) => void (accept = check) });
}

export { RPC_PATH };
