// Sessions (CONTRACT §13): one per refresh-token family, listed and ended one by one, on two instances.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { sha256Hex } from '../../src/credentials/digest.js';
import {
  bearer, closeSql, describeWithServices, makeUser, newPassword, sql, startTwoGateways, testClock, testConfig, type TestGateway,
} from '../helpers/gateway.js';
import { holdUserRow } from '../helpers/rowLock.js';

const SESSIONS = '/api/v1/user/sessions';
const NOT_FOUND = { error: 'Session introuvable' };

describeWithServices('GET/DELETE /api/v1/user/sessions', () => {
  let a: TestGateway;
  let b: TestGateway;
  const clock = testClock();

  beforeAll(async () => {
    [a, b] = await startTwoGateways(testConfig(), { clock });
  });
  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await closeSql();
  });

  const login = (gw: TestGateway, email: string, password: string, userAgent: string) =>
    gw.post('/api/v1/auth/login', { email, password }, { headers: { 'user-agent': userAgent } });
  const refresh = (gw: TestGateway, token: string, userAgent = 'refresher/1') =>
    gw.post('/api/v1/auth/refresh', { refresh_token: token }, { headers: { 'user-agent': userAgent } });
  const list = async (gw: TestGateway, access: string) => {
    const res = await gw.get(SESSIONS, { headers: bearer(access) });
    expect(res.status).toBe(200);
    return res.json.sessions as Array<{ id: number; created_at: string; last_used_at: string; user_agent: string | null; ip: string | null; current: boolean }>;
  };

  it('lists one session per login, with client, address, times, and the current one marked', async () => {
    const user = await makeUser(a);
    const phone = await login(a, user.email, user.password, 'Phone/1.0');
    const laptop = await login(b, user.email, user.password, 'Laptop/2.0');
    const seen = await list(b, laptop.json.access_token);
    expect(seen).toHaveLength(3); // makeUser's own login too
    const byAgent = Object.fromEntries(seen.map((s) => [s.user_agent, s]));
    expect(byAgent['Laptop/2.0']).toEqual({ id: expect.any(Number), created_at: expect.any(String), last_used_at: expect.any(String), user_agent: 'Laptop/2.0', ip: '127.0.0.1', current: true });
    expect(byAgent['Phone/1.0']!.current).toBe(false);
    expect(new Date(byAgent['Phone/1.0']!.created_at).toISOString()).toBe(byAgent['Phone/1.0']!.created_at);
    expect((await list(a, phone.json.access_token)).filter((s) => s.current).map((s) => s.user_agent)).toEqual(['Phone/1.0']);
    // Most recently used first.
    expect(seen[0]!.user_agent).toBe('Laptop/2.0');
  });

  it('a refresh continues its session: same id, last use and client updated, each token linked to it', async () => {
    const user = await makeUser(a);
    const first = await login(a, user.email, user.password, 'App/1');
    const [before] = (await list(a, first.json.access_token)).filter((s) => s.current);
    clock.advance(60_000);
    try {
      const rotated = await refresh(b, first.json.refresh_token, 'App/2');
      expect(rotated.status).toBe(200);
      const after = (await list(a, rotated.json.access_token)).filter((s) => s.current);
      expect(after).toEqual([{ ...before, user_agent: 'App/2', last_used_at: expect.any(String) }]);
      expect(Date.parse(after[0]!.last_used_at) - Date.parse(before!.last_used_at)).toBeGreaterThanOrEqual(60_000);
      const rows = await sql<{ session_id: string }>(
        'SELECT session_id FROM refresh_tokens WHERE token_hash = ANY($1)', [[sha256Hex(first.json.refresh_token), sha256Hex(rotated.json.refresh_token)]]);
      expect(rows.map((r) => Number(r.session_id))).toEqual([before!.id, before!.id]);
    } finally {
      clock.advance(-60_000);
    }
  });

  it('DELETE ends that session on every instance and leaves the others', async () => {
    const user = await makeUser(a);
    const stolen = await login(a, user.email, user.password, 'Unknown/9');
    const sessions = await list(b, user.access);
    const target = sessions.find((s) => s.user_agent === 'Unknown/9')!;
    const res = await b.request('DELETE', `${SESSIONS}/${target.id}`, { headers: bearer(user.access) });
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ message: 'Session révoquée' });
    for (const gw of [a, b]) expect((await refresh(gw, stolen.json.refresh_token)).json).toEqual({ error: 'Refresh token invalide, révoqué ou expiré' });
    expect((await list(a, user.access)).map((s) => s.id)).toEqual(sessions.filter((s) => s.id !== target.id).map((s) => s.id));
    expect((await refresh(a, user.refresh)).status).toBe(200);
    // Again: already ended, still the user's.
    expect((await a.request('DELETE', `${SESSIONS}/${target.id}`, { headers: bearer(user.access) })).status).toBe(200);
  });

  it('someone else\'s session, an unknown or a malformed id: 404 "Session introuvable", nothing ended', async () => {
    const owner = await makeUser(a);
    const other = await makeUser(a);
    const [theirs] = await list(a, owner.access);
    for (const id of [String(theirs!.id), '999999999999', '0', '-1', 'abc', '1.5', '99999999999999999999']) {
      const res = await b.request('DELETE', `${SESSIONS}/${id}`, { headers: bearer(other.access) });
      expect(res.status, id).toBe(404);
      expect(res.json).toEqual(NOT_FOUND);
    }
    expect((await refresh(a, owner.refresh)).status).toBe(200);
  });

  it('ending the current session ends its refresh token (its access token lives out its 15 minutes)', async () => {
    const user = await makeUser(a);
    const [current] = await list(a, user.access);
    expect((await a.request('DELETE', `${SESSIONS}/${current!.id}`, { headers: bearer(user.access) })).status).toBe(200);
    expect((await refresh(b, user.refresh)).status).toBe(401);
    expect(await list(b, user.access)).toEqual([]);
  });

  it('with an API key no session is current; without a credential, 401', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    const key = (await a.post('/api/v1/user/api-token', {}, { headers: bearer(user.access) })).json.api_token as string;
    const res = await b.get(SESSIONS, { headers: { 'x-api-key': key } });
    expect(res.status).toBe(200);
    expect(res.json.sessions.map((s: { current: boolean }) => s.current)).toEqual([false]);
    expect((await a.get(SESSIONS)).status).toBe(401);
    expect((await a.request('DELETE', `${SESSIONS}/1`)).status).toBe(401);
  });

  // Both orders forced (helpers/rowLock.ts): the end queued behind the rotation, and ahead of it.
  for (const refreshFirst of [true, false]) {
    it(`ending a session ${refreshFirst ? 'just after' : 'just before'} it is refreshed on the other instance leaves it ended`, async () => {
      const user = await makeUser(a);
      const target = await login(a, user.email, user.password, 'Target/1');
      const id = (await list(a, target.json.access_token)).find((s) => s.current)!.id;
      const held = await holdUserRow(user.id);
      const first = refreshFirst ? refresh(b, target.json.refresh_token) : a.request('DELETE', `${SESSIONS}/${id}`, { headers: bearer(user.access) });
      await held.waiters(1);
      const second = refreshFirst ? a.request('DELETE', `${SESSIONS}/${id}`, { headers: bearer(user.access) }) : refresh(b, target.json.refresh_token);
      await held.waiters(2);
      await held.release();
      const [rotated, ended] = refreshFirst ? [await first, await second] : [await second, await first];
      expect(ended.status).toBe(200);
      expect(rotated.status).toBe(refreshFirst ? 200 : 401);
      expect(await sql('SELECT 1 FROM refresh_tokens WHERE session_id = $1 AND revoked = 0', [id])).toEqual([]);
      if (refreshFirst) expect((await refresh(a, rotated.json.refresh_token)).status).toBe(401);
    });
  }

  it('a password change keeps the current session going (same id) and lists it alone', async () => {
    const user = await makeUser(a);
    await login(b, user.email, user.password, 'Other/1');
    const [mine] = (await list(a, user.access)).filter((s) => s.current);
    const changed = await a.post('/api/v1/auth/password/change', { current_password: user.password, new_password: newPassword() }, { headers: bearer(user.access) });
    expect(changed.status).toBe(200);
    expect((await list(b, changed.json.access_token)).map((s) => [s.id, s.current])).toEqual([[mine!.id, true]]);
  });
});
