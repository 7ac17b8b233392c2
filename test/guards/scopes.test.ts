// Unit tests of src/pipeline/guards/scopes.ts (CONTRACT §21): a restricted key passes a route
// holding each of its scopes exactly. End to end, the same rule is in test/user/keyScopes.test.ts;
// here, scopes one of which is a prefix of the other, which that page's example has none of.
import { describe, expect, it } from 'vitest';
import { checkScopes } from '../../src/pipeline/guards/scopes.js';

const key = (scopes: string[] | null) => ({ scopes });
const refused = (required: string[]) => ({ code: 'scopeInsufficient', extra: { required_scopes: required } });

describe('checkScopes: a scope is held whole, never by a prefix', () => {
  it('a key holding a scope that begins another does not pass a route requiring the longer one', () => {
    expect(checkScopes(key(['reports']), ['reports:read'])).toEqual(refused(['reports:read']));
    expect(checkScopes(key(['reports:read']), ['reports:read:all'])).toEqual(refused(['reports:read:all']));
    expect(checkScopes(key(['reports:read']), ['reports:readwrite'])).toEqual(refused(['reports:readwrite']));
  });

  it('a key holding the longer scope does not pass a route requiring the shorter one', () => {
    expect(checkScopes(key(['reports:read']), ['reports'])).toEqual(refused(['reports']));
    expect(checkScopes(key(['reports:read:all']), ['reports:read'])).toEqual(refused(['reports:read']));
    expect(checkScopes(key(['reports:read', 'exports:write:all']), ['reports:read', 'exports:write'])).toEqual(refused(['reports:read', 'exports:write']));
  });

  it('the exact scopes pass, each one required held; * passes; a key without scopes and a bearer sign-in pass', () => {
    expect(checkScopes(key(['reports', 'reports:read']), ['reports:read'])).toBeNull();
    expect(checkScopes(key(['reports:read', 'exports:write']), ['exports:write', 'reports:read'])).toBeNull();
    expect(checkScopes(key(['*']), ['reports:read'])).toBeNull();
    expect(checkScopes(key(null), ['reports:read'])).toBeNull();
    expect(checkScopes({ scopes: undefined }, ['reports:read'])).toBeNull(); // a bearer's identity
  });

  it('a route without scopes takes only a key holding *', () => {
    expect(checkScopes(key(['reports:read']), undefined)).toEqual(refused(['*']));
    expect(checkScopes(key(['*']), undefined)).toBeNull();
  });
});
