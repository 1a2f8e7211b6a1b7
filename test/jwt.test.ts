/**
 * Bearer JWTs (SWITCHBOARD_JWT_JWKS_URL): verified against a real JWKS served on loopback, fetched through the
 * guarded outbound client; each kind of bad token refused; a rotated key accepted; and a JWT caller is a caller like
 * a key's (roles, tenant) through the real gateway.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { type JWK, SignJWT, exportJWK, generateKeyPair } from 'jose';
import { type Gateway, startGateway } from './helpers/harness';
import { JwtError, JwtVerifier, looksLikeJwt } from '../src/auth/jwt-verifier';
import { createOutbound } from '../src/http/outbound';

type Key = { kid: string; alg: string; privateKey: Awaited<ReturnType<typeof generateKeyPair>>['privateKey']; jwk: JWK };

async function makeKey(kid: string, alg: 'RS256' | 'ES256'): Promise<Key> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  return { kid, alg, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' } };
}

/** A JWKS endpoint whose key set the test can change, or take down. */
async function startJwks(keys: Key[]) {
  let current = keys;
  let down = false;
  let fetches = 0;
  const server = http.createServer((_req, res) => {
    fetches++;
    if (down) return res.writeHead(503).end();
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: current.map((k) => k.jwk) }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks.json`,
    set: (k: Key[]) => void (current = k),
    down: (d: boolean) => void (down = d),
    fetches: () => fetches,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

const ISS = 'https://idp.test';
const AUD = 'switchboard';
const now = () => Math.floor(Date.now() / 1000);

function token(key: Key, claims: Record<string, unknown>, opts: { iss?: string; aud?: string; exp?: number; nbf?: number; sub?: string | null } = {}) {
  let jwt = new SignJWT(claims).setProtectedHeader({ alg: key.alg, kid: key.kid }).setIssuedAt().setIssuer(opts.iss ?? ISS).setAudience(opts.aud ?? AUD);
  if (opts.sub !== null) jwt = jwt.setSubject(opts.sub ?? 'user-1');
  jwt = jwt.setExpirationTime(opts.exp ?? now() + 300);
  if (opts.nbf) jwt = jwt.setNotBefore(opts.nbf);
  return jwt.sign(key.privateKey);
}

const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');

describe('JwtVerifier', () => {
  let rs: Key;
  let es: Key;
  let jwks: Awaited<ReturnType<typeof startJwks>>;
  const outbound = createOutbound({ allowPrivate: true });
  let verifier: JwtVerifier;

  before(async () => {
    [rs, es] = await Promise.all([makeKey('rs-1', 'RS256'), makeKey('es-1', 'ES256')]);
    jwks = await startJwks([rs, es]);
    verifier = new JwtVerifier({ jwksUrl: jwks.url, issuer: ISS, audience: AUD, fetch: outbound.fetch, cooldownMs: 0 });
  });
  after(async () => {
    await jwks.close();
    await outbound.close();
  });

  test('a good token, RS256 or ES256, gives its caller', async () => {
    const client = await verifier.verify(await token(rs, { switchboard_role: 'client', switchboard_tenant: 'team-a' }));
    assert.deepEqual({ ...client, expiresAt: undefined }, { keyId: `jwt:${ISS}:user-1`, subject: 'user-1', role: 'client', tenant: 'team-a', expiresAt: undefined });
    const agent = await verifier.verify(await token(es, { role: 'agent', tenant: 'team-a', switchboard_agent: 'echo-1' }, { sub: 'svc' }));
    assert.deepEqual([agent.role, agent.tenant, agent.agentId], ['agent', 'team-a', 'echo-1']);
    const admin = await verifier.verify(await token(es, { switchboard_role: 'admin' }));
    assert.equal(admin.tenant, null);
  });

  test('each kind of bad token is refused with a reason, never with the token', async () => {
    const ok = { switchboard_role: 'client', switchboard_tenant: 't' };
    const cases: [string, Promise<string> | string, RegExp][] = [
      ['alg none', `${b64({ alg: 'none' })}.${b64({ sub: 'x', switchboard_role: 'admin', iss: ISS, aud: AUD, exp: now() + 60 })}.`, /algorithm is not accepted|malformed/],
      ['HS256', new SignJWT(ok).setProtectedHeader({ alg: 'HS256', kid: 'rs-1' }).setSubject('x').setIssuer(ISS).setAudience(AUD).setExpirationTime(now() + 60).sign(new TextEncoder().encode('s'.repeat(32))), /algorithm is not accepted/],
      ['wrong issuer', token(rs, ok, { iss: 'https://evil.test' }), /iss/],
      ['wrong audience', token(rs, ok, { aud: 'someone-else' }), /aud/],
      ['expired', token(rs, ok, { exp: now() - 600 }), /expired/],
      ['not yet valid', token(rs, ok, { nbf: now() + 600 }), /not valid yet/],
      ['unknown kid', token({ ...rs, kid: 'nobody' }, ok), /unknown kid/],
      ['tampered', token(rs, ok).then((t) => t.replace(/\.[^.]+\./, `.${b64({ ...ok, switchboard_role: 'admin', sub: 'x', iss: ISS, aud: AUD, exp: now() + 60 })}.`)), /signature does not verify/],
      ['no role', token(rs, { switchboard_tenant: 't' }), /switchboard_role/],
      ['bad role', token(rs, { switchboard_role: 'root', switchboard_tenant: 't' }), /switchboard_role/],
      ['client without tenant', token(rs, { switchboard_role: 'client' }), /switchboard_tenant/],
      ['agent without agent id', token(rs, { switchboard_role: 'agent', switchboard_tenant: 't' }), /switchboard_agent/],
      ['no sub', token(rs, ok, { sub: null }), /sub/],
      ['not a JWT', 'sb_notajwt', /not a JWT/],
    ];
    for (const [name, t, reason] of cases) {
      const raw = await t;
      const err = await verifier.verify(raw).catch((e: unknown) => e);
      assert.ok(err instanceof JwtError, `${name}: ${String(err)}`);
      assert.equal(err.kind, 'invalid', name);
      assert.match(err.message, reason, name);
      assert.equal(err.message.includes(raw), false, `${name}: the message holds no token`);
    }
  });

  test('a rotated key set: a token with the new kid verifies once the JWKS has it', async () => {
    const next = await makeKey('rs-2', 'RS256');
    const t = await token(next, { switchboard_role: 'client', switchboard_tenant: 't' });
    await assert.rejects(verifier.verify(t), /unknown kid/);
    jwks.set([next]);
    assert.equal((await verifier.verify(t)).role, 'client');
    jwks.set([rs, es]);
  });

  test('the key set down or refused by the guarded client: "unavailable", not "invalid"', async () => {
    const fresh = new JwtVerifier({ jwksUrl: jwks.url, issuer: ISS, audience: AUD, fetch: outbound.fetch, cooldownMs: 0 });
    jwks.down(true);
    const err = await fresh.verify(await token(rs, { switchboard_role: 'client', switchboard_tenant: 't' })).catch((e: unknown) => e);
    jwks.down(false);
    assert.ok(err instanceof JwtError && err.kind === 'unavailable', String(err));
    const guarded = createOutbound({ allowPrivate: false });
    try {
      const before = jwks.fetches();
      const blocked = new JwtVerifier({ jwksUrl: jwks.url, fetch: guarded.fetch });
      const e2 = await blocked.verify(await token(rs, { switchboard_role: 'client', switchboard_tenant: 't' })).catch((e: unknown) => e);
      assert.ok(e2 instanceof JwtError && e2.kind === 'unavailable', String(e2));
      assert.equal(jwks.fetches(), before, 'a loopback JWKS is refused before any request when private addresses are not allowed');
    } finally {
      await guarded.close();
    }
  });

  test('looksLikeJwt', () => {
    assert.equal(looksLikeJwt('a.b.c'), true);
    assert.equal(looksLikeJwt('a.b.'), true);
    assert.equal(looksLikeJwt('sb_abc'), false);
    assert.equal(looksLikeJwt('a.b.c.d'), false);
    assert.equal(looksLikeJwt('a b.c.d'), false);
  });
});

describe('a JWT caller through the gateway', () => {
  let gw: Gateway;
  let key: Key;
  let jwks: Awaited<ReturnType<typeof startJwks>>;
  const outbound = createOutbound({ allowPrivate: true });

  before(async () => {
    key = await makeKey('gw-1', 'ES256');
    jwks = await startJwks([key]);
    gw = await startGateway({ jwt: new JwtVerifier({ jwksUrl: jwks.url, issuer: ISS, audience: AUD, fetch: outbound.fetch, cooldownMs: 0 }) });
  });
  after(async () => {
    await gw?.close();
    await jwks.close();
    await outbound.close();
  });

  const get = async (path: string, bearer: string) => (await fetch(`${gw.url}${path}`, { headers: { authorization: `Bearer ${bearer}` } })).status;

  test('roles and tenant come from the claims; bad tokens are 401; keys still work beside JWTs', async () => {
    assert.equal(await get('/agents', await token(key, { switchboard_role: 'client', switchboard_tenant: 'default' })), 200);
    assert.equal(await get('/ledger/reconcile', await token(key, { switchboard_role: 'client', switchboard_tenant: 'default' })), 403);
    assert.equal(await get('/ledger/reconcile', await token(key, { switchboard_role: 'operator', switchboard_tenant: 'default' })), 200);
    assert.equal(await get('/tenants', await token(key, { switchboard_role: 'admin' })), 200);
    assert.equal(await get('/agents', await token(key, { switchboard_role: 'client', switchboard_tenant: 'default' }, { exp: now() - 60 })), 401);
    assert.equal(await get('/agents', `${b64({ alg: 'none' })}.${b64({ sub: 'x', switchboard_role: 'admin' })}.`), 401);
    assert.equal(await get('/agents', gw.keys.client), 200);
    const res = await fetch(`${gw.url}/agents`, { headers: { authorization: `Bearer ${await token(key, { switchboard_role: 'client', switchboard_tenant: 'default' }, { aud: 'x' })}` } });
    assert.match(res.headers.get('www-authenticate') ?? '', /invalid_token/);
    assert.match(((await res.json()) as { error: string }).error, /aud/);
  });

  test('the key set down: 503 with Retry-After, not 401', async () => {
    jwks.down(true);
    try {
      // A kid the cached set lacks makes the verifier fetch the set again (no cooldown here), which fails.
      const other = await makeKey('gw-2', 'ES256');
      const res = await fetch(`${gw.url}/agents`, { headers: { authorization: `Bearer ${await token(other, { switchboard_role: 'client', switchboard_tenant: 'default' })}` } });
      assert.equal(res.status, 503);
      assert.ok(Number(res.headers.get('retry-after')) > 0);
      assert.match(((await res.json()) as { error: string }).error, /cannot be checked right now/);
    } finally {
      jwks.down(false);
    }
  });
});
