// The one description of gateway.yaml: zod gives both the validator and the TypeScript type.
// Its parts: schema/values.ts (the kinds of value), schema/routes.ts (plans, CORS, routes,
// upstreams), schema/providers.ts (sign-in settings that check one another), schema/redis.ts
// (storage.redis); here, the whole file.
import { z } from 'zod';
import {
  adminKey, ASYMMETRIC, bool, duration, durationOrZero, envReference, HTTP_URL, int, isInlinePem, isUrl, NAME, OCTET, optionalText, port, PORT, ratio, SECRET_MIN, size, text, verifyingKeyProblem,
} from './schema/values.js';
import { checkRoutes, knownPlans, corsProblem, corsSchema, MAX_LIMIT, planLimits, planName, refundOn, routeSchema, upstreamSchema, usageNoun } from './schema/routes.js';
import { oidcSchema, originProblem, originsWithoutCookie } from './schema/providers.js';
import { billingSchema } from './schema/billing.js';
import { hooksSchema } from './schema/hooks.js';
import { redisSchema } from './schema/redis.js';
export { parseDuration, parseSize } from './schema/values.js';
export { BASE_PLANS, CORS_DEFAULTS, HTTP_METHODS, knownPlans, type Plan } from './schema/routes.js';
export { GITHUB_ISSUER, GOOGLE_ISSUER, originsWithoutCookie } from './schema/providers.js';
export type { RedisSettings } from './schema/redis.js';

/** http(s) URL to the application's page for a link sent by email, with `{token}` where the token goes. */
/** The bodies an OTLP/HTTP export may have (telemetry.otlp.protocol). */
/** CONTRACT §21: what an API key starts with before `_`; lower case, so it never looks like a key's own characters. */
export const API_KEY_PREFIX_RULE = /^[a-z][a-z0-9]{1,9}$/;
export const DEFAULT_API_KEY_PREFIX = 'gw';

export const OTLP_PROTOCOLS = ['http/protobuf', 'http/json'] as const;
export type OtlpProtocol = (typeof OTLP_PROTOCOLS)[number];

/** Hosts a plain-HTTP link may name: the operator's own machine (a laptop, a test), never the network. */
const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]', 'localhost']);
// A link's token hands over an account (CONTRACT §20): sent over plain HTTP it could be read on
// the way, so http:// is for loopback only.
const linkTemplate = z.string().superRefine((text, ctx) => {
  if (!text.includes('{token}')) ctx.addIssue({ code: 'custom', message: 'expected a URL containing {token}, where the link\'s token goes' });
  else if (!isUrl(text.replaceAll('{token}', 'x'), /^https?:$/)) ctx.addIssue({ code: 'custom', message: `expected an http:// or https:// URL, got ${JSON.stringify(text)}` });
  else if (new URL(text.replaceAll('{token}', 'x')).protocol === 'http:' && !LOOPBACK_HOSTS.has(new URL(text.replaceAll('{token}', 'x')).hostname)) {
    ctx.addIssue({ code: 'custom', message: `expected an https:// URL (http:// only on 127.0.0.1, ::1 or localhost: the link's token would cross the network in clear), got ${JSON.stringify(text)}` });
  }
});

const mailSchema = z.strictObject({
  // Empty (as `${SMTP_URL:-}` gives when unset): no mail is sent; `gateway users reset-link` still makes links.
  smtp: text.refine((url) => url === '' || isUrl(url, /^smtps?:$/), { message: 'expected an smtp:// or smtps:// URL (or nothing: no mail is sent)' })
    .meta({ examples: ['smtp://user:pass@smtp.example.com:587'], description: 'The SMTP relay: smtp://user:pass@host:587 (STARTTLS when offered) or smtps://user:pass@host:465; empty: no mail is sent.' }),
  from: text.meta({ examples: ['Gateway <no-reply@example.com>'], description: 'The sender of the mails, e.g. "Gateway <no-reply@example.com>"; needed with smtp.' }),
  resetUrl: linkTemplate.meta({ examples: ['https://app.example.com/reset?token={token}'], description: "The application's password reset page, with {token} where the link's token goes." }),
  verifyUrl: linkTemplate.meta({ examples: ['https://app.example.com/verify?token={token}'], description: "The application's email verification page, with {token} where the link's token goes." }),
  invitationUrl: linkTemplate.optional().meta({ examples: ['https://app.example.com/join?token={token}'], description: "The application's page that accepts an organization's invitation, with {token} where the link's token goes; required with organizations." }),
  templates: optionalText.meta({
    examples: ['./mail-templates'],
    description: 'A folder of <lang>/<kind>.subject.txt, <kind>.txt and optional <kind>.html (kinds verify, reset, '
      + 'magic, org_invitation, account_invitation) replacing the built-in texts (gateway check reads them).',
  }),
  product: optionalText.meta({ examples: ['Weather'], description: 'The product\'s name, {{product}} in mail templates; unset: the display name of from, else auth-gateway.' }),
}).meta({ description: 'Account mails (password reset, email verification and sign-in links), in the user\'s language. Without it, or with smtp empty, password/forgot and email/resend answer 503.' });

// HTTPS on a listener (the public one, the admin one), its files read again on SIGHUP.
const listenerTls = z.strictObject({
  certFile: z.string().min(1).meta({ description: 'The certificate chain (PEM): the certificate first, then its intermediates.', examples: ['tls/cert.pem'] }),
  keyFile: z.string().min(1).meta({ description: 'Its private key (PEM).', examples: ['tls/key.pem'] }),
  http2: bool().prefault(false).meta({ description: 'Also serve HTTP/2 (negotiated by ALPN); HTTP/1.1 clients are still served.' }),
  minVersion: z.enum(['TLSv1.2', 'TLSv1.3']).default('TLSv1.2').meta({ description: 'The oldest TLS version offered.' }),
  ciphers: z.string().min(1).optional().meta({ description: 'OpenSSL cipher list replacing the default (TLS 1.3, and TLS 1.2 with ECDHE/DHE and AES-GCM or ChaCha20-Poly1305 only).' }),
});

// The console's origin (CONTRACT §26): its sign-in links are built from it and its pages accepted
// only from it. An origin only (the console is at /console/ on it), kept in the form browsers send,
// and https:// off loopback: a session cookie or a ticket sent over plain HTTP can be read on the
// way. The pattern says it all, so gateway.schema.json refuses what check refuses.
const CONSOLE_ORIGIN = new RegExp(`^(?:[Hh][Tt][Tt][Pp][Ss]://(?:\\[[0-9A-Fa-f:.]+\\]|(?:${OCTET}\\.){3}${OCTET}|${NAME})|[Hh][Tt][Tt][Pp]://(?:127\\.0\\.0\\.1|\\[::1\\]|[Ll][Oo][Cc][Aa][Ll][Hh][Oo][Ss][Tt]))(?::${PORT})?/?$`);
const consoleOriginUrl = z.string()
  .refine((u) => CONSOLE_ORIGIN.test(u) && isUrl(u, /^https?:$/), 'expected the console\'s origin, an https:// URL without path, query or fragment such as https://gateway-admin.example.com (http:// only on 127.0.0.1, ::1 or localhost)')
  .transform((u) => new URL(u).origin)
  .meta({
    pattern: CONSOLE_ORIGIN.source, examples: ['https://gateway-admin.example.com'],
    description: 'The console\'s origin as operators open it (through a proxy, say): its sign-in links name it and its pages are accepted only from it. Unset: http(s)://{host}:{port}, with 127.0.0.1, localhost and [::1] alike on loopback; on every address (0.0.0.0, ::) the console is then off.',
  });

// Defaults of values that a transform or preprocess reads are prefaults: written as in the file and
// parsed like it, so `gateway schema` can show them (a default is the parsed value, a number).
// A WebAuthn relying party: the users' (auth.passkeys, §14) or the operators' (admin.passkeys, §24).
const relyingParty = (rpName: z.ZodType<string>) => z.strictObject({
  rpId: z.string().regex(/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/, 'expected a host name in lower case, such as app.example.com (no scheme, no port)')
    .meta({ examples: ['app.example.com'] }),
  rpName,
  origins: z.array(z.string().min(1).meta({ title: 'origin', examples: ['https://app.example.com'] })).min(1),
}).superRefine(({ rpId, origins }, ctx) => {
  // A browser refuses a ceremony whose rpId is not its page's host or a parent of it: say so at
  // `gateway check`, not at the first user's sign-in.
  origins.forEach((origin, i) => {
    const problem = originProblem(origin, rpId);
    if (problem) ctx.addIssue({ code: 'custom', path: ['origins', i], message: problem });
  });
});

const fileShape = z.strictObject({
  server: z.strictObject({
    // Unset: 127.0.0.1 on embedded storage, 0.0.0.0 with storage.postgres (config/load.ts).
    host: z.string().default('127.0.0.1').meta({
      description: 'The address to listen on; HOST overrides it. Unset: 127.0.0.1 on embedded storage (a laptop), 0.0.0.0 with storage.postgres (a deployment).',
    }),
    port: port.default(8080),
    // Processes serving these ports (node:cluster, CONTRACT §18): each one a whole instance, so
    // more than one needs storage.postgres. `auto`: one per CPU the process may use.
    workers: z.union([int(1, 256), z.literal('auto')], { error: 'expected a number of processes (1 to 256) or auto' }).default(1)
      .meta({ description: 'Processes serving the listeners (node:cluster): a number, or auto for one per CPU the process may use (cgroup quota included). More than 1 needs storage.postgres.' }),
    bodyLimit: size.prefault('1mb'),
    trustProxy: bool().prefault(false),
    // On SIGTERM, keep serving (readyz 503, responses with Connection: close) this long, so a load
    // balancer stops sending before the listener closes. SIGINT (Ctrl-C) does not wait.
    shutdownDelay: durationOrZero.prefault('5s'),
    // HTTPS on the public listener (CONTRACT §10); the files are read again on SIGHUP.
    tls: listenerTls.optional(),
  }).prefault({}),
  storage: z.strictObject({
    postgres: text.meta({ examples: ['postgres://gateway:secret@127.0.0.1:5432/gateway'] }),
    // A pooler in transaction mode (PgBouncer) cannot carry LISTEN: the change feed connects here.
    postgresDirect: text.meta({ examples: ['postgres://gateway:secret@127.0.0.1:5432/gateway'] }),
    // Per instance, plus one LISTEN connection: with N instances, Postgres (or PgBouncer) must
    // accept N × (poolSize + 1) connections.
    poolSize: int(1, 1000).prefault(20),
    embeddedDir: z.string().default('./data'),
    redis: redisSchema,
    redisKeyPrefix: z.string().default('gw:'),
    redisTimeout: duration.prefault('100ms'),
    migrate: bool().prefault(true),
    // CONTRACT §25: at start, how long to wait for a Postgres that does not answer yet (compose,
    // Kubernetes start the database beside the gateway) before exiting 1.
    startTimeout: duration.prefault('60s').meta({
      description: 'At start, how long to wait for a Postgres that does not answer yet (refused, unreachable, starting up) before exiting 1. '
        + 'A wrong password or a missing database stops the start at once.',
    }),
  }).prefault({}),
  auth: z.strictObject({
    jwt: z.strictObject({
      algorithm: z.enum(['HS256', ...ASYMMETRIC]).default('HS256'),
      secret: text.meta({ examples: ['${JWT_SECRET}'] }),
      privateKeyFile: optionalText.meta({ examples: ['keys/jwt.pem'] }),
      // CONTRACT §25: keys rotated out, which verify tokens they signed but never sign.
      // An empty entry is skipped, so `- ${JWT_SECRET_PREVIOUS:-}` can stay in a file between rotations.
      previous: z.array(z.string().nullable().meta({ title: 'previous key', examples: ['${JWT_SECRET_PREVIOUS:-}', 'keys/jwt-2026-01.pub.pem'] })).default([])
        .transform((keys) => keys.filter((key): key is string => Boolean(key))).meta({
          description: 'Keys rotated out, verify only: HS256 secrets, or for the other algorithms PEM public keys (files, or PEM text). '
            + 'Tokens they signed stay valid; removing one ends every session it signed. Empty entries are skipped.',
        }),
      issuer: optionalText.meta({ examples: ['https://gw.example.com'] }),
      audience: optionalText.meta({ examples: ['my-app'] }),
    }).meta({
      // The rules of configSchema's check below: an HS256 secret (the default algorithm) of 32
      // characters or none; a private key file for the others.
      allOf: [
        {
          if: { properties: { algorithm: { const: 'HS256' } } },
          then: { properties: { secret: { anyOf: [{ type: 'null' }, { const: '' }, { type: 'string', minLength: SECRET_MIN }, envReference] } } },
        },
        {
          if: { required: ['algorithm'], properties: { algorithm: { enum: [...ASYMMETRIC] } } },
          then: { required: ['privateKeyFile'], properties: { privateKeyFile: { type: 'string', minLength: 1 } } },
        },
      ],
    }).prefault({}),
    accessTokenTtl: duration.prefault('15m'),
    refreshTokenTtl: duration.prefault('30d'),
    passwordMinLength: int(1, 1024).prefault(8),
    refreshReuse: z.enum(['reject', 'revoke-all']).default('reject'),
    rateLimit: z.strictObject({
      max: int(0).prefault(20),
      window: duration.prefault('1m'),
    }).prefault({}),
    requireVerifiedEmail: bool().prefault(false).meta({ description: 'true: login of an account whose email is not verified gets 403 (needs mail.smtp).' }),
    mfa: z.strictObject({
      issuer: z.string().min(1).default('auth-gateway').meta({ description: 'The label authenticator apps show for TOTP (otpauth issuer).' }),
    }).prefault({}),
    // CONTRACT §14 (docs/second-factor.md#passkeys).
    passkeys: relyingParty(z.string().min(1).meta({ examples: ['Example'] }))
      .optional().meta({ description: 'WebAuthn relying party (passkeys): rpId (the host name passkeys are bound to), rpName (shown by the authenticator), origins (the pages that run the ceremonies, https:// or http://localhost); absent: the passkey endpoints answer 404.' }),
    magicLink: z.strictObject({
      url: linkTemplate.meta({ examples: ['https://app.example.com/sign-in?token={token}'] }),
    }).optional().meta({ description: 'Sign-in links by email (needs mail); absent: 404.' }),
    oidc: oidcSchema.optional(),
  }).prefault({}),
  plans: z.strictObject({
    // The shorthand it always was: limits.free.daily (read through planLimitsOf, src/plans.ts).
    freeDailyLimit: int(1, MAX_LIMIT).optional(),
    limits: z.record(planName, planLimits).default({}),
    upgradeUrl: z.string().regex(/^(?:\/(?!\/)|https:\/\/)[^\s"<>\\]*$/, 'expected a path such as /pricing or an https:// URL').default('/api/v1/subscription/upgrade')
      .meta({ description: 'The upgrade_url of the plan and quota errors.' }),
    usageNoun: usageNoun.optional(),
    refundOn: refundOn.optional(),
  }).prefault({}),
  // API keys for a public API (CONTRACT §21).
  apiKeys: z.strictObject({
    plans: z.union([z.literal('all'), z.array(planName).min(1)]).default(['pro'])
      .meta({ description: 'The plans whose users may create API keys (the spec\'s rule: pro); "all" for every plan.' }),
    maxPerOwner: int(1, 1000).default(10).meta({ description: 'Active keys a user may hold at once (a rolled key no longer counts).' }),
    prefix: z.string().regex(API_KEY_PREFIX_RULE, 'expected 2 to 10 lower-case letters and digits, starting with a letter').default(DEFAULT_API_KEY_PREFIX)
      .meta({ examples: ['acme'], description: 'What new keys start with, before `_` (the secret scanners\' rule); '
        + 'keys made under an earlier prefix keep working.' }),
  }).prefault({}),
  // Organizations (CONTRACT §22): absent or disabled, /api/v1/orgs is not the gateway's.
  organizations: z.strictObject({
    enabled: bool().prefault(false).meta({ description: 'true: users create organizations, invite members by email and give them roles (/api/v1/orgs); needs mail.invitationUrl.' }),
    invitationTtl: duration.prefault('7d').meta({ description: 'How long an invitation\'s link works.' }),
    maxOwnedPerUser: int(1, 1000).default(3).meta({ description: 'Organizations a user may own at once (checked when one is created).' }),
  }).optional(),
  // Errors any client can read (CONTRACT §20): codes, problem details on request, languages.
  errors: z.strictObject({
    codes: bool().prefault(false).meta({ description: 'true: every error body adds "code", a stable snake_case id (GET /api/v1/errors lists them).' }),
    language: z.enum(['fr', 'en', 'negotiate']).default('fr').meta({
      description: 'The language of errors and messages: fr (the spec\'s), en, or negotiate (Accept-Language among fr, en and the files of messages; fallback fr).',
    }),
    messages: optionalText.meta({ examples: ['./messages'], description: 'A folder of <lang>.json files, {code: text}, overriding or adding a language (gateway check reads them).' }),
  }).prefault({}),
  admin: z.strictObject({
    host: z.string().default('127.0.0.1'),
    port: port.default(9090),
    apiKey: adminKey,
    // Off loopback, the admin key, the metrics and the console's cookie would cross the network in clear.
    tls: listenerTls.optional().meta({ description: 'Serve the admin listener over HTTPS (the admin API, metrics, health, and the console off loopback); the files are read again on SIGHUP.' }),
    publicUrl: consoleOriginUrl.optional(),
    // CONTRACT §24: operators' passkeys, their second factor beside TOTP (docs/operators.md#passkeys).
    passkeys: relyingParty(z.string().min(1).default('auth-gateway console').meta({ examples: ['Example console'] }))
      .optional().meta({
        description: 'WebAuthn relying party of the console (operator passkeys): rpId (the console\'s host name), origins (the console\'s origins); '
          + 'absent, or the console reached by another origin (an IP): operators sign in with TOTP only.',
      }),
  }).prefault({}),
  // Traces (CONTRACT §17): empty endpoint and no OTEL_EXPORTER_OTLP_ENDPOINT, no tracing. What is
  // left unset here, the standard OTEL_* variables fill (telemetry/tracing.ts).
  telemetry: z.strictObject({
    otlp: z.strictObject({
      endpoint: optionalText.pipe(z.string().refine((u) => HTTP_URL.test(u) && isUrl(u, /^https?:$/), 'expected an http:// or https:// URL such as http://collector:4318').optional())
        .meta({ pattern: `^$|${HTTP_URL.source}`, examples: ['http://collector:4318'], description: 'The collector\'s OTLP/HTTP base URL (traces go to {endpoint}/v1/traces); empty: OTEL_EXPORTER_OTLP_ENDPOINT, else no tracing.' }),
      serviceName: optionalText.meta({ examples: ['auth-gateway'], description: 'service.name of the spans; unset: OTEL_SERVICE_NAME, else auth-gateway.' }),
      sampleRatio: ratio.optional().meta({ description: 'The share of traces the gateway records (0 to 1); unset: OTEL_TRACES_SAMPLER_ARG, else 1.' }),
      trustIncoming: bool().prefault(false).meta({ description: 'true: an incoming traceparent\'s sampled flag decides; false: the gateway decides (a client cannot force sampling).' }),
      protocol: z.enum(OTLP_PROTOCOLS).optional().meta({
        description: 'The export body: http/protobuf (OTLP\'s default) or http/json; unset: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf.',
      }),
    }).prefault({}),
  }).prefault({}),
  // The audit log (CONTRACT §17): rows older than retention are purged.
  audit: z.strictObject({
    retention: duration.prefault('90d').meta({ description: 'How long audit events are kept (audit_events rows older are purged every hour).' }),
  }).prefault({}),
  // The forward-auth listener (CONTRACT §11): nginx auth_request, Caddy forward_auth, … ask it.
  decisions: z.strictObject({
    host: z.string().default('127.0.0.1'),
    port: port.default(0).meta({ examples: [9191] }),
  }).prefault({}),
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
  if (cfg.organizations?.enabled && !cfg.mail?.invitationUrl) {
    ctx.addIssue({
      code: 'custom', path: ['mail', 'invitationUrl'],
      message: 'required with organizations.enabled: an invitation goes out by email as a link to the application\'s page (a URL with {token})',
    });
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
