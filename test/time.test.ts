// Unit tests of src/time.ts's reading of times (the UTC windows are in test/guards/quota.test.ts):
// the same text names the same instant whatever the host's local time zone.
import { describe, expect, it } from 'vitest';
import { readIsoTime } from '../src/time.js';
import { inTimeZone, ZONES_AROUND_UTC } from './helpers/timeZone.js';

const read = (text: string) => readIsoTime(text)?.toISOString();

describe('readIsoTime', () => {
  const cases: Array<[string, string | undefined]> = [
    ['2026-11-25', '2026-11-25T00:00:00.000Z'],
    ['2026-11-25T08:00', '2026-11-25T08:00:00.000Z'],
    ['2026-11-25T08:00:00', '2026-11-25T08:00:00.000Z'],
    ['2026-11-25 08:00:00.123456', '2026-11-25T08:00:00.123Z'],
    ['2026-11-25 08:00:00+00', '2026-11-25T08:00:00.000Z'],
    ['2026-11-25T08:00:00-05', '2026-11-25T13:00:00.000Z'],
    ['2026-11-25T08:00:00+0530', '2026-11-25T02:30:00.000Z'],
    ['2026-11-25T08:00:00+09:00', '2026-11-24T23:00:00.000Z'],
    [' 2026-11-25T08:00:00z ', '2026-11-25T08:00:00.000Z'],
    ['Nov 25 2026', undefined], ['2026-11-25T08', undefined], ['2026-13-01', undefined], ['2026-11-25T24:30:00Z', undefined], ['', undefined], ['1732521600000', undefined],
  ];

  it('ISO 8601 and Postgres\' text form; UTC without an offset; anything else undefined, in UTC and in zones either side of it', async () => {
    const all = () => cases.map(([text]) => [text, read(text)]);
    expect(all()).toEqual(cases);
    for (const zone of ZONES_AROUND_UTC) expect(await inTimeZone(zone, all)).toEqual(cases);
  });
});
