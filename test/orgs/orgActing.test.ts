// Unit tests of src/orgActing.ts (CONTRACT §22): what a Gateway-Org header names, at the edges of
// an organization id, and the roles stage's answer. End to end, test/orgs/acting.test.ts.
import { describe, expect, it } from 'vitest';
import { checkRoles, gatewayOrgId } from '../../src/orgActing.js';

describe('gatewayOrgId', () => {
  it('a decimal names an id from 1 to 2^31 - 1; 0 (no organization can have it) outside', () => {
    expect(['1', '01', '42', '2147483647'].map(gatewayOrgId)).toEqual([1, 1, 42, 2_147_483_647]);
    expect(['0', '00', '2147483648', '99999999999999999999'].map(gatewayOrgId)).toEqual([0, 0, 0, 0]);
  });

  it('anything else is invalid: empty, sent twice, signed, spaced, not decimal, more than 20 digits, an array even of one', () => {
    const invalid = ['', '1, 2', '-1', '+1', ' 1', '1 ', '1.0', '0x10', '1e3', 'abc', '123456789012345678901'];
    expect(invalid.map(gatewayOrgId)).toEqual(invalid.map(() => 'invalid'));
    expect(gatewayOrgId(['7'])).toBe('invalid');
    expect(gatewayOrgId(['7', '8'])).toBe('invalid');
  });
});

describe('checkRoles', () => {
  it('passes a role the route names and refuses another, saying which roles it needs', () => {
    expect(checkRoles({ role: 'admin' }, ['owner', 'admin'])).toBeUndefined();
    expect(checkRoles({ role: 'member' }, ['owner', 'admin'])).toEqual({ code: 'roleInsufficient', extra: { required_roles: ['owner', 'admin'], current_role: 'member' } });
  });
});
