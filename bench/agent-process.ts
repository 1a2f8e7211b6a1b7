/**
 * A bench agent in a process of its own: the asking agent by default (bench/paused.ts: its tasks and recorded
 * calls, which grow with every task, are not counted in the Switchboard process's memory), or with `echo` as its
 * argument the echo agent (bench/fairness.ts: its CPU is not the gateway's). Prints its URL as the first message to
 * the parent and runs until the parent disconnects.
 */
import { startAskingAgent, startEchoAgent } from '../test/agents';

const start = process.argv[2] === 'echo' ? startEchoAgent : startAskingAgent;
void start().then((agent) => {
  process.send!({ url: agent.url });
  process.on('disconnect', () => void agent.close().finally(() => process.exit(0)));
});
