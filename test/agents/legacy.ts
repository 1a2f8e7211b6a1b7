// Protocol-0.3-only echo agent. The 0.3 card is served at /.well-known/agent-card.json and /.well-known/agent.json;
// the JSON-RPC endpoint is the SDK's LegacyJsonRpcTransportHandler alone, so only 0.3 method names work
// (`message/send`, `tasks/get`, `tasks/cancel`, ...) and a 1.0 `SendMessage` gets -32601.
import express from 'express';
import { formatSSEErrorEvent, formatSSEEvent, SSE_HEADERS } from '@a2a-js/sdk';
import { LegacyJsonRpcTransportHandler } from '@a2a-js/sdk/compat/v0_3/server';
import { DefaultRequestHandler, defaultServerCallContextBuilder, InMemoryTaskStore, UnauthenticatedUser } from '@a2a-js/sdk/server';
import { EchoExecutor } from './echo';
import { RPC_PATH, startAgentServer, type TestAgent } from './harness';
import { v1Card, type AgentOptions } from './v1';

const NAME = 'Legacy echo';
const DESCRIPTION = 'Echoes the text of each message (A2A 0.3 only)';

export function startLegacyAgent(opts: AgentOptions = {}): Promise<TestAgent> {
  return startAgentServer((app, url) => {
    const rpcUrl = `${url}${RPC_PATH}`;
    const card = {
      protocolVersion: '0.3.0',
      name: NAME,
      description: DESCRIPTION,
      url: rpcUrl,
      preferredTransport: 'JSONRPC',
      version: '0.3.0',
      provider: { organization: 'Switchboard tests', url },
      capabilities: { streaming: opts.streaming ?? true, pushNotifications: false, stateTransitionHistory: false },
      defaultInputModes: ['text/plain'],
      defaultOutputModes: ['text/plain'],
      skills: [{ id: 'main', name: NAME, description: DESCRIPTION, tags: ['test'] }],
    };
    app.get(['/.well-known/agent-card.json', '/.well-known/agent.json'], (_req, res) => {
      res.json(card);
    });

    // The SDK core is 1.0 inside; the legacy transport translates 0.3 wire <-> 1.0 objects around it.
    const internalCard = v1Card(url, NAME, DESCRIPTION, opts);
    internalCard.supportedInterfaces = [{ url: rpcUrl, protocolBinding: 'JSONRPC', protocolVersion: '0.3', tenant: '' }];
    const transport = new LegacyJsonRpcTransportHandler(
      new DefaultRequestHandler(internalCard, new InMemoryTaskStore(), new EchoExecutor(opts.cost)),
    );

    app.post(RPC_PATH, express.json(), async (req, res) => {
      const context = defaultServerCallContextBuilder({
        extensions: undefined,
        user: new UnauthenticatedUser(),
        headers: req.headers,
        requestedVersion: '0.3',
      });
      const out = await transport.handle(req.body, context);
      if (!(Symbol.asyncIterator in out)) {
        res.json(out);
        return;
      }
      res.writeHead(200, SSE_HEADERS);
      try {
        for await (const event of out) res.write(formatSSEEvent(event));
      } catch (err) {
        res.write(formatSSEErrorEvent({ jsonrpc: '2.0', id: req.body?.id ?? null, error: LegacyJsonRpcTransportHandler.mapToLegacyJSONRPCError(err) }));
      }
      res.end();
    });
  });
}
