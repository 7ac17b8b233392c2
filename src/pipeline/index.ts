// The pipeline's one door (docs/architecture.md): what the listeners, the proxy, the decisions
// listener and the rooms that show a user's plan read of it. The stages behind it (guards/, the
// identity headers, the assertion signer) are reached through the Pipeline, never directly.
export { traceDecision } from './decisionTrace.js';
export { Pipeline, type Decision, type DecideOptions, type GuardOutcome, type GuardPolicy, type PipelineDeps, type RequestFacts } from './pipeline.js';
export type { AuthMethod, Identity } from './guards/authenticate.js';
export { checkPlan } from './guards/plan.js';
export { checkScopes } from './guards/scopes.js';
export { DailyLimiter } from './guards/dailyLimit/index.js';
export { UseRefunds, type UpstreamOutcome } from './guards/refunds.js';
export type { CountedUse } from './guards/quota.js';
export { MinuteLimiter } from './guards/minuteLimit.js';
export { AssertionSigner, type Assertions } from './assertionSigner.js';
export { isIdentityHeader, isOrgHeader, isReservedIdentityHeader, KEY_ID_HEADER, ORG_HEADER, ORG_IDENTITY_HEADERS } from './identityHeaders.js';
export type { ActingOrg } from './subject.js';
export { dailyRemaining, knownPlans, monthlyRemaining, planLimitsOf, planWordsOf, usedThisMonth, usedToday, worded, type PlanLimits } from './plans.js';
