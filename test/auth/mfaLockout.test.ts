// CONTRACT §14: 10 wrong second-factor codes for a user within 15 minutes lock code verification
// for that user for 15 minutes (429, Retry-After), across instances and whatever mfa_tokens the
// codes came with; the window starts again after 15 minutes; the lock ends on its own.
import { authenticator } from '../helpers/totp.js';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bearer, closeSql, describeWithServices, makeUser, sql, startTwoGateways, testClock, testConfig, type TestGateway, type TestUser } from '../helpers/gateway.js';

const LOGIN = '/api/v1/auth/login';
const VERIFY = '/api/v1/auth/mfa/verify';
const LOCKED = { error: 'Trop de tentatives, réessayez plus tard' };
const MINUTE = 60_000;

describeWithServices('second-factor codes: the lock after 10 wrong ones', () => {
  let a: TestGateway;
  let b: TestGateway;
  const clock = testClock();

  beforeAll(async () => {
    [a, b] = await startTwoGateways(testConfig({ auth: { mfa: { issuer: 'Example' } } }), { clock });
  });
  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await closeSql();
  });

  const code = (secret: string) => authenticator.clone({ epoch: clock().getTime() }).generate(secret);
  /** A user with confirmed TOTP; the clock then moves on past the confirming code's step. */
  async function enrolled(): Promise<{ user: TestUser; secret: string }> {
    const user = await makeUser(a);
    const secret = (await a.post('/api/v1/auth/mfa/totp/enroll', {}, { headers: bearer(user.access) })).json.secret as string;
    expect((await a.post('/api/v1/auth/mfa/totp/confirm', { code: code(secret) }, { headers: bearer(user.access) })).status).toBe(200);
    clock.advance(30_000);
    return { user, secret };
  }
  const mfaToken = async (user: TestUser) => (await a.post(LOGIN, { email: user.email, password: user.password })).json.mfa_token as string;
  /** `n` wrong codes, in parallel on both instances, with as many mfa_tokens as they need (5 wrong codes kill one). */
  async function wrongCodes(user: TestUser, n: number) {
    const tokens = await Promise.all(Array.from({ length: Math.ceil(n / 4) }, () => mfaToken(user)));
    return Promise.all(Array.from({ length: n }, (_, i) => [a, b][i % 2]!.post(VERIFY, { mfa_token: tokens[Math.floor(i / 4)], code: '000000' })));
  }

  it('the tenth wrong code locks; then even the right code gets 429 with Retry-After, on every instance', async () => {
    const { user, secret } = await enrolled();
    const answers = await wrongCodes(user, 12);
    // Checked one at a time per user: exactly ten counted, the two after them locked out.
    expect(answers.map((r) => r.status).sort()).toEqual([...Array(10).fill(401), 429, 429]);
    for (const gw of [a, b]) {
      const right = await gw.post(VERIFY, { mfa_token: await mfaToken(user), code: code(secret) });
      expect(right.status).toBe(429);
      expect(right.json).toEqual(LOCKED);
      expect(Number(right.headers['retry-after'])).toBeGreaterThan(14 * 60);
      expect(Number(right.headers['retry-after'])).toBeLessThanOrEqual(15 * 60);
    }
    const failed = await sql<{ n: string }>("SELECT count(*) AS n FROM audit_events WHERE user_id = $1 AND type = 'login.failed'", [user.id]);
    expect(Number(failed[0]!.n)).toBe(10);
    // Fifteen minutes on, the lock is over and the right code works.
    clock.advance(15 * MINUTE + 1000);
    const after = await b.post(VERIFY, { mfa_token: await mfaToken(user), code: code(secret) });
    expect(after.status).toBe(200);
    expect(after.json.access_token).toEqual(expect.any(String));
  });

  it('the count is per 15-minute window: nine, then nine more once it has passed, lock nothing', async () => {
    const { user, secret } = await enrolled();
    expect((await wrongCodes(user, 9)).every((r) => r.status === 401)).toBe(true);
    clock.advance(15 * MINUTE + 1000);
    expect((await wrongCodes(user, 9)).every((r) => r.status === 401)).toBe(true);
    expect((await a.post(VERIFY, { mfa_token: await mfaToken(user), code: code(secret) })).status).toBe(200);
  });

  it('only that user is locked', async () => {
    const [locked, other] = [await enrolled(), await enrolled()];
    await wrongCodes(locked.user, 10);
    expect((await a.post(VERIFY, { mfa_token: await mfaToken(locked.user), code: code(locked.secret) })).status).toBe(429);
    expect((await a.post(VERIFY, { mfa_token: await mfaToken(other.user), code: code(other.secret) })).status).toBe(200);
  });
});
