// Unit tests of src/pipeline/guards/quota.ts and src/pipeline/plans.ts: the RateLimit fields a counted route sends,
// the seconds to the daily reset, and each plan's limits (CONTRACT §12). End to end, the same
// fields are in planQuotas.test.ts and planAndDaily.test.ts.
import { describe, expect, it } from 'vitest';
import { rateLimitHeaders, secondsInUtcMonth, secondsToNextUtcMonth, secondsToUtcMidnight, windowState } from '../../src/pipeline/guards/quota.js';
import { dailyRemaining, knownPlans, monthlyRemaining, planLimitsOf, planWordsOf, usedThisMonth, usedToday, worded } from '../../src/pipeline/plans.js';
import { dailyLimitParams, SPEC_USAGE_NOUN, type Denial } from '../../src/errors/index.js';
import { utcDay, utcMonth } from '../../src/time.js';
import { inTimeZone, ZONES_AROUND_UTC } from '../helpers/timeZone.js';
import type { Config } from '../../src/config/schema.js';

describe('rateLimitHeaders', () => {
  it('one item per limit, in order, with its quota, window, remainder and reset', () => {
    expect(rateLimitHeaders([
      { policy: 'minute', limit: 10, windowSec: 60, remaining: 3, resetSec: 7 },
      { policy: 'daily', limit: 100, windowSec: 86_400, remaining: 99, resetSec: 3600 },
    ])).toEqual({
      'ratelimit-policy': '"minute";q=10;w=60, "daily";q=100;w=86400',
      ratelimit: '"minute";r=3;t=7, "daily";r=99;t=3600',
    });
  });
});

describe('secondsToUtcMidnight', () => {
  it('counts whole seconds to the next UTC midnight, rounding a fraction up', () => {
    expect(secondsToUtcMidnight(new Date('2026-11-26T23:59:59.000Z'))).toBe(1);
    expect(secondsToUtcMidnight(new Date('2026-11-26T23:59:59.001Z'))).toBe(1);
    expect(secondsToUtcMidnight(new Date('2026-11-26T23:59:58.500Z'))).toBe(2);
    expect(secondsToUtcMidnight(new Date('2026-11-26T00:00:00.000Z'))).toBe(86_400);
    expect(secondsToUtcMidnight(new Date('2026-12-31T12:00:00.000Z'))).toBe(43_200);
  });
});

const plans = (over: Partial<Config['plans']> = {}): Config['plans'] => ({ limits: {}, ...over }) as Config['plans'];

describe('planLimitsOf', () => {
  it('without limits: the spec, free once a day, every other plan unlimited, no burst limit', () => {
    expect(planLimitsOf(plans(), 'free')).toEqual({ daily: 1, monthly: null, perMinute: null });
    expect(planLimitsOf(plans(), 'premium')).toEqual({ daily: null, monthly: null, perMinute: null });
    expect(planLimitsOf(plans({ freeDailyLimit: 5 }), 'free')).toEqual({ daily: 5, monthly: null, perMinute: null });
    expect(planLimitsOf(plans({ freeDailyLimit: 5 }), 'pro')).toEqual({ daily: null, monthly: null, perMinute: null });
  });

  it('a plan\'s limits win over the free default, each one alone', () => {
    const p = plans({ freeDailyLimit: 5, limits: { free: { perMinute: 2 }, team: { daily: 50, perMinute: 10 }, monthly: { monthly: 20 } } as Config['plans']['limits'] });
    expect(planLimitsOf(p, 'free')).toEqual({ daily: 5, monthly: null, perMinute: 2 });
    expect(planLimitsOf(p, 'team')).toEqual({ daily: 50, monthly: null, perMinute: 10 });
    expect(planLimitsOf(p, 'monthly')).toEqual({ daily: null, monthly: 20, perMinute: null });
  });

  it('a monthly allowance with overage: its limit, and overage set for that plan only', () => {
    const p = plans({ limits: { metered: { monthly: { limit: 1000, overage: 'meter' } }, capped: { monthly: 20 } } as Config['plans']['limits'] });
    expect(planLimitsOf(p, 'metered')).toEqual({ daily: null, monthly: 1000, perMinute: null, overage: true });
    expect(planLimitsOf(p, 'capped')).toEqual({ daily: null, monthly: 20, perMinute: null });
  });

  it('reads no limits off Object.prototype for a plan named like one of its keys', () => {
    expect(planLimitsOf(plans(), 'constructor')).toEqual({ daily: null, monthly: null, perMinute: null });
    expect(planLimitsOf(plans(), 'toString')).toEqual({ daily: null, monthly: null, perMinute: null });
  });
});

describe('knownPlans', () => {
  it('the spec\'s three, those with limits, those routes name, each once', () => {
    const limits = { team: { daily: 5 }, free: { daily: 2 } } as Config['plans']['limits'];
    const config = { plans: plans({ limits }), routes: [{ plans: ['gold', 'pro'] }, {}] } as unknown as Pick<Config, 'plans' | 'routes'>;
    expect(knownPlans(config)).toEqual(['free', 'premium', 'pro', 'team', 'gold']);
  });
});

describe('usedToday and dailyRemaining', () => {
  it('counts only today\'s uses', () => {
    expect(usedToday({ daily_usage: 3, last_usage_date: '2026-11-26' }, '2026-11-26')).toBe(3);
    expect(usedToday({ daily_usage: 3, last_usage_date: '2026-11-25' }, '2026-11-26')).toBe(0);
    expect(usedToday({ daily_usage: 3, last_usage_date: null }, '2026-11-26')).toBe(0);
  });

  it('what is left, never below zero, and null without a quota', () => {
    expect(dailyRemaining({ daily: 5, monthly: null, perMinute: null }, 2)).toBe(3);
    expect(dailyRemaining({ daily: 5, monthly: null, perMinute: null }, 5)).toBe(0);
    expect(dailyRemaining({ daily: 5, monthly: null, perMinute: null }, 7)).toBe(0);
    expect(dailyRemaining({ daily: null, monthly: null, perMinute: null }, 7)).toBeNull();
  });
});

describe('the UTC month of the monthly quotas (CONTRACT §23)', () => {
  it('its first day, its length and the seconds to the next one, over year ends and leap years', () => {
    expect(utcMonth(new Date('2026-12-31T23:59:59.999Z'))).toBe('2026-12-01');
    expect(utcMonth(new Date('2027-01-01T00:00:00Z'))).toBe('2027-01-01');
    expect(secondsInUtcMonth(new Date('2028-02-10T12:00:00Z'))).toBe(29 * 86_400);
    expect(secondsInUtcMonth(new Date('2027-02-10T12:00:00Z'))).toBe(28 * 86_400);
    expect(secondsInUtcMonth(new Date('2026-11-26T12:00:00Z'))).toBe(30 * 86_400);
    expect(secondsToNextUtcMonth(new Date('2026-12-31T23:59:50Z'))).toBe(10);
    expect(secondsToNextUtcMonth(new Date('2026-12-31T23:59:59.200Z'))).toBe(1);
    expect(secondsToNextUtcMonth(new Date('2027-02-01T00:00:00Z'))).toBe(28 * 86_400);
  });

  // Instants where the host's local month is not the UTC one: New York is still in February at
  // 02:00 UTC on March 1, Tokyo already in March at 20:00 UTC on February 28. Run as is (CI runs
  // the suite under TZ=America/New_York too) and under each zone.
  it('the same UTC month and day whatever the host\'s local time zone', async () => {
    const windows = () => [
      [utcMonth(new Date('2026-03-01T02:00:00Z')), utcDay(new Date('2026-03-01T02:00:00Z'))],
      [utcMonth(new Date('2026-02-28T20:00:00Z')), utcDay(new Date('2026-02-28T20:00:00Z'))],
      [secondsInUtcMonth(new Date('2026-03-01T02:00:00Z')), secondsToNextUtcMonth(new Date('2026-02-28T20:00:00Z'))],
      [secondsToUtcMidnight(new Date('2026-03-01T02:00:00Z'))],
    ];
    const expected = [['2026-03-01', '2026-03-01'], ['2026-02-01', '2026-02-28'], [31 * 86_400, 4 * 3600], [22 * 3600]];
    expect(windows()).toEqual(expected);
    for (const zone of ZONES_AROUND_UTC) expect(await inTimeZone(zone, windows)).toEqual(expected);
  });

  it('counts only this month\'s uses, and what is left, null without a quota', () => {
    expect(usedThisMonth({ monthly_usage: 7, last_usage_month: '2026-11-01' }, '2026-11-01')).toBe(7);
    expect(usedThisMonth({ monthly_usage: 7, last_usage_month: '2026-10-01' }, '2026-11-01')).toBe(0);
    expect(usedThisMonth({ monthly_usage: 7, last_usage_month: null }, '2026-11-01')).toBe(0);
    expect(monthlyRemaining({ daily: null, monthly: 20, perMinute: null }, 7)).toBe(13);
    expect(monthlyRemaining({ daily: null, monthly: 20, perMinute: null }, 25)).toBe(0);
    expect(monthlyRemaining({ daily: 1, monthly: null, perMinute: null }, 7)).toBeNull();
  });
});

describe('windowState', () => {
  const now = new Date('2026-02-27T12:00:00.000Z');

  it('a daily window: a day long, what is left, the seconds to UTC midnight', () => {
    expect(windowState('daily', 100, 30, now)).toEqual({ policy: 'daily', limit: 100, windowSec: 86_400, remaining: 70, resetSec: 43_200 });
  });

  it('a monthly window: the month long, what is left, the seconds to the next month', () => {
    expect(windowState('monthly', 1000, 999, now)).toEqual({ policy: 'monthly', limit: 1000, windowSec: 28 * 86_400, remaining: 1, resetSec: 86_400 + 43_200 });
  });

  it('never less than nothing left, when more was counted than the limit (a lowered plan)', () => {
    expect(windowState('daily', 10, 12, now).remaining).toBe(0);
    expect(windowState('monthly', 10, 12, now).remaining).toBe(0);
  });
});

describe('planWordsOf and worded', () => {
  const route = { en: { one: 'race', many: 'races' } };

  it('the words: the route\'s noun over the plans\', over the spec\'s, language by language', () => {
    const words = planWordsOf(plans({ upgradeUrl: 'https://example.test/up', usageNoun: { en: { one: 'call', many: 'calls' }, de: { one: 'Aufruf', many: 'Aufrufe' } } }));
    expect(words).toEqual({ upgradeUrl: 'https://example.test/up', usageNoun: { ...SPEC_USAGE_NOUN, en: { one: 'call', many: 'calls' }, de: { one: 'Aufruf', many: 'Aufrufe' } } });
    expect(planWordsOf(plans({ upgradeUrl: 'https://example.test/up' }), route).usageNoun).toEqual({ ...SPEC_USAGE_NOUN, ...route });
  });

  it('a denial in the configured words: its upgrade URL and its noun, the rest as made', () => {
    const words = { upgradeUrl: 'https://example.test/up', usageNoun: { ...SPEC_USAGE_NOUN, ...route } };
    const denial: Denial = { code: 'dailyLimitReached', params: dailyLimitParams('free', 1), extra: { upgrade_url: 'https://spec.test', plan: 'free' } };
    expect(worded(denial, words)).toEqual({
      code: 'dailyLimitReached',
      params: { plan: 'free', limit: 1, noun: { count: 1, nouns: words.usageNoun } },
      extra: { upgrade_url: 'https://example.test/up', plan: 'free' },
    });
  });

  it('leaves a denial without an upgrade URL or a noun as it was', () => {
    const words = { upgradeUrl: 'https://example.test/up', usageNoun: SPEC_USAGE_NOUN };
    const plain: Denial = { code: 'planInsufficient', params: { plan: 'free' }, extra: { plan: 'free' } };
    expect(worded(plain, words)).toEqual(plain);
    expect(worded({ code: 'planInsufficient' }, words)).toEqual({ code: 'planInsufficient' });
  });
});
