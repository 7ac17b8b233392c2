// The guard stages in the order a request meets them (CONTRACT §22, "Order of checks"): the first
// refusal answers, and nothing after it runs or counts. Each stage is one line of GUARD_STAGES:
// whether the policy asks for it, what it checks, and (for the ones that can take time) its span.
// A new check is a new line here, not a new branch in the pipeline.
import type { IncomingHttpHeaders } from 'node:http';
import { bearerChallenge, telemetryName, type Denial, type Nouns } from '../errors/index.js';
import { authenticate, bearerToken, type AuthDeps, type AuthResult, type Identity } from './guards/authenticate.js';
import type { DailyLimiter } from './guards/dailyLimit/index.js';
import type { MinuteLimiter } from './guards/minuteLimit.js';
import type { CountedUse, QuotaOutcome, QuotaState } from './guards/quota.js';
import { rateLimitHeaders } from './guards/quota.js';
import { checkPlan } from './guards/plan.js';
import { checkScopes } from './guards/scopes.js';
import { checkRoles } from '../orgActing.js';
import { keyOrgStage, orgStage, type OrgDeps } from './guards/org.js';
import { billingSubject, type ActingOrg, type BillingSubject } from './subject.js';
import type { LiveSnapshot } from '../live/live.js';
import { planLimitsOf, planWordsOf, worded, type PlanLimits } from './plans.js';
import type { RouteTallies } from '../telemetry/metrics.js';
import type { OwnerDenials } from '../storage/usage/index.js';
import { untraced, type StoreCalls } from '../telemetry/storeCalls.js';
import type { GatewaySpan } from '../telemetry/spans.js';
import type { RequestTrace } from '../telemetry/tracing.js';

/** What a route (or an own endpoint) asks of a request. */
export interface GuardPolicy {
  auth: 'required' | 'optional' | 'none';
  plans?: readonly string[];
  /** CONTRACT §14: `required` lets through only `aal2` access tokens (never an API key); implies auth. */
  mfa?: 'required' | 'optional';
  dailyLimit?: boolean;
  rateLimit?: boolean;
  /** The scopes a key with scopes must hold (CONTRACT §21); unset: such a key passes only with `*`. */
  scopes?: readonly string[];
  /** A key with scopes passes whatever they are (GET /api/v1/user/me, CONTRACT §21). */
  anyKey?: boolean;
  /** A bearer sign-in only: an API key is refused, 401 api_key_not_accepted (CONTRACT §21's own endpoints). */
  bearerOnly?: boolean;
  /** The route's noun for the quota messages (CONTRACT §20); unset: plans.usageNoun. */
  usageNoun?: Nouns;
  /** The route's path, for the quota metrics; own endpoints count nothing (and ignore Gateway-Org). */
  path?: string;
  /** CONTRACT §22: a route's `org` (unset: Gateway-Org refused on it) and `roles` (implies org: required). */
  org?: 'required' | 'optional';
  roles?: readonly string[];
}

/** What the stages count with. */
export interface StageDeps {
  auth: AuthDeps;
  daily: DailyLimiter;
  minute: MinuteLimiter;
  tallies: RouteTallies;
  /** Where each quota refusal is counted for its owner's day (CONTRACT §30's usage `denied`). */
  denials: Pick<OwnerDenials, 'record'>;
  /** With organizations.enabled only: Gateway-Org is read (CONTRACT §22). */
  orgs?: OrgDeps;
}

/** One request's way through the stages: what they read, and what each leaves for the next. */
export interface GuardRun {
  readonly policy: GuardPolicy;
  readonly headers: IncomingHttpHeaders;
  readonly live: LiveSnapshot;
  readonly deps: StageDeps;
  /** Set by `authenticate`; anonymous until then (and on `auth: none`). */
  auth: AuthResult;
  /** The storage-call tracer of the stage running (untraced without tracing). */
  calls: StoreCalls;
  /** The limits that applied so far, for the RateLimit fields. */
  readonly quotas: QuotaState[];
  /** The organization the request acts for, set by the Gateway-Org stage. */
  org?: ActingOrg;
  /** An organization key's organization and role (the key's standing stage). */
  keyOrg?: ActingOrg;
  /** The caller's plan's limits, read once by the first limit stage. */
  limits?: PlanLimits;
  /** The use the daily stage counted, for a refund (refunds.ts). */
  use?: CountedUse;
}

export interface GuardStage {
  /** The span the stage is traced as; none for the checks made in memory. */
  readonly span?: string;
  /** Whether the stage can apply to any request under `policy` (organizations enabled or not): false leaves it out of the policy's list (stagesFor). */
  can(policy: GuardPolicy, orgs: boolean): boolean;
  /** Whether this request's policy (and what the stages before found) asks for the stage. */
  applies(run: GuardRun): boolean;
  check(run: GuardRun): Denial | undefined | Promise<Denial | undefined>;
  /** The span's outcome when the stage lets the request on (default `allow`). */
  passed?(run: GuardRun): string;
}

const authenticated = (run: GuardRun): run is GuardRun & { auth: Identity & { kind: 'authenticated' } } => run.auth.kind === 'authenticated';
const mfaRequired = (policy: GuardPolicy) => policy.mfa === 'required';
/** Whether the request names an organization (Gateway-Org, or an organization key) on a route, while organizations are enabled. */
const actsForOrg = (run: GuardRun) => !!run.deps.orgs && run.policy.path !== undefined && (run.headers['gateway-org'] !== undefined || !!run.keyOrg);
// A refused organization key, and Gateway-Org without a credential where one is optional (CONTRACT §22).
const TOKEN_INVALID: Denial = { code: 'tokenInvalid', headers: bearerChallenge(true) };

function orgKeyStage(run: GuardRun): Promise<Denial | undefined> | Denial {
  if (run.policy.path === undefined) return { code: 'apiKeyNotAccepted' };
  return keyOrgStage(run, TOKEN_INVALID);
}
const orgRequired = (policy: GuardPolicy) => policy.org === 'required' || !!policy.roles;
/** Whether the policy authenticates: every stage that needs a caller needs this. */
const authenticates = (policy: GuardPolicy) => policy.auth !== 'none' || mfaRequired(policy);

/** Whose plan and whose counter (subject.ts), for an authenticated request. */
export function subjectOf(run: GuardRun): BillingSubject {
  return billingSubject((run.auth as Identity).user, run.org);
}

export const GUARD_STAGES: readonly GuardStage[] = [
  { span: 'gateway.authenticate', can: authenticates, applies: (run) => authenticates(run.policy), check: authenticateStage, passed: (run) => run.auth.kind },
  // CONTRACT §21: endpoints that take a bearer sign-in only refuse a key before any scope check.
  { can: (p) => authenticates(p) && !!p.bearerOnly, applies: (run) => authenticated(run) && !!run.policy.bearerOnly && run.auth.method !== 'bearer', check: () => ({ code: 'apiKeyNotAccepted' }) },
  // (2) An organization key: valid only while its creator is a member; it acts for the user on no
  // own endpoint.
  { span: 'gateway.org_key', can: authenticates, applies: (run) => authenticated(run) && !!run.auth.orgKey, check: orgKeyStage },
  // CONTRACT §22 (3): Gateway-Org (or an organization key), on routes only (own endpoints act for the user).
  { span: 'gateway.org', can: (p, orgs) => orgs && p.path !== undefined, applies: (run) => actsForOrg(run), check: (run) => orgStage(run, TOKEN_INVALID) },
  // (4) org: required (roles imply it).
  { can: orgRequired, applies: (run) => orgRequired(run.policy) && !run.org, check: () => ({ code: 'orgRequired' }) },
  // (5) A restricted key (one with scopes) is refused before anything else is looked at.
  { can: (p) => authenticates(p) && !p.anyKey, applies: (run) => authenticated(run) && !run.policy.anyKey, check: (run) => checkScopes(run.auth as Identity, run.policy.scopes) ?? undefined },
  // (6) roles, with the role the request acts with.
  { can: (p) => !!p.roles, applies: (run) => !!run.policy.roles && !!run.org, check: (run) => checkRoles(run.org!, run.policy.roles!) },
  { can: mfaRequired, applies: (run) => authenticated(run) && mfaRequired(run.policy), check: mfaStage },
  { span: 'gateway.plan', can: (p) => authenticates(p) && !!p.plans, applies: (run) => authenticated(run) && !!run.policy.plans, check: planStage },
  // Per minute before the day: a request refused for bursting must not use up one of the day's uses.
  { span: 'gateway.per_minute_limit', can: (p) => authenticates(p) && !!p.rateLimit, applies: (run) => !!run.policy.rateLimit && limitsOf(run)?.perMinute != null, check: minuteStage },
  // CONTRACT §22 (10): the month and the day, reserved together (a use counts on both or on neither).
  // The span keeps the name dashboards already use.
  { span: 'gateway.daily_limit', can: (p) => authenticates(p) && !!p.dailyLimit, applies: (run) => !!run.policy.dailyLimit && countsUses(limitsOf(run)), check: dailyStage },
];

// Each policy's stages, worked out once: a route's policy is its compiled route, kept for the
// snapshot's life, and own endpoints' are constants. A route on auth: none without organizations
// has none, where the run asked all eleven whether they applied (issue 77).
const STAGES_OF = [new WeakMap<GuardPolicy, readonly GuardStage[]>(), new WeakMap<GuardPolicy, readonly GuardStage[]>()] as const;

/** The stages of GUARD_STAGES that can apply under `policy`, in their order. */
export function stagesFor(policy: GuardPolicy, orgs: boolean): readonly GuardStage[] {
  const kept = STAGES_OF[orgs ? 1 : 0];
  let stages = kept.get(policy);
  if (!stages) kept.set(policy, (stages = GUARD_STAGES.filter((stage) => stage.can(policy, orgs))));
  return stages;
}

/**
 * Runs the stages in order; the first denial ends the run. Synchronous until a stage answers with a
 * promise (a lookup, a count): a route whose stages all decide in memory (auth: none) pays no
 * promise and no tick for them. An index, not for…of: across an await V8 keeps the array iterator
 * and calls its next() per stage (about 100 instructions each, `npm run instructions`).
 */
export function runStages(run: GuardRun, trace: RequestTrace | undefined, stages = stagesFor(run.policy, !!run.deps.orgs), from = 0): Denial | undefined | Promise<Denial | undefined> {
  for (let i = from; i < stages.length; i++) {
    const stage = stages[i]!;
    if (!stage.applies(run)) continue;
    const span = stage.span ? trace?.start(stage.span) : undefined;
    run.calls = span ? trace!.calls(span) : untraced;
    const result = stage.check(run);
    if (result instanceof Promise) return result.then((denial) => endStage(stage, run, span, denial) ?? runStages(run, trace, stages, i + 1));
    const denial = endStage(stage, run, span, result);
    if (denial) return denial;
  }
  return undefined;
}

/** Ends a stage's span with its outcome; the denial, if it refused. */
function endStage(stage: GuardStage, run: GuardRun, span: GatewaySpan | undefined, denial: Denial | undefined): Denial | undefined {
  span?.setAttribute('gateway.outcome', denial ? telemetryName(denial.code) : stage.passed?.(run) ?? 'allow').end();
  return denial;
}

function authenticateStage(run: GuardRun): Denial | undefined | Promise<Denial | undefined> {
  const auth = authenticate(run.headers, run.deps.auth, bearerToken(run.headers, run.deps.auth.tokens), run.calls);
  return auth instanceof Promise ? auth.then((a) => afterAuthentication(run, a)) : afterAuthentication(run, auth);
}

/** What authenticate found, kept for the stages after; the denial, if the policy refuses it. */
function afterAuthentication(run: GuardRun, auth: AuthResult): Denial | undefined {
  run.auth = auth;
  if (run.auth.kind === 'denied') return run.auth.denial;
  if (run.auth.kind === 'anonymous' && (run.policy.auth === 'required' || mfaRequired(run.policy))) return { code: 'tokenMissing' };
  return undefined;
}

/** CONTRACT §14: only a bearer token from a second-factor sign-in passes; never an API key. Runs for an authenticated caller only. */
function mfaStage(run: GuardRun): Denial | undefined {
  const auth = run.auth as Identity;
  return auth.method === 'bearer' && auth.acr === 'aal2' ? undefined : { code: 'mfaRequired' };
}

function planStage(run: GuardRun): Denial | undefined {
  const denial = checkPlan(subjectOf(run).plan, run.policy.plans!);
  return denial ? worded(denial, planWordsOf(run.live.settings.plans, run.policy.usageNoun)) : undefined;
}

/** Anonymous requests count nothing: the config lets no limit apply on auth: none or optional. */
function limitsOf(run: GuardRun): PlanLimits | undefined {
  if (!authenticated(run)) return undefined;
  return (run.limits ??= planLimitsOf(run.live.settings.plans, subjectOf(run).plan));
}

/** Whether the plan counts uses on dailyLimit routes: a daily or a monthly quota. */
const countsUses = (limits: PlanLimits | undefined) => !!limits && (limits.daily !== null || limits.monthly !== null);

function minuteStage(run: GuardRun): Promise<Denial | undefined> {
  return counted(run, run.deps.minute.consume(subjectOf(run).counter, run.limits!.perMinute!, run.calls));
}

function dailyStage(run: GuardRun): Promise<Denial | undefined> {
  const { counter, plan } = subjectOf(run);
  return counted(run, run.deps.daily.consume({ ...counter, plan }, run.limits!, run.calls));
}

/** A limiter's answer, tallied and kept for the RateLimit fields; its denial in the plans' words, with those fields. */
async function counted(run: GuardRun, outcome: Promise<QuotaOutcome>): Promise<Denial | undefined> {
  const { state, others = [], denial, use } = await outcome;
  if (use) run.use = use;
  if (denial) run.deps.denials.record(subjectOf(run).counter, run.deps.auth.clock());
  for (const s of [state, ...others]) {
    run.quotas.push(s);
    run.deps.tallies.quota(s.policy, subjectOf(run).plan, run.policy.path ?? 'own', denial ? 'refused' : 'admitted');
  }
  return denial && { ...worded(denial, planWordsOf(run.live.settings.plans, run.policy.usageNoun)), headers: { ...denial.headers, ...rateLimitHeaders(run.quotas) } };
}
