// Tests for src/core/http/outbound.ts. Only ever talks to node:http servers on 127.0.0.1; the blocked
// addresses used below (10.0.0.1, 169.254.169.254, ...) are refused before any socket is opened.
import assert from 'node:assert/strict';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { createOutbound, isPrivateAddress, OutboundError, withTimeouts, type OutboundErrorCode } from '../src/core/http/outbound';
import { isOwnAddress } from '../src/core/http/address-policy';
import { networkInterfaces } from 'node:os';
import { eventually } from './helpers/harness';

const CAP = 1024;

let server: http.Server;
let port: number;
let base: string;
let connections = 0;
const seenUserAgents: string[] = [];

function route(req: http.IncomingMessage, res: http.ServerResponse): void {
  seenUserAgents.push(req.headers['user-agent'] ?? '');
  switch (req.url) {
    case '/json':
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ name: 'agent', n: 1 }));
      return;
    case '/missing':
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'nope' }));
      return;
    case '/html-error':
      res.writeHead(502, { 'content-type': 'text/html' }).end('<h1>Bad gateway</h1>');
      return;
    case '/redirect':
      res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data/' }).end();
      return;
    case '/big-declared':
      res.writeHead(200, { 'content-length': String(CAP * 2) }).end(Buffer.alloc(CAP * 2, 'a'));
      return;
    case '/big-chunked': {
      // No Content-Length: chunked encoding, so only counting while streaming can catch it.
      res.writeHead(200, { 'content-type': 'text/plain' });
      for (let i = 0; i < 10; i++) res.write(Buffer.alloc(CAP / 2, 'b'));
      res.end();
      return;
    }
    case '/exactly-cap':
      res.writeHead(200);
      res.write(Buffer.alloc(CAP / 2, 'c'));
      res.end(Buffer.alloc(CAP / 2, 'c'));
      return;
    case '/long-event-stream': {
      // Ten times the cap in total, but every event small: an hours-long SSE stream must not be cut.
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const event = `data: ${'e'.repeat(CAP / 8)}\n\n`;
      for (let i = 0; i < 80; i++) res.write(event);
      res.end();
      return;
    }
    case '/huge-event': {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: small\n\n');
      for (let i = 0; i < 4; i++) res.write(`data: ${'h'.repeat(CAP / 2)}`); // one event over the cap
      res.end('\n\n');
      return;
    }
    case '/never-answers':
      return; // keep the socket open, send nothing
    case '/stalls-mid-body':
      res.writeHead(200);
      res.write('partial');
      return; // never end
    case '/pauses': // headers after 1.5 s, then a body silent for 1.5 s (undici's timers tick every ~0.5 s)
      setTimeout(() => {
        res.writeHead(200);
        res.write('before ');
        setTimeout(() => res.end('after'), 1_500);
      }, 1_500);
      return;
    default:
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
  }
}

before(async () => {
  server = http.createServer(route);
  server.on('connection', () => connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
  base = `http://127.0.0.1:${port}`;
});

after(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

async function rejectsWith(promise: Promise<unknown>, code: OutboundErrorCode, message?: RegExp): Promise<OutboundError> {
  let caught: unknown;
  try {
    await promise;
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof OutboundError, `expected OutboundError ${code}, got ${String(caught)}`);
  assert.equal(caught.code, code, caught.message);
  if (message) assert.match(caught.message, message);
  return caught;
}

describe('isPrivateAddress', () => {
  const blocked = [
    '0.0.0.0', '0.1.2.3', '10.0.0.1', '10.255.255.255', '100.64.0.1', '100.127.255.255', '127.0.0.1', '127.1.2.3',
    '169.254.169.254', '172.16.0.1', '172.31.255.255', '192.0.0.8', '192.168.1.1', '198.18.0.1', '198.19.255.255',
    '224.0.0.1', '239.255.255.250', '240.0.0.1', '255.255.255.255',
    '::', '::1', '[::1]', 'fc00::1', 'fd12:3456::1', 'fe80::1', 'fe80::1%eth0', 'febf::1', 'ff02::1',
    '::ffff:127.0.0.1', '::ffff:7f00:1', '::ffff:10.0.0.1', '::ffff:169.254.169.254', '0:0:0:0:0:ffff:c0a8:0101',
    '64:ff9b::127.0.0.1', '64:ff9b::a00:1', '64:ff9b::a9fe:a9fe', '64:ff9b:1::1.2.3.4',
    // the rest of IANA's special-purpose registries: documentation, AS112, AMT, 6to4 relays, discard, Teredo, 6to4, SRv6
    '192.0.2.2', '198.51.100.7', '203.0.113.200', '192.31.196.1', '192.52.193.1', '192.88.99.1', '192.175.48.1',
    '100::1', '100:0:0:1::1', '2001::1', '2001:2::1', '2001:20::1', '2001:db8::1', '2002:c000:0201::1', '2620:4f:8000::1',
    '3fff::1', '5f00::1', '::ffff:192.0.2.2', '64:ff9b::203.0.113.1',
    // not an IP at all: fail closed
    'localhost', 'example.com', '', '999.1.1.1',
  ];
  const allowed = [
    '8.8.8.8', '1.1.1.1', '9.255.255.255', '11.0.0.1', '100.63.255.255', '100.128.0.1', '126.255.255.255', '128.0.0.1',
    '169.253.255.255', '172.15.255.255', '172.32.0.1', '192.0.1.1', '192.167.255.255', '198.17.255.255', '198.20.0.1',
    '223.255.255.255', '2606:4700:4700::1111', '2001:4860:4860::8888', '::ffff:8.8.8.8', '64:ff9b::808:808', '64:ff9b::8.8.8.8',
  ];
  for (const ip of blocked) test(`blocks ${ip || '(empty)'}`, () => assert.equal(isPrivateAddress(ip), true));
  // Whatever listens on 0.0.0.0 beside Switchboard is reachable at the machine's own addresses, public ones too.
  test("this machine's own interface addresses, each one", () => {
    const own = Object.values(networkInterfaces()).flatMap((list) => (list ?? []).map((a) => a.address.replace(/%.*$/, '')));
    assert.ok(own.length > 0);
    for (const address of own) assert.equal(isOwnAddress(address), true, address);
    assert.equal(isOwnAddress('8.8.8.8'), false);
  });
  for (const ip of allowed) test(`allows ${ip}`, () => assert.equal(isPrivateAddress(ip), false));
});

describe('with allowPrivate=false', () => {
  const outbound = createOutbound({ allowPrivate: false });
  after(() => outbound.close());

  const targets = (): Array<[string, string]> => [
    ['127.0.0.1 literal', `http://127.0.0.1:${port}/json`],
    ['localhost', `http://localhost:${port}/json`],
    ['::1', `http://[::1]:${port}/json`],
    ['::ffff:127.0.0.1', `http://[::ffff:127.0.0.1]:${port}/json`],
    ['decimal 127.0.0.1', `http://2130706433:${port}/json`],
    ['10.0.0.1', 'http://10.0.0.1/'],
    ['cloud metadata', 'http://169.254.169.254/latest/meta-data/'],
    ['https to a private literal', 'https://192.168.0.1/'],
    ['documentation range', `http://203.0.113.9:${port}/json`],
    // What listens on 0.0.0.0 beside Switchboard answers at these; refused before any connection is tried.
    ...Object.values(networkInterfaces())
      .flatMap((list) => list ?? [])
      .filter((a) => !a.internal && a.family === 'IPv4')
      .map((a): [string, string] => [`this machine's ${a.address}`, `http://${a.address}:${port}/json`]),
  ];

  test('refuses private and loopback targets before connecting', async () => {
    const before = connections;
    for (const [name, url] of targets()) {
      const err = await rejectsWith(outbound.fetch(url), 'BLOCKED_ADDRESS');
      assert.equal(err.url, new URL(url).href, name);
      assert.match(err.message, /refusing to connect to .+ \(.+\)/, name);
    }
    assert.equal(connections, before, 'no connection reached the server');
  });

  test('names the host and the resolved address for DNS names', async () => {
    await rejectsWith(outbound.fetch(`http://localhost:${port}/`), 'BLOCKED_ADDRESS', /localhost \((127\.0\.0\.1|::1)\)/);
  });

  test('getJson is guarded too', async () => {
    await rejectsWith(outbound.getJson(`http://localhost:${port}/json`), 'BLOCKED_ADDRESS');
  });
});

describe('DNS rebinding (F10): the address is checked at connect, on what the socket would use', () => {
  /** A resolver for `rebind.test` that answers from `answers` in turn, as a rebinding attacker's DNS would. */
  function rebinding(answers: string[][]): { lookup: typeof import('node:dns').lookup; asked: () => number } {
    let n = 0;
    const lookup = ((_host: string, _opts: unknown, cb: (err: null, addresses: { address: string; family: number }[]) => void) => {
      const addresses = answers[n++ % answers.length].map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
      setImmediate(() => cb(null, addresses));
    }) as unknown as typeof import('node:dns').lookup;
    return { lookup, asked: () => n };
  }

  test('a host answering public, then private, is refused every time it answers private, and never reaches the private server', async () => {
    // 8.8.8.8 stands for the public answer a pre-check would have seen; this box cannot reach it.
    const dns = rebinding([['8.8.8.8'], ['127.0.0.1']]);
    const outbound = createOutbound({ allowPrivate: false, lookup: dns.lookup, connectTimeoutMs: 300 });
    const before = connections;
    try {
      const codes: OutboundErrorCode[] = [];
      for (let i = 0; i < 10; i++) {
        const err = await outbound.fetch(`http://rebind.test:${port}/json`).then(
          () => assert.fail('a rebinding host was reached'),
          (e: unknown) => e as OutboundError,
        );
        assert.ok(err instanceof OutboundError, String(err));
        codes.push(err.code);
      }
      assert.equal(dns.asked(), 10, 'one lookup per connect: nothing was cached across the switch');
      assert.deepEqual(codes.filter((_, i) => i % 2 === 1), Array(5).fill('BLOCKED_ADDRESS'), 'every private answer refused');
      assert.ok(codes.filter((_, i) => i % 2 === 0).every((c) => c !== 'BLOCKED_ADDRESS'), 'public answers are not refused as private');
      assert.equal(connections, before, 'no connection reached the private server');
    } finally {
      await outbound.close();
    }
  });

  test('one answer holding a public and a private address refuses the whole host', async () => {
    for (const answer of [['8.8.8.8', '127.0.0.1'], ['::1', '8.8.8.8'], ['8.8.8.8', '169.254.169.254']]) {
      const outbound = createOutbound({ allowPrivate: false, lookup: rebinding([answer]).lookup, connectTimeoutMs: 300 });
      try {
        await rejectsWith(outbound.fetch(`http://rebind.test:${port}/json`), 'BLOCKED_ADDRESS');
      } finally {
        await outbound.close();
      }
    }
  });
});

describe('with allowPrivate=true', () => {
  const outbound = createOutbound({
    allowPrivate: true,
    maxResponseBytes: CAP,
    headersTimeoutMs: 200,
    bodyTimeoutMs: 200,
  });
  after(() => outbound.close());

  test('reaches loopback by literal and by localhost', async () => {
    const res = await outbound.fetch(`${base}/`);
    assert.equal(res.status, 200);
    assert.equal(await res.text(), 'ok');
    assert.equal(res.url, `${base}/`);
    // localhost may resolve to ::1 first; the server only listens on 127.0.0.1, but happy eyeballs falls back.
    const viaName = await outbound.fetch(`http://localhost:${port}/`);
    assert.equal(await viaName.text(), 'ok');
  });

  test('sends the default user agent', async () => {
    seenUserAgents.length = 0;
    await (await outbound.fetch(`${base}/`)).text();
    assert.deepEqual(seenUserAgents, ['switchboard']);
  });

  test('accepts a Request object from the global fetch implementation', async () => {
    const res = await outbound.fetch(new Request(`${base}/json`, { headers: { 'user-agent': 'custom' } }));
    assert.deepEqual(await res.json(), { name: 'agent', n: 1 });
    assert.equal(seenUserAgents.at(-1), 'custom');
  });

  test('getJson parses JSON', async () => {
    const { status, headers, body } = await outbound.getJson(`${base}/json`);
    assert.equal(status, 200);
    assert.equal(headers.get('content-type'), 'application/json');
    assert.deepEqual(body, { name: 'agent', n: 1 });
  });

  test('getJson returns non-2xx statuses instead of throwing', async () => {
    assert.deepEqual(await outbound.getJson(`${base}/missing`), {
      status: 404,
      headers: (await outbound.getJson(`${base}/missing`)).headers,
      body: { error: 'nope' },
    });
    const html = await outbound.getJson(`${base}/html-error`);
    assert.equal(html.status, 502);
    assert.equal(html.body, '<h1>Bad gateway</h1>');
  });

  test('refuses to follow redirects and names the Location', async () => {
    await rejectsWith(outbound.fetch(`${base}/redirect`), 'REDIRECT', /302.*http:\/\/169\.254\.169\.254\/latest\/meta-data\//);
    await rejectsWith(outbound.getJson(`${base}/redirect`), 'REDIRECT');
  });

  test('refuses an oversized response announced by Content-Length', async () => {
    await rejectsWith(outbound.fetch(`${base}/big-declared`), 'TOO_LARGE', /2048/);
  });

  test('caps a chunked response while streaming, for any reader of the body', async () => {
    const res = await outbound.fetch(`${base}/big-chunked`);
    assert.equal(res.status, 200);
    await rejectsWith(res.text(), 'TOO_LARGE');
    await rejectsWith(outbound.getJson(`${base}/big-chunked`), 'TOO_LARGE');
    // Reading the stream by hand is capped as well.
    const raw = await outbound.fetch(`${base}/big-chunked`);
    const reader = raw.body!.getReader();
    let total = 0;
    const readAll = async () => {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        total += value.byteLength;
      }
    };
    await rejectsWith(readAll(), 'TOO_LARGE');
    assert.ok(total <= CAP, `read ${total} bytes past a ${CAP} byte cap`);
  });

  test('an event stream is capped per event, not in total', async () => {
    const res = await outbound.fetch(`${base}/long-event-stream`);
    assert.equal((await res.text()).length, 80 * (CAP / 8 + 8));
    const huge = await outbound.fetch(`${base}/huge-event`);
    await rejectsWith(huge.text(), 'TOO_LARGE', /an event of the stream/);
  });

  test('a response of exactly the cap is fine', async () => {
    const res = await outbound.fetch(`${base}/exactly-cap`);
    assert.equal((await res.text()).length, CAP);
  });

  test('a server that never sends headers times out', async () => {
    const started = Date.now();
    await rejectsWith(outbound.fetch(`${base}/never-answers`), 'TIMEOUT');
    assert.ok(Date.now() - started < 5_000);
  });

  test('a body that stalls times out', async () => {
    const res = await outbound.fetch(`${base}/stalls-mid-body`);
    await rejectsWith(res.text(), 'TIMEOUT');
  });

  test('withTimeouts gives one request its own header and body timeouts (an agent exchange, a quiet stream)', async () => {
    // The client's 200 ms would cut both waits; the request's own 5 s lets them pass, on the same pool.
    const patient = withTimeouts(outbound.fetch, { headersTimeoutMs: 5_000, bodyTimeoutMs: 5_000 });
    assert.equal(await (await patient(`${base}/pauses`)).text(), 'before after');
    await rejectsWith(outbound.fetch(`${base}/pauses`), 'TIMEOUT');
    // And a shorter one cuts a client's longer default.
    const lenient = createOutbound({ allowPrivate: true, headersTimeoutMs: 60_000, bodyTimeoutMs: 60_000 });
    try {
      const res = await withTimeouts(lenient.fetch, { headersTimeoutMs: 60_000, bodyTimeoutMs: 300 })(`${base}/stalls-mid-body`);
      const started = Date.now();
      await rejectsWith(res.text(), 'TIMEOUT');
      assert.ok(Date.now() - started < 5_000);
    } finally {
      await lenient.close();
    }
  });

  test('a refused connection is NETWORK', async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const deadPort = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    await rejectsWith(outbound.fetch(`http://127.0.0.1:${deadPort}/`), 'NETWORK', /ECONNREFUSED/);
  });

  test('non-http schemes and garbage are INVALID_URL', async () => {
    for (const url of ['ftp://127.0.0.1/', 'file:///etc/passwd', 'data:text/plain,hi', 'not a url', 'ws://127.0.0.1/']) {
      await rejectsWith(outbound.fetch(url), 'INVALID_URL');
    }
    await rejectsWith(outbound.getJson('javascript:alert(1)'), 'INVALID_URL');
  });
});

describe('caller aborts', () => {
  // Long timeouts so that only the caller's signal can end these requests.
  const outbound = createOutbound({ allowPrivate: true, headersTimeoutMs: 10_000, bodyTimeoutMs: 10_000 });
  after(() => outbound.close());

  test('an AbortSignal aborts a request waiting for headers, as an AbortError', async () => {
    const controller = new AbortController();
    const seen = seenUserAgents.length;
    const fetching = outbound.fetch(`${base}/never-answers`, { signal: controller.signal });
    fetching.catch(() => undefined); // asserted below
    await eventually(() => seenUserAgents.length > seen, 10_000, 'the request at the server'); // now waiting for headers
    controller.abort();
    await assert.rejects(fetching, (err: unknown) => {
      assert.ok(!(err instanceof OutboundError));
      assert.equal((err as Error).name, 'AbortError');
      return true;
    });
  });

  test('an AbortSignal aborts a body read, as an AbortError', async () => {
    const controller = new AbortController();
    const res = await outbound.fetch(`${base}/stalls-mid-body`, { signal: controller.signal });
    const reading = res.text(); // the body never ends: this read is under way when the abort comes
    reading.catch(() => undefined); // asserted below
    controller.abort();
    await assert.rejects(reading, { name: 'AbortError' });
  });

  test('an abort reason is passed through unchanged', async () => {
    const reason = new Error('activity cancelled');
    await assert.rejects(outbound.getJson(`${base}/never-answers`, { signal: AbortSignal.abort(reason) }), (err) => err === reason);
  });
});
