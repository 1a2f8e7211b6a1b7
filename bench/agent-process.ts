/**
 * The paused bench's asking agent in a process of its own (bench/paused.ts), so that the agent's tasks and
 * recorded calls, which grow with every task, are not counted in the Switchboard process's memory. Prints its URL
 * as the first message to the parent and runs until the parent disconnects.
 */
import { startAskingAgent } from '../test/agents';

void startAskingAgent().then((agent) => {
  process.send!({ url: agent.url });
  process.on('disconnect', () => void agent.close().finally(() => process.exit(0)));
});
