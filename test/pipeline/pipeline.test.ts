// The pipeline alone, without a listener (STYLE 21, after Oathkeeper's request_handler_test.go):
// one table of route × credential × expected decision, run against a real instance (Postgres,
// Redis, the identity cache, the limiters) and requests given as contexts, the way every caller
// (proxy, own endpoints, decisions, WebSocket upgrades) hands them over.
import type { IncomingHttpHeaders } from 'node:http';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../../src/keys/index.js';
import { newApiKey } from '../../src/keys/format.js';
import { createOrgKeyWithin } from '../../src/storage/keys/orgApiKeys.js';
import { sha256Hex } from '../../src/credentials/digest.js';
import { createInstance, type Instance } from '../../src/instance.js';
import { telemetryName } from '../../src/errors/index.js';
import type { Decision } from '../../src/pipeline/pipeline.js';
import { requestContext } from '../../src/live/requestContext.js';
import * as users from '../../src/storage/accounts/users.js';
import { closeSql, describeWithServices, newEmail, testConfig } from '../helpers/gateway.js';
import { capturingTracing } from '../helpers/servedTrace.js';

const APP = { url: 'http://127.0.0.1:9', timeout: '5s' };
const ROUTES = [
  { path: '/open', upstream: 'app', auth: 'none' },
  { path: '/maybe', upstream: 'app', auth: 'optional' },
  { path: '/orders', upstream: 'app' },
  { path: '/orders/archive', upstream: 'app', methods: ['GET'] },
  { path: '/reports', upstream: 'app', plans: ['premium', 'pro'] },
  { path: '/billing', upstream: 'app', plans: ['pro'], rewritePrefix: '/v2/billing' },
  { path: '/races', upstream: 'app', dailyLimit: true },
  { path: '/checks', auth: 'required' }, // decision-only: no upstream
  { path: '/team', upstream: 'app', roles: ['owner', 'admin'] }, // CONTRACT §22: implies org: required
  { path: '/owners', upstream: 'app', roles: ['owner'] }, // roles without admin: an admin is refused too
  { path: '/shared', upstream: 'app', auth: 'optional', org: 'optional' },
  { path: '/crew', upstream: 'app', org: 'required' }, // org: required without roles
  { path: '/signed', upstream: 'signed' }, // an upstream that receives x-gateway-assertion
];
const MAIL = { smtp: '', from: 'x', resetUrl: 'https://a.example/r?token={token}', verifyUrl: 'https://a.example/v?token={token}', invitationUrl: 'https://a.example/j?token={token}' };
/** The public listener's own endpoints, as the pipeline is told of them. */
const OWN: Record<string, readonly string[]> = { '/api/v1/auth/login': ['POST'], '/api/v1/user/me': ['GET', 'DELETE'] };
const ownMethods = (path: string) => OWN[path] ?? [];

type Credential = 'none' | 'free' | 'premium' | 'pro' | 'pro key' | 'inactive' | 'forged' | 'unknown key' | 'basic';
type Expected = { allow: 'anonymous' | 'bearer' | 'api-key'; upstreamPath?: string } | { deny: string; route?: string };

// route (method and path) × credential → decision. Every denial is the catalog's code.
const TABLE: Array<[string, string, Credential, Expected]> = [
  ['GET', '/open/x', 'none', { allow: 'anonymous' }],
  ['GET', '/open/x', 'forged', { allow: 'anonymous' }], // auth: none reads no credential at all
  ['GET', '/maybe', 'none', { allow: 'anonymous' }],
  ['GET', '/maybe', 'free', { allow: 'bearer' }],
  ['GET', '/maybe', 'forged', { deny: 'tokenInvalid' }], // a credential of ours that fails is a 401 even here
  ['GET', '/maybe', 'basic', { allow: 'anonymous' }], // another scheme is not ours
  ['GET', '/orders/1', 'none', { deny: 'tokenMissing' }], // same text as tokenInvalid; its own code (CONTRACT §20)
  ['GET', '/orders/1', 'free', { allow: 'bearer' }],
  ['GET', '/orders/1', 'pro key', { allow: 'api-key' }],
  ['GET', '/orders/1', 'unknown key', { deny: 'tokenInvalid' }],
  ['GET', '/orders/1', 'forged', { deny: 'tokenInvalid' }],
  ['GET', '/orders/1', 'basic', { deny: 'tokenMissing' }], // another scheme is no credential of ours
  ['GET', '/orders/1', 'inactive', { deny: 'userInactive' }], // same text as userNotFound; its own code
  ['POST', '/orders/archive', 'pro', { deny: 'methodNotAllowed', route: '/orders/archive' }],
  ['HEAD', '/orders/archive', 'pro', { allow: 'bearer' }], // HEAD is read as GET
  ['GET', '/reports', 'free', { deny: 'planInsufficient' }],
  ['GET', '/reports', 'premium', { allow: 'bearer' }],
  ['GET', '/reports', 'pro key', { allow: 'api-key' }],
  ['GET', '/reports', 'none', { deny: 'tokenMissing' }],
  ['GET', '/billing/invoices', 'pro', { allow: 'bearer', upstreamPath: '/v2/billing/invoices' }],
  ['GET', '/BILLING/invoices', 'premium', { deny: 'planInsufficient', route: '/billing' }], // case folded
  ['GET', '/billing.json', 'premium', { deny: 'planInsufficient', route: '/billing' }], // a format suffix
  ['GET', '/races', 'premium', { allow: 'bearer' }], // premium has no daily limit
  ['GET', '/checks', 'free', { deny: 'routeNotFound' }], // decision-only: not proxied
  ['GET', '/nowhere', 'pro', { deny: 'routeNotFound' }],
  ['GET', '/team', 'premium', { deny: 'orgRequired' }], // roles imply org: required, and no organization is named
  ['GET', '/team', 'none', { deny: 'tokenMissing' }],
  ['GET', '/crew', 'premium', { deny: 'orgRequired' }], // org: required alone, and no organization is named
  ['GET', '/shared', 'free', { allow: 'bearer' }], // org: optional acting for none
  ['GET', '/api/v1/auth/login', 'none', { deny: 'methodNotAllowed', route: 'own' }],
  ['POST', '/API/v1/auth/login/', 'none', { deny: 'routeNotFound', route: 'own' }], // another spelling of an own endpoint
];

describeWithServices('the pipeline: route × credential → decision (no listener)', () => {
  let instance: Instance;
  const headers: Record<Credential, IncomingHttpHeaders> = {} as never;
  const ids: Partial<Record<Credential, number>> = {};
  let hash: string;
  /** A new account on `plan`, and the bearer token of a password sign-in. */
  const user = async (plan: string, active = true) => {
    const id = (await users.createUser(instance.db, newEmail(), hash))!;
    await users.setPlan(instance.db, id, plan);
    if (!active) await users.setActive(instance.db, id, false);
    return (await users.findById(instance.db, id))!;
  };
  const signedIn = async (plan: string, active = true) => {
    const u = await user(plan, active);
    const { pair } = await instance.tokens.issuePair(u, 1, { amr: ['pwd'], authTime: new Date() });
    return { id: u.id, headers: { authorization: `Bearer ${pair.access_token}` } };
  };

  beforeAll(async () => {
    const upstreams = { app: APP, signed: { ...APP, assertion: true } };
    // `metered` counts a month and no day.
    const plans = { limits: { metered: { monthly: 2 } } };
    instance = await createInstance(testConfig({ upstreams, plans, routes: ROUTES, decisions: { port: 1 }, organizations: { enabled: true }, mail: MAIL }), { log: pino({ level: 'silent' }) });
    hash = await instance.passwords.hash('long-enough-password');
    const bearer = async (credential: Credential, plan: string, active = true) => {
      ({ id: ids[credential], headers: headers[credential] } = await signedIn(plan, active));
    };
    await bearer('free', 'free');
    await bearer('premium', 'premium');
    await bearer('pro', 'pro');
    await bearer('inactive', 'free', false);
    const pro = await user('pro');
    ids['pro key'] = pro.id;
    const { key } = await createApiKey({ ...instance, apiKeys: instance.config.apiKeys }, pro.id, { actor: 'system' });
    headers['pro key'] = { 'x-api-key': key };
    headers.none = {};
    headers.forged = { authorization: `Bearer ${headers.free.authorization!.slice(7, -4)}AAAA` };
    headers['unknown key'] = { 'x-api-key': 'gw_not-a-key-of-this-gateway-0000000000000000000' };
    headers.basic = { authorization: 'Basic dXNlcjpwYXNz' };
  });
  afterAll(async () => {
    await instance?.close();
    await closeSql();
  });

  const decide = async (method: string, url: string, credential: Credential, forwarding = true): Promise<Decision> =>
    instance.pipeline.decide({ context: requestContext(instance.live.current, method, url, ownMethods), headers: headers[credential] }, { forwarding });

  it.each(TABLE)('%s %s with %s', async (method, url, credential, expected) => {
    const decision = await decide(method, url, credential);
    if ('deny' in expected) {
      expect(decision).toMatchObject({ kind: 'deny', denial: { code: expected.deny } });
      if (expected.route) expect(decision).toMatchObject({ route: expected.route });
      return;
    }
    expect(decision.kind).toBe('allow');
    if (decision.kind !== 'allow') return;
    if (expected.upstreamPath) expect(decision.upstreamPath).toBe(expected.upstreamPath);
    if (expected.allow === 'anonymous') {
      expect(decision.auth.kind).toBe('anonymous');
      expect(decision.identity).toBeUndefined();
    } else {
      expect(decision.identity).toMatchObject({ 'x-user-id': String(ids[credential]), 'x-auth-method': expected.allow });
    }
  });

  it('decides in memory without a promise: a public route, and a bearer token verified before whose user is cached', async () => {
    const decideNow = (url: string, requestHeaders: IncomingHttpHeaders) =>
      instance.pipeline.decide({ context: requestContext(instance.live.current, 'GET', url, ownMethods), headers: requestHeaders }, { forwarding: true });
    expect(decideNow('/open/1', {})).toMatchObject({ kind: 'allow', auth: { kind: 'anonymous' } });
    const user = (await users.findById(instance.db, ids.premium!))!;
    const { pair } = await instance.tokens.issuePair(user, 1, { amr: ['pwd'], authTime: new Date() });
    const fresh = { authorization: `Bearer ${pair.access_token}` };
    // The first time, the token is verified (WebCrypto): a promise.
    const first = decideNow('/orders/1', fresh);
    expect(first).toBeInstanceOf(Promise);
    expect(await first).toMatchObject({ kind: 'allow', identity: { 'x-user-id': String(user.id) } });
    // Then what a request on the hot path meets: the same decision, in the same tick.
    expect(decideNow('/orders/1', fresh)).toMatchObject({ kind: 'allow', identity: { 'x-user-id': String(user.id) } });
  });

  it('a decision-only route is decided for a proxy that asks, never forwarded', async () => {
    expect(await decide('GET', '/checks', 'free', false)).toMatchObject({ kind: 'allow', identity: { 'x-user-id': String(ids.free) } });
    expect(await decide('GET', '/checks', 'none', false)).toMatchObject({ kind: 'deny', denial: { code: 'tokenMissing' } });
  });

  it('decides for a proxy only on a path already in the form the gateway reads it', async () => {
    expect(await decide('GET', '/open/../orders/1', 'none', false)).toMatchObject({ kind: 'deny', denial: { code: 'badRequest' } });
    expect(await decide('GET', '/open/%2e%2e/orders/1', 'none', false)).toMatchObject({ kind: 'deny', denial: { code: 'badRequest' } });
  });

  it('a method override runs as the method it names: 405 where that method is not allowed', async () => {
    const context = requestContext(instance.live.current, 'GET', '/orders/archive?_method=DELETE', ownMethods);
    expect(await instance.pipeline.decide({ context, headers: headers.pro }, { forwarding: true })).toMatchObject({ kind: 'deny', denial: { code: 'methodNotAllowed' } });
  });

  it('CONTRACT §22: each outcome of the Gateway-Org, org: required and roles stages, in that order', async () => {
    const orgId = (await instance.db.query<{ id: number }>("INSERT INTO organizations (name, plan) VALUES ('Acme', 'pro') RETURNING id"))[0]!.id;
    await instance.db.query("INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, 'admin'), ($1, $3, 'member')", [orgId, ids.premium, ids.free]);
    const as = (credential: Credential, org: string, url = '/team') =>
      instance.pipeline.decide({ context: requestContext(instance.live.current, 'GET', url, ownMethods), headers: { ...headers[credential], 'gateway-org': org } }, { forwarding: true });
    expect(await as('premium', String(orgId))).toMatchObject({ kind: 'allow', org: { id: orgId, role: 'admin', plan: 'pro' }, identity: { 'x-org-id': String(orgId), 'x-user-plan': 'premium' } });
    expect(await as('free', String(orgId))).toMatchObject({ kind: 'deny', denial: { code: 'roleInsufficient', extra: { required_roles: ['owner', 'admin'], current_role: 'member' } } });
    expect(await as('pro', String(orgId))).toMatchObject({ kind: 'deny', denial: { code: 'orgAccessDenied' } });
    expect(await as('pro key', String(orgId))).toMatchObject({ kind: 'deny', denial: { code: 'orgAccessDenied' } });
    expect(await as('premium', 'x1')).toMatchObject({ kind: 'deny', denial: { code: 'badRequest' } });
    expect(await as('none', String(orgId))).toMatchObject({ kind: 'deny', denial: { code: 'tokenMissing' } });
    // Gateway-Org without a credential where one is optional: told as a token that failed.
    expect(await as('none', String(orgId), '/shared')).toMatchObject({
      kind: 'deny', denial: { code: 'tokenInvalid', headers: { 'www-authenticate': 'Bearer realm="gateway", error="invalid_token"' } },
    });
    expect(await as('premium', String(orgId), '/orders/1')).toMatchObject({ kind: 'deny', denial: { code: 'orgNotApplicable' } });
    // A route whose roles leave admins out refuses an admin as any other role it does not name;
    // its owner passes.
    expect(await as('premium', String(orgId), '/owners/1')).toMatchObject({ kind: 'deny', denial: { code: 'roleInsufficient', extra: { required_roles: ['owner'], current_role: 'admin' } } });
    expect(await as('free', String(orgId), '/owners/1')).toMatchObject({ kind: 'deny', denial: { code: 'roleInsufficient', extra: { required_roles: ['owner'], current_role: 'member' } } });
    const owned = (await instance.db.query<{ id: number }>("INSERT INTO organizations (name, plan) VALUES ('Owned', 'pro') RETURNING id"))[0]!.id;
    await instance.db.query("INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, 'owner')", [owned, ids.pro]);
    expect(await as('pro', String(owned), '/owners/1')).toMatchObject({ kind: 'allow', org: { id: owned, role: 'owner' } });
  });

  it('counts a free user\'s daily use once: allowed, then 429 with the RateLimit fields; each tallied, the refusal counted for the owner\'s day', async () => {
    const quota = (outcome: string) => instance.metrics.tallies.quotas.get(`daily\0free\0/races\0${outcome}`) ?? 0;
    const before = [quota('admitted'), quota('refused')];
    const free = await decide('GET', '/races', 'free');
    // The use counted is the decision's, for a refund when the upstream fails it (refunds.ts).
    expect(free).toMatchObject({ kind: 'allow', responseHeaders: { 'ratelimit-policy': '"daily";q=1;w=86400' }, use: { counter: { ownerType: 'user', id: ids.free }, daily: true } });
    expect([quota('admitted'), quota('refused')]).toEqual([before[0]! + 1, before[1]]);
    expect(await decide('GET', '/races', 'free')).toMatchObject({
      kind: 'deny', denial: { code: 'dailyLimitReached', headers: { 'ratelimit-policy': '"daily";q=1;w=86400', 'ratelimit': expect.stringMatching(/^"daily";r=0;t=\d+$/) } },
    });
    expect([quota('admitted'), quota('refused')]).toEqual([before[0]! + 1, before[1]! + 1]);
    await instance.denials.flush();
    expect(await instance.db.query('SELECT denied FROM usage_days WHERE user_id = $1', [ids.free])).toEqual([{ denied: 1 }]);
  });

  it('a plan that counts a month and no day is counted on a dailyLimit route; an anonymous caller never is', async () => {
    const metered = await signedIn('metered');
    const decideAs = (requestHeaders: IncomingHttpHeaders, url = '/races') =>
      instance.pipeline.decide({ context: requestContext(instance.live.current, 'GET', url, ownMethods), headers: requestHeaders }, { forwarding: true });
    expect(await decideAs(metered.headers)).toMatchObject({
      kind: 'allow', responseHeaders: { 'ratelimit-policy': expect.stringMatching(/^"monthly";q=2;w=\d+$/) }, use: { counter: { ownerType: 'user', id: metered.id }, daily: false, monthly: true },
    });
    // Limits are an authenticated caller's (the config lets none apply where auth is optional or
    // none): a policy that asks for them lets an anonymous caller by, counted nowhere.
    const anonymous = await instance.pipeline.guard({ auth: 'optional', rateLimit: true, dailyLimit: true }, {}, instance.live.current);
    expect(anonymous).toMatchObject({ kind: 'pass', auth: { kind: 'anonymous' } });
    expect(anonymous).toMatchObject({ responseHeaders: undefined, use: undefined });
  });

  it('an own endpoint\'s count is tallied under `own`, with its RateLimit fields', async () => {
    const free = await signedIn('free');
    const admitted = () => instance.metrics.tallies.quotas.get('daily\0free\0own\0admitted') ?? 0;
    const before = admitted();
    expect(await instance.pipeline.guard({ auth: 'required', dailyLimit: true }, free.headers, instance.live.current))
      .toMatchObject({ kind: 'pass', responseHeaders: { 'ratelimit-policy': '"daily";q=1;w=86400' }, use: { counter: { ownerType: 'user', id: free.id } } });
    expect(admitted()).toBe(before + 1);
  });

  it('an organization key acts for its organization on routes, traced as its own stage; an own endpoint refuses it (they act for a user)', async () => {
    const creator = await user('free');
    const orgId = (await instance.db.query<{ id: number }>("INSERT INTO organizations (name, plan) VALUES ('Keyed', 'pro') RETURNING id"))[0]!.id;
    await instance.db.query("INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, 'owner')", [orgId, creator.id]);
    const { key, start } = newApiKey(instance.config.apiKeys.prefix, true);
    await createOrgKeyWithin(instance.db, orgId, creator.id, { hash: sha256Hex(key), start, name: 'ci', scopes: null, expiresAt: null, role: 'member' }, 10, new Date());
    const { tracing, exported } = capturingTracing();
    const trace = tracing.begin('GET', '/shared', {})!;
    const decision = await instance.pipeline.decide({ context: requestContext(instance.live.current, 'GET', '/shared', ownMethods), headers: { 'x-api-key': key }, trace }, { forwarding: true });
    expect(decision).toMatchObject({ kind: 'allow', org: { id: orgId, role: 'member' }, identity: { 'x-user-id': String(creator.id), 'x-org-id': String(orgId) } });
    trace.span.end();
    await tracing.close();
    expect(exported.filter((s) => s.name.startsWith('gateway.')).map((s) => [s.name, s.attributes['gateway.outcome']]))
      .toEqual([['gateway.authenticate', 'authenticated'], ['gateway.org_key', 'allow'], ['gateway.org', 'allow']]);
    expect(await instance.pipeline.guard({ auth: 'required' }, { 'x-api-key': key }, instance.live.current)).toMatchObject({ kind: 'deny', denial: { code: 'apiKeyNotAccepted' } });
  });

  it('a path that cannot be read one way only is a 400, for a proxy that asks and for the gateway forwarding', async () => {
    for (const forwarding of [true, false]) {
      expect(await decide('GET', '/orders/..;/1', 'free', forwarding), String(forwarding)).toMatchObject({ kind: 'deny', route: undefined, denial: { code: 'badRequest' } });
    }
  });

  it('a 405 names the methods allowed: the route\'s, or the own endpoint\'s', async () => {
    expect(await decide('POST', '/orders/archive', 'pro')).toMatchObject({ kind: 'deny', denial: { code: 'methodNotAllowed', headers: { allow: 'GET, HEAD' } } });
    expect(await decide('GET', '/api/v1/auth/login', 'none')).toMatchObject({ kind: 'deny', denial: { code: 'methodNotAllowed', headers: { allow: 'POST' } } });
    expect(await decide('PUT', '/api/v1/user/me', 'free')).toMatchObject({ kind: 'deny', route: 'own', denial: { code: 'methodNotAllowed', headers: { allow: 'GET, DELETE' } } });
  });

  it('signs an assertion for an upstream that asks for one, and only for it', async () => {
    const signed = await decide('GET', '/signed/x', 'free');
    expect(signed).toMatchObject({ kind: 'allow', identity: { 'x-user-id': String(ids.free), 'x-gateway-assertion': expect.stringMatching(/^[\w-]+\.[\w-]+\.[\w-]+$/) } });
    const plain = await decide('GET', '/orders/1', 'free');
    expect(plain).toMatchObject({ kind: 'allow', identity: { 'x-user-id': String(ids.free) } });
    expect(plain.kind === 'allow' && plain.identity).not.toHaveProperty('x-gateway-assertion');
  });

  it('tallies each decision for the metrics, by route and outcome: allowed, or the denial\'s name', async () => {
    const tally = (route: string, outcome: string) => instance.metrics.tallies.routes.get(route)?.decided.get(outcome) ?? 0;
    const before = [tally('/orders/archive', telemetryName('methodNotAllowed')), tally('own', telemetryName('methodNotAllowed')), tally('/orders', 'allowed')];
    await decide('POST', '/orders/archive', 'pro');
    await decide('GET', '/api/v1/auth/login', 'none');
    await decide('GET', '/orders/1', 'free');
    expect([tally('/orders/archive', telemetryName('methodNotAllowed')), tally('own', telemetryName('methodNotAllowed')), tally('/orders', 'allowed')])
      .toEqual(before.map((n) => n + 1));
  });

  it('the guard alone (what the own endpoints run): a pass with the caller, or a denial', async () => {
    const guard = (credential: Credential) => instance.pipeline.guard({ auth: 'required' }, headers[credential], instance.live.current);
    expect(await guard('free')).toMatchObject({ kind: 'pass', auth: { kind: 'authenticated', user: { id: ids.free } }, responseHeaders: undefined });
    expect(await guard('none')).toMatchObject({ kind: 'deny', denial: { code: 'tokenMissing' } });
    // Own endpoints act for the user: Gateway-Org is not read there, not even a malformed one.
    expect(await instance.pipeline.guard({ auth: 'required' }, { ...headers.free, 'gateway-org': 'x1' }, instance.live.current))
      .toMatchObject({ kind: 'pass', auth: { user: { id: ids.free } } });
  });

  it('the guard\'s policies: a bearer sign-in only, a second factor', async () => {
    const guard = (policy: Parameters<Instance['pipeline']['guard']>[0], credential: Credential) => instance.pipeline.guard(policy, headers[credential], instance.live.current);
    expect(await guard({ auth: 'required', bearerOnly: true }, 'pro key')).toMatchObject({ kind: 'deny', denial: { code: 'apiKeyNotAccepted' } });
    expect(await guard({ auth: 'required', bearerOnly: true }, 'pro')).toMatchObject({ kind: 'pass', auth: { user: { id: ids.pro } } });
    expect(await guard({ auth: 'optional', bearerOnly: true }, 'none')).toMatchObject({ kind: 'pass', auth: { kind: 'anonymous' } });
    // mfa: required implies a credential, even where auth is none; a password sign-in or a key is not enough.
    expect(await guard({ auth: 'none', mfa: 'required' }, 'none')).toMatchObject({ kind: 'deny', denial: { code: 'tokenMissing' } });
    expect(await guard({ auth: 'required', mfa: 'required' }, 'free')).toMatchObject({ kind: 'deny', denial: { code: 'mfaRequired' } });
    expect(await guard({ auth: 'required', mfa: 'required' }, 'pro key')).toMatchObject({ kind: 'deny', denial: { code: 'mfaRequired' } });
    expect(await guard({ auth: 'required', mfa: 'optional' }, 'free')).toMatchObject({ kind: 'pass' });
  });

  describe('authenticate (pipeline/guards/authenticate.ts): the bearer token first, then X-API-Key', () => {
    /** What the caller is taken for on `url`: the decision's auth, or its denial's code. */
    const auth = async (h: IncomingHttpHeaders, url = '/orders/1') => {
      const decision = await instance.pipeline.decide({ context: requestContext(instance.live.current, 'GET', url, ownMethods), headers: h }, { forwarding: true });
      return decision.kind === 'allow' ? decision.auth : decision.denial.code;
    };
    const token = () => headers.free.authorization!.slice('Bearer '.length);
    /** A key of a new pro user, its row changed by `update` (SQL on api_tokens, $1 its hash) before its first use. */
    const keyWith = async (update?: string, params: unknown[] = []) => {
      const id = (await users.createUser(instance.db, newEmail(), null))!;
      await users.setPlan(instance.db, id, 'pro');
      const { key } = await createApiKey({ ...instance, apiKeys: instance.config.apiKeys }, id, { actor: 'system' });
      if (update) await instance.db.query(update, [sha256Hex(key), ...params]);
      return { key, id };
    };

    it('a bearer token, its scheme in any case, spaces or tabs around: the user, the session, the assurance', async () => {
      for (const authorization of [`bearer\t${token()} \t`, `BEARER ${token()}`]) {
        const expected = { kind: 'authenticated', method: 'bearer', user: { id: ids.free }, sessionId: 1, acr: 'aal1', authTime: expect.any(Number) };
        expect(await auth({ authorization }), authorization).toMatchObject(expected);
      }
    });

    it('a token verified before is looked up in its plain form only: anything around or after it is read as before', async () => {
      const expected = { kind: 'authenticated', method: 'bearer', user: { id: ids.free } };
      expect(await auth({ authorization: `Bearer ${token()}` })).toMatchObject(expected);
      for (const authorization of [`Bearer ${token()}`, `Bearer  ${token()}`, `Bearer ${token()} `, `bearer ${token()}`]) {
        expect(await auth({ authorization }), authorization).toMatchObject(expected);
      }
      for (const authorization of [`Bearer ${token()}X`, `Bearer ${token()}.`, `Bearer ${token()}=`, `Bearer ${token()},x`, `Bearer ${token()} x`, `Bearer x${token()}`]) {
        expect(await auth({ authorization }, '/maybe'), authorization).toBe('tokenInvalid');
      }
    });

    it('the Bearer scheme without a token of ours is a 401 even where anonymous access is allowed; another scheme is not ours', async () => {
      for (const authorization of ['Bearer', 'Bearer ', 'bearer\t', `Bearer ${token()} extra`]) {
        expect(await auth({ authorization }, '/maybe'), authorization).toBe('tokenInvalid');
      }
      for (const authorization of ['Bearerx abc', 'Basic Bearer abc', 'Token abc']) {
        expect(await auth({ authorization }, '/maybe'), authorization).toEqual({ kind: 'anonymous' });
      }
    });

    it('a bearer token that fails passes to the key: the key\'s user, its hash and id; spaces around the key are not part of it', async () => {
      const { key, id } = await keyWith();
      const [row] = await instance.db.query<{ id: string }>('SELECT id FROM api_tokens WHERE token_hash = $1', [sha256Hex(key)]);
      for (const h of [{ ...headers.forged, 'x-api-key': key }, { 'x-api-key': ` ${key}  ` }]) {
        expect(await auth(h)).toMatchObject({ kind: 'authenticated', method: 'api-key', user: { id }, keyHash: sha256Hex(key), keyId: Number(row!.id), scopes: null });
      }
      expect(await auth({ 'x-api-key': '   ' })).toBe('tokenMissing');
    });

    it('a valid token of a user that does not exist: userNotFound, and no fall back to a key beside it', async () => {
      const ghost = await instance.tokens.issuePair({ id: 2_000_000_000, email: 'ghost@example.test', plan: 'pro', credential_generation: 0 }, 1, { amr: ['pwd'], authTime: new Date() });
      const { key } = await keyWith();
      expect(await auth({ authorization: `Bearer ${ghost.pair.access_token}`, 'x-api-key': key })).toBe('userNotFound');
      expect(await auth({ ...headers.inactive, 'x-api-key': key })).toBe('userInactive');
    });

    it('a key that has expired, or whose owner is inactive, is refused; one that expires later is taken', async () => {
      const expired = await keyWith("UPDATE api_tokens SET expires_at = now() - interval '1 minute' WHERE token_hash = $1");
      const later = await keyWith("UPDATE api_tokens SET expires_at = now() + interval '1 hour' WHERE token_hash = $1");
      const inactive = await keyWith();
      await users.setActive(instance.db, inactive.id, false);
      expect(await auth({ 'x-api-key': later.key })).toMatchObject({ kind: 'authenticated', method: 'api-key', user: { id: later.id } });
      expect(await auth({ 'x-api-key': expired.key })).toBe('tokenInvalid');
      expect(await auth({ 'x-api-key': inactive.key })).toBe('tokenInvalid');
    });

    it('an organization\'s key: its organization and role (member when the row has none); a personal key has neither', async () => {
      const orgId = (await instance.db.query<{ id: number }>("INSERT INTO organizations (name, plan) VALUES ('Keys', 'pro') RETURNING id"))[0]!.id;
      const admin = await keyWith("UPDATE api_tokens SET org_id = $2, role = 'admin' WHERE token_hash = $1", [orgId]);
      const member = await keyWith('UPDATE api_tokens SET org_id = $2, role = NULL WHERE token_hash = $1', [orgId]);
      // A key acts while its creator is a member (pipeline/guards/org.ts), with the higher of the two roles.
      await instance.db.query("INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, 'member'), ($1, $3, 'member')", [orgId, admin.id, member.id]);
      expect(await auth({ 'x-api-key': admin.key }, '/shared')).toMatchObject({ kind: 'authenticated', orgKey: { orgId, role: 'admin' } });
      expect(await auth({ 'x-api-key': member.key }, '/shared')).toMatchObject({ kind: 'authenticated', orgKey: { orgId, role: 'member' } });
      expect(await auth(headers['pro key'], '/shared')).not.toHaveProperty('orgKey');
    });
  });
});
