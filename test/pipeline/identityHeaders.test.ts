// Unit tests of src/identityHeaders.ts: which headers say who a caller is (a client's copy of any
// of them must never reach an upstream), what they carry, and the email as a header can hold it.
// The threats: a spelling of an identity header that passes as a client's own header (CONTRACT §3),
// an email that is more than one mailbox, or one that breaks the header it rides in (§8, §19).
// End to end, the same rules are in proxy/headers.test.ts and auth/singleMailbox.security.test.ts.
import { describe, expect, it } from 'vitest';
import { headerSafeEmail, identityHeaders, isForwardableEmail, isIdentityHeader } from '../../src/pipeline/identityHeaders.js';
import type { User } from '../../src/storage/users.js';

describe('isIdentityHeader', () => {
  it.each([
    'x-user-id', 'X-User-Id', 'X_USER_ID', 'x_user-plan', 'X-User-Email', 'x-user-anything',
    'x-auth-method', 'X_Auth_Method', 'x-gateway-assertion', 'X-GATEWAY_ASSERTION',
  ])('%s is one', (name) => {
    expect(isIdentityHeader(name)).toBe(true);
  });

  it.each([
    'user-id', 'y-user-id', 'ax-user-id', 'x-user', 'x-userid', 'x-auth-methods', 'x-auth-method-', 'x-gateway-assertions',
    'x-gateway', 'authorization', 'x-api-key', 'x-forwarded-for', '', 'X',
  ])('%s is not', (name) => {
    expect(isIdentityHeader(name)).toBe(false);
  });
});

const user = (email: string): User => ({ id: 42, email, plan: 'premium' }) as User;

describe('identityHeaders', () => {
  it('says the id, plan, method and email of a single mailbox', () => {
    expect(identityHeaders(user('ada@example.test'), 'bearer')).toEqual({
      'x-user-id': '42', 'x-user-plan': 'premium', 'x-auth-method': 'bearer', 'x-user-email': 'ada@example.test',
    });
    expect(identityHeaders(user('ada@example.test'), 'api-key')['x-auth-method']).toBe('api-key');
  });

  it('leaves out an email that is not one mailbox, keeps the rest', () => {
    expect(identityHeaders(user('ceo@bank.test <attacker@evil.test>'), 'bearer')).toEqual({ 'x-user-id': '42', 'x-user-plan': 'premium', 'x-auth-method': 'bearer' });
  });

  it('percent-encodes a non-ASCII email', () => {
    expect(identityHeaders(user('łukasz@x.pl'), 'bearer')['x-user-email']).toBe('%C5%82ukasz@x.pl');
  });
});

describe('isForwardableEmail', () => {
  it('answers the same the second time (its answers are kept)', () => {
    for (let i = 0; i < 2; i++) {
      expect(isForwardableEmail('ada@example.test')).toBe(true);
      expect(isForwardableEmail('a@x.test,b@y.test')).toBe(false);
    }
  });
});

describe('headerSafeEmail', () => {
  it('leaves printable ASCII as it is, space and tilde included', () => {
    expect(headerSafeEmail('"a b~"@example.test')).toBe('"a b~"@example.test');
    expect(headerSafeEmail('')).toBe('');
  });

  it('percent-encodes every byte outside printable ASCII, in upper-case hex with two digits', () => {
    expect(headerSafeEmail('łukasz@x.pl')).toBe('%C5%82ukasz@x.pl');
    expect(headerSafeEmail('é@x.test')).toBe('%C3%A9@x.test');
    expect(headerSafeEmail('a\r\nb@x.test')).toBe('a%0D%0Ab@x.test');
    expect(headerSafeEmail('a\x1f\x7f ~é')).toBe('a%1F%7F ~%C3%A9');
    expect(headerSafeEmail('łó')).toBe('%C5%82%C3%B3');
  });
});
