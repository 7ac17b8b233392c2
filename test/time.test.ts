// Unit tests of src/time.ts (the UTC windows are in test/guards/quota.test.ts): the reading of
// times, the same text naming the same instant whatever the host's local time zone; and the deadline
// the health checks and the Redis breaker put on work that has none.
import { describe, expect, it } from 'vitest';
import { readIsoTime, withTimeout } from '../src/time.js';
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
    ['Nov 25 2026', undefined], ['12026-11-25', undefined], ['2026-11-25T08:00.5Z', undefined], ['2026-11-25T08:00:00+05:30x', undefined],
    ['2026-11-25T08', undefined], ['2026-13-01', undefined], ['2026-11-25T24:30:00Z', undefined], ['', undefined], ['1732521600000', undefined],
  ];

  it('ISO 8601 and Postgres\' text form; UTC without an offset; anything else undefined, in UTC and in zones either side of it', async () => {
    const all = () => cases.map(([text]) => [text, read(text)]);
    expect(all()).toEqual(cases);
    for (const zone of ZONES_AROUND_UTC) expect(await inTimeZone(zone, all)).toEqual(cases);
  });
});

describe('withTimeout', () => {
  const never = new Promise<never>(() => {});
  const timers = () => process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;

  it('answers the work\'s value, or its rejection, when it settles in time, and leaves no timer behind', async () => {
    const before = timers();
    await expect(withTimeout(Promise.resolve(42), 5_000)).resolves.toBe(42);
    await expect(withTimeout(Promise.reject(new Error('refused')), 5_000)).rejects.toThrow('refused');
    expect(timers()).toBe(before);
  });

  it('rejects with the message given, or "timeout", once the time has passed', async () => {
    const started = Date.now();
    await expect(withTimeout(never, 30, 'Redis did not answer within 30 ms')).rejects.toThrow(/^Redis did not answer within 30 ms$/);
    expect(Date.now() - started).toBeGreaterThanOrEqual(25);
    await expect(withTimeout(never, 1)).rejects.toThrow(/^timeout$/);
  });

  it('lets an answer received during a stall win over a timer that is only late', async () => {
    // The answer reaches the socket while the process is busy past the deadline: when the loop
    // turns, the timer is due and the data is waiting; the data wins.
    const { createServer, connect } = await import('node:net');
    const server = createServer();
    const accepted = new Promise<import('node:net').Socket>((resolve) => server.once('connection', resolve));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const client = connect((server.address() as { port: number }).port, '127.0.0.1');
    try {
      const serverSide = await accepted;
      const answer = new Promise<string>((resolve) => client.once('data', (data) => resolve(data.toString())));
      const outcome = withTimeout(answer, 20);
      serverSide.end('pong');
      const busyUntil = Date.now() + 100;
      while (Date.now() < busyUntil) { /* the stall */ }
      await expect(outcome).resolves.toBe('pong');
    } finally {
      client.destroy();
      server.close();
    }
  });
});
