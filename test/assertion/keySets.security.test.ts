// Two key sets for two jobs (issue 16, CONTRACT §8). With an EdDSA access-token key, an issuer,
// and an audience equal to an upstream's name, a verifier that checks an assertion the way the
// docs say (signature against the published keys, aud, iss) must never accept the user's own
// access token as one: anyone reaching that upstream directly would skip every guard with it.
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { verifyGatewayAssertion, type GatewayAssertionError } from '../../src/verify/index.js';
import { bearer, closeSql, describeWithServices, makeUser, marker, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';

const ISSUER = 'https://auth.example.test';

describeWithServices('access-token keys and assertion keys are published apart', () => {
  let upstream: EchoUpstream;
  let gw: TestGateway;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'gw-keysets-'));
    const file = path.join(dir, 'access.pem');
    writeFileSync(file, generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    upstream = await startEchoUpstream();
    gw = await startTestGateway(testConfig({
      // The audience of access tokens is the upstream's name: the confusion the issue reproduced.
      auth: { jwt: { algorithm: 'EdDSA', privateKeyFile: file, secret: '', issuer: ISSUER, audience: 'secure' } },
      upstreams: { secure: { url: upstream.url, assertion: true } },
      routes: [{ path: '/secure', upstream: 'secure' }],
    }));
  });

  afterAll(async () => {
    await gw?.close();
    await upstream?.close();
    rmSync(dir, { recursive: true, force: true });
    await closeSql();
  });

  it('publishes the access-token key alone at jwks.json and the assertion keys alone at gateway-assertion-keys.json', async () => {
    const user = await makeUser(gw);
    const accessKid = decodeProtectedHeader(user.access).kid;
    const tokenKeys = (await gw.get('/.well-known/jwks.json')).json.keys.map((k: { kid: string }) => k.kid);
    const assertionRes = await gw.get('/.well-known/gateway-assertion-keys.json');
    expect(assertionRes.status).toBe(200);
    expect(assertionRes.headers['cache-control']).toBe('public, max-age=60');
    const assertionKeys = assertionRes.json.keys.map((k: { kid: string }) => k.kid);
    expect(tokenKeys).toEqual([accessKid]);
    expect(assertionKeys.length).toBeGreaterThanOrEqual(2); // current and next
    expect(assertionKeys).not.toContain(accessKid);
  });

  it('a verifier holding the assertion keys accepts the assertion and refuses the access token, whatever checks it makes', async () => {
    const user = await makeUser(gw);
    const m = marker();
    expect((await gw.get(`/secure/${m}`, { headers: bearer(user.access) })).status).toBe(200);
    const assertion = String(upstream.last(m)!.headers['x-gateway-assertion']);
    const keys = createRemoteJWKSet(new URL(`${gw.url}/.well-known/gateway-assertion-keys.json`));
    // PyJWT's PyJWKClient as the issue ran it: the key by kid, then signature, aud and iss only.
    const checks = { audience: 'secure', issuer: ISSUER, algorithms: ['EdDSA'] };
    expect((await jwtVerify(assertion, keys, checks)).payload.sub).toBe(String(user.id));
    await expect(jwtVerify(user.access, keys, checks)).rejects.toThrow();

    const jwksUrl = `${gw.url}/.well-known/gateway-assertion-keys.json`;
    const headers = { 'x-gateway-assertion': user.access, 'x-user-id': String(user.id), 'x-user-plan': 'free', 'x-user-email': user.email, 'x-auth-method': 'bearer' };
    expect(await verifyGatewayAssertion(headers, { jwksUrl, audience: 'secure', issuer: ISSUER }).catch((err: GatewayAssertionError) => err.reason)).toBe('invalid');
    expect(await verifyGatewayAssertion(upstream.last(m)!.headers, { jwksUrl, audience: 'secure', issuer: ISSUER })).toMatchObject({ userId: user.id });
  });
});
