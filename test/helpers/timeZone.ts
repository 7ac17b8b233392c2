// The process's local time zone, changed for the length of a test: the gateway's days and months
// are UTC (CONTRACT §23), and a suite run only under TZ=UTC cannot tell a UTC computation from a
// local one. Node re-reads TZ whenever process.env.TZ is assigned (the test pool is forks, so each
// file has a process of its own and no other file sees the change).

/** Zones on either side of UTC: where a UTC instant just after a month starts is still the month before, and where one just before it ends is already the next. */
export const ZONES_AROUND_UTC = ['America/New_York', 'Asia/Tokyo'] as const;

/** Runs `fn` with the local time zone `zone`, then puts the one before back (also when `fn` throws or rejects). */
export async function inTimeZone<T>(zone: string, fn: () => T | Promise<T>): Promise<T> {
  const before = process.env.TZ;
  process.env.TZ = zone;
  // A zone Node does not know is UTC without a word: the test would prove nothing.
  if (zone !== 'UTC' && new Date(Date.UTC(2026, 0, 15)).getTimezoneOffset() === 0 && new Date(Date.UTC(2026, 6, 15)).getTimezoneOffset() === 0) {
    throw new Error(`time zone ${zone}: Node reads it as UTC`);
  }
  try {
    return await fn();
  } finally {
    if (before === undefined) delete process.env.TZ;
    else process.env.TZ = before;
  }
}
