// Plans as data (CONTRACT §12): which plans exist and what each may use. Read from the live
// configuration on every request, so a reload changes limits without a restart.
import { knownPlans, type Config } from '../config/schema.js';

// Which plans exist is the configuration's to say (config/schema/routes.ts); re-exported for the guards.
export { knownPlans };
import { SPEC_USAGE_NOUN, type Denial, type Nouns } from '../errors/index.js';

export interface PlanLimits {
  /** Counted uses per UTC day on dailyLimit routes; null: unlimited. */
  daily: number | null;
  /** Counted uses per UTC month on dailyLimit routes (CONTRACT §23); null: unlimited. */
  monthly: number | null;
  /** monthly is an included allowance (`overage: meter`): no 429 past it, the uses beyond it metered. */
  overage?: boolean;
  /** Requests per minute on rateLimit routes; null: no limit. */
  perMinute: number | null;
}

/**
 * The plan's limits. With no `limits`, exactly the spec: free gets `freeDailyLimit` (1) counted
 * uses a day, every other plan is unlimited, and nothing limits bursts.
 */
export function planLimitsOf(plans: Config['plans'], plan: string): PlanLimits {
  const limits = Object.hasOwn(plans.limits, plan) ? plans.limits[plan] : undefined;
  const freeDaily = plan === 'free' ? plans.freeDailyLimit ?? 1 : null;
  const monthly = limits?.monthly;
  const allowance = typeof monthly === 'object' ? monthly.limit : monthly ?? null;
  // `overage` only when set: the limits /me shows are unchanged for every other plan.
  return { daily: limits?.daily ?? freeDaily, monthly: allowance, perMinute: limits?.perMinute ?? null, ...(typeof monthly === 'object' ? { overage: true } : {}) };
}

/** Uses counted today (users.daily_usage counts the uses of users.last_usage_date only). */
export function usedToday(user: { daily_usage: number; last_usage_date: string | null }, today: string): number {
  return user.last_usage_date === today ? user.daily_usage : 0;
}

/** Uses counted this month (users.monthly_usage counts the month starting users.last_usage_month only). */
export function usedThisMonth(user: { monthly_usage: number; last_usage_month: string | null }, month: string): number {
  return user.last_usage_month === month ? user.monthly_usage : 0;
}

/** What is left of today's quota: null when the plan has none. */
export function dailyRemaining(limits: PlanLimits, used: number): number | null {
  return limits.daily === null ? null : Math.max(0, limits.daily - used);
}

/** What is left of this month's quota: null when the plan has none. */
export function monthlyRemaining(limits: PlanLimits, used: number): number | null {
  return limits.monthly === null ? null : Math.max(0, limits.monthly - used);
}

/** The words of the plan and quota errors (CONTRACT §20): where to upgrade, and what a use is called. */
export interface PlanWords {
  upgradeUrl: string;
  usageNoun: Nouns;
}

/** The words for a route: its own `usageNoun`, else the plans', language by language, else the spec's. */
export function planWordsOf(plans: Config['plans'], routeNoun?: Nouns): PlanWords {
  return { upgradeUrl: plans.upgradeUrl, usageNoun: { ...SPEC_USAGE_NOUN, ...plans.usageNoun, ...routeNoun } };
}

/** A plan or quota denial (made in the spec's words by its guard) in the configured words. */
export function worded(denial: Denial, words: PlanWords): Denial {
  const extra = denial.extra && Object.hasOwn(denial.extra, 'upgrade_url') ? { ...denial.extra, upgrade_url: words.upgradeUrl } : denial.extra;
  const noun = denial.params?.noun;
  const params = typeof noun === 'object' && 'nouns' in noun ? { ...denial.params, noun: { ...noun, nouns: words.usageNoun } } : denial.params;
  return { ...denial, extra, params };
}

/** Each plan's daily (or monthly) limit, for the plans that have one. */
export function windowLimits(config: Pick<Config, 'plans' | 'routes'>, window: 'daily' | 'monthly'): Map<string, number> {
  const limits = new Map<string, number>();
  for (const plan of knownPlans(config)) {
    const limit = planLimitsOf(config.plans, plan)[window];
    if (limit !== null) limits.set(plan, limit);
  }
  return limits;
}
