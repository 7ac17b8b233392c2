// `gateway check` and the published JSON Schema (gateway.schema.json, what editors validate with)
// never disagree (issue 27): for generated configurations, check accepts a file exactly when the
// schema validates it. The generator varies the form of the values an operator writes, section by
// section (valid, the wrong type, out of range, a numeric or boolean string, a `${VAR:-default}`
// reference, a misspelt key), sections present or not. Rules between the keys of one map (an HS256
// secret's length, a private key for the other algorithms, "*" alone and without credentials,
// plans and limits only with auth: required) are in the schema and varied here; rules across
// sections (an unknown upstream, a duplicate path, a route's cors without a global one), which it
// cannot express, are kept satisfied, as are the values a reference would hide.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv } from 'ajv';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../src/config/load.js';
import { fuzzRuns } from '../helpers/fuzz.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const schema = JSON.parse(readFileSync(path.join(ROOT, 'gateway.schema.json'), 'utf8')) as object;
const ajv = new Ajv({ strict: false, allErrors: true });
const validate = ajv.compile(schema);

/** A value for a key: mostly one of the valid forms, so that a single odd value decides (the others pass). */
const mostly = <T>(valid: T[], odd: T[]) => fc.oneof({ arbitrary: fc.constantFrom(...valid), weight: 30 }, { arbitrary: fc.constantFrom(...odd), weight: 1 });
const maybe = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined, freq: 3 });
/** Sometimes a key misspelt: `timeout` as `timout`. */
const key = (name: string) => mostly([name], [`${name.slice(0, -2)}${name.slice(-1)}`]);
/** An object of the entries that are present (a misspelt key keeps its value). */
const entries = (pairs: Array<[string, unknown]>) => Object.fromEntries(pairs.filter(([, v]) => v !== undefined));

const port = fc.oneof(
  { arbitrary: fc.integer({ min: 0, max: 65535 }), weight: 30 },
  { arbitrary: fc.constantFrom<unknown>(70000, -1, '8080', ' 9090', '70000', '-0', '-80', '008080', 'eighty', true, 1.5, '${PORT_IN_FILE:-8080}'), weight: 2 },
);
const duration = mostly<unknown>(['30s', '500ms', '15m', '2h', '1d'], [30, '30', 'soon', '${TIMEOUT:-30s}', '-5s']);
const bool = mostly<unknown>([true, false], ['true', 'false', 'yes', 1, '${FLAG:-false}']);
const size = mostly<unknown>(['1mb', '64kb', 1024], ['10 MB', 'big', -1, '${LIMIT:-1mb}', '2048', true]);
const limit = fc.oneof({ arbitrary: fc.integer({ min: 1, max: 1000 }), weight: 30 }, { arbitrary: fc.constantFrom<unknown>(0, -3, '20', '0', '1001', 'many', 2.5, [5]), weight: 1 });
const url = mostly<unknown>(['http://127.0.0.1:3000', 'https://api.internal'], ['ftp://x', 'not a url', 42, '${APP_URL:-http://127.0.0.1:3000}']);
const host = mostly<unknown>(['127.0.0.1', '0.0.0.0', '::1'], [5, ['a'], '${HOST_IN_FILE:-127.0.0.1}', null]);
const file = mostly<unknown>(['tls/cert.pem', './key.pem'], ['', null, 5, '${FILE:-x.pem}']);
const text = mostly<unknown>(['auth-gateway', 'my-app'], ['', null, 5, true, '${TEXT:-x}']);
const redis = mostly<unknown>(['redis://127.0.0.1:6379', 'rediss://r.internal:6380', { cluster: ['10.0.0.1:7000'] }], [
  'http://nope', '${REDIS_URL:-redis://127.0.0.1:6379}',
  { sentinels: ['10.0.0.1:26379', '${REDIS_SENTINEL_2:-10.0.0.2:26379}'], name: 'mymaster' },
  { sentinels: ['10.0.0.1'], name: 'mymaster' }, { sentinels: [], name: 'mymaster' }, { cluster: ['10.0.0.1:7000'], name: 'x' },
]);
// Secrets of every length around 32 characters, in one byte or more per character (é: 2 bytes; an emoji: 4, and 2 UTF-16 units).
const secret = mostly<unknown>(['', 'x'.repeat(32), 'k'.repeat(44), 'é'.repeat(32), '😀'.repeat(32)], [
  'a', 'x'.repeat(31), 'é'.repeat(16), 'é'.repeat(31), '😀'.repeat(16), '😀'.repeat(31), null, 5, ['x'.repeat(32)], '${GATEWAY_ADMIN_KEY:-}', '${SECRET:-' + 'y'.repeat(32) + '}',
]);
const algorithm = mostly<unknown>([undefined, 'HS256', 'EdDSA', 'ES256', 'RS256'], ['hs256', 'none', 5]);
const origin = mostly<unknown>(['https://app.example.com', 'http://localhost:5173', 'HTTPS://App.Example.COM:8443/', 'http://127.0.0.1:8080', 'http://[::1]:3000', '*'], [
  'app.example.com', 'https://app.example.com/path', 'ftp://x', 'https://u:p@x', 'http:x', ' https://x', 'https://x?q', 'null', 'https://x:70000', 'http://1.2.3.256', 5, '${ORIGIN:-https://app.example.com}',
]);
const headers = mostly<unknown>([['authorization'], ['X-Custom', 'content-type'], []], [['a b'], [5], 'authorization', ['${HEADER:-x-a}']]);
const ratio = mostly<unknown>([0, 0.25, 1, '0.5', '.5', '1'], [2, -0.1, 'lots', '-0.5', '1.5', '${RATIO:-0.5}', true]);
const endpoint = mostly<unknown>(['http://collector:4318', 'https://otel.example.com/base', '', null], ['ftp://x', 'collector:4318', 'http://', 'http://a b', 5, '${OTLP:-http://collector:4318}']);

const server = fc.record({ port: maybe(port), portKey: key('port'), host: maybe(host), bodyLimit: maybe(size), trustProxy: maybe(bool),
  shutdownDelay: maybe(mostly<unknown>(['0s', '5s', '2m'], [5, 'never'])) })
  .map((s) => entries([[s.portKey, s.port], ['host', s.host], ['bodyLimit', s.bodyLimit], ['trustProxy', s.trustProxy], ['shutdownDelay', s.shutdownDelay]]));
const auth = fc.record({
  rateMax: maybe(limit), rateWindow: maybe(duration), accessTokenTtl: maybe(duration), refreshReuse: maybe(mostly<unknown>(['reject', 'revoke-all'], ['forgive'])),
  algorithm, secret: maybe(secret), privateKeyFile: maybe(file), issuer: maybe(text), audience: maybe(text), jwtKey: key('secret'),
}).map((a) => entries([
  ['rateLimit', entries([['max', a.rateMax], ['window', a.rateWindow]])], ['accessTokenTtl', a.accessTokenTtl], ['refreshReuse', a.refreshReuse],
  ['jwt', entries([['algorithm', a.algorithm], [a.jwtKey, a.secret], ['privateKeyFile', a.privateKeyFile], ['issuer', a.issuer], ['audience', a.audience]])],
]));
// The console's origin: https:// anywhere, http:// on loopback only, no path.
const consoleUrl = mostly<unknown>(['https://gateway-admin.example.com', 'HTTPS://Admin.Example.COM:9443/', 'https://[fd00::5]:9443', 'http://127.0.0.1:9090', 'http://localhost:9090', 'http://[::1]:9090'], [
  'http://admin.example.com', 'http://127.0.0.2:9090', 'https://admin.example.com/console/', 'https://x?q', 'https://u:p@x', 'admin.example.com', 'https://x:70000', 5, '${CONSOLE_URL:-https://a.example}',
]);
const admin = fc.record({ host: maybe(host), port: maybe(port), apiKey: maybe(secret), apiKeyKey: key('apiKey'), publicUrl: maybe(consoleUrl),
  tls: maybe(fc.record({ certFile: file, keyFile: maybe(file), http2: maybe(bool), minVersion: maybe(mostly<unknown>(['TLSv1.2', 'TLSv1.3'], ['TLSv1.1', 1.3])) })) })
  .map((a) => entries([['host', a.host], ['port', a.port], [a.apiKeyKey, a.apiKey], ['publicUrl', a.publicUrl], ['tls', a.tls && entries(Object.entries(a.tls))]]));
const webhooks = fc.record({ timeout: maybe(duration), retries: maybe(mostly<unknown>([0, 3, 10, '5'], [11, -1, 'x'])), allowPrivateNetworks: maybe(bool), caFile: maybe(file) })
  .map((w) => entries(Object.entries(w)));
const cors = fc.record({
  origins: mostly<unknown>([[], [0], [0, 1]], ['*', null]), picks: fc.array(origin, { minLength: 2, maxLength: 2 }),
  credentials: maybe(mostly<unknown>([true, false, 'true'], ['${CREDENTIALS:-false}', 'sometimes'])),
  headers: maybe(headers), exposeHeaders: maybe(headers), maxAge: maybe(duration), originsKey: key('origins') })
  // origins: a list of 0 to 2 generated origins (so also "*" among others), or not a list at all.
  .map((c) => entries([[c.originsKey, Array.isArray(c.origins) ? c.origins.map((i) => c.picks[i as number]) : c.origins], ['credentials', c.credentials],
    ['headers', c.headers], ['exposeHeaders', c.exposeHeaders], ['maxAge', c.maxAge]]));
const decisions = fc.record({ host: maybe(host), port: maybe(port) }).map((d) => entries(Object.entries(d)));
const telemetry = fc.record({ endpoint: maybe(endpoint), serviceName: maybe(text), sampleRatio: maybe(ratio), trustIncoming: maybe(bool),
  protocol: maybe(mostly<unknown>(['http/protobuf', 'http/json'], ['grpc', 'HTTP/JSON'])) }).map((o) => ({ otlp: entries(Object.entries(o)) }));
const audit = fc.record({ retention: maybe(duration) }).map((a) => entries(Object.entries(a)));
const plans = fc.record({ freeDaily: maybe(limit), premiumDaily: maybe(limit), premiumPerMinute: maybe(limit), limitsKey: key('perMinute') })
  .map((p) => entries([['freeDailyLimit', p.freeDaily], ['limits', p.premiumDaily === undefined && p.premiumPerMinute === undefined ? undefined
    : { premium: entries([['daily', p.premiumDaily], [p.limitsKey, p.premiumPerMinute]]) }]]));
const storage = fc.record({ redis: maybe(redis), poolSize: maybe(limit) }).map((s) => entries(Object.entries(s)));
const route = fc.record({
  auth: maybe(mostly<unknown>(['required', 'none', 'optional'], ['maybe', 1, '${AUTH:-required}'])),
  plans: maybe(mostly<unknown>([['pro'], ['premium', 'pro']], ['premium', [], ['Gold Plan'], [5]])),
  dailyLimit: maybe(mostly<unknown>([true, false, 'false'], ['yes', '${DAILY:-false}'])),
  rateLimit: maybe(mostly<unknown>([true, false, 'true'], [1, '${RATE:-false}'])),
  methods: maybe(mostly<unknown>([['GET'], ['GET', 'POST'], ['get', 'Post']], [['FETCH'], 'GET', []])),
  encodedSeparators: maybe(mostly<unknown>(['refuse', 'keep'], ['allow', true, 'KEEP'])),
  mfa: maybe(mostly<unknown>(['required', 'optional'], ['always', false])),
}).map((r) => entries(Object.entries(r)));

const config = fc.record({
  server: maybe(server), auth: maybe(auth), admin: maybe(admin), webhooks: maybe(webhooks), cors: maybe(cors), decisions: maybe(decisions),
  telemetry: maybe(telemetry), audit: maybe(audit), plans: maybe(plans), storage: maybe(storage),
  upstreamUrl: url, upstreamTimeout: maybe(duration), upstreamTimeoutKey: key('timeout'),
  routes: fc.array(route, { minLength: 0, maxLength: 2 }),
}).map(({ upstreamUrl, upstreamTimeout, upstreamTimeoutKey, routes, ...sections }) => ({
  ...entries(Object.entries(sections)),
  upstreams: { app: entries([['url', upstreamUrl], [upstreamTimeoutKey, upstreamTimeout]]) },
  // Each route to the declared upstream, at its own path (rules across sections kept).
  routes: routes.map((r, i) => ({ path: `/r${i}`, upstream: 'app', ...r })),
}));

/** Whether `gateway check` would accept the file (the file as YAML text: JSON is YAML), references replaced by their defaults. */
function checkAccepts(value: unknown): boolean {
  try {
    parseConfig(JSON.stringify(value), 'gateway.yaml', {});
    return true;
  } catch (err) {
    if (err instanceof ConfigError) return false;
    throw err;
  }
}

describe('gateway check and gateway.schema.json', () => {
  it('accept exactly the same generated configurations', () => {
    let accepted = 0;
    let refused = 0;
    fc.assert(fc.property(config, (value) => {
      const bySchema = validate(value);
      expect(checkAccepts(value), `schema ${bySchema ? 'accepts' : 'refuses'} ${JSON.stringify(value)}: ${JSON.stringify(validate.errors?.slice(0, 3))}`).toBe(bySchema);
      if (bySchema) accepted++;
      else refused++;
    }), fuzzRuns(1500));
    // Both sides of the property are exercised, not one of them only.
    expect(accepted).toBeGreaterThan(150);
    expect(refused).toBeGreaterThan(150);
  });

  it('validate the documented Sentinel example, ${…:-default} references included', () => {
    const value = { storage: { redis: { sentinels: ['${REDIS_SENTINEL_1:-10.0.0.1:26379}', '${REDIS_SENTINEL_2:-10.0.0.2:26379}'], name: '${REDIS_MASTER:-mymaster}' } } };
    expect(validate(value), JSON.stringify(validate.errors)).toBe(true);
    expect(checkAccepts(value)).toBe(true);
    expect(validate({ server: { port: '8080' } })).toBe(true);
    expect(checkAccepts({ server: { port: '8080' } })).toBe(true);
  });

  it('agree on the rules within one map: key lengths, algorithms, cors, a route\'s guards', () => {
    const cases: Array<[unknown, boolean]> = [
      [{ admin: { apiKey: 'a' } }, false],
      [{ admin: { apiKey: 'x'.repeat(31) } }, false],
      [{ admin: { apiKey: 'x'.repeat(32) } }, true],
      [{ admin: { apiKey: 'é'.repeat(16) } }, false], // 32 bytes, 16 characters
      [{ admin: { apiKey: '😀'.repeat(32) } }, true],
      [{ admin: { apiKey: '${GATEWAY_ADMIN_KEY:-}' } }, true],
      [{ auth: { jwt: { secret: 'too-short' } } }, false],
      [{ auth: { jwt: { algorithm: 'EdDSA', secret: 'too-short', privateKeyFile: 'k.pem' } } }, true],
      [{ auth: { jwt: { algorithm: 'ES256' } } }, false],
      [{ auth: { jwt: { algorithm: 'RS256', privateKeyFile: '' } } }, false],
      [{ cors: { origins: ['*'], credentials: true } }, false],
      [{ cors: { origins: ['*', 'https://a.example'] } }, false],
      [{ cors: { origins: ['https://a.example'], credentials: 'true' } }, true],
      [{ upstreams: { app: { url: 'http://x' } }, routes: [{ path: '/a', upstream: 'app', auth: 'none', dailyLimit: true }] }, false],
      [{ upstreams: { app: { url: 'http://x' } }, routes: [{ path: '/a', upstream: 'app', auth: 'optional', plans: ['pro'] }] }, false],
      [{ upstreams: { app: { url: 'http://x' } }, routes: [{ path: '/a', upstream: 'app', auth: 'none', rateLimit: 'false' }] }, true],
      [{ telemetry: { otlp: { sampleRatio: '0.25', endpoint: 'collector:4318' } } }, false],
      [{ telemetry: { otlp: { sampleRatio: '0.25', endpoint: 'http://collector:4318' } } }, true],
    ];
    for (const [value, valid] of cases) {
      expect(validate(value), `schema: ${JSON.stringify(value)} ${JSON.stringify(validate.errors)}`).toBe(valid);
      expect(checkAccepts(value), `check: ${JSON.stringify(value)}`).toBe(valid);
    }
  });
});
