// The pipeline alone, without a listener (STYLE 21, after Oathkeeper's request_handler_test.go):
// one table of route × credential × expected decision, run against a real instance (Postgres,
// Redis, the identity cache, the limiters) and requests given as contexts, the way every caller
// (proxy, own endpoints, decisions, WebSocket upgrades) hands them over.
import type { IncomingHttpHeaders } from 'node:http';
import pino from 'pino';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createApiKey } from '../../src/auth/apiKeys.js';
import { createInstance, type Instance } from '../../src/instance.js';
import type { Decision } from '../../src/pipeline/pipeline.js';
import { requestContext } from '../../src/live/requestContext.js';
import * as users from '../../src/storage/users.js';
import { closeSql, describeWithServices, newEmail, testConfig } from '../helpers/gateway.js';

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
  { path: '/shared', upstream: 'app', auth: 'optional', org: 'optional' },
];
const MAIL = { smtp: '', from: 'x', resetUrl: 'https://a.example/r?token={token}', verifyUrl: 'https://a.example/v?token={token}', invitationUrl: 'https://a.example/j?token={token}' };
/** The public listener's own endpoints, as the pipeline is told of them. */
const OWN: Record<string, readonly string[]> = { '/api/v1/auth/login': ['POST'] };
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
  ['GET', '/shared', 'free', { allow: 'bearer' }], // org: optional acting for none
  ['GET', '/api/v1/auth/login', 'none', { deny: 'methodNotAllowed', route: 'own' }],
  ['POST', '/API/v1/auth/login/', 'none', { deny: 'routeNotFound', route: 'own' }], // another spelling of an own endpoint
];

describeWithServices('the pipeline: route × credential → decision (no listener)', () => {
  let instance: Instance;
  const headers: Record<Credential, IncomingHttpHeaders> = {} as never;
  const ids: Partial<Record<Credential, number>> = {};

  beforeAll(async () => {
    instance = await createInstance(testConfig({ upstreams: { app: APP }, routes: ROUTES, decisions: { port: 1 }, organizations: { enabled: true }, mail: MAIL }), { log: pino({ level: 'silent' }) });
    const hash = await instance.passwords.hash('long-enough-password');
    const user = async (plan: string, active = true) => {
      const id = (await users.createUser(instance.db, newEmail(), hash))!;
      await users.setPlan(instance.db, id, plan);
      if (!active) await users.setActive(instance.db, id, false);
      return (await users.findById(instance.db, id))!;
    };
    const bearer = async (credential: Credential, plan: string, active = true) => {
      const u = await user(plan, active);
      ids[credential] = u.id;
      const { pair } = await instance.tokens.issuePair(u, 1, { amr: ['pwd'], authTime: new Date() });
      headers[credential] = { authorization: `Bearer ${pair.access_token}` };
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

  const decide = (method: string, url: string, credential: Credential, forwarding = true): Promise<Decision> =>
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
    expect(await as('none', String(orgId), '/shared')).toMatchObject({ kind: 'deny', denial: { code: 'tokenInvalid' } });
    expect(await as('premium', String(orgId), '/orders/1')).toMatchObject({ kind: 'deny', denial: { code: 'orgNotApplicable' } });
  });

  it('counts a free user\'s daily use once: allowed, then 429 with the RateLimit fields', async () => {
    const free = await decide('GET', '/races', 'free');
    expect(free).toMatchObject({ kind: 'allow', responseHeaders: { 'ratelimit-policy': '"daily";q=1;w=86400' } });
    expect(await decide('GET', '/races', 'free')).toMatchObject({ kind: 'deny', denial: { code: 'dailyLimitReached' } });
  });
});
