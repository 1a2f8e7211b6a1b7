/**
 * Agent cards: reading the card an agent publishes (1.0 or 0.3 shape), choosing the endpoint Switchboard
 * calls, and writing the card Switchboard publishes for it (every interface pointing at the gateway).
 */
import { z } from 'zod';
import { pathOfNul } from '../a2a/schemas';
import type { AgentEndpoint } from '../../workflows/types';

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
  endpoint: AgentEndpoint;
}

export class CardError extends Error {}

/**
 * Validates a fetched card and picks the JSON-RPC interface Switchboard will call: a 1.0 interface when the
 * agent offers one, else 0.3. Relative interface URLs are resolved against the card's own URL.
 * @throws CardError saying what is wrong with the card.
 */
export function parseAgentCard(raw: unknown, cardUrl: string): ParsedCard {
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) throw new CardError('the agent card is not a JSON object');
  // PostgreSQL cannot store U+0000 in jsonb; such a card would fail at the insert instead of here.
  const nul = pathOfNul(raw);
  if (nul !== undefined) throw new CardError(`the agent card contains a NUL character (U+0000) at ${nul || 'its root'}`);
  const candidates: { url: string; version: '1.0' | '0.3' }[] = [];
  let base: z.infer<typeof CardV1> | z.infer<typeof CardV03>;
  if ('supportedInterfaces' in raw) {
    const v1 = CardV1.safeParse(raw);
    if (!v1.success) throw new CardError(`invalid 1.0 agent card: ${z.prettifyError(v1.error)}`);
    base = v1.data;
    for (const i of v1.data.supportedInterfaces) {
      const version = versionOf(i.protocolVersion ?? '1.0');
      if (i.protocolBinding === 'JSONRPC' && version) candidates.push({ url: i.url, version });
    }
  } else {
    const v03 = CardV03.safeParse(raw);
    if (!v03.success) throw new CardError(`invalid agent card (neither 1.0 supportedInterfaces nor a 0.3 url): ${z.prettifyError(v03.error)}`);
    base = v03.data;
    const version = versionOf(v03.data.protocolVersion ?? '0.3');
    if (!version) throw new CardError(`the card declares protocolVersion ${v03.data.protocolVersion}, which Switchboard does not speak (1.0, 0.3)`);
    if ((v03.data.preferredTransport ?? 'JSONRPC') === 'JSONRPC') candidates.push({ url: v03.data.url, version });
    for (const i of v03.data.additionalInterfaces ?? []) if (i.transport === 'JSONRPC') candidates.push({ url: i.url, version });
  }
  const chosen = candidates.find((c) => c.version === '1.0') ?? candidates[0];
  if (!chosen) throw new CardError('the card declares no JSON-RPC interface for protocol 1.0 or 0.3');
  let url: URL;
  try {
    url = new URL(chosen.url, cardUrl);
  } catch {
    throw new CardError(`the card's interface URL ${JSON.stringify(chosen.url)} is not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new CardError(`the card's interface URL ${url} is not http(s)`);
  return {
    card: raw as AgentCardJson,
    name: base.name,
    endpoint: { url: url.toString(), protocolVersion: chosen.version, streaming: base.capabilities?.streaming === true },
  };
}

function versionOf(v: string): '1.0' | '0.3' | undefined {
  if (/^1\.0(\.\d+)?$/.test(v)) return '1.0';
  if (/^0\.[23](\.\d+)?$/.test(v)) return '0.3';
  return undefined;
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
 * The card Switchboard publishes for a registered agent. It is readable by 1.0 clients (supportedInterfaces
 * for 1.0 and 0.3, first preferred) and by 0.3 clients (`url`, `protocolVersion`, `preferredTransport`), and it
 * advertises only what the gateway itself implements. The agent's signatures are dropped: the card changed.
 */
export function gatewayCard(agentCard: AgentCardJson, rpcUrl: string): Record<string, unknown> {
  const card: Record<string, unknown> = { ...agentCard };
  for (const k of AGENT_SPECIFIC) delete card[k];
  const capabilities = (agentCard.capabilities ?? {}) as Record<string, unknown>;
  return {
    ...card,
    description: agentCard.description ?? '',
    version: agentCard.version ?? '0.0.0',
    skills: agentCard.skills ?? [],
    defaultInputModes: agentCard.defaultInputModes ?? ['text/plain'],
    defaultOutputModes: agentCard.defaultOutputModes ?? ['text/plain'],
    capabilities: { ...capabilities, streaming: true, pushNotifications: true, extendedAgentCard: false, stateTransitionHistory: false },
    supportedInterfaces: [
      { url: rpcUrl, protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
      { url: rpcUrl, protocolBinding: 'JSONRPC', protocolVersion: '0.3' },
    ],
    url: rpcUrl,
    preferredTransport: 'JSONRPC',
    protocolVersion: '0.3.0',
    ...GATEWAY_SECURITY,
  };
}
