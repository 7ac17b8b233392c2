import { createHash } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import {
  bearer, closeSql, describeWithServices, eventually, makeUser, marker, sql, startTwoGateways, testConfig, type TestGateway,
} from '../helpers/gateway.js';

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');
const planBody = (current: string) => ({ error: 'Plan insuffisant', required: ['pro'], current_plan: current, upgrade_url: '/api/v1/subscription/upgrade' });

describeWithServices('personal API tokens', () => {
  let a: TestGateway;
  let b: TestGateway;
  let upstream: EchoUpstream;

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    [a, b] = await startTwoGateways(testConfig({
      upstreams: { app: { url: upstream.url } },
      routes: [{ path: '/app', upstream: 'app', auth: 'required' }],
    }));
  });
  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await upstream?.close();
    await closeSql();
  });

  const viaKey = (gw: TestGateway, key: string) => gw.get('/api/v1/user/me', { headers: { 'x-api-key': key } });

  it('creates a key for a pro user: shown once, only its SHA-256 stored, usable at once', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    const res = await a.post('/api/v1/user/api-token', {}, { headers: bearer(user.access) });
    expect(res.status).toBe(201);
    expect(res.json).toEqual({ api_token: expect.stringMatching(/^gw_[0-9A-Za-z]{38}$/), created_at: expect.any(String) });
    expect(new Date(res.json.created_at).toISOString()).toBe(res.json.created_at);
    const key = res.json.api_token as string;
    const rows = await sql('SELECT token_hash, revoked FROM api_tokens WHERE user_id = $1', [user.id]);
    expect(rows).toEqual([{ token_hash: sha256(key), revoked: 0 }]);
    expect(await sql('SELECT 1 FROM api_tokens WHERE token_hash = $1', [key])).toEqual([]);

    // Works on both instances at once, through the gateway's own endpoints and the proxy.
    for (const gw of [a, b]) {
      const me = await viaKey(gw, key);
      expect(me.status).toBe(200);
      expect(me.json).toMatchObject({ user_id: user.id, plan: 'pro' });
    }
    const m = marker();
    const proxied = await b.get(`/app/${m}`, { headers: { 'x-api-key': key } });
    expect(upstream.count(m)).toBe(1);
    expect(proxied.status).toBe(200);
    expect(proxied.json.headers).toMatchObject({ 'x-user-id': String(user.id), 'x-auth-method': 'api-key' });
    expect(proxied.json.headers['x-api-key']).toBeUndefined();
    // The raw key never reaches a log line.
    expect([...a.logs, ...b.logs].join('')).not.toContain(key);
  });

  it('refuses free and premium users with the plan body', async () => {
    for (const plan of ['free', 'premium'] as const) {
      const user = await makeUser(a, { plan });
      for (const method of ['POST', 'DELETE']) {
        const res = await a.request(method, '/api/v1/user/api-token', { headers: bearer(user.access) });
        expect(res.status).toBe(403);
        expect(res.json).toEqual(planBody(plan));
      }
      // Checked per user: other test files insert keys for users of their own.
      expect(await sql('SELECT count(*)::int AS n FROM api_tokens WHERE user_id = $1', [user.id])).toEqual([{ n: 0 }]);
    }
  });

  it('needs authentication', async () => {
    const res = await a.post('/api/v1/user/api-token', {});
    expect(res.status).toBe(401);
    expect(res.json).toEqual({ error: 'Token invalide ou expiré' });
  });

  it('rotation: the new key replaces the old one at once here and within a second on the other instance', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    const first = (await a.post('/api/v1/user/api-token', {}, { headers: bearer(user.access) })).json.api_token as string;
    // Both instances now hold the first key in their caches.
    expect((await viaKey(a, first)).status).toBe(200);
    expect((await viaKey(b, first)).status).toBe(200);

    const second = (await a.post('/api/v1/user/api-token', {}, { headers: bearer(user.access) })).json.api_token as string;
    expect(second).not.toBe(first);
    const old = await viaKey(a, first);
    expect(old.status).toBe(401);
    expect(old.json).toEqual({ error: 'Token invalide ou expiré' });
    expect((await viaKey(a, second)).status).toBe(200);
    expect((await viaKey(b, second)).status).toBe(200);
    await eventually(async () => (await viaKey(b, first)).status === 401, 1000);
    expect(await sql('SELECT token_hash, revoked FROM api_tokens WHERE user_id = $1 ORDER BY id', [user.id]))
      .toEqual([{ token_hash: sha256(first), revoked: 1 }, { token_hash: sha256(second), revoked: 0 }]);
  });

  it('a key can rotate itself (authenticated by X-API-Key)', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    const first = (await a.post('/api/v1/user/api-token', {}, { headers: bearer(user.access) })).json.api_token as string;
    const res = await a.post('/api/v1/user/api-token', {}, { headers: { 'x-api-key': first } });
    expect(res.status).toBe(201);
    expect((await viaKey(a, first)).status).toBe(401);
    expect((await viaKey(a, res.json.api_token)).status).toBe(200);
  });

  it('leaves one active key when creations race', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => (i % 2 ? a : b).post('/api/v1/user/api-token', {}, { headers: bearer(user.access) })));
    expect(results.map((r) => r.status)).toEqual(Array(8).fill(201));
    expect(await sql('SELECT count(*)::int AS n FROM api_tokens WHERE user_id = $1 AND revoked = 0', [user.id])).toEqual([{ n: 1 }]);
  });

  it('DELETE revokes every active key, at once here and within a second elsewhere; it is idempotent', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    const key = (await a.post('/api/v1/user/api-token', {}, { headers: bearer(user.access) })).json.api_token as string;
    // A second active key made by hand (as an older gateway might have left).
    const extra = `gw_${'x'.repeat(43)}${user.id}`;
    await sql('INSERT INTO api_tokens (user_id, token_hash) VALUES ($1, $2)', [user.id, sha256(extra)]);
    expect((await viaKey(b, key)).status).toBe(200);
    expect((await viaKey(b, extra)).status).toBe(200);

    const res = await a.request('DELETE', '/api/v1/user/api-token', { headers: bearer(user.access) });
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ message: expect.any(String) });
    expect((await viaKey(a, key)).status).toBe(401);
    expect((await viaKey(a, extra)).status).toBe(401);
    await eventually(async () => (await viaKey(b, key)).status === 401 && (await viaKey(b, extra)).status === 401, 1000);
    expect(await sql('SELECT count(*)::int AS n FROM api_tokens WHERE user_id = $1 AND revoked = 0', [user.id])).toEqual([{ n: 0 }]);

    const again = await b.request('DELETE', '/api/v1/user/api-token', { headers: bearer(user.access) });
    expect(again.status).toBe(200);
    expect(again.json).toEqual(res.json);
  });

  it('a key stops working when its user is deactivated, on every instance', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    const key = (await a.post('/api/v1/user/api-token', {}, { headers: bearer(user.access) })).json.api_token as string;
    expect((await viaKey(b, key)).status).toBe(200);
    await sql('UPDATE users SET is_active = 0 WHERE id = $1', [user.id]);
    await eventually(async () => (await viaKey(a, key)).status === 401 && (await viaKey(b, key)).status === 401, 1000);
  });

  it('records last_used_at off the response path', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    const key = (await a.post('/api/v1/user/api-token', {}, { headers: bearer(user.access) })).json.api_token as string;
    expect(await sql('SELECT last_used_at FROM api_tokens WHERE token_hash = $1', [sha256(key)])).toEqual([{ last_used_at: null }]);
    expect((await viaKey(b, key)).status).toBe(200);
    await eventually(async () => (await sql<{ last_used_at: Date | null }>('SELECT last_used_at FROM api_tokens WHERE token_hash = $1', [sha256(key)]))[0]!.last_used_at !== null, 3000);
  });
});
