// Webhook deliveries to a real HTTPS receiver (self-signed certificate trusted through
// webhooks.caFile), verified with the independent `standardwebhooks` implementation.
import { pino } from 'pino';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMetrics } from '../../src/admin/metrics.js';
import { DEFAULT_LIMITS, WebhookEvents } from '../../src/pro/deliveries.js';
import type { LookupAll } from '../../src/pro/ssrf.js';
import {
  bearer, closeSql, describeWithServices, eventually, makeUser, sql, startTestGateway, testConfig, type TestGateway, type TestUser,
} from '../helpers/gateway.js';
import { makeCertificate, startReceiver, type Delivery, type Receiver, type TestCertificate } from './receiver.js';

type Outcomes = Record<string, number>;

async function outcomes(metrics: { webhookDeliveries: { get(): Promise<{ values: Array<{ labels: Record<string, unknown>; value: number }> }> } }): Promise<Outcomes> {
  const out: Outcomes = {};
  for (const v of (await metrics.webhookDeliveries.get()).values) out[String(v.labels.outcome)] = v.value;
  return out;
}

/** Verifies like a receiver would; returns the payload. */
function verified(secret: string, d: Delivery): unknown {
  return new Webhook(secret).verify(d.body, {
    'webhook-id': String(d.headers['webhook-id']),
    'webhook-timestamp': String(d.headers['webhook-timestamp']),
    'webhook-signature': String(d.headers['webhook-signature']),
  });
}

describeWithServices('webhook deliveries', () => {
  let cert: TestCertificate;
  let gw: TestGateway;
  const receivers: Receiver[] = [];

  const receiver = async (behaviour?: Parameters<typeof startReceiver>[1]) => {
    const r = await startReceiver(cert, behaviour);
    receivers.push(r);
    return r;
  };
  const register = async (on: TestGateway, user: TestUser, url: string): Promise<string> => {
    const res = await on.post('/api/v1/user/webhook', { url }, { headers: bearer(user.access) });
    expect(res.status).toBe(201);
    return res.json.secret as string;
  };

  beforeAll(async () => {
    cert = makeCertificate(['hooks.rebind.test']);
    gw = await startTestGateway(testConfig({ webhooks: { allowPrivateNetworks: true, caFile: cert.certFile, retries: 2, timeout: '5s' } }));
  });
  afterAll(async () => {
    await gw?.close();
    await Promise.all(receivers.map((r) => r.close()));
    cert?.remove();
    await closeSql();
  });

  it('sends webhook.test right after registration, signed per Standard Webhooks', async () => {
    const r = await receiver();
    const user = await makeUser(gw, { plan: 'pro' });
    const secret = await register(gw, user, r.url);
    await eventually(() => r.deliveries.length === 1);
    const [d] = r.deliveries;
    expect(d!.path).toBe('/hook');
    expect(d!.headers['content-type']).toBe('application/json');
    expect(d!.headers['webhook-id']).toMatch(/^msg_[A-Za-z0-9_-]+$/);
    expect(Math.abs(Number(d!.headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(60);
    expect(d!.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+={0,2}$/);
    expect(verified(secret, d!)).toEqual({ type: 'webhook.test', timestamp: expect.any(String), data: { url: r.url } });
    expect(new Date(d!.json.timestamp).toISOString()).toBe(d!.json.timestamp);
    // A wrong secret does not verify: the signature really depends on it.
    expect(() => verified(`whsec_${Buffer.alloc(32, 1).toString('base64')}`, d!)).toThrow();
  });

  it('sends api_token.created and api_token.revoked, never the key itself', async () => {
    const r = await receiver();
    const user = await makeUser(gw, { plan: 'pro' });
    const secret = await register(gw, user, r.url);
    const created = await gw.post('/api/v1/user/api-token', {}, { headers: bearer(user.access) });
    expect(created.status).toBe(201);
    expect((await gw.request('DELETE', '/api/v1/user/api-token', { headers: bearer(user.access) })).status).toBe(200);
    await eventually(() => r.ofType('api_token.created').length === 1 && r.ofType('api_token.revoked').length === 1);
    expect(verified(secret, r.ofType('api_token.created')[0]!)).toEqual({
      type: 'api_token.created', timestamp: expect.any(String), data: { created_at: created.json.created_at, revoked_previous: 0 },
    });
    expect(verified(secret, r.ofType('api_token.revoked')[0]!)).toEqual({ type: 'api_token.revoked', timestamp: expect.any(String), data: { revoked: 1 } });
    expect(r.deliveries.map((d) => d.body).join('')).not.toContain(created.json.api_token);
    const ids = r.deliveries.map((d) => d.headers['webhook-id']);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('sends auth.refresh_token_reused when a rotated refresh token is presented again', async () => {
    const r = await receiver();
    const user = await makeUser(gw, { plan: 'pro' });
    const secret = await register(gw, user, r.url);
    expect((await gw.post('/api/v1/auth/refresh', { refresh_token: user.refresh })).status).toBe(200);
    const replay = await gw.post('/api/v1/auth/refresh', { refresh_token: user.refresh });
    expect(replay.status).toBe(401);
    await eventually(() => r.ofType('auth.refresh_token_reused').length === 1);
    expect(verified(secret, r.ofType('auth.refresh_token_reused')[0]!)).toMatchObject({ type: 'auth.refresh_token_reused', data: expect.any(Object) });
  });

  it('retries a receiver that fails twice, keeping the webhook-id and body', async () => {
    const r = await receiver((_d, n) => (n < 2 ? 503 : 200));
    const before = await outcomes(gw.services.metrics);
    const user = await makeUser(gw, { plan: 'pro' });
    const secret = await register(gw, user, r.url);
    await eventually(() => r.deliveries.length === 3, 10_000);
    const [first, second, third] = r.deliveries;
    expect(second!.headers['webhook-id']).toBe(first!.headers['webhook-id']);
    expect(third!.headers['webhook-id']).toBe(first!.headers['webhook-id']);
    expect(new Set(r.deliveries.map((d) => d.body)).size).toBe(1);
    for (const d of r.deliveries) expect(verified(secret, d)).toMatchObject({ type: 'webhook.test' });
    await eventually(async () => ((await outcomes(gw.services.metrics)).success ?? 0) > (before.success ?? 0));
    const after = await outcomes(gw.services.metrics);
    expect((after.server_error ?? 0) - (before.server_error ?? 0)).toBe(2);
    // Nothing more is sent once it succeeded.
    expect(r.deliveries).toHaveLength(3);
  });

  it('does not follow redirects nor retry other refusals', async () => {
    const r = await receiver(() => 302);
    const before = await outcomes(gw.services.metrics);
    const user = await makeUser(gw, { plan: 'pro' });
    await register(gw, user, r.url);
    await eventually(async () => ((await outcomes(gw.services.metrics)).rejected ?? 0) > (before.rejected ?? 0));
    expect(r.deliveries).toHaveLength(1);
  });

  it('a hanging receiver never holds up the requests that trigger deliveries', async () => {
    const r = await receiver(() => 'hang');
    const user = await makeUser(gw, { plan: 'pro' });
    await register(gw, user, r.url);
    await eventually(() => r.hanging === 1);
    // The receiver holds webhook.test unanswered; each request below is answered all the same.
    const created = await gw.post('/api/v1/user/api-token', {}, { headers: bearer(user.access) });
    expect(created.status).toBe(201);
    await eventually(() => r.hanging === 2);
    const revoked = await gw.request('DELETE', '/api/v1/user/api-token', { headers: bearer(user.access) });
    expect(revoked.status).toBe(200);
    const again = await gw.post('/api/v1/user/api-token', {}, { headers: bearer(user.access) });
    expect(again.status).toBe(201);
    expect(r.hanging).toBe(2); // at most two attempts in flight per user; the rest wait in the queue
    expect(r.deliveries).toHaveLength(2);
  });

  it('checks the target again at delivery: a private address registered elsewhere is not called', async () => {
    const strict = await startTestGateway(testConfig({ webhooks: { allowPrivateNetworks: false, caFile: cert.certFile } }));
    try {
      const r = await receiver();
      const user = await makeUser(gw, { plan: 'pro' });
      await register(gw, user, r.url); // accepted by the permissive instance
      await eventually(() => r.deliveries.length === 1);
      strict.services.events!.emit(user.id, 'security.alert', { n: 1 });
      await eventually(async () => ((await outcomes(strict.services.metrics)).blocked ?? 0) === 1);
      expect(r.deliveries).toHaveLength(1);
    } finally {
      await strict.close();
    }
  });

  it('sends nothing when the owner is no longer pro, or has no webhook', async () => {
    const r = await receiver();
    const user = await makeUser(gw, { plan: 'pro' });
    await register(gw, user, r.url);
    await eventually(() => r.deliveries.length === 1);
    const before = await outcomes(gw.services.metrics);
    await sql('UPDATE users SET plan = $2 WHERE id = $1', [user.id, 'premium']);
    gw.services.events!.emit(user.id, 'security.alert', {});
    const other = await makeUser(gw, { plan: 'pro' });
    gw.services.events!.emit(other.id, 'security.alert', {});
    await eventually(async () => ((await outcomes(gw.services.metrics)).skipped ?? 0) - (before.skipped ?? 0) === 2);
    expect(r.deliveries).toHaveLength(1);
  });

  it('gives up after webhooks.retries retries', async () => {
    const dead = await receiver(() => 500);
    const before = await outcomes(gw.services.metrics);
    const user = await makeUser(gw, { plan: 'pro' });
    await register(gw, user, dead.url);
    await eventually(async () => ((await outcomes(gw.services.metrics)).gave_up ?? 0) > (before.gave_up ?? 0), 10_000);
    expect(dead.deliveries).toHaveLength(3); // the first attempt and webhooks.retries = 2 retries
    expect(new Set(dead.deliveries.map((d) => d.headers['webhook-id'])).size).toBe(1);
  });

  describe('timeouts', () => {
    let quick: TestGateway;
    beforeAll(async () => {
      quick = await startTestGateway(testConfig({ webhooks: { allowPrivateNetworks: true, caFile: cert.certFile, retries: 3, timeout: '1s' } }));
    });
    afterAll(async () => { await quick?.close(); });

    it('retries after a timeout with the same webhook-id', async () => {
      const r = await receiver((_d, n) => (n === 0 ? 'hang' : 200));
      const user = await makeUser(quick, { plan: 'pro' });
      await register(quick, user, r.url);
      await eventually(async () => (await outcomes(quick.services.metrics)).success === 1, 15_000);
      expect((await outcomes(quick.services.metrics)).timeout).toBeGreaterThanOrEqual(1);
      expect(r.deliveries.length).toBeGreaterThanOrEqual(2);
      expect(new Set(r.deliveries.map((d) => d.headers['webhook-id'])).size).toBe(1);
    });
  });

  describe('the delivery queue itself', () => {
    const log = pino({ level: 'silent' });
    const webhookConfig = () => ({ timeout: 5000, retries: 0, allowPrivateNetworks: true, caFile: cert.certFile });

    it('connects to the address it checked: a second DNS answer (rebinding) is never asked for', async () => {
      const r = await receiver();
      const user = await makeUser(gw, { plan: 'pro' });
      const url = `https://hooks.rebind.test:${r.port}/hook`;
      const secret = await register(gw, user, r.url);
      await eventually(() => r.deliveries.length === 1);
      await sql('UPDATE webhooks SET url = $2 WHERE user_id = $1', [user.id, url]);
      const asked: string[] = [];
      // First answer the receiver, then an address that would be a different (internal) host.
      const lookup: LookupAll = async (host) => {
        asked.push(host);
        return [{ address: asked.length === 1 ? '127.0.0.1' : '192.0.2.1', family: 4 }];
      };
      const events = new WebhookEvents({ db: gw.services.db, config: webhookConfig(), clock: () => new Date(), log, metrics: createMetrics() }, DEFAULT_LIMITS, lookup);
      try {
        events.emit(user.id, 'security.alert', { n: 1 });
        await eventually(() => r.deliveries.length === 2);
        const d = r.deliveries[1]!;
        // Same name in Host (and TLS verified the certificate for it), reached at the checked address.
        expect(d.headers.host).toBe(`hooks.rebind.test:${r.port}`);
        expect(verified(secret, d)).toMatchObject({ type: 'security.alert', data: { n: 1 } });
        expect(asked).toEqual(['hooks.rebind.test']);
      } finally {
        await events.close();
      }
    });

    it('refuses at delivery a name that now resolves to a private address', async () => {
      const r = await receiver();
      const user = await makeUser(gw, { plan: 'pro' });
      await register(gw, user, r.url);
      await eventually(() => r.deliveries.length === 1);
      await sql('UPDATE webhooks SET url = $2 WHERE user_id = $1', [user.id, `https://hooks.rebind.test:${r.port}/hook`]);
      const metrics = createMetrics();
      const lookup: LookupAll = async () => [{ address: '127.0.0.1', family: 4 }];
      const events = new WebhookEvents({ db: gw.services.db, config: { ...webhookConfig(), allowPrivateNetworks: false }, clock: () => new Date(), log, metrics }, DEFAULT_LIMITS, lookup);
      try {
        events.emit(user.id, 'security.alert', {});
        await eventually(async () => (await outcomes(metrics)).blocked === 1);
        expect(r.deliveries).toHaveLength(1);
      } finally {
        await events.close();
      }
    });

    it('a DNS lookup with no answer within webhooks.timeout is a network error, retried like one', async () => {
      const r = await receiver();
      const user = await makeUser(gw, { plan: 'pro' });
      await register(gw, user, r.url);
      await eventually(() => r.deliveries.length === 1);
      await sql('UPDATE webhooks SET url = $2 WHERE user_id = $1', [user.id, `https://hooks.stuck.test:${r.port}/hook`]);
      const metrics = createMetrics();
      const lookup: LookupAll = () => new Promise(() => {}); // a resolver that never answers
      const events = new WebhookEvents({ db: gw.services.db, config: { ...webhookConfig(), timeout: 200, retries: 1 }, clock: () => new Date(), log, metrics }, { ...DEFAULT_LIMITS, backoffMs: 50 }, lookup);
      try {
        events.emit(user.id, 'security.alert', {});
        await eventually(async () => (await outcomes(metrics)).network_error === 2);
        expect(events.pending).toBe(0);
        expect(r.deliveries).toHaveLength(1);
      } finally {
        await events.close();
      }
    });

    it('is bounded: past the limit the oldest waiting messages are dropped and counted', async () => {
      const r = await receiver(() => 'hang');
      const user = await makeUser(gw, { plan: 'pro' });
      await register(gw, user, r.url);
      await eventually(() => r.hanging === 1);
      const metrics = createMetrics();
      const events = new WebhookEvents(
        { db: gw.services.db, config: webhookConfig(), clock: () => new Date(), log, metrics },
        { ...DEFAULT_LIMITS, maxQueued: 5, concurrency: 1, perUserConcurrency: 1 },
      );
      try {
        for (let i = 0; i < 50; i++) events.emit(user.id, 'security.alert', { i });
        expect(events.pending).toBe(6); // one in flight, five waiting
        expect(await outcomes(metrics)).toEqual({ dropped: 44 });
        await eventually(() => r.hanging === 2);
        // The one in flight is the first; the five kept are the newest.
        expect(r.deliveries.at(-1)!.json.data).toEqual({ i: 0 });
      } finally {
        await events.close();
      }
    });
  });
});
