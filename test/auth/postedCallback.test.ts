// A provider whose protocol posts its answer back (SAML's HTTP-POST binding, next) signs in
// through the same callback as one that redirects (issue 73): its kind opts in (postsBack), the
// callback then also takes POST with an application/x-www-form-urlencoded body, in that scope
// alone (everywhere else a form counts as {}, listener/basics.ts), and hands the provider the
// form; the state, the cookie, the linking rules and the exchange are the same code. No built-in
// kind posts back yet, so the kind here is the test's own, given to the registry beside the
// real ones, on a listener built as auth/index.ts builds the providers' routes, with the real
// common hooks and parsers and a real gateway's database, tokens and audit log.
import { randomBytes, randomUUID } from 'node:crypto';
import Fastify, { type FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { SignInProviders } from '../../src/auth/providers/configured.js';
import { PROVIDER_KINDS } from '../../src/auth/providers/registry.js';
import { providerCallbackRoute, providerRoutes } from '../../src/auth/providers/routes.js';
import { s256, SignInFailed, type Assertion, type FlowSecrets, type ProviderCallback, type ProviderSettings, type SignInProvider } from '../../src/auth/providers/signInProvider.js';
import { listenerOptions, registerCommon } from '../../src/listener/basics.js';
import { refuseUnfitInput } from '../../src/listener/inputs.js';
import { RequestContexts } from '../../src/live/requestContext.js';
import { RouteTallies } from '../../src/telemetry/metrics.js';
import { closeSql, describeWithServices, newEmail, sql, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';

const PUBLIC_URL = 'http://localhost:9';
const RETURN_TO = 'https://app.example.test/signed-in';
const ISSUER = 'https://idp.posting.test';
const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
const cookieOf = (setCookie: unknown) => String(setCookie).split(';')[0]!;

/** The test's kind: it sends the browser to its IdP with the state as the relay, and reads who signed in from the posted form. */
class PostingProvider implements SignInProvider {
  readonly postsBack = true;
  static readonly received: ProviderCallback[] = [];

  constructor(readonly name: string, readonly settings: ProviderSettings) {}

  authorizationUrl(secrets: FlowSecrets): Promise<string> {
    return Promise.resolve(`${ISSUER}/sso?relay=${secrets.state}`);
  }

  signIn(callback: ProviderCallback, _secrets: FlowSecrets): Promise<Assertion> {
    PostingProvider.received.push(callback);
    const [subject, email] = (callback.params.get('assertion') ?? '').split(' ');
    if (callback.via !== 'form' || !subject) return Promise.reject(new SignInFailed('provider_error', 'no posted assertion'));
    return Promise.resolve({ issuer: ISSUER, subject, email, emailVerified: true, hostedDomain: undefined });
  }
}

describeWithServices('a provider that posts its answer back', () => {
  let gw: TestGateway;
  let app: FastifyInstance;

  beforeAll(async () => {
    const providers = { gh: { kind: 'github', clientId: 'c', clientSecret: 's' }, posting: { kind: 'github', clientId: 'c', clientSecret: 's', trustEmail: true } };
    // The gateway itself has GitHub alone: no kind of its own posts back.
    gw = await startTestGateway(testConfig({ auth: { oidc: { publicUrl: PUBLIC_URL, returnTo: [RETURN_TO], providers: { gh: providers.gh } } } }));
    const settings = testConfig({ auth: { oidc: { publicUrl: PUBLIC_URL, returnTo: [RETURN_TO], providers } } }).auth.oidc!;
    // The settings of GitHub's kind (every default filled in), given the test's kind.
    const posting = { ...settings.providers.posting!, kind: 'posting', issuer: ISSUER } as unknown as ProviderSettings;
    const kinds = { ...PROVIDER_KINDS, posting: (name: string, s: ProviderSettings) => new PostingProvider(name, s) };
    const configured = new SignInProviders({ ...settings, providers: { ...settings.providers, posting } }, kinds);
    const deps = { db: gw.services.db, tokens: gw.services.tokens, audit: gw.services.audit, clock: () => new Date(), providers: configured };
    app = Fastify(listenerOptions(pino({ level: 'silent' })));
    registerCommon(app, new RouteTallies());
    const contexts = new RequestContexts(gw.services.live, () => []);
    app.decorateRequest('context', null as never);
    app.addHook('onRequest', (request, _reply, done) => {
      request.context = contexts.of(request.raw);
      done();
    });
    // As auth/index.ts registers them: start and exchange, then the callback in its own scope.
    await app.register(async (auth) => auth.register(providerRoutes, deps), { prefix: '/api/v1/auth' });
    await app.register(async (callback) => {
      refuseUnfitInput(callback);
      await providerCallbackRoute(callback, deps);
    }, { prefix: '/api/v1/auth' });
    await app.ready();
  });
  afterAll(async () => {
    await app?.close();
    await gw?.close();
    await closeSql();
  });

  /** A browser sent to the provider: the cookie the start set and the state the provider will post back. */
  async function start(name: string, verifier: string): Promise<{ cookie: string; state: string }> {
    const res = await app.inject({ method: 'GET', url: `/api/v1/auth/oidc/${name}/start?return_to=${encodeURIComponent(RETURN_TO)}&code_challenge=${s256(verifier)}` });
    expect(res.statusCode, res.body).toBe(302);
    return { cookie: cookieOf(res.headers['set-cookie']), state: new URL(String(res.headers.location)).searchParams.get('relay') ?? '' };
  }

  it('its posted form signs the user in: a login code, traded for the pair, the identity linked', async () => {
    const verifier = randomBytes(32).toString('base64url');
    const { cookie, state } = await start('posting', verifier);
    const [subject, email] = [`sub-${randomUUID()}`, newEmail('posted')];
    const before = PostingProvider.received.length;
    const form = new URLSearchParams({ state, assertion: `${subject} ${email}` }).toString();
    const back = await app.inject({ method: 'POST', url: '/api/v1/auth/oidc/posting/callback', headers: { ...FORM, cookie }, payload: form });
    expect(back.statusCode, back.body).toBe(302);
    const fragment = new URLSearchParams(new URL(String(back.headers.location)).hash.slice(1));
    expect([...fragment.keys()]).toEqual(['login_code']);
    expect(PostingProvider.received.slice(before).map((c) => [c.via, Object.fromEntries(c.params)])).toEqual([['form', { state, assertion: `${subject} ${email}` }]]);
    const pair = await app.inject({ method: 'POST', url: '/api/v1/auth/oidc/exchange', payload: { login_code: fragment.get('login_code'), code_verifier: verifier } });
    expect(pair.statusCode, pair.body).toBe(200);
    expect(Object.keys(pair.json() as object)).toEqual(expect.arrayContaining(['access_token', 'refresh_token']));
    const links = await sql('SELECT u.email, i.provider FROM user_identities i JOIN users u ON u.id = i.user_id WHERE i.issuer = $1 AND i.subject = $2', [ISSUER, subject]);
    expect(links).toEqual([{ email, provider: 'posting' }]);
  });

  it('the same state rules as a redirect: without the cookie, or a body that is no form, 400 and the provider never asked', async () => {
    const verifier = randomBytes(32).toString('base64url');
    const { cookie, state } = await start('posting', verifier);
    const before = PostingProvider.received.length;
    const uncookied = await app.inject({ method: 'POST', url: '/api/v1/auth/oidc/posting/callback', headers: FORM, payload: `state=${state}&assertion=x` });
    const json = await app.inject({ method: 'POST', url: '/api/v1/auth/oidc/posting/callback', headers: { cookie }, payload: { state, assertion: 'x' } });
    const unfit = await app.inject({ method: 'POST', url: '/api/v1/auth/oidc/posting/callback', headers: { ...FORM, cookie }, payload: `state=${state}&assertion=x%00` });
    for (const res of [uncookied, json, unfit]) expect([res.statusCode, res.json()]).toEqual([400, { error: 'Requête invalide' }]);
    expect(PostingProvider.received.length).toBe(before);
  });

  it('a kind that does not opt in answers POST 405, as a gateway whose kinds all redirect does (no POST route there)', async () => {
    const mine = await app.inject({ method: 'POST', url: '/api/v1/auth/oidc/gh/callback', headers: FORM, payload: 'state=x' });
    const real = await gw.request('POST', '/api/v1/auth/oidc/gh/callback', { headers: FORM, body: 'state=x' });
    for (const [status, body, allow] of [[mine.statusCode, mine.json(), mine.headers.allow], [real.status, real.json, real.headers.allow]]) {
      expect([status, body, allow]).toEqual([405, { error: 'Méthode non autorisée' }, 'GET, HEAD']);
    }
  });
});
