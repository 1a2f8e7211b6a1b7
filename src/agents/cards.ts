/**
 * Agent cards: reading the card an agent publishes (1.0 or 0.3 shape), choosing the endpoint (and binding)
 * Switchboard calls, and writing the card Switchboard publishes for it (every interface pointing at the gateway).
 */
import { z } from 'zod';
import { pathOfNul } from '../a2a/schemas';
import type { AgentBinding, AgentDialect, AgentEndpoint } from '../../workflows/types';
import { parseGrpcTarget } from '../http/outbound-grpc';

const Skill = z.looseObject({
  id: z.string().min(1),
  name: z.string().min(1),
  description: z.string().optional(),
  tags: z.array(z.string()).optional(),
  examples: z.array(z.string()).optional(),
});

const CommonCard = {
  name: z.string().min(1).max(200),
  description: z.string().max(10_000).optional(),
  version: z.string().max(100).optional(),
  capabilities: z.looseObject({ streaming: z.boolean().optional(), pushNotifications: z.boolean().optional() }).optional(),
  skills: z.array(Skill).max(1000).default([]),
  defaultInputModes: z.array(z.string()).optional(),
  defaultOutputModes: z.array(z.string()).optional(),
};

/** 1.0: `supportedInterfaces[{url, protocolBinding, protocolVersion}]`, first entry preferred (§1.8). */
const CardV1 = z.looseObject({
  ...CommonCard,
  supportedInterfaces: z
    .array(z.looseObject({ url: z.string(), protocolBinding: z.string(), protocolVersion: z.string().optional() }))
    .min(1),
});
/** 0.3 (and 0.2): `url` + `preferredTransport` (default JSONRPC) + `additionalInterfaces[{url, transport}]`. */
const CardV03 = z.looseObject({
  ...CommonCard,
  url: z.string(),
  protocolVersion: z.string().optional(),
  preferredTransport: z.string().optional(),
  additionalInterfaces: z.array(z.looseObject({ url: z.string(), transport: z.string() })).optional(),
});

export type AgentCardJson = Record<string, unknown> & { name: string };

export interface ParsedCard {
  card: AgentCardJson;
  name: string;
  /** The interface Switchboard calls unless the registration names another binding (see chooseEndpoint). */
  endpoint: AgentEndpoint;
  /** Every interface Switchboard can call, one per binding, in the order of AGENT_BINDINGS. */
  interfaces: AgentEndpoint[];
}

export class CardError extends Error {}

/** The bindings Switchboard calls agents over, in the order it prefers them (JSON-RPC first: the oldest path). */
export const AGENT_BINDINGS: readonly AgentBinding[] = ['JSONRPC', 'HTTP+JSON', 'GRPC'];

/** A registration that names a binding the card does not offer. */
export class BindingError extends Error {}

/**
 * Validates a fetched card and lists the interfaces Switchboard can call: per binding (JSON-RPC, HTTP+JSON,
 * gRPC), a 1.0 interface when the agent offers one, else 0.3. `endpoint` is the preferred one: JSON-RPC, else
 * HTTP+JSON, else gRPC. Relative JSON-RPC and HTTP+JSON URLs are resolved against the card's own URL; a gRPC
 * URL is `host:port` or has a scheme (http, https, grpc, grpcs; see src/http/outbound-grpc.ts).
 * @throws CardError saying what is wrong with the card.
 */
export function parseAgentCard(raw: unknown, cardUrl: string): ParsedCard {
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) throw new CardError('the agent card is not a JSON object');
  // PostgreSQL cannot store U+0000 in jsonb; such a card would fail at the insert instead of here.
  const nul = pathOfNul(raw);
  if (nul !== undefined) throw new CardError(`the agent card contains a NUL character (U+0000) at ${nul || 'its root'}`);
  const candidates: { url: string; version: '1.0' | '0.3' | '0.1'; binding: AgentBinding }[] = [];
  let base: z.infer<typeof CardV1> | z.infer<typeof CardV03>;
  const bindingOf = (b: string) => AGENT_BINDINGS.find((known) => known === b);
  if ('supportedInterfaces' in raw) {
    const v1 = CardV1.safeParse(raw);
    if (!v1.success) throw new CardError(`invalid 1.0 agent card: ${z.prettifyError(v1.error)}`);
    base = v1.data;
    for (const i of v1.data.supportedInterfaces) {
      const version = versionOf(i.protocolVersion ?? '1.0');
      const binding = bindingOf(i.protocolBinding);
      if (binding && version && version !== '0.1') candidates.push({ url: i.url, version, binding });
    }
  } else {
    const v03 = CardV03.safeParse(raw);
    if (!v03.success) throw new CardError(`invalid agent card (neither 1.0 supportedInterfaces nor a 0.3 url): ${z.prettifyError(v03.error)}`);
    base = v03.data;
    // A card that names no version: 0.1's shape (an `authentication` object, no securitySchemes, which 0.2 brought)
    // is a 0.1 agent (Society AI's cards are); otherwise 0.3.
    const declared = v03.data.protocolVersion;
    const version = declared ? versionOf(declared) : 'authentication' in raw && !('securitySchemes' in raw) ? '0.1' : '0.3';
    if (!version) throw new CardError(`the card declares protocolVersion ${declared}, which Switchboard does not speak (1.0, 0.3/0.2, 0.1)`);
    const preferred = bindingOf(v03.data.preferredTransport ?? 'JSONRPC');
    if (preferred) candidates.push({ url: v03.data.url, version, binding: preferred });
    for (const i of v03.data.additionalInterfaces ?? []) {
      const binding = bindingOf(i.transport);
      if (binding) candidates.push({ url: i.url, version, binding });
    }
  }
  const streaming = base.capabilities?.streaming === true;
  const interfaces: AgentEndpoint[] = [];
  // An unusable URL drops its interface (the agent stays reachable over the others); with none left, it is the error.
  let unusable: CardError | undefined;
  for (const binding of AGENT_BINDINGS) {
    const offered = candidates.filter((c) => c.binding === binding);
    const chosen = offered.find((c) => c.version === '1.0') ?? offered[0];
    if (!chosen) continue;
    try {
      interfaces.push({ url: interfaceUrl(chosen.url, binding, cardUrl), protocolVersion: chosen.version, streaming, binding });
    } catch (err) {
      if (!(err instanceof CardError)) throw err;
      unusable ??= err;
    }
  }
  const endpoint = interfaces[0];
  if (!endpoint) throw unusable ?? new CardError(`the card declares no ${AGENT_BINDINGS.join(', ')} interface for protocol 1.0 or 0.3`);
  return { card: raw as AgentCardJson, name: base.name, endpoint, interfaces };
}

/**
 * The interface a registration asked for (`binding`), or the card's preferred one.
 * @throws BindingError naming the bindings the card offers when it does not offer the one asked for.
 */
export function chooseEndpoint(parsed: Pick<ParsedCard, 'endpoint' | 'interfaces'>, binding: AgentBinding | undefined): AgentEndpoint {
  if (!binding) return parsed.endpoint;
  const found = parsed.interfaces.find((i) => i.binding === binding);
  if (!found) throw new BindingError(`the agent's card offers no ${binding} interface; it offers ${parsed.interfaces.map((i) => i.binding).join(', ')}`);
  return found;
}

/** An interface's URL as Switchboard will call it. @throws CardError when it is not one. */
function interfaceUrl(raw: string, binding: AgentBinding, cardUrl: string): string {
  if (binding === 'GRPC') {
    try {
      parseGrpcTarget(raw);
    } catch (err) {
      throw new CardError(`the card's GRPC interface URL ${JSON.stringify(raw)} is not usable: ${(err as Error).message}`);
    }
    return raw;
  }
  let url: URL;
  try {
    url = new URL(raw, cardUrl);
  } catch {
    throw new CardError(`the card's interface URL ${JSON.stringify(raw)} is not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new CardError(`the card's interface URL ${url} is not http(s)`);
  // HTTP+JSON paths (`/message:send`) are appended to the URL: a trailing slash would double.
  return binding === 'HTTP+JSON' ? url.toString().replace(/\/+$/, '') : url.toString();
}

/** 0.2.x shares 0.3's wire (message/send, `kind`); 0.1 is its own (tasks/send, `type`). */
function versionOf(v: string): '1.0' | '0.3' | '0.1' | undefined {
  if (/^1\.0(\.\d+)?$/.test(v)) return '1.0';
  if (/^0\.[23](\.\d+)?$/.test(v)) return '0.3';
  if (/^0\.1(\.\d+)?$/.test(v)) return '0.1';
  return undefined;
}

/** The `protocol` a registration may name, as the dialect Switchboard calls in. */
export type RegisteredProtocol = '1.0' | '0.3' | '0.2' | '0.1' | 'nexus';

/**
 * The endpoint in the dialect the registration names (its card did not say, or said otherwise). The SDK-less
 * dialects (0.1, NEXUS) exist over JSON-RPC only; NEXUS has no stream shape, so it is called without streaming.
 * @throws BindingError when the endpoint's binding is not JSON-RPC for those.
 */
export function inDialect(endpoint: AgentEndpoint, protocol: RegisteredProtocol | undefined): AgentEndpoint {
  if (!protocol) return endpoint;
  const dialect: AgentDialect = protocol === '0.2' ? '0.3' : protocol;
  if ((dialect === '0.1' || dialect === 'nexus') && (endpoint.binding ?? 'JSONRPC') !== 'JSONRPC') {
    throw new BindingError(`protocol ${protocol} is spoken over JSON-RPC only, and the endpoint chosen is ${endpoint.binding}`);
  }
  return { ...endpoint, protocolVersion: dialect, streaming: dialect === 'nexus' ? false : endpoint.streaming };
}

/**
 * The card of an agent that publishes none (0.1 or NEXUS, registered with `protocol`): what the registration
 * says about it, so search and the gateway card work as for any agent. Its one interface is the registered URL
 * (JSON-RPC, without streaming); inDialect then names the dialect.
 */
export function parsedFromRegistration(body: { url: string; name?: string; description?: string; skills?: unknown[] }): ParsedCard {
  const name = body.name ?? new URL(body.url).host;
  const card = { name, description: body.description ?? '', url: body.url, capabilities: { streaming: false }, skills: body.skills ?? [] };
  const endpoint: AgentEndpoint = { url: body.url, protocolVersion: '0.1', streaming: false, binding: 'JSONRPC' };
  return { card, name, endpoint, interfaces: [endpoint] };
}

// Fields that describe how to reach or authenticate to the agent itself; the gateway card replaces them.
const AGENT_SPECIFIC = [
  'supportedInterfaces', 'url', 'preferredTransport', 'additionalInterfaces', 'protocolVersion', 'signatures',
  'securitySchemes', 'security', 'securityRequirements', 'supportsAuthenticatedExtendedCard',
];

/**
 * How clients authenticate to Switchboard, in both card dialects at once: each scheme object carries the 1.0
 * oneof member (`httpAuthSecurityScheme`, `apiKeySecurityScheme`) and the 0.3/OpenAPI fields (`type`, `scheme`,
 * `in`, `name`); each reader takes its own and ignores the other. Either scheme alone is enough.
 */
export const GATEWAY_SECURITY = {
  securitySchemes: {
    bearer: {
      type: 'http',
      scheme: 'bearer',
      bearerFormat: 'Switchboard API key (sb_…) or JWT',
      httpAuthSecurityScheme: { scheme: 'Bearer', bearerFormat: 'Switchboard API key (sb_…) or JWT' },
    },
    apiKey: {
      type: 'apiKey',
      in: 'header',
      name: 'X-API-Key',
      apiKeySecurityScheme: { location: 'header', name: 'X-API-Key' },
    },
  },
  /** 1.0: any one of these requirements satisfies the card. */
  securityRequirements: [{ schemes: { bearer: { list: [] } } }, { schemes: { apiKey: { list: [] } } }],
  /** 0.3 (OpenAPI): the same alternatives. */
  security: [{ bearer: [] }, { apiKey: [] }],
} as const;

/**
 * Where clients reach one gateway endpoint (an agent's, or the routing front door's) in each binding: JSON-RPC
 * and HTTP+JSON URLs, and the gRPC target (`host:port`) with the A2A `tenant` that names the agent on the one
 * gRPC port every endpoint shares (none: the front door).
 */
export interface GatewayEndpoints {
  jsonRpc: string;
  rest?: string;
  grpc?: { target: string; tenant?: string };
}

/**
 * The endpoints of an agent (`agentId`) or of the front door (undefined) under the gateway's base URL; gRPC when
 * the gateway serves it (`grpcPort`), on the base URL's host.
 */
export function gatewayEndpoints(base: string, agentId: string | undefined, grpcPort?: number): GatewayEndpoints {
  const root = agentId === undefined ? base : `${base}/agents/${agentId}`;
  return {
    jsonRpc: `${root}/a2a`,
    rest: `${root}/rest`,
    ...(grpcPort ? { grpc: { target: `${new URL(base).hostname}:${grpcPort}`, ...(agentId !== undefined ? { tenant: agentId } : {}) } } : {}),
  };
}

/**
 * The card Switchboard publishes for a registered agent. It is readable by 1.0 clients (supportedInterfaces: JSON-RPC
 * for 1.0 and 0.3 first, preferred, then HTTP+JSON and gRPC for 1.0) and by 0.3 clients (`url`, `protocolVersion`,
 * `preferredTransport`, `additionalInterfaces`), and it advertises only what the gateway itself implements. The
 * agent's signatures are dropped: the card changed.
 */
export function gatewayCard(agentCard: AgentCardJson, endpoints: GatewayEndpoints): Record<string, unknown> {
  const card: Record<string, unknown> = { ...agentCard };
  for (const k of AGENT_SPECIFIC) delete card[k];
  const capabilities = (agentCard.capabilities ?? {}) as Record<string, unknown>;
  const { jsonRpc, rest, grpc } = endpoints;
  return {
    ...card,
    description: agentCard.description ?? '',
    version: agentCard.version ?? '0.0.0',
    skills: agentCard.skills ?? [],
    defaultInputModes: agentCard.defaultInputModes ?? ['text/plain'],
    defaultOutputModes: agentCard.defaultOutputModes ?? ['text/plain'],
    capabilities: { ...capabilities, streaming: true, pushNotifications: true, extendedAgentCard: false, stateTransitionHistory: false },
    supportedInterfaces: [
      { url: jsonRpc, protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
      { url: jsonRpc, protocolBinding: 'JSONRPC', protocolVersion: '0.3' },
      ...(rest ? [{ url: rest, protocolBinding: 'HTTP+JSON', protocolVersion: '1.0' }] : []),
      // The gRPC port is shared: the A2A `tenant` of every request names the agent (SDK clients send it).
      ...(grpc ? [{ url: grpc.target, protocolBinding: 'GRPC', protocolVersion: '1.0', ...(grpc.tenant ? { tenant: grpc.tenant } : {}) }] : []),
    ],
    url: jsonRpc,
    preferredTransport: 'JSONRPC',
    protocolVersion: '0.3.0',
    // 0.3 lists every interface of its own protocol version: HTTP+JSON and gRPC are served in 1.0 only.
    additionalInterfaces: [{ url: jsonRpc, transport: 'JSONRPC' }],
    ...GATEWAY_SECURITY,
  };
}
