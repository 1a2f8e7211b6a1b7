/**
 * POST /genesis/messages: one Genesis Nexus envelope, checked and applied. In order: its shape, its sender and
 * recipient (agents of the caller's tenant), its signature, whether its id was seen (a replay is answered as the
 * first time and applies nothing again), the clock skew and ttl, decryption, then the typed shape, and only
 * then is it applied:
 * - COMMAND: a task for the `to` agent through the A2A task intake (TaskIntake + TaskGateway, the envelope id
 *   as messageId), started with the envelope's priority; answered with the task's outcome, or at once with an
 *   ack when requiresAck (the result is then fetched with GET /genesis/messages/:id).
 * - QUERY: get_status (a task's state), get_metrics (an agent's telemetry), get_state (a task's workflow); to an
 *   agent that speaks envelopes, a task as for a COMMAND (the agent answers it).
 * - RESPONSE: an agent's answer to a request it was sent, recorded on that request (an envelope-speaking agent's
 *   completes the request's task: its forwarding reads it).
 * - EVENT: a durable fan-out to the topic's subscribers (workflows/genesis-events.ts).
 * Every apply is idempotent, so a replay whose first handling never finished is applied again safely.
 */
import type { Client } from '@temporalio/client';
import { toJsonRpcError } from '@a2a-js/sdk/errors';
import { protocolError } from '../a2a/errors';
import { z } from 'zod';
import type { AgentRegistry } from '../../core/agents/registry';
import type { Caller } from '../../core/auth/caller';
import { type IntakeDeps, TaskIntake } from '../a2a/task-intake';
import type { WireMessage, WireTask } from '../../../task/wire';
import { outageOf } from '../../core/health';
import { reputationOf } from '../../core/trust/reputation';
import { workflowIdOf } from '../../core/temporal/task-gateway';
import { endsTurn, isTerminal, stateLabel } from '../../../task/rules';
import { closesStream } from '../../core/events/event-log';
import { followEvents } from '../../core/events/follow';
import type { GenesisEventWorkflow } from '../../../task/contracts';
import {
  type AnswerOptions,
  Envelope,
  EnvelopeError,
  EnvelopeHeader,
  PRIORITY_KEYS,
  type ResponseStatus,
  answerEnvelope,
  contentDigestOf,
  decryptFields,
  idOf,
  pairKey,
  verifySignature,
} from '../../core/genesis/envelope';
import { type GenesisStore, type MessageRow, type SentAnswer, type StoredAnswer, sentAnswerOf } from '../../core/genesis/store';
import { GATEWAY_IDENTITY, type GenesisOrigin } from '../../core/agents/transports/genesis';
import { ERRORS } from '../../../task/errors';

export interface GenesisDeps {
  store: GenesisStore;
  registry: AgentRegistry;
  /** What a new task needs (the same as the A2A endpoints'). */
  intake: IntakeDeps;
  temporal: Client;
  taskQueue: string;
  /** How far an envelope's timestamp may be from now, either way (SWITCHBOARD_GENESIS_MAX_SKEW_MS). */
  maxSkewMs: number;
  /** First retry delay of a failed event delivery (ms); default 1 s. */
  eventRetryInitialMs?: number;
}

/** Temporal workflow id of a published event: one fan-out per envelope id, however often it is sent. */
export const eventWorkflowIdOf = (tenant: string, messageId: string) => `genesis-event:${tenant}:${messageId}`;

/** A task's state as a RESPONSE status: done, failed (or canceled/rejected), or not (yet) done. */
export function responseStatusOf(task: WireTask): ResponseStatus {
  const s = task.status.state;
  if (s === 'TASK_STATE_COMPLETED') return 'SUCCESS';
  return isTerminal(s) ? 'FAILURE' : 'PARTIAL';
}

/** A RESPONSE status as the task state it reports (for an agent's RESPONSE to a COMMAND). */
export const TASK_STATE_OF_STATUS = { SUCCESS: 'completed', FAILURE: 'failed', PARTIAL: 'working' } as const;

interface Checked {
  envelope: Envelope;
  fromId: string;
  toId: string;
  secret?: string;
  key?: Buffer;
  /** When the gateway took the envelope in: an answer's processingTime counts from here. */
  receivedAt: number;
  /** Aborts when the sender stops waiting (its connection closed). */
  signal?: AbortSignal;
}

/** The sender closed its connection before its answer was ready: nothing to answer, nothing to log. */
export class SenderGone extends Error {
  constructor() {
    super('the sender closed its connection before the answer was ready');
  }
}

export class GenesisService {
  constructor(private readonly d: GenesisDeps) {}

  /**
   * @returns the HTTP status and the JSON text to answer with: a replay gets the first answer's bytes again.
   * @throws EnvelopeError for a refusal (nothing applied).
   */
  async handle(caller: Caller, body: unknown, headers: Record<string, string | string[] | undefined>, text?: string, signal?: AbortSignal): Promise<SentAnswer> {
    const header = EnvelopeHeader.safeParse(body);
    if (!header.success) throw new EnvelopeError(400, `Invalid envelope: ${z.prettifyError(header.error)}`);
    const h = header.data;
    const raw = body as Record<string, unknown>;
    const tenant = caller.tenant;
    // `from` and `to` as sent (ids or registered names): the pair key is derived from them, as the sender did.
    const [fromRef, toRef] = [idOf(h.from), idOf(h.to)];
    const fromId = await this.agentIdOf(tenant, fromRef, 'from');
    if (caller.role === 'agent' && caller.agentId !== fromId) {
      throw new EnvelopeError(403, `An agent key sends envelopes only from its own agent (${caller.agentId}), not from ${fromId}`);
    }
    const broadcast = h.type === 'EVENT' && toRef === '*';
    // A RESPONSE to a COMMAND the gateway made from an A2A message goes back to the gateway itself.
    const toGateway = h.type === 'RESPONSE' && toRef === GATEWAY_IDENTITY;
    const toId = broadcast || toGateway ? toRef : await this.agentIdOf(tenant, toRef, 'to');

    // A sender with a secret always signs: otherwise anyone with a key of the tenant could speak for it.
    const secret = await this.d.store.secretOf(tenant, fromId);
    if (h.requiresSignature || secret) {
      if (!secret) throw new EnvelopeError(401, `requiresSignature is set but agent ${fromId} has no Genesis secret (POST /agents/${fromId}/genesis-secret issues one)`);
      if (!verifySignature({ ...raw, signature: h.signature } as Parameters<typeof verifySignature>[0], secret)) {
        throw new EnvelopeError(401, 'signature: not the HMAC-SHA256 (hex) of JSON.stringify({id, type, from, to, timestamp}) with the sender\'s Genesis secret');
      }
    }

    // Replays: the same content (any field, signed or not) is answered as the first time; other content under a
    // used id is refused, however its signed fields match (the signature covers five fields only).
    const digest = contentDigestOf(raw);
    const seen = await this.d.store.find(tenant, h.id);
    if (seen) {
      const remembered = seen.rememberUntil.getTime() > Date.now();
      const signedFieldsDiffer = seen.type !== h.type || seen.fromAgent !== fromId || seen.toAgent !== toId || seen.envelope.timestamp !== h.timestamp;
      if (seen.contentDigest ? seen.contentDigest !== digest : remembered && signedFieldsDiffer) throw reusedId(h.id);
      const first = remembered && sentAnswerOf(seen);
      if (first) return first;
    }

    const now = Date.now();
    if (Math.abs(now - h.timestamp) > this.d.maxSkewMs) {
      throw new EnvelopeError(400, `timestamp: ${h.timestamp} is ${Math.round((now - h.timestamp) / 1000)} s from the gateway's clock; at most ${this.d.maxSkewMs / 1000} s either way is accepted`);
    }
    const expiresAt = h.ttl > 0 ? h.timestamp + h.ttl : undefined;
    if (expiresAt !== undefined && expiresAt <= now) throw new EnvelopeError(400, `ttl: the envelope expired ${now - expiresAt} ms ago (timestamp + ttl); nothing was applied`);

    let key: Buffer | undefined;
    let fields: Record<string, unknown> = raw;
    if (h.encryption) {
      if (!secret) throw new EnvelopeError(400, `encryption: agent ${fromId} has no Genesis secret, so there is no pair key to decrypt with`);
      key = pairKey(secret, fromRef, toRef);
      const { encryption: _sealed, ...clear } = raw;
      fields = { ...clear, ...decryptFields(key, h.encryption) };
    }
    // Numeric enum members (see envelope.ts) by name, as the header read them.
    const parsed = Envelope.safeParse({ ...fields, type: h.type, priority: h.priority });
    if (!parsed.success) throw new EnvelopeError(400, `Invalid ${h.type} envelope: ${z.prettifyError(parsed.error)}`);
    const checked: Checked = { envelope: parsed.data, fromId, toId, secret, key, receivedAt: now, signal };

    const { encryption: _e, ...stored } = parsed.data;
    const claimed = await this.d.store.claim({
      tenant,
      id: h.id,
      type: h.type,
      fromAgent: fromId,
      toAgent: toId,
      encrypted: !!key,
      envelope: stored,
      // What subscribers get: the bytes as sent (their signature checks read fields in the sender's key order),
      // or for an encrypted envelope its fields as decrypted, in the sender's order.
      envelopeText: key ? JSON.stringify(fields) : (text ?? JSON.stringify(raw)),
      contentDigest: digest,
      expiresAt: expiresAt === undefined ? undefined : new Date(expiresAt),
      // Past this, a replay is refused anyway: by the ttl, or by the skew.
      rememberUntil: new Date(h.timestamp + Math.max(h.ttl, this.d.maxSkewMs) + 1000),
    });
    // Claimed meanwhile by a concurrent first: the same envelope is applied again (every apply is idempotent) and
    // gets the answer that stands; another one under its id is refused as above.
    if (!claimed) {
      const other = await this.d.store.find(tenant, h.id);
      if (other?.contentDigest && other.contentDigest !== digest) throw reusedId(h.id);
    }
    let answer: StoredAnswer;
    try {
      answer = await this.apply(caller, checked, headers);
    } catch (err) {
      // The sender went away while its COMMAND ran: the claim stays unanswered, so sending it again waits anew.
      if (signal?.aborted) throw new SenderGone();
      const rpc = err instanceof EnvelopeError || outageOf(err) ? undefined : toJsonRpcError(protocolError(err));
      if (!rpc || rpc.code === ERRORS.Internal.code) {
        // A refusal, an outage (503) or a bug: nothing is remembered, so sending it again applies it.
        await this.d.store.unclaim(tenant, h.id);
        throw err;
      }
      // An A2A refusal (quota, funds, unknown task…): the answer, as the first time on a replay.
      answer = { status: 200, body: this.answer(checked, 'FAILURE', { error: { code: rpc.code, message: rpc.message } }) };
    }
    return this.d.store.setAnswer(tenant, h.id, answer);
  }

  /**
   * GET /genesis/messages/:id: what became of an envelope: the answer given, and for a COMMAND its result now (a
   * RESPONSE envelope, PARTIAL until the task is done), for an EVENT each subscriber's delivery.
   */
  async view(caller: Caller, id: string): Promise<Record<string, unknown> | undefined> {
    const row = await this.d.store.find(caller.tenant, id);
    if (!row) return undefined;
    if (caller.role === 'agent' && caller.agentId !== row.fromAgent && caller.agentId !== row.toAgent) return undefined;
    const out: Record<string, unknown> = {
      id: row.id,
      type: row.type,
      from: row.fromAgent,
      to: row.toAgent,
      encrypted: row.encrypted,
      receivedAt: row.createdAt.toISOString(),
      ...(row.expiresAt ? { expiresAt: row.expiresAt.toISOString() } : {}),
      answer: row.answer?.body ?? null,
    };
    if (row.taskId) {
      const task = await this.d.intake.gateway.get(caller.tenant, row.taskId);
      out.taskId = row.taskId;
      out.result = await this.resultOf(row, task);
    }
    if (row.response) out.response = row.response;
    if (row.type === 'EVENT') out.deliveries = await this.d.store.deliveries(caller.tenant, row.id);
    return out;
  }

  private async resultOf(row: MessageRow, task: WireTask): Promise<Record<string, unknown>> {
    const secret = await this.d.store.secretOf(row.tenant, row.fromAgent);
    const env = row.envelope as unknown as Envelope;
    return answerEnvelope({
      request: env,
      status: responseStatusOf(task),
      ...answerFields(task),
      secret,
      key: row.encrypted && secret ? pairKey(secret, idOf(env.from), idOf(env.to)) : undefined,
    });
  }

  private answer(c: Checked, status: ResponseStatus, more: Omit<AnswerOptions, 'request' | 'status' | 'secret' | 'key' | 'processingTime'> = {}) {
    return answerEnvelope({ request: c.envelope, status, ...more, secret: c.secret, key: c.key, processingTime: Date.now() - c.receivedAt });
  }

  /**
   * The agent an AgentIdentity names: its id, or the name it registered with (the one agent of the tenant so
   * named). @throws EnvelopeError 404 for none, 409 when several agents share the name.
   */
  private async agentIdOf(tenant: string, ref: string, field: 'from' | 'to'): Promise<string> {
    if (await this.d.registry.get(tenant, ref)) return ref;
    const named = await this.d.store.agentsNamed(tenant, ref);
    if (named.length === 1) return named[0]!;
    if (named.length > 1) throw new EnvelopeError(409, `${field}: ${named.length} agents of this tenant are named ${ref} (${named.join(', ')}); address one by its id`);
    throw new EnvelopeError(404, `${field}: no agent ${ref} in this tenant (by id or registered name)`);
  }

  private async apply(caller: Caller, c: Checked, headers: Record<string, string | string[] | undefined>): Promise<StoredAnswer> {
    const e = c.envelope;
    switch (e.type) {
      case 'COMMAND':
        return this.command(caller, c, e, headers);
      case 'QUERY':
        // An agent that speaks envelopes answers its QUERYs itself (as a task, like a COMMAND); others' the gateway answers.
        if ((await this.d.registry.get(caller.tenant, c.toId))?.endpoint.protocolVersion === 'genesis') return this.command(caller, c, e, headers);
        return { status: 200, body: this.answer(c, 'SUCCESS', { data: await this.query(caller.tenant, e.action, e.payload.resourceId) }) };
      case 'RESPONSE':
        return this.response(caller.tenant, c, e);
      case 'EVENT':
        return this.publish(caller.tenant, c, e);
    }
  }

  /**
   * A COMMAND (or a QUERY to an agent that speaks envelopes) as a task for the `to` agent. The message's
   * `metadata.genesis` is the envelope as sent, which the Genesis transport sends such an agent
   * (src/core/agents/transports/genesis.ts).
   */
  private async command(caller: Caller, c: Checked, e: Extract<Envelope, { type: 'COMMAND' | 'QUERY' }>, headers: Record<string, string | string[] | undefined>): Promise<StoredAnswer> {
    const agent = (await this.d.registry.get(caller.tenant, c.toId))!;
    if (agent.endpoint.protocolVersion === 'genesis' && c.key && !(await this.d.store.secretOf(caller.tenant, c.toId))) {
      throw new EnvelopeError(422, `encryption: agent ${c.toId} speaks envelopes and has no Genesis secret, so what it is sent cannot be encrypted for it (POST /agents/${c.toId}/genesis-secret issues one); nothing was applied`);
    }
    const asked = e.type === 'COMMAND' ? (e.payload.parameters ? { parameters: e.payload.parameters } : {}) : { resourceId: e.payload.resourceId };
    const origin: GenesisOrigin = {
      id: e.id,
      type: e.type,
      from: c.fromId,
      sender: e.from,
      recipient: e.to,
      action: e.action,
      payload: e.payload,
      priority: e.priority,
      timestamp: e.timestamp,
      ttl: e.ttl,
      ...(e.correlationId ? { correlationId: e.correlationId } : {}),
      requiresAck: e.requiresAck,
      encrypted: !!c.key,
      ...(e.type === 'COMMAND' && e.payload.workflowId ? { workflowId: e.payload.workflowId } : {}),
    };
    const message: WireMessage = {
      messageId: e.id,
      role: 'ROLE_USER',
      parts: [{ text: JSON.stringify({ action: e.action, ...asked }), mediaType: 'application/json' }],
      metadata: { genesis: origin },
    };
    const intake = new TaskIntake(agent, caller, this.d.intake, '1.0');
    // Started without waiting for the turn to end, also for a synchronous COMMAND: that one is answered by
    // firstAnswer, which does not wait past a PARTIAL.
    const prepared = await intake.prepare(message, { returnImmediately: true }, undefined, headers);
    if (e.ttl > 0) prepared.input.expiresAt = e.timestamp + e.ttl;
    await this.d.store.setTask(caller.tenant, e.id, prepared.input.taskId);
    const started = await this.d.intake.gateway.start(prepared.input, prepared.args, { priority: { priorityKey: PRIORITY_KEYS[e.priority] } });
    if (e.requiresAck) {
      return { status: 202, body: this.answer(c, 'PARTIAL', { action: 'ack', data: { acknowledged: true, taskId: started.id, state: stateLabel(started.status.state), result: `/genesis/messages/${e.id}` } }) };
    }
    const task = await this.firstAnswer(caller.tenant, started, c.signal);
    return { status: 200, body: this.answer(c, responseStatusOf(task), answerFields(task)) };
  }

  /**
   * A synchronous COMMAND's answer: its task once the turn ends (done, failed, or waiting for input), or as soon as
   * its agent answers PARTIAL (an envelope-speaking agent's RESPONSE, which the forwarding logs as the task's
   * progress: a working status with the RESPONSE in metadata `genesisResponse`). The seed's sender gets that
   * PARTIAL RESPONSE as the agent gave it; what follows is at GET /genesis/messages/:id.
   * @throws SenderGone when the sender stops waiting first.
   */
  private async firstAnswer(tenant: string, started: WireTask, signal?: AbortSignal): Promise<WireTask> {
    const { pool, hub, gateway } = this.d.intake;
    if (endsTurn(started.status.state)) return started;
    for await (const { event } of followEvents({ pool, hub, tenant, taskId: started.id, afterSeq: 0, signal })) {
      if (!('statusUpdate' in event)) continue;
      if (closesStream(event)) return gateway.get(tenant, started.id);
      const response = event.statusUpdate.metadata?.genesisResponse as { status?: unknown } | undefined;
      if (response?.status !== 'PARTIAL') continue;
      const task = await gateway.get(tenant, started.id);
      return isTerminal(task.status.state) ? task : { ...task, status: event.statusUpdate.status, metadata: { ...task.metadata, genesisResponse: response } };
    }
    throw new SenderGone();
  }

  private async query(tenant: string, action: Extract<Envelope, { type: 'QUERY' }>['action'], resourceId: string): Promise<unknown> {
    if (action === 'get_metrics') {
      const agent = await this.d.registry.get(tenant, resourceId);
      if (!agent) throw new EnvelopeError(404, `payload.resourceId: no agent ${resourceId} in this tenant`);
      const probes = await this.d.registry.probes(tenant, resourceId);
      const latencies = probes.map((p) => p.latencyMs).filter((l): l is number => l !== null);
      return {
        agentId: agent.id,
        status: agent.status,
        statusReason: agent.statusReason,
        liveness: { consecutiveFailures: agent.consecutiveFailures, lastProbe: agent.lastProbe, recentProbes: probes.length, meanLatencyMs: latencies.length ? latencies.reduce((a, b) => a + b, 0) / latencies.length : null },
        reputation: (await reputationOf(this.d.intake.pool, tenant, resourceId)) ?? null,
      };
    }
    // A COMMAND's envelope id names its task too.
    const taskId = (await this.d.store.find(tenant, resourceId))?.taskId ?? resourceId;
    const task = await this.d.intake.gateway.get(tenant, taskId);
    if (action === 'get_status') return { taskId, state: stateLabel(task.status.state), status: task.status };
    const described = await this.d.temporal.workflow
      .getHandle(workflowIdOf(tenant, taskId))
      .describe()
      .then(
        (d) => ({ workflowId: d.workflowId, runId: d.runId, status: d.status.name, priority: d.priority, historyLength: d.historyLength, startTime: d.startTime.toISOString(), closeTime: d.closeTime?.toISOString() ?? null }),
        () => null, // closed and past retention: the task's own state below still answers
      );
    return { taskId, workflow: described, task };
  }

  private async response(tenant: string, c: Checked, e: Extract<Envelope, { type: 'RESPONSE' }>): Promise<StoredAnswer> {
    const request = await this.d.store.find(tenant, e.requestId);
    if (!request || request.type === 'RESPONSE') throw new EnvelopeError(404, `requestId: no request ${e.requestId} in this tenant`);
    if (request.toAgent !== c.fromId) throw new EnvelopeError(403, `requestId: request ${e.requestId} was sent to ${request.toAgent}; only that agent may answer it`);
    const { encryption: _e, signature: _s, ...response } = e;
    await this.d.store.setResponse(tenant, e.requestId, { ...response, taskState: TASK_STATE_OF_STATUS[e.status] });
    return { status: 200, body: this.answer(c, 'SUCCESS', { data: { recorded: true, requestId: e.requestId, taskState: TASK_STATE_OF_STATUS[e.status] } }) };
  }

  private async publish(tenant: string, c: Checked, e: Extract<Envelope, { type: 'EVENT' }>): Promise<StoredAnswer> {
    const subscriptions = await this.d.store.subscriptions(tenant, { eventType: e.eventType, agentId: c.toId === '*' ? undefined : c.toId });
    const ids = subscriptions.map((s) => s.id);
    await this.d.store.createDeliveries(tenant, e.id, ids);
    await this.d.temporal.workflow.start<GenesisEventWorkflow>('genesisEventWorkflow', {
      workflowId: eventWorkflowIdOf(tenant, e.id),
      taskQueue: this.d.taskQueue,
      args: [{ tenant, messageId: e.id, guarantee: e.deliveryGuarantee, expiresAt: e.ttl > 0 ? e.timestamp + e.ttl : undefined, subscriptionIds: ids, retryInitialMs: this.d.eventRetryInitialMs }],
      // The same envelope sent again finds its fan-out rather than starting another.
      workflowIdConflictPolicy: 'USE_EXISTING',
      priority: { priorityKey: PRIORITY_KEYS[e.priority] },
      staticSummary: `Genesis EVENT ${e.eventType}/${e.eventName} → ${ids.length} subscriber(s), ${e.deliveryGuarantee}, priority ${e.priority}`,
    });
    return { status: 202, body: this.answer(c, 'SUCCESS', { data: { published: true, eventType: e.eventType, subscribers: ids.length, deliveryGuarantee: e.deliveryGuarantee, deliveries: `/genesis/messages/${e.id}` } }) };
  }
}

/** A used envelope id with other content: refused, the first envelope's answer stands. */
const reusedId = (id: string) =>
  new EnvelopeError(409, `id ${id} was already used by an envelope with other content: an id names one envelope; send new content under a new id (a replay must repeat the first envelope exactly)`);

/**
 * What the answer to a COMMAND (or a forwarded QUERY) carries. From an envelope-speaking agent, its own RESPONSE's
 * `data`, `error`, `confidence` and `sources`, where the seed's sender reads them (at the top), and in `result` the
 * task that ran it. From an A2A agent, `data` is what its task produced: its state, the agent's last message and
 * its artifacts.
 */
export function answerFields(task: WireTask): Omit<AnswerOptions, 'request' | 'status'> {
  const taskId = task.id;
  const state = stateLabel(task.status.state);
  const response = task.metadata?.genesisResponse as { data?: unknown; confidence?: unknown; sources?: unknown } | undefined;
  if (response) {
    return {
      ...(response.data !== undefined ? { data: response.data } : {}),
      ...agentError(task),
      ...(typeof response.confidence === 'number' ? { confidence: response.confidence } : {}),
      ...(Array.isArray(response.sources) ? { sources: response.sources as string[] } : {}),
      result: { taskId, state },
    };
  }
  return {
    data: {
      taskId,
      state,
      ...(task.status.message ? { message: task.status.message } : {}),
      ...(task.artifacts?.length ? { artifacts: task.artifacts } : {}),
    },
    ...agentError(task),
  };
}

/** An envelope-speaking agent's `error` (in its FAILURE RESPONSE), for the answer to carry as its own. */
function agentError(task: WireTask): { error?: { code: string | number; message: string } } {
  const error = (task.metadata?.genesisResponse as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
  if (!error || typeof error.message !== 'string') return {};
  return { error: { code: typeof error.code === 'number' || typeof error.code === 'string' ? error.code : 'FAILURE', message: error.message } };
}
