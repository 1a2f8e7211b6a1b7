/** What of an agent's task metadata the gateway's task keeps, whichever way the agent reached it (HTTP, the hub). */

/** The most of the agent's task metadata a turn carries into the workflow (it is the client's to read, not a store). */
export const AGENT_METADATA_BUDGET_BYTES = 64 * 1024;

/**
 * The agent's task metadata as the gateway task keeps it: without `switchboard` (the gateway's own key), and
 * replaced by a note when it is over AGENT_METADATA_BUDGET_BYTES.
 */
export function agentMetadata(metadata: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (!metadata) return undefined;
  const { switchboard: _own, ...rest } = metadata;
  if (Object.keys(rest).length === 0) return undefined;
  const size = new TextEncoder().encode(JSON.stringify(rest)).length;
  return size <= AGENT_METADATA_BUDGET_BYTES ? rest : { agentMetadataDropped: `${size} bytes, over the ${AGENT_METADATA_BUDGET_BYTES}-byte budget` };
}
