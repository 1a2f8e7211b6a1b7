/**
 * MCP sessions (Streamable HTTP, `Mcp-Session-Id`): one SDK server and transport per session, bound to the key that
 * opened it, so a session id shown with another key (another tenant's above all) is a session this gateway does not
 * know. Sessions end when their client deletes them, after `idleMs` without a request, when their tenant holds
 * `maxPerTenant` (the least recently used goes), and when Switchboard closes. Each session's tools are its tenant's
 * agents (src/api/mcp/tools.ts); the registry's change notices tell its client the list changed.
 */
import { randomUUID } from 'node:crypto';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { EventStore } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from 'pino';
import type { Pool } from 'pg';
import { version } from '../../../package.json';
import type { Caller } from '../../core/auth/caller';
import type { CredentialWatch } from '../../core/auth/credential-watch';
import type { A2AEndpoints } from '../a2a/endpoints';
import type { AgentRegistry } from '../../core/agents/registry';
import type { EventHub } from '../../core/events/hub';
import type { Health } from '../../core/health';
import { type CallSettings, McpCalls } from './calls';
import { type ContextOf, mcpTaskOf, serveTasks } from './mcp-tasks';
import { readArgs, toolError, toolOf } from './tools';

export interface McpSettings extends CallSettings {
  /** A session without a request for this long is closed. */
  idleMs: number;
  /** Open sessions per tenant; opening one more closes the tenant's least recently used. */
  maxPerTenant: number;
  /** Open sessions in this process, all tenants. */
  maxTotal: number;
  /** How long a GET stream (server notifications) stays open; the client opens another. */
  streamMaxMs: number;
}

export const DEFAULT_MCP_SETTINGS: McpSettings = { callWaitMs: 10 * 60_000, idleMs: 30 * 60_000, maxPerTenant: 100, maxTotal: 10_000, streamMaxMs: 15 * 60_000 };

export interface McpDeps {
  endpoints: A2AEndpoints;
  pool: Pool;
  registry: AgentRegistry;
  health: Health;
  hub?: EventHub;
  /** Ends a session once the credential that opened it no longer holds (revoked, expired, its tenant deleted). */
  credentialWatch?: CredentialWatch;
  log: Logger;
  settings: McpSettings;
}

export interface Session {
  id: string;
  caller: Caller;
  base: string;
  transport: StreamableHTTPServerTransport;
  server: Server;
  lastSeen: number;
  /** Requests of the session still open (a call, a GET stream): a busy session is not idle. */
  busy: number;
  /** Aborted as the session ends, before the SDK aborts its calls: they stop without canceling their tasks. */
  ended: AbortController;
  /** Stops watching the session's credential. */
  unwatch?: () => void;
}

const INSTRUCTIONS =
  'Each tool is an A2A agent of your Switchboard tenant. A call is a durable Switchboard task: its result names the task ' +
  '(_meta.taskId, _meta.state); a task that waits for input or is still working continues with a call that passes its taskId.';

export class McpSessions {
  private readonly sessions = new Map<string, Session>();
  private readonly calls: McpCalls;
  private readonly closing = new AbortController();
  private readonly sweep: NodeJS.Timeout;
  private readonly unlisten: () => void;

  constructor(private readonly deps: McpDeps) {
    this.calls = new McpCalls(deps.endpoints, deps.pool, deps.settings);
    this.sweep = setInterval(() => this.expire(), Math.min(60_000, Math.max(1_000, deps.settings.idleMs / 4))).unref();
    // A change to an agent (registered, refreshed, deleted) in any process: its tenant's sessions hear the list changed.
    this.unlisten =
      deps.hub?.onConfigChange((n) => {
        if (n && n.kind !== 'agents') return;
        for (const s of this.sessions.values()) if (!n || s.caller.tenant === n.tenant) void s.server.sendToolListChanged().catch(() => undefined);
      }) ?? (() => undefined);
  }

  /** The session `id` for this caller: undefined when there is none, or it is another key's. */
  find(id: string, caller: Caller): Session | undefined {
    const s = this.sessions.get(id);
    if (!s || s.caller.keyId !== caller.keyId || s.caller.tenant !== caller.tenant) return undefined;
    s.caller = caller; // the latest authentication (a key's expiry, an admin's tenant header) is what calls run as
    s.lastSeen = Date.now();
    return s;
  }

  /** A new session's transport, for an initialize request; the session is kept once the SDK has given it its id. */
  open(caller: Caller, base: string): Session {
    const server = new Server({ name: 'switchboard', version }, { capabilities: { tools: { listChanged: true }, tasks: { cancel: {}, requests: { tools: { call: {} } } } }, instructions: INSTRUCTIONS });
    const session: Session = { id: '', caller, base, server, transport: undefined as unknown as StreamableHTTPServerTransport, lastSeen: Date.now(), busy: 0, ended: new AbortController() };
    session.transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      eventStore: new RecentEvents(),
      onsessioninitialized: (id) => {
        session.id = id;
        this.make(session);
      },
      onsessionclosed: (id) => void this.close(id),
    });
    this.serve(session);
    void server.connect(session.transport).catch((err: unknown) => this.deps.log.warn({ err }, 'MCP session failed to start'));
    return session;
  }

  /** Closes every session (Switchboard closes): calls still waiting answer at once, their tasks go on. */
  async closeAll(): Promise<void> {
    this.closing.abort();
    clearInterval(this.sweep);
    this.unlisten();
    await Promise.all([...this.sessions.keys()].map((id) => this.close(id)));
  }

  async close(id: string): Promise<void> {
    const s = this.sessions.get(id);
    if (!s) return;
    this.sessions.delete(id);
    s.unwatch?.();
    s.ended.abort();
    await s.server.close().catch(() => undefined);
  }

  /** Keeps a new session, making room under the caps first (the least recently used of its tenant, or of all). */
  private make(session: Session): void {
    const all = [...this.sessions.values()];
    const ofTenant = all.filter((s) => s.caller.tenant === session.caller.tenant);
    const { maxPerTenant, maxTotal } = this.deps.settings;
    const lru = (list: Session[]) => list.reduce((a, b) => (b.lastSeen < a.lastSeen ? b : a));
    if (ofTenant.length >= maxPerTenant) void this.close(lru(ofTenant).id);
    else if (all.length >= maxTotal) void this.close(lru(all).id);
    this.sessions.set(session.id, session);
    // Its notification stream and calls outlive no credential: a revoked key's session ends (its tasks go on).
    session.unwatch = this.deps.credentialWatch?.watch(session.caller, () => void this.close(session.id));
  }

  private expire(): void {
    const before = Date.now() - this.deps.settings.idleMs;
    for (const s of this.sessions.values()) if (s.busy === 0 && s.lastSeen < before) void this.close(s.id);
  }

  /** The session's tools: its tenant's agents, listed and called. */
  private serve(session: Session): void {
    const { server } = session;
    const { registry, log } = this.deps;
    const contextOf: ContextOf = (extra, tool) => ({ caller: session.caller, tool, base: session.base, extra, elicits: false, closing: AbortSignal.any([this.closing.signal, session.ended.signal]) });
    serveTasks(server, this.calls, contextOf);
    server.setRequestHandler(ListToolsRequestSchema, async () => {
      try {
        return { tools: (await registry.list(session.caller.tenant)).map(toolOf) };
      } catch (err) {
        throw this.internal(err);
      }
    });
    server.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
      const caller = session.caller;
      const agent = await registry.lookup(caller.tenant, req.params.name).catch((err: unknown) => {
        throw this.internal(err);
      });
      // Another tenant's agent is no tool of this one, like an agent that does not exist.
      if (!agent) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${req.params.name}`);
      const args = readArgs(req.params.arguments ?? {});
      if ('invalid' in args) throw new McpError(ErrorCode.InvalidParams, `Invalid arguments for ${req.params.name}: ${args.invalid}`);
      try {
        const elicits = server.getClientCapabilities()?.elicitation !== undefined;
        const ctx = { ...contextOf(extra, req.params.name), agentId: agent.id, elicits };
        // Asked as an MCP task (2025-11-25): started, and answered with the task; tasks/result waits for it.
        if (req.params.task) return { task: mcpTaskOf(await this.calls.start(args, ctx)) };
        return await this.calls.call(args, ctx);
      } catch (err) {
        if (err instanceof McpError) throw err;
        const down = this.deps.health.unavailable(err);
        if (down) return toolError(`Switchboard cannot run the task now: ${down.message}; retry in ${down.retryAfterS ?? 5} s`);
        log.error({ err }, 'MCP tool call failed');
        throw this.internal(err);
      }
    });
  }

  private internal(err: unknown): McpError {
    this.deps.log.error({ err }, 'MCP request failed');
    return new McpError(ErrorCode.InternalError, 'Internal error');
  }
}

/**
 * A session's recent messages by event id, so a client whose stream dropped resumes it (Last-Event-ID) on the same
 * process: the last MAX_EVENTS of the session, in memory (a restart ends the session; its tasks go on).
 */
class RecentEvents implements EventStore {
  private static readonly MAX_EVENTS = 1_000;
  private readonly events: { id: string; stream: string; message: JSONRPCMessage }[] = [];
  private n = 0;

  async storeEvent(stream: string, message: JSONRPCMessage): Promise<string> {
    const id = `${stream}_${++this.n}`;
    this.events.push({ id, stream, message });
    if (this.events.length > RecentEvents.MAX_EVENTS) this.events.shift();
    return id;
  }

  async getStreamIdForEventId(id: string): Promise<string | undefined> {
    return this.events.find((e) => e.id === id)?.stream;
  }

  async replayEventsAfter(lastEventId: string, { send }: { send: (id: string, message: JSONRPCMessage) => Promise<void> }): Promise<string> {
    const at = this.events.findIndex((e) => e.id === lastEventId);
    if (at < 0) return '';
    const stream = this.events[at]!.stream;
    for (const e of this.events.slice(at + 1)) if (e.stream === stream) await send(e.id, e.message);
    return stream;
  }
}
