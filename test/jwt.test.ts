/**
 * Bearer JWTs (SWITCHBOARD_JWT_JWKS_URL, src/core/auth/jwt.ts): verified against a real JWKS served on loopback and
 * fetched through the guarded outbound client; each kind of bad token refused with its reason ('invalid'); a key
 * set that cannot be fetched reported as 'unavailable'; a rotated key accepted; and a JWT caller is a caller like
 * a key's (roles, tenant) through the real gateway.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { type JWK, SignJWT, exportJWK, generateKeyPair } from 'jose';
import { type Gateway, startGateway } from './helpers/harness';
import { JwtError, JwtVerifier, looksLikeJwt } from '../src/core/auth/jwt';
import { createOutbound } from '../src/core/http/outbound';

type Alg = 'RS256' | 'ES256' | 'PS256' | 'EdDSA';
type Key = { kid: string | undefined; alg: Alg; privateKey: Awaited<ReturnType<typeof generateKeyPair>>['privateKey']; jwk: JWK };

async function makeKey(kid: string, alg: Alg): Promise<Key> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  return { kid, alg, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' } };
}

/** A JWKS endpoint whose key set the test can change, take down (503), or make misbehave. */
async function startJwks(keys: Key[]) {
  let current = keys;
  let mode: 'ok' | 'down' | 'redirect' | 'garbage' | 'hang' = 'ok';
  let fetches = 0;
  const server = http.createServer((_req, res) => {
    fetches++;
    if (mode === 'down') return void res.writeHead(503).end();
    if (mode === 'redirect') return void res.writeHead(302, { location: 'http://169.254.169.254/keys' }).end();
    if (mode === 'garbage') return void res.writeHead(200, { 'content-type': 'text/html' }).end('<html>maintenance</html>');
    if (mode === 'hang') return; // never answers
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: current.map((k) => k.jwk) }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/.well-known/jwks.json`,
    set: (k: Key[]) => void (current = k),
    mode: (m: typeof mode) => void (mode = m),
    fetches: () => fetches,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

const ISS = 'https://idp.test';
const AUD = 'switchboard';
const now = () => Math.floor(Date.now() / 1000);

type TokenOpts = { iss?: string | null; aud?: string; exp?: number; nbf?: number; sub?: string | null; kid?: string | null };

function token(key: Key, claims: Record<string, unknown>, opts: TokenOpts = {}): Promise<string> {
  const kid = opts.kid === null ? undefined : (opts.kid ?? key.kid);
  let jwt = new SignJWT(claims).setProtectedHeader({ alg: key.alg, ...(kid ? { kid } : {}) }).setIssuedAt().setAudience(opts.aud ?? AUD);
  if (opts.iss !== null) jwt = jwt.setIssuer(opts.iss ?? ISS);
  if (opts.sub !== null) jwt = jwt.setSubject(opts.sub ?? 'user-1');
  jwt = jwt.setExpirationTime(opts.exp ?? now() + 300);
  if (opts.nbf) jwt = jwt.setNotBefore(opts.nbf);
  return jwt.sign(key.privateKey);
}

const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
const CLIENT = { switchboard_role: 'client', switchboard_tenant: 'team-a' };

async function refusal(verifier: JwtVerifier, raw: string): Promise<JwtError> {
  const err = await verifier.verify(raw).then(
    (id) => assert.fail(`accepted: ${JSON.stringify(id)}`),
    (e: unknown) => e,
  );
  assert.ok(err instanceof JwtError, `not a JwtError: ${String(err)}`);
  return err;
}

describe('JwtVerifier', () => {
  let rs: Key;
  let es: Key;
  let jwks: Awaited<ReturnType<typeof startJwks>>;
  const outbound = createOutbound({ allowPrivate: true });
  /** cooldownMs 0: every unknown kid fetches the set again. */
  let verifier: JwtVerifier;
  const fresh = (extra: Partial<ConstructorParameters<typeof JwtVerifier>[0]> = {}) =>
    new JwtVerifier({ jwksUrl: jwks.url, issuer: ISS, audience: AUD, fetch: outbound.fetch, cooldownMs: 0, ...extra });

  before(async () => {
    [rs, es] = await Promise.all([makeKey('rs-1', 'RS256'), makeKey('es-1', 'ES256')]);
    jwks = await startJwks([rs, es]);
    verifier = fresh();
  });
  after(async () => {
    await jwks.close();
    await outbound.close();
  });

  test('a good RS256 token gives its identity', async () => {
    const exp = now() + 300;
    const id = await verifier.verify(await token(rs, CLIENT, { exp }));
    assert.deepEqual(id, { subject: 'user-1', tenant: 'team-a', role: 'client', expiresAt: new Date(exp * 1000), keyId: `jwt:${ISS}:user-1` });
  });

  test('a good ES256 agent token, with the fallback claim names role and tenant', async () => {
    const id = await verifier.verify(await token(es, { role: 'agent', tenant: 'team-b', switchboard_agent: 'echo-1' }, { sub: 'svc-7' }));
    assert.equal(id.role, 'agent');
    assert.equal(id.tenant, 'team-b');
    assert.equal(id.agentId, 'echo-1');
    assert.equal(id.subject, 'svc-7');
    assert.equal(id.keyId, `jwt:${ISS}:svc-7`);
  });

  test('the switchboard_ names win over the fallbacks; switchboard_agent is kept only for role agent', async () => {
    const id = await verifier.verify(
      await token(rs, { switchboard_role: 'operator', role: 'admin', switchboard_tenant: 'team-a', tenant: 'team-z', switchboard_agent: 'x' }),
    );
    assert.deepEqual([id.role, id.tenant, id.agentId], ['operator', 'team-a', undefined]);
    assert.equal('agentId' in id, false);
  });

  test('an admin may name no tenant (null), or one', async () => {
    assert.equal((await verifier.verify(await token(es, { switchboard_role: 'admin' }))).tenant, null);
    assert.equal((await verifier.verify(await token(es, { switchboard_role: 'admin', switchboard_tenant: 't' }))).tenant, 't');
  });

  test('PS256 and EdDSA keys verify too', async () => {
    const [ps, ed] = await Promise.all([makeKey('ps-1', 'PS256'), makeKey('ed-1', 'EdDSA')]);
    jwks.set([rs, es, ps, ed]);
    try {
      assert.equal((await verifier.verify(await token(ps, CLIENT))).role, 'client');
      assert.equal((await verifier.verify(await token(ed, CLIENT))).role, 'client');
    } finally {
      jwks.set([rs, es]);
    }
  });

  test('no issuer configured and no iss in the token: keyId is jwt::<sub>', async () => {
    const open = new JwtVerifier({ jwksUrl: jwks.url, fetch: outbound.fetch, cooldownMs: 0 });
    const id = await open.verify(await token(rs, CLIENT, { iss: null, aud: 'anything' }));
    assert.equal(id.keyId, 'jwt::user-1');
  });

  test('a token without kid is tried against every key of its type in the set', async () => {
    const rs2 = await makeKey('rs-2', 'RS256');
    jwks.set([rs, rs2, es]);
    try {
      const v = fresh();
      assert.equal((await v.verify(await token(rs2, CLIENT, { kid: null }))).tenant, 'team-a');
      assert.equal((await v.verify(await token(rs, CLIENT, { kid: null }))).tenant, 'team-a');
      const stranger = await makeKey('x', 'RS256');
      assert.match((await refusal(v, await token(stranger, CLIENT, { kid: null }))).message, /signature does not verify/);
    } finally {
      jwks.set([rs, es]);
    }
  });

  test('each kind of bad token is refused as invalid, with a reason and never the token', async () => {
    const hs = new SignJWT(CLIENT)
      .setProtectedHeader({ alg: 'HS256', kid: 'rs-1' })
      .setSubject('x')
      .setIssuer(ISS)
      .setAudience(AUD)
      .setExpirationTime(now() + 60)
      .sign(new TextEncoder().encode('s'.repeat(32)));
    const tampered = token(rs, CLIENT).then((t) => t.replace(/\.[^.]+\./, `.${b64({ ...CLIENT, switchboard_role: 'admin', sub: 'x', iss: ISS, aud: AUD, exp: now() + 60 })}.`));
    const cases: [string, Promise<string> | string, RegExp][] = [
      ['alg none', `${b64({ alg: 'none', typ: 'JWT' })}.${b64({ sub: 'x', switchboard_role: 'admin', iss: ISS, aud: AUD, exp: now() + 60 })}.`, /algorithm \(none\) is not accepted/],
      ['alg none with kid', `${b64({ alg: 'none', kid: 'rs-1' })}.${b64({ sub: 'x', switchboard_role: 'admin' })}.`, /algorithm \(none\) is not accepted/],
      ['HS256', hs, /algorithm \(HS256\) is not accepted/],
      ['wrong issuer', token(rs, CLIENT, { iss: 'https://evil.test' }), /another issuer \(iss\)/],
      ['no issuer', token(rs, CLIENT, { iss: null }), /no iss claim/],
      ['wrong audience', token(rs, CLIENT, { aud: 'someone-else' }), /another audience \(aud\)/],
      ['expired', token(rs, CLIENT, { exp: now() - 600 }), /expired/],
      ['not yet valid', token(rs, CLIENT, { nbf: now() + 600 }), /not valid yet \(nbf\)/],
      ['unknown kid', token({ ...rs, kid: 'nobody' }, CLIENT), /unknown kid/],
      ['tampered payload', tampered, /signature does not verify/],
      ['no sub', token(rs, CLIENT, { sub: null }), /no sub/],
      ['no role', token(rs, { switchboard_tenant: 't' }), /no switchboard_role/],
      ['bad role', token(rs, { switchboard_role: 'root', switchboard_tenant: 't' }), /switchboard_role must be one of admin, operator, client, agent/],
      ['bad fallback role', token(rs, { role: 'superuser', tenant: 't' }), /switchboard_role must be one of/],
      ['role not a string', token(rs, { switchboard_role: ['admin'], switchboard_tenant: 't' }), /switchboard_role claim must be a non-empty string/],
      ['client without tenant', token(rs, { switchboard_role: 'client' }), /client token must name its switchboard_tenant/],
      ['operator without tenant', token(rs, { switchboard_role: 'operator' }), /switchboard_tenant/],
      ['empty tenant', token(rs, { switchboard_role: 'client', switchboard_tenant: '' }), /switchboard_tenant claim must be a non-empty string/],
      ['agent without agent id', token(rs, { switchboard_role: 'agent', switchboard_tenant: 't' }), /agent token must name its switchboard_agent/],
      ['not a JWT', 'sb_notajwt', /not a JWT/],
      ['garbage segments', 'abc.def.ghi', /malformed/],
    ];
    for (const [name, t, reason] of cases) {
      const raw = await t;
      const err = await refusal(verifier, raw).catch((e: Error) => assert.fail(`${name}: ${e.message}`));
      assert.equal(err.kind, 'invalid', `${name}: ${err.message}`);
      assert.match(err.message, reason, name);
      for (const part of raw.split('.').filter((p) => p.length > 8)) assert.equal(err.message.includes(part), false, `${name}: the message holds no part of the token`);
    }
  });

  test('none and HMAC are refused before any key is looked up', async () => {
    const v = fresh();
    const before = jwks.fetches();
    const none = `${b64({ alg: 'none' })}.${b64({ sub: 'x', switchboard_role: 'admin' })}.`;
    const hs = `${b64({ alg: 'HS256', kid: 'rs-1' })}.${b64({ sub: 'x', switchboard_role: 'admin' })}.${b64('sig')}`;
    for (const t of [none, hs]) assert.equal((await refusal(v, t)).kind, 'invalid');
    assert.equal(jwks.fetches(), before);
  });

  test('an unknown kid fetches the key set again once, then is refused; within the cooldown it does not', async () => {
    const v = fresh();
    await v.verify(await token(rs, CLIENT)); // loads the set
    const loaded = jwks.fetches();
    const stranger = await token({ ...rs, kid: 'nobody' }, CLIENT);
    assert.match((await refusal(v, stranger)).message, /unknown kid/);
    assert.equal(jwks.fetches(), loaded + 1, 'exactly one refetch');

    const cooled = fresh({ cooldownMs: 60_000 });
    await cooled.verify(await token(rs, CLIENT));
    const before = jwks.fetches();
    assert.match((await refusal(cooled, stranger)).message, /unknown kid/);
    assert.equal(jwks.fetches(), before, 'no refetch within the cooldown');
  });

  test('key rotation: once the JWKS holds the new key, its tokens verify; the retired key is refused', async () => {
    const v = fresh();
    const oldToken = await token(rs, CLIENT);
    assert.equal((await v.verify(oldToken)).role, 'client');
    const next = await makeKey('rs-next', 'RS256');
    const newToken = await token(next, { switchboard_role: 'operator', switchboard_tenant: 'team-a' });
    jwks.set([next, es]);
    try {
      assert.equal((await v.verify(newToken)).role, 'operator');
      assert.match((await refusal(v, await token(rs, CLIENT))).message, /unknown kid/);
    } finally {
      jwks.set([rs, es]);
    }
  });

  test('the key set down (503), unreachable, redirecting, not JSON or hanging: unavailable, not invalid', async () => {
    const t = await token(rs, CLIENT);
    for (const mode of ['down', 'redirect', 'garbage'] as const) {
      jwks.mode(mode);
      try {
        const err = await refusal(fresh(), t);
        assert.equal(err.kind, 'unavailable', `${mode}: ${err.message}`);
        assert.match(err.message, /key set \(JWKS\) could not be fetched/, mode);
        assert.equal(err.message.includes('127.0.0.1'), false, `${mode}: the message does not name the JWKS URL`);
        assert.ok(err.cause, `${mode}: the cause is kept for the log`);
      } finally {
        jwks.mode('ok');
      }
    }

    jwks.mode('hang');
    try {
      const err = await refusal(fresh({ fetchTimeoutMs: 300 }), t);
      assert.equal(err.kind, 'unavailable');
      assert.match(err.message, /timed out/);
    } finally {
      jwks.mode('ok');
    }

    const gone = await startJwks([rs]);
    const goneUrl = gone.url;
    await gone.close();
    const err = await refusal(new JwtVerifier({ jwksUrl: goneUrl, fetch: outbound.fetch }), t);
    assert.equal(err.kind, 'unavailable');
    assert.match(err.message, /could not be fetched/);
  });

  test('a key set that fails on the refetch for an unknown kid: unavailable', async () => {
    const v = fresh();
    await v.verify(await token(rs, CLIENT));
    jwks.mode('down');
    try {
      assert.equal((await refusal(v, await token({ ...rs, kid: 'new' }, CLIENT))).kind, 'unavailable');
      assert.equal((await v.verify(await token(rs, CLIENT))).role, 'client', 'cached keys still verify');
    } finally {
      jwks.mode('ok');
    }
  });

  test('the key set is fetched through the guarded fetch given, never the global one', async () => {
    const t = await token(rs, CLIENT);
    const guarded = createOutbound({ allowPrivate: false });
    try {
      const before = jwks.fetches();
      const err = await refusal(new JwtVerifier({ jwksUrl: jwks.url, fetch: guarded.fetch }), t);
      assert.equal(err.kind, 'unavailable', err.message);
      assert.match(String((err.cause as Error | undefined)?.cause), /BLOCKED_ADDRESS|refusing to connect/);
      assert.equal(jwks.fetches(), before, 'a loopback JWKS is refused before any request when private addresses are not allowed');
    } finally {
      await guarded.close();
    }

    const seen: string[] = [];
    const spy: typeof fetch = (input, init) => {
      seen.push(String(input));
      return outbound.fetch(input, init);
    };
    const globalFetch = globalThis.fetch;
    globalThis.fetch = () => Promise.reject(new Error('the global fetch was used'));
    try {
      assert.equal((await new JwtVerifier({ jwksUrl: jwks.url, issuer: ISS, fetch: spy }).verify(t)).role, 'client');
    } finally {
      globalThis.fetch = globalFetch;
    }
    assert.deepEqual(seen, [jwks.url]);
  });

  test('looksLikeJwt', () => {
    assert.equal(looksLikeJwt('eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln'), true);
    assert.equal(looksLikeJwt('a-b_c.d.e'), true);
    assert.equal(looksLikeJwt('a.b.'), true, 'unsigned (alg none): still a JWT, refused by verify with its reason');
    assert.equal(looksLikeJwt('sb_live_abcdef0123456789'), false);
    assert.equal(looksLikeJwt(''), false);
    assert.equal(looksLikeJwt('a.b'), false);
    assert.equal(looksLikeJwt('.b.c'), false);
    assert.equal(looksLikeJwt('a..c'), false);
    assert.equal(looksLikeJwt('a.b.c.d'), false);
    assert.equal(looksLikeJwt('a b.c.d'), false);
    assert.equal(looksLikeJwt('a+b.c/d.e='), false, 'base64, not base64url');
    assert.equal(looksLikeJwt('a.b.c\n'), false);
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
    jwks.mode('down');
    try {
      // A kid the cached set lacks makes the verifier fetch the set again (no cooldown here), which fails.
      const other = await makeKey('gw-2', 'ES256');
      const res = await fetch(`${gw.url}/agents`, { headers: { authorization: `Bearer ${await token(other, { switchboard_role: 'client', switchboard_tenant: 'default' })}` } });
      assert.equal(res.status, 503);
      assert.ok(Number(res.headers.get('retry-after')) > 0);
      assert.match(((await res.json()) as { error: string }).error, /cannot be checked right now/);
    } finally {
      jwks.mode('ok');
    }
  });
});
