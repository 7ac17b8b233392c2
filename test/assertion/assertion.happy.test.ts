// x-gateway-assertion end to end, what a user sees: real upstreams verifying with src/verify accept
// what comes through the gateway, with the claims of CONTRACT §3, one assertion reused while it is
// young and another signed when the plan changes. What they refuse: assertion.security.test.ts.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { calculateJwkThumbprint, type JWK } from 'jose';
import { sha256Hex } from '../../src/credentials/digest.js';
import type { EchoUpstream } from '../helpers/echoUpstream.js';
import { bearer, closeSql, describeWithServices, eventually, makeUser, sql, startTestGateway, testClock, type TestGateway, type TestUser } from '../helpers/gateway.js';
import {
  assertionTestConfig, decodeAssertion, startAssertionSetup, type AssertionSetup, type VerifyingUpstream,
} from '../helpers/verifyingUpstreams.js';

describeWithServices('x-gateway-assertion', () => {
  let setup: AssertionSetup;
  let gw: TestGateway, secure: VerifyingUpstream, plain: VerifyingUpstream, echo: EchoUpstream, user: TestUser;

  beforeAll(async () => {
    setup = await startAssertionSetup();
    ({ gw, secure, plain, echo, user } = setup);
  });
  afterAll(async () => {
    await setup?.close();
    await closeSql();
  });

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
      const [row] = await sql<{ id: number }>('INSERT INTO api_tokens (user_id, token_hash) VALUES ($1, $2) RETURNING id', [user.id, sha256Hex(apiKey)]);
      const byKey = await gw.get('/plain/races', { headers: { 'x-api-key': apiKey } });
      expect(byKey.status).toBe(200);
      // A key without scopes: its owner's every right (CONTRACT §21).
      expect(byKey.json).toEqual({ identity: { userId: user.id, plan: 'premium', email: user.email, authMethod: 'api-key', keyId: Number(row!.id), scopes: null } });
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
      const res = await gw.get('/.well-known/gateway-assertion-keys.json');
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
      const timed = await startTestGateway(assertionTestConfig(secure.url, plain.url, echo.url), { clock });
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
});
