// gateway.yaml: ${VAR} substitution, durations, validation, and error messages that name the
// file and the key path (CONTRACT §2). Pure parsing: no services needed.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, NO_CONFIG_FILE, parseConfig } from '../../src/config/load.js';
import { planLimitsOf } from '../../src/pipeline/plans.js';

const FILE = '/etc/gateway/gateway.yaml';
const SECRET = 'a-test-secret-that-is-at-least-32-bytes';

/** The ConfigError parseConfig throws for this text (fails the test if it parses). */
function configError(text: string, env: Record<string, string> = {}): ConfigError {
  try {
    parseConfig(text, FILE, env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    const e = err as ConfigError;
    // Every message names the file.
    expect(e.message.startsWith(`${FILE}: invalid configuration\n`)).toBe(true);
    expect(e.file).toBe(FILE);
    return e;
  }
  throw new Error('expected a ConfigError');
}

const ROUTES = `
upstreams:
  app: { url: http://127.0.0.1:3000 }
routes:
`;

describe('parseConfig', () => {
  it('an empty file gives the documented defaults', () => {
    const config = parseConfig('', FILE);
    // Embedded storage: a laptop's `npm start` listens on loopback only (CONTRACT §25).
    expect(config.server).toEqual({ host: '127.0.0.1', port: 8080, workers: 1, bodyLimit: 1024 * 1024, trustProxy: false, shutdownDelay: 5000 });
    expect(config.storage.postgresDirect).toBe('');
    expect(parseConfig('server:\n  shutdownDelay: 0s\n', FILE).server.shutdownDelay).toBe(0);
    expect(config.storage).toMatchObject({ postgres: '', redis: '', redisKeyPrefix: 'gw:', migrate: true });
    expect(config.auth).toMatchObject({
      jwt: { algorithm: 'HS256', secret: '' },
      accessTokenTtl: 15 * 60_000,
      refreshTokenTtl: 30 * 86_400_000,
      passwordMinLength: 8,
      refreshReuse: 'reject',
      rateLimit: { max: 20, window: 60_000 },
      requireVerifiedEmail: false,
    });
    // No limits: the spec's plans (free 1 a day, the others unlimited, no per-minute limit).
    expect(config.plans).toEqual({ limits: {}, upgradeUrl: '/api/v1/subscription/upgrade' });
    expect(config.errors).toEqual({ codes: false, language: 'fr' });
    expect(planLimitsOf(config.plans, 'free')).toEqual({ daily: 1, monthly: null, perMinute: null });
    expect(planLimitsOf(config.plans, 'premium')).toEqual({ daily: null, monthly: null, perMinute: null });
    expect(config.admin).toEqual({ host: '127.0.0.1', port: 9090, apiKey: '' });
    expect(config.decisions).toEqual({ host: '127.0.0.1', port: 0 });
    expect(config.routes).toEqual([]);
  });

  it('the repository gateway.yaml is valid with an empty environment', () => {
    const text = readFileSync(new URL('../../gateway.yaml', import.meta.url), 'utf8');
    const config = parseConfig(text, 'gateway.yaml', {});
    expect(config.storage.postgres).toBe('');
    expect(config.upstreams.app!.url).toBe('http://127.0.0.1:3000');
    expect(config.routes.length).toBeGreaterThan(0);
    // It does not set server.host: loopback here, every interface once DATABASE_URL names Postgres.
    expect(config.server.host).toBe('127.0.0.1');
    expect(parseConfig(text, 'gateway.yaml', { DATABASE_URL: 'postgres://db/gw' }).server.host).toBe('0.0.0.0');
  });

  it('the image listens on every interface: the Dockerfile sets HOST=0.0.0.0', () => {
    const dockerfile = readFileSync(new URL('../../Dockerfile', import.meta.url), 'utf8');
    expect(dockerfile).toMatch(/^ENV HOST=0\.0\.0\.0$/m);
  });

  describe('${VAR} substitution', () => {
    it('replaces ${VAR} from the environment', () => {
      const config = parseConfig('auth:\n  jwt:\n    secret: ${JWT_SECRET}\nstorage:\n  postgres: postgres://${DB_HOST}:5432/app\n', FILE, { JWT_SECRET: SECRET, DB_HOST: 'db.internal' });
      expect(config.auth.jwt.secret).toBe(SECRET);
      expect(config.storage.postgres).toBe('postgres://db.internal:5432/app');
    });

    it('${VAR:-default} takes the default when VAR is unset or empty, the value otherwise', () => {
      const text = 'upstreams:\n  app:\n    url: ${APP:-http://127.0.0.1:3000}\nstorage:\n  redis: ${REDIS_URL:-}\n';
      expect(parseConfig(text, FILE, {}).upstreams.app!.url).toBe('http://127.0.0.1:3000');
      expect(parseConfig(text, FILE, { APP: '' }).upstreams.app!.url).toBe('http://127.0.0.1:3000');
      expect(parseConfig(text, FILE, { APP: 'https://app.internal' }).upstreams.app!.url).toBe('https://app.internal');
      expect(parseConfig(text, FILE, {}).storage.redis).toBe('');
      expect(parseConfig(text, FILE, { REDIS_URL: 'redis://r:6379' }).storage.redis).toBe('redis://r:6379');
    });

    it('${VAR} set to the empty string gives an empty value, not an error', () => {
      expect(parseConfig('admin:\n  apiKey: ${KEY}\n', FILE, { KEY: '' }).admin.apiKey).toBe('');
    });

    it('an unset ${VAR} with no default is an error naming the variable and the key', () => {
      const e = configError('auth:\n  jwt:\n    secret: ${JWT_SECRET}\n');
      expect(e.problems).toEqual(['auth.jwt.secret: ${JWT_SECRET}: environment variable JWT_SECRET is not set and has no default (write ${JWT_SECRET:-default})']);
      expect(e.message).toContain('JWT_SECRET');
    });

    it('reports every missing variable at once', () => {
      const e = configError(`${ROUTES}  - { path: /a, upstream: '\${UP}' }\nadmin:\n  apiKey: \${ADMIN}\n`);
      expect(e.problems).toHaveLength(2);
      expect(e.problems[0]).toMatch(/^routes\[0\]\.upstream: \$\{UP\}: environment variable UP is not set/);
      expect(e.problems[1]).toMatch(/^admin\.apiKey: \$\{ADMIN\}: environment variable ADMIN is not set/);
    });

    it('references in comments are ignored, whole-line or after a value', () => {
      const config = parseConfig(`# uses \${NOT_SET}\nadmin:\n  apiKey: ${SECRET}  # or \${ALSO_NOT_SET}\n`, FILE, {});
      expect(config.admin.apiKey).toBe(SECRET);
    });

    it('values are taken as text: YAML characters in a secret neither cut it short nor change the file', () => {
      for (const secret of [`${SECRET} #not-a-comment`, `key: ${SECRET}`, `*${SECRET}`, `'${SECRET}'x`, `"${SECRET}`, `${SECRET}\n  extra: 1`, `[${SECRET}]`]) {
        const config = parseConfig('auth:\n  jwt:\n    secret: ${S}\nadmin:\n  apiKey: "${S}"\n', FILE, { S: secret });
        expect(config.auth.jwt.secret).toBe(secret);
        expect(config.admin.apiKey).toBe(secret);
      }
    });

    it('a numeric-looking value for a text key stays the exact text', () => {
      const config = parseConfig('admin:\n  apiKey: ${KEY}\nauth:\n  jwt:\n    secret: ${S}\n', FILE, { KEY: '00123456789012345678901234567890123', S: '1234567890123456789012345678901234567890' });
      expect(config.admin.apiKey).toBe('00123456789012345678901234567890123');
      expect(config.auth.jwt.secret).toBe('1234567890123456789012345678901234567890');
    });

    it('numbers and booleans come through for typed keys, also inside flow collections', () => {
      const text = 'server:\n  port: ${PORT_IN_FILE:-8081}\n  trustProxy: ${TRUST:-false}\nauth:\n  rateLimit: { max: ${MAX:-5}, window: ${WINDOW:-30s} }\nplans:\n  freeDailyLimit: ${LIMIT}\n';
      const config = parseConfig(text, FILE, { TRUST: 'true', LIMIT: '3' });
      expect(config.server.port).toBe(8081);
      expect(config.server.trustProxy).toBe(true);
      expect(config.auth.rateLimit).toEqual({ max: 5, window: 30_000 });
      expect(config.plans.freeDailyLimit).toBe(3);
      const e = configError(text, { LIMIT: 'three' });
      expect(e.problems).toEqual([expect.stringMatching(/^plans\.freeDailyLimit: /)]);
      // users.daily_usage is a Postgres integer: past it, every counting UPDATE would fail with a 500.
      expect(parseConfig(text, FILE, { LIMIT: '2147483647' }).plans.freeDailyLimit).toBe(2_147_483_647);
      expect(configError(text, { LIMIT: '2147483648' }).problems).toEqual([expect.stringMatching(/^plans\.freeDailyLimit: .*2147483647/)]);
    });

    it('server.host, when the file does not set it, follows the storage: loopback embedded, every interface with Postgres', () => {
      expect(parseConfig('', FILE).server.host).toBe('127.0.0.1');
      expect(parseConfig('storage:\n  postgres: postgres://db/gw\n', FILE).server.host).toBe('0.0.0.0');
      expect(parseConfig('storage:\n  postgres: ${DATABASE_URL:-}\n', FILE, { DATABASE_URL: 'postgres://db/gw' }).server.host).toBe('0.0.0.0');
      expect(parseConfig('storage:\n  postgres: ${DATABASE_URL:-}\n', FILE, {}).server.host).toBe('127.0.0.1');
      expect(parseConfig('server:\n  host: 0.0.0.0\n', FILE).server.host).toBe('0.0.0.0');
      expect(parseConfig('server:\n  host: 10.0.0.5\nstorage:\n  postgres: postgres://db/gw\n', FILE).server.host).toBe('10.0.0.5');
    });

    it('every listener\'s host and port and the Redis key prefix come from the environment too (CONTRACT §25)', () => {
      const env = { ADMIN_HOST: '0.0.0.0', ADMIN_PORT: '9999', DECISIONS_HOST: '10.0.0.2', DECISIONS_PORT: '9191', REDIS_KEY_PREFIX: 'tenant-a:' };
      const config = parseConfig('admin:\n  host: 127.0.0.1\n  port: 9090\nstorage:\n  redisKeyPrefix: "gw:"\n', FILE, env);
      expect(config.admin).toMatchObject({ host: '0.0.0.0', port: 9999 });
      expect(config.decisions).toMatchObject({ host: '10.0.0.2', port: 9191 });
      expect(config.storage.redisKeyPrefix).toBe('tenant-a:');
      expect(configError('', { ADMIN_PORT: 'http' }).problems).toEqual(['ADMIN_PORT: expected a port number, got "http"']);
      expect(configError('', { DECISIONS_PORT: '70000' }).problems).toEqual(['DECISIONS_PORT: expected a port number, got "70000"']);
      // Applied before the checks, which see the values the gateway will run with: a decision-only
      // route needs the decisions listener, which DECISIONS_PORT may open (or close).
      const decisionOnly = 'routes:\n  - { path: /api/check, auth: required }\n';
      expect(parseConfig(decisionOnly, FILE, { DECISIONS_PORT: '9191' }).decisions.port).toBe(9191);
      expect(configError(`decisions:\n  port: 9191\n${decisionOnly}`, { DECISIONS_PORT: '0' }).problems).toEqual([expect.stringMatching(/^routes\[0\]\.upstream: required unless decisions\.port is set/)]);
      // Empty (as `${VAR:-}` or an unset compose variable gives): the file's value stands.
      expect(parseConfig('admin:\n  port: 9090\n', FILE, { ADMIN_PORT: '' }).admin.port).toBe(9090);
    });

    it('PORT and HOST in the environment override server.port and server.host', () => {
      const config = parseConfig('server:\n  port: 8080\n  host: 0.0.0.0\n', FILE, { PORT: '9999', HOST: '127.0.0.1' });
      expect(config.server).toMatchObject({ port: 9999, host: '127.0.0.1' });
      expect(configError('', { PORT: 'http' }).problems).toEqual(['PORT: expected a port number, got "http"']);
    });
  });

  describe('durations', () => {
    it('accept ms, s, m, h and d', () => {
      const config = parseConfig('auth:\n  accessTokenTtl: 500ms\n  refreshTokenTtl: 30d\n  rateLimit: { window: 2h }\nwebhooks:\n  timeout: 30s\nupstreams:\n  a: { url: http://x, timeout: 15m }\n', FILE);
      expect(config.auth.accessTokenTtl).toBe(500);
      expect(config.auth.refreshTokenTtl).toBe(30 * 86_400_000);
      expect(config.auth.rateLimit.window).toBe(2 * 3_600_000);
      expect(config.webhooks.timeout).toBe(30_000);
      expect(config.upstreams.a!.timeout).toBe(15 * 60_000);
    });

    for (const bad of ['15', '15 minutes', '0s', '-5m', '1.5h', '10y']) {
      it(`refuse ${JSON.stringify(bad)} with the key path`, () => {
        const e = configError(`auth:\n  accessTokenTtl: "${bad}"\n`);
        expect(e.problems).toEqual([`auth.accessTokenTtl: expected a duration such as 500ms, 30s, 15m or 30d, got ${JSON.stringify(bad)}`]);
      });
    }
  });

  describe('validation errors name the key path', () => {
    it('every problem of a file at once: a misspelt key, a wrong type and an unknown upstream (issue 27)', () => {
      const yaml = 'upstreams:\n  app: { url: http://x, timout: 5s }\nroutes:\n  - { path: /a, upstream: app, plans: premium }\n  - { path: /b, upstream: ap }\n';
      const problems = configError(yaml).problems;
      expect(problems).toContain('upstreams.app: unknown key(s) "timout" (did you mean "timeout"?)');
      expect(problems).toContain('routes[0].plans: expected a list of plan names, e.g. [premium, pro]');
      expect(problems).toContain('routes[1].upstream: unknown upstream "ap"; declared: app');
      expect(problems).toHaveLength(3);
    });

    it('a duration without its unit says which form is expected', () => {
      expect(configError('upstreams:\n  app: { url: http://x, timeout: 30 }\n').problems).toEqual(['upstreams.app.timeout: expected a duration such as 500ms, 30s, 15m or 30d (a number needs its unit: 30s, not 30)']);
    });

    it('unknown keys, at any depth', () => {
      expect(configError('auth:\n  jwt:\n    secrett: x\n').problems).toEqual(['auth.jwt: unknown key(s) "secrett" (did you mean "secret"?)']);
      expect(configError('colour: blue\n').problems).toEqual(['(top level): unknown key(s) "colour"']);
      expect(configError(`${ROUTES}  - { path: /a, upstream: app, auht: none }\n`).problems).toEqual(['routes[0]: unknown key(s) "auht" (did you mean "auth"?)']);
      expect(configError('upstreams:\n  app: { url: http://x, timout: 5s }\n').problems).toEqual(['upstreams.app: unknown key(s) "timout" (did you mean "timeout"?)']);
    });

    it('a route naming an unknown upstream', () => {
      const e = configError(`${ROUTES}  - { path: /a, upstream: app }\n  - { path: /b, upstream: nope }\n`);
      expect(e.problems).toEqual(['routes[1].upstream: unknown upstream "nope"; declared: app']);
    });

    it('a route without upstream, unless a decisions listener decides for it (CONTRACT §11)', () => {
      expect(configError(`${ROUTES}  - { path: /a }\n`).problems).toEqual(['routes[0].upstream: required unless decisions.port is set (a route without upstream is decision-only)']);
      expect(configError(`decisions: { port: 0 }\n${ROUTES}  - { path: /a }\n`).problems).toHaveLength(1);
      const config = parseConfig(`decisions: { port: "9191" }\n${ROUTES}  - { path: /a, plans: [pro] }\n`, FILE);
      expect(config.decisions).toEqual({ host: '127.0.0.1', port: 9191 });
      expect(config.routes[0]!.upstream).toBeUndefined();
      // Nothing to rewrite for: the gateway never forwards a decision-only route.
      expect(configError(`decisions: { port: 9191 }\n${ROUTES}  - { path: /a, rewritePrefix: /b }\n`).problems)
        .toEqual(['routes[0].rewritePrefix: needs an upstream: a decision-only route is never forwarded by the gateway']);
      expect(configError(`decisions: { port: 9191, hots: x }\n`).problems).toEqual(['decisions: unknown key(s) "hots" (did you mean "host"?)']);
    });

    it('plans, dailyLimit or rateLimit on a route without auth: required', () => {
      for (const auth of ['none', 'optional']) {
        for (const guard of ['plans: [pro]', 'dailyLimit: true', 'rateLimit: true']) {
          expect(configError(`${ROUTES}  - { path: /a, upstream: app, auth: ${auth}, ${guard} }\n`).problems).toEqual(['routes[0].auth: plans, dailyLimit and rateLimit need auth: required']);
        }
      }
      // auth defaults to required: fine.
      expect(parseConfig(`${ROUTES}  - { path: /a, upstream: app, plans: [pro], dailyLimit: true }\n`, FILE).routes[0]!.auth).toBe('required');
    });

    // Characters, as gateway.schema.json's minLength counts them (code points): 32 characters are
    // at least 32 bytes, and the schema and check agree (schemaAgreement.test.ts).
    it('an admin key under 32 characters (CONTRACT §19), the empty one turning the admin API off', () => {
      for (const key of ['a', 'short', 'x'.repeat(31), 'é'.repeat(16), '😀'.repeat(31)]) {
        expect(configError(`admin:\n  apiKey: "${key}"\n`).problems)
          .toEqual(['admin.apiKey: expected at least 32 characters (for example `openssl rand -base64 32`), or empty to turn the admin API off']);
      }
      expect(configError('admin:\n  apiKey: 12345\n').problems).toEqual(['admin.apiKey: expected at least 32 characters (for example `openssl rand -base64 32`), or empty to turn the admin API off']);
      expect(parseConfig('admin:\n  apiKey: ""\n', FILE, {}).admin.apiKey).toBe('');
      expect(parseConfig('admin:\n  apiKey:\n', FILE, {}).admin.apiKey).toBe('');
      expect(parseConfig(`admin:\n  apiKey: "${'x'.repeat(32)}"\n`, FILE, {}).admin.apiKey).toBe('x'.repeat(32));
      expect(parseConfig(`admin:\n  apiKey: "${'é'.repeat(32)}"\n`, FILE, {}).admin.apiKey).toBe('é'.repeat(32));
    });

    it('an HS256 secret under 32 characters', () => {
      expect(configError('auth:\n  jwt:\n    secret: too-short\n').problems).toEqual(['auth.jwt.secret: expected at least 32 characters for HS256 (or leave it empty to have one generated)']);
      expect(configError(`auth:\n  jwt:\n    secret: ${'é'.repeat(16)}\n`).problems).toEqual(['auth.jwt.secret: expected at least 32 characters for HS256 (or leave it empty to have one generated)']);
      expect(parseConfig(`auth:\n  jwt:\n    secret: ${'x'.repeat(32)}\n`, FILE).auth.jwt.secret).toHaveLength(32);
      expect(parseConfig('auth:\n  jwt:\n    algorithm: EdDSA\n    secret: short\n    privateKeyFile: k.pem\n', FILE).auth.jwt.secret).toBe('short');
    });

    it('an asymmetric algorithm without a private key file; an unknown one is only that', () => {
      expect(configError('auth:\n  jwt:\n    algorithm: EdDSA\n').problems).toEqual(['auth.jwt.privateKeyFile: expected a PEM private key file for EdDSA']);
      expect(configError('auth:\n  jwt:\n    algorithm: ES512\n').problems).toEqual(['auth.jwt.algorithm: expected one of HS256, EdDSA, ES256, RS256']);
    });

    // Issue 27: a wrong type says what is expected there, with an example, in one form for every
    // key (load.ts, expected()): from the schema's type, values, range, title, examples or default.
    it('a wrong type names what is expected, with an example', () => {
      const problems = (yaml: string) => configError(yaml).problems;
      // A list.
      expect(problems(`${ROUTES}  - { path: /a, upstream: app, plans: premium }\n`)).toEqual(['routes[0].plans: expected a list of plan names, e.g. [premium, pro]']);
      expect(problems(`${ROUTES}  - { path: /a, upstream: app, methods: GET }\n`)).toEqual(['routes[0].methods: expected a list of HTTP methods, e.g. [GET, HEAD]']);
      expect(problems('cors:\n  origins: "https://app.example.com"\n')).toEqual(['cors.origins: expected a list of origins, e.g. [https://app.example.com]']);
      // A number: its range, its default as the example.
      expect(problems('server:\n  port: eighty\n')).toEqual(['server.port: expected a whole number from 0 to 65535, e.g. 8080']);
      expect(problems('admin:\n  port: 90.5\n')).toEqual(['admin.port: expected a whole number from 0 to 65535, e.g. 9090']);
      expect(problems('telemetry:\n  otlp:\n    sampleRatio: half\n')).toEqual(['telemetry.otlp.sampleRatio: expected a number from 0 to 1, e.g. 0.25']);
      // A boolean.
      expect(problems('server:\n  trustProxy: yes\n')).toEqual(['server.trustProxy: expected true or false']);
      // An enum lists its values.
      expect(problems(`${ROUTES}  - { path: /a, upstream: app, encodedSeparators: allow }\n`)).toEqual(['routes[0].encodedSeparators: expected one of refuse, keep']);
      expect(problems(`${ROUTES}  - { path: /a, upstream: app, methods: [FETCH] }\n`)).toEqual(['routes[0].methods[0]: expected one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS']);
      // A nested map: the keys it needs, each with its example.
      expect(problems('server:\n  tls: yes\n')).toEqual(['server.tls: expected a map, e.g. { certFile: tls/cert.pem, keyFile: tls/key.pem }']);
      expect(problems('upstreams:\n  app: http://127.0.0.1:3000\n')).toEqual(['upstreams.app: expected a map, e.g. { url: http://127.0.0.1:3000 }']);
      // Text, a missing key, a map's key, a size.
      expect(problems('server:\n  host: 8\n')).toEqual(['server.host: expected text, e.g. 127.0.0.1']);
      expect(problems('auth:\n  mfa:\n    issuer: 42\n')).toEqual(['auth.mfa.issuer: expected non-empty text, e.g. auth-gateway']);
      expect(problems('cors:\n  credentials: true\n')).toEqual(['cors.origins: missing; expected a list of origins, e.g. [https://app.example.com]']);
      expect(problems('plans:\n  limits:\n    Gold: { daily: 3 }\n'))
        .toEqual(['plans.limits: key "Gold": expected a plan name: lower-case letters, digits, - and _, starting with a letter, at most 32']);
      expect(problems('server:\n  bodyLimit: true\n')).toEqual(['server.bodyLimit: expected a size, e.g. 1mb']);
    });

    it('a section of the wrong type is one problem, not also what the rules between keys then read in it', () => {
      expect(configError('server: 5\n').problems).toEqual(['server: expected a map, e.g. { host: 127.0.0.1 }']);
      expect(configError('auth:\n  jwt: []\n').problems).toEqual(['auth.jwt: expected a map, e.g. { algorithm: HS256 }']);
      expect(configError(`${ROUTES}  - { path: /a, upstream: 5 }\n`).problems).toEqual(['routes[0].upstream: expected non-empty text, e.g. app']);
    });

    it('a plan name that cannot be one, a bad enum, a path declared twice, a bad URL', () => {
      // Any plan a route names exists (CONTRACT §12), as long as it is a plan name.
      expect(parseConfig(`${ROUTES}  - { path: /a, upstream: app, plans: [gold] }\n`, FILE).routes[0]!.plans).toEqual(['gold']);
      expect(configError(`${ROUTES}  - { path: /a, upstream: app, plans: [Gold Plan] }\n`).problems[0]).toMatch(/^routes\[0\]\.plans\[0\]: expected a plan name/);
      expect(configError('plans:\n  limits:\n    "Gold!": { daily: 3 }\n').problems[0]).toMatch(/^plans\.limits/);
      expect(configError('auth:\n  refreshReuse: forgive\n').problems[0]).toMatch(/^auth\.refreshReuse: /);
      expect(configError(`${ROUTES}  - { path: /a, upstream: app }\n  - { path: /a/, upstream: app }\n`).problems)
        .toEqual(['routes[1].path: path /a is declared twice (paths are matched without regard to case)']);
      expect(configError(`${ROUTES}  - { path: /Docs, upstream: app }\n  - { path: /docs, upstream: app }\n`).problems)
        .toEqual(['routes[1].path: path /docs is declared twice (paths are matched without regard to case)']);
      expect(configError(`${ROUTES}  - { path: '/a;b', upstream: app }\n`).problems).toEqual(['routes[0].path: expected a path starting with / (no query, no `;`, no spaces)']);
      expect(configError('upstreams:\n  app: { url: ftp://x }\n').problems).toEqual(['upstreams.app.url: expected an http:// or https:// URL']);
    });

    // Requests are matched as normalizePath reads them: with a public /api, a guarded `/api//admin`
    // guarded nothing, as `/api//admin/x` is read (and forwarded) as `/api/admin/x`, which /api took.
    it('a route path no request is read as: refused, with the form requests take', () => {
      const problems = (path: string, extra = '') => configError(`${ROUTES}  - { path: '${path}', upstream: app${extra} }\n`).problems;
      expect(problems('/api//admin')).toEqual(['routes[0].path: path /api//admin is never requested as written: requests for it are read as /api/admin, so declare that']);
      expect(problems('/x/./y')).toEqual(['routes[0].path: path /x/./y is never requested as written: requests for it are read as /x/y, so declare that']);
      expect(problems('/r/../s')).toEqual(['routes[0].path: path /r/../s is never requested as written: requests for it are read as /s, so declare that']);
      expect(problems('/p/%61dmin')).toEqual(['routes[0].path: path /p/%61dmin is never requested as written: requests for it are read as /p/admin, so declare that']);
      expect(problems('/café')).toEqual(['routes[0].path: path /café is never requested as written: requests for it are read as /caf%C3%A9, so declare that']);
      expect(problems('/a%2Fb')).toEqual(['routes[0].path: path /a%2Fb can never be requested: the gateway refuses such paths (400)']);
      // As requests take them: accepted.
      for (const path of ['/', '/api/admin', '/API/V1', '/caf%C3%A9', '/a/b.json', '/~user', '/a%20b']) {
        expect(parseConfig(`${ROUTES}  - { path: '${path}', upstream: app }\n`, FILE).routes[0]!.path).toBe(path);
      }
      // A route that keeps encoded separators is requested with them.
      expect(parseConfig(`${ROUTES}  - { path: '/a%2Fb', upstream: app, encodedSeparators: keep }\n`, FILE).routes[0]!.path).toBe('/a%2Fb');
    });

    it('storage.redis in its three forms (CONTRACT §9), and what is wrong with one that fits none', () => {
      const redis = (yaml: string) => parseConfig(`storage:\n  redis:${yaml}`, FILE).storage;
      expect(redis(' rediss://:secret@redis.internal:6380/2\n')).toMatchObject({ redis: 'rediss://:secret@redis.internal:6380/2', redisTimeout: 100 });
      expect(redis('\n    sentinels: ["10.0.0.1:26379", "[fd00::2]:26379"]\n    name: mymaster\n    password: ""\n    sentinelPassword: s3\n  redisTimeout: 250ms\n')).toMatchObject({
        redis: { sentinels: [{ host: '10.0.0.1', port: 26379 }, { host: 'fd00::2', port: 26379 }], name: 'mymaster', password: undefined, sentinelPassword: 's3' },
        redisTimeout: 250,
      });
      expect(redis('\n    cluster: [redis-0.redis:6379]\n')).toMatchObject({ redis: { cluster: [{ host: 'redis-0.redis', port: 6379 }] } });

      const problems = (yaml: string) => configError(`storage:\n  redis:${yaml}`).problems;
      expect(problems(' 10.0.0.1:6379\n')).toEqual(['storage.redis: expected a redis:// or rediss:// URL (or a sentinels or cluster map)']);
      expect(problems('\n    sentinels: ["10.0.0.1"]\n    name: mymaster\n')).toEqual(['storage.redis.sentinels[0]: expected host:port such as 10.0.0.1:26379, got "10.0.0.1"']);
      expect(problems('\n    sentinels: ["10.0.0.1:26379"]\n')).toEqual([expect.stringMatching(/^storage\.redis\.name: /)]);
      expect(problems('\n    cluster: ["10.0.0.1:70000"]\n')).toEqual(['storage.redis.cluster[0]: expected host:port such as 10.0.0.1:26379, got "10.0.0.1:70000"']);
      expect(problems('\n    cluster: ["10.0.0.1:7000"]\n    name: mymaster\n')).toEqual(['storage.redis: unknown key(s) "name"']);
      expect(problems('\n    nodes: ["10.0.0.1:7000"]\n')).toEqual(['storage.redis: expected a redis:// or rediss:// URL, a map with sentinels and name, or a map with cluster']);
    });

    it('mail: SMTP URL, sender, link templates with {token}; requireVerifiedEmail needs mail.smtp', () => {
      const links = '  resetUrl: https://app.example.com/reset?token={token}\n  verifyUrl: https://app.example.com/verify?token={token}\n';
      const mail = parseConfig(`mail:\n  smtp: smtps://u:p@smtp.example.com:465\n  from: "Gateway <no-reply@example.com>"\n${links}auth:\n  requireVerifiedEmail: true\n`, FILE).mail;
      expect(mail).toEqual({ smtp: 'smtps://u:p@smtp.example.com:465', from: 'Gateway <no-reply@example.com>', resetUrl: 'https://app.example.com/reset?token={token}', verifyUrl: 'https://app.example.com/verify?token={token}' });
      // No SMTP (as ${SMTP_URL:-} gives when unset): links for the CLI only.
      expect(parseConfig(`mail:\n  smtp: \${SMTP_URL:-}\n${links}`, FILE, {}).mail?.smtp).toBe('');
      expect(parseConfig('', FILE).mail).toBeUndefined();
      expect(configError(`mail:\n  smtp: http://smtp.example.com\n  from: a@b.c\n${links}`).problems).toEqual(['mail.smtp: expected an smtp:// or smtps:// URL (or nothing: no mail is sent)']);
      expect(configError(`mail:\n  smtp: smtp://smtp.example.com\n${links}`).problems).toEqual(['mail.from: expected the sender of the mails, such as "Gateway <no-reply@example.com>" (needed when mail.smtp is set)']);
      expect(configError('mail:\n  resetUrl: https://app.example.com/reset\n  verifyUrl: ftp://x/{token}\n').problems).toEqual([
        'mail.resetUrl: expected a URL containing {token}, where the link\'s token goes',
        'mail.verifyUrl: expected an http:// or https:// URL, got "ftp://x/{token}"',
      ]);
      expect(configError('mail:\n  smtp: smtp://x\n').problems).toEqual(expect.arrayContaining([expect.stringMatching(/^mail\.resetUrl: /), expect.stringMatching(/^mail\.verifyUrl: /)]));
      expect(configError('auth:\n  requireVerifiedEmail: true\n').problems)
        .toEqual(['auth.requireVerifiedEmail: needs mail.smtp: without mail no account could receive its verification link, and none could log in']);
      expect(configError(`mail:\n${links}auth:\n  requireVerifiedEmail: true\n`).problems[0]).toMatch(/^auth\.requireVerifiedEmail: needs mail\.smtp/);
    });

    it('malformed YAML', () => {
      expect(configError('server:\n  port: [8080\n').problems[0]).toMatch(/^YAML: /);
    });
  });
});

describe('loadConfig', () => {
  let dir: string;
  beforeAll(() => { dir = mkdtempSync(path.join(tmpdir(), 'gw-config-')); });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('reads --config, resolves relative paths against the file, and names the file in errors', () => {
    const file = path.join(dir, 'gw.yaml');
    writeFileSync(file, 'storage:\n  embeddedDir: ./db\nauth:\n  jwt:\n    secret: ${S}\n');
    const { config, file: loaded } = loadConfig(file, { S: SECRET });
    expect(loaded).toBe(file);
    expect(config.storage.embeddedDir).toBe(path.join(dir, 'db'));
    expect(config.auth.jwt.secret).toBe(SECRET);

    try {
      loadConfig(file, {});
      expect.unreachable();
    } catch (err) {
      expect((err as Error).message).toBe(`${file}: invalid configuration\n  - auth.jwt.secret: \${S}: environment variable S is not set and has no default (write \${S:-default})`);
    }
  });

  it('falls back to GATEWAY_CONFIG', () => {
    const file = path.join(dir, 'from-env.yaml');
    writeFileSync(file, 'plans:\n  freeDailyLimit: 4\n');
    expect(loadConfig(undefined, { GATEWAY_CONFIG: file }).config.plans.freeDailyLimit).toBe(4);
  });

  it('a missing file is an error naming it', () => {
    const file = path.join(dir, 'missing.yaml');
    expect(() => loadConfig(file, {})).toThrow(`${file}: invalid configuration\n  - ${NO_CONFIG_FILE}`);
    expect(NO_CONFIG_FILE).toBe('no such file: write one with `npx gateway init` (`--profile public-api` for a public API), or name another with --config FILE or GATEWAY_CONFIG');
  });
});
