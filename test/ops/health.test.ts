// /healthz and /readyz (CONTRACT §4) on the public and the admin listener. The outage tests
// (postgresOutage, readiness, shutdown) cover /readyz answering 503 and Redis down or read-only.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { closeSql, describeWithServices, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';
import { request } from '../helpers/http.js';
import { sparePort } from '../helpers/ports.js';

describeWithServices('health endpoints', () => {
  let gw: TestGateway;
  let noRedis: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway(testConfig({ admin: { port: await sparePort() } }));
    noRedis = await startTestGateway(testConfig({ storage: { redis: '' } }));
  });
  afterAll(async () => {
    await Promise.all([gw?.close(), noRedis?.close()]);
    await closeSql();
  });

  it('answers on both listeners', async () => {
    for (const base of [gw.url, gw.adminUrl!]) {
      const health = await request(base, 'GET', '/healthz');
      expect(health.status).toBe(200);
      expect(health.json).toEqual({ status: 'ok' });
      const ready = await request(base, 'GET', '/readyz');
      expect(ready.status).toBe(200);
      expect(ready.json).toEqual({ status: 'ok', checks: { postgres: 'ok', redis: 'ok' } });
    }
  });

  it('reports Redis as off, not down, when none is configured', async () => {
    const ready = await noRedis.get('/readyz');
    expect(ready.status).toBe(200);
    expect(ready.json).toEqual({ status: 'ok', checks: { postgres: 'ok', redis: 'off' } });
  });

  it('needs no credentials and ignores any that are sent', async () => {
    const res = await gw.get('/healthz', { headers: { authorization: 'Bearer nonsense', 'x-api-key': 'nonsense' } });
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ status: 'ok' });
  });
});
