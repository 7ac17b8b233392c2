// Webhook deliveries when the receiver or the network fails (a real HTTPS receiver with a
// self-signed certificate trusted through webhooks.caFile): retries with the same webhook-id up to
// webhooks.retries, no redirects followed, timeouts (also of the DNS lookup), receivers that hang,
// none of which ever holds up the requests that trigger deliveries, and the outbox's one bound: the
// size of a message. The instances run on a database of their own (startDeliverySetup), so only
// they attempt these messages; tests with a receiver that hangs, or a resolver of their own, start
// instances of their own.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { LookupAll } from '../../src/webhooks/ssrf.js';
import { bearer, closeSql, describeWithServices, eventually, makeUser, type TestGateway } from '../helpers/gateway.js';
import {
  outboxRows, registerWebhook, settledRows, startDeliverySetup, startIsolatedDeliveries, verified, type Behaviour, type DeliverySetup,
  type IsolatedDeliveries,
} from '../helpers/webhookReceiver.js';

describeWithServices('webhook deliveries', () => {
  let setup: DeliverySetup;
  let gw: TestGateway;
  const receiver = (behaviour?: Behaviour) => setup.receiver(behaviour);
  const settled = (userId: number) => settledRows(userId, setup.sql);

  beforeAll(async () => {
    setup = await startDeliverySetup();
    ({ gw } = setup);
  });
  afterAll(async () => {
    await setup?.close();
    await closeSql();
  });

  it('retries a receiver that fails twice, keeping the webhook-id and body', async () => {
    const r = await receiver((_d, n) => (n < 2 ? 503 : 200));
    const user = await makeUser(gw, { plan: 'pro' });
    const secret = await registerWebhook(gw, user, r.url);
    await eventually(() => r.deliveries.length === 3, 10_000);
    const [first, second, third] = r.deliveries;
    expect(second!.headers['webhook-id']).toBe(first!.headers['webhook-id']);
    expect(third!.headers['webhook-id']).toBe(first!.headers['webhook-id']);
    expect(new Set(r.deliveries.map((d) => d.body)).size).toBe(1);
    for (const d of r.deliveries) expect(verified(secret, d)).toMatchObject({ type: 'webhook.test' });
    expect(await settled(user.id)).toEqual([
      { id: first!.headers['webhook-id'], type: 'webhook.test', status: 'delivered', attempts: 3, last_error: 'HTTP 503' },
    ]);
    // Nothing more is sent once it succeeded.
    expect(r.deliveries).toHaveLength(3);
  });

  it('does not follow redirects nor retry other refusals', async () => {
    const r = await receiver(() => 302);
    const user = await makeUser(gw, { plan: 'pro' });
    await registerWebhook(gw, user, r.url);
    expect(await settled(user.id)).toEqual([{ id: expect.any(String), type: 'webhook.test', status: 'failed', attempts: 1, last_error: 'HTTP 302' }]);
    expect(r.deliveries).toHaveLength(1);
  });

  it('gives up after webhooks.retries retries', async () => {
    const dead = await receiver(() => 500);
    const user = await makeUser(gw, { plan: 'pro' });
    await registerWebhook(gw, user, dead.url);
    // The first attempt and webhooks.retries = 2 retries.
    expect(await settled(user.id)).toEqual([{ id: expect.any(String), type: 'webhook.test', status: 'failed', attempts: 3, last_error: 'HTTP 500' }]);
    expect(dead.deliveries).toHaveLength(3);
    expect(new Set(dead.deliveries.map((d) => d.headers['webhook-id'])).size).toBe(1);
  });

  it('refuses an event over the per-message size: the caller learns it, nothing is stored', async () => {
    const user = await makeUser(gw, { plan: 'pro' });
    await expect(gw.services.events.emit(user.id, 'security.alert', { blob: 'a'.repeat(70_000) })).rejects.toThrow(/over the 65536-byte limit/);
    expect(await outboxRows(user.id, setup.sql)).toEqual([]);
  });

  describe('with receivers that hang, or a resolver of its own', () => {
    let own: IsolatedDeliveries | undefined;
    afterEach(async () => {
      await own?.close();
      own = undefined;
    });

    it('a hanging receiver never holds up the requests that trigger deliveries', async () => {
      // Two instances: the limit of two attempts in flight per user holds across them.
      own = await startIsolatedDeliveries({ retries: 2, timeout: '5s' }, { instances: 2 });
      const [a, b] = own.gateways as [TestGateway, TestGateway];
      const r = await own.receiver(() => 'hang');
      const user = await makeUser(a, { plan: 'pro' });
      await registerWebhook(a, user, r.url);
      await eventually(() => r.hanging === 1);
      // The receiver holds webhook.test unanswered; each request below is answered all the same.
      const created = await b.post('/api/v1/user/api-token', {}, { headers: bearer(user.access) });
      expect(created.status).toBe(201);
      await eventually(() => r.hanging === 2);
      const revoked = await a.request('DELETE', '/api/v1/user/api-token', { headers: bearer(user.access) });
      expect(revoked.status).toBe(200);
      const again = await b.post('/api/v1/user/api-token', {}, { headers: bearer(user.access) });
      expect(again.status).toBe(201);
      // At most two attempts in flight for the user, whichever instances make them; the rest wait in
      // the outbox. Each instance has looked at the outbox since the last message was stored (a
      // claim pass begun after it, finished): a third attempt, were it allowed, would be claimed.
      await Promise.all([a.services.deliveries.settled(), b.services.deliveries.settled()]);
      expect(r.hanging).toBe(2);
      expect(r.deliveries).toHaveLength(2);
      const rows = await outboxRows(user.id, own.db.sql);
      expect(rows.map((row) => [row.type, row.status, row.attempts])).toEqual([
        ['webhook.test', 'pending', 1], ['api_token.created', 'pending', 1], ['api_token.revoked', 'pending', 0], ['api_token.created', 'pending', 0],
      ]);
    });

    it('retries after a timeout with the same webhook-id', async () => {
      own = await startIsolatedDeliveries({ retries: 3, timeout: '1s' });
      const gw = own.gateways[0]!;
      const r = await own.receiver((_d, n) => (n === 0 ? 'hang' : 200));
      const user = await makeUser(gw, { plan: 'pro' });
      await registerWebhook(gw, user, r.url);
      const [row] = await settledRows(user.id, own.db.sql);
      expect(row).toMatchObject({ status: 'delivered', attempts: 2, last_error: 'no answer within 1000 ms' });
      expect(r.deliveries.map((d) => d.headers['webhook-id'])).toEqual([row!.id, row!.id]);
    });

    it('a DNS lookup with no answer within webhooks.timeout is a network error, retried like one', async () => {
      const silent: LookupAll = () => new Promise(() => {}); // a resolver that never answers
      own = await startIsolatedDeliveries({ retries: 1, timeout: '200ms' }, { lookup: silent });
      const gw = own.gateways[0]!;
      const r = await own.receiver();
      const user = await makeUser(gw, { plan: 'pro' });
      await registerWebhook(gw, user, `https://hooks.stuck.test:${r.port}/hook`);
      expect(await settledRows(user.id, own.db.sql, 5000)).toEqual([{
        id: expect.any(String), type: 'webhook.test', status: 'failed', attempts: 2, last_error: 'DNS: hooks.stuck.test: no DNS answer within 200 ms',
      }]);
      expect(r.deliveries).toHaveLength(0);
    });
  });
});
