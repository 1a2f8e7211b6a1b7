/**
 * One agent's WebSocket at the hub: JSON-RPC 2.0 frames both ways (Society AI's hub methods; see docs/dialects.md
 * "WebSocket hub"). Agent → hub: agent.register, heartbeat, task.status, task.artifact, task.complete,
 * agent.search, agent.send_task. Hub → agent: tasks/send or message/send (a turn), tasks/cancel.
 * A socket opened with a hub enrollment token has no agent yet: its agent.register registers one (src/api/hub/enroll.ts),
 * and until then only heartbeat and agent.register are answered.
 *
 * Limits: frames over the size cap close the socket (1009, by ws), and so do frames that are not UTF-8 (1007, by
 * ws); a frame that is not JSON closes it with 1007 after a -32700 answer, one nested deeper than the peer-input
 * guard reads (src/core/http/json-guard.ts) with 1008 after a -32600 answer; binary frames close it with 1003; past the
 * frame rate, requests get -32053, and an agent that keeps sending ten seconds' worth more is closed with 1008;
 * an agent that does not read what it is sent (its send buffer past 8 frames' worth) is closed with 1008.
 * Whatever a frame still makes throw is logged and closes this socket (1011), never the process.
 * Updates about one task are applied in the order they arrive.
 */
import { randomUUID } from 'node:crypto';
import type { WebSocket } from 'ws';
import { z } from 'zod';
import type { Caller } from '../../core/auth/caller';
import type { CredentialWatch } from '../../core/auth/credential-watch';
import type { AgentRegistry } from '../../core/agents/registry';
import type { A2AEndpoints } from '../a2a/endpoints';
import type { WireArtifact, WireMessage, WireTask } from '../../../task/wire';
import { EventSink } from '../../core/events/event-sink';
import { costOf } from '../../core/agents/agent-cost';
import { agentMetadata } from '../../../task/agent-metadata';
import { compactArtifact, withinBudget } from '../../../task/artifacts';
import type { ForwardResult } from '../../../task/contracts';
import { A2A_ERRORS } from '../a2a/errors';
import { pathOfNul } from '../../core/http/json-guard';
import { unreadableError } from '../a2a/rpc-errors';
import { JsonLimitError, MAX_AGENT_JSON_DEPTH, parseJson } from '../../core/http/json-guard';
import { type AgentHub, HUB_CLOSE, type HubConnection } from './hub';
import { type OpenTurn, type TurnResult, turnKeyText } from '../../core/hub/turns';
import { EnrollError, enrollHubAgent } from './enroll';
import { isNameConflict, nameHolder } from '../../core/agents/agent-names';
import { FrameError, artifactFromHub, isObject, messageFromHub, stateFromHub, taskIdOf, taskToHub } from '../../core/hub/frames';

const RATE_LIMITED = A2A_ERRORS.QuotaExceeded.code;
/** A socket that has this many seconds' worth of frames refused for the rate, and sends on, is closed (1008). */
const FLOOD_SECONDS = 10;
type RpcId = string | number | null;

interface Rpc {
  jsonrpc: '2.0';
  id?: RpcId;
  method?: string;
  params?: unknown;
  result?: unknown;
  error?: { code: number; message: string };
}

export interface SessionDeps {
  hub: AgentHub;
  registry: AgentRegistry;
  endpoints: A2AEndpoints;
  /** The gateway's URL as the agent reached it (agent.search answers with URLs under it). */
  base: string;
  /** Closes the socket (4001) once its agent key no longer holds: revoked, expired, its agent or tenant deleted. */
  credentialWatch?: CredentialWatch;
}

const SearchParams = z.object({
  q: z.string().max(500).optional(),
  query: z.string().max(500).optional(),
  tags: z.array(z.string().max(100)).max(20).optional(),
  skills: z.array(z.string().max(200)).max(20).optional(),
  pageSize: z.number().int().min(1).max(100).optional(),
});

export class HubSession implements HubConnection {
  readonly id = randomUUID();
  readonly tenant: string;
  /** The agent this socket speaks for ('' while a socket opened with an enrollment token has not registered yet). */
  agentId: string;
  /** The enrollment token the socket was opened with, until its agent.register has registered the agent. */
  private enrolling?: string;
  turnMethod: 'tasks/send' | 'message/send' = 'tasks/send';
  closed = false;
  private lastHeard = Date.now();
  private alive = true;
  private timedOut = false;
  /** The turns sent on this socket and not answered yet: request id → task id. */
  private readonly turnsSent = new Map<string, string>();
  private readonly timer: NodeJS.Timeout;
  /** Frame budget: refilled at maxFramesPerSecond, holding up to twice that. */
  private tokens: number;
  private refilledAt = Date.now();
  /** Frames refused for the rate, forgiven at the rate (see takeToken). */
  private refused = 0;
  /** Task updates in arrival order (a chunk must not overtake the one before it). */
  private updates: Promise<unknown> = Promise.resolve();
  private readonly sinks = new Map<string, { turn: OpenTurn; sink: EventSink }>();
  private caller: Caller;
  private unwatch: () => void;

  constructor(
    private readonly ws: WebSocket,
    caller: Caller,
    private readonly deps: SessionDeps,
  ) {
    this.tenant = caller.tenant;
    this.agentId = caller.agentId ?? '';
    if (caller.via === 'enrollment') this.enrolling = caller.keyId;
    this.caller = caller;
    const { settings } = deps.hub;
    this.tokens = settings.maxFramesPerSecond * 2;
    // Last resort: whatever a frame makes throw is logged and ends this socket (1011), never the process.
    ws.on('message', (data, isBinary) => this.survive('a frame', () => this.onFrame(data as Buffer, isBinary)));
    ws.on('pong', () => (this.alive = true));
    ws.on('close', () => void this.onClose());
    ws.on('error', () => undefined); // 'close' follows; an oversize frame is reported here first
    this.timer = setInterval(() => this.survive('the heartbeat check', () => this.tick()), Math.min(settings.pingMs, settings.heartbeatTimeoutMs));
    this.unwatch = this.watch(caller);
  }

  /** Closes the socket (4001) once the credential it speaks with no longer holds. @returns the function that stops watching. */
  private watch(caller: Caller): () => void {
    const what = caller.via === 'enrollment' ? 'enrollment token' : 'agent key';
    return this.deps.credentialWatch?.watch(caller, (why) => this.close(HUB_CLOSE.revoked, `the ${what} no longer holds: ${why}`)) ?? (() => undefined);
  }

  private survive(what: string, work: () => void): void {
    try {
      work();
    } catch (err) {
      this.deps.hub.deps.log.error({ err, agentId: this.agentId, tenant: this.tenant }, `hub: ${what} failed; the agent's socket is closed`);
      this.close(1011, `internal error handling ${what}; reconnect`);
    }
  }

  /** Registers the socket with the hub once the agent's registry entry is known to be there. */
  async start(): Promise<void> {
    if (this.enrolling) return; // no agent yet: its agent.register makes one, and attaches the socket
    const agent = await this.deps.registry.get(this.tenant, this.agentId);
    if (!agent) return this.close(HUB_CLOSE.notAHubAgent, `no agent ${this.agentId} is registered in tenant ${this.tenant}`);
    if (this.closed) return; // closed meanwhile (its key revoked, the agent gone): nothing to attach
    this.turnMethod = turnMethodOf(agent.card);
    await this.deps.hub.attach(this);
  }

  close(code: number, reason: string): void {
    if (this.ws.readyState === this.ws.OPEN || this.ws.readyState === this.ws.CONNECTING) this.ws.close(code, reason.slice(0, 120));
    this.closed = true;
  }

  async sendTurn(frame: Record<string, unknown>, taskId: string): Promise<void> {
    this.turnsSent.set(String(frame.id), taskId);
    await this.write({ jsonrpc: '2.0', ...frame });
  }

  notifyAgent(method: string, params: Record<string, unknown>): Promise<void> {
    return this.write({ jsonrpc: '2.0', id: `hub-${randomUUID()}`, method, params });
  }

  private write(frame: object): Promise<void> {
    if (this.closed) return Promise.reject(new Error('the agent\'s socket is closed'));
    // Back-pressure: an agent that does not read what it is sent is cut off rather than buffered for without end.
    if (this.ws.bufferedAmount > this.deps.hub.settings.maxFrameBytes * 8) {
      this.close(1008, 'the agent is not reading its frames');
      return Promise.reject(new Error('the agent is not reading its frames'));
    }
    return new Promise((resolve, reject) => this.ws.send(JSON.stringify(frame), (err) => (err ? reject(err) : resolve())));
  }

  private reply(id: RpcId | undefined, result: unknown): void {
    if (id === undefined) return; // a notification is not answered
    void this.write({ jsonrpc: '2.0', id, result }).catch(() => undefined);
  }

  private replyError(id: RpcId | undefined, code: number, message: string): void {
    if (id === undefined) return;
    void this.write({ jsonrpc: '2.0', id, error: { code, message } }).catch(() => undefined);
  }

  private tick(): void {
    const { settings } = this.deps.hub;
    if (this.timedOut) return;
    if (Date.now() - this.lastHeard > settings.heartbeatTimeoutMs) {
      this.timedOut = true;
      const reason = `no heartbeat from the agent for ${Math.round(settings.heartbeatTimeoutMs / 1000)} s`;
      // Marked down first, so that whoever sees the close (the agent, a test) finds the registry saying so.
      void this.deps.hub
        .setStatus(this.tenant, this.agentId, 'down', `hub: ${reason}`)
        .catch(() => undefined)
        .finally(() => this.close(HUB_CLOSE.heartbeatTimeout, reason));
      return;
    }
    // A socket that answered no ping since the last one is gone (a NAT that dropped it, a dead host).
    if (!this.alive) {
      this.ws.terminate();
      return;
    }
    this.alive = false;
    this.ws.ping();
    void this.deps.hub.renew(this).catch(() => undefined);
  }

  private async onClose(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    this.unwatch();
    await Promise.allSettled([...this.sinks.values()].map((s) => s.sink.flush()));
    if (!this.agentId) return; // an enrollment that never registered: nothing was attached
    await this.deps.hub.detach(this).catch((err) => this.deps.hub.deps.log.warn({ err, agentId: this.agentId }, 'hub: could not forget a closed connection'));
  }

  /**
   * Every frame costs a token, refilled at maxFramesPerSecond up to twice that. Past them a request is refused
   * (-32053); the refused frames are counted, and forgiven at the same rate: an agent that keeps sending after
   * FLOOD_SECONDS' worth of refusals ends its socket.
   */
  private takeToken(): 'ok' | 'limited' | 'flood' {
    const { maxFramesPerSecond } = this.deps.hub.settings;
    const now = Date.now();
    const earned = ((now - this.refilledAt) / 1000) * maxFramesPerSecond;
    this.tokens = Math.min(maxFramesPerSecond * 2, this.tokens + earned);
    this.refused = Math.max(0, this.refused - earned);
    this.refilledAt = now;
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return 'ok';
    }
    this.refused += 1;
    return this.refused > maxFramesPerSecond * FLOOD_SECONDS ? 'flood' : 'limited';
  }

  private onFrame(data: Buffer, isBinary: boolean): void {
    if (this.closed) return;
    if (isBinary) return this.close(1003, 'binary frames are not accepted: send JSON-RPC 2.0 as text frames');
    this.lastHeard = Date.now();
    // Counted before the frame is read at all: a flood costs a counter, not a parse each.
    const budget = this.takeToken();
    const { maxFramesPerSecond } = this.deps.hub.settings;
    if (budget === 'flood') return this.close(1008, `too many frames: over ${maxFramesPerSecond} a second, kept up after -32053`);
    let frame: Rpc;
    try {
      // ws has checked UTF-8 (1007) and the size (1009); the guard checks the depth before anything recursive reads it.
      frame = parseJson(data, { maxDepth: MAX_AGENT_JSON_DEPTH }) as Rpc;
    } catch (err) {
      void this.write({ jsonrpc: '2.0', id: null, error: unreadableError(err) }).catch(() => undefined);
      return err instanceof JsonLimitError ? this.close(1008, `a frame was refused: ${err.message}`) : this.close(1007, 'a frame was not valid JSON');
    }
    if (!isObject(frame) || frame.jsonrpc !== '2.0') {
      return this.replyError(isObject(frame) ? (frame.id ?? null) : null, A2A_ERRORS.InvalidRequest.code, 'Invalid JSON-RPC 2.0 frame: jsonrpc must be "2.0"');
    }
    // The agent's answers to turns are read whatever the budget: they are bounded by the turns it was sent.
    if (frame.method === undefined && ('result' in frame || 'error' in frame)) return this.onAnswer(frame);
    if (budget === 'limited') {
      return this.replyError(frame.id, RATE_LIMITED, `Too many frames: at most ${maxFramesPerSecond} a second (bursts of ${maxFramesPerSecond * 2}); ${frame.method} was not processed`);
    }
    if (typeof frame.method !== 'string') return this.replyError(frame.id ?? null, A2A_ERRORS.InvalidRequest.code, 'Invalid JSON-RPC 2.0 frame: method must be a string');
    // PostgreSQL cannot store U+0000 in jsonb or text: refused here rather than failing deep inside a write.
    const nul = pathOfNul(frame.params);
    if (nul !== undefined) return this.replyError(frame.id, A2A_ERRORS.InvalidParams.code, `Invalid params for ${frame.method}: ${nul || 'params'} contains a NUL character (U+0000)`);
    const { id, method } = frame;
    const params = isObject(frame.params) ? frame.params : frame.params === undefined ? {} : undefined;
    if (params === undefined) return this.replyError(id, A2A_ERRORS.InvalidParams.code, `Invalid params for ${method}: params must be an object`);
    const handle = (work: () => Promise<unknown>) =>
      work().then(
        (result) => this.reply(id, result),
        (err: unknown) => {
          if (err instanceof FrameError) return this.replyError(id, A2A_ERRORS.InvalidParams.code, `Invalid params for ${method}: ${err.message}`);
          if (err instanceof EnrollError) {
            this.replyError(id, err.code, err.message);
            return err.lapsed ? this.close(HUB_CLOSE.revoked, 'the enrollment token no longer holds') : undefined;
          }
          if (err instanceof HubRpcError) return this.replyError(id, err.code, err.message);
          this.deps.hub.deps.log.error({ err, method, agentId: this.agentId }, 'hub: a frame failed');
          return this.replyError(id, A2A_ERRORS.Internal.code, `Internal error while handling ${method}`);
        },
      );
    // Task updates in order, one after another; everything else at once (agent.send_task may wait for a turn).
    const inOrder = (work: () => Promise<unknown>) => (this.updates = this.updates.then(() => handle(work)));
    if (this.enrolling && method !== 'heartbeat' && method !== 'agent.register') {
      return this.replyError(id, A2A_ERRORS.InvalidRequest.code, `${method}: register first (agent.register with your card): this socket was opened with an enrollment token and speaks for no agent yet`);
    }
    switch (method) {
      case 'heartbeat':
        return void handle(async () => ({ ok: true, at: new Date().toISOString() }));
      case 'agent.register':
        return void inOrder(() => this.register(params));
      case 'task.status':
        return void inOrder(() => this.taskStatus(params));
      case 'task.artifact':
        return void inOrder(() => this.taskArtifact(params));
      case 'task.complete':
        return void inOrder(() => this.taskComplete(params));
      case 'agent.search':
        return void handle(() => this.search(params));
      case 'agent.send_task':
        return void handle(() => this.sendTask(params));
      default:
        return this.replyError(id, A2A_ERRORS.MethodNotFound.code, `Method not found: ${method} (the hub's methods: agent.register, heartbeat, task.status, task.artifact, task.complete, agent.search, agent.send_task)`);
    }
  }

  /** The agent's answer to a turn: a task in a final (or interrupted) state ends the turn; anything else acknowledges it. */
  private onAnswer(frame: Rpc): void {
    // Only answers to turns this socket carried count (tasks/cancel answers, and made-up ones, cost nothing).
    const taskId = typeof frame.id === 'string' ? this.turnsSent.get(frame.id) : undefined;
    if (taskId === undefined) return;
    this.turnsSent.delete(frame.id as string);
    void (this.updates = this.updates.then(async () => {
      const turn = await this.deps.hub.turns.openTurnOf(this.tenant, this.agentId, taskId);
      if (!turn || turn.messageId !== frame.id) return; // that turn has ended meanwhile
      if (frame.error) return this.finish(turn, { error: { code: Number(frame.error.code) || A2A_ERRORS.Internal.code, message: String(frame.error.message ?? '') } });
      const finished = isObject(frame.result) ? outcomeOf(frame.result, turn) : undefined;
      if (finished && finished.state !== 'TASK_STATE_WORKING' && finished.state !== 'TASK_STATE_SUBMITTED') return this.finish(turn, { outcome: await this.withArtifacts(turn, finished) });
      await this.deps.hub.turns.advance(turn, 'acked');
    }).catch((err) => this.deps.hub.deps.log.warn({ err, agentId: this.agentId }, 'hub: an answer to a turn could not be recorded')));
  }

  // ---- agent → hub ----

  private async register(params: Record<string, unknown>): Promise<unknown> {
    const card = isObject(params.card) ? params.card : params;
    if (typeof card.name !== 'string' || !card.name.trim()) throw new FrameError('the card needs a name');
    if (card.skills !== undefined && !Array.isArray(card.skills)) throw new FrameError('skills must be an array');
    if (this.enrolling) return this.enroll(card, card.name.trim().slice(0, 200));
    const url = `ws-agent://${this.agentId}`;
    const stored = { ...card, url };
    const name = card.name.trim().slice(0, 200);
    // A hub agent renaming itself takes a name no other agent of the tenant has (as an enrollment does), compared by
    // key (src/core/agents/agent-names.ts) so that a look-alike is taken too. The unique index is the check: it decides a
    // race with another rename, an enrollment or a registration alike, and the update below meets it.
    const { pool } = this.deps.hub;
    if (!(await nameHolder(pool, this.tenant, name)).key) throw new FrameError(`the card's name ${JSON.stringify(name)} has no visible character`);
    // Only an agent registered as a hub agent (ws-agent://) is the hub's to describe: an HTTP agent's key must not
    // turn its entry into a socket's, nor rename it (its tasks would then go to whoever holds the key).
    const rename = () =>
      pool.query(
        `UPDATE agents SET name = $3, card_changed_at = CASE WHEN card IS DISTINCT FROM $4::jsonb THEN now() ELSE card_changed_at END, card = $4, source_url = $5, card_url = $5, endpoint_url = $5, streaming = false, updated_at = now()
          WHERE tenant = $1 AND id = $2 AND endpoint_url = $5`,
        [this.tenant, this.agentId, name, stored, url],
      );
    const { rowCount } = await rename().catch(async (err: unknown) => {
      if (!isNameConflict(err)) throw err;
      const { holder } = await nameHolder(pool, this.tenant, name, this.agentId);
      if (!holder) throw err;
      const alike = holder.name === name ? '' : `, named "${holder.name}": names compare ignoring case, white space, invisible and look-alike characters`;
      throw new HubRpcError(A2A_ERRORS.InvalidParams.code, `agent.register: the name "${name}" is taken in this tenant (agent ${holder.id}${alike}); keep your name or pick a free one`);
    });
    if (!rowCount) {
      throw new HubRpcError(
        A2A_ERRORS.UnsupportedOperation.code,
        `agent.register: agent ${this.agentId} is not registered as a hub agent (ws-agent://); only an operator changes its registration (POST /agents, DELETE /agents/:id)`,
      );
    }
    this.turnMethod = turnMethodOf(stored);
    await this.deps.hub.setStatus(this.tenant, this.agentId, 'healthy', 'registered on the hub');
    return { agentId: this.agentId, url, turnMethod: this.turnMethod };
  }

  /**
   * The first agent.register of a socket opened with an enrollment token: the agent is registered in the token's
   * tenant under the name it asks for (src/api/hub/enroll.ts), the socket speaks for it from now on (watched by the agent
   * key made for it), and it is attached as a hub agent's connection. The answer carries the agent key, once.
   */
  private async enroll(card: Record<string, unknown>, name: string): Promise<unknown> {
    const enrolled = await enrollHubAgent(this.deps.hub.pool, { tenant: this.tenant, tokenId: this.enrolling!, card, name, requestId: this.id });
    this.enrolling = undefined;
    this.agentId = enrolled.agentId;
    this.turnMethod = turnMethodOf(card);
    // (Closed meanwhile: nothing to watch or attach; the agent reconnects with its key, if it got the answer.)
    if (!this.closed) {
      this.caller = { keyId: enrolled.keyId, role: 'agent', tenant: this.tenant, agentId: enrolled.agentId, via: 'key' };
      this.unwatch();
      this.unwatch = this.watch(this.caller);
      await this.deps.hub.attach(this);
    }
    return { agentId: enrolled.agentId, url: enrolled.url, name, turnMethod: this.turnMethod, agentKey: enrolled.agentKey };
  }

  /** The open turn of the task the update names, with its event sink: only a task of this agent's, mid-turn. */
  private async turnOf(params: Record<string, unknown>): Promise<{ turn: OpenTurn; sink: EventSink }> {
    const taskId = taskIdOf(params);
    const held = this.sinks.get(taskId);
    if (held) return held;
    const turn = await this.deps.hub.turns.openTurnOf(this.tenant, this.agentId, taskId);
    if (!turn) throw new HubRpcError(A2A_ERRORS.TaskNotFound.code, `Task ${taskId} has no turn open for this agent (it was never sent to it, or its turn has ended)`);
    const sink = new EventSink(this.deps.hub.pool, this.deps.hub.deps.events, this.tenant, taskId, `hub/${turn.messageId}/${this.id}/`);
    const entry = { turn, sink };
    this.sinks.set(taskId, entry);
    return entry;
  }

  private async taskStatus(params: Record<string, unknown>): Promise<unknown> {
    const { turn, sink } = await this.turnOf(params);
    if (!isObject(params.status)) throw new FrameError('status {state, message?} is required');
    const state = stateFromHub(params.status.state, 'status.state');
    // A status that ends the turn (0.2 `final`) is the turn's outcome; progress goes to the task's event log.
    if (state !== 'TASK_STATE_WORKING' && state !== 'TASK_STATE_SUBMITTED') return this.taskComplete(params);
    const ids = { taskId: turn.taskId, contextId: turn.contextId };
    const message = params.status.message === undefined ? undefined : messageFromHub(params.status.message, 'status.message', ids);
    await sink.push({
      statusUpdate: { ...ids, status: { state, timestamp: new Date().toISOString(), ...(message ? { message } : {}) }, ...(isObject(params.metadata) ? { metadata: params.metadata } : {}) },
    });
    await this.deps.hub.turns.advance(turn, 'acked');
    return { ok: true };
  }

  private async taskArtifact(params: Record<string, unknown>): Promise<unknown> {
    const { turn, sink } = await this.turnOf(params);
    const { append, lastChunk, ...artifact } = artifactFromHub(params.artifact, 'artifact');
    const ids = { taskId: turn.taskId, contextId: turn.contextId };
    await sink.push({ artifactUpdate: { ...ids, artifact, ...(append ? { append } : {}), ...(lastChunk ? { lastChunk } : {}) } });
    const prev = turn.artifacts.find((a) => a.artifactId === artifact.artifactId);
    if (append && prev) prev.parts.push(...artifact.parts);
    else turn.artifacts = [...turn.artifacts.filter((a) => a.artifactId !== artifact.artifactId), artifact];
    await this.deps.hub.turns.saveArtifacts(turn, turn.artifacts);
    await this.deps.hub.turns.advance(turn, 'acked');
    return { ok: true };
  }

  private async taskComplete(params: Record<string, unknown>): Promise<unknown> {
    const { turn } = await this.turnOf(params);
    const outcome = outcomeOf(params, turn);
    if (outcome.state === 'TASK_STATE_WORKING' || outcome.state === 'TASK_STATE_SUBMITTED') throw new FrameError('task.complete needs a final state (completed, failed, canceled, rejected, input-required, auth-required)');
    await this.finish(turn, { outcome: await this.withArtifacts(turn, outcome) });
    return { ok: true };
  }

  /** Artifacts the outcome does not name itself are the ones sent with task.artifact during the turn. */
  private async withArtifacts(turn: OpenTurn, outcome: ForwardResult): Promise<ForwardResult> {
    const artifacts = outcome.artifacts.length > 0 ? outcome.artifacts : turn.artifacts;
    return { ...outcome, artifacts: withinBudget(artifacts.map(compactArtifact)) };
  }

  /** Ends the turn: what the agent streamed is committed first, then the outcome, then the waiting activity is woken. */
  private async finish(turn: OpenTurn, result: TurnResult): Promise<void> {
    const held = this.sinks.get(turn.taskId);
    this.sinks.delete(turn.taskId);
    await held?.sink.flush();
    await this.deps.hub.turns.finish(turn, result);
    this.deps.hub.wake(turnKeyText(turn));
  }

  private async search(params: Record<string, unknown>): Promise<unknown> {
    const p = SearchParams.safeParse(params);
    if (!p.success) throw new FrameError(z.prettifyError(p.error));
    const page = await this.deps.registry.search(this.tenant, { q: p.data.q ?? p.data.query, tags: p.data.tags, skills: p.data.skills, pageSize: p.data.pageSize ?? 20 });
    return {
      agents: page.agents.map((a) => ({
        id: a.id,
        name: a.name,
        description: typeof a.card.description === 'string' ? a.card.description : undefined,
        url: `${this.deps.base}/agents/${a.id}/a2a`,
        skills: Array.isArray(a.card.skills) ? a.card.skills : [],
        status: a.status,
        ...(a.rank !== undefined ? { rank: a.rank } : {}),
        ...(a.ranks ? { ranks: a.ranks } : {}),
      })),
      ...(page.ranking ? { ranking: page.ranking, semantic: page.semantic } : {}),
    };
  }

  /**
   * A child task to another agent, as if the agent had sent SendMessage with its key: the same checks, quotas
   * and link to its parent (params.parentTaskId, else the one task this socket has a turn open for), so it
   * joins the job of the task the agent is working on. Waits for the child's turn unless returnImmediately.
   */
  private async sendTask(params: Record<string, unknown>): Promise<unknown> {
    const target = typeof params.agentId === 'string' ? params.agentId : typeof params.agent === 'string' ? params.agent : undefined;
    if (!target) throw new FrameError('agentId (the agent to send the task to, as agent.search names it) is required');
    const open = [...this.sinks.keys()];
    const parentTaskId = typeof params.parentTaskId === 'string' ? params.parentTaskId : open.length === 1 ? open[0] : await this.onlyOpenTask();
    const message: WireMessage = {
      ...messageFromHub(params.message, 'message', { taskId: '', contextId: '' }),
      role: 'ROLE_USER',
      messageId: typeof (params.message as { messageId?: unknown }).messageId === 'string' ? (params.message as { messageId: string }).messageId : randomUUID(),
    };
    delete message.taskId;
    if (typeof params.sessionId === 'string') message.contextId = params.sessionId;
    else delete message.contextId;
    if (parentTaskId) message.metadata = { ...message.metadata, switchboard: { ...(message.metadata?.switchboard as object), parentTaskId } };
    const params1 = { message, configuration: { returnImmediately: params.returnImmediately === true } };
    const answer = await this.deps.endpoints.answer(
      { method: 'SendMessage', params: params1, caller: this.caller, headers: {}, version: '1.0', base: this.deps.base, signal: new AbortController().signal },
      target,
    );
    if ('stream' in answer) throw new HubRpcError(A2A_ERRORS.Internal.code, 'unexpected stream');
    if ('error' in answer) throw new HubRpcError(answer.error.code, answer.error.message);
    const result = answer.result as { task?: WireTask; message?: WireMessage } | undefined;
    if (result?.task) return taskToHub(result.task);
    throw new HubRpcError(A2A_ERRORS.Internal.code, 'the task could not be sent (the agent answered with a message, not a task)');
  }

  private async onlyOpenTask(): Promise<string | undefined> {
    const { rows } = await this.deps.hub.pool.query<{ task_id: string }>(
      `SELECT DISTINCT task_id FROM hub_turns WHERE tenant = $1 AND agent_id = $2 AND state <> 'done' LIMIT 2`,
      [this.tenant, this.agentId],
    );
    return rows.length === 1 ? rows[0].task_id : undefined;
  }
}

/** A JSON-RPC error with its code, answered to the agent as is. */
class HubRpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

/** tasks/send unless the card declares a protocol of 0.3 or later, whose agents take message/send. */
function turnMethodOf(card: Record<string, unknown>): 'tasks/send' | 'message/send' {
  const v = typeof card.protocolVersion === 'string' ? card.protocolVersion : '';
  return /^(0\.[3-9]|[1-9])/.test(v) ? 'message/send' : 'tasks/send';
}

/** A task (0.1/0.2 or 0.3), a task.status/task.complete's params, or a 0.3 message, as the turn's outcome. */
function outcomeOf(p: Record<string, unknown>, turn: OpenTurn): ForwardResult {
  const ids = { taskId: turn.taskId, contextId: turn.contextId };
  if (p.kind === 'message') {
    const m = messageFromHub(p, 'result', ids);
    const inTask = typeof p.taskId === 'string' && p.taskId !== '';
    return { state: 'TASK_STATE_COMPLETED', statusMessage: m, artifacts: [], costMinor: costOf(m.metadata), message: { kind: 'message', inTask, inReplyTo: turn.messageId } };
  }
  const status = isObject(p.status) ? p.status : {};
  const state = status.state === undefined ? 'TASK_STATE_COMPLETED' : stateFromHub(status.state, 'status.state');
  const statusMessage = status.message === undefined ? undefined : messageFromHub(status.message, 'status.message', ids);
  if (p.artifacts !== undefined && !Array.isArray(p.artifacts)) throw new FrameError('artifacts must be an array');
  const artifacts: WireArtifact[] = ((p.artifacts as unknown[] | undefined) ?? []).map((a, i) => {
    const { append: _a, lastChunk: _l, ...artifact } = artifactFromHub(a, `artifacts[${i}]`);
    return artifact;
  });
  const metadata = isObject(p.metadata) ? p.metadata : undefined;
  // As for HTTP agents: the cost is charged, and the agent's metadata (the cost too) reaches the task's metadata.
  const kept = agentMetadata(metadata);
  return { state, ...(statusMessage ? { statusMessage } : {}), artifacts, costMinor: costOf(metadata) ?? costOf(statusMessage?.metadata), ...(kept ? { metadata: kept } : {}) };
}

