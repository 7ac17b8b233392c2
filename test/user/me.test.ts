import { afterAll, beforeAll, expect, it } from 'vitest';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { bearer, closeSql, describeWithServices, eventually, makeUser, sql, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';

describeWithServices('GET /api/v1/user/me', () => {
  let gw: TestGateway;
  let upstream: EchoUpstream;
  beforeAll(async () => {
    upstream = await startEchoUpstream();
    gw = await startTestGateway(testConfig({
      upstreams: { app: { url: upstream.url } },
      routes: [{ path: '/races', upstream: 'app', dailyLimit: true }],
    }));
  });
  afterAll(async () => {
    await gw?.close();
    await upstream?.close();
    await closeSql();
  });

  it('shows the signed-in user, with the daily usage as counted', async () => {
    const user = await makeUser(gw);
    const before = await gw.get('/api/v1/user/me', { headers: bearer(user.access) });
    expect(before.status).toBe(200);
    expect(before.json).toEqual({
      user_id: user.id, email: user.email, plan: 'free', daily_usage: 0, last_usage_date: null, limits: { daily: 1, monthly: null, perMinute: null }, daily_remaining: 1,
      monthly_usage: null, monthly_remaining: null, email_verified_at: null,
    });

    expect((await gw.get('/races', { headers: bearer(user.access) })).status).toBe(200);
    const after = await gw.get('/api/v1/user/me', { headers: bearer(user.access) });
    expect(after.json).toEqual({
      user_id: user.id, email: user.email, plan: 'free', daily_usage: 1, last_usage_date: new Date().toISOString().slice(0, 10),
      limits: { daily: 1, monthly: null, perMinute: null }, daily_remaining: 0, monthly_usage: null, monthly_remaining: null, email_verified_at: null,
    });
  });

  it('is open to every plan', async () => {
    for (const plan of ['premium', 'pro'] as const) {
      const user = await makeUser(gw, { plan });
      const res = await gw.get('/api/v1/user/me', { headers: bearer(user.access) });
      expect(res.status).toBe(200);
      expect(res.json).toMatchObject({ user_id: user.id, plan });
    }
  });

  it('answers 401 without a valid credential, and for a deactivated user', async () => {
    const none = await gw.get('/api/v1/user/me');
    expect(none.status).toBe(401);
    expect(none.json).toEqual({ error: 'Token invalide ou expiré' });
    const bad = await gw.get('/api/v1/user/me', { headers: bearer('not-a-token') });
    expect(bad.json).toEqual({ error: 'Token invalide ou expiré' });

    const user = await makeUser(gw);
    await sql('UPDATE users SET is_active = 0 WHERE id = $1', [user.id]);
    // The NOTIFY reaches this instance's cache within a second.
    await eventually(async () => (await gw.get('/api/v1/user/me', { headers: bearer(user.access) })).status === 401, 1000);
    const res = await gw.get('/api/v1/user/me', { headers: bearer(user.access) });
    expect(res.json).toEqual({ error: 'Utilisateur introuvable' });
  });
});
