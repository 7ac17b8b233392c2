// Auth rate limit (CONTRACT auth.rateLimit): per client address on /api/v1/auth/*, shared by the
// instances through Redis, X-Forwarded-For honoured only under server.trustProxy, and still in
// force (in-process, per instance) while Redis is down.
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { closeSql, describeWithServices, eventually, newEmail, startTestGateway, startTwoGateways, testConfig, type TestGateway } from '../helpers/gateway.js';
import { ownRedisPrefix, startOwnRedis, type OwnRedis } from './support.js';

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
    let redis: OwnRedis;
    beforeAll(async () => { redis = await startOwnRedis(); });
    afterAll(async () => { await redis?.stop(); });

    it('limits each instance in-process, then shares the count again once Redis is back', async () => {
      const config = testConfig({ ...limited(2), storage: { redis: redis.url, redisKeyPrefix: 'gw:' } });
      const [a, b] = await startTwoGateways(config);
      running.push(a, b);
      await redis.stop();
      await eventually(async () => (await a.get('/readyz')).status === 503 && (await b.get('/readyz')).status === 503);

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
      await eventually(async () => (await a.get('/readyz')).status === 200 && (await b.get('/readyz')).status === 200, 10_000);
      // A fresh Redis: two requests in all, across both instances, then 429 on either.
      expect((await login(a)).status).toBe(401);
      expect((await login(b)).status).toBe(401);
      expect((await login(a)).json).toEqual(LIMITED);
      expect((await login(b)).json).toEqual(LIMITED);
      expect(a.logs.some((l) => l.includes('auth rate limit: counting in Redis again') || l.includes('Redis is back'))).toBe(true);
    });
  });
});
