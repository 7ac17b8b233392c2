// The request pipeline (STYLE 13, after Oathkeeper's proxy/request_handler.go): for a request's
// method, path and headers, either the identity it may pass as or the denial it gets.
//
//   match a route → authenticate → plan guard → per-minute limit → daily limit → identity headers
//
// Every way a request can reach something the gateway protects goes through here: the proxy
// (proxy/forwarder.ts) before forwarding, WebSocket upgrades there too (with the access_token query
// parameter read as their bearer token: proxy/websocket.ts), the gateway's own endpoints
// (listener/requireUser.ts) with a policy of their own, and the decisions listener (decisions/app.ts).
// Each hands it the request's context (requestContext.ts: the live snapshot, the path read once,
// the route matched once). Nothing here forwards, answers or logs: callers do that with the
// Decision they get. The stages' logic lives in guards/, the routes' in routing/.
import type { IncomingHttpHeaders } from 'node:http';
import type { Assertions } from './assertionSigner.js';
import { telemetryName, type Denial, type Nouns } from '../errors/index.js';
import { authenticate, bearerToken, type AuthDeps, type AuthResult } from './guards/authenticate.js';
import type { DailyLimiter } from './guards/dailyLimit.js';
import type { MinuteLimiter } from './guards/minuteLimit.js';
import { rateLimitHeaders, type QuotaOutcome, type QuotaState } from './guards/quota.js';
import { checkPlan } from './guards/plan.js';
import { checkScopes } from './guards/scopes.js';
import type { LiveSnapshot } from '../live/live.js';
import { planLimitsOf, planWordsOf, worded } from './plans.js';
import type { RouteTallies } from '../telemetry/metrics.js';
import { identityHeaders } from './identityHeaders.js';
import { overridingMethods } from '../routing/methodOverrides.js';
import type { RequestContext } from '../live/requestContext.js';
import type { CompiledRoute } from '../routing/routeTable.js';
import { untraced, type StoreCalls } from '../telemetry/storeCalls.js';
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
  /** An own endpoint: its scope rule is requireUser's (GET /api/v1/user/me takes any key). */
  own?: boolean;
  /** The route's noun for the quota messages (CONTRACT §20); unset: plans.usageNoun. */
  usageNoun?: Nouns;
  /** The route's path, for the quota metrics; own endpoints count nothing. */
  path?: string;
}

/** The request as the pipeline reads it: its context and headers; nothing of the connection, nothing of the body. */
export interface RequestFacts {
  context: RequestContext;
  headers: IncomingHttpHeaders;
  /** With tracing: each stage becomes a child span of the request's. */
  trace?: RequestTrace;
}

export type GuardOutcome =
  | {
      kind: 'pass';
      auth: Exclude<AuthResult, { kind: 'denied' }>;
      /** For the client, on a counted route: RateLimit-Policy and RateLimit. */
      responseHeaders: Record<string, string> | undefined;
    }
  | { kind: 'deny'; denial: Denial };

export type Decision =
  | {
      kind: 'allow';
      route: CompiledRoute;
      /** The path to ask the upstream for (rewritePrefix applied). */
      upstreamPath: string;
      auth: Exclude<AuthResult, { kind: 'denied' }>;
      /** The headers that say who the caller is (x-user-*, x-auth-method, x-gateway-assertion); none for anonymous. */
      identity: Record<string, string> | undefined;
      /** Headers for the client's response, added to the upstream's (the RateLimit fields of a counted route). */
      responseHeaders: Record<string, string> | undefined;
    }
  | {
      kind: 'deny';
      /** The route's path, 'own' for an own endpoint, undefined when nothing matched (metrics label). */
      route: string | undefined;
      denial: Denial;
    };

export interface PipelineDeps {
  auth: AuthDeps;
  daily: DailyLimiter;
  minute: MinuteLimiter;
  assertions: Assertions;
  tallies: RouteTallies;
}

export interface DecideOptions {
  /** The request is to be forwarded: a decision-only route (no upstream) does not exist for it. */
  forwarding?: boolean;
}

export class Pipeline {
  constructor(private readonly deps: PipelineDeps) {}

  /** The whole pipeline for a request aimed at a route of the table. */
  async decide(request: RequestFacts, options: DecideOptions = {}): Promise<Decision> {
    const { context } = request;
    const { path } = context;
    if (path === undefined) return { kind: 'deny', route: undefined, denial: { code: 'badRequest' } };
    // The gateway forwards the path it decided for; a proxy asking for a decision forwards the
    // client's, unresolved. Decided as `/public/x`, `/premium/%2e%2e/public/x` would reach an
    // application that routes `..` as an id (Rails, Express) under the premium route, anonymously.
    // So a decision is only made for a path already in the form the gateway reads it.
    if (!options.forwarding && path !== context.rawPath) return { kind: 'deny', route: undefined, denial: { code: 'badRequest' } };
    // The gateway's own paths never reach an upstream, whatever the route table says: another
    // method on /api/v1/auth/login is a 405 here, not a request to the application behind.
    if (context.own.length) return this.denied('own', { code: 'methodNotAllowed', headers: { allow: context.own.join(', ') } });
    // Another spelling of an own endpoint, which a route on a shorter prefix would otherwise take
    // with the credentials in its body, is refused rather than served.
    if (context.ownSpelling) return this.denied('own', { code: 'routeNotFound' });

    const { match } = context;
    if (match.kind === 'none') return { kind: 'deny', route: undefined, denial: { code: 'routeNotFound' } };
    const route = match.route;
    // Before any guard, so that the public listener tells nothing about a decision-only route (not
    // even that it wants a token) and counts no use for it (CONTRACT §11).
    if (options.forwarding && !route.target) return { kind: 'deny', route: undefined, denial: { code: 'routeNotFound' } };
    // A POST carrying `X-HTTP-Method-Override: DELETE` (or `?_method=DELETE`) runs as a DELETE in
    // the upstream: it gets the 405 a DELETE gets, or `methods` would restrict nothing.
    if (match.kind === 'method-not-allowed' || overridingMethods(request.headers, context.query).some((m) => !route.allowedMethods.has(m))) {
      return this.denied(route.path, { code: 'methodNotAllowed', headers: { allow: [...route.allowedMethods].join(', ') } });
    }

    const outcome = await this.guard(route, request.headers, context.live, request.trace);
    if (outcome.kind === 'deny') return this.denied(route.path, outcome.denial);
    const { auth } = outcome;
    let identity: Record<string, string> | undefined;
    if (auth.kind === 'authenticated') {
      identity = identityHeaders(auth.user, auth.method);
      if (route.target?.assertion) Object.assign(identity, await this.deps.assertions.headerFor(auth.user, auth.method, route.target.name));
    }
    this.deps.tallies.decided(route.path, 'allowed');
    return { kind: 'allow', route, upstreamPath: match.upstreamPath, auth, identity, responseHeaders: outcome.responseHeaders };
  }

  /** authenticate → plan → per-minute → daily, each only when the policy asks for it; limits as `live` has them. */
  async guard(policy: GuardPolicy, headers: IncomingHttpHeaders, live: LiveSnapshot, trace?: RequestTrace): Promise<GuardOutcome> {
    const bearer = bearerToken(headers);
    let auth: AuthResult = { kind: 'anonymous' };
    const mfa = policy.mfa === 'required';
    if (policy.auth !== 'none' || mfa) {
      const span = trace?.start('gateway.authenticate');
      auth = await authenticate(headers, this.deps.auth, bearer, span ? trace!.calls(span) : untraced);
      span?.setAttribute('gateway.outcome', auth.kind === 'denied' ? telemetryName(auth.denial.code) : auth.kind).end();
      if (auth.kind === 'denied') return { kind: 'deny', denial: auth.denial };
      if (auth.kind === 'anonymous' && (policy.auth === 'required' || mfa)) return { kind: 'deny', denial: { code: 'tokenMissing' } };
      if (mfa && (auth.kind !== 'authenticated' || auth.method !== 'bearer' || auth.acr !== 'aal2')) return { kind: 'deny', denial: { code: 'mfaRequired' } };
    }
    // Anonymous past this point only on auth: none or optional, where the config allows no plan,
    // quota or limit (config/schema.ts: they need auth: required).
    if (auth.kind !== 'authenticated') return { kind: 'pass', auth, responseHeaders: undefined };
    const { user } = auth;
    // A restricted key (one with scopes) is refused before its plan and quotas are looked at.
    const scopeDenial = policy.own ? null : checkScopes(auth, policy.scopes);
    if (scopeDenial) return { kind: 'deny', denial: scopeDenial };
    if (policy.plans) {
      const span = trace?.start('gateway.plan');
      const denial = checkPlan(user, policy.plans);
      span?.setAttribute('gateway.outcome', denial ? denial.code : 'allow').end();
      if (denial) return { kind: 'deny', denial: worded(denial, planWordsOf(live.settings.plans, policy.usageNoun)) };
    }
    if (!(policy.rateLimit || policy.dailyLimit)) return { kind: 'pass', auth, responseHeaders: undefined };

    // Per minute first: a request refused for bursting must not use up one of the day's uses.
    const limits = planLimitsOf(live.settings.plans, user.plan);
    const quotas: QuotaState[] = [];
    const count = async (kind: 'minute' | 'daily', consume: (calls: StoreCalls) => Promise<QuotaOutcome>): Promise<Denial | undefined> => {
      const span = trace?.start(kind === 'minute' ? 'gateway.per_minute_limit' : 'gateway.daily_limit');
      const { state, denial } = await consume(span ? trace!.calls(span) : untraced);
      span?.setAttribute('gateway.outcome', denial ? denial.code : 'allow').end();
      quotas.push(state);
      this.deps.tallies.quota(kind, user.plan, policy.path ?? 'own', denial ? 'refused' : 'admitted');
      return denial && { ...worded(denial, planWordsOf(live.settings.plans, policy.usageNoun)), headers: { ...denial.headers, ...rateLimitHeaders(quotas) } };
    };
    const { perMinute, daily } = limits;
    const denial = (policy.rateLimit && perMinute !== null ? await count('minute', (calls) => this.deps.minute.consume(user.id, perMinute, calls)) : undefined)
      ?? (policy.dailyLimit && daily !== null ? await count('daily', (calls) => this.deps.daily.consume(user, daily, calls)) : undefined);
    if (denial) return { kind: 'deny', denial };
    return { kind: 'pass', auth, responseHeaders: quotas.length ? rateLimitHeaders(quotas) : undefined };
  }

  private denied(route: string, denial: Denial): Decision & { kind: 'deny' } {
    this.deps.tallies.decided(route, telemetryName(denial.code));
    return { kind: 'deny', route, denial };
  }
}
