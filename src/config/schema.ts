// The one description of gateway.yaml: zod gives both the validator and the TypeScript type.
// Its parts, a file per block in schema/: values.ts (the kinds of value), server.ts, storage.ts and
// redis.ts (storage.redis), auth.ts and providers.ts (sign-in settings that check one another),
// routes.ts (plans, CORS, routes, upstreams), apiKeys.ts, admin.ts, telemetry.ts, mail.ts,
// billing.ts, portal.ts, hooks.ts; here, the small blocks and the whole file, with the checks that
// read several blocks at once.
import { z } from 'zod';
import { ASYMMETRIC, bool, duration, int, isInlinePem, metricsListener, optionalText, port, SECRET_MIN, verifyingKeyProblem } from './schema/values.js';
import { checkRoutes, knownPlans, corsProblem, corsSchema, MAX_LIMIT, planLimits, planName, refundOn, routeSchema, upstreamSchema, usageNoun } from './schema/routes.js';
import { originsWithoutCookie } from './schema/providers.js';
import { billingSchema } from './schema/billing.js';
import { checkPortalSettings, mailLinks, portalSchema } from './schema/portal.js';
import { hooksSchema } from './schema/hooks.js';
import { ssoSchema } from './schema/sso.js';
import { storageSchema } from './schema/storage.js';
import { apiKeysSchema } from './schema/apiKeys.js';
import { adminSchema } from './schema/admin.js';
import { authSchema } from './schema/auth.js';
import { mailSchema } from './schema/mail.js';
import { serverSchema } from './schema/server.js';
import { telemetrySchema } from './schema/telemetry.js';

// The names the rest of the gateway has always imported from here.
export { API_KEY_PREFIX_RULE, DEFAULT_API_KEY_PREFIX } from './schema/apiKeys.js';
export { OTLP_PROTOCOLS, type OtlpProtocol } from './schema/telemetry.js';
export { parseDuration, parseSize } from './schema/values.js';
export { BASE_PLANS, CORS_DEFAULTS, HTTP_METHODS, knownPlans, type Plan } from './schema/routes.js';
export { GITHUB_ISSUER, GOOGLE_ISSUER, originsWithoutCookie } from './schema/providers.js';
export type { RedisSettings } from './schema/redis.js';
export { postgresHosts, type PostgresHosts } from './schema/storage.js';

const fileShape = z.strictObject({
  server: serverSchema,
  storage: storageSchema,
  auth: authSchema,
  plans: z.strictObject({
    // The shorthand it always was: limits.free.daily (read through planLimitsOf, pipeline/plans.ts).
    freeDailyLimit: int(1, MAX_LIMIT).optional(),
    limits: z.record(planName, planLimits).default({}),
    upgradeUrl: z.string().regex(/^(?:\/(?!\/)|https:\/\/)[^\s"<>\\]*$/, 'expected a path such as /pricing or an https:// URL').default('/api/v1/subscription/upgrade')
      .meta({ description: 'The upgrade_url of the plan and quota errors.' }),
    usageNoun: usageNoun.optional(),
    refundOn: refundOn.optional(),
  }).prefault({}),
  apiKeys: apiKeysSchema, // CONTRACT §21
  // Organizations (CONTRACT §22): absent or disabled, /api/v1/orgs is not the gateway's.
  organizations: z.strictObject({
    enabled: bool().prefault(false).meta({ description: 'true: users create organizations, invite members by email and give them roles (/api/v1/orgs); needs mail.invitationUrl.' }),
    invitationTtl: duration.prefault('7d').meta({ description: 'How long an invitation\'s link works.' }),
    maxOwnedPerUser: int(1, 1000).default(3).meta({ description: 'Organizations a user may own at once (checked when one is created).' }),
    sso: ssoSchema.optional(),
  }).optional(),
  // Errors any client can read (CONTRACT §20): codes, problem details on request, languages.
  errors: z.strictObject({
    codes: bool().prefault(false).meta({ description: 'true: every error body adds "code", a stable snake_case id (GET /api/v1/errors lists them).' }),
    language: z.enum(['fr', 'en', 'negotiate']).default('fr').meta({
      description: 'The language of errors and messages: fr (the spec\'s), en, or negotiate (Accept-Language among fr, en and the files of messages; fallback fr).',
    }),
    messages: optionalText.meta({ examples: ['./messages'], description: 'A folder of <lang>.json files, {code: text}, overriding or adding a language (gateway check reads them).' }),
  }).prefault({}),
  admin: adminSchema,
  telemetry: telemetrySchema, // CONTRACT §17
  // The audit log (CONTRACT §17): rows older than retention are purged.
  audit: z.strictObject({
    retention: duration.prefault('90d').meta({ description: 'How long audit events are kept (audit_events rows older are purged every hour).' }),
  }).prefault({}),
  // The forward-auth listener (CONTRACT §11): nginx auth_request, Caddy forward_auth, … ask it.
  decisions: z.strictObject({
    host: z.string().default('127.0.0.1'),
    port: port.default(0).meta({ examples: [9191] }),
  }).prefault({}),
  metrics: metricsListener, // CONTRACT §28: /metrics alone, so that the admin listener can stay on loopback
  webhooks: z.strictObject({
    timeout: duration.prefault('5s'),
    retries: int(0, 10).prefault(3),
    allowPrivateNetworks: bool().prefault(false),
    caFile: optionalText.meta({ examples: ['tls/webhooks-ca.pem'] }),
  }).prefault({}),
  // Moving in (CONTRACT §27): what imported users carry from the system they came from.
  import: z.strictObject({
    forwardExternalId: bool().prefault(false).meta({ description: 'true: upstreams receive x-user-external-id, the id an imported user had before (docs/migrating.md), for users that have one.' }),
  }).prefault({}),
  cors: corsSchema.optional(),
  mail: mailSchema.optional(),
  billing: billingSchema.optional(),
  portal: portalSchema.optional(),
  hooks: hooksSchema.optional(),
  upstreams: z.record(z.string().regex(/^[A-Za-z0-9_.-]+$/, 'expected an upstream name of letters, digits, _ . -').meta({ examples: ['app'] }), upstreamSchema).default({}),
  routes: z.array(routeSchema).default([]),
});

export type Config = z.output<typeof fileShape>;

/**
 * The file, with the checks that read several sections at once. They also run when a section is
 * malformed (`when`), so that `gateway check` reports every problem of a file in one run (a typo, a
 * wrong type and an unknown upstream together). cfg may then hold a section as written, not as
 * typed: a check that cannot read it stops there, and the section's own problem is what gets reported.
 */
export const configSchema = fileShape.superRefine((cfg, ctx) => {
  for (const check of [checkJwt, checkWorkers, checkBillingPrices, checkOverageMeter, checkPlanShorthand, checkUpstreamTls, checkCorsAndMail, checkOidcBinding]) whenReadable(() => check(cfg, ctx));
  whenReadable(() => checkRoutes(cfg, ctx, whenReadable));
}, { when: () => true });

/** Runs a check; one that trips over a section as written (TypeError) leaves the problem to that section's own. */
function whenReadable(check: () => void): void {
  try {
    check();
  } catch (err) {
    if (!(err instanceof TypeError)) throw err;
  }
}

function checkJwt(cfg: Config, ctx: z.RefinementCtx): void {
  const jwt = cfg.auth.jwt;
  if (jwt.algorithm === 'HS256' && jwt.secret && [...jwt.secret].length < SECRET_MIN) {
    ctx.addIssue({ code: 'custom', path: ['auth', 'jwt', 'secret'], message: 'expected at least 32 characters for HS256 (or leave it empty to have one generated)' });
  }
  if ((ASYMMETRIC as readonly string[]).includes(jwt.algorithm) && !jwt.privateKeyFile) {
    ctx.addIssue({ code: 'custom', path: ['auth', 'jwt', 'privateKeyFile'], message: `expected a PEM private key file for ${jwt.algorithm}` });
  }
  jwt.previous.forEach((entry, i) => {
    const problem = jwt.algorithm === 'HS256'
      ? ([...entry].length < SECRET_MIN ? 'expected an HS256 secret of at least 32 characters' : undefined)
      : (isInlinePem(entry) ? verifyingKeyProblem(entry, jwt.algorithm) : undefined); // a file: checkFiles reads it
    if (problem) ctx.addIssue({ code: 'custom', path: ['auth', 'jwt', 'previous', i], message: problem });
  });
}

function checkWorkers(cfg: Config, ctx: z.RefinementCtx): void {
  // Each worker is an instance: embedded storage is one process's (CONTRACT §18).
  if (cfg.server.workers !== 1 && !cfg.storage.postgres) {
    ctx.addIssue({ code: 'custom', path: ['server', 'workers'], message: 'more than one worker needs storage.postgres: embedded storage is one process\'s' });
  }
}

function checkBillingPrices(cfg: Config, ctx: z.RefinementCtx): void {
  // A price that gives a plan nobody declared would move payers onto a plan no route knows.
  const known = new Set(knownPlans(cfg));
  for (const [price, plan] of Object.entries(cfg.billing?.stripe.prices ?? {})) {
    if (!known.has(plan)) ctx.addIssue({ code: 'custom', path: ['billing', 'stripe', 'prices', price], message: `unknown plan ${JSON.stringify(plan)}; known: ${[...known].join(', ')}` });
  }
}

function checkOverageMeter(cfg: Config, ctx: z.RefinementCtx): void {
  // Overage with nowhere to report it would serve uses past the allowance that nobody pays for.
  if (cfg.billing?.stripe.meter) return;
  for (const [plan, limits] of Object.entries(cfg.plans.limits)) {
    if (typeof limits.monthly === 'object') {
      ctx.addIssue({
        code: 'custom', path: ['plans', 'limits', plan, 'monthly', 'overage'],
        message: 'overage: meter needs billing.stripe.meter (the Stripe meter the uses past the limit are reported to)',
      });
    }
  }
}

function checkPlanShorthand(cfg: Config, ctx: z.RefinementCtx): void {
  const { freeDailyLimit, limits } = cfg.plans;
  if (freeDailyLimit !== undefined && limits.free?.daily !== undefined && limits.free.daily !== freeDailyLimit) {
    ctx.addIssue({ code: 'custom', path: ['plans', 'freeDailyLimit'], message: `freeDailyLimit is the shorthand for limits.free.daily, which says ${limits.free.daily}: keep one of them` });
  }
}

function checkUpstreamTls(cfg: Config, ctx: z.RefinementCtx): void {
  const tlsByOrigin = new Map<string, { name: string; tls: string }>();
  for (const [name, upstream] of Object.entries(cfg.upstreams)) {
    const { tls } = upstream;
    if (tls && !upstream.url.startsWith('https:')) {
      ctx.addIssue({ code: 'custom', path: ['upstreams', name, 'tls'], message: 'tls applies to https:// upstreams only' });
    }
    if (tls && Boolean(tls.certFile) !== Boolean(tls.keyFile)) {
      ctx.addIssue({ code: 'custom', path: ['upstreams', name, 'tls', tls.certFile ? 'keyFile' : 'certFile'], message: 'expected certFile and keyFile together (the client certificate and its key)' });
    }
    // Connections to an origin are pooled whichever upstream asked for them, so one origin is
    // reached one way: two TLS setups for it would make the connection's setup a matter of luck.
    if (upstream.url.startsWith('https:')) {
      const origin = new URL(upstream.url).origin;
      const seen = tlsByOrigin.get(origin);
      const setup = JSON.stringify(tls ?? {});
      if (seen && seen.tls !== setup) {
        ctx.addIssue({ code: 'custom', path: ['upstreams', name, 'tls'], message: `expected the same tls settings as upstream ${JSON.stringify(seen.name)}, which has the same origin (${origin})` });
      }
      if (!seen) tlsByOrigin.set(origin, { name, tls: setup });
    }
  }
}

function checkCorsAndMail(cfg: Config, ctx: z.RefinementCtx): void {
  const globalCors = corsProblem(cfg.cors);
  if (globalCors) ctx.addIssue({ code: 'custom', path: ['cors', 'origins'], message: globalCors });
  if (cfg.mail?.smtp && !cfg.mail.from.includes('@')) {
    ctx.addIssue({ code: 'custom', path: ['mail', 'from'], message: 'expected the sender of the mails, such as "Gateway <no-reply@example.com>" (needed when mail.smtp is set)' });
  }
  if (cfg.auth.magicLink && !cfg.mail) {
    ctx.addIssue({ code: 'custom', path: ['auth', 'magicLink'], message: 'needs mail: a sign-in link goes out by email' });
  }
  checkPortalSettings(cfg, (issue) => ctx.addIssue(issue));
  if (cfg.organizations?.enabled && !mailLinks(cfg).invitation) {
    ctx.addIssue({
      code: 'custom', path: ['mail', 'invitationUrl'],
      message: 'required with organizations.enabled: an invitation goes out by email as a link to the application\'s page (a URL with {token})',
    });
  }
  // CONTRACT §31: auth.oidc may list no provider when it is there for organizations' SAML sign-ins.
  if (cfg.auth.oidc && Object.keys(cfg.auth.oidc.providers).length === 0 && !(cfg.organizations?.enabled && cfg.organizations.sso)) {
    ctx.addIssue({ code: 'custom', path: ['auth', 'oidc', 'providers'], message: 'expected at least one provider' });
  }
  if (cfg.auth.requireVerifiedEmail && !cfg.mail?.smtp) {
    ctx.addIssue({ code: 'custom', path: ['auth', 'requireVerifiedEmail'], message: 'needs mail.smtp: without mail no account could receive its verification link, and none could log in' });
  }
}

function checkOidcBinding(cfg: Config, ctx: z.RefinementCtx): void {
  const oidc = cfg.auth.oidc;
  if (!oidc?.bindToBrowser || oidc.bindToBrowserDefaulted) return;
  for (const origin of originsWithoutCookie(cfg)) {
    ctx.addIssue({
      code: 'custom', path: ['auth', 'oidc', 'bindToBrowser'],
      message: `true needs cors to allow ${origin} with credentials: true, so that its page's exchange carries the gw_oidc cookie; `
        + 'or set bindToBrowser: false to bind by the application\'s PKCE verifier alone',
    });
  }
}
export type RouteConfig = Config['routes'][number];
export type UpstreamConfig = Config['upstreams'][string];
export type CorsConfig = NonNullable<Config['cors']>;
