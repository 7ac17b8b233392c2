// Account deletion (CONTRACT §13, GDPR erasure): by the user with their password, or by an
// operator through the admin API; everything of the user goes, every instance refuses its
// credentials within a second, and the email can register again.
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import {
  ADMIN_KEY, bearer, closeSql, describeWithServices, everywhereWithin, makeUser, sql, startTwoGateways, testConfig,
  type TestGateway, type TestUser,
} from '../helpers/gateway.js';
import { request } from '../helpers/http.js';

const ME = '/api/v1/user/me';
const INVALID = { error: 'Identifiants invalides' };
const TABLES = ['users', 'subscriptions', 'refresh_tokens', 'sessions', 'api_tokens', 'webhooks', 'email_tokens', 'usage_days'] as const;

describeWithServices('account deletion', () => {
  let a: TestGateway;
  let b: TestGateway;
  const adminUrls = new Map<TestGateway, string>();
  const adminApps: FastifyInstance[] = [];

  beforeAll(async () => {
    [a, b] = await startTwoGateways(testConfig());
    // An admin listener on each, as `gateway start` builds it, on a port of the system's choosing.
    for (const gw of [a, b]) {
      const app = await buildAdminApp(gw.services);
      adminApps.push(app);
      adminUrls.set(gw, await app.listen({ host: '127.0.0.1', port: 0 }));
    }
  });
  afterAll(async () => {
    await Promise.all(adminApps.map((app) => app.close()));
    await Promise.all([a?.close(), b?.close()]);
    await closeSql();
  });

  /** A pro user with an API key, a webhook, two sessions, a reset link and daily usage with history: something in every table. */
  async function richUser(): Promise<TestUser & { key: string }> {
    const user = await makeUser(a, { plan: 'pro' });
    await b.post('/api/v1/auth/login', { email: user.email, password: user.password });
    const key = (await a.post('/api/v1/user/api-token', {}, { headers: bearer(user.access) })).json.api_token as string;
    expect((await a.post('/api/v1/user/webhook', { url: 'https://127.0.0.1:9/hook' }, { headers: bearer(user.access) })).status).toBe(201);
    await sql(`INSERT INTO email_tokens (user_id, purpose, token_hash, email, expires_at) VALUES ($1, 'reset', md5(random()::text), $2, now() + interval '30 minutes')`, [user.id, user.email]);
    // Yesterday's use, rolled up into usage_days when the day moves on, then today's.
    await sql('UPDATE users SET daily_usage = 1, last_usage_date = CURRENT_DATE - 1 WHERE id = $1', [user.id]);
    await sql('UPDATE users SET daily_usage = 1, last_usage_date = CURRENT_DATE WHERE id = $1', [user.id]);
    return { ...user, key };
  }

  async function rowsOf(userId: number): Promise<Record<string, number>> {
    const counts: Record<string, number> = {};
    for (const table of TABLES) {
      const column = table === 'users' ? 'id' : 'user_id';
      counts[table] = Number((await sql<{ n: string }>(`SELECT count(*) AS n FROM ${table} WHERE ${column} = $1`, [userId]))[0]!.n);
    }
    return counts;
  }
  const none = Object.fromEntries(TABLES.map((t) => [t, 0]));

  /** Both instances have the user and the key cached, as after ordinary traffic. */
  async function warm(user: TestUser & { key: string }) {
    for (const gw of [a, b]) {
      expect((await gw.get(ME, { headers: bearer(user.access) })).status).toBe(200);
      expect((await gw.get(ME, { headers: { 'x-api-key': user.key } })).status).toBe(200);
    }
  }

  /** Within a second of the deletion, every instance refuses its access token, its key and its refresh token. */
  async function refusedEverywhere(user: TestUser & { key: string }) {
    await everywhereWithin([a, b], async (gw) =>
      (await gw.get(ME, { headers: bearer(user.access) })).status === 401
      && (await gw.get(ME, { headers: { 'x-api-key': user.key } })).status === 401, 1000);
    const res = await b.get(ME, { headers: bearer(user.access) });
    expect(res.json).toEqual({ error: 'Utilisateur introuvable' });
    expect((await a.post('/api/v1/auth/refresh', { refresh_token: user.refresh })).status).toBe(401);
  }

  describe('DELETE /api/v1/user/me', () => {
    it('with the password: 200, every row of the user gone, refused everywhere within a second', async () => {
      const user = await richUser();
      expect(Object.values(await rowsOf(user.id)).every((n) => n > 0)).toBe(true);
      await warm(user);
      // Another instance hears of the deletion on its change feed: what a WebSocket listener
      // (CONTRACT §10) subscribes to, to close the user's open sockets.
      const heard: number[] = [];
      const unsubscribe = b.services.feed.subscribe({ userChanged: (id) => heard.push(id) });
      try {
        const res = await a.request('DELETE', ME, { headers: bearer(user.access), json: { password: user.password } });
        expect(res.json).toEqual({ message: 'Compte supprimé' });
        expect(res.status).toBe(200);
        expect(res.json).toEqual({ message: 'Compte supprimé' });
        await refusedEverywhere(user);
        expect(heard).toContain(user.id);
      } finally {
        unsubscribe();
      }
      expect(await rowsOf(user.id)).toEqual(none);
    });

    it('the email can register again, as a new account with nothing of the old one', async () => {
      const user = await richUser();
      expect((await b.request('DELETE', ME, { headers: bearer(user.access), json: { password: user.password } })).status).toBe(200);
      const again = await a.post('/api/v1/auth/register', { email: user.email, password: user.password });
      expect(again.status).toBe(201);
      expect(again.json.user_id).not.toBe(user.id);
      const login = await a.post('/api/v1/auth/login', { email: user.email, password: user.password });
      const me = await b.get(ME, { headers: bearer(login.json.access_token) });
      expect(me.json).toMatchObject({ user_id: again.json.user_id, plan: 'free', daily_usage: 0, last_usage_date: null });
      // The old token names the old id: still refused.
      expect((await b.get(ME, { headers: bearer(user.access) })).status).toBe(401);
    });

    it('a wrong, missing or over-long password: 401 "Identifiants invalides", nothing deleted', async () => {
      const user = await richUser();
      for (const json of [{ password: `${user.password}x` }, {}, { password: '' }, { password: 'p'.repeat(2000) }]) {
        const res = await a.request('DELETE', ME, { headers: bearer(user.access), json });
        expect(res.status).toBe(401);
        expect(res.json).toEqual(INVALID);
      }
      expect((await rowsOf(user.id)).users).toBe(1);
      expect((await a.request('DELETE', ME, { json: { password: user.password } })).status).toBe(401);
    });

    it('with the old password after a change: refused', async () => {
      const user = await richUser();
      const changed = await a.post('/api/v1/auth/password/change', { current_password: user.password, new_password: `${user.password}-new` }, { headers: bearer(user.access) });
      expect(changed.status).toBe(200);
      const res = await b.request('DELETE', ME, { headers: bearer(changed.json.access_token), json: { password: user.password } });
      expect(res.json).toEqual(INVALID);
      expect((await rowsOf(user.id)).users).toBe(1);
    });
  });

  describe('admin API', () => {
    const admin = (gw: TestGateway, method: string, path: string) => request(adminUrls.get(gw)!, method, path, { headers: { authorization: `Bearer ${ADMIN_KEY}` } });

    it('GET /admin/v1/users?email= finds the account (any case, spaces); 404 unknown; 400 with an empty email', async () => {
      const user = await makeUser(a);
      const found = await admin(b, 'GET', `/admin/v1/users?email=${encodeURIComponent(`  ${user.email.toUpperCase()} `)}`);
      expect(found.status).toBe(200);
      expect(found.json).toMatchObject({ id: user.id, email: user.email, plan: 'free', is_active: 1, email_verified_at: null });
      expect(found.json.password_hash).toBeUndefined();
      expect((await admin(b, 'GET', '/admin/v1/users?email=nobody%40example.test')).json).toEqual({ error: 'Ressource introuvable' });
      expect((await admin(b, 'GET', '/admin/v1/users?email=not-an-address')).status).toBe(404);
      for (const query of ['?email=', '?email=%20', '?email=a%40x.test&email=b%40x.test']) {
        const res = await admin(b, 'GET', `/admin/v1/users${query}`);
        expect(res.status, query).toBe(400);
        expect(res.json).toEqual({ error: 'Paramètre email requis' });
      }
      // Without email= it is the listing of CONTRACT §16 (test/admin/users.test.ts).
      expect((await admin(b, 'GET', '/admin/v1/users')).json).toMatchObject({ users: expect.any(Array) });
      expect((await request(adminUrls.get(b)!, 'GET', `/admin/v1/users?email=${user.email}`)).status).toBe(401);
    });

    it('DELETE /admin/v1/users/{id} erases the account like its user can, and answers what it deleted', async () => {
      const user = await richUser();
      await warm(user);
      const res = await admin(a, 'DELETE', `/admin/v1/users/${user.id}`);
      expect(res.status).toBe(200);
      expect(res.json).toMatchObject({ id: user.id, email: user.email, plan: 'pro' });
      await refusedEverywhere(user);
      expect(await rowsOf(user.id)).toEqual(none);
      expect((await admin(b, 'DELETE', `/admin/v1/users/${user.id}`)).status).toBe(404);
      expect((await admin(b, 'DELETE', '/admin/v1/users/abc')).status).toBe(404);
    });
  });
});
