/**
 * A reverse proxy in front of Switchboard for a suite that cannot send what a client of Switchboard sends: the
 * 0.3 TCK has no auth option and reads the card at the URL's root (like ../shared/conformance/v03/auth-proxy.mjs).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ProxyOptions {
  /**
   * Added as `Authorization: Bearer <key>` to every request that carries no credentials of its own (`Authorization`,
   * `X-API-Key`): those the suite sends on purpose, invalid ones to see them refused, are the gateway's to judge.
   */
  key?: string;
  /** Where `GET /.well-known/agent-card.json` is served from (the agent's gateway card). */
  cardPath?: string;
  /**
   * `client`: the gateway sees the client's Host, so the URLs of its cards point at the proxy and every call comes
   * through it; `target`: they point at the gateway, and only the card is read through the proxy.
   */
  host: 'client' | 'target';
}

export interface Proxy {
  url: string;
  close(): Promise<void>;
}

export async function startProxy(target: string, o: ProxyOptions): Promise<Proxy> {
  const t = new URL(target);
  const server = http.createServer((req, res) => {
    const path = o.cardPath && req.url === '/.well-known/agent-card.json' ? o.cardPath : (req.url ?? '/');
    const headers = { ...req.headers };
    if (o.key && headers.authorization === undefined && headers['x-api-key'] === undefined) headers.authorization = `Bearer ${o.key}`;
    if (o.host === 'target') headers.host = t.host;
    const up = http.request({ host: t.hostname, port: t.port, method: req.method, path, headers }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    up.on('error', (e) => {
      if (!res.headersSent) res.writeHead(502);
      res.end(String(e));
    });
    req.pipe(up);
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((ok) => {
        server.close(() => ok());
        server.closeAllConnections();
      }),
  };
}
