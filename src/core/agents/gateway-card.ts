/**
 * The cards Switchboard publishes: for a registered agent (its card, pointing clients at the gateway) and for the
 * routing front door. A card is served in the dialect its reader asks for with `A2A-Version` (as the @a2a-js/sdk
 * card handler does with legacyCompat): a 1.0 card to a 1.x reader, valid against the 1.0 schema (no 0.3 field in
 * it), which lists the 0.3 JSON-RPC interface in `supportedInterfaces` with `protocolVersion: "0.3"`; to a reader
 * that names no version ("Agents MUST interpret empty value as 0.3 version", 1.0 §3.6.2) or 0.x, a 0.3 card (`url`,
 * `preferredTransport`, `additionalInterfaces`, `protocolVersion`, OpenAPI `security`) with the 1.0 card's
 * `supportedInterfaces` beside them, so a 1.0 reader that sends no version (a2a-python's card resolver) still finds
 * its interfaces, as a2a-python's card route and a2a-js's legacy card handler serve it. Only what the gateway itself
 * implements is advertised; the agent's own interfaces, security and signatures are replaced (the card changed).
 */
import type { AgentCardJson } from './cards';

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
 * Where the gateway serves gRPC: the port it listens on (SWITCHBOARD_GRPC_PORT) and, when clients reach it
 * elsewhere (a published or proxied port: SWITCHBOARD_PUBLIC_GRPC_URL), the `host:port` they use.
 */
export interface GrpcAdvert {
  port: number;
  publicTarget?: string;
}

/**
 * The endpoints of an agent (`agentId`) or of the front door (undefined) under the gateway's base URL; gRPC when
 * the gateway serves it: at its public target, else on the base URL's host at the port it listens on.
 */
export function gatewayEndpoints(base: string, agentId: string | undefined, grpc?: GrpcAdvert): GatewayEndpoints {
  const root = agentId === undefined ? base : `${base}/agents/${agentId}`;
  const target = grpc?.port ? (grpc.publicTarget ?? `${new URL(base).hostname}:${grpc.port}`) : undefined;
  return {
    jsonRpc: `${root}/a2a`,
    rest: `${root}/rest`,
    ...(target ? { grpc: { target, ...(agentId !== undefined ? { tenant: agentId } : {}) } } : {}),
  };
}

const BEARER_FORMAT = 'Switchboard API key (sb_…) or JWT';

/** How clients authenticate to Switchboard, as each card dialect says it. Either scheme alone is enough. */
export const GATEWAY_SECURITY = {
  v1: {
    securitySchemes: {
      bearer: { httpAuthSecurityScheme: { scheme: 'Bearer', bearerFormat: BEARER_FORMAT } },
      apiKey: { apiKeySecurityScheme: { location: 'header', name: 'X-API-Key' } },
    },
    /** Any one of these requirements satisfies the card. */
    securityRequirements: [{ schemes: { bearer: { list: [] } } }, { schemes: { apiKey: { list: [] } } }],
  },
  v03: {
    securitySchemes: {
      bearer: { type: 'http', scheme: 'bearer', bearerFormat: BEARER_FORMAT },
      apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
    },
    /** OpenAPI: the same alternatives. */
    security: [{ bearer: [] }, { apiKey: [] }],
  },
} as const;

export type CardDialect = '1.0' | '0.3';

/**
 * The card dialect a reader asks for with its `A2A-Version` (header or query parameter): 1.0 for 1.x (and any later
 * version, whose readers know 1.0's card), 0.3 for 0.x and for none at all (§3.6.2: an empty version is 0.3; 0.3
 * readers send none, and pre-1.0 ones read the 0.1/0.2 path `agent.json`).
 */
export function cardDialectOf(requestedVersion: string | undefined): CardDialect {
  const v = requestedVersion?.trim();
  return !v || /^0\./.test(v) ? '0.3' : '1.0';
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const pick = (from: Json, keys: readonly string[]): Json => Object.fromEntries(keys.filter((k) => from[k] !== undefined).map((k) => [k, from[k]]));

const V1_SKILL = ['id', 'name', 'description', 'tags', 'examples', 'inputModes', 'outputModes'] as const;
const V1_EXTENSION = ['uri', 'description', 'required', 'params'] as const;
const V1_PROVIDER = ['organization', 'url'] as const;

/** The gateway card in the dialect asked for. */
export function gatewayCard(agentCard: AgentCardJson, endpoints: GatewayEndpoints, dialect: CardDialect = '1.0'): Json {
  return dialect === '1.0' ? v1Card(agentCard, endpoints) : v03Card(agentCard, endpoints);
}

/** The 1.0 interfaces: JSON-RPC for 1.0 and 0.3 first (preferred), then HTTP+JSON and gRPC (1.0). */
function supportedInterfaces({ jsonRpc, rest, grpc }: GatewayEndpoints): Json[] {
  return [
    { url: jsonRpc, protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
    { url: jsonRpc, protocolBinding: 'JSONRPC', protocolVersion: '0.3' },
    ...(rest ? [{ url: rest, protocolBinding: 'HTTP+JSON', protocolVersion: '1.0' }] : []),
    // The gRPC port is shared: the A2A `tenant` of every request names the agent (SDK clients send it).
    ...(grpc ? [{ url: grpc.target, protocolBinding: 'GRPC', protocolVersion: '1.0', ...(grpc.tenant ? { tenant: grpc.tenant } : {}) }] : []),
  ];
}

function common(agentCard: AgentCardJson): { capabilities: Json; skills: Json[]; rest: Json } {
  const card = agentCard as Json;
  const capabilities = isObject(card.capabilities) ? card.capabilities : {};
  const extensions = Array.isArray(capabilities.extensions) ? capabilities.extensions.filter(isObject).map((e) => pick(e, V1_EXTENSION)) : undefined;
  return {
    capabilities: { streaming: true, pushNotifications: true, ...(extensions?.length ? { extensions } : {}) },
    skills: (Array.isArray(card.skills) ? card.skills : []).filter(isObject).map((s) => ({ description: '', tags: [], ...pick(s, V1_SKILL) })),
    rest: {
      name: card.name,
      description: typeof card.description === 'string' ? card.description : '',
      ...(isObject(card.provider) ? { provider: pick(card.provider, V1_PROVIDER) } : {}),
      version: typeof card.version === 'string' ? card.version : '0.0.0',
      ...(typeof card.documentationUrl === 'string' ? { documentationUrl: card.documentationUrl } : {}),
      ...(typeof card.iconUrl === 'string' ? { iconUrl: card.iconUrl } : {}),
      defaultInputModes: Array.isArray(card.defaultInputModes) ? card.defaultInputModes : ['text/plain'],
      defaultOutputModes: Array.isArray(card.defaultOutputModes) ? card.defaultOutputModes : ['text/plain'],
    },
  };
}

/** A 1.0 card: the 1.0 schema's fields only. */
function v1Card(agentCard: AgentCardJson, endpoints: GatewayEndpoints): Json {
  const { capabilities, skills, rest: fields } = common(agentCard);
  return {
    ...fields,
    supportedInterfaces: supportedInterfaces(endpoints),
    capabilities: { ...capabilities, extendedAgentCard: false },
    skills,
    ...GATEWAY_SECURITY.v1,
  };
}

/**
 * A 0.3 card: 0.3 lists the interfaces of its own protocol version only, so JSON-RPC (HTTP+JSON and gRPC are served
 * in 1.0); `supportedInterfaces` beside them lists the 1.0 card's, for 1.0 readers that send no version (0.3
 * readers ignore it: the 0.3 schema allows fields it does not name).
 */
function v03Card(agentCard: AgentCardJson, endpoints: GatewayEndpoints): Json {
  const { capabilities, skills, rest: fields } = common(agentCard);
  return {
    ...fields,
    protocolVersion: '0.3.0',
    url: endpoints.jsonRpc,
    preferredTransport: 'JSONRPC',
    additionalInterfaces: [{ url: endpoints.jsonRpc, transport: 'JSONRPC' }],
    supportedInterfaces: supportedInterfaces(endpoints),
    capabilities: { ...capabilities, stateTransitionHistory: false },
    skills,
    supportsAuthenticatedExtendedCard: false,
    ...GATEWAY_SECURITY.v03,
  };
}
