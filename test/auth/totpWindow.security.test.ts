// The TOTP window (CONTRACT §14, src/auth/mfa/totp.ts and storage/accounts/mfa.ts's useTotpStep): a code of
// the current 30 s step or of one step either side signs in, two steps away is refused at both
// edges, and once a step was used no step up to it is accepted again (an older code that a
// shoulder-surfer or a phishing page captured is as dead as the one used).
import { authenticator } from '../helpers/totp.js';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  bearer, closeSql, describeWithServices, makeUser, startTestGateway, testClock, testConfig, type TestGateway, type TestUser,
} from '../helpers/gateway.js';

const ENROLL = '/api/v1/auth/mfa/totp/enroll';
const CONFIRM = '/api/v1/auth/mfa/totp/confirm';
const VERIFY = '/api/v1/auth/mfa/verify';
const LOGIN = '/api/v1/auth/login';
const CODE_REFUSED = { error: 'Code invalide' };
const STEP = 30_000;

describeWithServices('TOTP window', () => {
  let gw: TestGateway;
  const clock = testClock();

  beforeAll(async () => {
    gw = await startTestGateway(testConfig({ auth: { mfa: { issuer: 'Example' } } }), { clock });
  });
  afterAll(async () => {
    await gw?.close();
    await closeSql();
  });

  /**
   * Moves the gateway's clock 2 to 3 steps on (a sign-in stays recent for 5 minutes), to 1 s into
   * a step: the next 29 s of real time stay in it, so a code computed for "n steps from now" is n
   * steps from the gateway's now when it checks, and every step around it is past the last used.
   */
  function intoFreshStep(): number {
    const step = Math.floor(clock().getTime() / STEP) + 3;
    clock.set(new Date(step * STEP + 1000));
    return step;
  }
  /** The code of step `step` (an absolute step number). */
  const codeOf = (secret: string, step: number) => authenticator.clone({ epoch: step * STEP + 1000 }).generate(secret);

  /** A user whose TOTP is confirmed (with a code of the step then current, now long past). */
  async function enrolled(): Promise<{ user: TestUser; secret: string }> {
    const user = await makeUser(gw);
    const enroll = await gw.post(ENROLL, {}, { headers: bearer(user.access) });
    expect(enroll.status, enroll.text).toBe(200);
    const secret = enroll.json.secret as string;
    const step = intoFreshStep();
    const confirm = await gw.post(CONFIRM, { code: codeOf(secret, step) }, { headers: bearer(user.access) });
    expect(confirm.status, confirm.text).toBe(200);
    return { user, secret };
  }
  /** The password step, then `code`: the status and body of /mfa/verify. */
  async function verify(user: TestUser, code: string): Promise<[number, unknown]> {
    const login = await gw.post(LOGIN, { email: user.email, password: user.password });
    expect(login.json.mfa_token, login.text).toEqual(expect.any(String));
    const res = await gw.post(VERIFY, { mfa_token: login.json.mfa_token, code });
    return [res.status, res.status === 200 ? 'signed in' : res.json];
  }

  it('two steps away is refused, on both edges; one step before, the current one and one after sign in, in that order', async () => {
    const { user, secret } = await enrolled();
    const now = intoFreshStep();
    expect(await verify(user, codeOf(secret, now - 2))).toEqual([401, CODE_REFUSED]);
    expect(await verify(user, codeOf(secret, now + 2))).toEqual([401, CODE_REFUSED]);
    expect(await verify(user, codeOf(secret, now - 1))).toEqual([200, 'signed in']);
    expect(await verify(user, codeOf(secret, now))).toEqual([200, 'signed in']);
    expect(await verify(user, codeOf(secret, now + 1))).toEqual([200, 'signed in']);
  });

  it('after a code of the next step signed in, a code of the current step (older, never used) is refused', async () => {
    const { user, secret } = await enrolled();
    const now = intoFreshStep();
    expect(await verify(user, codeOf(secret, now + 1))).toEqual([200, 'signed in']);
    expect(await verify(user, codeOf(secret, now))).toEqual([401, CODE_REFUSED]);
    expect(await verify(user, codeOf(secret, now - 1))).toEqual([401, CODE_REFUSED]);
    // The next step's own code was used up too; the step after it is still to come.
    expect(await verify(user, codeOf(secret, now + 1))).toEqual([401, CODE_REFUSED]);
  });

  it('confirming the enrolment takes the same window: two steps away is refused, one step before confirms', async () => {
    const user = await makeUser(gw);
    const enroll = await gw.post(ENROLL, {}, { headers: bearer(user.access) });
    const secret = enroll.json.secret as string;
    const now = intoFreshStep();
    for (const step of [now - 2, now + 2]) {
      const res = await gw.post(CONFIRM, { code: codeOf(secret, step) }, { headers: bearer(user.access) });
      expect([res.status, res.json], `step ${step - now}`).toEqual([400, CODE_REFUSED]);
    }
    const res = await gw.post(CONFIRM, { code: codeOf(secret, now - 1) }, { headers: bearer(user.access) });
    expect(res.status, res.text).toBe(200);
  });
});
