// Auth rate limit (CONTRACT auth.rateLimit): per client address on /api/v1/auth/* and the account
// endpoints of /api/v1/user (CONTRACT §13), shared by the instances through Redis, X-Forwarded-For
// honoured only under server.trustProxy, and still in force (in-process, per instance) while Redis
// is down.
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { closeSql, describeWithServices, eventually, newEmail, ownRedisPrefix, startTestGateway, startTwoGateways, testConfig, type TestGateway } from '../helpers/gateway.js';
import { startRedisServer, type RedisServer } from '../helpers/redisServers.js';

const LIMITED = { error: 'Trop de tentatives, réessayez plus tard' };

describeWithServices('auth rate limit', () => {
  const running: TestGateway[] = [];
  const start = async (overrides: Record<string, unknown>) => {
    const gw = await startTestGateway(testConfig(overrides));
    running.push(gw);
    return gw;
  };
  afterEach(async () => { await Promise.all(running.splice(0).map((gw) => gw.close())); });
  afterAll(async () => { await closeSql(); });

  const limited = (max: number, extra: Record<string, unknown> = {}) => ({
    auth: { rateLimit: { max, window: '1m' } },
    storage: { redisKeyPrefix: ownRedisPrefix('rl') },
    ...extra,
  });
  /** Registers and logs in a user (two requests of the budget). */
  async function signedIn(gw: TestGateway): Promise<{ access: string }> {
    const email = newEmail();
    expect((await gw.post('/api/v1/auth/register', { email, password: 'a-good-password' })).status).toBe(201);
    const res = await gw.post('/api/v1/auth/login', { email, password: 'a-good-password' });
    expect(res.status).toBe(200);
    return { access: res.json.access_token };
  }
  const login = (gw: TestGateway, headers: Record<string, string> = {}) =>
    gw.post('/api/v1/auth/login', { email: newEmail(), password: 'wrong-password' }, { headers });

  it('answers 429 with Retry-After past max, on every auth endpoint, shared by two instances', async () => {
    const config = testConfig(limited(4));
    const [a, b] = await startTwoGateways(config);
    running.push(a, b);
    expect((await login(a)).status).toBe(401);
    expect((await b.post('/api/v1/auth/register', {})).status).toBe(400);
    expect((await a.post('/api/v1/auth/refresh', {})).status).toBe(400);
    expect((await b.post('/api/v1/auth/logout', {})).status).toBe(200);
    // The fifth request from this address, whichever instance it reaches, is refused.
    for (const gw of [a, b]) {
      const res = await login(gw);
      expect(res.status).toBe(429);
      expect(res.json).toEqual(LIMITED);
      expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
      expect(Number(res.headers['retry-after'])).toBeLessThanOrEqual(60);
    }
    expect((await b.post('/api/v1/auth/logout', {})).json).toEqual(LIMITED);
    // Other endpoints are not limited.
    expect((await a.get('/healthz')).status).toBe(200);
    expect((await a.get('/api/v1/user/me')).status).toBe(401);
  });

  it('covers the account endpoints of /api/v1/auth and /api/v1/user in the same budget per address', async () => {
    const [a, b] = await startTwoGateways(testConfig(limited(6)));
    running.push(a, b);
    const { access } = await signedIn(a);
    const headers = { authorization: `Bearer ${access}` };
    // Register and login of signedIn() took two; these four the rest of the budget, on both instances.
    expect((await b.post('/api/v1/auth/password/forgot', { email: newEmail() })).status).toBe(503); // no mail.smtp here
    expect((await a.get('/api/v1/user/sessions', { headers })).status).toBe(200);
    expect((await b.request('DELETE', '/api/v1/user/sessions/999999999999', { headers })).status).toBe(404);
    expect((await a.request('DELETE', '/api/v1/user/me', { headers, json: { password: 'wrong-password' } })).status).toBe(401);
    const calls: Array<() => Promise<{ status: number; json: unknown }>> = [
      () => a.post('/api/v1/auth/password/change', { current_password: 'x', new_password: 'y'.repeat(10) }, { headers }),
      () => b.post('/api/v1/auth/password/forgot', { email: newEmail() }),
      () => a.post('/api/v1/auth/password/reset', { token: 'x', new_password: 'y'.repeat(10) }),
      () => b.post('/api/v1/auth/email/verify', { token: 'x' }),
      () => a.post('/api/v1/auth/email/resend', {}, { headers }),
      () => b.get('/api/v1/user/sessions', { headers }),
      () => a.request('DELETE', '/api/v1/user/sessions/999999999999', { headers }),
      () => b.request('DELETE', '/api/v1/user/me', { headers, json: { password: 'wrong-password' } }),
      () => a.post('/api/v1/auth/login', { email: newEmail(), password: 'x' }),
    ];
    for (const call of calls) {
      const res = await call();
      expect(res.status).toBe(429);
      expect(res.json).toEqual(LIMITED);
    }
    // The user's other endpoints are not limited.
    expect((await a.get('/api/v1/user/me', { headers })).status).toBe(200);
  });

  it('ignores a spoofed X-Forwarded-For unless server.trustProxy is on', async () => {
    const gw = await start(limited(2));
    expect((await login(gw, { 'x-forwarded-for': '203.0.113.1' })).status).toBe(401);
    expect((await login(gw, { 'x-forwarded-for': '203.0.113.2' })).status).toBe(401);
    expect((await login(gw, { 'x-forwarded-for': '203.0.113.3' })).json).toEqual(LIMITED);
  });

  it('keys on the forwarded client address when server.trustProxy is on', async () => {
    const gw = await start(limited(2, { server: { trustProxy: true } }));
    const from = (ip: string) => ({ 'x-forwarded-for': ip });
    expect((await login(gw, from('203.0.113.10'))).status).toBe(401);
    expect((await login(gw, from('203.0.113.10'))).status).toBe(401);
    expect((await login(gw, from('203.0.113.10'))).json).toEqual(LIMITED);
    // Another client behind the same proxy has its own budget.
    expect((await login(gw, from('203.0.113.11'))).status).toBe(401);
    // IPv6 clients are counted per /64: rotating addresses inside one's prefix does not help.
    expect((await login(gw, from('2001:db8:1:2::1'))).status).toBe(401);
    expect((await login(gw, from('2001:db8:1:2::ffff'))).status).toBe(401);
    expect((await login(gw, from('2001:db8:1:2:abcd::9'))).json).toEqual(LIMITED);
  });

  it('max 0 disables it', async () => {
    const gw = await start(limited(0));
    const statuses = await Promise.all(Array.from({ length: 30 }, () => gw.post('/api/v1/auth/logout', {}).then((r) => r.status)));
    expect(new Set(statuses)).toEqual(new Set([200]));
  });

  describeWithServices('with Redis down', () => {
    let redis: RedisServer;
    beforeAll(async () => { redis = await startRedisServer(); });
    afterAll(async () => { await redis?.stop(); });

    it('limits each instance in-process, then shares the count again once Redis is back', async () => {
      const config = testConfig({ ...limited(2), storage: { redis: redis.url, redisKeyPrefix: 'gw:' } });
      const [a, b] = await startTwoGateways(config);
      running.push(a, b);
      await redis.kill();
      await eventually(async () => (await a.get('/readyz')).json.checks?.redis === 'down' && (await b.get('/readyz')).json.checks?.redis === 'down');

      // Not unlimited: each instance refuses its third request on its own.
      for (const gw of [a, b]) {
        expect((await login(gw)).status).toBe(401);
        expect((await login(gw)).status).toBe(401);
        const res = await login(gw);
        expect(res.status).toBe(429);
        expect(res.json).toEqual(LIMITED);
        expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
      }

      await redis.start();
      await eventually(async () => (await a.get('/readyz')).json.checks?.redis === 'ok' && (await b.get('/readyz')).json.checks?.redis === 'ok', 10_000);
      // A fresh Redis: two requests in all, across both instances, then 429 on either.
      expect((await login(a)).status).toBe(401);
      expect((await login(b)).status).toBe(401);
      expect((await login(a)).json).toEqual(LIMITED);
      expect((await login(b)).json).toEqual(LIMITED);
      expect(a.logs.some((l) => l.includes('auth rate limit: counting in Redis again') || l.includes('Redis is back'))).toBe(true);
    });
  });
});
