-- The protocol binding Switchboard calls each agent over (A2A 1.0 protocolBinding): JSON-RPC, HTTP+JSON or gRPC.
-- Every agent registered before had its JSON-RPC interface chosen, so the default keeps them as they were.
ALTER TABLE agents ADD COLUMN binding text NOT NULL DEFAULT 'JSONRPC'
  CONSTRAINT agents_binding_known CHECK (binding IN ('JSONRPC', 'HTTP+JSON', 'GRPC'));
