// The API key shapes (CONTRACT §21), pure: what a new key looks like under a prefix, which values
// are refused unread (a wrong checksum under the configured prefix or gw) and which are looked up,
// and where proxy/ownTokens.ts finds a key inside a text, whatever its prefix.
import { describe, expect, it } from 'vitest';
import { CONSOLE_COOKIE, JWS_PATTERN, JWS_PREFIX, OIDC_COOKIE, OPERATOR_TOKEN_PREFIX } from '../../src/credentials/shapes.js';
import { isForgedKey, keyCandidates, keyChecksum, newApiKey } from '../../src/keys/index.js';

const corrupted = (key: string) => key.slice(0, -1) + (key.endsWith('0') ? '1' : '0');

describe('API key shapes', () => {
  it('makes <prefix>_<R><C> with start the first len(prefix) + 6 characters; organization keys <prefix>o_', () => {
    for (const prefix of ['gw', 'acme', 'a123456789']) {
      const { key, start } = newApiKey(prefix);
      expect(key).toMatch(new RegExp(`^${prefix}_[0-9A-Za-z]{38}$`));
      expect(key.slice(-6)).toBe(keyChecksum(key.slice(prefix.length + 1, -6)));
      expect(start).toBe(key.slice(0, prefix.length + 6));
      expect(newApiKey(prefix, true).key.startsWith(`${prefix}o_`)).toBe(true);
    }
    expect(newApiKey().key.startsWith('gw_')).toBe(true);
  });

  it('refuses a wrong checksum under the configured prefix and gw (organization keys too), and nothing else', () => {
    const random = newApiKey('acme').key.slice(5);
    expect(isForgedKey(`acme_${random}`, 'acme')).toBe(false);
    for (const forged of [`acme_${random}`, `acmeo_${random}`, `gw_${random}`, `gwo_${random}`]) expect(isForgedKey(corrupted(forged), 'acme'), forged).toBe(true);
    // Another prefix (an earlier one, or an imported key that looks like one): looked up, not refused.
    expect(isForgedKey(corrupted(`zeta_${random}`), 'acme')).toBe(false);
    // Not the shape at all: the earlier format, or anything else, is looked up.
    for (const other of [`gw_${'a'.repeat(43)}`, 'acme_short', `ACME_${random}`, `acme_${random}x`]) expect(isForgedKey(other, 'acme'), other).toBe(false);
  });

  it('finds keys of any prefix inside a text, glued to a word or not, and passes over noise whose checksum fails', () => {
    const acme = newApiKey('acme').key;
    const gw = newApiKey().key;
    const old = `gw_${'b'.repeat(43)}`;
    expect(keyCandidates(`k=${acme}; t=token${gw}`)).toEqual(expect.arrayContaining([acme, gw]));
    expect(keyCandidates(`tokenacme_${acme.slice(5)}`)).toContain(acme);
    expect(keyCandidates(`x ${old}`)).toEqual([old]);
    expect(keyCandidates(`acme_${'c'.repeat(38)} ${corrupted(acme)}`)).toEqual([]);
  });

  it('has a checksum that is CRC-32 in base62, 6 characters, padded with zeros', () => {
    // crc32('0123456789abcdefghijABCDEFGHIJxy') = 373885863 = 0PImn9 in base62 (a key made before a change of it must keep passing).
    expect(keyChecksum('0123456789abcdefghijABCDEFGHIJxy')).toBe('0PImn9');
    expect(keyChecksum('')).toBe('000000');
  });

  it('reads a run of lower-case characters glued before `_` as every prefix it may end with: 2 to 11 characters, starting with a letter', () => {
    const key = newApiKey('gw').key;
    const rest = key.slice(2);
    const run = 'ab1cdefghijklmnopgw';
    const expected = [2, 3, 4, 5, 6, 7, 8, 9, 10, 11].map((n) => run.slice(-n)).filter((p) => /^[a-z]/.test(p)).map((p) => p + rest);
    expect(expected).toHaveLength(10);
    expect(keyCandidates(`${run}${rest}`)).toEqual(expected);
    // A prefix never starts with a digit: `1gw_…` and `9gw_…` are not read.
    expect(keyCandidates(`x1gw${rest}`)).toEqual([key, `x1gw${rest}`]);
    expect(keyCandidates(`token9gw${rest}`)).toEqual(['gw', 'n9gw', 'en9gw', 'ken9gw', 'oken9gw', 'token9gw'].map((p) => p + rest));
  });
});

describe('where a token sits in a text', () => {
  it('JWS_PREFIX is how every JSON header (`{"`) starts in base64url', () => {
    expect(JWS_PREFIX).toHaveLength(3);
    for (const header of [{ alg: 'HS256' }, { typ: 'at+jwt', alg: 'EdDSA' }, { kid: 'x' }]) {
      expect(Buffer.from(JSON.stringify(header)).toString('base64url').startsWith(JWS_PREFIX)).toBe(true);
    }
  });

  it('JWS_PATTERN finds whole compact JWSs, glued to a word or not, and nothing else', () => {
    const token = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln-_aturE';
    const found = (text: string) => [...text.matchAll(JWS_PATTERN)].map((m) => m[0]);
    expect(found(`Bearer ${token} and bearer${token}.`)).toEqual([token, token]);
    expect(found('eyJ.a.b')).toEqual(['eyJ.a.b']);
    expect(found('eyJhbGci.only-two')).toEqual([]);
    expect(found('eyJ a.b.c')).toEqual([]);
  });
});

describe('the names the contract gives', () => {
  it('the console cookie gw_console, the sign-in binding cookie gw_oidc, operator tokens gwop_ (CONTRACT §24, §28)', () => {
    expect(CONSOLE_COOKIE).toBe('gw_console');
    expect(OIDC_COOKIE).toBe('gw_oidc');
    expect(OPERATOR_TOKEN_PREFIX).toBe('gwop_');
  });
});

