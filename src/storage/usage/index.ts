// storage/usage/'s one door (issue 73): nothing outside storage/ imports past it. Each file of the
// floor is exported by name and as a namespace (`users.findById`); a new file gets its two lines here.
// What is counted and billed: whose counters (counters.ts), the daily count, metered uses, refunds,
// the owners' usage and denials, usage retention, and the billing tables.
export * from './counters.js';
export * as counters from './counters.js';
export * from './dailyUsage.js';
export * as dailyUsage from './dailyUsage.js';
export * from './meteredUses.js';
export * as meteredUses from './meteredUses.js';
export * from './useRefunds.js';
export * as useRefunds from './useRefunds.js';
export * from './ownerUsage.js';
export * as ownerUsage from './ownerUsage.js';
export * from './ownerDenials.js';
export * as ownerDenials from './ownerDenials.js';
export * from './usageRetention.js';
export * as usageRetention from './usageRetention.js';
export * from './billing.js';
export * as billing from './billing.js';
