// The admin listener: health and metrics, and /admin/v1 behind the admin key.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_KEY, bearer, closeSql, describeWithServices, eventually, makeUser, sql, startTestGateway, testConfig, type TestGateway,
} from '../helpers/gateway.js';
import { listenAdmin, type AdminListening } from '../helpers/adminApi.js';
import { holdUserRow } from '../helpers/rowLock.js';
import { startReceiver, type Receiver } from '../helpers/webhookReceiver.js';

const UNAUTHORIZED = { error: 'Clé d’administration invalide' };
const NOT_FOUND = { error: 'Ressource introuvable' };

describeWithServices('admin listener', () => {
  let a: TestGateway;
  let b: TestGateway;
  let admin: AdminListening;
  let receiver: Receiver;

  beforeAll(async () => {
    const config = testConfig();
    [a, b] = await Promise.all([startTestGateway(config), startTestGateway(config)]);
    admin = await listenAdmin(a);
    receiver = await startReceiver();
  });
  afterAll(async () => {
    await admin?.app.close();
    await Promise.all([a?.close(), b?.close()]);
    await receiver?.close();
    await closeSql();
  });

  it('serves /healthz, /readyz and Prometheus /metrics without the key', async () => {
    expect((await admin.call('GET', '/healthz')).json).toEqual({ status: 'ok' });
    expect((await admin.call('GET', '/readyz')).status).toBe(200);
    const user = await makeUser(a);
    expect((await a.get('/api/v1/user/me', { headers: bearer(user.access) })).status).toBe(200);
    const metrics = await admin.call('GET', '/metrics');
    expect(metrics.status).toBe(200);
    expect(metrics.headers['content-type']).toMatch(/^text\/plain/);
    expect(metrics.text).toMatch(/^gateway_requests_total\{route="\/api\/v1\/user\/me",method="GET",status="200"\} \d+$/m);
    expect(metrics.text).toMatch(/^gateway_request_duration_seconds_bucket\{le="0\.005",route="\/api\/v1\/user\/me"\} \d+$/m);
    expect(metrics.text).toMatch(/^gateway_identity_cache_total\{result="miss"\} [1-9]\d*$/m);
    expect(metrics.text).toMatch(/^gateway_identity_cache_total\{result="hit"\} \d+$/m);
    expect(metrics.text).toContain('# TYPE gateway_webhook_deliveries_total counter');
    expect(metrics.text).toContain('# TYPE gateway_guard_decisions_total counter');
    expect(metrics.text).toContain('# TYPE gateway_upstream_errors_total counter');
  });

  it('logs wrong admin keys once per interval with a count, not a line per guess', async () => {
    // An admin listener of its own: a fresh count, and `b`'s log alone.
    const { app, call } = await listenAdmin(b);
    try {
      const before = b.logs.length;
      const guesses = await Promise.all(Array.from({ length: 200 }, (_, i) => call('GET', '/admin/v1/users?limit=1', { headers: bearer(`guess-${i}`) })));
      expect(guesses.every((g) => g.status === 401)).toBe(true);
      const lines = b.logs.slice(before).filter((l) => l.includes('admin key refused'));
      expect(lines).toHaveLength(1);
      expect(JSON.parse(lines[0]!)).toMatchObject({ level: 40, ip: '127.0.0.1', url: '/admin/v1/users?limit=1' });
      expect(b.logs.slice(before).join('')).not.toContain('guess-');
    } finally {
      await app.close();
    }
  });

  it('answers an undecodable URL from the error catalog, as the public listener does', async () => {
    const res = await admin.as('GET', '/admin/v1/users/%');
    expect(res.status).toBe(400);
    expect(res.json).toEqual({ error: 'Requête invalide' });
  });

  it('refuses /admin/* without the right key, in the same way whether the path exists or not', async () => {
    const user = await makeUser(a);
    const attempts: Array<[string, Record<string, string>]> = [
      [`/admin/v1/users/${user.id}`, {}],
      [`/admin/v1/users/${user.id}`, bearer('wrong-key')],
      [`/admin/v1/users/${user.id}`, bearer(`${ADMIN_KEY}x`)],
      [`/admin/v1/users/${user.id}`, bearer(ADMIN_KEY.slice(0, -1))],
      [`/admin/v1/users/${user.id}`, { authorization: `Basic ${Buffer.from(`admin:${ADMIN_KEY}`).toString('base64')}` }],
      [`/admin/v1/users/${user.id}`, { authorization: ADMIN_KEY }],
      [`/admin/v1/users/${user.id}`, { 'x-api-key': ADMIN_KEY }],
      ['/admin/v1/no-such-thing', {}],
      ['/admin', {}],
    ];
    for (const [path, headers] of attempts) {
      const res = await admin.call('GET', path, { headers });
      expect(res.status, `${path} ${JSON.stringify(headers)}`).toBe(401);
      expect(res.json).toEqual(UNAUTHORIZED);
      expect(res.headers['www-authenticate']).toBe('Bearer realm="gateway-admin"');
    }
    const put = await admin.call('PUT', `/admin/v1/users/${user.id}/plan`, { headers: bearer('nope'), json: { plan: 'pro' } });
    expect(put.status).toBe(401);
    expect(await sql('SELECT plan FROM users WHERE id = $1', [user.id])).toEqual([{ plan: 'free' }]);
    expect(a.logs.join('')).not.toContain(ADMIN_KEY);
    // With the key, an unknown admin path is a 404.
    const unknown = await admin.as('GET', '/admin/v1/no-such-thing');
    expect(unknown.status).toBe(404);
    expect(unknown.json).toEqual(NOT_FOUND);
  });

  it('GET /admin/v1/users/:id shows the user without the password hash', async () => {
    const user = await makeUser(a, { plan: 'premium' });
    const res = await admin.as('GET', `/admin/v1/users/${user.id}`);
    expect(res.status).toBe(200);
    expect(res.json).toEqual({
      id: user.id, email: user.email, plan: 'premium', is_active: 1, active: true, daily_usage: 0, last_usage_date: null, created_at: expect.any(String), email_verified_at: null,
      external_id: null,
      // No billing here (CONTRACT §29): an operator set premium.
      billing: { customer_id: null, customer_url: null, subscriptions: [], plan_source: 'operator', billing_plan: null, override_since: null, grace_ends_at: null },
    });
    expect(res.text).not.toContain('argon2');
    for (const id of ['999999999', '0', '-1', 'abc', '1.5', '99999999999999999999']) {
      const missing = await admin.as('GET', `/admin/v1/users/${id}`);
      expect(missing.status, id).toBe(404);
      expect(missing.json).toEqual(NOT_FOUND);
    }
  });

  it('PUT plan: sets user and subscription, at once here and within a second on the other instance', async () => {
    const user = await makeUser(a);
    const headers = bearer(user.access);
    // Both instances hold the user (free) in their caches.
    expect((await a.post('/api/v1/user/api-token', {}, { headers })).status).toBe(403);
    expect((await b.post('/api/v1/user/api-token', {}, { headers })).status).toBe(403);

    const res = await admin.as('PUT', `/admin/v1/users/${user.id}/plan`, { plan: 'pro' });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ id: user.id, email: user.email, plan: 'pro', is_active: 1 });
    expect(await sql('SELECT plan FROM subscriptions WHERE user_id = $1', [user.id])).toEqual([{ plan: 'pro' }]);
    expect((await a.post('/api/v1/user/api-token', {}, { headers })).status).toBe(201);
    await eventually(async () => (await b.post('/api/v1/user/api-token', {}, { headers })).status === 201, 1000);

    for (const body of [{ plan: 'gold' }, { plan: 'PRO' }, { plan: '' }, { plan: ['pro'] }, {}]) {
      const bad = await admin.as('PUT', `/admin/v1/users/${user.id}/plan`, body);
      expect(bad.status, JSON.stringify(body)).toBe(400);
      expect(bad.json).toEqual({ error: 'Plan inconnu (free, premium ou pro)' });
    }
    const noBody = await admin.call('PUT', `/admin/v1/users/${user.id}/plan`, { headers: bearer(ADMIN_KEY) });
    expect(noBody.status).toBe(400);
    const unknown = await admin.as('PUT', '/admin/v1/users/999999999/plan', { plan: 'pro' });
    expect(unknown.status).toBe(404);
    expect(unknown.json).toEqual(NOT_FOUND);
    expect(await sql('SELECT plan FROM users WHERE id = $1', [user.id])).toEqual([{ plan: 'pro' }]);
  });

  it('PUT active: deactivation stops the user at once here and within a second elsewhere; activation undoes it', async () => {
    const user = await makeUser(a);
    const headers = bearer(user.access);
    expect((await a.get('/api/v1/user/me', { headers })).status).toBe(200);
    expect((await b.get('/api/v1/user/me', { headers })).status).toBe(200);

    const off = await admin.as('PUT', `/admin/v1/users/${user.id}/active`, { active: false });
    expect(off.status).toBe(200);
    expect(off.json).toMatchObject({ id: user.id, is_active: 0, active: false });
    const denied = await a.get('/api/v1/user/me', { headers });
    expect(denied.status).toBe(401);
    expect(denied.json).toEqual({ error: 'Utilisateur introuvable' });
    await eventually(async () => (await b.get('/api/v1/user/me', { headers })).status === 401, 1000);
    expect((await a.post('/api/v1/auth/login', { email: user.email, password: user.password })).status).toBe(401);

    const on = await admin.as('PUT', `/admin/v1/users/${user.id}/active`, { active: true });
    expect(on.json).toMatchObject({ id: user.id, is_active: 1, active: true });
    expect((await a.get('/api/v1/user/me', { headers })).status).toBe(200);
    await eventually(async () => (await b.get('/api/v1/user/me', { headers })).status === 200, 1000);

    for (const body of [{ active: 'false' }, { active: 0 }, { active: null }, {}]) {
      const bad = await admin.as('PUT', `/admin/v1/users/${user.id}/active`, body);
      expect(bad.status, JSON.stringify(body)).toBe(400);
      expect(bad.json).toEqual({ error: 'Valeur "active" invalide (true ou false)' });
    }
    expect((await admin.as('PUT', '/admin/v1/users/999999999/active', { active: true })).status).toBe(404);
  });

  it('POST /admin/v1/alerts: 202, delivered to a pro user\'s webhook', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    const reg = await a.post('/api/v1/user/webhook', { url: receiver.url }, { headers: bearer(user.access) });
    expect(reg.status).toBe(201);
    const res = await admin.as('POST', '/admin/v1/alerts', { user_id: user.id, type: 'billing.payment_failed', data: { invoice: 'inv_1', amount: 1200 } });
    expect(res.status).toBe(202);
    expect(res.json).toEqual({ message: expect.any(String) });
    await eventually(() => receiver.ofType('billing.payment_failed').length === 1);
    const d = receiver.ofType('billing.payment_failed')[0]!;
    expect(d.json).toEqual({ type: 'billing.payment_failed', timestamp: expect.any(String), data: { invoice: 'inv_1', amount: 1200 } });
  });

  it('POST /admin/v1/alerts for a user deleted while it is accepted: 404, never a 500', async () => {
    const user = await makeUser(a);
    // Another session deletes the user: it holds the row until the alert waits for it, then commits.
    const deleter = await holdUserRow(user.id);
    const alert = admin.as('POST', '/admin/v1/alerts', { user_id: user.id, type: 'billing.payment_failed', data: {} });
    await deleter.waiters(1);
    await deleter.run('DELETE FROM users WHERE id = $1', [user.id]);
    await deleter.release();
    const res = await alert;
    expect(res.status).toBe(404);
    expect(res.json).toEqual(NOT_FOUND);
    expect(await sql('SELECT id FROM webhook_deliveries WHERE user_id = $1', [user.id])).toEqual([]);
  });

  it('POST /admin/v1/alerts validates its body and knows its users', async () => {
    const user = await makeUser(a);
    for (const body of [{}, { user_id: user.id, data: {} }, { user_id: user.id, type: '', data: {} }, { user_id: user.id, type: 'x', data: 'text' },
      { user_id: user.id, type: 'x', data: [1] }, { user_id: user.id, type: 'x' }, { user_id: 'abc', type: 'x', data: {} }, { user_id: -3, type: 'x', data: {} },
      { user_id: user.id, type: 'has space', data: {} }]) {
      const res = await admin.as('POST', '/admin/v1/alerts', body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.json).toEqual({ error: 'Alerte invalide (user_id, type et data requis)' });
    }
    const huge = await admin.as('POST', '/admin/v1/alerts', { user_id: user.id, type: 'x', data: { blob: 'a'.repeat(100_000) } });
    expect(huge.status).toBe(413);
    expect(huge.json).toEqual({ error: 'Requête trop volumineuse' });
    const unknown = await admin.as('POST', '/admin/v1/alerts', { user_id: 999999999, type: 'x', data: {} });
    expect(unknown.status).toBe(404);
    // A free user is accepted too; nothing is sent (no webhook, not pro).
    expect((await admin.as('POST', '/admin/v1/alerts', { user_id: user.id, type: 'x', data: {} })).status).toBe(202);
  });

  it('GET /admin/v1/users/{id}/webhook-deliveries lists the user\'s messages, newest first, with what became of them', async () => {
    const r = await startReceiver(undefined, (d) => (d.json.type === 'billing.refused' ? 410 : 200));
    try {
      const user = await makeUser(a, { plan: 'pro' });
      expect((await b.post('/api/v1/user/webhook', { url: r.url }, { headers: bearer(user.access) })).status).toBe(201);
      expect((await admin.as('POST', '/admin/v1/alerts', { user_id: user.id, type: 'billing.refused', data: { invoice: 'inv_2' } })).status).toBe(202);
      const list = () => admin.as('GET', `/admin/v1/users/${user.id}/webhook-deliveries`);
      await eventually(async () => (await list()).json.deliveries.every((d: { status: string }) => d.status !== 'pending'), 10_000);
      // One not attempted yet (as an operator would schedule it by SQL).
      await sql(`INSERT INTO webhook_deliveries (id, user_id, type, body, max_attempts, next_attempt_at)
                 VALUES ($1, $2, 'later', '{}', 1, now() + interval '1 hour')`, [`msg_later_${user.id}`, user.id]);
      const res = await list();
      expect(res.status).toBe(200);
      const idOf = (type: string) => r.ofType(type)[0]!.headers['webhook-id'];
      const at = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(res.json).toEqual({
        user_id: user.id,
        deliveries: [
          { id: `msg_later_${user.id}`, type: 'later', status: 'pending', attempts: 0, last_error: null, created_at: at, last_attempt_at: null, next_attempt_at: at, finished_at: null },
          { id: idOf('billing.refused'), type: 'billing.refused', status: 'failed', attempts: 1, last_error: 'HTTP 410', created_at: at, last_attempt_at: at, next_attempt_at: null, finished_at: at },
          { id: idOf('webhook.test'), type: 'webhook.test', status: 'delivered', attempts: 1, last_error: null, created_at: at, last_attempt_at: at, next_attempt_at: null, finished_at: at },
        ],
      });
      const [, refused, test] = res.json.deliveries;
      expect(test.created_at <= refused.created_at && refused.created_at <= refused.last_attempt_at && refused.last_attempt_at <= refused.finished_at).toBe(true);
      // Never the body: data sent to a receiver stays between the gateway and the receiver.
      expect(res.text).not.toContain('inv_2');
    } finally {
      await r.close();
    }
  });

  it('GET /admin/v1/users/{id}/webhook-deliveries is bounded to the 100 newest, and knows its users', async () => {
    const user = await makeUser(a);
    await sql(`INSERT INTO webhook_deliveries (id, user_id, type, body, max_attempts, status, attempts, created_at, finished_at)
               SELECT 'msg_bulk_' || $1 || '_' || i, $1::int, 'bulk', '{}', 1, 'delivered', 1, now() - i * interval '1 minute', now() - i * interval '1 minute'
                 FROM generate_series(1, 150) AS i`, [user.id]);
    const res = await admin.as('GET', `/admin/v1/users/${user.id}/webhook-deliveries`);
    expect(res.status).toBe(200);
    expect(res.json.deliveries.map((d: { id: string }) => d.id)).toEqual(Array.from({ length: 100 }, (_, i) => `msg_bulk_${user.id}_${i + 1}`));
    expect((await admin.as('GET', `/admin/v1/users/${(await makeUser(a)).id}/webhook-deliveries`)).json).toEqual({ user_id: expect.any(Number), deliveries: [] });
    for (const id of ['999999999', 'abc', '-1']) {
      const missing = await admin.as('GET', `/admin/v1/users/${id}/webhook-deliveries`);
      expect(missing.status).toBe(404);
      expect(missing.json).toEqual(NOT_FOUND);
    }
    expect((await admin.call('GET', `/admin/v1/users/${user.id}/webhook-deliveries`)).json).toEqual(UNAUTHORIZED);
  });

  describe('with no admin key configured', () => {
    let gw: TestGateway;
    let closed: AdminListening;
    beforeAll(async () => {
      gw = await startTestGateway(testConfig({ admin: { apiKey: '' } }));
      closed = await listenAdmin(gw);
    });
    afterAll(async () => {
      await closed?.app.close();
      await gw?.close();
    });

    it('answers 404 on every /admin path, whatever the credentials; /metrics and /healthz stay', async () => {
      const user = await makeUser(gw);
      for (const [method, path] of [['GET', `/admin/v1/users/${user.id}`], ['PUT', `/admin/v1/users/${user.id}/plan`], ['POST', '/admin/v1/alerts'], ['GET', '/admin/v1/x']]) {
        for (const headers of [{}, bearer(''), bearer(ADMIN_KEY), { authorization: 'Bearer ' }]) {
          const res = await closed.call(method!, path!, { headers, ...(method === 'GET' ? {} : { json: { plan: 'pro' } }) });
          expect(res.status, `${method} ${path}`).toBe(404);
          expect(res.json).toEqual(NOT_FOUND);
        }
      }
      expect(await sql('SELECT plan FROM users WHERE id = $1', [user.id])).toEqual([{ plan: 'free' }]);
      expect((await closed.call('GET', '/healthz')).status).toBe(200);
      expect((await closed.call('GET', '/metrics')).status).toBe(200);
    });
  });
});
