/**
 * Records task workflow histories from real tasks (real dev server, gateway and agents) into test/fixtures/histories,
 * for test/replay.test.ts: run it with the code whose workflows must stay replayable, before changing them.
 *   npx tsx scripts/record-histories.ts <suffix>      (files: task-<kind>-<suffix>.json)
 */
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { SendMessageRequest, Task } from '@a2a-js/sdk';
import { AgentPool, startAskingAgent, startEchoAgent, startSlowAgent } from '../test/agents';
import { clientFactory, eventually, register, sendText, startGateway } from '../test/helpers/harness';
import { workflowIdOf } from '../task/messages';

async function main(): Promise<void> {
  const suffix = process.argv[2];
  if (!suffix) throw new Error('usage: record-histories.ts <suffix>');
  const gw = await startGateway();
  const agents = new AgentPool();
  const clientFor = async (url: string) => {
    const { base } = await register(gw, url);
    return clientFactory(gw.keys.client).createFromUrl(`${base}/.well-known/agent-card.json`, '');
  };
  const save = async (kind: string, taskId: string) => {
    const handle = gw.env.client.workflow.getHandle(workflowIdOf('default', taskId));
    await handle.result().catch(() => undefined);
    const history = await handle.fetchHistory();
    const file = path.join(__dirname, '../test/fixtures/histories', `task-${kind}-${suffix}.json`);
    writeFileSync(file, JSON.stringify(history.toJSON()));
    console.log('recorded', file);
  };
  try {
    const echo = await agents.add(startEchoAgent({ streaming: false }));
    await save('non-streaming-completed', (await sendText(await clientFor(echo.url), 'hello')).id);
    const streaming = await agents.add(startEchoAgent({ streaming: true }));
    await save('completed', (await sendText(await clientFor(streaming.url), 'hello')).id);
    const immediate = await sendText(await clientFor(streaming.url), 'hello', true);
    await eventually(async () => (await gw.env.client.workflow.getHandle(workflowIdOf('default', immediate.id)).describe()).status.name !== 'RUNNING');
    await save('returned-immediately', immediate.id);
    const asking = await agents.add(startAskingAgent());
    const askingClient = await clientFor(asking.url);
    const first = await sendText(askingClient, 'greet me');
    const followUp = { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'Ada' }], taskId: first.id, contextId: first.contextId };
    Task.toJSON((await askingClient.sendMessage(SendMessageRequest.fromJSON({ message: followUp }))) as Task);
    await save('two-turns', first.id);
    const slow = await agents.add(startSlowAgent({ ms: 60_000 }));
    const slowClient = await clientFor(slow.url);
    const running = await sendText(slowClient, 'work', true);
    await eventually(() => slow.calls.length > 0);
    await slowClient.cancelTask({ tenant: '', id: running.id, metadata: undefined });
    await save('canceled', running.id);
  } finally {
    await gw.close();
    await agents.closeAll();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
