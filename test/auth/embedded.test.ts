// The same endpoints on the embedded database (PGlite, no DATABASE_URL, no Redis), as `npm start`
// runs out of the box. One embedded gateway for the whole file: PGlite takes seconds to start.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { sha256Hex } from '../../src/credentials/digest.js';
import { describeWithServices, newEmail, newPassword, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';

const INACTIVE = { error: 'Refresh token invalide, révoqué ou expiré' };

describeWithServices('auth endpoints on embedded PGlite', () => {
  let dir: string;
  let gw: TestGateway;
  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'gw-pglite-'));
    gw = await startTestGateway(testConfig({ storage: { postgres: '', redis: '', embeddedDir: dir } }));
  });
  afterAll(async () => {
    await gw?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const q = <T = Record<string, unknown>>(text: string, params: unknown[] = []) => gw.services.db.query<T>(text, params);

  async function loggedIn() {
    const email = newEmail();
    const password = newPassword();
    const reg = await gw.post('/api/v1/auth/register', { email, password });
    expect(reg.status).toBe(201);
    const login = await gw.post('/api/v1/auth/login', { email, password });
    expect(login.status).toBe(200);
    return { id: reg.json.user_id as number, email, password, access: login.json.access_token as string, refresh: login.json.refresh_token as string };
  }

  it('runs on the embedded database', () => {
    expect(gw.services.db.kind).toBe('embedded');
    expect(gw.services.redis).toBeNull();
  });

  it('register: 201, user and subscription rows; then 409 for the same email (even inactive)', async () => {
    const email = newEmail();
    const res = await gw.post('/api/v1/auth/register', { email: ` ${email.toUpperCase()} `, password: newPassword() });
    expect(res.status).toBe(201);
    expect(res.json).toEqual({ message: expect.any(String), user_id: expect.any(Number) });
    expect(await q('SELECT email, plan, is_active FROM users WHERE id = $1', [res.json.user_id])).toEqual([{ email, plan: 'free', is_active: 1 }]);
    expect(await q('SELECT plan FROM subscriptions WHERE user_id = $1', [res.json.user_id])).toEqual([{ plan: 'free' }]);

    const dup = await gw.post('/api/v1/auth/register', { email, password: newPassword() });
    expect(dup.status).toBe(409);
    expect(dup.json).toEqual({ error: 'Email déjà enregistré' });
    await q('UPDATE users SET is_active = 0 WHERE id = $1', [res.json.user_id]);
    expect((await gw.post('/api/v1/auth/register', { email, password: newPassword() })).status).toBe(409);

    const bad = await gw.post('/api/v1/auth/register', { email: 'nope', password: newPassword() });
    expect(bad.status).toBe(400);
    expect(bad.json).toEqual({ error: 'Email invalide' });
  });

  it('parallel registrations of one email: one 201, the rest 409, one row', async () => {
    const email = newEmail();
    const results = await Promise.all(Array.from({ length: 5 }, () => gw.post('/api/v1/auth/register', { email, password: newPassword() })));
    expect(results.map((r) => r.status).sort()).toEqual([201, 409, 409, 409, 409]);
    expect(await q('SELECT count(*)::int AS n FROM users WHERE email = $1', [email])).toEqual([{ n: 1 }]);
  });

  it('login: the token pair, the stored hash; the same 401 for a wrong password', async () => {
    const user = await loggedIn();
    expect(decodeJwt(user.access)).toMatchObject({ sub: String(user.id), plan: 'free', email: user.email });
    const rows = await q<{ token_hash: string; revoked: number }>('SELECT token_hash, revoked FROM refresh_tokens WHERE user_id = $1', [user.id]);
    expect(rows).toEqual([{ token_hash: sha256Hex(user.refresh), revoked: 0 }]);
    const wrong = await gw.post('/api/v1/auth/login', { email: user.email, password: `${user.password}!` });
    expect(wrong.status).toBe(401);
    expect(wrong.json).toEqual({ error: 'Identifiants invalides' });
  });

  it('refresh: rotates once; a second use → 401; the new plan is in the new token', async () => {
    const user = await loggedIn();
    await q(`UPDATE users SET plan = 'premium' WHERE id = $1`, [user.id]);
    const res = await gw.post('/api/v1/auth/refresh', { refresh_token: user.refresh });
    expect(res.status).toBe(200);
    expect(res.json.plan).toBe('premium');
    expect(decodeJwt(res.json.access_token).plan).toBe('premium');
    const rows = await q<{ token_hash: string; revoked: number }>('SELECT token_hash, revoked FROM refresh_tokens WHERE user_id = $1 ORDER BY id', [user.id]);
    expect(rows).toEqual([{ token_hash: sha256Hex(user.refresh), revoked: 1 }, { token_hash: sha256Hex(res.json.refresh_token), revoked: 0 }]);
    const again = await gw.post('/api/v1/auth/refresh', { refresh_token: user.refresh });
    expect(again.status).toBe(401);
    expect(again.json).toEqual(INACTIVE);
  });

  it('refresh: parallel uses of one token → exactly one 200', async () => {
    const user = await loggedIn();
    const results = await Promise.all(Array.from({ length: 6 }, () => gw.post('/api/v1/auth/refresh', { refresh_token: user.refresh })));
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    for (const r of results.filter((x) => x.status !== 200)) expect(r.json).toEqual(INACTIVE);
    expect(await q('SELECT count(*)::int AS n FROM refresh_tokens WHERE user_id = $1 AND revoked = 0', [user.id])).toEqual([{ n: 1 }]);
  });

  it('refresh: a deactivated user → 401 "Utilisateur introuvable" and the token stays active (the rollback holds)', async () => {
    const user = await loggedIn();
    await q('UPDATE users SET is_active = 0 WHERE id = $1', [user.id]);
    const res = await gw.post('/api/v1/auth/refresh', { refresh_token: user.refresh });
    expect(res.status).toBe(401);
    expect(res.json).toEqual({ error: 'Utilisateur introuvable' });
    expect(await q('SELECT revoked FROM refresh_tokens WHERE user_id = $1', [user.id])).toEqual([{ revoked: 0 }]);
  });

  it('logout: 200, the row is revoked, the token no longer refreshes; an unknown token → 200', async () => {
    const user = await loggedIn();
    const res = await gw.post('/api/v1/auth/logout', { refresh_token: user.refresh });
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ message: expect.any(String) });
    expect(await q('SELECT revoked FROM refresh_tokens WHERE token_hash = $1', [sha256Hex(user.refresh)])).toEqual([{ revoked: 1 }]);
    expect((await gw.post('/api/v1/auth/refresh', { refresh_token: user.refresh })).json).toEqual(INACTIVE);
    const unknown = await gw.post('/api/v1/auth/logout', { refresh_token: 'unknown' });
    expect(unknown.status).toBe(200);
    expect(unknown.json).toEqual({ message: expect.any(String) });
  });

  it('the access token passes the guard (GET /api/v1/user/me)', async () => {
    const user = await loggedIn();
    const me = await gw.get('/api/v1/user/me', { headers: { authorization: `Bearer ${user.access}` } });
    expect(me.status).toBe(200);
    expect(me.json).toMatchObject({ user_id: user.id, email: user.email });
  });
});
