// The request pipeline (STYLE 13, after Oathkeeper's proxy/request_handler.go): for a request's
// method, path and headers, either the identity it may pass as or the denial it gets.
//
//   match a route → the guard stages (stages.ts: authenticate → Gateway-Org → org: required →
//   scopes → roles → mfa → plan → per-minute limit → daily limit) → identity headers
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
import { telemetryName, type Denial } from '../errors/index.js';
import type { AuthResult } from './guards/authenticate.js';
import { rateLimitHeaders, type CountedUse } from './guards/quota.js';
import type { LiveSnapshot } from '../live/live.js';
import { runStages, type GuardPolicy, type GuardRun, type StageDeps } from './stages.js';

export type { GuardPolicy } from './stages.js';
import { identityHeaders, keyFactsOf } from './identityHeaders.js';
import { overridingMethods } from '../routing/methodOverrides.js';
import type { RequestContext } from '../live/requestContext.js';
import type { CompiledRoute } from '../routing/routeTable.js';
import { untraced } from '../telemetry/storeCalls.js';
import type { RequestTrace } from '../telemetry/tracing.js';
import type { ApiKeyUsage } from '../keys/index.js';
import type { ActingOrg } from './subject.js';

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
      /** The organization the request acts for (CONTRACT §22), if any. */
      org?: ActingOrg;
      /** For the client, on a counted route: RateLimit-Policy and RateLimit. */
      responseHeaders: Record<string, string> | undefined;
      /** The use counted for the request (CONTRACT §23: what a refund gives back). */
      use?: CountedUse;
    }
  | { kind: 'deny'; denial: Denial };

export type Decision =
  | {
      kind: 'allow';
      route: CompiledRoute;
      /** The path to ask the upstream for (rewritePrefix applied). */
      upstreamPath: string;
      auth: Exclude<AuthResult, { kind: 'denied' }>;
      /** The organization the request acts for (CONTRACT §22), if any. */
      org?: ActingOrg;
      /** The headers that say who the caller is (x-user-*, x-auth-method, x-gateway-assertion); none for anonymous. */
      identity: Record<string, string> | undefined;
      /** Headers for the client's response, added to the upstream's (the RateLimit fields of a counted route). */
      responseHeaders: Record<string, string> | undefined;
      /** The use counted for the request, given back when the upstream fails it (refunds.ts). */
      use?: CountedUse;
    }
  | {
      kind: 'deny';
      /** The route's path, 'own' for an own endpoint, undefined when nothing matched (metrics label). */
      route: string | undefined;
      denial: Denial;
    };

export interface PipelineDeps extends StageDeps {
  assertions: Assertions;
  /** Where each request made with an API key is counted (CONTRACT §21). */
  keyUsage: Pick<ApiKeyUsage, 'record'>;
  /** import.forwardExternalId: upstreams receive x-user-external-id (CONTRACT §27). */
  forwardExternalId?: boolean;
}

const ANONYMOUS: AuthResult = { kind: 'anonymous' };

export interface DecideOptions {
  /** The request is to be forwarded: a decision-only route (no upstream) does not exist for it. */
  forwarding?: boolean;
}

export class Pipeline {
  constructor(private readonly deps: PipelineDeps) {}

  /**
   * The whole pipeline for a request aimed at a route of the table. A promise only when a stage or
   * the assertion needed one: a request decided in memory (auth: none) pays no promise and no tick.
   */
  decide(request: RequestFacts, options: DecideOptions = {}): Decision | Promise<Decision> {
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

    const outcome = this.guard(route, request.headers, context.live, request.trace);
    return outcome instanceof Promise ? outcome.then((o) => this.allowOrDeny(route, match.upstreamPath, o)) : this.allowOrDeny(route, match.upstreamPath, outcome);
  }

  /** The decision the guards' outcome gives: allowed with the caller's identity headers, or denied. */
  private allowOrDeny(route: CompiledRoute, upstreamPath: string, outcome: GuardOutcome): Decision | Promise<Decision> {
    if (outcome.kind === 'deny') return this.denied(route.path, outcome.denial);
    const { auth, org } = outcome;
    if (auth.kind !== 'authenticated') return this.allowed(route, upstreamPath, outcome, undefined);
    const key = keyFactsOf(auth);
    const identity = identityHeaders(auth.user, auth.method, key, org, this.deps.forwardExternalId);
    if (!route.target?.assertion) return this.allowed(route, upstreamPath, outcome, identity);
    return this.deps.assertions.headerFor(auth.user, auth.method, route.target.name, key, org)
      .then((assertion) => this.allowed(route, upstreamPath, outcome, Object.assign(identity, assertion)));
  }

  /** Counted as allowed; a method, not a closure, so an allowed request allocates no function. */
  private allowed(route: CompiledRoute, upstreamPath: string, outcome: Extract<GuardOutcome, { kind: 'pass' }>, identity: Record<string, string> | undefined): Decision {
    this.deps.tallies.decided(route.path, 'allowed');
    const { auth, org, responseHeaders, use } = outcome;
    return { kind: 'allow', route, upstreamPath, auth, org, identity, responseHeaders, use };
  }

  /**
   * The guard stages (stages.ts) the policy asks for, in the contract's order; limits as `live` has
   * them. A request made with an API key is counted for the key's usage (CONTRACT §21), as denied
   * when refused once the key was known.
   */
  guard(policy: GuardPolicy, headers: IncomingHttpHeaders, live: LiveSnapshot, trace?: RequestTrace): GuardOutcome | Promise<GuardOutcome> {
    const run: GuardRun = { policy, headers, live, deps: this.deps, auth: ANONYMOUS, calls: untraced, quotas: [] };
    const denial = runStages(run, trace);
    return denial instanceof Promise ? denial.then((d) => this.outcomeOf(run, d)) : this.outcomeOf(run, denial);
  }

  /** What the stages' run came to. */
  private outcomeOf(run: GuardRun, denial: Denial | undefined): GuardOutcome {
    // One Map lookup: what a key did is written off the request path (keys/usage.ts).
    // A key found but refused itself (expired, its owner deactivated) is a denial, not a use.
    const { keyId } = run.auth as { keyId?: number };
    if (keyId !== undefined) this.deps.keyUsage.record(keyId, this.deps.auth.clock(), denial !== undefined, run.auth.kind === 'authenticated');
    if (denial) return { kind: 'deny', denial };
    // Anonymous here only on auth: none or optional, where the config allows no plan, quota or
    // limit (config/schema.ts: they need auth: required).
    const { auth } = run as { auth: Exclude<AuthResult, { kind: 'denied' }> };
    return { kind: 'pass', auth, org: run.org, responseHeaders: run.quotas.length ? rateLimitHeaders(run.quotas) : undefined, use: run.use };
  }

  private denied(route: string, denial: Denial): Decision & { kind: 'deny' } {
    this.deps.tallies.decided(route, telemetryName(denial.code));
    return { kind: 'deny', route, denial };
  }
}
