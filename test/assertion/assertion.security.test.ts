// x-gateway-assertion as an attacker meets it: real upstreams verifying with src/verify refuse
// every request the gateway did not sign for them (none, stripped, forged, expired, for another
// upstream or issuer, too long-lived, or with identity headers that disagree), and say why.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK, SignJWT, type CryptoKey, type JWK } from 'jose';
import { ASSERTION_REJECTED_MESSAGE, GatewayAssertionError, verifyGatewayAssertion, type VerifyOptions } from '../../src/verify/index.js';
import type { EchoUpstream } from '../helpers/echoUpstream.js';
import { bearer, closeSql, describeWithServices, sql, startTestGateway, testClock, type TestGateway, type TestUser } from '../helpers/gateway.js';
import { request } from '../helpers/http.js';
import {
  assertionTestConfig, startAssertionSetup, type AssertionSetup, type VerifyingUpstream,
} from '../helpers/verifyingUpstreams.js';

const REJECTED = { error: ASSERTION_REJECTED_MESSAGE };

describeWithServices('x-gateway-assertion', () => {
  let setup: AssertionSetup;
  let gw: TestGateway, secure: VerifyingUpstream, plain: VerifyingUpstream, echo: EchoUpstream, jwksUrl: string, user: TestUser;

  beforeAll(async () => {
    setup = await startAssertionSetup();
    ({ gw, secure, plain, echo, jwksUrl, user } = setup);
  });
  afterAll(async () => {
    await setup?.close();
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
      const late = await startTestGateway(assertionTestConfig(secure.url, plain.url, echo.url), { clock });
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
        // A bearer assertion names no key: a key id beside it is someone's invention (CONTRACT §21).
        { 'x-user-key-id': '5' },
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
      const reasonOf = (headers: Record<string, string>) => verifyGatewayAssertion(headers, options)
        .then(() => 'accepted', (err: unknown) => (err instanceof GatewayAssertionError ? err.reason : String(err)));
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
