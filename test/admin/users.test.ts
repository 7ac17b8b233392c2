// CONTRACT §16: operators list and search users, see a user's sessions and keys, end sessions
// and remove a second factor, over HTTP on the admin listener.
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import { ADMIN_KEY, bearer, closeSql, describeWithServices, marker, newPassword, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';
import { request } from '../helpers/http.js';

describeWithServices('admin: users listing and a user’s sessions and keys', () => {
  let gw: TestGateway;
  let adminApp: FastifyInstance;
  let url: string;
  const admin = (method: string, path: string) => request(url, method, path, { headers: bearer(ADMIN_KEY) });

  /** Registers `count` users whose emails all contain `tag`; their ids in registration order. */
  async function register(tag: string, count: number): Promise<number[]> {
    const ids: number[] = [];
    for (let i = 0; i < count; i++) {
      const res = await gw.post('/api/v1/auth/register', { email: `${tag}-${i}@Example.test`, password: newPassword() });
      expect(res.status).toBe(201);
      ids.push(res.json.user_id as number);
    }
    return ids;
  }

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

  it('searches emails case-insensitively by substring, newest first, or by exact id', async () => {
    const tag = marker();
    const ids = await register(tag, 3);
    const res = await admin('GET', `/admin/v1/users?query=${tag.toUpperCase()}`);
    expect(res.status).toBe(200);
    expect(res.json.users.map((u: { id: number }) => u.id)).toEqual([...ids].reverse());
    expect(res.json.next_cursor).toBeNull();
    expect(res.json.users[0]).toEqual(expect.objectContaining({ email: `${tag}-2@example.test`, plan: 'free', is_active: 1, active: true }));
    expect(JSON.stringify(res.json)).not.toMatch(/password|hash/);
    const byId = await admin('GET', `/admin/v1/users?query=${ids[1]}`);
    expect(byId.json.users.map((u: { id: number }) => u.id)).toContain(ids[1]);
    // LIKE's wildcards are literal in a query.
    expect((await admin('GET', `/admin/v1/users?query=${tag}%25`)).json.users).toEqual([]);
  });

  it('filters by plan and active flag', async () => {
    const tag = marker();
    const [a, b] = await register(tag, 2);
    expect((await request(url, 'PUT', `/admin/v1/users/${a}/plan`, { headers: bearer(ADMIN_KEY), json: { plan: 'pro' } })).status).toBe(200);
    expect((await request(url, 'PUT', `/admin/v1/users/${b}/active`, { headers: bearer(ADMIN_KEY), json: { active: false } })).status).toBe(200);
    const ids = async (q: string) => (await admin('GET', `/admin/v1/users?query=${tag}&${q}`)).json.users.map((u: { id: number }) => u.id);
    expect(await ids('plan=pro')).toEqual([a]);
    expect(await ids('active=false')).toEqual([b]);
    expect(await ids('active=true&plan=free')).toEqual([]);
  });

  it('answers 400 to malformed parameters and keeps ?email= as before', async () => {
    const bad = { error: 'Paramètres de liste invalides (limit, cursor, active ou plan)' };
    for (const q of ['limit=0', 'limit=201', 'limit=x', 'cursor=nonsense', 'active=yes', 'plan=gold']) {
      const res = await admin('GET', `/admin/v1/users?${q}`);
      expect([q, res.status, res.json]).toEqual([q, 400, bad]);
    }
    expect((await admin('GET', '/admin/v1/users?email=')).json).toEqual({ error: 'Paramètre email requis' });
    expect((await admin('GET', '/admin/v1/users?email=nobody-here@example.test')).status).toBe(404);
    expect((await request(url, 'GET', '/admin/v1/users')).status).toBe(401);
  });

  it('pages with a cursor: every user once, none skipped, while others register between pages', async () => {
    const tag = marker();
    const ids = await register(tag, 7);
    const seen: number[] = [];
    let cursor: string | null = null;
    let round = 0;
    do {
      // New users matching the same search register while each page is read.
      const [res]: [Awaited<ReturnType<typeof admin>>, unknown] = await Promise.all([
        admin('GET', `/admin/v1/users?query=${tag}&limit=2${cursor ? `&cursor=${cursor}` : ''}`),
        register(`${tag}-late${round++}`, 2),
      ]);
      expect(res.status).toBe(200);
      expect(res.json.users.length).toBeLessThanOrEqual(2);
      seen.push(...res.json.users.map((u: { id: number }) => u.id));
      cursor = res.json.next_cursor;
    } while (cursor);
    // Newest first among those there when paging began; none twice, none missed.
    expect(seen.filter((id) => ids.includes(id))).toEqual([...ids].reverse());
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen.slice(seen.length - ids.length)).toEqual([...ids].reverse());
  });

  it('lists a user’s sessions and API keys without secrets, and revokes one session or all', async () => {
    const email = `${marker()}@example.test`;
    const password = newPassword();
    const id = (await gw.post('/api/v1/auth/register', { email, password })).json.user_id as number;
    const one = (await gw.post('/api/v1/auth/login', { email, password }, { headers: { 'user-agent': 'Phone/1' } })).json;
    const two = (await gw.post('/api/v1/auth/login', { email, password })).json;
    expect((await request(url, 'PUT', `/admin/v1/users/${id}/plan`, { headers: bearer(ADMIN_KEY), json: { plan: 'pro' } })).status).toBe(200);
    const key = await gw.post('/api/v1/user/api-token', {}, { headers: bearer(one.access_token) });
    expect(key.status).toBe(201);

    const sessions = await admin('GET', `/admin/v1/users/${id}/sessions`);
    expect(sessions.status).toBe(200);
    expect(sessions.json.sessions).toHaveLength(2);
    expect(sessions.json.sessions.map((s: { user_agent: string }) => s.user_agent)).toContain('Phone/1');
    const keys = await admin('GET', `/admin/v1/users/${id}/api-keys`);
    expect(keys.json.api_keys).toEqual([expect.objectContaining({ active: true, last_used_at: null })]);
    expect(JSON.stringify(keys.json)).not.toContain(key.json.api_token);
    expect(JSON.stringify(keys.json)).not.toMatch(/hash/);

    const phone = sessions.json.sessions.find((s: { user_agent: string }) => s.user_agent === 'Phone/1').id;
    const revoked = await admin('DELETE', `/admin/v1/users/${id}/sessions/${phone}`);
    expect(revoked.status).toBe(200);
    expect((await gw.post('/api/v1/auth/refresh', { refresh_token: one.refresh_token })).status).toBe(401);
    expect((await admin('GET', `/admin/v1/users/${id}/sessions`)).json.sessions).toHaveLength(1);

    expect((await admin('DELETE', `/admin/v1/users/${id}/sessions`)).status).toBe(200);
    expect((await gw.post('/api/v1/auth/refresh', { refresh_token: two.refresh_token })).status).toBe(401);
    expect((await admin('GET', `/admin/v1/users/${id}/sessions`)).json.sessions).toEqual([]);
    // Another user's session, or an unknown user: 404.
    expect((await admin('DELETE', `/admin/v1/users/${id + 100000}/sessions`)).status).toBe(404);
  });

  it('answers passkeys and identities as lists, and removes a second factor with 200', async () => {
    const id = (await register(marker(), 1))[0]!;
    expect((await admin('GET', `/admin/v1/users/${id}/passkeys`)).json).toEqual({ passkeys: [] });
    expect((await admin('GET', `/admin/v1/users/${id}/identities`)).json).toEqual({ identities: [] });
    const mfa = await admin('DELETE', `/admin/v1/users/${id}/mfa`);
    expect(mfa.status).toBe(200);
    expect(mfa.json).toEqual({ message: 'Second facteur retiré', user_id: id });
    expect((await admin('GET', '/admin/v1/users/0/passkeys')).status).toBe(404);
  });
});
