import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { ClientFactory } from '@a2a-js/sdk/client';
import { SendMessageRequest, Task } from '@a2a-js/sdk';
import { startEchoAgent, type TestAgent } from './agents';
import { type Gateway, register, startGateway } from './helpers/harness';

let gw: Gateway;
let echo: TestAgent;
before(async () => {
  [gw, echo] = await Promise.all([startGateway(), startEchoAgent()]);
});
after(async () => {
  await gw?.close();
  await echo?.close();
});

test('smoke', async () => {
  const { base } = await register(gw, echo.url);
  const client = await new ClientFactory().createFromUrl(`${base}/.well-known/agent-card.json`, '');
  const reply = await client.sendMessage(SendMessageRequest.fromJSON({ message: { messageId: 'm1', role: 'ROLE_USER', parts: [{ text: 'hi' }] } }));
  const t = Task.toJSON(reply as Task) as any;
  console.log(JSON.stringify(t));
  assert.equal(t.status.state, 'TASK_STATE_COMPLETED');
});
