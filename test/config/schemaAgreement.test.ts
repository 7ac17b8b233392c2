// `gateway check` and the published JSON Schema (gateway.schema.json, what editors validate with)
// never disagree (issue 27): for generated configurations, check accepts a file exactly when the
// schema validates it. The generator varies one value's form at a time over the keys an operator
// writes (valid, the wrong type, a numeric or boolean string, a `${VAR:-default}` reference, a
// misspelt key); rules across keys (an unknown upstream, a duplicate path), which a JSON Schema
// cannot express, are kept satisfied, as are the values a reference would hide.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv } from 'ajv';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../src/config/load.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const schema = JSON.parse(readFileSync(path.join(ROOT, 'gateway.schema.json'), 'utf8')) as object;
const ajv = new Ajv({ strict: false, allErrors: true });
const validate = ajv.compile(schema);

/** A value for a key: mostly one of the valid forms, so that a single odd value decides (the others pass). */
const mostly = <T>(valid: T[], odd: T[]) => fc.oneof({ arbitrary: fc.constantFrom(...valid), weight: 12 }, { arbitrary: fc.constantFrom(...odd), weight: 1 });
const port = fc.oneof({ arbitrary: fc.integer({ min: 0, max: 65535 }), weight: 12 }, { arbitrary: fc.constantFrom<unknown>(70000, -1, '8080', ' 9090', 'eighty', true, 1.5, '${PORT_IN_FILE:-8080}'), weight: 2 });
const duration = mostly<unknown>(['30s', '500ms', '15m', '2h', '1d'], [30, '30', 'soon', '${TIMEOUT:-30s}', '-5s']);
const bool = mostly<unknown>([true, false], ['true', 'false', 'yes', 1, '${FLAG:-false}']);
const size = mostly<unknown>(['1mb', '64kb', 1024], ['10 MB', 'big', -1, '${LIMIT:-1mb}', '2048']);
const limit = fc.oneof({ arbitrary: fc.integer({ min: 1, max: 1000 }), weight: 12 }, { arbitrary: fc.constantFrom<unknown>(0, -3, '20', 'many', 2.5), weight: 1 });
const url = mostly<unknown>(['http://127.0.0.1:3000', 'https://api.internal'], ['ftp://x', 'not a url', 42, '${APP_URL:-http://127.0.0.1:3000}']);
const redis = mostly<unknown>(['redis://127.0.0.1:6379', 'rediss://r.internal:6380', { cluster: ['10.0.0.1:7000'] }], [
  'http://nope', '${REDIS_URL:-redis://127.0.0.1:6379}',
  { sentinels: ['10.0.0.1:26379', '${REDIS_SENTINEL_2:-10.0.0.2:26379}'], name: 'mymaster' },
  { sentinels: ['10.0.0.1'], name: 'mymaster' }, { sentinels: [], name: 'mymaster' }, { cluster: ['10.0.0.1:7000'], name: 'x' },
]);
const maybe = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });
/** Sometimes a key misspelt: `timeout` as `timout`. */
const key = (name: string) => mostly([name], [`${name.slice(0, -2)}${name.slice(-1)}`]);

const config = fc.record({
  serverPort: maybe(port),
  serverPortKey: key('port'),
  bodyLimit: maybe(size),
  trustProxy: maybe(bool),
  shutdownDelay: maybe(mostly<unknown>(['0s', '5s', '2m'], [5, 'never'])),
  rateMax: maybe(limit),
  rateWindow: maybe(duration),
  freeDaily: maybe(limit),
  upstreamUrl: url,
  upstreamTimeout: maybe(duration),
  upstreamTimeoutKey: key('timeout'),
  redis: maybe(redis),
  poolSize: maybe(limit),
  routeAuth: mostly<unknown>(['required', 'none', 'optional'], ['maybe', 1]),
  routeDaily: maybe(bool),
  routeMethods: maybe(mostly<unknown>([['GET'], ['GET', 'POST']], [['get', 'POST'], ['FETCH'], 'GET', []])),
}).map((c) => ({
  server: { host: '127.0.0.1', ...(c.serverPort === undefined ? {} : { [c.serverPortKey]: c.serverPort }), ...(c.bodyLimit === undefined ? {} : { bodyLimit: c.bodyLimit }),
    ...(c.trustProxy === undefined ? {} : { trustProxy: c.trustProxy }), ...(c.shutdownDelay === undefined ? {} : { shutdownDelay: c.shutdownDelay }) },
  auth: { rateLimit: { ...(c.rateMax === undefined ? {} : { max: c.rateMax }), ...(c.rateWindow === undefined ? {} : { window: c.rateWindow }) } },
  plans: c.freeDaily === undefined ? {} : { freeDailyLimit: c.freeDaily },
  storage: { ...(c.redis === undefined ? {} : { redis: c.redis }), ...(c.poolSize === undefined ? {} : { poolSize: c.poolSize }) },
  upstreams: { app: { url: c.upstreamUrl, ...(c.upstreamTimeout === undefined ? {} : { [c.upstreamTimeoutKey]: c.upstreamTimeout }) } },
  // A counted route needs auth: required (a rule across keys): dailyLimit only goes with it.
  routes: [{ path: '/api', upstream: 'app', auth: c.routeAuth, ...(c.routeDaily === undefined || c.routeAuth !== 'required' ? {} : { dailyLimit: c.routeDaily }),
    ...(c.routeMethods === undefined ? {} : { methods: c.routeMethods }) }],
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
    fc.assert(fc.property(config, (value) => {
      const bySchema = validate(value);
      expect(checkAccepts(value), `schema ${bySchema ? 'accepts' : 'refuses'} ${JSON.stringify(value)}: ${JSON.stringify(validate.errors?.slice(0, 3))}`).toBe(bySchema);
    }), { numRuns: 600 });
  });

  it('validate the documented Sentinel example, ${…:-default} references included', () => {
    const value = { storage: { redis: { sentinels: ['${REDIS_SENTINEL_1:-10.0.0.1:26379}', '${REDIS_SENTINEL_2:-10.0.0.2:26379}'], name: '${REDIS_MASTER:-mymaster}' } } };
    expect(validate(value), JSON.stringify(validate.errors)).toBe(true);
    expect(checkAccepts(value)).toBe(true);
    expect(validate({ server: { port: '8080' } })).toBe(true);
    expect(checkAccepts({ server: { port: '8080' } })).toBe(true);
  });
});
