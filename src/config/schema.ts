// The one description of gateway.yaml: zod gives both the validator and the TypeScript type.
// Durations and sizes are turned into milliseconds and bytes here, so nothing downstream parses them.
import { isIP } from 'node:net';
import { z } from 'zod';
import { normalizePath } from '../routing/paths.js';

const DURATION_UNITS_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
const SIZE_UNITS = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 } as const;
// Positive amounts only. Without flags, so gateway.schema.json carries them as they are (`pattern`).
const DURATION = /^0*([1-9]\d*)(ms|s|m|h|d)$/;
const SIZE = /^0*([1-9]\d*)([kKmMgG]?[bB])?$/;

export function parseDuration(text: string): number | undefined {
  const m = DURATION.exec(text.trim());
  return m ? Number(m[1]) * DURATION_UNITS_MS[m[2] as keyof typeof DURATION_UNITS_MS] : undefined;
}

export function parseSize(text: string): number | undefined {
  const m = SIZE.exec(text.trim());
  if (!m) return undefined;
  return Number(m[1]) * SIZE_UNITS[(m[2]?.toLowerCase() ?? 'b') as keyof typeof SIZE_UNITS];
}

// `.meta()` is what `gateway schema` shows for the text an operator writes: the transforms turn it
// into a number, which the JSON Schema (the input side) does not mention.
const duration = z.string({ error: 'expected a duration such as 500ms, 30s, 15m or 30d (a number needs its unit: 30s, not 30)' }).transform((text, ctx) => {
  const ms = parseDuration(text);
  if (ms === undefined) {
    ctx.addIssue({ code: 'custom', message: `expected a duration such as 500ms, 30s, 15m or 30d, got ${JSON.stringify(text)}` });
    return z.NEVER;
  }
  return ms;
}).meta({ pattern: DURATION.source, description: 'A duration: a positive whole number and a unit (ms, s, m, h, d), e.g. 500ms, 30s, 15m, 30d.' });

// A duration that may be nothing at all ("0s"): a delay that can be turned off.
const ZERO_DURATION = /^0+(ms|s|m|h|d)$/;
const durationOrZero = z.string({ error: 'expected a duration such as 0s, 500ms or 5s (a number needs its unit: 5s, not 5)' }).transform((text, ctx) => {
  if (ZERO_DURATION.test(text.trim())) return 0;
  const ms = parseDuration(text);
  if (ms === undefined) {
    ctx.addIssue({ code: 'custom', message: `expected a duration such as 0s, 500ms or 5s, got ${JSON.stringify(text)}` });
    return z.NEVER;
  }
  return ms;
}).meta({ pattern: `${ZERO_DURATION.source}|${DURATION.source}`, description: 'A duration, or 0 (with a unit): e.g. 0s, 500ms, 5s.' });

const size = z.union([
  z.number().int().positive(),
  z.string().meta({ pattern: SIZE.source, description: 'A size: a positive whole number of bytes, or with a unit (b, kb, mb, gb), e.g. 64kb, 1mb.' }),
]).meta({ title: 'size', examples: ['1mb'] }).transform((v, ctx) => {
  const bytes = typeof v === 'number' ? v : parseSize(v);
  if (bytes === undefined) {
    ctx.addIssue({ code: 'custom', message: `expected a size such as 64kb or 1mb, got ${JSON.stringify(v)}` });
    return z.NEVER;
  }
  return bytes;
});

// `${VAR}` values arrive as text (see load.ts): "20" and "true" are read as the number and boolean they spell.
const int = (min: number, max = Number.MAX_SAFE_INTEGER) => z.preprocess((v) => (typeof v === 'string' && /^-?\d+$/.test(v.trim()) ? Number(v) : v), z.number().int().min(min).max(max));
// A number or the text of one ("8080", as PORT gives): never `true` read as 1.
const port = int(0, 65535);
// A share from 0 to 1: a number, or its text ("0.25", as ${VAR} gives it).
const ratio = z.preprocess((v) => (typeof v === 'string' && /^\s*(?:\d+(?:\.\d*)?|\.\d+)\s*$/.test(v) ? Number(v) : v), z.number().min(0).max(1).meta({ examples: [0.25] }));
const bool = () => z.preprocess((v) => (v === 'true' ? true : v === 'false' ? false : v), z.boolean());
// `key:` with nothing after it (as `${VAR:-}` gives) is YAML null: read it as empty.
const text = z.string().nullish().transform((s) => s ?? '');
const optionalText = z.string().nullish().transform((s) => (s ? s : undefined));

// Secrets (the HS256 secret, the admin key): at least 32 characters, counted as JSON Schema's
// minLength and zod's min count them (code points), so that gateway.schema.json says the same; no
// fewer than 32 bytes either way.
const SECRET_MIN = 32;
const ADMIN_KEY_LENGTH = 'expected at least 32 characters (for example `openssl rand -base64 32`), or empty to turn the admin API off';
// The admin key hands over every account: no weaker than the token secret (CONTRACT §19).
const adminKey = z.union([z.literal(''), z.string().min(SECRET_MIN, ADMIN_KEY_LENGTH)], { error: ADMIN_KEY_LENGTH }).nullish().transform((s) => s ?? '');
const ASYMMETRIC = ['EdDSA', 'ES256', 'RS256'] as const;

// storage.redis (CONTRACT §9): one URL, a Sentinel group or a Cluster. Addresses are read into
// { host, port } here, so the connection code parses nothing.
const HOST_PORT = /^(?:\[([0-9A-Fa-f:.]+)\]|([^\s:[\]]+)):(\d{1,5})$/;
const hostPort = z.string().meta({ pattern: HOST_PORT.source, description: 'host:port ([v6 address]:port for IPv6).', title: 'host:port address', examples: ['10.0.0.1:26379', '10.0.0.2:26379'] })
  .transform((text, ctx) => {
    const m = HOST_PORT.exec(text.trim());
    const port = Number(m?.[3]);
    if (!m || port < 1 || port > 65535) {
      ctx.addIssue({ code: 'custom', message: `expected host:port such as 10.0.0.1:26379, got ${JSON.stringify(text)}` });
      return z.NEVER;
    }
    return { host: (m[1] ?? m[2])!, port };
  });
const REDIS_URL = /^(rediss?:\/\/.*)?$/;
const redisUrl = text.refine((url) => REDIS_URL.test(url), 'expected a redis:// or rediss:// URL (or a sentinels or cluster map)')
  .meta({ pattern: REDIS_URL.source, description: 'A redis:// or rediss:// URL; empty: no Redis.' });
const redisSentinel = z.strictObject({
  sentinels: z.array(hostPort).min(1).meta({ description: 'Sentinel addresses (host:port); the gateway asks them for the master of `name`, and again after a failover.' }),
  name: z.string().min(1).meta({ examples: ['mymaster'], description: 'The master group name the sentinels monitor (sentinel.conf `sentinel monitor NAME …`).' }),
  password: optionalText,
  sentinelPassword: optionalText,
});
const redisCluster = z.strictObject({
  cluster: z.array(hostPort).min(1).meta({ description: 'Some nodes of the Redis Cluster (host:port); the others are discovered.' }),
  password: optionalText,
});
export type RedisSettings = z.output<typeof redisUrl> | z.output<typeof redisSentinel> | z.output<typeof redisCluster>;

// The plans the spec names: they always exist (free is every new account's, pro unlocks API keys
// and webhooks). Others come into being by being named in plans.limits or a route's plans.
export const BASE_PLANS = ['free', 'premium', 'pro'] as const;
export type Plan = string;
// A plan travels in x-user-plan and in metric labels: a short lower-case name, as the database checks (008).
const PLAN_NAME = /^[a-z][a-z0-9_-]{0,31}$/;
const planName = z.string().regex(PLAN_NAME, 'expected a plan name: lower-case letters, digits, - and _, starting with a letter, at most 32')
  .meta({ title: 'plan name', examples: ['premium', 'pro'] });
// users.daily_usage is a Postgres integer: a larger limit would fail every counting UPDATE.
const MAX_LIMIT = 2_147_483_647;
const planLimits = z.strictObject({
  daily: int(1, MAX_LIMIT).meta({ examples: [1000] }).optional().meta({ description: 'Counted uses per UTC day on routes with dailyLimit: true; none: unlimited (free: plans.freeDailyLimit).' }),
  perMinute: int(1, MAX_LIMIT).meta({ examples: [60] }).optional().meta({ description: 'Requests per minute on routes with rateLimit: true (a bucket of this size, refilled over 60 s); none: no limit.' }),
});
export const HTTP_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

// An http(s) URL's scheme, host and port as a pattern: what gateway.schema.json can say of a URL.
// The values that take it are checked against it and parsed as URLs, so the file refuses what the
// pattern refuses (' https://x', 'http:x', 'https:\\x', which URL parsing would repair). A host is
// a name whose last label starts with a letter, a dotted IPv4 address or a [v6 address]; a port at
// most 65535.
const LABEL = '(?:[A-Za-z0-9_-]|[^\\x00-\\x7F])+';
const NAME = `(?:${LABEL}\\.)*(?:[A-Za-z_]|[^\\x00-\\x7F])(?:[A-Za-z0-9_-]|[^\\x00-\\x7F])*\\.?`;
const OCTET = '(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)';
const PORT = '0*(?:6553[0-5]|655[0-2]\\d|65[0-4]\\d{2}|6[0-4]\\d{3}|[1-5]\\d{4}|\\d{1,4})';
const HTTP_ORIGIN_SOURCE = `[Hh][Tt][Tt][Pp][Ss]?://(?:\\[[0-9A-Fa-f:.]+\\]|(?:${OCTET}\\.){3}${OCTET}|${NAME})(?::${PORT})?`;
const HTTP_URL = new RegExp(`^(?:${HTTP_ORIGIN_SOURCE}(?:[/?#]\\S*)?)$`);

// CORS (CONTRACT §10). An origin is compared with the browser's `Origin` header as text, so it is
// kept in the form browsers send (RFC 6454 serialization: lower case, no default port, no path).
const ORIGIN = new RegExp(`^(?:\\*|${HTTP_ORIGIN_SOURCE}/?)$`);
const origin = z.string().transform((text, ctx) => {
  if (text === '*') return text;
  let url: URL | undefined;
  try {
    if (ORIGIN.test(text)) url = new URL(text);
  } catch { /* reported below */ }
  if (!url || !/^https?:$/.test(url.protocol) || url.username || url.password || url.pathname !== '/' || url.search || url.hash) {
    ctx.addIssue({ code: 'custom', message: `expected an origin such as https://app.example.com (scheme, host and port only) or "*", got ${JSON.stringify(text)}` });
    return z.NEVER;
  }
  return url.origin;
}).meta({
  description: 'An origin: scheme, host and optional port (https://app.example.com:8443), or "*" (any origin, only without credentials).',
  title: 'origin', examples: ['https://app.example.com'], pattern: ORIGIN.source,
});
// RFC 9110 §5.1 token: what a header name may be.
const headerName = z.string().regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, 'expected a header name').meta({ title: 'header name', examples: ['x-api-key'] })
  .transform((name) => name.toLowerCase());

// The rules between the keys of one map are said to editors too (`allOf` of draft-07 if/then, in
// gateway.schema.json as written here): `gateway check` and the schema accept the same files. A
// `${VAR}` reference stands for any value (envReference is defined by jsonSchema.ts).
const envReference = { $ref: '#/definitions/envReference' };
const onlyFalse = { anyOf: [{ enum: [false, 'false'] }, envReference] };

const corsFields = {
  origins: z.array(origin).min(1),
  credentials: bool(),
  headers: z.array(headerName),
  exposeHeaders: z.array(headerName),
  maxAge: duration,
};
// The whole policy, with what a browser page calling the gateway needs by default: its token, a
// JSON body and an API key may be sent; the request id and Retry-After (of a 429) may be read.
const corsSchema = z.strictObject({
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
const routeCorsSchema = z.strictObject({
  origins: corsFields.origins.optional(),
  credentials: corsFields.credentials.optional(),
  headers: corsFields.headers.optional(),
  exposeHeaders: corsFields.exposeHeaders.optional(),
  maxAge: corsFields.maxAge.optional(),
});

const routeSchema = z.strictObject({
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
}).meta({
  // The rule of configSchema's check below: plans, dailyLimit and rateLimit need auth: required.
  allOf: [{ if: { required: ['auth'], properties: { auth: { enum: ['optional', 'none'] } } }, then: { not: { required: ['plans'] }, properties: { dailyLimit: onlyFalse, rateLimit: onlyFalse } } }],
});

/** http(s) URL to the application's page for a link sent by email, with `{token}` where the token goes. */
/** The bodies an OTLP/HTTP export may have (telemetry.otlp.protocol). */
export const OTLP_PROTOCOLS = ['http/protobuf', 'http/json'] as const;
export type OtlpProtocol = (typeof OTLP_PROTOCOLS)[number];

const linkTemplate = z.string().superRefine((text, ctx) => {
  if (!text.includes('{token}')) ctx.addIssue({ code: 'custom', message: 'expected a URL containing {token}, where the link\'s token goes' });
  else if (!isUrl(text.replaceAll('{token}', 'x'), /^https?:$/)) ctx.addIssue({ code: 'custom', message: `expected an http:// or https:// URL, got ${JSON.stringify(text)}` });
});

/** Why `origin` cannot run WebAuthn ceremonies for `rpId` (undefined: it can). */
function originProblem(origin: string, rpId: string): string | undefined {
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return `expected an origin such as https://${rpId}, got ${JSON.stringify(origin)}`;
  }
  if (url.origin !== origin) return `expected an origin (scheme, host and port only: ${url.origin}), got ${JSON.stringify(origin)}`;
  const host = url.hostname;
  if (host !== rpId && !host.endsWith(`.${rpId}`)) return `${origin} is not on ${rpId} or a subdomain of it: browsers refuse the ceremony`;
  if (url.protocol !== 'https:' && host !== 'localhost' && !host.endsWith('.localhost')) return `${origin}: browsers allow passkeys only on https:// pages (or http://localhost)`;
  return undefined;
}

function isUrl(text: string, protocol: RegExp): boolean {
  try {
    return protocol.test(new URL(text).protocol);
  } catch {
    return false;
  }
}

// Identity providers (CONTRACT §15). Issuers and the gateway's public URL are https://, except on
// loopback hosts (local providers, tests): a sign-in carried over plain HTTP could be read or
// changed on the way.
const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]', 'localhost']);
function httpsOrLoopback(text: string): boolean {
  try {
    const url = new URL(text);
    return url.protocol === 'https:' || (url.protocol === 'http:' && LOOPBACK_HOSTS.has(url.hostname));
  } catch {
    return false;
  }
}
const secureUrl = (example: string) => z.string().min(1).meta({ examples: [example] })
  .refine((u) => httpsOrLoopback(u), `expected an https:// URL such as ${example} (http:// only on 127.0.0.1, ::1 or localhost)`)
  .refine((u) => { const url = new URL(u); return !url.username && !url.password && !url.search && !url.hash; }, 'expected no user, query or fragment in the URL')
  .transform((u) => u.replace(/\/+$/, ''));
const returnToEntry = z.string().transform((text, ctx) => {
  let url: URL | undefined;
  try {
    url = new URL(text);
  } catch { /* reported below */ }
  if (!url || !/^https?:$/.test(url.protocol) || url.username || url.password || url.search || url.hash || text.includes('#') || text.endsWith('?')) {
    ctx.addIssue({ code: 'custom', message: `expected an http:// or https:// URL without query or fragment, such as https://app.example.com/signed-in, got ${JSON.stringify(text)}` });
    return z.NEVER;
  }
  // Compared as text with what the application sends (CONTRACT §26): written as browsers write it
  // (URL.href), or an entry could never match, or match a URL other than the one it seems to be.
  if (url.href !== text) {
    ctx.addIssue({ code: 'custom', message: `expected the exact URL as browsers write it: ${url.href}, got ${JSON.stringify(text)}` });
    return z.NEVER;
  }
  return text;
}).meta({ title: 'URL', examples: ['https://app.example.com/signed-in'] });
const OIDC_PROVIDER_NAME = /^[a-z0-9][a-z0-9_-]{0,31}$/;
/** Google's issuer: its addresses are its own to vouch for, and its ID tokens name a Workspace domain in `hd`. */
export const GOOGLE_ISSUER = 'https://accounts.google.com';
const emailDomain = z.string().regex(/^[^\s@]+\.[^\s@.]+$/, 'expected a domain such as example.com').transform((d) => d.toLowerCase()).meta({ examples: ['example.com'] });
// Which addresses a provider may vouch for (CONTRACT §26): any provider can assert any address
// verified, and a provider anyone can run, or sign up to, asserts the victim's.
const vouching = {
  trustEmail: bool().optional().meta({ description: 'true: the provider\'s verified email links to an existing account of that email and marks new accounts verified. Default: true for https://accounts.google.com, false otherwise (GitHub included).' }),
  emailDomains: z.array(emailDomain).min(1).optional().meta({ description: 'The domains whose addresses this provider may link or sign up (exact, case-insensitive); for Google the hd claim must be the email\'s domain. Absent: any.' }),
  allowSignUp: bool().prefault(true).meta({ description: 'false: the provider signs in accounts already linked or linked by email, and creates none.' }),
};
const scopeToken = z.string().regex(/^[\x21\x23-\x5b\x5d-\x7e]+$/, 'expected a scope token');
const oidcProviderSchema = z.strictObject({
  kind: z.literal('oidc').optional().meta({ description: 'oidc (the default): an OpenID Connect provider, found by discovery.' }),
  issuer: secureUrl('https://accounts.google.com').meta({ description: 'The provider\'s issuer; its discovery document is {issuer}/.well-known/openid-configuration.' }),
  clientId: z.string().min(1).meta({ examples: ['gateway'] }),
  clientSecret: z.string().min(1).meta({ examples: ['${GOOGLE_CLIENT_SECRET}'], description: 'The client secret the provider gave the gateway (sent to its token endpoint only).' }),
  scopes: z.array(scopeToken).default(['openid', 'email', 'profile'])
    .refine((scopes) => scopes.includes('openid'), 'expected openid among the scopes'),
  ...vouching,
});
/** GitHub's identities: (this issuer, the account's numeric id), which a rename of the login keeps. */
export const GITHUB_ISSUER = 'https://github.com';
const GITHUB_AUTHORIZE_URL = 'https://github.com/login/oauth/authorize';
// GitHub is OAuth 2 without OpenID Connect (no discovery, no ID token): its endpoints are named
// here, settable so that tests and the demo run against a local fake (CONTRACT §26).
const githubProviderSchema = z.strictObject({
  kind: z.literal('github').meta({ description: 'github: Sign in with GitHub (an OAuth App or a GitHub App\'s user authorization).' }),
  clientId: z.string().min(1).meta({ examples: ['Iv1.0123456789abcdef'] }),
  clientSecret: z.string().min(1).meta({ examples: ['${GITHUB_CLIENT_SECRET}'], description: 'The client secret GitHub gave the gateway (sent to its token endpoint only).' }),
  scopes: z.array(scopeToken).default(['read:user', 'user:email']),
  apiBase: secureUrl('https://api.github.com').default('https://api.github.com').meta({ description: 'GitHub\'s REST API: {apiBase}/user and {apiBase}/user/emails. Default: https://api.github.com.' }),
  authorizeUrl: secureUrl(GITHUB_AUTHORIZE_URL).default(GITHUB_AUTHORIZE_URL).meta({ description: 'Where the browser authorizes the gateway. Default: https://github.com/login/oauth/authorize.' }),
  tokenUrl: secureUrl('https://github.com/login/oauth/access_token').optional().meta({ description: 'Where the gateway exchanges the code. Default: /login/oauth/access_token at the origin of authorizeUrl.' }),
  ...vouching,
});
const providerSchema = z.discriminatedUnion('kind', [oidcProviderSchema, githubProviderSchema], {
  error: (issue) => (issue.code === 'invalid_union' ? 'expected oidc (the default) or github' : undefined),
}).transform((provider) => provider.kind === 'github'
  ? { ...provider, issuer: GITHUB_ISSUER, trustEmail: provider.trustEmail ?? false, tokenUrl: provider.tokenUrl ?? `${new URL(provider.authorizeUrl).origin}/login/oauth/access_token` }
  : { ...provider, kind: 'oidc' as const, trustEmail: provider.trustEmail ?? provider.issuer === GOOGLE_ISSUER });
const oidcSchema = z.strictObject({
  publicUrl: secureUrl('https://gw.example.com').meta({ description: 'The gateway as browsers reach it: each provider\'s redirect URI is {publicUrl}/api/v1/auth/oidc/{provider}/callback.' }),
  returnTo: z.array(returnToEntry).min(1).meta({ description: 'Where a sign-in may send the browser back: exact URLs, a return_to allowed only when identical to one (on an http://127.0.0.1 or http://[::1] entry, any port).' }),
  bindToBrowser: bool().optional().meta({ description: 'true: the login code is bound to the browser by the gw_oidc cookie, which the exchange must carry (every returnTo origin same-site with publicUrl, and allowed by cors with credentials: true); false: by the application\'s PKCE verifier alone. Default: true when every returnTo origin is same-site with publicUrl.' }),
  providers: z.record(z.string().meta({ examples: ['google'] }), providerSchema).superRefine((providers, ctx) => {
    if (Object.keys(providers).length === 0) ctx.addIssue({ code: 'custom', message: 'expected at least one provider' });
    for (const name of Object.keys(providers)) {
      if (!OIDC_PROVIDER_NAME.test(name)) ctx.addIssue({ code: 'custom', path: [name], message: 'expected a provider name of lower-case letters, digits, - and _ (it is a URL segment)' });
    }
  }),
}).superRefine((oidc, ctx) => {
  if (oidc.bindToBrowser === true && !everyReturnToSameSite(oidc)) {
    ctx.addIssue({ code: 'custom', path: ['bindToBrowser'], message: 'true needs every returnTo origin same-site with publicUrl: browsers send the gw_oidc cookie to the exchange from the gateway\'s site only' });
  }
  // Defaulted (not set) is kept apart: an explicit true that cannot work is a config error, a
  // default that cannot work a warning (configWarnings), so a file valid before stays valid.
}).transform((oidc) => ({ ...oidc, bindToBrowser: oidc.bindToBrowser ?? everyReturnToSameSite(oidc), bindToBrowserDefaulted: oidc.bindToBrowser === undefined }))
  .meta({ description: 'Sign in with identity providers (OpenID Connect, and GitHub with kind: github; docs/identity-providers.md); absent: the endpoints answer 404.' });

// Whether two URLs are of one site, as browsers decide which cookies a request carries (RFC 6265bis
// §5.2, schemeful): the same scheme, and the same registrable domain, or the same IP address.
// The registrable domain is taken as the host's last two labels: the gateway carries no copy of
// the Public Suffix List. That errs one way only, towards "same site" for two hosts under a
// suffix of several labels (a.example.co.uk and b.other.co.uk, x.github.io and y.github.io):
// bindToBrowser then defaults to true, the browser does not send the cookie, and every exchange
// is refused (fail closed, never a weaker binding); bindToBrowser: false is then the setting.
function siteOf(url: URL): string {
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  return `${url.protocol}//${isIP(host) ? host : host.split('.').slice(-2).join('.')}`;
}
const sameSite = (a: string, b: string) => siteOf(new URL(a)) === siteOf(new URL(b));

/**
 * The return pages' origins whose exchange would not carry the gw_oidc cookie: posted from another
 * origin, it carries the cookie only when CORS allows that origin with credentials (own endpoints
 * follow the global policy).
 */
export function originsWithoutCookie(cfg: { cors?: { origins: string[]; credentials: boolean }; auth: { oidc?: { publicUrl: string; returnTo: string[] } } }): string[] {
  const oidc = cfg.auth.oidc;
  if (!oidc) return [];
  const gateway = new URL(oidc.publicUrl).origin;
  return [...new Set(oidc.returnTo.map((entry) => new URL(entry).origin))]
    .filter((origin) => origin !== gateway && !(cfg.cors?.credentials === true && cfg.cors.origins.includes(origin)));
}

/** Whether the sign-in cookie can bind the login code (CONTRACT §26): the pages that exchange it are of the gateway's site. */
function everyReturnToSameSite(oidc: { publicUrl: string; returnTo: string[] }): boolean {
  return oidc.returnTo.every((entry) => sameSite(entry, oidc.publicUrl));
}

const mailSchema = z.strictObject({
  // Empty (as `${SMTP_URL:-}` gives when unset): no mail is sent; `gateway users reset-link` still makes links.
  smtp: text.refine((url) => url === '' || isUrl(url, /^smtps?:$/), { message: 'expected an smtp:// or smtps:// URL (or nothing: no mail is sent)' })
    .meta({ examples: ['smtp://user:pass@smtp.example.com:587'], description: 'The SMTP relay: smtp://user:pass@host:587 (STARTTLS when offered) or smtps://user:pass@host:465; empty: no mail is sent.' }),
  from: text.meta({ examples: ['Gateway <no-reply@example.com>'], description: 'The sender of the mails, e.g. "Gateway <no-reply@example.com>"; needed with smtp.' }),
  resetUrl: linkTemplate.meta({ examples: ['https://app.example.com/reset?token={token}'], description: "The application's password reset page, with {token} where the link's token goes." }),
  verifyUrl: linkTemplate.meta({ examples: ['https://app.example.com/verify?token={token}'], description: "The application's email verification page, with {token} where the link's token goes." }),
}).meta({ description: 'Account mails (password reset and email verification links). Without it, or with smtp empty, password/forgot and email/resend answer 503.' });

const upstreamSchema = z.strictObject({
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
export const configSchema = z.strictObject({
  server: z.strictObject({
    host: z.string().default('0.0.0.0'),
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
    redis: z.union([redisUrl, redisSentinel, redisCluster], { error: 'expected a redis:// or rediss:// URL, a map with sentinels and name, or a map with cluster' }),
    redisKeyPrefix: z.string().default('gw:'),
    redisTimeout: duration.prefault('100ms'),
    migrate: bool().prefault(true),
    // CONTRACT §25: at start, how long to wait for a Postgres that does not answer yet (compose,
    // Kubernetes start the database beside the gateway) before exiting 1.
    startTimeout: duration.prefault('60s').meta({ description: 'At start, how long to wait for a Postgres that does not answer yet (refused, unreachable, starting up) before exiting 1. A wrong password or a missing database stops the start at once.' }),
  }).prefault({}),
  auth: z.strictObject({
    jwt: z.strictObject({
      algorithm: z.enum(['HS256', ...ASYMMETRIC]).default('HS256'),
      secret: text.meta({ examples: ['${JWT_SECRET}'] }),
      privateKeyFile: optionalText.meta({ examples: ['keys/jwt.pem'] }),
      issuer: optionalText.meta({ examples: ['https://gw.example.com'] }),
      audience: optionalText.meta({ examples: ['my-app'] }),
    }).meta({
      // The rules of configSchema's check below: an HS256 secret (the default algorithm) of 32
      // characters or none; a private key file for the others.
      allOf: [
        { if: { properties: { algorithm: { const: 'HS256' } } }, then: { properties: { secret: { anyOf: [{ type: 'null' }, { const: '' }, { type: 'string', minLength: SECRET_MIN }, envReference] } } } },
        { if: { required: ['algorithm'], properties: { algorithm: { enum: [...ASYMMETRIC] } } }, then: { required: ['privateKeyFile'], properties: { privateKeyFile: { type: 'string', minLength: 1 } } } },
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
    passkeys: z.strictObject({
      rpId: z.string().regex(/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/, 'expected a host name in lower case, such as app.example.com (no scheme, no port)')
        .meta({ examples: ['app.example.com'] }),
      rpName: z.string().min(1).meta({ examples: ['Example'] }),
      origins: z.array(z.string().min(1).meta({ title: 'origin', examples: ['https://app.example.com'] })).min(1),
    }).superRefine(({ rpId, origins }, ctx) => {
      // A browser refuses a ceremony whose rpId is not its page's host or a parent of it: say so at
      // `gateway check`, not at the first user's sign-in.
      origins.forEach((origin, i) => {
        const problem = originProblem(origin, rpId);
        if (problem) ctx.addIssue({ code: 'custom', path: ['origins', i], message: problem });
      });
    }).optional().meta({ description: 'WebAuthn relying party (passkeys): rpId (the host name passkeys are bound to), rpName (shown by the authenticator), origins (the pages that run the ceremonies, https:// or http://localhost); absent: the passkey endpoints answer 404.' }),
    magicLink: z.strictObject({
      url: linkTemplate.meta({ examples: ['https://app.example.com/sign-in?token={token}'] }),
    }).optional().meta({ description: 'Sign-in links by email (needs mail); absent: 404.' }),
    oidc: oidcSchema.optional(),
  }).prefault({}),
  plans: z.strictObject({
    // The shorthand it always was: limits.free.daily (read through planLimitsOf, src/plans.ts).
    freeDailyLimit: int(1, MAX_LIMIT).optional(),
    limits: z.record(planName, planLimits).default({}),
  }).prefault({}),
  admin: z.strictObject({
    host: z.string().default('127.0.0.1'),
    port: port.default(9090),
    apiKey: adminKey,
    // Off loopback, the admin key, the metrics and the console's cookie would cross the network in clear.
    tls: listenerTls.optional().meta({ description: 'Serve the admin listener over HTTPS (the admin API, metrics, health, and the console off loopback); the files are read again on SIGHUP.' }),
    publicUrl: consoleOriginUrl.optional(),
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
      protocol: z.enum(OTLP_PROTOCOLS).optional().meta({ description: 'The export body: http/protobuf (OTLP\'s default) or http/json; unset: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf.' }),
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
  cors: corsSchema.optional(),
  mail: mailSchema.optional(),
  upstreams: z.record(z.string().regex(/^[A-Za-z0-9_.-]+$/, 'expected an upstream name of letters, digits, _ . -').meta({ examples: ['app'] }), upstreamSchema).default({}),
  routes: z.array(routeSchema).default([]),
}).superRefine((cfg, ctx) => {
  // These checks also run when a section is malformed (`when` below), so that `gateway check`
  // reports every problem of a file in one run (a typo, a wrong type and an unknown upstream
  // together). cfg may then hold a section as written, not as typed: a check that cannot read it
  // stops there, and the section's own problem is what gets reported.
  const each = (check: () => void) => {
    try {
      check();
    } catch (err) {
      if (!(err instanceof TypeError)) throw err;
    }
  };
  each(() => {
    const jwt = cfg.auth.jwt;
    if (jwt.algorithm === 'HS256' && jwt.secret && [...jwt.secret].length < SECRET_MIN) {
      ctx.addIssue({ code: 'custom', path: ['auth', 'jwt', 'secret'], message: 'expected at least 32 characters for HS256 (or leave it empty to have one generated)' });
    }
    if ((ASYMMETRIC as readonly string[]).includes(jwt.algorithm) && !jwt.privateKeyFile) {
      ctx.addIssue({ code: 'custom', path: ['auth', 'jwt', 'privateKeyFile'], message: `expected a PEM private key file for ${jwt.algorithm}` });
    }
  });
  each(() => {
    // Each worker is an instance: embedded storage is one process's (CONTRACT §18).
    if (cfg.server.workers !== 1 && !cfg.storage.postgres) {
      ctx.addIssue({ code: 'custom', path: ['server', 'workers'], message: 'more than one worker needs storage.postgres: embedded storage is one process\'s' });
    }
  });
  each(() => {
    const { freeDailyLimit, limits } = cfg.plans;
    if (freeDailyLimit !== undefined && limits.free?.daily !== undefined && limits.free.daily !== freeDailyLimit) {
      ctx.addIssue({ code: 'custom', path: ['plans', 'freeDailyLimit'], message: `freeDailyLimit is the shorthand for limits.free.daily, which says ${limits.free.daily}: keep one of them` });
    }
  });
  each(() => {
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
  });
  const corsProblem = (cors: { origins?: string[]; credentials?: boolean } | undefined) => {
    if (!cors?.origins) return undefined;
    if (cors.origins.includes('*') && cors.origins.length > 1) return 'expected "*" alone, or a list of origins without it';
    // Fetch standard: a browser refuses `Access-Control-Allow-Origin: *` on a request with credentials.
    if (cors.origins.includes('*') && cors.credentials) return '"*" cannot be used with credentials: true (browsers refuse it): list the origins';
    return undefined;
  };
  let globalCors: string | undefined;
  each(() => {
    globalCors = corsProblem(cfg.cors);
    if (globalCors) ctx.addIssue({ code: 'custom', path: ['cors', 'origins'], message: globalCors });
    if (cfg.mail?.smtp && !cfg.mail.from.includes('@')) {
      ctx.addIssue({ code: 'custom', path: ['mail', 'from'], message: 'expected the sender of the mails, such as "Gateway <no-reply@example.com>" (needed when mail.smtp is set)' });
    }
    if (cfg.auth.magicLink && !cfg.mail) {
      ctx.addIssue({ code: 'custom', path: ['auth', 'magicLink'], message: 'needs mail: a sign-in link goes out by email' });
    }
    if (cfg.auth.requireVerifiedEmail && !cfg.mail?.smtp) {
      ctx.addIssue({ code: 'custom', path: ['auth', 'requireVerifiedEmail'], message: 'needs mail.smtp: without mail no account could receive its verification link, and none could log in' });
    }
  });
  each(() => {
    const oidc = cfg.auth.oidc;
    if (!oidc?.bindToBrowser || oidc.bindToBrowserDefaulted) return;
    for (const origin of originsWithoutCookie(cfg)) {
      ctx.addIssue({ code: 'custom', path: ['auth', 'oidc', 'bindToBrowser'], message: `true needs cors to allow ${origin} with credentials: true, so that its page's exchange carries the gw_oidc cookie; or set bindToBrowser: false to bind by the application's PKCE verifier alone` });
    }
  });
  const seen = new Set<string>();
  each(() => cfg.routes.forEach((route, i) => each(() => {
      if (route.cors) {
        if (!cfg.cors && !route.cors.origins) ctx.addIssue({ code: 'custom', path: ['routes', i, 'cors', 'origins'], message: 'expected origins (there is no global cors to take them from)' });
        const problem = corsProblem({ ...cfg.cors, ...route.cors });
        if (problem && !globalCors) ctx.addIssue({ code: 'custom', path: ['routes', i, 'cors', 'origins'], message: problem });
      }
      if (route.upstream === undefined) {
        // A route nobody could reach would be a typo that silently guards nothing.
        if (cfg.decisions.port === 0) ctx.addIssue({ code: 'custom', path: ['routes', i, 'upstream'], message: 'required unless decisions.port is set (a route without upstream is decision-only)' });
        if (route.rewritePrefix !== undefined) ctx.addIssue({ code: 'custom', path: ['routes', i, 'rewritePrefix'], message: 'needs an upstream: a decision-only route is never forwarded by the gateway' });
        if (route.websocket) ctx.addIssue({ code: 'custom', path: ['routes', i, 'websocket'], message: 'needs an upstream: a decision-only route is never forwarded by the gateway' });
      } else if (!(route.upstream in cfg.upstreams)) {
        ctx.addIssue({ code: 'custom', path: ['routes', i, 'upstream'], message: `unknown upstream ${JSON.stringify(route.upstream)}; declared: ${Object.keys(cfg.upstreams).join(', ') || 'none'}` });
      }
      if (route.websocket && route.methods && !route.methods.includes('GET')) {
        ctx.addIssue({ code: 'custom', path: ['routes', i, 'methods'], message: 'websocket: true needs GET among the methods (an upgrade is a GET)' });
      }
      if ((route.plans || route.dailyLimit || route.rateLimit) && route.auth !== 'required') {
        ctx.addIssue({ code: 'custom', path: ['routes', i, 'auth'], message: 'plans, dailyLimit and rateLimit need auth: required' });
      }
      // Requests are matched in the form normalizePath gives them (`/api//admin/x` as `/api/admin/x`):
      // a route declared otherwise is never matched, and a shorter route takes what it was to guard.
      const readAs = normalizePath(route.path, route.encodedSeparators === 'keep');
      if (readAs !== route.path) {
        ctx.addIssue({
          code: 'custom', path: ['routes', i, 'path'],
          message: readAs === undefined
            ? `path ${route.path} can never be requested: the gateway refuses such paths (400)`
            : `path ${route.path} is never requested as written: requests for it are read as ${readAs}, so declare that`,
        });
      }
      // Paths are matched without regard to case (routeTable.ts, matchKey): /Docs and /docs are one.
      const key = route.path.toLowerCase();
      if (seen.has(key)) {
        ctx.addIssue({ code: 'custom', path: ['routes', i, 'path'], message: `path ${route.path} is declared twice (paths are matched without regard to case)` });
      }
      seen.add(key);
  })));
}, { when: () => true });

export type Config = z.output<typeof configSchema>;
export type RouteConfig = Config['routes'][number];
export type UpstreamConfig = Config['upstreams'][string];
export type CorsConfig = NonNullable<Config['cors']>;
