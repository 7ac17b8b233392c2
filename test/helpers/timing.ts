// Response times compared for the anti-enumeration checks (login, password/forgot): does one kind
// of answer take measurably longer than another, so that timing tells what the body hides? Not a
// speed measurement (that is `npm run bench`'s): the two kinds run interleaved, so whatever else
// loads the machine meanwhile slows both alike, and are compared by their medians.

/**
 * Medians within half to twice each other, or closer than `floorMs`. What this catches is a
 * difference in the work done: a login that skipped the dummy hash for unknown emails answers in
 * ~1 ms against ~20 ms or more, a factor of 10 at least, far outside it. Answers that take about a
 * millisecond (password/forgot) vary by more than a factor of 2 from one run to the next on a
 * shared machine, and a difference that small is lost in any network's jitter: below the floor,
 * their sameness is the structural tests' to show (what the answer waits for, what work it does).
 */
export const TIMING_TOLERANCE = { minRatio: 0.5, maxRatio: 2, floorMs: 5 };

export interface TimingComparison {
  medianA: number;
  medianB: number;
  /** medianA / medianB */
  ratio: number;
}

const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[xs.length >> 1]!;

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await fn();
  return performance.now() - start;
}

/**
 * Runs a and b alternately, `rounds` times each, and compares their medians. `settle`, awaited
 * after each request and outside its time, lets the work an answer left behind (a queued mail)
 * finish first, so that it is not counted in the next request's time instead.
 */
export async function compareTimings(a: () => Promise<unknown>, b: () => Promise<unknown>, rounds = 8, settle?: () => Promise<unknown>): Promise<TimingComparison> {
  const times: { a: number[]; b: number[] } = { a: [], b: [] };
  for (let i = 0; i < rounds; i++) {
    times.a.push(await timed(a));
    await settle?.();
    times.b.push(await timed(b));
    await settle?.();
  }
  const medianA = median(times.a);
  const medianB = median(times.b);
  return { medianA, medianB, ratio: medianA / medianB };
}

/** Whether a comparison is within TIMING_TOLERANCE. */
export function alike({ medianA, medianB, ratio }: TimingComparison): boolean {
  if (Math.abs(medianA - medianB) < TIMING_TOLERANCE.floorMs) return true;
  return ratio > TIMING_TOLERANCE.minRatio && ratio < TIMING_TOLERANCE.maxRatio;
}

/** What an answer shows a client, less what differs on every one (date, request id): answers to compare for sameness. */
export function visibleAnswer(res: { status: number; text: string; headers: Record<string, unknown> }) {
  const { date: _date, 'x-request-id': _id, ...headers } = res.headers;
  return { status: res.status, text: res.text, headers };
}
