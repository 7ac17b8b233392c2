// CONTRACT §24: the shared admin key is break-glass, re-read on SIGHUP: the old key stops at once,
// the new one works, and every console session and sign-in link minted with the old one ends.
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import { parseConfig } from '../../src/config/load.js';
import { reload } from '../../src/live/reload.js';
import { docsExample } from '../helpers/docs.js';
import { ADMIN_KEY, bearer, closeSql, describeWithServices, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';
import { request } from '../helpers/http.js';

const NEW_KEY = 'rotated-admin-key-0123456789abcdef-01234567';

describeWithServices('admin key rotated by SIGHUP', () => {
  let gw: TestGateway;
  let adminApp: FastifyInstance;
  let url: string;

  beforeAll(async () => {
    gw = await startTestGateway(testConfig());
    adminApp = await buildAdminApp(gw.services);
    url = await adminApp.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => {
    await adminApp?.close();
    await gw?.close();
    await closeSql();
  });

  it('old key 401 and new key 200 at once; sessions and links of the old key end; nothing needs a restart', async () => {
    const origin = new URL(url).origin;
    const session = await request(url, 'POST', '/console/session', { json: { key: ADMIN_KEY } });
    const cookie = String(session.headers['set-cookie']).split(';')[0]!;
    expect((await request(url, 'GET', '/console/api/v1/users?limit=1', { headers: { cookie } })).status).toBe(200);
    const minted = await request(url, 'POST', '/console/tickets', { headers: bearer(ADMIN_KEY) });
    const ticket = new URL(minted.json.url as string).hash.replace('#ticket=', '');

    // As start.ts wires SIGHUP: the file read again (docs/operators.md's example, its variable changed), then applied.
    const { apiKey } = parseConfig(docsExample('operators', 'break-glass'), 'gateway.yaml', { GATEWAY_ADMIN_KEY: NEW_KEY }).admin;
    const result = reload({ ...gw.services }, () => testConfig({ admin: { port: 0, apiKey } }));
    expect(result).toEqual({ applied: ['admin.apiKey'], needsRestart: [] });

    const old = await request(url, 'GET', '/admin/v1/users?limit=1', { headers: bearer(ADMIN_KEY) });
    expect([old.status, old.json]).toEqual([401, { error: 'Clé d’administration invalide' }]);
    expect((await request(url, 'GET', '/admin/v1/users?limit=1', { headers: bearer(NEW_KEY) })).status).toBe(200);
    expect((await request(url, 'GET', '/console/api/v1/users?limit=1', { headers: { cookie } })).status).toBe(401);
    const redeemed = await request(url, 'POST', '/console/session', { headers: { origin }, json: { ticket } });
    expect(redeemed.status).toBe(401);
    expect((await request(url, 'POST', '/console/session', { json: { key: ADMIN_KEY } })).status).toBe(401);
    const fresh = await request(url, 'POST', '/console/session', { json: { key: NEW_KEY } });
    const freshCookie = String(fresh.headers['set-cookie']).split(';')[0]!;
    expect((await request(url, 'GET', '/console/api/v1/users?limit=1', { headers: { cookie: freshCookie } })).status).toBe(200);
  });
});
