/** What `POST /agents` takes: the registration body, checked with zod at the route. */
import { z } from 'zod';
import { AgentCredentialSpec } from './agent-credentials';

/** Registration body of `POST /agents`. */
export const RegisterAgentBody = z.object({
  /** The agent's base or card URL; or `ws-agent://` for an agent that connects to the hub (GET /hub) instead. */
  url: z.url({ protocol: /^(https?|ws-agent)$/ }),
  /** What Switchboard presents when it calls the agent (bearer, apiKey or oauth2 client credentials); never shown again. */
  credentials: AgentCredentialSpec.optional(),
  /**
   * The name asked for (trimmed): refused with 409 when another agent of the tenant has a name that compares equal
   * (src/core/agents/agent-names.ts). Without it the card's name is used, or a free variant of it ("Echo (2)").
   */
  name: z.string().trim().min(1).max(200).optional(),
  /** The binding Switchboard calls the agent over; default: the card's JSON-RPC, else HTTP+JSON, else gRPC interface. */
  binding: z.enum(['JSONRPC', 'HTTP+JSON', 'GRPC']).optional(),
  /**
   * The dialect Switchboard calls the agent in, when its card does not say (or there is no card): `1.0`, `0.3`,
   * `0.2` (the 0.3 wire), `0.1` (`tasks/send`), `nexus`, `genesis` (Genesis Nexus envelopes POSTed to the URL),
   * `nanda` (seed 001's nodes: the 0.3 wire as they speak it, `message/send` at the URL or `<url>/a2a`; kept as 0.3).
   * With `0.1`, `nexus`, `genesis` or `nanda` the agent needs no card.
   */
  protocol: z.enum(['1.0', '0.3', '0.2', '0.1', 'nexus', 'genesis', 'nanda']).optional(),
  /** For an agent without a card: what its card would say (searchable, shown on the gateway card). */
  description: z.string().max(10_000).optional(),
  skills: z
    .array(
      z.looseObject({
        id: z.string().min(1).max(200),
        name: z.string().min(1).max(200),
        description: z.string().max(10_000).optional(),
        tags: z.array(z.string().max(100)).max(50).optional(),
        examples: z.array(z.string().max(1000)).max(50).optional(),
      }),
    )
    .max(1000)
    .optional(),
  priceMinor: z.number().int().min(0).max(1e12).optional(),
  retry: z
    .object({
      maxAttempts: z.number().int().min(1).max(20).optional(),
      initialIntervalMs: z.number().int().min(10).max(600_000).optional(),
      backoffCoefficient: z.number().min(1).max(10).optional(),
      attemptTimeoutMs: z.number().int().min(100).max(3_600_000).optional(),
      taskTimeoutMs: z.number().int().min(1000).max(365 * 24 * 3_600_000).optional(),
      streamIdleTimeoutMs: z.number().int().min(1000).max(24 * 3_600_000).optional(),
    })
    .strict()
    .optional(),
});
export type RegisterAgent = z.infer<typeof RegisterAgentBody>;
