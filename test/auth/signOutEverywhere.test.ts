// DELETE /api/v1/user/sessions (CONTRACT §30, §33's "sign out everywhere"): every session of the
// user ends, the caller's included; their refresh tokens are refused at once and every access
// token minted before is refused within a second on every instance; a new sign-in works.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bearer, closeSql, describeWithServices, everywhereWithin, makeUser, sql, startTwoGateways, testConfig, type TestGateway } from '../helpers/gateway.js';

const SESSIONS = '/api/v1/user/sessions';
const TOKEN_INVALID = '{"error":"Token invalide ou expiré","code":"token_invalid"}';

describeWithServices('sign out everywhere (DELETE /api/v1/user/sessions)', () => {
  let a: TestGateway;
  let b: TestGateway;

  beforeAll(async () => {
    [a, b] = await startTwoGateways(testConfig({ errors: { codes: true } }));
  });
  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await closeSql();
  });

  it('ends every session, this one included, on every instance within a second', async () => {
    const user = await makeUser(a);
    const second = (await b.post('/api/v1/auth/login', { email: user.email, password: user.password })).json as { access_token: string; refresh_token: string };
    const accesses = [user.access, second.access_token];
    // Each instance has both tokens and the user in memory before the change.
    for (const gw of [a, b]) for (const access of accesses) expect((await gw.get('/api/v1/user/me', { headers: bearer(access) })).status).toBe(200);
    const listed = (await a.get(SESSIONS, { headers: bearer(user.access) })).json.sessions as unknown[];

    const res = await a.request('DELETE', SESSIONS, { headers: bearer(user.access) });
    expect([res.status, res.text]).toEqual([200, `{"message":"Sessions révoquées","revoked":${listed.length}}`]);

    for (const refresh of [user.refresh, second.refresh_token]) {
      const refused = await b.post('/api/v1/auth/refresh', { refresh_token: refresh });
      expect(refused.status).toBe(401);
    }
    await everywhereWithin([a, b], async (gw) => {
      const answers = await Promise.all(accesses.map((access) => gw.get('/api/v1/user/me', { headers: bearer(access) })));
      return answers.every((r) => r.status === 401 && r.text === TOKEN_INVALID);
    }, 1000);
    expect(await sql("SELECT data FROM audit_events WHERE user_id = $1 AND type = 'session.revoked'", [user.id])).toEqual([{ data: { all: true, sessions: listed.length } }]);

    // Signing in again starts the one session there is.
    const again = await b.post('/api/v1/auth/login', { email: user.email, password: user.password });
    const now = await a.get(SESSIONS, { headers: bearer(again.json.access_token as string) });
    expect((now.json.sessions as Array<{ current: boolean }>).map((s) => s.current)).toEqual([true]);
  });

  it('needs a sign-in', async () => {
    const res = await a.request('DELETE', SESSIONS, {});
    expect(res.status).toBe(401);
  });
});
