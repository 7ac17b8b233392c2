// Unit tests of the recovery codes of src/auth/totp.ts: ten of them, 80 random bits each, in the
// shape shown to the user, and stored as a hash that takes them as typed (dashes, spaces, case).
import { describe, expect, it } from 'vitest';
import { newRecoveryCodes, recoveryCodeHash } from '../../src/auth/mfa/totp.js';
import { sha256Hex } from '../../src/credentials/digest.js';

describe('recovery codes', () => {
  it('ten codes of four groups of five hex digits, all different', () => {
    const codes = newRecoveryCodes();
    expect(codes).toHaveLength(10);
    for (const code of codes) expect(code).toMatch(/^[0-9a-f]{5}-[0-9a-f]{5}-[0-9a-f]{5}-[0-9a-f]{5}$/);
    expect(new Set(codes).size).toBe(10);
    expect(newRecoveryCodes()).not.toEqual(codes);
  });

  it('hashes the code without dashes or spaces, lower-cased, as SHA-256 hex', () => {
    const stored = sha256Hex('0123456789abcdef0123');
    expect(recoveryCodeHash('01234-56789-abcde-f0123')).toBe(stored);
    expect(recoveryCodeHash(' 01234 56789\tABCDE-F0123 ')).toBe(stored);
    expect(recoveryCodeHash('0123456789ABCDEF0123')).toBe(stored);
    expect(recoveryCodeHash('01234-56789-abcde-f0124')).not.toBe(stored);
  });
});
