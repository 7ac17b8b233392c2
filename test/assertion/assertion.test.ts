// x-gateway-assertion end to end: real upstreams verifying with src/verify accept what comes
// through the gateway and refuse everything else.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK, SignJWT, type CryptoKey, type JWK } from 'jose';
import { sha256Hex } from '../../src/auth/tokens.js';
import { ASSERTION_REJECTED_MESSAGE, GatewayAssertionError, verifyGatewayAssertion, type VerifyOptions } from '../../src/verify/index.js';
import { bearer, closeSql, describeWithServices, eventually, makeUser, sql, startTestGateway, testClock, testConfig, type TestGateway, type TestUser } from '../helpers/gateway.js';
import { request } from '../helpers/http.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/upstream.js';
import { decodeAssertion, startFastifyUpstream, startPlainUpstream, type VerifyingUpstream } from './upstream.js';

const REJECTED = { error: ASSERTION_REJECTED_MESSAGE };

describeWithServices('x-gateway-assertion', () => {
  let gw: TestGateway;
  let secure: VerifyingUpstream; // fastify + gatewayAssertionPlugin, audience "secure"
  let plain: VerifyingUpstream; // node:http + verifyGatewayAssertion, audience "plain"
  let echo: EchoUpstream; // records what upstreams receive, audience "echo"
  let jwksUrl: string;
  let user: TestUser;

  const config = (secureUrl: string, plainUrl: string, echoUrl: string) => testConfig({
    upstreams: {
      secure: { url: secureUrl, assertion: true },
      plain: { url: plainUrl, assertion: true },
      echo: { url: echoUrl, assertion: true },
      // The same verifying server, but the gateway signs nothing for it.
      unsigned: { url: secureUrl, assertion: false },
    },
    routes: [
      { path: '/secure', upstream: 'secure' },
      { path: '/plain', upstream: 'plain' },
      { path: '/echo', upstream: 'echo' },
      { path: '/unsigned', upstream: 'unsigned' },
      { path: '/public', upstream: 'secure', auth: 'none' },
    ],
  });

  beforeAll(async () => {
    [secure, plain, echo] = await Promise.all([startFastifyUpstream(), startPlainUpstream(), startEchoUpstream()]);
    gw = await startTestGateway(config(secure.url, plain.url, echo.url));
    jwksUrl = `${gw.url}/.well-known/jwks.json`;
    await secure.protect({ jwksUrl, audience: 'secure' });
    await plain.protect({ jwksUrl, audience: 'plain' });
    user = await makeUser(gw, { plan: 'premium' });
  });
  afterAll(async () => {
    await gw?.close();
    await Promise.all([secure?.close(), plain?.close(), echo?.close()]);
    await closeSql();
  });

  /** A valid assertion for `secure` and the exact headers the gateway sent with it. */
  async function signedRequest(): Promise<Record<string, string>> {
    const res = await gw.get('/secure/capture', { headers: bearer(user.access) });
    expect(res.status).toBe(200);
    return { 'x-gateway-assertion': res.json.assertion, 'x-user-id': String(user.id), 'x-user-plan': 'premium', 'x-user-email': user.email, 'x-auth-method': 'bearer' };
  }

  async function currentKey(): Promise<{ kid: string; key: CryptoKey }> {
    const [row] = await sql<{ kid: string; private_jwk: JWK }>(`SELECT kid, private_jwk FROM assertion_keys WHERE state = 'current'`);
    return { kid: row!.kid, key: (await importJWK(row!.private_jwk, 'EdDSA')) as CryptoKey };
  }

  function sign(key: CryptoKey, kid: string, claims: { aud?: string; iat?: number; exp?: number } = {}): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({ plan: 'premium', email: user.email, auth_method: 'bearer' })
      .setProtectedHeader({ alg: 'EdDSA', typ: 'gateway-assertion+jwt', kid })
      .setIssuer('auth-gateway').setAudience(claims.aud ?? 'secure').setSubject(String(user.id))
      .setIssuedAt(claims.iat ?? now).setExpirationTime(claims.exp ?? now + 60)
      .sign(key);
  }

  describe('through the gateway', () => {
    it('the fastify plugin accepts a signed-in user and decorates the request with the identity', async () => {
      const before = secure.accepted;
      const res = await gw.get('/secure/races?x=1', { headers: bearer(user.access) });
      expect(res.status).toBe(200);
      expect(res.json.identity).toEqual({ userId: user.id, plan: 'premium', email: user.email, authMethod: 'bearer' });
      expect(secure.accepted).toBe(before + 1);
    });

    it('the plain Node verifier accepts bearer and API-key users', async () => {
      const res = await gw.get('/plain/races', { headers: bearer(user.access) });
      expect(res.status).toBe(200);
      expect(res.json).toEqual({ identity: { userId: user.id, plan: 'premium', email: user.email, authMethod: 'bearer' } });

      const apiKey = `gw_${randomBytes(24).toString('base64url')}`;
      await sql('INSERT INTO api_tokens (user_id, token_hash) VALUES ($1, $2)', [user.id, sha256Hex(apiKey)]);
      const byKey = await gw.get('/plain/races', { headers: { 'x-api-key': apiKey } });
      expect(byKey.status).toBe(200);
      expect(byKey.json).toEqual({ identity: { userId: user.id, plan: 'premium', email: user.email, authMethod: 'api-key' } });
    });

    it('carries the claims of CONTRACT §3, signed with the current key the JWKS publishes', async () => {
      const res = await gw.get('/echo/claims', { headers: bearer(user.access) });
      expect(res.status).toBe(200);
      const { header, claims } = decodeAssertion(echo.last('/echo/claims')!.headers['x-gateway-assertion'] as string);
      const [current] = await sql<{ kid: string }>(`SELECT kid FROM assertion_keys WHERE state = 'current'`);
      expect(header).toEqual({ alg: 'EdDSA', typ: 'gateway-assertion+jwt', kid: current!.kid });
      expect(claims).toEqual({
        iss: 'auth-gateway', aud: 'echo', sub: String(user.id), plan: 'premium', email: user.email, auth_method: 'bearer',
        iat: expect.any(Number), exp: (claims.iat as number) + 60,
      });
    });

    it('publishes the current and next public keys (no private part) with a short Cache-Control', async () => {
      const res = await gw.get('/.well-known/jwks.json');
      expect(res.status).toBe(200);
      expect(res.headers['cache-control']).toBe('public, max-age=60');
      const rows = await sql<{ kid: string; public_jwk: JWK }>(`SELECT kid, public_jwk FROM assertion_keys WHERE state IN ('current', 'next') ORDER BY state = 'next' DESC`);
      expect(rows).toHaveLength(2);
      expect(res.json).toEqual({ keys: rows.map((r) => ({ kty: 'OKP', crv: 'Ed25519', x: r.public_jwk.x, kid: r.kid, alg: 'EdDSA', use: 'sig' })) });
      for (const key of res.json.keys) expect(await calculateJwkThumbprint(key)).toBe(key.kid);
    });

    it('reuses one assertion for the same user and upstream, and signs another for another upstream', async () => {
      const other = await makeUser(gw);
      await gw.get('/echo/reuse-1', { headers: bearer(other.access) });
      await gw.get('/echo/reuse-2', { headers: bearer(other.access) });
      const first = echo.last('/echo/reuse-1')!.headers['x-gateway-assertion'];
      expect(echo.last('/echo/reuse-2')!.headers['x-gateway-assertion']).toBe(first);

      const forSecure = await gw.get('/secure/reuse-3', { headers: bearer(other.access) });
      expect(forSecure.status).toBe(200);
      expect(forSecure.json.assertion).not.toBe(first);
      expect(decodeAssertion(forSecure.json.assertion).claims.aud).toBe('secure');
      expect(forSecure.json.identity).toEqual({ userId: other.id, plan: 'free', email: other.email, authMethod: 'bearer' });
    });

    it('signs a new assertion when the plan changes, and the upstream sees the new plan', async () => {
      const u = await makeUser(gw);
      const before = await gw.get('/secure/plan', { headers: bearer(u.access) });
      expect(before.json.identity.plan).toBe('free');
      await sql(`UPDATE users SET plan = 'pro' WHERE id = $1`, [u.id]);
      let after = before;
      await eventually(async () => {
        after = await gw.get('/secure/plan', { headers: bearer(u.access) });
        return after.json.identity?.plan === 'pro';
      });
      expect(after.status).toBe(200);
      expect(after.json.identity).toEqual({ userId: u.id, plan: 'pro', email: u.email, authMethod: 'bearer' });
      expect(after.json.assertion).not.toBe(before.json.assertion);
    });

    it('signs a new assertion once less than half of the old one\'s life is left', async () => {
      const clock = testClock();
      const timed = await startTestGateway(config(secure.url, plain.url, echo.url), { clock });
      try {
        const u = await makeUser(timed);
        const assertionAt = async (marker: string) => {
          expect((await timed.get(`/echo/${marker}`, { headers: bearer(u.access) })).status).toBe(200);
          return echo.last(`/echo/${marker}`)!.headers['x-gateway-assertion'] as string;
        };
        const first = await assertionAt('life-0');
        clock.advance(20_000); // 20-21 s into a 60 s life: reused
        expect(await assertionAt('life-20')).toBe(first);
        clock.advance(15_000); // 35-36 s: a new one
        const renewed = await assertionAt('life-35');
        expect(renewed).not.toBe(first);
        expect(decodeAssertion(renewed).claims.iat).toBeGreaterThanOrEqual((decodeAssertion(first).claims.iat as number) + 35);
      } finally {
        await timed.close();
      }
    });
  });

  describe('refusals', () => {
    it('no assertion: an upstream the gateway does not sign for refuses the request (401)', async () => {
      const before = secure.accepted;
      const res = await gw.get('/unsigned/x', { headers: bearer(user.access) });
      expect(res.status).toBe(401);
      expect(res.json).toEqual(REJECTED);
      expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
      const direct = await request(secure.url, 'GET', '/x', { headers: { 'x-user-id': String(user.id), 'x-user-plan': 'premium' } });
      expect(direct.status).toBe(401);
      expect(direct.json).toEqual(REJECTED);
      expect(secure.accepted).toBe(before);
    });

    it('a client cannot smuggle a valid assertion through an anonymous route: the gateway strips it', async () => {
      const headers = await signedRequest();
      const before = secure.accepted;
      const res = await gw.get('/public/x', { headers: { ...headers, X_Gateway_Assertion: headers['x-gateway-assertion']! } });
      expect(res.status).toBe(401);
      expect(res.json).toEqual(REJECTED);
      expect(secure.accepted).toBe(before);
    });

    it('accepts a genuine assertion sent straight to the upstream with its headers (the control case)', async () => {
      const res = await request(secure.url, 'GET', '/x', { headers: await signedRequest() });
      expect(res.status).toBe(200);
      expect(res.json.identity).toEqual({ userId: user.id, plan: 'premium', email: user.email, authMethod: 'bearer' });
    });

    it('refuses an assertion forged with another Ed25519 key, under the real kid or its own', async () => {
      const { privateKey, publicKey } = await generateKeyPair('EdDSA');
      const { kid } = await currentKey();
      const ownKid = await calculateJwkThumbprint(await exportJWK(publicKey));
      const genuine = await signedRequest();
      const before = secure.accepted;
      for (const k of [kid, ownKid]) {
        const headers = { ...genuine, 'x-gateway-assertion': await sign(privateKey, k) };
        const res = await request(secure.url, 'GET', '/forged', { headers });
        expect(res.status).toBe(401);
        expect(res.json).toEqual(REJECTED);
      }
      expect(secure.accepted).toBe(before);
    });

    it('refuses an expired assertion signed with the real key', async () => {
      const { kid, key } = await currentKey();
      const now = Math.floor(Date.now() / 1000);
      const headers = { ...(await signedRequest()), 'x-gateway-assertion': await sign(key, kid, { iat: now - 120, exp: now - 60 }) };
      const res = await request(secure.url, 'GET', '/expired', { headers });
      expect(res.status).toBe(401);
      expect(res.json).toEqual(REJECTED);
    });

    it('refuses assertions from a gateway whose clock is behind: they arrive expired', async () => {
      const clock = testClock();
      clock.advance(-5 * 60_000);
      const late = await startTestGateway(config(secure.url, plain.url, echo.url), { clock });
      try {
        const res = await late.get('/secure/late', { headers: bearer(user.access) });
        expect(res.status).toBe(401);
        expect(res.json).toEqual(REJECTED);
      } finally {
        await late.close();
      }
    });

    it('refuses an assertion the gateway signed for another upstream', async () => {
      await gw.get('/echo/audience', { headers: bearer(user.access) });
      const forEcho = echo.last('/echo/audience')!.headers['x-gateway-assertion'] as string;
      const res = await request(secure.url, 'GET', '/audience', { headers: { ...(await signedRequest()), 'x-gateway-assertion': forEcho } });
      expect(res.status).toBe(401);
      expect(res.json).toEqual(REJECTED);
    });

    it('refuses an assertion with an unexpected issuer, or a lifetime over 60 s', async () => {
      const { kid, key } = await currentKey();
      const now = Math.floor(Date.now() / 1000);
      const otherIssuer = await new SignJWT({ plan: 'premium', email: user.email, auth_method: 'bearer' })
        .setProtectedHeader({ alg: 'EdDSA', typ: 'gateway-assertion+jwt', kid })
        .setIssuer('someone-else').setAudience('secure').setSubject(String(user.id)).setIssuedAt(now).setExpirationTime(now + 60)
        .sign(key);
      const longLived = await sign(key, kid, { iat: now, exp: now + 3600 });
      for (const token of [otherIssuer, longLived]) {
        const res = await request(secure.url, 'GET', '/claims', { headers: { ...(await signedRequest()), 'x-gateway-assertion': token } });
        expect(res.status).toBe(401);
      }
    });

    it('refuses identity headers that disagree with the assertion', async () => {
      const genuine = await signedRequest();
      const tampered: Array<Record<string, string>> = [
        { 'x-user-id': String(user.id + 1) },
        { 'x-user-plan': 'pro' },
        { 'x-user-email': 'someone@example.test' },
        { 'x-auth-method': 'api-key' },
      ];
      const before = secure.accepted;
      for (const change of tampered) {
        const res = await request(secure.url, 'GET', '/tampered', { headers: { ...genuine, ...change } });
        expect(res.status, JSON.stringify(change)).toBe(401);
        expect(res.json).toEqual(REJECTED);
      }
      const { 'x-user-id': _id, ...withoutId } = genuine;
      expect((await request(secure.url, 'GET', '/tampered', { headers: withoutId })).status).toBe(401);
      expect(secure.accepted).toBe(before);
    });

    it('verifyGatewayAssertion throws GatewayAssertionError with the reason', async () => {
      const options: VerifyOptions = { jwksUrl, audience: 'secure' };
      const genuine = await signedRequest();
      const { privateKey } = await generateKeyPair('EdDSA');
      const { kid } = await currentKey();
      const reasonOf = (headers: Record<string, string>) => verifyGatewayAssertion(headers, options).then(() => 'accepted', (err: unknown) => (err instanceof GatewayAssertionError ? err.reason : String(err)));
      expect(await reasonOf(genuine)).toBe('accepted');
      expect(await reasonOf({ 'x-user-id': String(user.id), 'x-user-plan': 'premium' })).toBe('missing');
      expect(await reasonOf({ ...genuine, 'x-gateway-assertion': await sign(privateKey, kid) })).toBe('invalid');
      expect(await reasonOf({ ...genuine, 'x-gateway-assertion': 'not.a.jws' })).toBe('invalid');
      expect(await reasonOf({ ...genuine, 'x-user-plan': 'free' })).toBe('mismatch');
      expect(await verifyGatewayAssertion(genuine, { jwksUrl, audience: 'plain' }).catch((err: GatewayAssertionError) => err.reason)).toBe('invalid');
      // A fetch Headers works too.
      expect(await verifyGatewayAssertion(new Headers(genuine), options)).toEqual({ userId: user.id, plan: 'premium', email: user.email, authMethod: 'bearer' });
    });
  });
});
