// docs/identity-providers.md#local-provider, run as it is written against a real provider on
// loopback (test/helpers/oidcProvider.ts): start, sign in at the provider, callback, exchange.
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, expect, it } from 'vitest';
import { s256 } from '../../src/auth/oidc.js';
import { claims, closeSql, describeWithServices, newEmail, startTestGateway, testConfigFromYaml } from '../helpers/gateway.js';
import { docsExample } from '../helpers/docs.js';
import { signInAtProvider, startTestProvider } from '../helpers/oidcProvider.js';

const EXCHANGE = '/api/v1/auth/oidc/exchange';

describeWithServices('identity providers: the documented configuration', () => {
  afterAll(() => closeSql());

  it('docs/identity-providers.md#local-provider runs as written against a local provider', async () => {
    const publicUrl = 'http://localhost:9';
    const idp = await startTestProvider([`${publicUrl}/api/v1/auth/oidc/local/callback`]);
    const gw = await startTestGateway(testConfigFromYaml(docsExample('identity-providers', 'local-provider'), {
      OIDC_ISSUER: idp.issuer, OIDC_CLIENT_ID: idp.clientId, OIDC_CLIENT_SECRET: idp.clientSecret, GATEWAY_PUBLIC_URL: publicUrl, APP_ORIGIN: 'http://127.0.0.1:5173',
    }));
    try {
      const subject = `sub-${randomUUID()}`;
      idp.users.set(subject, { email: newEmail('docs'), email_verified: true });
      const verifier = randomBytes(32).toString('base64url');
      const started = await gw.get(`/api/v1/auth/oidc/local/start?return_to=${encodeURIComponent('http://127.0.0.1:5173/')}&code_challenge=${s256(verifier)}`);
      expect(started.status).toBe(302);
      const back = await signInAtProvider(String(started.headers.location), subject);
      const cookie = String((started.headers['set-cookie'] as string[])[0]).split(';')[0]!;
      const res = await gw.get(`${back.pathname}${back.search}`, { headers: { cookie } });
      const fragment = new URLSearchParams(new URL(String(res.headers.location)).hash.slice(1));
      const pair = await gw.post(EXCHANGE, { login_code: fragment.get('login_code'), code_verifier: verifier });
      expect(pair.status).toBe(200);
      expect(claims(pair.json.access_token)).toMatchObject({ amr: ['fed'] });
    } finally {
      await gw.close();
      await idp.close();
    }
  });
});
