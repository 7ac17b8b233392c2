// The one description of gateway.yaml: zod gives both the validator and the TypeScript type.
// Durations and sizes are turned into milliseconds and bytes here, so nothing downstream parses them.
import { z } from 'zod';

const DURATION_UNITS_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
const SIZE_UNITS = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 } as const;

export function parseDuration(text: string): number | undefined {
  const m = /^(\d+)(ms|s|m|h|d)$/.exec(text.trim());
  return m ? Number(m[1]) * DURATION_UNITS_MS[m[2] as keyof typeof DURATION_UNITS_MS] : undefined;
}

export function parseSize(text: string): number | undefined {
  const m = /^(\d+)(b|kb|mb|gb)?$/i.exec(text.trim());
  if (!m) return undefined;
  return Number(m[1]) * SIZE_UNITS[(m[2]?.toLowerCase() ?? 'b') as keyof typeof SIZE_UNITS];
}

const duration = z.string().transform((text, ctx) => {
  const ms = parseDuration(text);
  if (ms === undefined || ms <= 0) {
    ctx.addIssue({ code: 'custom', message: `expected a duration such as 500ms, 30s, 15m or 30d, got ${JSON.stringify(text)}` });
    return z.NEVER;
  }
  return ms;
});

const size = z.union([z.number().int().positive(), z.string()]).transform((v, ctx) => {
  const bytes = typeof v === 'number' ? v : parseSize(v);
  if (bytes === undefined || bytes <= 0) {
    ctx.addIssue({ code: 'custom', message: `expected a size such as 64kb or 1mb, got ${JSON.stringify(v)}` });
    return z.NEVER;
  }
  return bytes;
});

const port = z.coerce.number().int().min(0).max(65535);
// `${VAR}` values arrive as text (see load.ts): "20" and "true" are read as the number and boolean they spell.
const int = (min: number, max = Number.MAX_SAFE_INTEGER) => z.preprocess((v) => (typeof v === 'string' && /^-?\d+$/.test(v.trim()) ? Number(v) : v), z.number().int().min(min).max(max));
const bool = () => z.preprocess((v) => (v === 'true' ? true : v === 'false' ? false : v), z.boolean());
// `key:` with nothing after it (as `${VAR:-}` gives) is YAML null: read it as empty.
const text = z.string().nullish().transform((s) => s ?? '');
const optionalText = z.string().nullish().transform((s) => (s ? s : undefined));

export const PLANS = ['free', 'premium', 'pro'] as const;
export type Plan = (typeof PLANS)[number];
export const HTTP_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

const routeSchema = z.strictObject({
  // No `;`: routes are matched on paths without segment parameters (routeTable.ts, matchKey).
  path: z.string().regex(/^\/[^?#;\s]*$/, 'expected a path starting with / (no query, no `;`, no spaces)')
    .transform((p) => (p.length > 1 ? p.replace(/\/+$/, '') || '/' : p)),
  upstream: z.string().min(1),
  methods: z.array(z.string().transform((m) => m.toUpperCase()).pipe(z.enum(HTTP_METHODS))).min(1).optional(),
  auth: z.enum(['required', 'optional', 'none']).default('required'),
  plans: z.array(z.enum(PLANS)).min(1).optional(),
  dailyLimit: bool().default(false),
  rewritePrefix: z.string().regex(/^(\/[^?#\s]*)?$/, 'expected a path starting with /').optional(),
});

const upstreamSchema = z.strictObject({
  url: z.url({ protocol: /^https?$/, error: 'expected an http:// or https:// URL' })
    .transform((u) => u.replace(/\/+$/, '')),
  timeout: duration.default(30_000),
  assertion: bool().default(false),
});

export const configSchema = z.strictObject({
  server: z.strictObject({
    host: z.string().default('0.0.0.0'),
    port: port.default(8080),
    bodyLimit: size.default(1024 * 1024),
    trustProxy: bool().default(false),
  }).prefault({}),
  storage: z.strictObject({
    postgres: text,
    embeddedDir: z.string().default('./data'),
    redis: text,
    redisKeyPrefix: z.string().default('gw:'),
    migrate: bool().default(true),
  }).prefault({}),
  auth: z.strictObject({
    jwt: z.strictObject({
      algorithm: z.enum(['HS256', 'EdDSA', 'ES256', 'RS256']).default('HS256'),
      secret: text,
      privateKeyFile: optionalText,
      issuer: optionalText,
      audience: optionalText,
    }).prefault({}),
    accessTokenTtl: duration.default(15 * 60_000),
    refreshTokenTtl: duration.default(30 * 86_400_000),
    passwordMinLength: int(1, 1024).default(8),
    refreshReuse: z.enum(['reject', 'revoke-all']).default('reject'),
    rateLimit: z.strictObject({
      max: int(0).default(20),
      window: duration.default(60_000),
    }).prefault({}),
  }).prefault({}),
  plans: z.strictObject({
    // users.daily_usage is a Postgres integer: a larger limit would fail every counting UPDATE.
    freeDailyLimit: int(1, 2_147_483_647).default(1),
  }).prefault({}),
  admin: z.strictObject({
    host: z.string().default('127.0.0.1'),
    port: port.default(9090),
    apiKey: text,
  }).prefault({}),
  webhooks: z.strictObject({
    timeout: duration.default(5000),
    retries: int(0, 10).default(3),
    allowPrivateNetworks: bool().default(false),
    caFile: optionalText,
  }).prefault({}),
  upstreams: z.record(z.string().regex(/^[A-Za-z0-9_.-]+$/, 'expected an upstream name of letters, digits, _ . -'), upstreamSchema).default({}),
  routes: z.array(routeSchema).default([]),
}).superRefine((cfg, ctx) => {
  const jwt = cfg.auth.jwt;
  if (jwt.algorithm === 'HS256' && jwt.secret && Buffer.byteLength(jwt.secret) < 32) {
    ctx.addIssue({ code: 'custom', path: ['auth', 'jwt', 'secret'], message: 'expected at least 32 bytes for HS256 (or leave it empty to have one generated)' });
  }
  if (jwt.algorithm !== 'HS256' && !jwt.privateKeyFile) {
    ctx.addIssue({ code: 'custom', path: ['auth', 'jwt', 'privateKeyFile'], message: `expected a PEM private key file for ${jwt.algorithm}` });
  }
  const seen = new Set<string>();
  cfg.routes.forEach((route, i) => {
    if (!(route.upstream in cfg.upstreams)) {
      ctx.addIssue({ code: 'custom', path: ['routes', i, 'upstream'], message: `unknown upstream ${JSON.stringify(route.upstream)}; declared: ${Object.keys(cfg.upstreams).join(', ') || 'none'}` });
    }
    if ((route.plans || route.dailyLimit) && route.auth !== 'required') {
      ctx.addIssue({ code: 'custom', path: ['routes', i, 'auth'], message: 'plans and dailyLimit need auth: required' });
    }
    // Paths are matched without regard to case (routeTable.ts, matchKey): /Docs and /docs are one.
    const key = route.path.toLowerCase();
    if (seen.has(key)) {
      ctx.addIssue({ code: 'custom', path: ['routes', i, 'path'], message: `path ${route.path} is declared twice (paths are matched without regard to case)` });
    }
    seen.add(key);
  });
});

export type Config = z.output<typeof configSchema>;
export type RouteConfig = Config['routes'][number];
export type UpstreamConfig = Config['upstreams'][string];
