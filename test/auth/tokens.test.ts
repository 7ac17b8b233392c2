// Access and refresh tokens as an attacker sees them: kinds must not be interchangeable, only the
// configured algorithm and key are accepted, and issuer/audience are enforced when configured.
import { generateKeyPairSync, randomUUID, type KeyObject } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { base64url, createLocalJWKSet, decodeJwt, decodeProtectedHeader, jwtVerify, SignJWT, type JSONWebKeySet, type JWTPayload } from 'jose';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import {
  bearer, closeSql, describeWithServices, makeUser, marker, sql, startTestGateway, startTwoGateways, testClock, testConfig,
  TEST_JWT_SECRET, throwawayDatabase, type TestGateway,
} from '../helpers/gateway.js';

const TOKEN_INVALID = { error: 'Token invalide ou expiré' };
const REFRESH_UNDECODABLE = { error: 'Refresh token invalide ou expiré' };
const ROUTE = '/api/v1/protected';

const routed = (upstream: EchoUpstream, overrides: Record<string, unknown> = {}) => testConfig({
  upstreams: { echo: { url: upstream.url } },
  routes: [{ path: ROUTE, upstream: 'echo', auth: 'required' }],
  ...overrides,
});

/** Calls the protected route with the token; returns the answer and how many requests reached the upstream. */
async function probe(gw: TestGateway, upstream: EchoUpstream, token: string) {
  const m = marker();
  const res = await gw.get(`${ROUTE}/${m}`, { headers: bearer(token) });
  return { status: res.status, json: res.json, hits: upstream.count(m) };
}

async function expectRefused(gw: TestGateway, upstream: EchoUpstream, token: string) {
  expect(await probe(gw, upstream, token)).toEqual({ status: 401, json: TOKEN_INVALID, hits: 0 });
}

/** Signs claims as the gateway would, with a chosen key, algorithm and header. */
function forge(claims: JWTPayload, key: Uint8Array | KeyObject, header: Record<string, unknown>, ttlSeconds = 600): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT(claims).setProtectedHeader(header as { alg: string }).setIssuedAt(now).setExpirationTime(now + ttlSeconds).setJti(randomUUID()).sign(key);
}

/** `alg: none`: a header and a payload with an empty signature. */
function unsigned(header: Record<string, unknown>, claims: JWTPayload): string {
  const enc = (v: unknown) => base64url.encode(JSON.stringify(v));
  return `${enc(header)}.${enc(claims)}.`;
}

const secretBytes = new TextEncoder().encode(TEST_JWT_SECRET);

describeWithServices('token kinds and forgeries (HS256)', () => {
  const clock = testClock();
  let upstream: EchoUpstream;
  let gw: TestGateway;
  beforeAll(async () => {
    upstream = await startEchoUpstream();
    gw = await startTestGateway(routed(upstream), { clock });
  });
  afterAll(async () => { await gw?.close(); await upstream?.close(); await closeSql(); });

  it('control: the access token passes the route and a token forged with the real secret and the right shape passes too', async () => {
    const user = await makeUser(gw);
    expect(await probe(gw, upstream, user.access)).toMatchObject({ status: 200, hits: 1 });
    const forged = await forge({ sub: String(user.id), plan: 'free', email: user.email }, secretBytes, { alg: 'HS256', typ: 'at+jwt' });
    expect(await probe(gw, upstream, forged)).toMatchObject({ status: 200, hits: 1 });
  });

  it('a refresh token used as Bearer on a proxied route → 401 "Token invalide ou expiré", zero upstream hits', async () => {
    const user = await makeUser(gw);
    await expectRefused(gw, upstream, user.refresh);
    // The refresh token is not spent by the attempt.
    expect((await gw.post('/api/v1/auth/refresh', { refresh_token: user.refresh })).status).toBe(200);
  });

  it('an access token posted to /refresh → 401 "Refresh token invalide ou expiré", nothing stored', async () => {
    const user = await makeUser(gw);
    const res = await gw.post('/api/v1/auth/refresh', { refresh_token: user.access });
    expect(res.status).toBe(401);
    expect(res.json).toEqual(REFRESH_UNDECODABLE);
    expect(await sql('SELECT count(*)::int AS n FROM refresh_tokens WHERE user_id = $1', [user.id])).toEqual([{ n: 1 }]);
  });

  it('a token signed with another secret is refused, as access and as refresh token', async () => {
    const user = await makeUser(gw);
    const other = new TextEncoder().encode('another-secret-of-at-least-32-bytes-long!!');
    await expectRefused(gw, upstream, await forge({ sub: String(user.id), plan: 'pro', email: user.email }, other, { alg: 'HS256', typ: 'at+jwt' }));
    const res = await gw.post('/api/v1/auth/refresh', { refresh_token: await forge({ sub: String(user.id) }, other, { alg: 'HS256', typ: 'refresh+jwt' }) });
    expect(res.status).toBe(401);
    expect(res.json).toEqual(REFRESH_UNDECODABLE);
  });

  it('one spelling per token: padding or a last character differing only in unused bits is refused, as access and as refresh token', async () => {
    const user = await makeUser(gw);
    /** The same bytes spelled otherwise: the last character's unused low bits set. */
    const respelled = (token: string) => {
      const last = token.at(-1)!;
      const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
      const other = alphabet[alphabet.indexOf(last) ^ 1]!;
      return token.slice(0, -1) + other;
    };
    // HS256: 32 bytes of signature in 43 characters, the last carrying 2 unused bits.
    expect(Buffer.from(respelled(user.access).split('.')[2]!, 'base64url')).toEqual(Buffer.from(user.access.split('.')[2]!, 'base64url'));
    for (const token of [`${user.access}=`, respelled(user.access)]) await expectRefused(gw, upstream, token);
    for (const token of [`${user.refresh}=`, respelled(user.refresh)]) {
      const res = await gw.post('/api/v1/auth/refresh', { refresh_token: token });
      expect([res.status, res.json]).toEqual([401, REFRESH_UNDECODABLE]);
    }
    // The token as issued still works.
    expect(await probe(gw, upstream, user.access)).toMatchObject({ status: 200, hits: 1 });
  });

  it('alg none is refused, as access and as refresh token', async () => {
    const user = await makeUser(gw);
    const now = Math.floor(Date.now() / 1000);
    const claims = { sub: String(user.id), plan: 'pro', email: user.email, iat: now, exp: now + 600, jti: 'x' };
    await expectRefused(gw, upstream, unsigned({ alg: 'none', typ: 'at+jwt' }, claims));
    // A real token with its header swapped to none and the signature dropped.
    const [, payload] = user.access.split('.');
    await expectRefused(gw, upstream, `${base64url.encode(JSON.stringify({ alg: 'none', typ: 'at+jwt' }))}.${payload}.`);
    const res = await gw.post('/api/v1/auth/refresh', { refresh_token: unsigned({ alg: 'none', typ: 'refresh+jwt' }, { sub: String(user.id), iat: now, exp: now + 600, jti: 'y' }) });
    expect(res.status).toBe(401);
    expect(res.json).toEqual(REFRESH_UNDECODABLE);
  });

  it('the typ header is pinned: a refresh token with its typ rewritten, or tokens correctly signed with another typ, are refused', async () => {
    const user = await makeUser(gw);
    // Header rewritten, signature kept: the signature no longer matches.
    const [, payload, signature] = user.refresh.split('.');
    const retyped = `${base64url.encode(JSON.stringify({ alg: 'HS256', typ: 'at+jwt' }))}.${payload}.${signature}`;
    await expectRefused(gw, upstream, retyped);
    const claims = { sub: String(user.id), plan: 'free', email: user.email };
    // Correctly signed with the real secret, but not an access token by its typ.
    for (const header of [{ alg: 'HS256' }, { alg: 'HS256', typ: 'JWT' }, { alg: 'HS256', typ: 'refresh+jwt' }]) {
      await expectRefused(gw, upstream, await forge(claims, secretBytes, header));
    }
    // The other way: correctly signed, but not a refresh token by its typ.
    for (const header of [{ alg: 'HS256' }, { alg: 'HS256', typ: 'at+jwt' }, { alg: 'HS256', typ: 'JWT' }]) {
      const res = await gw.post('/api/v1/auth/refresh', { refresh_token: await forge({ sub: String(user.id) }, secretBytes, header) });
      expect(res.status).toBe(401);
      expect(res.json).toEqual(REFRESH_UNDECODABLE);
    }
  });

  it('/.well-known/jwks.json never publishes the HS256 secret', async () => {
    const res = await gw.get('/.well-known/jwks.json');
    expect(res.status).toBe(200);
    for (const key of res.json.keys as Array<Record<string, unknown>>) {
      expect(key.kty).not.toBe('oct');
      expect(key).not.toHaveProperty('k');
      expect(key).not.toHaveProperty('d');
    }
    expect(res.text).not.toContain(base64url.encode(TEST_JWT_SECRET));
  });

  it('a token whose sub is not a positive integer string is refused', async () => {
    const user = await makeUser(gw);
    for (const sub of [`${user.id}.0`, `0${user.id}`, '-1', 'abc']) {
      await expectRefused(gw, upstream, await forge({ sub, plan: 'free', email: user.email }, secretBytes, { alg: 'HS256', typ: 'at+jwt' }));
    }
  });

  it('an access token past its 15 minutes is refused (even after it was accepted once)', async () => {
    const user = await makeUser(gw);
    expect((await probe(gw, upstream, user.access)).status).toBe(200);
    clock.advance(16 * 60_000);
    try {
      await expectRefused(gw, upstream, user.access);
    } finally {
      clock.set(new Date());
    }
  });
});

describeWithServices('generated HS256 secret (auth.jwt.secret empty)', () => {
  it('is generated once, stored in gateway_secrets, shared by two instances, with a warning', async () => {
    const db = await throwawayDatabase({ migrated: true });
    let pair: [TestGateway, TestGateway] | undefined;
    try {
      const config = testConfig({ storage: { postgres: db.url }, auth: { jwt: { secret: '' } } });
      pair = await startTwoGateways(config);
      const [a, b] = pair;
      const stored = await a.services.db.query<{ name: string; value: string }>('SELECT name, value FROM gateway_secrets WHERE name = $1', ['jwt_hs256']);
      expect(stored).toHaveLength(1);
      expect(Buffer.byteLength(stored[0]!.value)).toBeGreaterThanOrEqual(32);

      const warnings = (gw: TestGateway) => gw.logs.map((l) => JSON.parse(l) as { level: number; msg: string }).filter((l) => l.level === 40 && l.msg.includes('auth.jwt.secret'));
      expect(warnings(a)).toHaveLength(1);
      expect(warnings(a)[0]!.msg).toMatch(/generated/);
      expect(warnings(b)).toHaveLength(1);
      for (const gw of [a, b]) expect(gw.logs.join('')).not.toContain(stored[0]!.value);

      // A token issued by A is accepted by B, both as access and as refresh token.
      const email = `gen-${randomUUID()}@example.test`;
      expect((await a.post('/api/v1/auth/register', { email, password: 'password-123' })).status).toBe(201);
      const login = await a.post('/api/v1/auth/login', { email, password: 'password-123' });
      expect(login.status).toBe(200);
      expect((await b.get('/api/v1/user/me', { headers: bearer(login.json.access_token) })).status).toBe(200);
      expect((await b.post('/api/v1/auth/refresh', { refresh_token: login.json.refresh_token })).status).toBe(200);
    } finally {
      await Promise.all(pair?.map((g) => g.close()) ?? []);
      await db.drop();
    }
  });
});

describeWithServices.each([
  { algorithm: 'EdDSA', keyPair: () => generateKeyPairSync('ed25519'), jwk: { kty: 'OKP', crv: 'Ed25519' } },
  { algorithm: 'ES256', keyPair: () => generateKeyPairSync('ec', { namedCurve: 'P-256' }), jwk: { kty: 'EC', crv: 'P-256' } },
])('asymmetric access tokens: $algorithm', ({ algorithm, keyPair, jwk }) => {
  let dir: string;
  let upstream: EchoUpstream;
  let gw: TestGateway;
  let publicKey: KeyObject;
  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'gw-keys-'));
    const pair = keyPair();
    publicKey = pair.publicKey;
    const file = path.join(dir, 'access.pem');
    writeFileSync(file, pair.privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    upstream = await startEchoUpstream();
    gw = await startTestGateway(routed(upstream, { auth: { jwt: { algorithm, privateKeyFile: file, secret: '' } } }));
  });
  afterAll(async () => {
    await gw?.close();
    await upstream?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
    await closeSql();
  });

  it('signs with the key, publishes the public key with its kid at /.well-known/jwks.json, and verifies', async () => {
    const user = await makeUser(gw);
    const header = decodeProtectedHeader(user.access);
    expect(header).toMatchObject({ alg: algorithm, typ: 'at+jwt', kid: expect.any(String) });
    expect(decodeProtectedHeader(user.refresh)).toMatchObject({ alg: algorithm, typ: 'refresh+jwt', kid: header.kid });

    const res = await gw.get('/.well-known/jwks.json');
    expect(res.status).toBe(200);
    const jwks = res.json as JSONWebKeySet;
    const key = jwks.keys.find((k) => k.kid === header.kid);
    expect(key).toMatchObject({ ...jwk, alg: algorithm, use: 'sig', kid: header.kid });
    for (const k of jwks.keys) expect(k).not.toHaveProperty('d');
    // Anyone can verify the gateway's access tokens with the published key alone.
    const { payload } = await jwtVerify(user.access, createLocalJWKSet(jwks), { typ: 'at+jwt', algorithms: [algorithm] });
    expect(payload).toMatchObject({ sub: String(user.id), plan: 'free', email: user.email });

    expect(await probe(gw, upstream, user.access)).toMatchObject({ status: 200, hits: 1 });
    const refreshed = await gw.post('/api/v1/auth/refresh', { refresh_token: user.refresh });
    expect(refreshed.status).toBe(200);
    expect(decodeJwt(refreshed.json.access_token).sub).toBe(String(user.id));
  });

  it('knows its tokens with characters glued after them (never forwarded), and refuses them as credentials', async () => {
    const user = await makeUser(gw);
    for (const token of [user.access, user.refresh]) {
      expect(await gw.services.tokens.isOwn(`${token}X`)).toBe(true);
      expect(await gw.services.tokens.isOwn(`${token}${'A'.repeat(100)}`)).toBe(true);
    }
    expect(await probe(gw, upstream, `${user.access}X`)).toMatchObject({ status: 401, hits: 0 });
  });

  it('typ and alg stay pinned: refresh as Bearer, HS256 keyed with the public key, alg none and another key pair are refused', async () => {
    const user = await makeUser(gw);
    await expectRefused(gw, upstream, user.refresh);
    const claims = { sub: String(user.id), plan: 'pro', email: user.email };
    const kid = decodeProtectedHeader(user.access).kid;
    // The classic confusion: the public key (PEM or raw JWK bytes) used as an HMAC secret.
    const pem = new TextEncoder().encode(publicKey.export({ type: 'spki', format: 'pem' }).toString());
    await expectRefused(gw, upstream, await forge(claims, pem, { alg: 'HS256', typ: 'at+jwt', kid }));
    const der = new Uint8Array(publicKey.export({ type: 'spki', format: 'der' }));
    await expectRefused(gw, upstream, await forge(claims, der, { alg: 'HS256', typ: 'at+jwt', kid }));
    const now = Math.floor(Date.now() / 1000);
    await expectRefused(gw, upstream, unsigned({ alg: 'none', typ: 'at+jwt', kid }, { ...claims, iat: now, exp: now + 600, jti: 'x' }));
    // Right algorithm and kid, wrong key.
    await expectRefused(gw, upstream, await forge(claims, keyPair().privateKey, { alg: algorithm, typ: 'at+jwt', kid }));
    // The configured HS256 test secret means nothing here.
    await expectRefused(gw, upstream, await forge(claims, secretBytes, { alg: 'HS256', typ: 'at+jwt' }));
    const res = await gw.post('/api/v1/auth/refresh', { refresh_token: user.access });
    expect(res.status).toBe(401);
    expect(res.json).toEqual(REFRESH_UNDECODABLE);
  });
});

describeWithServices('issuer and audience', () => {
  const ISSUER = 'https://auth.example.test';
  const AUDIENCE = 'races-api';
  let upstream: EchoUpstream;
  let scoped: TestGateway;
  let plain: TestGateway;
  beforeAll(async () => {
    upstream = await startEchoUpstream();
    [scoped, plain] = await Promise.all([
      startTestGateway(routed(upstream, { auth: { jwt: { issuer: ISSUER, audience: AUDIENCE } } })),
      startTestGateway(routed(upstream)),
    ]);
  });
  afterAll(async () => { await Promise.all([scoped?.close(), plain?.close()]); await upstream?.close(); await closeSql(); });

  it('are set on both tokens when configured, and absent otherwise', async () => {
    const user = await makeUser(scoped);
    expect(decodeJwt(user.access)).toMatchObject({ iss: ISSUER, aud: AUDIENCE });
    expect(decodeJwt(user.refresh)).toMatchObject({ iss: ISSUER, aud: AUDIENCE });
    const other = await makeUser(plain);
    expect(decodeJwt(other.access).iss).toBeUndefined();
    expect(decodeJwt(other.access).aud).toBeUndefined();
  });

  it('are checked: same secret, but a token without them, or with other values, is refused', async () => {
    const user = await makeUser(scoped);
    expect(await probe(scoped, upstream, user.access)).toMatchObject({ status: 200, hits: 1 });
    // A token from the gateway without issuer/audience (same secret) is not one of the scoped gateway's.
    const other = await makeUser(plain);
    await expectRefused(scoped, upstream, other.access);
    const refresh = await scoped.post('/api/v1/auth/refresh', { refresh_token: other.refresh });
    expect(refresh.status).toBe(401);
    expect(refresh.json).toEqual(REFRESH_UNDECODABLE);

    const claims = { sub: String(user.id), plan: 'free', email: user.email };
    const header = { alg: 'HS256', typ: 'at+jwt' };
    expect(await probe(scoped, upstream, await forge({ ...claims, iss: ISSUER, aud: AUDIENCE }, secretBytes, header))).toMatchObject({ status: 200 });
    await expectRefused(scoped, upstream, await forge({ ...claims, iss: 'https://evil.example.test', aud: AUDIENCE }, secretBytes, header));
    await expectRefused(scoped, upstream, await forge({ ...claims, iss: ISSUER, aud: 'other-api' }, secretBytes, header));
    await expectRefused(scoped, upstream, await forge({ ...claims, aud: AUDIENCE }, secretBytes, header));
  });
});
