/**
 * Builds an @a2a-js/sdk client for one agent endpoint. The SDK speaks the dialect the endpoint declares
 * (1.0, or 0.3 through its compat transport); every request goes through Switchboard's guarded fetch.
 */
import { AgentCard } from '@a2a-js/sdk';
import { type Client, ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import type { AgentEndpoint } from '../workflows/types';

export interface HttpTrace {
  /** The HTTP status of the most recent response, so failures can be classified as retryable or not. */
  lastStatus?: number;
  /** The most recent response's Retry-After, in ms (429 and 503 say when to come back). */
  retryAfterMs?: number;
}

/** Retry-After as delay-seconds or an HTTP date (RFC 9110 §10.2.3), in ms; undefined when absent or unreadable. */
export function retryAfterMs(value: string | null, now = Date.now()): number | undefined {
  if (!value) return undefined;
  if (/^\d{1,9}$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

export { PARENT_TASK_HEADER } from '../workflows/messages';

export async function agentClient(endpoint: AgentEndpoint, fetchImpl: typeof fetch, trace: HttpTrace = {}, headers: Record<string, string> = {}): Promise<Client> {
  const tracingFetch: typeof fetch = async (input, init) => {
    const merged = new Headers(init?.headers);
    for (const [k, v] of Object.entries(headers)) merged.set(k, v);
    const res = await fetchImpl(input, { ...init, headers: merged });
    trace.lastStatus = res.status;
    trace.retryAfterMs = retryAfterMs(res.headers.get('retry-after'));
    return res;
  };
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl: tracingFetch, legacyCompat: { enabled: true } })],
      preferredTransports: ['JSONRPC'],
    }),
  );
  // A card reduced to what the transport needs: the registry already validated the agent's real card.
  const card = AgentCard.fromJSON({
    name: 'agent',
    supportedInterfaces: [{ url: endpoint.url, protocolBinding: 'JSONRPC', protocolVersion: endpoint.protocolVersion }],
    capabilities: { streaming: endpoint.streaming },
  });
  return factory.createFromAgentCard(card);
}
