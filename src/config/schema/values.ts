// The kinds of value gateway.yaml is written in: durations and sizes (turned into milliseconds and
// bytes here, so nothing downstream parses them), numbers and booleans from ${VAR} text, secrets,
// URLs and origins as patterns gateway.schema.json can say too.
import { createPublicKey, type KeyObject } from 'node:crypto';
import { z } from 'zod';

export const DURATION_UNITS_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
export const SIZE_UNITS = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 } as const;
// Positive amounts only. Without flags, so gateway.schema.json carries them as they are (`pattern`).
export const DURATION = /^0*([1-9]\d*)(ms|s|m|h|d)$/;
export const SIZE = /^0*([1-9]\d*)([kKmMgG]?[bB])?$/;

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
export const duration = z.string({ error: 'expected a duration such as 500ms, 30s, 15m or 30d (a number needs its unit: 30s, not 30)' }).transform((text, ctx) => {
  const ms = parseDuration(text);
  if (ms === undefined) {
    ctx.addIssue({ code: 'custom', message: `expected a duration such as 500ms, 30s, 15m or 30d, got ${JSON.stringify(text)}` });
    return z.NEVER;
  }
  return ms;
}).meta({ pattern: DURATION.source, description: 'A duration: a positive whole number and a unit (ms, s, m, h, d), e.g. 500ms, 30s, 15m, 30d.' });

// A duration that may be nothing at all ("0s"): a delay that can be turned off.
export const ZERO_DURATION = /^0+(ms|s|m|h|d)$/;
export const durationOrZero = z.string({ error: 'expected a duration such as 0s, 500ms or 5s (a number needs its unit: 5s, not 5)' }).transform((text, ctx) => {
  if (ZERO_DURATION.test(text.trim())) return 0;
  const ms = parseDuration(text);
  if (ms === undefined) {
    ctx.addIssue({ code: 'custom', message: `expected a duration such as 0s, 500ms or 5s, got ${JSON.stringify(text)}` });
    return z.NEVER;
  }
  return ms;
}).meta({ pattern: `${ZERO_DURATION.source}|${DURATION.source}`, description: 'A duration, or 0 (with a unit): e.g. 0s, 500ms, 5s.' });

export const size = z.union([
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
export const int = (min: number, max = Number.MAX_SAFE_INTEGER) => z.preprocess((v) => (typeof v === 'string' && /^-?\d+$/.test(v.trim()) ? Number(v) : v), z.number().int().min(min).max(max));
// A number or the text of one ("8080", as PORT gives): never `true` read as 1.
export const port = int(0, 65535);
// A share from 0 to 1: a number, or its text ("0.25", as ${VAR} gives it).
export const ratio = z.preprocess((v) => (typeof v === 'string' && /^\s*(?:\d+(?:\.\d*)?|\.\d+)\s*$/.test(v) ? Number(v) : v), z.number().min(0).max(1).meta({ examples: [0.25] }));
export const bool = () => z.preprocess((v) => (v === 'true' ? true : v === 'false' ? false : v), z.boolean());
// `key:` with nothing after it (as `${VAR:-}` gives) is YAML null: read it as empty.
export const text = z.string().nullish().transform((s) => s ?? '');
export const optionalText = z.string().nullish().transform((s) => (s ? s : undefined));

// Secrets (the HS256 secret, the admin key): at least 32 characters, counted as JSON Schema's
// minLength and zod's min count them (code points), so that gateway.schema.json says the same; no
// fewer than 32 bytes either way.
export const SECRET_MIN = 32;
export const ADMIN_KEY_LENGTH = 'expected at least 32 characters (for example `openssl rand -base64 32`), or empty to turn the admin API off';
// The admin key hands over every account: no weaker than the token secret (CONTRACT §19).
export const adminKey = z.union([z.literal(''), z.string().min(SECRET_MIN, ADMIN_KEY_LENGTH)], { error: ADMIN_KEY_LENGTH }).nullish().transform((s) => s ?? '');
// A scrape token (CONTRACT §28): shorter, whoever reaches the metrics listener could guess it.
const METRICS_TOKEN_MIN = 16;
const metricsToken = optionalText.pipe(z.string().min(METRICS_TOKEN_MIN, `expected at least ${METRICS_TOKEN_MIN} characters (for example \`openssl rand -base64 32\`), or empty for none`).optional())
  .meta({ examples: ['${METRICS_TOKEN}'], description: 'A scrape then needs Authorization: Bearer <token> (else 401); empty: none (keep host on loopback or a network only Prometheus reaches).' });
/** The metrics listener (CONTRACT §28): /metrics alone, for a cluster's Prometheus. port 0: none (the admin listener's /metrics stays either way). */
export const metricsListener = z.strictObject({ host: z.string().default('127.0.0.1'), port: port.default(0).meta({ examples: [9464] }), token: metricsToken }).prefault({});
export const ASYMMETRIC = ['EdDSA', 'ES256', 'RS256'] as const;

// An http(s) URL's scheme, host and port as a pattern: what gateway.schema.json can say of a URL.
// The values that take it are checked against it and parsed as URLs, so the file refuses what the
// pattern refuses (' https://x', 'http:x', 'https:\\x', which URL parsing would repair). A host is
// a name whose last label starts with a letter, a dotted IPv4 address or a [v6 address]; a port at
// most 65535.
export const LABEL = '(?:[A-Za-z0-9_-]|[^\\x00-\\x7F])+';
export const NAME = `(?:${LABEL}\\.)*(?:[A-Za-z_]|[^\\x00-\\x7F])(?:[A-Za-z0-9_-]|[^\\x00-\\x7F])*\\.?`;
export const OCTET = '(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)';
export const PORT = '0*(?:6553[0-5]|655[0-2]\\d|65[0-4]\\d{2}|6[0-4]\\d{3}|[1-5]\\d{4}|\\d{1,4})';
export const HTTP_ORIGIN_SOURCE = `[Hh][Tt][Tt][Pp][Ss]?://(?:\\[[0-9A-Fa-f:.]+\\]|(?:${OCTET}\\.){3}${OCTET}|${NAME})(?::${PORT})?`;
export const HTTP_URL = new RegExp(`^(?:${HTTP_ORIGIN_SOURCE}(?:[/?#]\\S*)?)$`);

// CORS (CONTRACT §10). An origin is compared with the browser's `Origin` header as text, so it is
// kept in the form browsers send (RFC 6454 serialization: lower case, no default port, no path).
export const ORIGIN = new RegExp(`^(?:\\*|${HTTP_ORIGIN_SOURCE}/?)$`);
export const origin = z.string().transform((text, ctx) => {
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
export const headerName = z.string().regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, 'expected a header name').meta({ title: 'header name', examples: ['x-api-key'] })
  .transform((name) => name.toLowerCase());

// The rules between the keys of one map are said to editors too (`allOf` of draft-07 if/then, in
// gateway.schema.json as written here): `gateway check` and the schema accept the same files. A
// `${VAR}` reference stands for any value (envReference is defined by jsonSchema.ts).
export const envReference = { $ref: '#/definitions/envReference' };
export const onlyFalse = { anyOf: [{ enum: [false, 'false'] }, envReference] };

export function isUrl(text: string, protocol: RegExp): boolean {
  try {
    return protocol.test(new URL(text).protocol);
  } catch {
    return false;
  }
}


export const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]', 'localhost']);
export function httpsOrLoopback(text: string): boolean {
  try {
    const url = new URL(text);
    return url.protocol === 'https:' || (url.protocol === 'http:' && LOOPBACK_HOSTS.has(url.hostname));
  } catch {
    return false;
  }
}
export const secureUrl = (example: string) => z.string().min(1).meta({ examples: [example] })
  .refine((u) => httpsOrLoopback(u), `expected an https:// URL such as ${example} (http:// only on 127.0.0.1, ::1 or localhost)`)
  .refine((u) => { const url = new URL(u); return !url.username && !url.password && !url.search && !url.hash; }, 'expected no user, query or fragment in the URL')
  .transform((u) => u.replace(/\/+$/, ''));

/** auth.jwt.algorithm's values. */
export type JwtAlgorithm = 'HS256' | (typeof ASYMMETRIC)[number];

/** Why a PEM text is not a key that verifies `algorithm`'s signatures; undefined when it is one. */
export function verifyingKeyProblem(pem: string, algorithm: JwtAlgorithm): string | undefined {
  let key: KeyObject;
  try {
    key = createPublicKey(pem);
  } catch (err) {
    return `not a PEM public or private key: ${(err as Error).message}`;
  }
  return keyTypeProblem(key, algorithm);
}

/** An auth.jwt.previous entry written in place (a PEM), rather than the name of a file holding one. */
export const isInlinePem = (entry: string): boolean => entry.trimStart().startsWith('-----BEGIN');

/** Why a key (private or public) is not one of `algorithm`'s; undefined when it is one. */
export function keyTypeProblem(key: KeyObject, algorithm: JwtAlgorithm): string | undefined {
  const type = key.asymmetricKeyType;
  const details = key.asymmetricKeyDetails ?? {};
  switch (algorithm) {
    case 'EdDSA':
      return type === 'ed25519' ? undefined : `an ${type} key, not an Ed25519 one`;
    case 'ES256':
      return type === 'ec' && details.namedCurve === 'prime256v1' ? undefined : `an ${type}${details.namedCurve ? ` ${details.namedCurve}` : ''} key, not an EC P-256 one`;
    case 'RS256':
      if (type !== 'rsa') return `an ${type} key, not an RSA one`;
      return (details.modulusLength ?? 0) >= 2048 ? undefined : `an RSA key of ${details.modulusLength} bits: 2048 at least`;
    default:
      return undefined; // HS256 signs with a secret, not a file
  }
}
