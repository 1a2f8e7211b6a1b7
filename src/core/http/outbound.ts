/**
 * The one door through which Switchboard makes outbound HTTP calls.
 *
 * Remote agents are named by URLs that come from users and from agent cards, so every call is
 * treated as untrusted: we refuse private/loopback/metadata addresses (SSRF), never follow
 * redirects (a public URL could bounce us to a private one), cap response sizes and bound every
 * wait. Keeping all of it here means there is no second, unguarded way out.
 */
import * as dns from 'node:dns';
import * as net from 'node:net';
import { traceOutbound } from '../tracing';
import { Agent, buildConnector, fetch as undiciFetch, Headers as UndiciHeaders, Response as UndiciResponse } from 'undici';
import { createGrpcChannels, type GrpcChannels, GrpcTargetError } from './outbound-grpc';
import { isPrivateAddress } from './address-policy';
import { JsonDepthMeter, JsonLimitError, MAX_AGENT_JSON_DEPTH } from './json-guard';

export { isPrivateAddress };

export interface OutboundOptions {
  /** SWITCHBOARD_ALLOW_PRIVATE_URLS; false = refuse loopback/private/link-local/etc. */
  allowPrivate: boolean;
  /** Time to establish the TCP (and TLS) connection. Default 5_000. */
  connectTimeoutMs?: number;
  /** Time from sending the request to receiving response headers. Default 30_000. */
  headersTimeoutMs?: number;
  /** Maximum idle time between body chunks. Default 30_000. */
  bodyTimeoutMs?: number;
  /** Default 4 MiB; larger responses are aborted with OutboundError TOO_LARGE. */
  maxResponseBytes?: number;
  /** Sent when the caller sets no User-Agent. Default 'switchboard'. */
  userAgent?: string;
  /**
   * The resolver the connect-time check asks (default `dns.lookup`, which is what a socket would use). Given
   * here by the rebinding drill and tests: a resolver that answers public once and private the next time.
   */
  lookup?: typeof dns.lookup;
}

/**
 * Per-request header and body timeouts, replacing the client's for one request (see `withTimeouts`). Agent calls
 * use them: an exchange is bounded by the agent's attempt timeout, a stream's silence by its idle limit.
 */
export interface OutboundTimeouts {
  headersTimeoutMs: number;
  bodyTimeoutMs: number;
}

const TIMEOUTS = Symbol('switchboard.outboundTimeouts');
type TimedInit = RequestInit & { [TIMEOUTS]?: OutboundTimeouts };

/** `fetch` (the guarded one) with other header and body timeouts for every request it makes. */
export function withTimeouts(fetchFn: typeof globalThis.fetch, timeouts: OutboundTimeouts): typeof globalThis.fetch {
  return (input, init) => fetchFn(input, { ...init, [TIMEOUTS]: timeouts } as TimedInit);
}

export type OutboundErrorCode = 'INVALID_URL' | 'BLOCKED_ADDRESS' | 'REDIRECT' | 'TOO_LARGE' | 'TIMEOUT' | 'NETWORK';

/** Every failure of an outbound call except a caller's abort, which stays the caller's own error. */
export class OutboundError extends Error {
  override readonly name = 'OutboundError';
  constructor(
    readonly code: OutboundErrorCode,
    message: string,
    readonly url: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export interface Outbound {
  /**
   * A WHATWG-fetch-compatible function (it is handed to @a2a-js/sdk clients as `fetchImpl`).
   * Rejects with OutboundError (INVALID_URL, BLOCKED_ADDRESS, REDIRECT, TOO_LARGE, TIMEOUT, NETWORK);
   * reading the returned body can also fail with TOO_LARGE, TIMEOUT or NETWORK, or with JsonLimitError when
   * it nests brackets deeper than MAX_AGENT_JSON_DEPTH (per event on an event stream). If the caller's
   * signal aborts, the rejection is the abort reason (an AbortError by default), not an OutboundError.
   */
  fetch: typeof globalThis.fetch;
  /**
   * GET a JSON document (used for agent cards). Rejects like `fetch`; non-2xx statuses are returned,
   * not thrown. `body` is the parsed JSON, or the raw text when the response is not valid JSON
   * (e.g. an HTML error page), so schema validation reports "expected object, received string".
   */
  getJson(
    url: string,
    init?: { signal?: AbortSignal; headers?: Record<string, string> },
  ): Promise<{ status: number; headers: Headers; body: unknown }>;
  /**
   * gRPC channels to agents under the same rules: the address is resolved and checked here (private ones
   * refused unless allowPrivate) and the channel connects to it; messages are capped at maxResponseBytes.
   * `channel()` rejects with OutboundError (INVALID_URL, BLOCKED_ADDRESS, NETWORK for a failed lookup).
   */
  grpc: GrpcChannels;
  /** Closes pooled connections and gRPC channels; requests still running after a short grace period are destroyed. */
  close(): Promise<void>;
}

const MiB = 1024 * 1024;
const CLOSE_GRACE_MS = 2_000;

// ---------------------------------------------------------------------------------------------
// Address policy

function blockedError(host: string, address: string, url: string): OutboundError {
  return new OutboundError(
    'BLOCKED_ADDRESS',
    `refusing to connect to ${host} (${address}): private, loopback, link-local, special-use and this machine's own addresses are not allowed (set SWITCHBOARD_ALLOW_PRIVATE_URLS to permit)`,
    url,
  );
}

/**
 * DNS lookup that refuses the whole host if ANY of its addresses is private. Checking here, on the
 * address the socket is about to use, is what defeats DNS rebinding (a check before fetch could
 * see a public address and the connect a private one). Refusing rather than filtering keeps the
 * behaviour predictable: a host never works "sometimes" depending on which address gets picked.
 */
function guardedLookup(resolve: typeof dns.lookup): net.LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, '');
      const bad = addresses.find((a) => isPrivateAddress(a.address));
      if (bad) return callback(blockedError(hostname, bad.address, hostname), '');
      // net.connect asks for all addresses when autoSelectFamily (happy eyeballs) is on, one otherwise.
      if (options.all) return callback(null, addresses);
      callback(null, addresses[0]!.address, addresses[0]!.family);
    });
  };
}

/**
 * Resolves `hostname` to the address to connect to, as the HTTP connector does: unless allowPrivate, a literal
 * private address, or a name with ANY private address, is refused. For callers that connect to the returned
 * address themselves (gRPC), so the address checked is the address used.
 * @throws OutboundError BLOCKED_ADDRESS, or NETWORK when the name does not resolve.
 */
export async function resolveChecked(hostname: string, url: string, options: Pick<OutboundOptions, 'allowPrivate' | 'lookup'>): Promise<{ address: string; family: number }> {
  const family = net.isIP(hostname);
  if (family) {
    if (!options.allowPrivate && isPrivateAddress(hostname)) throw blockedError(hostname, hostname, url);
    return { address: hostname, family };
  }
  const resolve = options.lookup ?? dns.lookup;
  const addresses = await new Promise<dns.LookupAddress[]>((ok, fail) =>
    resolve(hostname, { all: true }, (err, all) => (err ? fail(err) : ok(all))),
  ).catch((err: NodeJS.ErrnoException) => {
    throw new OutboundError('NETWORK', `${url}: cannot resolve ${hostname} (${err.code ?? err.message})`, url, { cause: err });
  });
  const bad = options.allowPrivate ? undefined : addresses.find((a) => isPrivateAddress(a.address));
  if (bad) throw blockedError(hostname, bad.address, url);
  const first = addresses[0];
  if (!first) throw new OutboundError('NETWORK', `${url}: ${hostname} has no address`, url);
  return first;
}

function createConnector(options: OutboundOptions): buildConnector.connector {
  const timeout = options.connectTimeoutMs ?? 5_000;
  if (options.allowPrivate) return buildConnector({ timeout });
  const connect = buildConnector({ timeout, lookup: guardedLookup(options.lookup ?? dns.lookup) });
  return (opts, callback) => {
    // net.connect skips `lookup` for IP literals, so check those here. undici has already
    // stripped the brackets from IPv6 hostnames.
    if (net.isIP(opts.hostname) && isPrivateAddress(opts.hostname)) {
      callback(blockedError(opts.hostname, opts.hostname, `${opts.protocol}//${opts.host ?? opts.hostname}`), null);
      return;
    }
    connect(opts, callback);
  };
}

// ---------------------------------------------------------------------------------------------
// Error mapping

const TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'ETIMEDOUT']);

/**
 * undici reports failures as TypeError('fetch failed' | 'terminated') with the real error in
 * `cause`; turn those into OutboundErrors. Anything else (programming errors, and aborts, which
 * callers such as Temporal activity cancellation must see unchanged) is returned as is.
 */
function toOutboundError(err: unknown, url: string, signal: AbortSignal | null | undefined): unknown {
  if (signal?.aborted) return err;
  if (err instanceof OutboundError) return err.url === url ? err : new OutboundError(err.code, err.message, url, { cause: err });
  if (!(err instanceof TypeError) || err.cause === undefined) return err;
  let cause: unknown = err.cause;
  for (let depth = 0; cause instanceof Error && depth < 5; depth++) {
    if (cause instanceof OutboundError) return new OutboundError(cause.code, cause.message, url, { cause });
    const code = (cause as { code?: unknown }).code;
    if (typeof code === 'string' && TIMEOUT_CODES.has(code)) {
      return new OutboundError('TIMEOUT', `${url}: ${cause.message || code}`, url, { cause });
    }
    if (cause.cause === undefined) break;
    cause = cause.cause;
  }
  const detail = cause instanceof Error ? (cause as { code?: string }).code ?? cause.message : String(cause);
  return new OutboundError('NETWORK', `${url}: ${err.message}${detail ? ` (${detail})` : ''}`, url, { cause: err });
}

// ---------------------------------------------------------------------------------------------
// Fetch

type FetchInput = Parameters<typeof globalThis.fetch>[0];

/**
 * Split fetch's `input` into URL and init. A Request object is copied field by field because it
 * may come from Node's bundled undici, which undici@7's fetch does not recognise as a Request.
 */
function splitInput(input: FetchInput, init: RequestInit | undefined): [string, RequestInit] {
  if (typeof input === 'string') return [input, init ?? {}];
  if (input instanceof URL) return [input.href, init ?? {}];
  const { url, method, headers, body, signal } = input;
  return [url, { method, headers, body, signal, ...(body ? { duplex: 'half' } : {}), ...init }];
}

function parseHttpUrl(raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new OutboundError('INVALID_URL', `not a valid URL: ${raw}`, raw);
  }
  // undici's fetch would otherwise also serve data: and blob: URLs without touching the network.
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new OutboundError('INVALID_URL', `only http: and https: URLs are allowed, got ${url.protocol} in ${raw}`, raw);
  }
  return url;
}

/**
 * Re-wrap a response so its body stream stops at `maxBytes` (counted after content decoding, so a
 * gzip bomb is caught too) and body errors become OutboundErrors. Wrapping the stream, rather than
 * checking in getJson, is what caps third-party readers such as the A2A SDK's res.json().
 */
function capBody(res: UndiciResponse, maxBytes: number, url: string, signal: AbortSignal | null | undefined): UndiciResponse {
  if (res.body === null) return res;
  const reader = res.body.getReader();
  // An event stream may run for hours: there the cap is per event (bytes since the last blank line).
  const perEvent = (res.headers.get('content-type') ?? '').startsWith('text/event-stream');
  let received = 0;
  let previousByte = -1;
  // JSON nested too deep for what reads it (json-guard): counted as it streams, whatever the content type says,
  // since the SDK reads any body as JSON. It fails the read like a body over the cap: the agent's bad answer.
  const depth = new JsonDepthMeter(MAX_AGENT_JSON_DEPTH, perEvent);
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      let chunk: Awaited<ReturnType<typeof reader.read>>;
      try {
        chunk = await reader.read();
      } catch (err) {
        controller.error(toOutboundError(err, url, signal));
        return;
      }
      if (chunk.done) return controller.close();
      if (perEvent) {
        [received, previousByte] = longestEventRun(chunk.value, received, previousByte, maxBytes);
      } else {
        received += chunk.value.byteLength;
      }
      let err: Error | undefined;
      if (received > maxBytes) {
        const what = perEvent ? `an event of the stream from ${url} exceeds` : `response from ${url} exceeds`;
        err = new OutboundError('TOO_LARGE', `${what} ${maxBytes} bytes`, url);
      } else {
        try {
          depth.feed(chunk.value);
        } catch (e) {
          err = new JsonLimitError((e as JsonLimitError).limit, `the answer from ${url} is not read: ${(e as Error).message}`);
        }
      }
      if (err) {
        controller.error(err);
        await reader.cancel(err).catch(() => {}); // frees the connection
        return;
      }
      controller.enqueue(chunk.value);
    },
    cancel: (reason) => reader.cancel(reason),
  });
  const capped = new UndiciResponse(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  // A constructed Response has an empty url; keep the real one for callers that log it.
  Object.defineProperty(capped, 'url', { value: res.url });
  return capped;
}

/**
 * Counts the bytes of the current event of an event stream across a chunk: a blank line ("\n\n"; carriage
 * returns are ignored, so "\r\n\r\n" counts) starts a new event. Returns the count at the end of the chunk,
 * or as soon as it passes `max`, and the last byte seen (a blank line may span two chunks).
 */
function longestEventRun(bytes: Uint8Array, run: number, previousByte: number, max: number): [number, number] {
  let prev = previousByte;
  for (let i = 0; i < bytes.byteLength; i++) {
    const b = bytes[i];
    if (b === 10 && prev === 10) run = 0;
    else if (b !== 13 && ++run > max) return [run, b];
    if (b !== 13) prev = b; // "\r\n\r\n" counts as a blank line too
  }
  return [run, prev];
}

/**
 * Build the outbound HTTP client. Throws nothing itself; see `Outbound` for what its calls reject
 * with. Call `close()` on shutdown so pooled sockets do not keep the process alive.
 */
export function createOutbound(options: OutboundOptions): Outbound {
  const maxBytes = options.maxResponseBytes ?? 4 * MiB;
  const userAgent = options.userAgent ?? 'switchboard';
  const agent = new Agent({
    connect: createConnector(options),
    headersTimeout: options.headersTimeoutMs ?? 30_000,
    bodyTimeout: options.bodyTimeoutMs ?? 30_000,
  });

  /** The pooled agent with one request's own timeouts (same connections; undici reads them per request). */
  const timed = (t: OutboundTimeouts) =>
    agent.compose((dispatch) => (opts, handler) => dispatch({ ...opts, headersTimeout: t.headersTimeoutMs, bodyTimeout: t.bodyTimeoutMs }, handler));

  async function outboundFetch(input: FetchInput, init?: RequestInit): Promise<UndiciResponse> {
    const [raw, requestInit] = splitInput(input, init);
    const timeouts = (requestInit as TimedInit)[TIMEOUTS];
    const url = parseHttpUrl(raw).href;
    const signal = requestInit.signal;
    const headers = new UndiciHeaders(requestInit.headers as ConstructorParameters<typeof UndiciHeaders>[0]);
    if (!headers.has('user-agent')) headers.set('user-agent', userAgent);

    let res: UndiciResponse;
    try {
      res = await traceOutbound(requestInit.method ?? 'GET', url, headers, () =>
        undiciFetch(url, {
          ...(requestInit as Parameters<typeof undiciFetch>[1]),
          headers,
          // 'manual' hands us the 3xx itself so we can name the Location in the error.
          redirect: 'manual',
          dispatcher: timeouts ? timed(timeouts) : agent,
        }),
      );
    } catch (err) {
      throw toOutboundError(err, url, signal);
    }

    // 304 is a cache answer, not a redirect; every other 3xx could steer us somewhere unchecked.
    if (res.status >= 300 && res.status < 400 && res.status !== 304) {
      await res.body?.cancel().catch(() => {});
      const location = res.headers.get('location') ?? '(no Location header)';
      throw new OutboundError('REDIRECT', `${url} answered ${res.status} redirecting to ${location}; redirects are not followed`, url);
    }
    const declared = Number(res.headers.get('content-length') ?? 0);
    if (declared > maxBytes) {
      await res.body?.cancel().catch(() => {});
      throw new OutboundError('TOO_LARGE', `response from ${url} declares ${declared} bytes, limit is ${maxBytes}`, url);
    }
    return capBody(res, maxBytes, url, signal);
  }

  const channels = createGrpcChannels({
    allowPrivate: options.allowPrivate,
    maxMessageBytes: maxBytes,
    resolve: (host, url) => resolveChecked(host, url, options),
  });
  const grpc: GrpcChannels = {
    async channel(url) {
      try {
        return await channels.channel(url);
      } catch (err) {
        if (err instanceof GrpcTargetError) throw new OutboundError('INVALID_URL', `not a gRPC target: ${url} (${err.message})`, url);
        throw err;
      }
    },
    close: () => channels.close(),
  };

  return {
    fetch: outboundFetch as unknown as typeof globalThis.fetch,
    grpc,

    async getJson(url, init) {
      const res = await outboundFetch(url, {
        method: 'GET',
        signal: init?.signal,
        headers: { accept: 'application/json', ...init?.headers },
      });
      const text = await res.text(); // capped and error-mapped by capBody
      let body: unknown = text;
      try {
        body = JSON.parse(text);
      } catch {
        // keep the raw text; see the interface doc
      }
      return { status: res.status, headers: res.headers as unknown as Headers, body };
    },

    async close() {
      channels.close();
      // A graceful close waits for in-flight requests, and an open SSE stream may never end;
      // don't let one hang shutdown.
      let timer: NodeJS.Timeout | undefined;
      const closed = agent.close().then(() => true, () => true);
      const expired = new Promise<boolean>((resolve) => (timer = setTimeout(resolve, CLOSE_GRACE_MS, false)));
      const graceful = await Promise.race([closed, expired]);
      clearTimeout(timer);
      if (!graceful) await agent.destroy().catch(() => {});
    },
  };
}
