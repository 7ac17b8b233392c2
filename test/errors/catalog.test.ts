// Issue 49: the catalog walked entry by entry. Each error is provoked over HTTP on a gateway with
// `errors.codes: true` and `errors.language: negotiate`, and read three ways: in French, in
// English (Accept-Language), and as problem details in English. An entry that cannot be provoked
// here (it needs a broken Postgres, an SMTP server, an identity provider, a slow client) names the
// test file that provokes it in the spec's shape (the same renderer answers it); the two no request
// can get say why. The three lists are checked to be exactly the catalog: no error is left out.
import { existsSync, readFileSync } from 'node:fs';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CATALOG } from '../../src/errors/catalog.js';
import { ADMIN_KEY, bearer, closeSql, describeWithServices, makeUser, newEmail, newPassword, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';
import { request, type HttpResponse } from '../helpers/http.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { refusedPort, sparePort } from '../helpers/ports.js';
import { authenticator } from '../helpers/totp.js';

type Name = keyof typeof CATALOG;
type Headers = Record<string, string>;
type Provoke = (headers: Headers) => Promise<HttpResponse>;

/** Provoked by these files, in the spec's shape (see the head of this file). */
const ELSEWHERE: Partial<Record<Name, string>> = {
  webhookUrlForbidden: 'test/webhooks/webhooks.test.ts',
  ssoConnectionNotFound: 'test/sso/saml.test.ts',
  ssoRequired: 'test/sso/enforce.test.ts',
  rateLimited: 'test/ops/rateLimit.test.ts',
  storageUnavailable: 'test/ops/postgresOutage.test.ts',
  requestTimeout: 'test/ops/httpEdges.error.test.ts',
  consoleCsrf: 'test/admin/console.test.ts',
  consoleTicketInvalid: 'test/admin/console.test.ts',
  linkInvalid: 'test/auth/password.test.ts',
  emailNotVerified: 'test/auth/emailVerification.test.ts',
  emailUnverified: 'test/auth/factor.security.test.ts',
  redirectNotAllowed: 'test/auth/oidc.test.ts',
  providerNotLinked: 'test/auth/oidc.test.ts',
  lastSignInMethod: 'test/auth/oidc.test.ts',
  mailUnavailable: 'test/auth/password.test.ts',
  passkeyInvalid: 'test/auth/passkeys.test.ts',
  scopeInsufficient: 'test/user/keyScopes.test.ts',
  orgNotFound: 'test/orgs/refusals.test.ts',
  roleInsufficient: 'test/orgs/refusals.test.ts',
  orgNotApplicable: 'test/orgs/acting.test.ts',
  orgAccessDenied: 'test/orgs/acting.test.ts',
  orgRequired: 'test/orgs/acting.test.ts',
  lastOwner: 'test/orgs/refusals.test.ts',
  alreadyMember: 'test/orgs/refusals.test.ts',
  invitationOtherAddress: 'test/orgs/refusals.test.ts',
  orgLimitReached: 'test/orgs/refusals.test.ts',
  orgNameInvalid: 'test/orgs/orgNames.security.test.ts',
  memberNotFound: 'test/orgs/refusals.test.ts',
  domainNotAllowed: 'test/orgs/domains.test.ts',
  domainTaken: 'test/orgs/domains.test.ts',
  domainUnverified: 'test/orgs/domains.test.ts',
  domainNotFound: 'test/orgs/domains.test.ts',
  invitationNotFound: 'test/orgs/organizations.test.ts',
  // CONTRACT §31: the token endpoints' one error of their own (SCIM's answers are SCIM's, outside the catalog).
  scimTokenNotFound: 'test/scim/tokens.test.ts',
  // Operators' accounts (CONTRACT §24), on a database of their own.
  lastAdmin: 'test/admin/operators.test.ts',
  operatorSelf: 'test/admin/operators.test.ts',
  // Against a fake of Stripe (CONTRACT §23).
  priceUnknown: 'test/billing/billing.test.ts',
  signatureInvalid: 'test/billing/billing.test.ts',
  subscriptionNone: 'test/billing/billing.test.ts',
  subscriptionAlreadyActive: 'test/billing/billing.test.ts',
  paymentUnavailable: 'test/billing/billing.test.ts',
  planManagedByBilling: 'test/billing/override.test.ts',
  stripeEventFailed: 'test/billing/billing.test.ts',
};
/** Never answered to a request: a fault of ours, or a branch the configuration rules out. */
const NEVER: Partial<Record<Name, string>> = {
  internal: 'an unexpected fault (a bug); the fuzz tests assert no request gets it',
  notAuthenticated: 'plans need auth: required, so token_missing or token_invalid comes first',
};

/** The texts of the errors whose message has parameters, as this gateway's configuration fills them. */
const FILLED: Partial<Record<Name, { fr: string; en: string }>> = {
  passwordTooShort: { fr: 'Mot de passe trop court (min 8 caractères)', en: 'Password too short (min 8 characters)' },
  dailyLimitReached: { fr: 'Limite quotidienne atteinte (plan free: 1 prévision/jour)', en: 'Daily limit reached (plan free: 1 forecast/day)' },
  monthlyLimitReached: { fr: 'Limite mensuelle atteinte (plan month: 1 prévision/mois)', en: 'Monthly limit reached (plan month: 1 forecast/month)' },
  planUnknown: { fr: 'Plan inconnu (free, premium, pro ou month)', en: 'Unknown plan (free, premium, pro or month)' },
};

describeWithServices('the error catalog, every entry in every shape (issue 49)', () => {
  let gw: TestGateway;
  let upstream: EchoUpstream;
  let silent: net.Server;
  const provoke: Partial<Record<Name, Provoke>> = {};

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    // Accepts and never answers: the upstream timeout.
    silent = net.createServer(() => undefined).listen(0, '127.0.0.1');
    await new Promise((resolve) => silent.once('listening', resolve));
    // Refused for the whole run (ports.ts): a spare port may be someone else's listener by the time it is asked.
    const closed = await refusedPort();
    gw = await startTestGateway(testConfig({
      errors: { codes: true, language: 'negotiate' },
      admin: { host: '127.0.0.1', port: await sparePort() },
      metrics: { host: '127.0.0.1', port: await sparePort(), token: 'catalog-metrics-token-0123456789' },
      server: { bodyLimit: '16kb' },
      auth: { mfa: { issuer: 'Example' }, passkeys: { rpId: 'localhost', rpName: 'Example', origins: ['http://localhost:3000'] } },
      plans: { limits: { free: { daily: 1, perMinute: 1 }, month: { monthly: 1 } } },
      apiKeys: { maxPerOwner: 1 },
      upstreams: {
        app: { url: upstream.url },
        down: { url: `http://127.0.0.1:${closed}` },
        silent: { url: `http://127.0.0.1:${(silent.address() as net.AddressInfo).port}`, timeout: '300ms' },
      },
      routes: [
        { path: '/weather', upstream: 'app', dailyLimit: true, usageNoun: { fr: { one: 'prévision', many: 'prévisions' }, en: { one: 'forecast', many: 'forecasts' } } },
        { path: '/burst', upstream: 'app', rateLimit: true },
        { path: '/pro', upstream: 'app', plans: ['pro'] },
        { path: '/secure', upstream: 'app', mfa: 'required' },
        { path: '/down', upstream: 'down', auth: 'none' },
        { path: '/silent', upstream: 'silent', auth: 'none' },
        { path: '/files', upstream: 'app', auth: 'none' },
      ],
    }));
    const admin = (method: string, path: string, h: Headers, json?: unknown, key = ADMIN_KEY) =>
      request(gw.adminUrl!, method, path, { headers: { authorization: `Bearer ${key}`, ...h }, json });
    const free = await makeUser(gw);
    const pro = await makeUser(gw, { plan: 'pro' });
    const weather = await makeUser(gw);
    const burst = await makeUser(gw);
    const month = await makeUser(gw, { plan: 'month' });
    const gone = await makeUser(gw);
    expect((await gw.request('DELETE', '/api/v1/user/me', { headers: bearer(gone.access), json: { password: gone.password } })).status).toBe(200);
    const inactive = await makeUser(gw);
    expect((await admin('PUT', `/admin/v1/users/${inactive.id}/active`, {}, { active: false })).status).toBe(200);
    const rotated = await makeUser(gw);
    expect((await gw.post('/api/v1/auth/refresh', { refresh_token: rotated.refresh })).status).toBe(200);
    const taken = await makeUser(gw);
    const totp = await makeUser(gw);
    const secret = (await gw.post('/api/v1/auth/mfa/totp/enroll', {}, { headers: bearer(totp.access) })).json.secret as string;
    expect((await gw.post('/api/v1/auth/mfa/totp/confirm', { code: authenticator.generate(secret) }, { headers: bearer(totp.access) })).status).toBe(200);
    const key = (await gw.post('/api/v1/user/api-token', {}, { headers: bearer(pro.access) })).json.api_token as string;
    const full = await makeUser(gw, { plan: 'pro' });
    expect((await gw.post('/api/v1/user/api-keys', { name: 'only' }, { headers: bearer(full.access) })).status).toBe(201);
    expect((await gw.get('/weather', { headers: bearer(weather.access) })).status).toBe(200);
    expect((await gw.get('/burst', { headers: bearer(burst.access) })).status).toBe(200);
    expect((await gw.get('/weather', { headers: bearer(month.access) })).status).toBe(200);

    const post = (path: string, json: unknown, more: Headers = {}) => (h: Headers) => gw.post(path, json, { headers: { ...more, ...h } });
    const get = (path: string, more: Headers = {}) => (h: Headers) => gw.get(path, { headers: { ...more, ...h } });
    Object.assign(provoke, {
      emailInvalid: post('/api/v1/auth/register', { email: 'not-an-email', password: newPassword() }),
      passwordTooShort: post('/api/v1/auth/register', { email: newEmail(), password: 'short' }),
      passwordTooLong: post('/api/v1/auth/register', { email: newEmail(), password: 'x'.repeat(1025) }),
      loginFieldsRequired: post('/api/v1/auth/login', {}),
      refreshTokenMissing: post('/api/v1/auth/refresh', {}),
      invalidCredentials: post('/api/v1/auth/login', { email: free.email, password: 'wrong-password' }),
      refreshTokenUndecodable: post('/api/v1/auth/refresh', { refresh_token: 'not-a-token' }),
      refreshTokenInactive: post('/api/v1/auth/refresh', { refresh_token: rotated.refresh }),
      userNotFound: get('/api/v1/user/me', bearer(gone.access)),
      userInactive: get('/api/v1/user/me', bearer(inactive.access)),
      tokenInvalid: get('/api/v1/user/me', bearer('not.a.token')),
      tokenMissing: get('/api/v1/user/me'),
      planInsufficient: get('/pro', bearer(free.access)),
      emailTaken: post('/api/v1/auth/register', { email: taken.email, password: newPassword() }),
      dailyLimitReached: get('/weather', bearer(weather.access)),
      monthlyLimitReached: get('/weather', bearer(month.access)),
      tooManyRequests: get('/burst', bearer(burst.access)),
      webhookUrlInvalid: post('/api/v1/user/webhook', { url: 'http://example.com/hook' }, bearer(pro.access)),
      routeNotFound: get('/nowhere'),
      methodNotAllowed: (h: Headers) => gw.request('PUT', '/api/v1/auth/login', { headers: h }),
      payloadTooLarge: post('/api/v1/auth/login', { email: 'x'.repeat(20_000) }),
      upstreamUnavailable: get('/down'),
      upstreamTimeout: get('/silent'),
      badRequest: get('/files/a%2Fb'),
      headersTooLarge: (h: Headers) => gw.get('/files', { headers: { ...h, 'x-filler': 'x'.repeat(20_000) }, freshConnection: true }),
      expectationFailed: (h: Headers) => gw.request('POST', '/api/v1/auth/login', { headers: { ...h, expect: 'nonsense' }, json: {}, freshConnection: true }),
      adminUnauthorized: (h: Headers) => admin('GET', '/admin/v1/users?email=a@example.test', h, undefined, 'wrong-key'),
      metricsUnauthorized: (h: Headers) => request(gw.metricsUrl!, 'GET', '/metrics', { headers: { authorization: 'Bearer wrong-token', ...h } }),
      adminNotFound: (h: Headers) => admin('GET', '/admin/v1/users/999999999', h),
      planUnknown: (h: Headers) => admin('PUT', `/admin/v1/users/${free.id}/plan`, h, { plan: 'gold' }),
      activeFlagInvalid: (h: Headers) => admin('PUT', `/admin/v1/users/${free.id}/active`, h, { active: 'maybe' }),
      alertInvalid: (h: Headers) => admin('POST', '/admin/v1/alerts', h, {}),
      adminEmailRequired: (h: Headers) => admin('GET', '/admin/v1/users?email=', h),
      adminListInvalid: (h: Headers) => admin('GET', '/admin/v1/users?limit=0&query=a', h),
      auditListInvalid: (h: Headers) => admin('GET', '/admin/v1/audit?limit=0', h),
      importBodyInvalid: (h: Headers) => admin('POST', '/admin/v1/import/users?dry_run=maybe', h, {}),
      sessionNotFound: (h: Headers) => gw.request('DELETE', '/api/v1/user/sessions/999999999', { headers: { ...bearer(free.access), ...h } }),
      codeInvalid: post('/api/v1/auth/mfa/totp/confirm', { code: '000000' }, bearer(free.access)),
      codeRefused: post('/api/v1/auth/mfa/verify', { mfa_token: 'nothing', code: '000000' }),
      mfaCodeRequired: post('/api/v1/auth/login', { email: totp.email, password: totp.password }),
      mfaRequired: get('/secure', bearer(free.access)),
      recentAuthRequired: post('/api/v1/auth/mfa/totp/enroll', {}, { 'x-api-key': key }),
      apiKeyNotAccepted: get('/api/v1/user/api-keys', { 'x-api-key': key }),
      scopeUnknown: post('/api/v1/user/api-keys', { name: 'k', scopes: ['reports:read'] }, bearer(pro.access)),
      apiKeyNotFound: (h: Headers) => gw.request('DELETE', '/api/v1/user/api-keys/999999999', { headers: { ...bearer(pro.access), ...h } }),
      apiKeyLimitReached: post('/api/v1/user/api-keys', { name: 'second' }, bearer(full.access)),
      passkeyNotFound: (h: Headers) => gw.request('DELETE', '/api/v1/user/passkeys/999999999', { headers: { ...bearer(free.access), ...h } }),
      localeUnsupported: (h: Headers) => gw.request('PATCH', '/api/v1/user/me', { headers: { ...bearer(free.access), ...h }, json: { locale: 'tlh' } }),
    } satisfies Partial<Record<Name, Provoke>>);
  });
  afterAll(async () => {
    await gw?.close();
    await upstream?.close();
    silent?.close();
    await closeSql();
  });

  it('provokes every entry here or names the test that does, and nothing else', () => {
    const covered = [...Object.keys(provoke), ...Object.keys(ELSEWHERE), ...Object.keys(NEVER)].sort();
    expect(covered).toEqual(Object.keys(CATALOG).sort());
    for (const [name, file] of Object.entries(ELSEWHERE)) {
      expect(existsSync(file), `${name}: ${file}`).toBe(true);
      const text = readFileSync(file, 'utf8');
      const entry = CATALOG[name as Name];
      expect([entry.fr, entry.fr.replaceAll('\'', '\\\''), `'${name}'`, entry.code].some((s) => text.includes(s)), `${file} provokes ${name}`).toBe(true);
    }
  });

  const names = (Object.keys(CATALOG) as Name[]).filter((n) => !ELSEWHERE[n] && !NEVER[n]);
  // The raw answers to what was never parsed cannot read Accept or Accept-Language.
  const UNREAD = new Set<Name>(['headersTooLarge']);

  describe.each(names)('%s', (name) => {
    const entry = CATALOG[name];
    const text = (language: 'fr' | 'en') => FILLED[name]?.[language] ?? entry[language];

    it('in French, with its code', async () => {
      const res = await provoke[name]!({ 'accept-language': 'fr-FR, en;q=0.5' });
      expect(res.status, res.text).toBe(entry.status);
      expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
      expect(res.json).toMatchObject({ error: text('fr'), code: entry.code });
      expect(Object.keys(res.json).slice(0, 2)).toEqual(['error', 'code']);
      for (const field of ('fields' in entry ? entry.fields : [])) expect(res.json).toHaveProperty(field);
    });

    it('in English, by Accept-Language', async () => {
      const res = await provoke[name]!({ 'accept-language': 'de-CH, en-GB;q=0.8, fr;q=0.3' });
      expect(res.status, res.text).toBe(entry.status);
      expect(res.json).toMatchObject({ error: UNREAD.has(name) ? text('fr') : text('en'), code: entry.code });
      if (!UNREAD.has(name)) expect(res.headers.vary).toMatch(/Accept, Accept-Language/);
    });

    it('as problem details, in English', async () => {
      const res = await provoke[name]!({ accept: 'application/problem+json, application/json;q=0.9', 'accept-language': 'en' });
      expect(res.status, res.text).toBe(entry.status);
      if (UNREAD.has(name)) {
        expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
        return;
      }
      expect(res.headers['content-type']).toBe('application/problem+json; charset=utf-8');
      const title = 'title' in entry ? entry.title.en : text('en');
      expect(res.json).toMatchObject({ type: `urn:gateway:error:${entry.code}`, title, status: entry.status, code: entry.code, detail: text('en'), error: text('en') });
      expect(Object.keys(res.json).slice(0, 6)).toEqual(['type', 'title', 'status', 'code', 'detail', 'error']);
      expect(res.text).not.toMatch(/"instance"|stack|127\.0\.0\.1/);
    });
  });
});
