// Unit tests of src/credentials/digest.ts: the SHA-256 stored in place of tokens, keys and codes is
// lowercase hex (CONTRACT §7: an operator compares it with `sha256sum`), and random tokens are
// base64url of the bytes asked for, different each time.
import { describe, expect, it } from 'vitest';
import { randomToken, sha256Hex } from '../../src/credentials/digest.js';

describe('sha256Hex', () => {
  it('is the SHA-256 of the UTF-8 text, in lowercase hex (FIPS 180-2 test vectors)', () => {
    expect(sha256Hex('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(sha256Hex('')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  });
});

describe('randomToken', () => {
  it('is base64url of the bytes asked for, without padding, different each time', () => {
    const token = randomToken(32);
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(token, 'base64url')).toHaveLength(32);
    expect(randomToken(32)).not.toBe(token);
    expect(randomToken(10)).toHaveLength(14);
  });
});
