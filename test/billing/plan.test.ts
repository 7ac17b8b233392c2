// The plan from an owner's subscriptions (CONTRACT §23), a pure function: one table of
// subscriptions × configuration × expected plan.
import { describe, expect, it } from 'vitest';
import { planFromSubscriptions } from '../../src/billing/plan.js';
import type { Config } from '../../src/config/schema.js';

const NOW = new Date('2026-11-26T12:00:00Z');
const DAY = 86_400_000;
// team and enterprise: plans a route's `plans:` names, with no plans.limits entry unless a case gives one.
const PRICES = { p_free: 'free', p_premium: 'premium', p_pro: 'pro', p_team: 'team', p_enterprise: 'enterprise' };
const plansOf = (limits: Record<string, object>) => ({ limits, upgradeUrl: '/up' }) as unknown as Config['plans'];
const sub = (status: string, prices: string[], pastDueDaysAgo?: number) => ({
  status, prices, past_due_since: pastDueDaysAgo === undefined ? null : new Date(NOW.getTime() - pastDueDaysAgo * DAY),
});

describe('planFromSubscriptions', () => {
  const cases: Array<[string, ReturnType<typeof sub>[], Record<string, object>, string]> = [
    ['no subscription: free', [], {}, 'free'],
    ['active: its price\'s plan', [sub('active', ['p_premium'])], {}, 'premium'],
    ['trialing counts', [sub('trialing', ['p_pro'])], {}, 'pro'],
    ['canceled, unpaid, incomplete give nothing', [sub('canceled', ['p_pro']), sub('unpaid', ['p_pro']), sub('incomplete', ['p_pro'])], {}, 'free'],
    ['past_due within the grace keeps it', [sub('past_due', ['p_pro'], 6.9)], {}, 'pro'],
    ['past_due past the grace gives nothing', [sub('past_due', ['p_pro'], 7)], {}, 'free'],
    ['an unlisted add-on first, the listed base after', [sub('active', ['p_addon', 'p_premium'])], {}, 'premium'],
    ['unlisted prices alone give nothing', [sub('active', ['p_gold'])], {}, 'free'],
    ['several: free < premium < pro without limits', [sub('active', ['p_pro']), sub('active', ['p_premium'])], {}, 'pro'],
    ['several: the one listed latest in plans.limits', [sub('active', ['p_pro']), sub('active', ['p_team'])], { free: {}, pro: {}, team: {} }, 'team'],
    ['limits order wins over the spec\'s order', [sub('active', ['p_pro', 'p_premium'])], { pro: {}, premium: {} }, 'premium'],
    ['a plan listed in limits beats one that is not', [sub('active', ['p_pro']), sub('active', ['p_team'])], { free: {}, team: {} }, 'team'],
    ['the plan listed first in limits beats one that is not listed', [sub('active', ['p_pro']), sub('active', ['p_premium'])], { premium: {}, team: {} }, 'premium'],
    ['one subscription\'s highest price, listed first, before an unlisted one', [sub('active', ['p_pro', 'p_premium', 'p_addon'])], {}, 'pro'],
    ['a canceled subscription that had been past due gives nothing, even within the grace', [sub('canceled', ['p_pro'], 1)], {}, 'free'],
    ['past_due without its date gives nothing', [sub('past_due', ['p_pro'])], {}, 'free'],
    ['a plan only a route names is given by its price', [sub('active', ['p_team'])], {}, 'team'],
    ['a plan only a route names ranks above the spec\'s three', [sub('active', ['p_pro']), sub('active', ['p_team'])], {}, 'team'],
    ['and below a plan listed in plans.limits', [sub('active', ['p_team', 'p_premium'])], { premium: {} }, 'premium'],
    ['a free price (a free tier\'s subscription) ranks below premium', [sub('active', ['p_free']), sub('active', ['p_premium'])], {}, 'premium'],
    ['and below a plan only a route names', [sub('active', ['p_free', 'p_team'])], {}, 'team'],
    ['two plans only routes name: the first price\'s', [sub('active', ['p_enterprise', 'p_team'])], {}, 'enterprise'],
  ];
  it.each(cases)('%s', (_name, subs, limits, expected) => {
    expect(planFromSubscriptions(subs, { prices: PRICES, plans: plansOf(limits), graceDays: 7, now: NOW })).toBe(expected);
  });
});
