// What is routed: plans and their limits, CORS policies, routes, upstreams.
import { z } from 'zod';
import { bool, duration, headerName, int, onlyFalse, optionalText, origin } from './values.js';
import { normalizePath } from '../../routing/paths.js';

// The plans the spec names: they always exist (free is every new account's, pro unlocks API keys
// and webhooks). Others come into being by being named in plans.limits or a route's plans.
export const BASE_PLANS = ['free', 'premium', 'pro'] as const;

/** Every plan the configuration knows: the spec's three, those with limits, those routes name. */
export function knownPlans(config: { plans: { limits: Record<string, unknown> }; routes: ReadonlyArray<{ plans?: readonly string[] | undefined }> }): string[] {
  const plans = new Set<string>(BASE_PLANS);
  for (const plan of Object.keys(config.plans.limits)) plans.add(plan);
  for (const route of config.routes) for (const plan of route.plans ?? []) plans.add(plan);
  return [...plans];
}
export type Plan = string;
// A plan travels in x-user-plan and in metric labels: a short lower-case name, as the database checks (008).
export const PLAN_NAME = /^[a-z][a-z0-9_-]{0,31}$/;
export const planName = z.string().regex(PLAN_NAME, 'expected a plan name: lower-case letters, digits, - and _, starting with a letter, at most 32')
  .meta({ title: 'plan name', examples: ['premium', 'pro'] });
// users.daily_usage is a Postgres integer: a larger limit would fail every counting UPDATE.
export const MAX_LIMIT = 2_147_483_647;
export const planLimits = z.strictObject({
  daily: int(1, MAX_LIMIT).meta({ examples: [1000] }).optional().meta({ description: 'Counted uses per UTC day on routes with dailyLimit: true; none: unlimited (free: plans.freeDailyLimit).' }),
  monthly: z.union([
    int(1, MAX_LIMIT).meta({ examples: [100000] }),
    // CONTRACT §23: included, then metered: no 429 past `limit`, the uses beyond it reported to billing.stripe.meter.
    // limit 0: nothing included, every counted use billed (a usage-based plan, CONTRACT §29).
    z.strictObject({ limit: int(0, MAX_LIMIT), overage: z.literal('meter') }).meta({ examples: [{ limit: 100000, overage: 'meter' }, { limit: 0, overage: 'meter' }] }),
  ]).optional().meta({ description: 'Counted uses per UTC month on routes with dailyLimit: true, reserved together with daily; none: unlimited. '
    + '{limit, overage: meter}: uses past limit are served and reported to the Stripe meter (needs billing.stripe.meter).' }),
  perMinute: int(1, MAX_LIMIT).meta({ examples: [60] }).optional().meta({
    description: 'Requests per minute on routes with rateLimit: true (a bucket of this size, refilled over 60 s); none: no limit.',
  }),
});
// CONTRACT §23: a counted use given back when the upstream failed it. Absent: no refunds.
export const refundOn = z.strictObject({
  statuses: z.array(int(400, 599)).default([]).meta({ examples: [[503]], description: 'Upstream statuses (or the gateway\'s 504 for an upstream timeout, when listed) that give the use back.' }),
  unreachable: bool().default(false).meta({ description: 'Give the use back when the upstream could not be reached (connection refused or reset, TLS failure).' }),
  capPerDay: int(1, MAX_LIMIT).optional().meta({ examples: [10], description: 'At most this many refunds per owner per UTC day; none: no cap.' }),
}).meta({ description: 'When a counted use goes back to the windows it was counted in (docs/billing.md). Absent: never.' });
// The noun of the quota messages in each language (CONTRACT §20): "… (plan free: 1 course/jour)".
const LANGUAGE_TAG = /^[a-z]{2,3}(?:-[a-z0-9]{2,8})?$/;
const noun = z.string().min(1).max(40).regex(/^[^{}<>\p{Cc}]+$/u, 'expected a word (no braces, angle brackets or control characters)');
export const usageNoun = z.record(z.string().regex(LANGUAGE_TAG, 'expected a language tag such as en or pt-br'), z.strictObject({ one: noun, many: noun }))
  .meta({
    description: 'The noun of the quota messages per language, singular and plural: { fr: { one: course, many: courses }, en: { one: request, many: requests } } (the spec\'s wording); '
      + 'a language left out keeps the default.',
    examples: [{ en: { one: 'forecast', many: 'forecasts' } }],
  });
/** A scope a route declares and a key holds: `reports:read`. `*` (every right) is a key's only. */
export const SCOPE = /^[A-Za-z0-9][A-Za-z0-9:._-]{0,63}$/;
/** An organization member's roles (CONTRACT §22), strongest first; storage/orgs/organizations.ts keeps the same list. */
export const ORG_ROLE_NAMES = ['owner', 'admin', 'member'] as const;
export const HTTP_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

export const corsFields = {
  origins: z.array(origin).min(1),
  credentials: bool(),
  headers: z.array(headerName),
  exposeHeaders: z.array(headerName),
  maxAge: duration,
};
// The whole policy, with what a browser page calling the gateway needs by default: its token, a
// JSON body and an API key may be sent; the request id and Retry-After (of a 429) may be read.
export const corsSchema = z.strictObject({
  origins: corsFields.origins,
  credentials: corsFields.credentials.prefault(false),
  headers: corsFields.headers.default(['authorization', 'content-type', 'x-api-key']),
  exposeHeaders: corsFields.exposeHeaders.default(['x-request-id', 'retry-after']),
  maxAge: corsFields.maxAge.prefault('10m'),
}).meta({
  // corsProblem below: "*" alone, and never with credentials.
  allOf: [{ if: { required: ['origins'], properties: { origins: { contains: { const: '*' } } } }, then: { properties: { origins: { maxItems: 1 }, credentials: onlyFalse } } }],
});
/** What a policy holds when neither the global `cors` nor a route's override says otherwise. */
export const CORS_DEFAULTS = (({ origins: _origins, ...defaults }) => defaults)(corsSchema.parse({ origins: ['*'] }));
// A route's override: what it names replaces the global policy's value, the rest is kept.
export const routeCorsSchema = z.strictObject({
  origins: corsFields.origins.optional(),
  credentials: corsFields.credentials.optional(),
  headers: corsFields.headers.optional(),
  exposeHeaders: corsFields.exposeHeaders.optional(),
  maxAge: corsFields.maxAge.optional(),
});

export const routeSchema = z.strictObject({
  // No `;`: routes are matched on paths without segment parameters (routeTable.ts, matchKey).
  path: z.string().regex(/^\/[^?#;\s]*$/, 'expected a path starting with / (no query, no `;`, no spaces)').meta({ examples: ['/api'] })
    .transform((p) => (p.length > 1 ? p.replace(/\/+$/, '') || '/' : p)),
  // Optional only beside a decisions listener: a route without one is decided, never proxied.
  upstream: z.string().min(1).meta({ examples: ['app'] }).optional(),
  // Any case; the schema's enum (editor completion) lists the upper-case spelling.
  methods: z.array(z.preprocess((m) => (typeof m === 'string' ? m.toUpperCase() : m), z.enum(HTTP_METHODS).meta({ title: 'HTTP method' }))).min(1).optional(),
  auth: z.enum(['required', 'optional', 'none']).default('required'),
  plans: z.array(planName).min(1).optional(),
  dailyLimit: bool().prefault(false),
  rateLimit: bool().prefault(false),
  usageNoun: usageNoun.optional(),
  rewritePrefix: z.string().regex(/^(\/[^?#\s]*)?$/, 'expected a path starting with /').meta({ examples: ['/'] }).optional(),
  cors: routeCorsSchema.optional(),
  // Accept WebSocket upgrades (CONTRACT §10): the route's guards run on the upgrade.
  websocket: bool().prefault(false),
  // Paths holding encoded separators (`group%2Fproject`) are refused unless the route carries them
  // (CONTRACT §19): then forwarded undecoded, the route's guards over the whole path as received.
  encodedSeparators: z.enum(['refuse', 'keep']).default('refuse')
    .meta({ description: 'keep: accept paths with %2F, %5C, %3B, %00 (also encoded twice) or look-alike Unicode separators under this route, forwarded undecoded; refuse (default): 400.' }),
  // CONTRACT §14: only access tokens from a second-factor sign-in (acr aal2) pass; implies auth: required.
  mfa: z.enum(['required', 'optional']).default('optional'),
  // CONTRACT §21: an API key with scopes passes only holding every one of these (or `*`).
  scopes: z.array(z.string().regex(SCOPE, 'expected a scope such as reports:read (letters, digits, : . _ -; not *)')).min(1).optional()
    .meta({
      description: 'Scopes an API key with scopes must hold, every one, to pass (a key without scopes, or a bearer sign-in, passes as before); needs auth: required or optional.',
      examples: [['reports:read']],
    }),
  // CONTRACT §22: whether requests may (optional) or must (required) act for an organization
  // (Gateway-Org, an organization key); a route without it refuses Gateway-Org (400).
  org: z.enum(['required', 'optional']).optional()
    .meta({
      description: 'required: only requests acting for an organization (Gateway-Org, or an organization key) pass; optional: they may; unset: Gateway-Org is refused (400). '
        + 'Without organizations.enabled nothing acts for one (gateway check warns); required needs auth: required, optional an auth other than none.',
    }),
  roles: z.array(z.enum(ORG_ROLE_NAMES)).min(1).optional()
    .meta({ description: 'The organization roles that pass (implies org: required, needs auth: required).', examples: [['owner', 'admin']] }),
}).meta({
  // The rule of configSchema's check below: plans, dailyLimit and rateLimit need auth: required.
  allOf: [
    { if: { required: ['auth'], properties: { auth: { enum: ['optional', 'none'] } } }, then: { not: { required: ['plans'] }, properties: { dailyLimit: onlyFalse, rateLimit: onlyFalse } } },
    { if: { required: ['auth'], properties: { auth: { const: 'none' } } }, then: { not: { required: ['scopes'] } } },
    { if: { required: ['auth'], properties: { auth: { const: 'none' } } }, then: { not: { required: ['org'] } } },
    { if: { required: ['auth'], properties: { auth: { enum: ['optional', 'none'] } } }, then: { not: { required: ['roles'] }, properties: { org: { not: { const: 'required' } } } } },
    { if: { required: ['roles'] }, then: { properties: { org: { const: 'required' } } } },
  ],
});


export const upstreamSchema = z.strictObject({
  url: z.url({ protocol: /^https?$/, error: 'expected an http:// or https:// URL' })
    .transform((u) => u.replace(/\/+$/, '')).meta({ pattern: '^[Hh][Tt][Tt][Pp][Ss]?://[^\\s/?#]+', format: 'uri', examples: ['http://127.0.0.1:3000'] }),
  timeout: duration.prefault('30s'),
  assertion: bool().prefault(false),
  // How the gateway talks TLS to an https:// upstream (CONTRACT §10): files are PEM.
  tls: z.strictObject({
    caFile: optionalText.meta({ examples: ['tls/upstream-ca.pem'], description: 'CA certificates (PEM) trusted for this upstream, instead of the public ones.' }),
    certFile: optionalText.meta({ examples: ['tls/client.pem'], description: 'Client certificate (PEM) the gateway presents (mTLS); needs keyFile.' }),
    keyFile: optionalText.meta({ examples: ['tls/client-key.pem'], description: 'Private key (PEM) of certFile.' }),
    serverName: optionalText.meta({ examples: ['api.internal'], description: "Name sent in SNI and checked against the upstream's certificate, instead of the URL's host." }),
  }).optional(),
});

/** Why a CORS policy cannot work as written, or undefined. */
export function corsProblem(cors: { origins?: string[]; credentials?: boolean } | undefined): string | undefined {
  if (!cors?.origins) return undefined;
  if (cors.origins.includes('*') && cors.origins.length > 1) return 'expected "*" alone, or a list of origins without it';
  // Fetch standard: a browser refuses `Access-Control-Allow-Origin: *` on a request with credentials.
  if (cors.origins.includes('*') && cors.credentials) return '"*" cannot be used with credentials: true (browsers refuse it): list the origins';
  return undefined;
}

/** What the route checks read of the rest of the file. */
interface RoutesContext {
  cors?: { origins?: string[]; credentials?: boolean };
  decisions: { port: number };
  upstreams: Record<string, unknown>;
  errors: { codes: boolean; language: string };
  organizations?: { enabled: boolean; sso?: unknown };
  portal?: { enabled: boolean; path: string };
  routes: Array<z.output<typeof routeSchema>>;
}

/** Each route against the others and the rest of the file; `each` keeps one unreadable route from hiding the others' problems. */
export function checkRoutes(cfg: RoutesContext, ctx: z.RefinementCtx, each: (check: () => void) => void): void {
  let globalCors: string | undefined;
  each(() => { globalCors = corsProblem(cfg.cors); }); // a cors section as written may not be readable
  const seen = new Set<string>();
  cfg.routes.forEach((route, i) => each(() => {
    const problem = (path: Array<string | number>, message: string) => ctx.addIssue({ code: 'custom', path: ['routes', i, ...path], message });
    if (route.cors) {
      if (!cfg.cors && !route.cors.origins) problem(['cors', 'origins'], 'expected origins (there is no global cors to take them from)');
      const corsIssue = corsProblem({ ...cfg.cors, ...route.cors });
      if (corsIssue && !globalCors) problem(['cors', 'origins'], corsIssue);
    }
    checkTarget(cfg, route, problem);
    if ((route.plans || route.dailyLimit || route.rateLimit) && route.auth !== 'required') problem(['auth'], 'plans, dailyLimit and rateLimit need auth: required');
    if (route.scopes && route.auth === 'none') problem(['scopes'], 'scopes need auth: required or optional (auth: none reads no key)');
    checkOrg(route, problem);
    // Requests are matched in the form normalizePath gives them (`/api//admin/x` as `/api/admin/x`):
    // a route declared otherwise is never matched, and a shorter route takes what it was to guard.
    const readAs = normalizePath(route.path, route.encodedSeparators === 'keep');
    if (readAs !== route.path) {
      problem(['path'], readAs === undefined
        ? `path ${route.path} can never be requested: the gateway refuses such paths (400)`
        : `path ${route.path} is never requested as written: requests for it are read as ${readAs}, so declare that`);
    }
    // Paths are matched without regard to case (routeTable.ts, matchKey): /Docs and /docs are one.
    const key = route.path.toLowerCase();
    if (seen.has(key)) problem(['path'], `path ${route.path} is declared twice (paths are matched without regard to case)`);
    seen.add(key);
    const own = ownEndpointUnder(cfg, key);
    if (own) problem(['path'], `path ${route.path} is the gateway's own endpoint ${own.path} (${own.why}): choose another path`);
  }));
}

/** CONTRACT §22: what `org` and `roles` need. */
function checkOrg(route: z.output<typeof routeSchema>, problem: (path: string[], message: string) => void): void {
  if (route.org === undefined && route.roles === undefined) return;
  if (route.roles && route.org === 'optional') problem(['org'], 'roles imply org: required');
  if ((route.org === 'required' || route.roles) && route.auth !== 'required') problem(['auth'], 'org: required and roles need auth: required');
  else if (route.org === 'optional' && route.auth === 'none') problem(['auth'], 'org: optional needs auth: required or optional (auth: none reads no credential)');
}

/** Where a route sends its requests: an upstream the file declares, or nowhere on a decision-only route. */
function checkTarget(cfg: RoutesContext, route: z.output<typeof routeSchema>, problem: (path: string[], message: string) => void): void {
  if (route.upstream === undefined) {
    // A route nobody could reach would be a typo that silently guards nothing.
    if (cfg.decisions.port === 0) problem(['upstream'], 'required unless decisions.port is set (a route without upstream is decision-only)');
    if (route.rewritePrefix !== undefined) problem(['rewritePrefix'], 'needs an upstream: a decision-only route is never forwarded by the gateway');
    if (route.websocket) problem(['websocket'], 'needs an upstream: a decision-only route is never forwarded by the gateway');
  } else if (!(route.upstream in cfg.upstreams)) {
    problem(['upstream'], `unknown upstream ${JSON.stringify(route.upstream)}; declared: ${Object.keys(cfg.upstreams).join(', ') || 'none'}`);
  }
  if (route.websocket && route.methods && !route.methods.includes('GET')) problem(['methods'], 'websocket: true needs GET among the methods (an upgrade is a GET)');
}

/** The own endpoints of sections 20–30 that the configuration switches on (CONTRACT §20, §30): a route cannot take their paths. */
function ownEndpointUnder(cfg: Pick<RoutesContext, 'errors' | 'organizations' | 'portal'>, lowerPath: string): { path: string; why: string } | undefined {
  const own = [
    // CONTRACT §30: the portal's pages and its own endpoints under {path}api/.
    { path: (cfg.portal?.path ?? '/portal/').replace(/\/$/, '').toLowerCase(), on: cfg.portal?.enabled === true, why: 'portal.enabled' },
    { path: '/api/v1/plans', on: true, why: 'the plans and their prices' },
    { path: '/api/v1/errors', on: cfg.errors.codes || cfg.errors.language !== 'fr', why: 'errors.codes or errors.language' },
    { path: '/api/v1/orgs', on: cfg.organizations?.enabled === true, why: 'organizations.enabled' },
    // CONTRACT §31: an organization's directory (SCIM), as scim/index.ts's scimServed.
    { path: '/scim/v2', on: cfg.organizations?.enabled === true && cfg.organizations.sso !== undefined, why: 'organizations.sso: SCIM' },
  ];
  return own.find((o) => o.on && (lowerPath === o.path || lowerPath.startsWith(`${o.path}/`)));
}
