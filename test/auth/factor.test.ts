// The two checks of src/auth/mfa/factor.ts that take no request (CONTRACT §14): what counts as a
// recent sign-in (a bearer token's, at most 5 minutes old, both edges), and where an endpoint asks
// for the password, what confirms it (the password; for a user without one, a recent sign-in).
import { afterAll, describe, expect, it } from 'vitest';
import { isRecentSignIn, passwordConfirmed, RECENT_SIGN_IN_S } from '../../src/auth/mfa/factor.js';
import { Passwords } from '../../src/auth/password/passwords.js';
import type { Identity } from '../../src/pipeline/index.js';
import type { UserWithHash } from '../../src/storage/accounts/users.js';

const AUTH_TIME = 1_800_000_000; // seconds
const USER: UserWithHash = {
  id: 7, email: 'factor@example.test', plan: 'free', is_active: 1, daily_usage: 0, last_usage_date: null, created_at: new Date(0),
  email_verified_at: null, password_hash: null, password_changed_at: null, credential_generation: 0,
};
const bearerAt = (authTime: number | undefined): Identity => ({ user: USER, method: 'bearer', authTime });
/** `seconds` after the sign-in, with a fraction of a second so that rounding would show. */
const after = (seconds: number) => new Date((AUTH_TIME + seconds) * 1000);

describe('isRecentSignIn', () => {
  it('is 5 minutes', () => expect(RECENT_SIGN_IN_S).toBe(300));

  it('a bearer token: recent up to exactly 300 s after its sign-in, not a second later', () => {
    expect(isRecentSignIn(bearerAt(AUTH_TIME), after(0))).toBe(true);
    expect(isRecentSignIn(bearerAt(AUTH_TIME), after(299))).toBe(true);
    expect(isRecentSignIn(bearerAt(AUTH_TIME), after(300))).toBe(true);
    expect(isRecentSignIn(bearerAt(AUTH_TIME), after(300.001))).toBe(false);
    expect(isRecentSignIn(bearerAt(AUTH_TIME), after(301))).toBe(false);
  });

  it('an API key is never a recent sign-in, even with a fresh auth_time; a token without auth_time is not either', () => {
    expect(isRecentSignIn({ user: USER, method: 'api-key', authTime: AUTH_TIME }, after(1))).toBe(false);
    expect(isRecentSignIn(bearerAt(undefined), after(1))).toBe(false);
  });
});

describe('passwordConfirmed', () => {
  const passwords = new Passwords();
  afterAll(() => passwords.close());

  it('no user: refused, even from a recent sign-in', async () => {
    expect(await passwordConfirmed(passwords, undefined, 'anything', bearerAt(AUTH_TIME), after(1))).toBe(false);
  });

  it('a user without a password: a recent sign-in confirms, an old one or an API key does not', async () => {
    expect(await passwordConfirmed(passwords, USER, '', bearerAt(AUTH_TIME), after(1))).toBe(true);
    expect(await passwordConfirmed(passwords, USER, '', bearerAt(AUTH_TIME), after(301))).toBe(false);
    expect(await passwordConfirmed(passwords, USER, '', { user: USER, method: 'api-key', authTime: AUTH_TIME }, after(1))).toBe(false);
  });

  it('a user with a password: that password confirms, whenever the sign-in was; another does not, even from a recent sign-in', async () => {
    const user = { ...USER, password_hash: await passwords.hash('correct horse battery') };
    expect(await passwordConfirmed(passwords, user, 'correct horse battery', bearerAt(AUTH_TIME), after(3600))).toBe(true);
    expect(await passwordConfirmed(passwords, user, 'wrong horse battery', bearerAt(AUTH_TIME), after(1))).toBe(false);
  });
});
