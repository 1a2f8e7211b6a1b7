/**
 * Calling an agent that speaks Genesis Nexus envelopes (seed 002's receiving side) through the SDK's Transport
 * interface, so the forwarding activity (retries, timeouts, the guarded client) runs it as any other dialect.
 *
 * A turn is one envelope POSTed to the agent's URL: the COMMAND (or QUERY) a Genesis sender sent through
 * `POST /genesis/messages`, as its message's `metadata.genesis` describes it, or a COMMAND made from an A2A message
 * (its text, when it is a JSON `{action, parameters}`, else `action: "message"`). The envelope id is the message's
 * messageId, so every attempt sends the same id. It is signed with the agent's own Genesis secret (the seed's
 * signMessage: the only secret the agent shares with Switchboard), and its `{action, payload}` encrypted with the
 * pair key derived from that secret when the sender encrypted its own.
 *
 * The agent answers with a RESPONSE envelope in the HTTP body (SUCCESS: completed, FAILURE: failed, PARTIAL:
 * still working), or acknowledges (any other 2xx) and POSTs its RESPONSE to `/genesis/messages` later, where it
 * is recorded on the request (src/api/genesis/service.ts: a sender's request, or one the gateway made and kept before
 * sending it); following the task (GetTask) reads that record, woken by it (GenesisLink.onResponse).
 */
import { randomUUID } from 'node:crypto';
import { type CancelTaskRequest, type GetTaskRequest, SendMessageRequest, StreamResponse, Task } from '@a2a-js/sdk';
import type { RequestOptions, Transport, TransportFactory } from '@a2a-js/sdk/client';
import type { TaskState, WireArtifact, WireMessage, WirePart, WireTask } from '../../../../task/wire';
import { type LegacyTransportOptions, SdkLessTransport, objectOr, unsupported } from './json-rpc';

/**
 * An envelope before it is signed: the fields the seed's signature covers, the confidential ones (encrypted when
 * `encrypt`), and the rest.
 */
export interface EnvelopeDraft {
  header: { id: string; type: string; version: string; timestamp: number; from: unknown; to: unknown };
  confidential: Record<string, unknown>;
  rest: { correlationId: string; priority: string; ttl: number; requiresAck: boolean };
  encrypt: boolean;
}

/**
 * What the dialect asks of Switchboard besides HTTP, about one agent (activities/genesis.ts genesisLink: the
 * envelope crypto lives with the Genesis service, src/core/genesis/envelope.ts, which this folder does not import).
 */
export interface GenesisLink {
  /** The agent's id: the `to` of what it is sent when the request named none. */
  agentId: string;
  /**
   * The envelope as sent: signed with the agent's Genesis secret (unsigned when it has none), its confidential
   * fields encrypted with the pair key of that secret when the draft asks. @throws Error when it asks and there is no secret.
   */
  seal(draft: EnvelopeDraft): Promise<Record<string, unknown>>;
  /** A RESPONSE the agent answered with, its signature checked and its fields decrypted. @throws Error naming what is wrong. */
  open(answer: Record<string, unknown>): Promise<Record<string, unknown>>;
  /** The latest RESPONSE the agent POSTed to /genesis/messages for request `requestId`, as recorded (checked, decrypted). */
  response(requestId: string): Promise<Record<string, unknown> | undefined>;
  /** Keeps a request the gateway made (no Genesis sender) before it is sent, so that a RESPONSE to it can come later. */
  remember(draft: EnvelopeDraft, envelope: Record<string, unknown>): Promise<void>;
  /** Calls `listener` when a RESPONSE to `requestId` is recorded (in any process). @returns the unsubscribe. */
  onResponse(requestId: string, listener: () => void): () => void;
}

/**
 * What the gateway's Genesis intake puts in a COMMAND's (or forwarded QUERY's) message as `metadata.genesis`
 * (src/api/genesis/service.ts): the envelope as its sender sent it, for the agent to get the same.
 */
export interface GenesisOrigin {
  id: string;
  type?: 'COMMAND' | 'QUERY';
  /** The sender's agent id. */
  from: string;
  /** `from` and `to` as the sender wrote them (an id or an AgentIdentity object). */
  sender?: unknown;
  recipient?: unknown;
  action: string;
  payload?: unknown;
  priority?: string;
  timestamp?: number;
  ttl?: number;
  correlationId?: string;
  requiresAck?: boolean;
  /** The sender encrypted its envelope: the agent's is encrypted too. */
  encrypted?: boolean;
  workflowId?: string;
}

/** The sender of a COMMAND made from an A2A message (no Genesis sender): the gateway. */
export const GATEWAY_IDENTITY = 'switchboard';
/** The resource a liveness or detection probe asks about: a QUERY get_status of it starts nothing. */
const PROBE_RESOURCE = 'switchboard-liveness-probe';

const STATES: Record<string, TaskState> = { SUCCESS: 'TASK_STATE_COMPLETED', FAILURE: 'TASK_STATE_FAILED', PARTIAL: 'TASK_STATE_WORKING' };

export class GenesisTransport extends SdkLessTransport implements Transport {
  protected readonly dialect = 'Genesis Nexus';

  constructor(
    private readonly url: string,
    private readonly fetchImpl: typeof fetch,
    private readonly link: GenesisLink | undefined,
  ) {
    super();
  }

  get protocolVersion(): string {
    return 'genesis';
  }

  async sendMessage(params: SendMessageRequest, options?: RequestOptions): Promise<Task> {
    const { message } = SendMessageRequest.toJSON(params) as { message: WireMessage };
    const draft = draftOf(message, this.link?.agentId ?? 'agent');
    const envelope = this.link ? await this.link.seal(draft) : unsigned(draft);
    const id = draft.header.id;
    if (this.link && draft.header.from === GATEWAY_IDENTITY) await this.link.remember(draft, envelope);
    const res = await this.fetchImpl(this.url, {
      method: 'POST',
      headers: { ...options?.serviceParameters, 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify(envelope),
      signal: options?.signal,
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`the agent refused the ${draft.header.type} envelope (HTTP ${res.status}): ${text.slice(0, 200)}`);
    const answer = responseIn(text, id);
    const contextId = message.contextId ?? '';
    // Any other 2xx acknowledges the envelope: the RESPONSE comes to POST /genesis/messages later.
    if (!answer) return Task.fromJSON(workingTask(id, contextId));
    return Task.fromJSON(taskOfResponse(this.link ? await this.link.open(answer) : plain(answer), id, contextId));
  }

  async *sendMessageStream(params: SendMessageRequest, options?: RequestOptions): AsyncGenerator<StreamResponse, void, undefined> {
    yield StreamResponse.fromJSON({ task: Task.toJSON(await this.sendMessage(params, options)) });
  }

  /** The agent's RESPONSE to envelope `id` as POSTed to /genesis/messages (already checked there), or still working. */
  async getTask(params: GetTaskRequest): Promise<Task> {
    const recorded = await this.link?.response(params.id);
    return Task.fromJSON(recorded ? taskOfResponse(recorded, params.id, '') : workingTask(params.id, ''));
  }

  cancelTask(_params: CancelTaskRequest): never {
    return unsupported(this.dialect, 'canceling');
  }
  resubscribeTask(): never {
    return unsupported(this.dialect, 'resubscribing');
  }
}

export class GenesisTransportFactory implements TransportFactory {
  constructor(
    private readonly opts: LegacyTransportOptions,
    private readonly link: GenesisLink | undefined,
  ) {}

  get protocolName(): string {
    return 'JSONRPC';
  }

  async create(url: string): Promise<Transport> {
    return new GenesisTransport(url, this.opts.fetchImpl, this.link);
  }
}

/** The envelope a turn sends, before it is signed: the sender's (metadata.genesis), or a COMMAND made from the message. */
export function draftOf(message: WireMessage, agentId: string): EnvelopeDraft {
  const origin = originOf(message);
  const made = origin ? undefined : commandOf(message);
  return {
    header: {
      id: message.messageId,
      type: origin?.type ?? 'COMMAND',
      version: '1.0.0',
      timestamp: origin?.timestamp ?? Date.now(),
      from: origin ? (origin.sender ?? origin.from) : GATEWAY_IDENTITY,
      to: origin?.recipient ?? agentId,
    },
    confidential: origin ? { action: origin.action, payload: origin.payload ?? {} } : made!,
    rest: { correlationId: origin?.correlationId ?? message.messageId, priority: origin?.priority ?? 'normal', ttl: origin?.ttl ?? 0, requiresAck: origin?.requiresAck ?? false },
    encrypt: origin?.encrypted ?? false,
  };
}

/** A draft as an envelope in the seed's field order, with `signature` and its confidential fields (or their `encryption`). */
export function envelopeFrom(draft: EnvelopeDraft, sealed: { signature: string; encryption?: unknown }): Record<string, unknown> {
  const { correlationId, ...rest } = draft.rest;
  return {
    ...draft.header,
    correlationId,
    ...(sealed.encryption ? { encryption: sealed.encryption } : draft.confidential),
    signature: sealed.signature,
    ...rest,
    requiresSignature: sealed.signature !== '',
  };
}

/** Without a link (nothing to sign with): unsigned. @throws Error when the draft asks for encryption. */
function unsigned(draft: EnvelopeDraft): Record<string, unknown> {
  if (draft.encrypt) throw new Error('the envelope must be encrypted, and there is no Genesis secret to derive the pair key from');
  return envelopeFrom(draft, { signature: '' });
}

/** Without a link: an encrypted RESPONSE cannot be read, a clear one is taken as it is. */
function plain(answer: Record<string, unknown>): Record<string, unknown> {
  if (answer.encryption) throw new Error("the agent's RESPONSE is encrypted, and there is no Genesis secret to derive the pair key from");
  return answer;
}

function originOf(message: WireMessage): GenesisOrigin | undefined {
  const g = objectOr(message.metadata?.genesis);
  return g && typeof g.action === 'string' && typeof g.from === 'string' ? (g as unknown as GenesisOrigin) : undefined;
}

/** A COMMAND from an A2A message: its text as `{action, parameters}` when it is that JSON, else action `message`. */
function commandOf(message: WireMessage): { action: string; payload: Record<string, unknown> } {
  const text = message.parts.map((p) => p.text ?? '').join('');
  try {
    const parsed = objectOr(JSON.parse(text));
    if (parsed && typeof parsed.action === 'string') {
      return { action: parsed.action, payload: { ...(objectOr(parsed.parameters) ? { parameters: parsed.parameters } : {}) } };
    }
  } catch {
    // not JSON: the text is the parameter
  }
  const data = message.parts.filter((p) => p.data !== undefined).map((p) => p.data);
  return { action: 'message', payload: { parameters: { text, ...(data.length ? { data } : {}) } } };
}

/** The RESPONSE to envelope `id` in an answer's body; undefined when the body is no RESPONSE (an acknowledgement). */
function responseIn(text: string, id: string): Record<string, unknown> | undefined {
  let body: Record<string, unknown> | undefined;
  try {
    body = objectOr(JSON.parse(text));
  } catch {
    return undefined;
  }
  if (!body || (body.type !== 'RESPONSE' && body.type !== 3)) return undefined;
  if (body.requestId !== id && body.correlationId !== id) {
    throw new Error(`the agent answered with a RESPONSE to ${JSON.stringify(body.requestId ?? body.correlationId)}, not to envelope ${id}`);
  }
  return body;
}

function workingTask(id: string, contextId: string): WireTask {
  return { id, contextId, status: { state: 'TASK_STATE_WORKING' } };
}

/**
 * A RESPONSE as the agent's task: its status as the state, its `data` as the status message and an artifact, its
 * `error` as the status message's text, and the RESPONSE's own fields in metadata `genesisResponse`.
 * @throws Error for a status the seed does not have.
 */
export function taskOfResponse(r: Record<string, unknown>, id: string, contextId: string): WireTask {
  const state = typeof r.status === 'string' ? STATES[r.status] : undefined;
  if (!state) throw new Error(`the agent's RESPONSE has status ${JSON.stringify(r.status)}; the seed's are SUCCESS, FAILURE and PARTIAL`);
  const error = objectOr(r.error);
  const parts: WirePart[] = [
    ...(error ? [{ text: `${String(error.message ?? 'failed')}${error.code !== undefined ? ` (${String(error.code)})` : ''}` }] : []),
    ...(r.data !== undefined ? [partOf(r.data)] : []),
  ];
  const message: WireMessage | undefined = parts.length ? { messageId: randomUUID(), role: 'ROLE_AGENT', parts } : undefined;
  const artifacts: WireArtifact[] = r.data !== undefined && state !== 'TASK_STATE_WORKING' ? [{ artifactId: 'genesis-response', name: 'response', parts: [partOf(r.data)] }] : [];
  const kept = ['id', 'status', 'data', 'error', 'confidence', 'sources', 'processingTime'].filter((k) => r[k] !== undefined);
  return {
    id,
    contextId,
    status: { state, ...(message ? { message } : {}) },
    artifacts,
    metadata: { genesisResponse: Object.fromEntries(kept.map((k) => [k, r[k]])) },
  };
}

/** Data as a part: a string as text, an object as data, anything else as its JSON text. */
function partOf(data: unknown): WirePart {
  if (typeof data === 'string') return { text: data };
  if (objectOr(data)) return { data };
  return { text: JSON.stringify(data), mediaType: 'application/json' };
}

/**
 * Asks the URL a QUERY `get_status` about a resource that does not exist (the seed's read; unsigned: the probe has
 * no secret), the way the refresh probes a Genesis agent and registration recognises one.
 * `to` is the agent's id when it has one.
 * @returns the HTTP status (undefined: no answer) and whether the body was a RESPONSE envelope to the probe.
 */
export async function askGenesis(fetchImpl: typeof fetch, url: string, timeoutMs: number, to = 'agent'): Promise<{ status?: number; response: boolean; error?: unknown }> {
  const id = `switchboard-probe-${randomUUID()}`;
  const envelope = {
    id, type: 'QUERY', version: '1.0.0', timestamp: Date.now(), from: GATEWAY_IDENTITY, to, correlationId: id,
    action: 'get_status', payload: { resourceId: PROBE_RESOURCE }, signature: '', priority: 'low', ttl: timeoutMs, requiresAck: false, requiresSignature: false,
  };
  try {
    const res = await fetchImpl(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify(envelope),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    let response = false;
    try {
      response = responseIn(text, id) !== undefined;
    } catch {
      response = false;
    }
    return { status: res.status, response };
  } catch (error) {
    return { response: false, error };
  }
}
