// Failing agent: the first `failTimes` JSON-RPC requests (default: all) fail in the chosen way; afterwards it is
// the echo agent. Failed requests are recorded in `calls` too (the recorder runs first).
import { EchoExecutor } from './echo';
import { RPC_PATH, startAgentServer, type TestAgent } from './harness';
import { mountV1Agent } from './v1';

export type FailureMode = 'http500' | 'jsonrpc-error' | 'invalid-response' | 'hang';

export function startFailingAgent(opts: { mode: FailureMode; failTimes?: number }): Promise<TestAgent> {
  const failTimes = opts.failTimes ?? Infinity;
  let failures = 0;
  return startAgentServer((app, url) => {
    app.post(RPC_PATH, (req, res, next) => {
      if (failures >= failTimes) return next();
      failures++;
      switch (opts.mode) {
        case 'http500':
          res.status(500).type('text/plain').send('Internal Server Error');
          return;
        case 'jsonrpc-error':
          res.json({ jsonrpc: '2.0', id: req.body?.id ?? null, error: { code: -32603, message: 'agent exploded' } });
          return;
        case 'invalid-response':
          res.json({ hello: 'this is not a JSON-RPC response' });
          return;
        case 'hang':
          return; // never answer; close() drops the connection
      }
    });
    mountV1Agent(app, url, new EchoExecutor(), 'Flaky echo', 'Fails first, then echoes');
  });
}
