// Webhook deliveries as a pro user receives them, at a real HTTPS receiver (self-signed
// certificate trusted through webhooks.caFile): each event stored in the outbox and sent once,
// signed per Standard Webhooks (verified with the independent `standardwebhooks` implementation),
// never carrying a secret, and only to a pro user's webhook, delivered by the setup's gateway alone
// (a database of its own): the tests look at what the receiver got and at the rows.
// Failures: deliveries.error.test.ts; SSRF at delivery time: deliveries.security.test.ts; crashes,
// shutdowns and several instances: deliveries.durability.test.ts.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bearer, closeSql, describeWithServices, eventually, makeUser, type TestGateway } from '../helpers/gateway.js';
import {
  outcomes, registerWebhook, settledRows, startDeliverySetup, verified, type Behaviour, type DeliverySetup,
} from '../helpers/webhookReceiver.js';

describeWithServices('webhook deliveries', () => {
  let setup: DeliverySetup;
  let gw: TestGateway;
  const receiver = (behaviour?: Behaviour) => setup.receiver(behaviour);

  beforeAll(async () => {
    setup = await startDeliverySetup();
    ({ gw } = setup);
  });
  afterAll(async () => {
    await setup?.close();
    await closeSql();
  });

  it('sends webhook.test right after registration, signed per Standard Webhooks, counted as a webhook\'s success', async () => {
    const r = await receiver();
    const user = await makeUser(gw, { plan: 'pro' });
    const before = await outcomes(gw.services.metrics, 'webhook');
    const secret = await registerWebhook(gw, user, r.url);
    await eventually(() => r.deliveries.length === 1);
    await eventually(async () => (await outcomes(gw.services.metrics, 'webhook')).success === (before.success ?? 0) + 1);
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

  it('hands the receiver the trace of the request that caused the message, kept with it (none when it had none)', async () => {
    const r = await receiver();
    const user = await makeUser(gw, { plan: 'pro' });
    await registerWebhook(gw, user, r.url);
    await eventually(() => r.deliveries.length === 1);
    // Registered by a request nobody traced: no traceparent.
    expect(r.deliveries[0]!.headers.traceparent).toBeUndefined();
    // A message from a traced request keeps its traceparent (telemetry/tracing.test.ts makes one);
    // whichever instance delivers it, traced or not, the receiver joins that trace.
    const traceId = randomBytes(16).toString('hex');
    const body = JSON.stringify({ type: 'user.note', timestamp: new Date().toISOString(), data: {} });
    await setup.sql('INSERT INTO webhook_deliveries (id, user_id, type, body, max_attempts, traceparent) VALUES ($1, $2, $3, $4, 1, $5)',
      [`msg_${randomBytes(8).toString('hex')}`, user.id, 'user.note', body, `00-${traceId}-${'7'.repeat(16)}-01`]);
    await eventually(() => r.ofType('user.note').length === 1);
    expect(String(r.ofType('user.note')[0]!.headers.traceparent)).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
  });

  it('sends api_token.created and api_token.revoked, never the key itself', async () => {
    const r = await receiver();
    const user = await makeUser(gw, { plan: 'pro' });
    const secret = await registerWebhook(gw, user, r.url);
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
    // Each one is a row of the outbox, its id the webhook-id, delivered at the first attempt.
    const rows = await settledRows(user.id, setup.sql);
    expect(rows.map((row) => [row.type, row.status, row.attempts, row.last_error])).toEqual([
      ['webhook.test', 'delivered', 1, null], ['api_token.created', 'delivered', 1, null], ['api_token.revoked', 'delivered', 1, null],
    ]);
    expect(rows.map((row) => row.id).sort()).toEqual([...ids].sort());
    expect(JSON.stringify(await setup.sql('SELECT * FROM webhook_deliveries WHERE user_id = $1', [user.id]))).not.toContain(created.json.api_token);
  });

  it('sends auth.refresh_token_reused when a rotated refresh token is presented again', async () => {
    const r = await receiver();
    const user = await makeUser(gw, { plan: 'pro' });
    const secret = await registerWebhook(gw, user, r.url);
    expect((await gw.post('/api/v1/auth/refresh', { refresh_token: user.refresh })).status).toBe(200);
    const replay = await gw.post('/api/v1/auth/refresh', { refresh_token: user.refresh });
    expect(replay.status).toBe(401);
    await eventually(() => r.ofType('auth.refresh_token_reused').length === 1);
    expect(verified(secret, r.ofType('auth.refresh_token_reused')[0]!)).toMatchObject({ type: 'auth.refresh_token_reused', data: expect.any(Object) });
  });

  it('sends nothing when the owner is no longer pro, or has no webhook: the messages are skipped', async () => {
    const r = await receiver();
    const user = await makeUser(gw, { plan: 'pro' });
    await registerWebhook(gw, user, r.url);
    await eventually(() => r.deliveries.length === 1);
    await setup.sql('UPDATE users SET plan = $2 WHERE id = $1', [user.id, 'premium']);
    await gw.services.events.emit(user.id, 'security.alert', {});
    const other = await makeUser(gw, { plan: 'pro' });
    await gw.services.events.emit(other.id, 'security.alert', {});
    const skipped = { type: 'security.alert', status: 'skipped', attempts: 1, last_error: 'no webhook, or its owner is not an active pro user' };
    expect(await settledRows(user.id, setup.sql)).toEqual([
      { id: r.deliveries[0]!.headers['webhook-id'], type: 'webhook.test', status: 'delivered', attempts: 1, last_error: null },
      { id: expect.stringMatching(/^msg_/), ...skipped },
    ]);
    expect(await settledRows(other.id, setup.sql)).toEqual([{ id: expect.stringMatching(/^msg_/), ...skipped }]);
    expect(r.deliveries).toHaveLength(1);
  });
});
