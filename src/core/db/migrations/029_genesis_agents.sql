-- Agents that speak Genesis Nexus envelopes (seed 002's receiving side): a COMMAND or QUERY for them is POSTed to
-- their URL as an envelope, and their RESPONSE completes the task (src/core/agents/transports/genesis.ts).
ALTER TABLE agents
  DROP CONSTRAINT agents_protocol_version_check,
  ADD CONSTRAINT agents_protocol_version_check CHECK (protocol_version IN ('1.0', '0.3', '0.1', 'nexus', 'genesis')),
  DROP CONSTRAINT agents_protocol_known,
  ADD CONSTRAINT agents_protocol_known CHECK (protocol IN ('1.0', '0.3', '0.2', '0.1', 'nexus', 'genesis'));
