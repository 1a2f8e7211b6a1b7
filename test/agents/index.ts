// Real A2A agents (built on @a2a-js/sdk) for Switchboard's integration tests and benchmark.
export type { RecordedCall, TestAgent } from './harness';
export { AgentPool, RPC_PATH } from './harness';
export type { AgentOptions } from './v1';
export type { FailureMode } from './failing';
export { startEchoAgent } from './echo';
export { startAskingAgent } from './asking';
export { startReplyingAgent } from './replying';
export { startSlowAgent } from './slow';
export { startFailingAgent } from './failing';
export { startLegacyAgent } from './legacy';
export { startChunkyAgent, chunkText, chunkedText } from './chunky';
export { startDelegatorAgent } from './delegator';
