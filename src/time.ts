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
