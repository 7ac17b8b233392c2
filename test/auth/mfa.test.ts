// TOTP second factor (CONTRACT §14) through the HTTP API, on two instances sharing one database:
// codes are computed from the secret the enrolment answered, at the gateways' clock.
import { authenticator } from '../helpers/totp.js';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  bearer, claims, closeSql, describeWithServices, everywhereWithin, makeUser, sql, startTwoGateways, testClock, testConfig, type TestGateway, type TestUser,
} from '../helpers/gateway.js';
import { holdUserRow } from '../helpers/rowLock.js';
import { startReceiver, verifiedEvent, type Receiver } from '../helpers/webhookReceiver.js';

const ENROLL = '/api/v1/auth/mfa/totp/enroll';
const CONFIRM = '/api/v1/auth/mfa/totp/confirm';
const TOTP = '/api/v1/auth/mfa/totp';
const VERIFY = '/api/v1/auth/mfa/verify';
const LOGIN = '/api/v1/auth/login';
const CODE_INVALID = { error: 'Code invalide' };
const RECENT = { error: 'Authentification récente requise' };
const STEP = 30_000;

describeWithServices('TOTP second factor', () => {
  let a: TestGateway;
  let b: TestGateway;
  let receiver: Receiver;
  const clock = testClock();

  beforeAll(async () => {
    receiver = await startReceiver();
    [a, b] = await startTwoGateways(testConfig({ auth: { mfa: { issuer: 'Example' } } }), { clock });
  });
  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await receiver?.close();
    await closeSql();
  });

  /** The code of the step `steps` away from the gateways' now. */
  const code = (secret: string, steps = 0) => authenticator.clone({ epoch: clock().getTime() + steps * STEP }).generate(secret);
  const remove = (gw: TestGateway, json: unknown, headers: Record<string, string>) => gw.request('DELETE', TOTP, { json, headers });
  const login = (gw: TestGateway, user: TestUser) => gw.post(LOGIN, { email: user.email, password: user.password });

  /** A user with confirmed TOTP; the clock then moves a step on, so the confirming code is past. */
  async function enrolled(options: { plan?: string; before?: (user: TestUser) => Promise<unknown> } = {}) {
    const user = await makeUser(a, options);
    await options.before?.(user);
    const enroll = await a.post(ENROLL, {}, { headers: bearer(user.access) });
    expect(enroll.status).toBe(200);
    const secret = enroll.json.secret as string;
    const confirm = await b.post(CONFIRM, { code: code(secret) }, { headers: bearer(user.access) });
    expect(confirm.status).toBe(200);
    clock.advance(STEP);
    // The confirming session goes on with the pair answered beside the codes (CONTRACT §33).
    return { user, secret, recovery: confirm.json.recovery_codes as string[], access: confirm.json.access_token as string };
  }

  it('enrols: a secret and an otpauth URL, active only once a right code confirms it; ten recovery codes stored hashed', async () => {
    const user = await makeUser(a);
    const first = await a.post(ENROLL, {}, { headers: bearer(user.access) });
    const enroll = await a.post(ENROLL, {}, { headers: bearer(user.access) });
    expect(enroll.status).toBe(200);
    expect(enroll.json.secret).toMatch(/^[A-Z2-7]+$/);
    expect(enroll.json.otpauth_url).toBe(`otpauth://totp/Example:${encodeURIComponent(user.email)}?secret=${enroll.json.secret}&period=30&digits=6&algorithm=SHA1&issuer=Example`);
    // Not active yet: the login still answers a pair.
    expect((await login(b, user)).status).toBe(200);
    // Enrolling again replaced the first secret.
    expect((await a.post(CONFIRM, { code: code(first.json.secret) }, { headers: bearer(user.access) })).json).toEqual(CODE_INVALID);
    const wrong = await a.post(CONFIRM, { code: '000000' === code(enroll.json.secret) ? '111111' : '000000' }, { headers: bearer(user.access) });
    expect([wrong.status, wrong.json]).toEqual([400, CODE_INVALID]);
    const confirm = await a.post(CONFIRM, { code: code(enroll.json.secret) }, { headers: bearer(user.access) });
    expect(confirm.status).toBe(200);
    const codes = confirm.json.recovery_codes as string[];
    expect(codes).toHaveLength(10);
    expect(new Set(codes).size).toBe(10);
    // 80 random bits each (20 hex digits), none stored as shown; nor is the secret.
    for (const c of codes) expect(c.replaceAll('-', '')).toMatch(/^[0-9a-f]{20}$/);
    const stored = await sql<{ code_hash: string }>('SELECT code_hash FROM mfa_recovery_codes WHERE user_id = $1', [user.id]);
    expect(stored).toHaveLength(10);
    expect(stored.map((r) => r.code_hash)).not.toEqual(expect.arrayContaining([codes[0]]));
    const [totp] = await sql<{ secret_encrypted: string }>('SELECT secret_encrypted FROM mfa_totp WHERE user_id = $1', [user.id]);
    expect(totp!.secret_encrypted).not.toContain(enroll.json.secret);
    clock.advance(STEP);
  });

  it('confirming TOTP ends every other session of the user on every instance, as a password change does; this one goes on (CONTRACT §26)', async () => {
    const user = await makeUser(a);
    // Session B: whoever else is signed in (a stolen password's session, say) must sign in again, now with the code.
    const elsewhere = (await login(b, user)).json;
    const secret = (await a.post(ENROLL, {}, { headers: bearer(user.access) })).json.secret as string;
    const confirm = await b.post(CONFIRM, { code: code(secret) }, { headers: bearer(user.access) });
    expect(confirm.status).toBe(200);
    for (const gw of [a, b]) {
      const res = await gw.post('/api/v1/auth/refresh', { refresh_token: elsewhere.refresh_token });
      expect([res.status, res.json]).toEqual([401, { error: 'Refresh token invalide, révoqué ou expiré' }]);
    }
    // This session's token of before is refused, on every instance within a second (`a` learns of b's
    // confirmation by the feed); it goes on with the new pair, or its refresh token (CONTRACT §33).
    await everywhereWithin([a, b], async (gw) => (await gw.get('/api/v1/user/sessions', { headers: bearer(user.access) })).status === 401, 1000);
    const sessions = await a.get('/api/v1/user/sessions', { headers: bearer(confirm.json.access_token) });
    expect(sessions.json.sessions).toEqual([expect.objectContaining({ current: true })]);
    expect((await b.post('/api/v1/auth/refresh', { refresh_token: user.refresh })).status).toBe(200);
    const [audit] = await sql<{ data: unknown }>('SELECT data FROM audit_events WHERE user_id = $1 AND type = $2', [user.id, 'mfa.enrolled']);
    expect(audit!.data).toEqual({ method: 'totp', revoked_sessions: 1 });
    // B signs in again, and now owes the code.
    expect((await login(b, user)).status).toBe(403);
    clock.advance(STEP);
  });

  it('a password login racing the confirmation gets no session of the password alone: it waits, then owes the code', async () => {
    const user = await makeUser(a);
    const secret = (await a.post(ENROLL, {}, { headers: bearer(user.access) })).json.secret as string;
    // The user's row held here (helpers/rowLock.ts): the confirmation queues on it first, then the
    // login, whose password is checked and which has read TOTP as not confirmed yet. Then it goes free.
    const held = await holdUserRow(user.id);
    const confirm = a.post(CONFIRM, { code: code(secret) }, { headers: bearer(user.access) });
    await held.waiters(1);
    const racing = login(b, user);
    await held.waiters(2);
    await held.release();
    expect((await confirm).status).toBe(200);
    const res = await racing;
    expect([res.status, res.json]).toEqual([403, { error: 'Code à deux facteurs requis', mfa_token: expect.any(String), methods: ['totp', 'recovery_code'] }]);
    // The only session with a live refresh token is the confirming one (its token of before, and the pair the confirmation answered).
    expect(await sql('SELECT DISTINCT session_id FROM refresh_tokens WHERE user_id = $1 AND revoked = 0', [user.id])).toEqual([{ session_id: String(claims(user.access).sid) }]);
    clock.advance(STEP);
  });

  it('login answers 403 with an mfa_token; a TOTP code turns it into a pair at aal2, which refresh keeps', async () => {
    const { user, secret } = await enrolled();
    const before = Math.floor(clock().getTime() / 1000);
    const res = await login(a, user);
    expect(res.status).toBe(403);
    expect(res.json).toEqual({ error: 'Code à deux facteurs requis', mfa_token: expect.any(String), methods: ['totp', 'recovery_code'] });
    const verified = await b.post(VERIFY, { mfa_token: res.json.mfa_token, code: code(secret) });
    expect(verified.status).toBe(200);
    const access = claims(verified.json.access_token);
    expect([access.acr, access.amr]).toEqual(['aal2', ['pwd', 'otp', 'mfa']]);
    // The sign-in's time, in seconds (the test clock runs on: a second may turn meanwhile).
    expect(access.auth_time).toBeGreaterThanOrEqual(before);
    expect(access.auth_time).toBeLessThanOrEqual(Math.floor(clock().getTime() / 1000));
    // Single use: the same mfa_token again, even with a fresh code, is dead.
    clock.advance(STEP);
    expect((await a.post(VERIFY, { mfa_token: res.json.mfa_token, code: code(secret) })).json).toEqual(CODE_INVALID);
    const refreshed = await a.post('/api/v1/auth/refresh', { refresh_token: verified.json.refresh_token });
    const after = claims(refreshed.json.access_token);
    expect([after.acr, after.amr, after.auth_time]).toEqual([access.acr, access.amr, access.auth_time]);
    // A password-only sign-in is aal1.
    const plain = claims((await makeUser(a)).access);
    expect([plain.acr, plain.amr]).toEqual(['aal1', ['pwd']]);
  });

  it('a code is accepted once within its window, and one step either side only', async () => {
    const { user, secret } = await enrolled();
    const t1 = (await login(a, user)).json.mfa_token;
    const t2 = (await login(a, user)).json.mfa_token;
    const t3 = (await login(a, user)).json.mfa_token;
    // Three steps on is outside the window even if the gateways' step has just moved on.
    expect((await a.post(VERIFY, { mfa_token: t1, code: code(secret, 3) })).status).toBe(401);
    const next = code(secret, 1);
    expect((await a.post(VERIFY, { mfa_token: t1, code: next })).status).toBe(200);
    expect((await b.post(VERIFY, { mfa_token: t2, code: next })).json).toEqual(CODE_INVALID);
    clock.advance(STEP);
    expect((await b.post(VERIFY, { mfa_token: t3, code: code(secret, 1) })).status).toBe(200);
  });

  it('the same TOTP code sent twice at once, to two instances, is accepted once', async () => {
    const { user, secret } = await enrolled();
    const [t1, t2] = await Promise.all([login(a, user), login(b, user)]);
    const now = code(secret);
    const results = await Promise.all([a.post(VERIFY, { mfa_token: t1.json.mfa_token, code: now }), b.post(VERIFY, { mfa_token: t2.json.mfa_token, code: now })]);
    expect(results.map((r) => r.status).sort()).toEqual([200, 401]);
    clock.advance(STEP);
  });

  it('a recovery code signs in once (amr pwd+mfa), even sent twice at once', async () => {
    const { user, recovery } = await enrolled();
    const [t1, t2] = await Promise.all([login(a, user), login(b, user)]);
    const results = await Promise.all([
      a.post(VERIFY, { mfa_token: t1.json.mfa_token, code: recovery[0] }),
      b.post(VERIFY, { mfa_token: t2.json.mfa_token, code: recovery[0]!.toUpperCase() }),
    ]);
    expect(results.map((r) => r.status).sort()).toEqual([200, 401]);
    const ok = results.find((r) => r.status === 200)!;
    expect([claims(ok.json.access_token).acr, claims(ok.json.access_token).amr]).toEqual(['aal2', ['pwd', 'mfa']]);
    const t3 = (await login(a, user)).json.mfa_token;
    expect((await a.post(VERIFY, { mfa_token: t3, code: recovery[0] })).status).toBe(401);
    expect((await a.post(VERIFY, { mfa_token: t3, code: recovery[1]!.replaceAll('-', '') })).status).toBe(200);
  });

  it('five wrong codes kill the mfa_token; an unknown one is refused alike', async () => {
    const { user, secret } = await enrolled();
    const token = (await login(a, user)).json.mfa_token;
    const right = code(secret);
    const wrong = right === '123456' ? '654321' : '123456';
    for (let i = 0; i < 5; i++) {
      const res = await (i % 2 ? a : b).post(VERIFY, { mfa_token: token, code: wrong });
      expect([res.status, res.json]).toEqual([401, CODE_INVALID]);
    }
    expect((await a.post(VERIFY, { mfa_token: token, code: right })).json).toEqual(CODE_INVALID);
    expect((await a.post(VERIFY, { mfa_token: 'nope', code: right })).status).toBe(401);
    // It expires after 5 minutes.
    const late = (await login(a, user)).json.mfa_token;
    clock.advance(5 * 60_000 + 1000);
    expect((await a.post(VERIFY, { mfa_token: late, code: code(secret) })).status).toBe(401);
  });

  it('guard factor: a recent bearer sign-in, at aal2 once a factor exists; never an API key', async () => {
    const { user, secret, access } = await enrolled();
    // access: the confirming session's, a password sign-in of a user who now has TOTP.
    expect((await remove(a, { password: user.password }, bearer(access))).json).toEqual(RECENT);
    const other = await makeUser(a, { plan: 'pro' });
    const key = (await a.post('/api/v1/user/api-token', {}, { headers: bearer(other.access) })).json.api_token as string;
    const byKey = await a.post(ENROLL, {}, { headers: { 'x-api-key': key } });
    expect([byKey.status, byKey.json]).toEqual([403, RECENT]);
    const token = (await login(a, user)).json.mfa_token;
    const pair = (await a.post(VERIFY, { mfa_token: token, code: code(secret) })).json;
    clock.advance(5 * 60_000 + 1000);
    expect((await remove(a, { password: user.password }, bearer(pair.access_token))).json).toEqual(RECENT);
  });

  it('removal: needs the password, ends every other session, and login answers a pair again; events for both', async () => {
    let hookSecret = '';
    const path = (user: TestUser) => `/hook/${user.id}`;
    const { user, secret } = await enrolled({
      plan: 'pro',
      before: async (u) => {
        const hook = await a.post('/api/v1/user/webhook', { url: receiver.url.replace('/hook', path(u)) }, { headers: bearer(u.access) });
        expect(hook.status).toBe(201);
        hookSecret = hook.json.secret;
      },
    });
    const session = async () => (await a.post(VERIFY, { mfa_token: (await login(a, user)).json.mfa_token, code: code(secret) })).json;
    const current = await session();
    clock.advance(STEP);
    const elsewhere = await session();
    expect((await remove(a, { password: 'wrong-password' }, bearer(current.access_token))).status).toBe(401);
    const removed = await remove(b, { password: user.password }, bearer(current.access_token));
    expect(removed.status).toBe(200);
    expect((await a.post('/api/v1/auth/refresh', { refresh_token: elsewhere.refresh_token })).status).toBe(401);
    expect((await a.post('/api/v1/auth/refresh', { refresh_token: current.refresh_token })).status).toBe(200);
    expect((await login(a, user)).status).toBe(200);
    expect(await sql('SELECT 1 FROM mfa_recovery_codes WHERE user_id = $1', [user.id])).toEqual([]);
    const event = (type: string) => verifiedEvent(receiver, path(user), type, hookSecret);
    expect(await event('auth.mfa_enrolled')).toEqual({ type: 'auth.mfa_enrolled', timestamp: expect.any(String), data: { method: 'totp' } });
    // The user's other sessions: the one elsewhere, and the password sign-in of makeUser.
    expect(await event('auth.mfa_removed')).toEqual({ type: 'auth.mfa_removed', timestamp: expect.any(String), data: { method: 'totp', revoked_sessions: 2 } });
  });
});
