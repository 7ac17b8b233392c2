// An API key's expires_at (CONTRACT §21) is read as ISO 8601, in UTC where it names no offset:
// the host's time zone must not move when a key stops working (issue 69's time-zone sweep found
// `new Date(text)` here, which reads a time without an offset in local time).
import { describe, expect, it } from 'vitest';
import { keyRequest } from '../../src/keys/index.js';
import { inTimeZone, ZONES_AROUND_UTC } from '../helpers/timeZone.js';

const NOW = new Date('2026-11-28T03:00:00Z');
const expiry = (expires_at: unknown) => keyRequest({ name: 'ci', expires_at }, NOW, new Set());

describe('an API key\'s expires_at', () => {
  it.each(['UTC', ...ZONES_AROUND_UTC])('without an offset is UTC, under TZ=%s', async (zone) => {
    await inTimeZone(zone, () => {
      expect(expiry('2026-12-01T10:00:00')).toEqual({ ok: { name: 'ci', scopes: null, expiresAt: new Date('2026-12-01T10:00:00Z') } });
      expect(expiry('2026-12-01')).toEqual({ ok: { name: 'ci', scopes: null, expiresAt: new Date('2026-12-01T00:00:00Z') } });
      expect(expiry('2026-12-01T10:00:00+02:00')).toEqual({ ok: { name: 'ci', scopes: null, expiresAt: new Date('2026-12-01T08:00:00Z') } });
    });
  });

  it('refuses what is not ISO 8601, or not in the future', () => {
    for (const text of ['Dec 1 2026', '12/01/2026', 'tomorrow', '2026-11-28T02:59:59Z', 42]) expect(expiry(text), String(text)).toEqual({ error: 'badRequest' });
  });
});
