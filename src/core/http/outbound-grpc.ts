/**
 * gRPC channels to agents, under the same rules as every other outbound call (src/core/http/outbound.ts owns the
 * address policy and hands it in as `resolve`): the host is resolved and checked by Switchboard, and the channel
 * connects to that checked address (an `ipv4:`/`ipv6:` target), so grpc-js never resolves a name itself and a
 * rebinding DNS answer cannot steer a connection to a private address. TLS still verifies the certificate
 * against the URL's host name (SNI and `ssl_target_name_override`), and `:authority` is the URL's host:port.
 *
 * Channels are shared per (address, host, port, TLS) and kept in a small LRU: grpc-js multiplexes every call to
 * one agent over one HTTP/2 connection, as undici pools HTTP connections.
 */
import * as grpc from '@grpc/grpc-js';
import * as net from 'node:net';

/** The URL of a gRPC interface is not one Switchboard can call. */
export class GrpcTargetError extends Error {}

export interface GrpcTarget {
  host: string;
  port: number;
  /** The scheme the URL gave, if any (a bare `host:port` has none). */
  scheme?: 'http' | 'https' | 'grpc' | 'grpcs';
}

const DEFAULT_PORTS: Record<NonNullable<GrpcTarget['scheme']>, number | undefined> = { http: 80, https: 443, grpc: undefined, grpcs: 443 };

/**
 * Reads a gRPC interface URL as agent cards write it: `host:port` (the usual form; port 443 when absent),
 * `[v6]:port`, or with a scheme, `https://`, `grpcs://` (TLS), `http://`, `grpc://` (plaintext; `grpc://` needs a
 * port). gRPC has no path prefix, so a URL with a path is refused rather than called without it.
 * @throws GrpcTargetError saying what is wrong.
 */
export function parseGrpcTarget(raw: string): GrpcTarget {
  const text = raw.trim();
  const schemed = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(text);
  if (schemed) {
    const scheme = schemed[1]!.toLowerCase();
    if (!(scheme in DEFAULT_PORTS)) throw new GrpcTargetError(`the scheme ${scheme}: is not one of http, https, grpc, grpcs`);
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      throw new GrpcTargetError('not a URL');
    }
    if (url.pathname !== '' && url.pathname !== '/') throw new GrpcTargetError(`a gRPC interface has no path (got ${url.pathname})`);
    if (url.search || url.hash || url.username || url.password) throw new GrpcTargetError('a gRPC interface URL has no query, fragment or user info');
    const s = scheme as NonNullable<GrpcTarget['scheme']>;
    const port = url.port ? Number(url.port) : DEFAULT_PORTS[s];
    if (port === undefined) throw new GrpcTargetError(`a ${scheme}:// URL needs a port`);
    const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
    if (!host) throw new GrpcTargetError('no host');
    return { host, port, scheme: s };
  }
  const bare = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9.-]+))(?::(\d{1,5}))?$/.exec(text);
  if (!bare) throw new GrpcTargetError('expected host:port or a http(s)/grpc(s) URL');
  const host = bare[1] ?? bare[2]!;
  if (bare[1] !== undefined && net.isIP(host) !== 6) throw new GrpcTargetError(`${host} is not an IPv6 address`);
  const port = bare[3] ? Number(bare[3]) : 443;
  if (port < 1 || port > 65535) throw new GrpcTargetError(`port ${port} is out of range`);
  return { host, port };
}

/**
 * Whether a channel to `target` uses TLS. The URL decides when it can: `https`/`grpcs` always, `http`/`grpc`
 * never. A bare `host:port` uses TLS on 443, and on any other port too unless private URLs are allowed (a
 * development setting, where `localhost:50051` is the common plaintext case): a production Switchboard never
 * sends a credential in clear text to an agent whose URL did not ask for it.
 */
export function usesTls(target: GrpcTarget, allowPrivate: boolean): boolean {
  if (target.scheme === 'https' || target.scheme === 'grpcs') return true;
  if (target.scheme === 'http' || target.scheme === 'grpc') return false;
  return target.port === 443 || !allowPrivate;
}

export interface GrpcChannelsOptions {
  allowPrivate: boolean;
  /** The largest message accepted from an agent (the outbound response cap). */
  maxMessageBytes: number;
  /**
   * Resolves a host to the one address to connect to, refusing it when the policy says so (rejects with the
   * outbound error to report). Called for every channel() call, so a changed DNS answer is checked too.
   */
  resolve(host: string, url: string): Promise<{ address: string; family: number }>;
  /** Channels kept open at once (least recently used closed first). Default 256. */
  maxChannels?: number;
}

export interface GrpcChannels {
  /**
   * A channel to the agent at `url`, connected (lazily) to the checked address. Rejects with GrpcTargetError
   * for a URL that is not a gRPC target, and with whatever `resolve` rejects with (a refused address, DNS).
   */
  channel(url: string): Promise<grpc.Channel>;
  /** Closes every channel; calls still running on them fail with CANCELLED/UNAVAILABLE. */
  close(): void;
}

/**
 * Keep-alive pings while a call is open. Five minutes is the least interval that servers accept by default
 * (grpc-go's and grpc-java's enforcement policies answer more frequent pings with GOAWAY too_many_pings, which
 * would cut a long quiet stream); the call's deadline bounds every call anyway.
 */
export const GRPC_KEEPALIVE_MS = 5 * 60_000;
const KEEPALIVE_TIMEOUT_MS = 20_000;
/** An idle channel drops its connection after this (it reconnects on the next call). */
const IDLE_MS = 5 * 60_000;

export function createGrpcChannels(options: GrpcChannelsOptions): GrpcChannels {
  const max = options.maxChannels ?? 256;
  const channels = new Map<string, grpc.Channel>();
  // One credentials object per kind, so equal channels share grpc-js's subchannels.
  const tls = grpc.credentials.createSsl();
  const plain = grpc.credentials.createInsecure();

  return {
    async channel(url) {
      const target = parseGrpcTarget(url);
      const secure = usesTls(target, options.allowPrivate);
      const { address, family } = await options.resolve(target.host, url);
      const authorityHost = net.isIP(target.host) === 6 ? `[${target.host}]` : target.host;
      const key = `${secure ? 'tls' : 'plain'}|${address}|${target.port}|${target.host}`;
      const cached = channels.get(key);
      if (cached) {
        channels.delete(key); // re-inserted: most recently used last
        channels.set(key, cached);
        return cached;
      }
      const grpcTarget = family === 6 ? `ipv6:[${address}]:${target.port}` : `ipv4:${address}:${target.port}`;
      const channelOptions: grpc.ChannelOptions = {
        'grpc.default_authority': `${authorityHost}:${target.port}`,
        'grpc.max_receive_message_length': options.maxMessageBytes,
        'grpc.keepalive_time_ms': GRPC_KEEPALIVE_MS,
        'grpc.keepalive_timeout_ms': KEEPALIVE_TIMEOUT_MS,
        'grpc.keepalive_permit_without_calls': 0,
        'grpc.client_idle_timeout_ms': IDLE_MS,
        // The address was checked; a proxy from the environment would connect somewhere else.
        'grpc.enable_http_proxy': 0,
        // The certificate must name the URL's host, not the address connected to. (An IP literal has no SNI.)
        ...(secure && !net.isIP(target.host) ? { 'grpc.ssl_target_name_override': target.host } : {}),
      };
      const channel = new grpc.Channel(grpcTarget, secure ? tls : plain, channelOptions);
      channels.set(key, channel);
      if (channels.size > max) {
        const [oldestKey, oldest] = channels.entries().next().value as [string, grpc.Channel];
        channels.delete(oldestKey);
        oldest.close();
      }
      return channel;
    },
    close() {
      for (const c of channels.values()) c.close();
      channels.clear();
    },
  };
}
