/**
 * What one client's connections may hold (issue 46): no socket is held by a client that is not sending or being
 * answered. Three rules, all on the app's own HTTP server (the gRPC binding is its own server):
 *
 * - A request's headers and body must arrive within SWITCHBOARD_REQUEST_TIMEOUT_MS (its headers within 10 s of
 *   that), checked every second: Node's `requestTimeout` and `headersTimeout`, which cover receiving the request
 *   only, so an SSE stream or a long blocking send is not cut, and a WebSocket leaves them at its upgrade.
 * - A request answered before its body arrived (401, 403, 404, 413, 415, 429 from the hooks that run before the
 *   body is read) is answered with `Connection: close`, and the socket closes once the answer is written: its body
 *   is never waited for. Without this a client without a key held the socket forever by dripping a
 *   `Content-Length: 1000000` body a byte at a time (20,000 such sockets took the process's descriptors).
 * - At most SWITCHBOARD_MAX_CONNECTIONS_PER_ADDRESS open connections per client address (an IPv6 client per /64,
 *   which one host usually holds whole); past it a new connection is closed at once, before a byte is read.
 */
import type { Server, ServerOptions } from 'node:http';
import type { Socket } from 'node:net';
import fp from 'fastify-plugin';
import { DEFAULTS } from '../../core/config';

export interface ConnectionLimits {
  /** How long a client has to send a whole request, headers and body (ms). */
  requestTimeoutMs: number;
  /** Open connections per client address; past it, new ones are closed at once. */
  maxPerAddress: number;
}

export const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = {
  requestTimeoutMs: DEFAULTS.SWITCHBOARD_REQUEST_TIMEOUT_MS,
  maxPerAddress: DEFAULTS.SWITCHBOARD_MAX_CONNECTIONS_PER_ADDRESS,
};

/** Headers take at most this long (or the request timeout, when shorter): a client has them ready at once. */
const HEADERS_TIMEOUT_MS = 10_000;

/**
 * Node's own request timers, for the Fastify options (`http` goes to http.createServer; Fastify sets
 * `requestTimeout` on the server itself). Node checks them every `connectionsCheckingInterval` (30 s by default,
 * which would let a stuck socket live twice its timeout).
 */
export function serverTimeouts(limits: ConnectionLimits): { requestTimeout: number; http: ServerOptions } {
  const requestTimeout = limits.requestTimeoutMs;
  return {
    requestTimeout,
    http: {
      requestTimeout,
      headersTimeout: Math.min(HEADERS_TIMEOUT_MS, requestTimeout),
      connectionsCheckingInterval: Math.min(1_000, requestTimeout),
    },
  };
}

/**
 * The key a client's connections are counted under: its IPv4 address (also when written IPv4-mapped, `::ffff:a.b.c.d`),
 * or its IPv6 address's /64.
 */
export function addressKey(address: string | undefined): string {
  if (!address) return '?';
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1]!;
  if (!address.includes(':')) return address;
  return `${expandIpv6(address).slice(0, 4).join(':')}::/64`;
}

/** The eight groups of an IPv6 address (a zone, `%eth0`, dropped; a trailing dotted quad is two groups). */
function expandIpv6(address: string): string[] {
  let text = address.split('%', 1)[0]!.toLowerCase();
  const quad = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (quad) {
    const [a, b, c, d] = quad.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, quad.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::', 2) as [string, string | undefined];
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const zeros = tail === undefined ? [] : Array<string>(Math.max(0, 8 - left.length - right.length)).fill('0');
  return [...left, ...zeros, ...right].map((g) => g.replace(/^0+(?=.)/, ''));
}

/**
 * Counts each address's open connections and closes a new one past `max`.
 * @returns how many connections each address holds now (for tests and metrics).
 */
export function capConnectionsPerAddress(server: Server, max: number): Map<string, number> {
  const open = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    const key = addressKey(socket.remoteAddress);
    const held = open.get(key) ?? 0;
    if (held >= max) {
      socket.destroy();
      return;
    }
    open.set(key, held + 1);
    socket.once('close', () => {
      const left = (open.get(key) ?? 1) - 1;
      if (left > 0) open.set(key, left);
      else open.delete(key);
    });
  });
  return open;
}

export const connectionsPlugin = fp<{ maxPerAddress: number }>(
  async (app, o) => {
    capConnectionsPerAddress(app.server, o.maxPerAddress);
    // `complete` is set once the request's last byte has been parsed: a bodiless request has it before any hook
    // runs. (An injected request has no such field: it has no socket to free.)
    app.addHook('onSend', async (req, reply) => {
      if (req.raw.complete === false) reply.header('connection', 'close');
    });
  },
  { name: 'switchboard-connections', fastify: '5.x' },
);
