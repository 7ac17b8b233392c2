// A failure that repeats on every request is logged once with its error, then once per interval
// with a count, and its recovery once; a flapping one stays within two lines per interval. Driven
// by a moved clock through the production logger into captured lines.
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/telemetry/logger.js';
import type { FastifyBaseLogger } from 'fastify';
import { DenialLog, failureLog } from '../../src/telemetry/logThrottle.js';

function captured() {
  const lines: Array<Record<string, unknown>> = [];
  const log = createLogger('info', new Writable({ write(chunk, _enc, cb) { lines.push(JSON.parse(String(chunk))); cb(); } }));
  let t = 1_000_000;
  const clock = { now: () => t, advance: (ms: number) => { t += ms; } };
  return { lines, log, clock };
}

describe('failureLog', () => {
  it('logs the first failure with its stack, then one line per interval with the count, then the recovery', () => {
    const { lines, log, clock } = captured();
    const redis = failureLog(log, 'Redis failed', { intervalMs: 10_000, now: clock.now, recoveredMessage: 'Redis is back' });

    // 1,000 failures over 25 s, one every 25 ms.
    for (let i = 0; i < 1000; i++) {
      redis.failed(new Error(`READONLY You can't write against a read only replica. (${i})`));
      clock.advance(25);
    }
    redis.recovered();

    expect(lines.map((l) => l.msg)).toEqual([
      'Redis failed',
      'Redis failed (400 times in the last 10 s)',
      'Redis failed (400 times in the last 10 s)',
      'Redis is back',
    ]);
    expect((lines[0]!.err as { stack: string }).stack).toContain('READONLY');
    expect(lines[1]).toMatchObject({ level: 40, occurrences: 400, lastError: "READONLY You can't write against a read only replica. (400)" });
    expect(lines[1]).not.toHaveProperty('err');
    // The 199 that came after the last count line are told with the recovery.
    expect(lines[3]).toMatchObject({ level: 30, occurrencesNotLogged: 199 });
  });

  it('keeps a flapping failure within two lines per interval', () => {
    const { lines, log, clock } = captured();
    const flapping = failureLog(log, 'Redis failed', { intervalMs: 10_000, now: clock.now });
    for (let i = 0; i < 2000; i++) {
      if (i % 2) flapping.recovered();
      else flapping.failed(new Error('MOVED 1234 127.0.0.1:7001'));
      clock.advance(10);
    }
    // 20 s: a failure and a recovery line at 0 s, 10 s and 20 s at most.
    expect(lines.length).toBeLessThanOrEqual(6);
    expect(lines.length).toBeGreaterThanOrEqual(4);
  });

  it('says nothing of a recovery when no failure was logged', () => {
    const { lines, log, clock } = captured();
    const quiet = failureLog(log, 'Redis failed', { now: clock.now });
    quiet.recovered();
    expect(lines).toEqual([]);
  });
});

describe('DenialLog', () => {
  it('logs every denial but quota refusals, which are logged once per route and reason per interval with a count', () => {
    const { lines, log, clock } = captured();
    const denials = new DenialLog({ intervalMs: 10_000, now: clock.now });
    const request = log.child({ reqId: 'r-1' }) as FastifyBaseLogger;

    // A script over its per-minute limit: 1,000 refusals over 25 s; probes without a token beside it.
    for (let i = 0; i < 1000; i++) {
      denials.denied(request, '/api', 'tooManyRequests');
      if (i % 250 === 0) denials.denied(request, '/api', 'tokenInvalid');
      clock.advance(25);
    }
    denials.denied(request, '/api', 'dailyLimitReached');
    denials.denied(request, '/other', 'tooManyRequests');

    expect(lines.map((l) => [l.route, l.reason, l.occurrences, l.msg])).toEqual([
      ['/api', 'tooManyRequests', undefined, 'request denied'],
      ['/api', 'tokenInvalid', undefined, 'request denied'],
      ['/api', 'tokenInvalid', undefined, 'request denied'],
      ['/api', 'tooManyRequests', 400, 'request denied (400 times in the last 10 s)'],
      ['/api', 'tokenInvalid', undefined, 'request denied'],
      ['/api', 'tokenInvalid', undefined, 'request denied'],
      ['/api', 'tooManyRequests', 400, 'request denied (400 times in the last 10 s)'],
      // Another reason or another route is another count, its first refusal a line at once.
      ['/api', 'dailyLimitReached', undefined, 'request denied'],
      ['/other', 'tooManyRequests', undefined, 'request denied'],
    ]);
    expect(lines.every((l) => l.reqId === 'r-1' && l.level === 30)).toBe(true);
  });
});
