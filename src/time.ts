// Time helpers: the UTC day and month the quotas count in, and a deadline for work that has none.

/** A UTC day, in ms (days in UTC have no leap seconds in JavaScript's time). */
export const DAY_MS = 86_400_000;

/** Today as YYYY-MM-DD in UTC: the unit of the daily limits. */
export function utcDay(now: Date): string {
  return now.toISOString().slice(0, 10);
}

/** The first day of this UTC month as YYYY-MM-DD: the unit of the monthly limits (users.last_usage_month). */
export function utcMonth(now: Date): string {
  return `${now.toISOString().slice(0, 7)}-01`;
}

// ISO 8601 as people and Postgres write it: a date, or a date and a time (T or a space between,
// seconds optional, a fraction only after them) with an offset (Z, ±HH, ±HHMM, ±HH:MM) or none.
const ISO_TIME = /^(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}:\d{2}(?::\d{2})?)(\.\d+)?(Z|[+-]\d{2}(?::?\d{2})?)?)?$/i;

/**
 * The instant an ISO 8601 time names (Postgres' `2024-01-15 10:30:00.123456+00` too); undefined
 * for anything else. A time without an offset, and a date alone, are UTC: new Date() would read
 * the first in the host's local zone, so the same text would name another instant on another host.
 */
export function readIsoTime(text: string): Date | undefined {
  const match = ISO_TIME.exec(text.trim());
  if (!match) return undefined;
  const [, day, time, fraction = '', zone = 'Z'] = match;
  // V8 reads the rest as they are (z, ±HHMM, no seconds, more than 3 digits of a fraction:
  // test/time.test.ts, in zones either side of UTC); an hour alone (±HH, the one offset of three
  // characters) needs its minutes.
  const offset = zone.length === 3 ? `${zone}:00` : zone;
  const date = new Date(time ? `${day}T${time}${fraction}${offset}` : `${day}T00:00:00Z`);
  return Number.isNaN(date.getTime()) ? undefined : date;
}

/**
 * `work`'s outcome, or a rejection with `message` once `ms` have passed; the timer never outlives it.
 * The rejection waits for the I/O already received: after a stall of this process (GC, a busy
 * CPU) timers run before sockets are read, and an answer that came in time would lose to a timer
 * that is only late. setImmediate runs after that reading.
 */
export function withTimeout<T>(work: Promise<T>, ms: number, message = 'timeout'): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([work, new Promise<T>((_, reject) => { timer = setTimeout(() => setImmediate(() => reject(new Error(message))), ms); })])
    .finally(() => clearTimeout(timer));
}
