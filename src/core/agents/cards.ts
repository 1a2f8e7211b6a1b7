/**
 * Agent cards: reading the card an agent publishes (1.0 or 0.3 shape), choosing the endpoint (and binding)
 * Switchboard calls, and writing the card Switchboard publishes for it (every interface pointing at the gateway).
 */
import { z } from 'zod';
import { pathOfNul } from '../http/json-guard';
import type { AgentBinding, AgentDialect, AgentEndpoint } from '../../../task/contracts';
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
 * URL is `host:port` or has a scheme (http, https, grpc, grpcs; see src/core/http/outbound-grpc.ts).
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
export type RegisteredProtocol = '1.0' | '0.3' | '0.2' | '0.1' | 'nexus' | 'genesis';

/** The dialects whose agents may publish no card (the registration then says what a card would). */
export const CARDLESS_PROTOCOLS: readonly RegisteredProtocol[] = ['0.1', 'nexus', 'genesis'];

/**
 * The endpoint in the dialect the registration names (its card did not say, or said otherwise). The SDK-less
 * dialects (0.1, NEXUS, Genesis) have one binding each (JSON-RPC; Genesis: envelopes POSTed, kept under the
 * JSON-RPC label); NEXUS and Genesis have no stream shape, so they are called without streaming.
 * @throws BindingError when the endpoint's binding is not JSON-RPC for those.
 */
export function inDialect(endpoint: AgentEndpoint, protocol: RegisteredProtocol | undefined): AgentEndpoint {
  if (!protocol) return endpoint;
  const dialect: AgentDialect = protocol === '0.2' ? '0.3' : protocol;
  if ((dialect === '0.1' || dialect === 'nexus' || dialect === 'genesis') && (endpoint.binding ?? 'JSONRPC') !== 'JSONRPC') {
    throw new BindingError(`protocol ${protocol} is spoken over ${dialect === 'genesis' ? 'HTTP POSTs of envelopes' : 'JSON-RPC'} only, and the endpoint chosen is ${endpoint.binding}`);
  }
  const streams = dialect !== 'nexus' && dialect !== 'genesis';
  return { ...endpoint, protocolVersion: dialect, streaming: streams ? endpoint.streaming : false };
}

/**
 * The card of an agent that publishes none (0.1, NEXUS or Genesis, registered with `protocol`): what the registration
 * says about it, so search and the gateway card work as for any agent. Its one interface is the registered URL
 * (JSON-RPC, without streaming); inDialect then names the dialect.
 */
export function parsedFromRegistration(body: { url: string; name?: string; description?: string; skills?: unknown[] }): ParsedCard {
  const name = body.name ?? new URL(body.url).host;
  const card = { name, description: body.description ?? '', url: body.url, capabilities: { streaming: false }, skills: body.skills ?? [] };
  const endpoint: AgentEndpoint = { url: body.url, protocolVersion: '0.1', streaming: false, binding: 'JSONRPC' };
  return { card, name, endpoint, interfaces: [endpoint] };
}

