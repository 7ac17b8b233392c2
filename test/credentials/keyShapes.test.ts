// The API key shapes (CONTRACT §21), pure: what a new key looks like under a prefix, which values
// are refused unread (a wrong checksum under the configured prefix or gw) and which are looked up,
// and where proxy/ownTokens.ts finds a key inside a text, whatever its prefix.
import { describe, expect, it } from 'vitest';
import { isForgedKey, keyCandidates, keyChecksum, newApiKey } from '../../src/credentials/shapes.js';

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
});
