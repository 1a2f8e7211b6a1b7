// An echo agent that misbehaves on its first `times` JSON-RPC requests, one way (reference/reliability-and-
// security.md §4.2 F4–F7), then answers properly: hangs, 5xx, 429 with Retry-After, a socket reset before or after
// it did the work, malformed answers, a huge answer, an answer or SSE event nested deep, a redirect to an internal
// address.
import type express from 'express';
import { RPC_PATH, startAgentServer, type TestAgent } from './harness';
import { EchoExecutor } from './echo';
import { mountV1Agent } from './v1';

export type FaultMode =
  | 'hang'
  | 'http500'
  | 'http429'
  | 'reset-before'
  | 'reset-after'
  | 'invalid-json'
  | 'result-and-error'
  | 'wrong-id'
  | 'huge'
  | 'redirect-internal'
  | 'sse-unterminated'
  | 'sse-garbage'
  | 'sse-out-of-order'
  | 'deep-result'
  | 'sse-deep';

export interface FaultyAgent extends TestAgent {
  /** When each request arrived (ms since the epoch), faulty or not. */
  arrivals: number[];
  /** How many requests got the fault. */
  faults(): number;
}

/** JSON text of arrays nested `depth` deep (made as text: JSON.stringify itself overflows the stack that deep). */
export const deepJson = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;

export async function startFaultyAgent(opts: { mode: FaultMode; times?: number; retryAfterS?: number; redirectTo?: string; depth?: number }): Promise<FaultyAgent> {
  // The SSE modes need a card that says streaming, so Switchboard calls SendStreamingMessage.
  const streaming = opts.mode.startsWith('sse-');
  const depth = opts.depth ?? 20_000;
  const times = opts.times ?? 1;
  let faulted = 0;
  const arrivals: number[] = [];
  const agent = await startAgentServer((app, url) => {
    app.post(RPC_PATH, (req: express.Request, res: express.Response, next: express.NextFunction) => {
      arrivals.push(Date.now());
      if (faulted >= times) return next();
      faulted++;
      const id = (req.body as { id?: unknown } | undefined)?.id ?? null;
      switch (opts.mode) {
        case 'hang':
          return; // never answers; the socket stays open
        case 'http500':
          res.status(500).type('text/plain').send('Internal Server Error');
          return;
        case 'http429':
          res.status(429).set('retry-after', String(opts.retryAfterS ?? 2)).json({ error: 'slow down' });
          return;
        case 'reset-before':
          req.socket.destroy();
          return;
        case 'reset-after': {
          // Let the agent do the work, then cut the connection before a byte of the answer leaves.
          const cut = () => {
            req.socket.destroy();
            return true;
          };
          res.write = cut as never;
          res.end = cut as never;
          res.writeHead = (() => res) as never;
          return next();
        }
        case 'invalid-json':
          res.status(200).type('application/json').send('{"jsonrpc": "2.0", "id": ');
          return;
        case 'result-and-error':
          res.json({ jsonrpc: '2.0', id, result: { task: {} }, error: { code: -32603, message: 'both' } });
          return;
        case 'wrong-id':
          res.json({ jsonrpc: '2.0', id: 'not-yours', result: { message: { messageId: 'x', role: 'ROLE_AGENT', parts: [{ text: 'hi' }] } } });
          return;
        case 'huge':
          res.status(200).type('application/json');
          res.write('{"jsonrpc":"2.0","id":1,"result":{"message":{"parts":[{"text":"');
          for (let i = 0; i < 50; i++) res.write('x'.repeat(1024 * 1024));
          res.end('"}]}}}');
          return;
        case 'redirect-internal':
          res.redirect(307, opts.redirectTo ?? 'http://169.254.169.254/latest/meta-data/');
          return;
        case 'sse-unterminated':
          // One event without its blank line, then the end: a parser must not wait for the rest forever.
          res.status(200).type('text/event-stream');
          res.end(`data: ${JSON.stringify({ jsonrpc: '2.0', id, result: { statusUpdate: { taskId: 't', contextId: 'c', status: { state: 'TASK_STATE_WORKING' } } } })}`);
          return;
        case 'sse-garbage':
          res.status(200).type('text/event-stream');
          res.write('data: this is not json\n\n');
          res.end('event: nonsense\ndata: {"half":\n\n');
          return;
        case 'deep-result':
          // A well-formed answer whose message carries a data part nested `depth` deep.
          res.status(200).type('application/json');
          res.end(`{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"data":{"x":${deepJson(depth)}}}]}}}`);
          return;
        case 'sse-deep': {
          // A working status, then an event whose artifact carries a data part nested `depth` deep.
          res.status(200).type('text/event-stream');
          const working = { statusUpdate: { taskId: 'deep', contextId: 'c', status: { state: 'TASK_STATE_WORKING' } } };
          res.write(`data: ${JSON.stringify({ jsonrpc: '2.0', id, result: working })}\n\n`);
          res.end(`data: {"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":{"artifactUpdate":{"taskId":"deep","contextId":"c","artifact":{"artifactId":"a","parts":[{"data":{"x":${deepJson(depth)}}}]}}}}\n\n`);
          return;
        }
        case 'sse-out-of-order': {
          // A status update for a task never announced, then a terminal state, then more after it.
          res.status(200).type('text/event-stream');
          const ev = (result: unknown) => `data: ${JSON.stringify({ jsonrpc: '2.0', id, result })}\n\n`;
          res.write(ev({ statusUpdate: { taskId: 'ghost', contextId: 'c', status: { state: 'TASK_STATE_COMPLETED' } } }));
          res.write(ev({ artifactUpdate: { taskId: 'ghost', contextId: 'c', artifact: { artifactId: 'a', parts: [{ text: 'late' }] } } }));
          res.end(ev({ statusUpdate: { taskId: 'ghost', contextId: 'c', status: { state: 'TASK_STATE_WORKING' } } }));
          return;
        }
      }
    });
    mountV1Agent(app, url, new EchoExecutor(), 'Faulty', `An echo agent that fails first (${opts.mode})`, { streaming });
  });
  return Object.assign(agent, { arrivals, faults: () => faulted });
}
