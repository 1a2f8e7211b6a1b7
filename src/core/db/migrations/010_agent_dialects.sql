-- Agents in the dialects Switchboard calls but does not serve (issue 11): A2A 0.1 (tasks/send) and NEXUS.
-- Such an agent may publish no card: card_url is NULL and its card was composed from the registration (the
-- refresh then reads no card). A registration may name the dialect (`protocol`): the agent is called in it,
-- and a card refresh keeps it and the endpoint (a NEXUS endpoint is found by probing, not read from the card).
ALTER TABLE agents
  DROP CONSTRAINT agents_protocol_version_check,
  ADD CONSTRAINT agents_protocol_version_check CHECK (protocol_version IN ('1.0', '0.3', '0.1', 'nexus')),
  ALTER COLUMN card_url DROP NOT NULL,
  ADD COLUMN protocol text CONSTRAINT agents_protocol_known CHECK (protocol IN ('1.0', '0.3', '0.2', '0.1', 'nexus'));
