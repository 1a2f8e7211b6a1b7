// The worker's workflowsPath entry: workflow functions only.
export { taskWorkflow } from './task-workflow';
export { agentRefreshWorkflow, agentRefreshSweepWorkflow } from './registry-workflow';
export { orphanSweepWorkflow } from './orphans-workflow';
export { retentionSweepWorkflow } from './retention-workflow';
export { genesisEventWorkflow } from './genesis-events';
export { certificationWorkflow } from './certification';
