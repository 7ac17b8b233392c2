import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../src/credentials/digest.js';
import { bearer, closeSql, describeWithServices, makeUser, sql, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';

const LOGOUT = '/api/v1/auth/logout';
const OK = { message: expect.any(String) };

describeWithServices('POST /api/v1/auth/logout', () => {
  let gw: TestGateway;
  beforeAll(async () => { gw = await startTestGateway(testConfig()); });
  afterAll(async () => { await gw?.close(); await closeSql(); });

  const revokedOf = async (token: string) => (await sql<{ revoked: number }>('SELECT revoked FROM refresh_tokens WHERE token_hash = $1', [sha256Hex(token)]))[0]?.revoked;

  it('revokes the token by hash (surrounding spaces stripped); the token can no longer refresh', async () => {
    const user = await makeUser(gw);
    const res = await gw.post(LOGOUT, { refresh_token: ` ${user.refresh} ` });
    expect(res.status).toBe(200);
    expect(res.json).toEqual(OK);
    expect(Object.keys(res.json)).toEqual(['message']);
    expect(typeof res.json.message).toBe('string');
    expect(await revokedOf(user.refresh)).toBe(1);
    const refresh = await gw.post('/api/v1/auth/refresh', { refresh_token: user.refresh });
    expect(refresh.status).toBe(401);
    expect(refresh.json).toEqual({ error: 'Refresh token invalide, révoqué ou expiré' });
  });

  it('revokes only that session: the user\'s other refresh token still works', async () => {
    const user = await makeUser(gw);
    const second = await gw.post('/api/v1/auth/login', { email: user.email, password: user.password });
    expect((await gw.post(LOGOUT, { refresh_token: user.refresh })).status).toBe(200);
    expect(await revokedOf(second.json.refresh_token)).toBe(0);
    expect((await gw.post('/api/v1/auth/refresh', { refresh_token: second.json.refresh_token })).status).toBe(200);
  });

  it('does not revoke the access token', async () => {
    const user = await makeUser(gw);
    expect((await gw.post(LOGOUT, { refresh_token: user.refresh })).status).toBe(200);
    expect((await gw.get('/api/v1/user/me', { headers: bearer(user.access) })).status).toBe(200);
  });

  it('is idempotent: an already revoked or rotated-away token → 200, still revoked', async () => {
    const user = await makeUser(gw);
    const rotated = await gw.post('/api/v1/auth/refresh', { refresh_token: user.refresh });
    expect(rotated.status).toBe(200);
    for (let i = 0; i < 2; i++) {
      const res = await gw.post(LOGOUT, { refresh_token: user.refresh });
      expect(res.status).toBe(200);
      expect(res.json).toEqual(OK);
    }
    expect(await revokedOf(user.refresh)).toBe(1);
    // Revoking the rotated-away token does not touch its successor.
    expect(await revokedOf(rotated.json.refresh_token)).toBe(0);
  });

  it('an expired token is revoked too (by hash, whatever its state)', async () => {
    const user = await makeUser(gw);
    await sql(`UPDATE refresh_tokens SET expires_at = now() - interval '1 day' WHERE token_hash = $1`, [sha256Hex(user.refresh)]);
    expect((await gw.post(LOGOUT, { refresh_token: user.refresh })).status).toBe(200);
    expect(await revokedOf(user.refresh)).toBe(1);
  });

  it('an unknown token → 200 and no row changes', async () => {
    const user = await makeUser(gw);
    const rowsOf = () => sql('SELECT id, revoked, revoked_reason FROM refresh_tokens WHERE user_id = $1 ORDER BY id', [user.id]);
    const before = await rowsOf();
    const unknown = ['not-a-token', user.access, `${user.refresh}x`];
    for (const token of unknown) {
      const res = await gw.post(LOGOUT, { refresh_token: token });
      expect(res.status).toBe(200);
      expect(res.json).toEqual(OK);
    }
    expect(await rowsOf()).toEqual(before);
    expect(await sql('SELECT id FROM refresh_tokens WHERE token_hash = ANY($1)', [unknown.map(sha256Hex)])).toEqual([]);
  });

  describe('missing token → 200', () => {
    const cases: Array<[string, unknown]> = [
      ['no body', undefined],
      ['empty object', {}],
      ['empty string', { refresh_token: '' }],
      ['whitespace', { refresh_token: '   ' }],
      ['not a string', { refresh_token: 42 }],
    ];
    for (const [name, body] of cases) {
      it(name, async () => {
        const res = body === undefined ? await gw.request('POST', LOGOUT) : await gw.post(LOGOUT, body);
        expect(res.status).toBe(200);
        expect(res.json).toEqual(OK);
      });
    }
  });
});
