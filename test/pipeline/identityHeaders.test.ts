// Unit tests of src/pipeline/identityHeaders.ts: which headers say who a caller is (a client's copy of any
// of them must never reach an upstream), what they carry, and the email as a header can hold it.
// The threats: a spelling of an identity header that passes as a client's own header (CONTRACT §3),
// an email that is more than one mailbox, or one that breaks the header it rides in (§8, §19).
// End to end, the same rules are in proxy/headers.test.ts and auth/singleMailbox.security.test.ts.
import { describe, expect, it } from 'vitest';
import { headerSafeEmail, identityHeaders, isForwardableEmail, isIdentityHeader, isOrgHeader, keyFactsOf, ORG_HEADER } from '../../src/pipeline/identityHeaders.js';
import type { User } from '../../src/storage/accounts/users.js';

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

describe('isOrgHeader', () => {
  it.each(['x-org-id', 'X-Org-Role', 'X_ORG_PLAN', 'x-org-anything', 'gateway-org', 'Gateway-Org', 'GATEWAY_ORG'])('%s is one', (name) => {
    expect(isOrgHeader(name)).toBe(true);
  });

  it('the request header naming the organization acted for is one (never forwarded)', () => {
    expect(isOrgHeader(ORG_HEADER)).toBe(true);
  });

  it.each(['x-org', 'x-orgs-id', 'ax-org-id', 'org-id', 'gateway-orgs', 'xgateway-org', 'x-gateway-org', 'gateway', 'y-org-id', 'f-org-id', 'h-org-id', '', 'X', 'G'])('%s is not', (name) => {
    expect(isOrgHeader(name)).toBe(false);
  });
});

describe('keyFactsOf', () => {
  it('an API key request: its id and scopes, null scopes when it has none (its owner\'s every right)', () => {
    expect(keyFactsOf({ method: 'api-key', keyId: 7, scopes: ['read'] })).toEqual({ id: 7, scopes: ['read'] });
    expect(keyFactsOf({ method: 'api-key', keyId: 7 })).toEqual({ id: 7, scopes: null });
    expect(keyFactsOf({ method: 'api-key', keyId: 0, scopes: null })).toEqual({ id: 0, scopes: null });
  });

  it('none for another method, or without a key id', () => {
    expect(keyFactsOf({ method: 'bearer', keyId: 7, scopes: ['read'] })).toBeUndefined();
    expect(keyFactsOf({ method: 'api-key' })).toBeUndefined();
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

  it('names the API key, the organization acted for, and the imported id when asked', () => {
    const imported = { ...user('ada@example.test'), external_id: 'auth0|123' } as User;
    expect(identityHeaders(imported, 'api-key', { id: 7, scopes: null }, { id: 3, role: 'admin', plan: 'team' } as never, true)).toEqual({
      'x-user-id': '42', 'x-user-plan': 'premium', 'x-auth-method': 'api-key', 'x-user-email': 'ada@example.test',
      'x-user-key-id': '7', 'x-org-id': '3', 'x-org-role': 'admin', 'x-org-plan': 'team', 'x-user-external-id': 'auth0|123',
    });
    expect(identityHeaders(imported, 'bearer')).not.toHaveProperty('x-user-external-id');
    expect(identityHeaders({ ...imported, external_id: null } as User, 'bearer', undefined, undefined, true)).not.toHaveProperty('x-user-external-id');
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
    // A character outside the BMP is one character of four bytes; a lone surrogate is U+FFFD's three.
    expect(headerSafeEmail('a😀@x.test')).toBe('a%F0%9F%98%80@x.test');
    expect(headerSafeEmail('a\ud800b')).toBe('a%EF%BF%BDb');
  });
});
