// Registering and removing the alert webhook, with the SSRF rules enforced (allowPrivateNetworks
// false), on a database of its own: a gateway that refuses private addresses would also claim, and
// refuse, the other test files' messages to their receivers on 127.0.0.1.
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  bearer, closeSql, describeWithServices, makeUser, startTestGateway, testConfig, throwawayDatabase, type TestGateway, type TestUser, type ThrowawayDatabase,
} from '../helpers/gateway.js';

const INVALID = { error: 'URL de webhook invalide (HTTPS requis)' };
const FORBIDDEN = { error: 'URL de webhook non autorisée' };

describeWithServices('POST/DELETE /api/v1/user/webhook', () => {
  let db: ThrowawayDatabase;
  let gw: TestGateway;
  let pro: TestUser;
  const sql = (text: string, params?: unknown[]) => db.sql(text, params);
  beforeAll(async () => {
    db = await throwawayDatabase({ migrated: true });
    // Deliveries to the public test addresses below go nowhere here: keep them short.
    gw = await startTestGateway(testConfig({ storage: db.storage, webhooks: { allowPrivateNetworks: false, retries: 0, timeout: '500ms' } }));
    pro = await makeUser(gw, { plan: 'pro' });
  });
  afterAll(async () => {
    await gw?.close();
    await db?.drop();
    await closeSql();
  });

  const register = (user: TestUser, body: unknown) => gw.post('/api/v1/user/webhook', body, { headers: bearer(user.access) });

  it('registers an https webhook and returns its secret once', async () => {
    const user = await makeUser(gw, { plan: 'pro' });
    const res = await register(user, { url: 'https://93.184.215.14/hooks/gateway?x=1' });
    expect(res.status).toBe(201);
    expect(res.json).toEqual({ url: 'https://93.184.215.14/hooks/gateway?x=1', secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]+={0,2}$/) });
    expect(Buffer.from(res.json.secret.slice('whsec_'.length), 'base64')).toHaveLength(32);
    expect(await sql('SELECT url, secret FROM webhooks WHERE user_id = $1', [user.id])).toEqual([{ url: res.json.url, secret: res.json.secret }]);
    expect(gw.logs.join('')).not.toContain(res.json.secret);
  });

  it('replaces the earlier webhook (one per user) and deletes it idempotently', async () => {
    const user = await makeUser(gw, { plan: 'pro' });
    const first = await register(user, { url: 'https://93.184.215.14/one' });
    const second = await register(user, { url: 'https://[2606:4700:4700::1111]/two' });
    expect(second.status).toBe(201);
    expect(second.json.url).toBe('https://[2606:4700:4700::1111]/two');
    expect(second.json.secret).not.toBe(first.json.secret);
    expect(await sql('SELECT url, secret FROM webhooks WHERE user_id = $1', [user.id])).toEqual([{ url: second.json.url, secret: second.json.secret }]);

    const del = await gw.request('DELETE', '/api/v1/user/webhook', { headers: bearer(user.access) });
    expect(del.status).toBe(200);
    expect(del.json).toEqual({ message: expect.any(String) });
    expect(await sql('SELECT 1 FROM webhooks WHERE user_id = $1', [user.id])).toEqual([]);
    const again = await gw.request('DELETE', '/api/v1/user/webhook', { headers: bearer(user.access) });
    expect(again.status).toBe(200);
    expect(again.json).toEqual(del.json);
  });

  it('refuses a missing, malformed or non-https URL', async () => {
    const bodies: unknown[] = [{}, { url: '' }, { url: '   ' }, { url: 42 }, { url: ['https://93.184.215.14/'] }, { url: 'not a url' },
      { url: 'http://93.184.215.14/hook' }, { url: 'ftp://93.184.215.14/' }, { url: 'https://' }, { url: `https://93.184.215.14/${'a'.repeat(3000)}` }];
    for (const body of bodies) {
      const res = await register(pro, body);
      expect(res.status, JSON.stringify(body).slice(0, 60)).toBe(400);
      expect(res.json).toEqual(INVALID);
    }
    // Not JSON at all reads as {} (spec §4 leniency): the URL is missing.
    const raw = await gw.request('POST', '/api/v1/user/webhook', { headers: { ...bearer(pro.access), 'content-type': 'application/json' }, body: '{"url": ' });
    expect(raw.status).toBe(400);
    expect(raw.json).toEqual(INVALID);
    expect(await sql('SELECT 1 FROM webhooks WHERE user_id = $1', [pro.id])).toEqual([]);
  });

  it('refuses every non-public target', async () => {
    const urls = [
      'https://127.0.0.1/', 'https://127.1/', 'https://2130706433/', 'https://0x7f000001/', 'https://017700000001/',
      'https://[::1]/', 'https://[::ffff:127.0.0.1]/', 'https://[::ffff:7f00:1]:8443/x', 'https://169.254.169.254/latest/meta-data/',
      'https://localhost/hook', 'https://localhost./hook', 'https://LOCALHOST:9090/admin/v1/users/1', 'https://api.localhost/',
      'https://10.0.0.1/', 'https://172.16.5.4/', 'https://192.168.0.10/', 'https://100.64.0.1/', 'https://0.0.0.0/', 'https://0/',
      'https://224.0.0.1/', 'https://255.255.255.255/', 'https://240.0.0.1/', 'https://[fe80::1]/', 'https://[fd00::1]/', 'https://[ff02::1]/',
      'https://[::]/', 'https://[::ffff:169.254.169.254]/', 'https://[64:ff9b::a9fe:a9fe]/',
    ];
    for (const url of urls) {
      const res = await register(pro, { url });
      expect(res.status, url).toBe(400);
      expect(res.json, url).toEqual(FORBIDDEN);
    }
    expect(await sql('SELECT 1 FROM webhooks WHERE user_id = $1', [pro.id])).toEqual([]);
  });

  it('is reserved to the pro plan and needs authentication', async () => {
    for (const plan of ['free', 'premium'] as const) {
      const user = await makeUser(gw, { plan });
      for (const method of ['POST', 'DELETE']) {
        // (the test client sends no Content-Length on DELETE, so no body there)
        const res = await gw.request(method, '/api/v1/user/webhook', { headers: bearer(user.access), ...(method === 'POST' ? { json: { url: 'https://93.184.215.14/' } } : {}) });
        expect(res.status).toBe(403);
        expect(res.json).toEqual({ error: 'Plan insuffisant', required: ['pro'], current_plan: plan, upgrade_url: '/api/v1/subscription/upgrade' });
      }
    }
    const anonymous = await gw.post('/api/v1/user/webhook', { url: 'https://93.184.215.14/' });
    expect(anonymous.status).toBe(401);
    expect(anonymous.json).toEqual({ error: 'Token invalide ou expiré' });
  });
});
