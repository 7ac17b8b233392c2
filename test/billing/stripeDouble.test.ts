// Never mistaken for Stripe (CONTRACT §29), on the gateway's side: a live key goes to Stripe's own
// API only (`gateway check` refuses it with any other apiBase), and a gateway pointed at anything
// else says so: a warning at every start, and "Stripe: test double at <apiBase>" in the console's
// health summary. Fails on the old code: the live key with a fake's apiBase was valid, and nothing
// was logged or shown.
import type { FastifyInstance } from 'fastify';
import { afterAll, describe, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import { closeSql, configProblems, describeWithServices, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';
import { request } from '../helpers/http.js';
import { consoleSignIn } from '../helpers/adminApi.js';

const billing = (secretKey: string, apiBase?: string) => `upstreams: { app: { url: http://127.0.0.1:3000 } }
billing:
  stripe:
    secretKey: ${secretKey}
    webhookSecrets: [whsec_abc]
    prices: { price_a: premium }
    successUrl: https://app.example.com/billing?done=1
    cancelUrl: https://app.example.com/billing
${apiBase ? `    apiBase: ${apiBase}\n` : ''}`;

describe('billing.stripe.apiBase and the key\'s mode', () => {
  it('refuses a live key with an apiBase that is not https://api.stripe.com', () => {
    for (const key of ['sk_live_abc', 'rk_live_abc']) {
      for (const base of ['http://127.0.0.1:12111', 'https://api.stripe.com.example.net', 'https://stripe-mock.internal']) {
        expect(configProblems(billing(key, base))).toEqual([
          'billing.stripe.apiBase: a live key (sk_live_, rk_live_) goes to https://api.stripe.com only: a test double takes sk_test_ or rk_test_ keys',
        ]);
      }
      expect(configProblems(billing(key))).toEqual([]);
      expect(configProblems(billing(key, 'https://api.stripe.com/'))).toEqual([]);
    }
    expect(configProblems(billing('sk_test_abc', 'http://127.0.0.1:12111'))).toEqual([]);
    expect(configProblems(billing('rk_test_abc', 'http://127.0.0.1:12111'))).toEqual([]);
  });
});

describeWithServices('a gateway pointed at a Stripe double', () => {
  const gateways: TestGateway[] = [];
  const apps: FastifyInstance[] = [];
  afterAll(async () => {
    await Promise.all(apps.map((a) => a.close()));
    await Promise.all(gateways.map((g) => g.close()));
    await closeSql();
  });

  /** The console's health summary of a gateway with this billing.stripe (and its start's logs). */
  async function healthOf(stripe: Record<string, unknown>): Promise<{ health: Record<string, unknown>; logs: string[] }> {
    const gw = await startTestGateway(testConfig({
      billing: { stripe: { secretKey: 'sk_test_abc', webhookSecrets: ['whsec_abc'], prices: { price_a: 'premium' }, successUrl: 'https://a.example/ok', cancelUrl: 'https://a.example/no', ...stripe } },
    }));
    gateways.push(gw);
    const app = await buildAdminApp(gw.services);
    apps.push(app);
    const url = await app.listen({ host: '127.0.0.1', port: 0 });
    const { cookie } = await consoleSignIn(url);
    const health = await request(url, 'GET', '/console/api/health', { headers: { cookie } });
    expect(health.status).toBe(200);
    return { health: health.json, logs: gw.logs };
  }

  it('warns at start and its console\'s health summary says Stripe is a test double at its apiBase', async () => {
    const { health, logs } = await healthOf({ apiBase: 'http://127.0.0.1:12111' });
    expect(health.stripe).toEqual({ api_base: 'http://127.0.0.1:12111', test_double: true });
    const warnings = logs.map((l) => JSON.parse(l) as { level: number; msg: string; apiBase?: string }).filter((l) => l.level === 40 && l.msg.includes('test double'));
    expect(warnings).toEqual([expect.objectContaining({
      msg: 'billing: Stripe is a test double at http://127.0.0.1:12111 (billing.stripe.apiBase): no real payment is seen', apiBase: 'http://127.0.0.1:12111',
    })]);
  });

  it('on Stripe\'s own API: no warning, and the summary names it', async () => {
    const { health, logs } = await healthOf({});
    expect(health.stripe).toEqual({ api_base: 'https://api.stripe.com', test_double: false });
    expect(logs.filter((l) => l.includes('test double'))).toEqual([]);
  });
});
