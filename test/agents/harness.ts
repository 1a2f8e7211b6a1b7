// Shared plumbing for the test agents: listen on 127.0.0.1:0, record every JSON-RPC request, close cleanly.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';

export interface RecordedCall {
  /** The binding the call came over (JSON-RPC unless the agent serves others too). */
  binding?: 'JSONRPC' | 'HTTP+JSON' | 'GRPC';
  method: string;
  params: any;
  headers: Record<string, string | string[] | undefined>;
}

/** Logs a call the agent received (and, for a cancel, the task it names). */
export type Recorder = ((call: RecordedCall) => void) & { calls: RecordedCall[] };

export interface TestAgent {
  /** Base URL, e.g. http://127.0.0.1:PORT (card at `${url}/.well-known/agent-card.json`). */
  url: string;
  /** The card JSON as served (fetched with `A2A-Version: 1.0`). */
  card: unknown;
  /**
   * Every request received, in order: JSON-RPC (parsed body as received + headers), and for agents serving
   * them, HTTP+JSON (method named as in JSON-RPC 1.0, the body, headers) and gRPC (method, the request as
   * ts-proto object, metadata).
   */
  calls: RecordedCall[];
  /** Agent-side task ids named by a received cancel request (`CancelTask` / `tasks/cancel`). */
  cancels: string[];
  /**
   * Stops the HTTP server (every connection dropped, streams cut) and listens again on the same port `downMs`
   * later; the agent's tasks, in memory, keep running meanwhile.
   */
  restart(downMs: number): Promise<void>;
  /** Stops the HTTP server (connections dropped; the port refuses connections) until start(). */
  stop(): Promise<void>;
  /** Listens again on the same port after stop(). */
  start(): Promise<void>;
  close(): Promise<void>;
}

/** Every agent serves JSON-RPC here: `${url}${RPC_PATH}`. */
export const RPC_PATH = '/a2a/jsonrpc';
/** Agents serving HTTP+JSON serve it under `${url}${REST_PATH}`. */
export const REST_PATH = '/a2a/rest';
const CANCEL_METHODS = new Set(['CancelTask', 'tasks/cancel']);

/**
 * Starts an Express app on an ephemeral port. The server listens *before* `mount` runs, so cards can carry the
 * real port. The recorder runs ahead of whatever `mount` installs; `mount` may return a cleanup hook for close().
 */
export async function startAgentServer(
  mount: (app: express.Express, url: string, record: Recorder) => void | (() => void),
): Promise<TestAgent> {
  const calls: RecordedCall[] = [];
  const cancels: string[] = [];
  const record: Recorder = Object.assign(
    (call: RecordedCall) => {
      calls.push(call);
      if (CANCEL_METHODS.has(call.method) && typeof call.params?.id === 'string') cancels.push(call.params.id);
    },
    { calls },
  );
  const server = http.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://127.0.0.1:${port}`;

  const app = express();
  // Read the body ourselves (any content type) so even malformed requests are recorded. body-parser skips
  // an already-consumed request, so the SDK's own express.json() downstream is a no-op.
  app.post(RPC_PATH, express.text({ type: () => true, limit: '10mb' }), (req, _res, next) => {
    try {
      req.body = JSON.parse(req.body);
    } catch {
      /* leave it raw: the SDK answers -32700 */
    }
    const body = req.body;
    record({ binding: 'JSONRPC', method: body?.method, params: body?.params, headers: { ...req.headers } });
    next();
  });
  const cleanup = mount(app, url, record);
  server.on('request', app);

  const card = await (await fetch(`${url}/.well-known/agent-card.json`, { headers: { 'A2A-Version': '1.0' } })).json();
  let closed: Promise<void> | undefined;
  const stop = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  const start = () =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => (server.off('error', reject), resolve()));
    });
  return {
    url,
    card,
    calls,
    cancels,
    async restart(downMs) {
      await stop();
      await new Promise((r) => setTimeout(r, downMs));
      await start();
    },
    stop,
    start,
    close: () =>
      (closed ??= new Promise<void>((resolve) => {
        cleanup?.();
        server.close(() => resolve());
        server.closeAllConnections(); // drops hanging / blocking requests
      })),
  };
}

/** The agents a test file starts, closed together when it ends. */
export class AgentPool {
  private readonly started: TestAgent[] = [];

  /** Awaits a starting agent and keeps it for closeAll(). */
  async add<T extends TestAgent>(starting: Promise<T>): Promise<T> {
    const a = await starting;
    this.started.push(a);
    return a;
  }

  async closeAll(): Promise<void> {
    await Promise.all(this.started.map((a) => a.close()));
  }
}
