// Sign in with GitHub (CONTRACT §26, issue 45): a provider `kind: github`, against a local fake of
// GitHub's endpoints (test/helpers/githubFake.ts). OAuth 2 code flow with PKCE, the identity
// (https://github.com, numeric id), the primary verified address only, the same linking rules as
// OpenID Connect providers (trustEmail false by default, emailDomains, allowSignUp), amr ["fed"],
// and a GitHub that refuses or is down sends the browser back with #error=provider_error.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { s256 } from '../../src/auth/providers/oidc.js';
import { parseConfig } from '../../src/config/load.js';
import { ensureBuilt, gateway } from '../helpers/cli.js';
import { claims, closeSql, configProblems, describeWithServices, makeUser, marker, newEmail, sql, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';
import { sparePort } from '../helpers/ports.js';
import { approveAtGitHub, startGitHubFake, type GitHubAnswer, type GitHubEmail, type GitHubFake } from '../helpers/githubFake.js';

const PUBLIC_URL = 'http://localhost:9';
const RETURN_TO = 'https://app.example.test/signed-in';
const EXCHANGE = '/api/v1/auth/oidc/exchange';
const TOKEN = '/login/oauth/access_token';

describeWithServices('Sign in with GitHub', () => {
  let github: GitHubFake;
  const gateways: TestGateway[] = [];
  let nextId = 1_000_000 + Math.floor(Math.random() * 1_000_000_000);

  beforeAll(async () => {
    github = await startGitHubFake();
  });
  afterAll(async () => {
    await Promise.all(gateways.map((gw) => gw.close()));
    await github?.close();
    await closeSql();
  });

  async function gatewayWith(settings: Record<string, unknown> = {}): Promise<TestGateway> {
    const gh = { kind: 'github', clientId: github.clientId, clientSecret: github.clientSecret, authorizeUrl: `${github.url}/login/oauth/authorize`, apiBase: `${github.url}/api`, ...settings };
    const gw = await startTestGateway(testConfig({ auth: { oidc: { publicUrl: PUBLIC_URL, returnTo: [RETURN_TO], providers: { gh } } } }));
    gateways.push(gw);
    return gw;
  }

  /** A GitHub user of these addresses (and GitHub's `answers` to its requests, by path): its login and numeric id. */
  function gitHubUser(emails: GitHubEmail[], answers?: Record<string, GitHubAnswer>): { login: string; id: number } {
    const login = `octo-${marker()}`;
    const id = nextId++;
    github.users.set(login, { id, emails, answers });
    return { login, id };
  }
  /** Why the gateway refused the sign-ins it logged since `from`, an index into its logs. */
  const refusals = (gw: TestGateway, from: number) => gw.logs.slice(from).map((l) => JSON.parse(l) as { msg: string; reason?: string })
    .filter((l) => l.msg === 'identity provider sign-in refused').map((l) => l.reason);

  /**
   * The browser's round trip: start, approve at GitHub as `login` (with `tamper` changing the
   * authorization URL first), the callback; the fragment the application gets and its verifier.
   */
  async function signIn(gw: TestGateway, login: string, tamper: (url: URL) => void = () => {}): Promise<{ fragment: URLSearchParams; verifier: string; location: URL }> {
    const verifier = randomBytes(32).toString('base64url');
    const started = await gw.get(`/api/v1/auth/oidc/gh/start?return_to=${encodeURIComponent(RETURN_TO)}&code_challenge=${s256(verifier)}`);
    expect(started.status, started.text).toBe(302);
    const location = new URL(String(started.headers.location));
    tamper(location);
    const back = await approveAtGitHub(location.href, login);
    const res = await gw.get(`${back.pathname}${back.search}`, { headers: { cookie: String((started.headers['set-cookie'] as string[])[0]).split(';')[0]! } });
    expect(res.status, res.text).toBe(302);
    const url = new URL(String(res.headers.location));
    expect(url.origin + url.pathname).toBe(RETURN_TO);
    return { fragment: new URLSearchParams(url.hash.slice(1)), verifier, location };
  }
  const linksOf = (id: number) => sql<{ user_id: number; provider: string; email: string | null }>('SELECT user_id, provider, email FROM user_identities WHERE issuer = $1 AND subject = $2', ['https://github.com', String(id)]);
  const usersOf = (email: string) => sql<{ id: number; verified: boolean; password_hash: string | null }>(
    'SELECT id, email_verified_at IS NOT NULL AS verified, password_hash FROM users WHERE email = $1', [email]);

  it('signs up, then signs in again to the same account, with amr ["fed"]; identity (https://github.com, numeric id); no GitHub secret in the logs', async () => {
    const gw = await gatewayWith();
    const email = newEmail('gh');
    const { login, id } = gitHubUser([{ email: newEmail('secondary'), primary: false, verified: true }, { email: email.toUpperCase(), primary: true, verified: true }]);
    const first = await signIn(gw, login);
    // The authorization request: code flow with PKCE S256 and state, GitHub's default scopes, no nonce.
    expect(Object.fromEntries(first.location.searchParams)).toEqual({
      client_id: github.clientId, redirect_uri: `${PUBLIC_URL}/api/v1/auth/oidc/gh/callback`, scope: 'read:user user:email',
      state: expect.stringMatching(/^[\w-]{43}$/), code_challenge: expect.stringMatching(/^[\w-]{43}$/), code_challenge_method: 'S256',
    });
    expect(first.location.origin + first.location.pathname).toBe(`${github.url}/login/oauth/authorize`);
    const pair = await gw.post(EXCHANGE, { login_code: first.fragment.get('login_code'), code_verifier: first.verifier });
    expect(pair.status, pair.text).toBe(200);
    const [link] = await linksOf(id);
    expect(link).toEqual({ user_id: expect.any(Number), provider: 'gh', email });
    expect(claims(pair.json.access_token)).toMatchObject({ sub: String(link!.user_id), amr: ['fed'], acr: 'aal1' });
    // trustEmail defaults to false for GitHub: the account is made, its address not taken as verified.
    expect(await usersOf(email)).toEqual([{ id: link!.user_id, verified: false, password_hash: null }]);

    const again = await signIn(gw, login);
    const second = await gw.post(EXCHANGE, { login_code: again.fragment.get('login_code'), code_verifier: again.verifier });
    expect(second.status, second.text).toBe(200);
    expect(claims(second.json.access_token)).toMatchObject({ sub: String(link!.user_id), amr: ['fed'] });
    expect(await linksOf(id)).toHaveLength(1);

    // What the gateway sent GitHub: the exchange as a form asking for JSON, the API with a bearer, GitHub's media type and a User-Agent.
    const token = github.requests.find((r) => r.path === TOKEN)!;
    expect([token.headers.accept, token.headers['content-type']]).toEqual(['application/json', 'application/x-www-form-urlencoded']);
    expect(Object.fromEntries(new URLSearchParams(token.body))).toMatchObject({
      client_id: github.clientId, client_secret: github.clientSecret, redirect_uri: `${PUBLIC_URL}/api/v1/auth/oidc/gh/callback`, code_verifier: expect.any(String),
    });
    const user = github.requests.find((r) => r.path === '/api/user')!;
    expect([user.headers.accept, user.headers['user-agent'], user.headers['x-github-api-version'], user.headers.authorization])
      .toEqual(['application/vnd.github+json', 'auth-gateway', '2022-11-28', expect.stringMatching(/^Bearer gho_/)]);
    const logs = gw.logs.join('\n');
    for (const secret of [github.clientSecret, ...github.accessTokens]) expect(logs).not.toContain(secret);
  });

  it('counts the primary verified address only: a verified secondary or an unverified primary makes no account (#error=email_unverified)', async () => {
    const gw = await gatewayWith({ trustEmail: true });
    const secondary = newEmail('secondary');
    const unverified = newEmail('unverified');
    for (const emails of [[{ email: secondary, primary: false, verified: true }, { email: unverified, primary: true, verified: false }], []]) {
      const { login, id } = gitHubUser(emails);
      const { fragment } = await signIn(gw, login);
      expect(Object.fromEntries(fragment)).toEqual({ error: 'email_unverified' });
      expect(await linksOf(id)).toEqual([]);
    }
    expect([...await usersOf(secondary), ...await usersOf(unverified)]).toEqual([]);
  });

  it('trustEmail false (the default) does not link an existing account of the same address (#error=account_exists); true does', async () => {
    const untrusted = await gatewayWith();
    const member = await makeUser(untrusted);
    await sql('UPDATE users SET email_verified_at = now() WHERE id = $1', [member.id]);
    const taker = gitHubUser([{ email: member.email, primary: true, verified: true }]);
    expect(Object.fromEntries((await signIn(untrusted, taker.login)).fragment)).toEqual({ error: 'account_exists' });
    expect(await linksOf(taker.id)).toEqual([]);
    const trusted = await gatewayWith({ trustEmail: true });
    expect((await signIn(trusted, taker.login)).fragment.get('login_code')).toMatch(/^[\w-]{43}$/);
    expect(await linksOf(taker.id)).toEqual([{ user_id: member.id, provider: 'gh', email: member.email }]);
  });

  it('emailDomains and allowSignUp: false refuse with #error=account_not_allowed and make no account', async () => {
    const t = marker();
    const gw = await gatewayWith({ emailDomains: [`corp-${t}.test`] });
    const outsider = gitHubUser([{ email: `eve.${t}@evil.test`, primary: true, verified: true }]);
    expect(Object.fromEntries((await signIn(gw, outsider.login)).fragment)).toEqual({ error: 'account_not_allowed' });
    const insider = gitHubUser([{ email: `ada.${t}@corp-${t}.test`, primary: true, verified: true }]);
    expect((await signIn(gw, insider.login)).fragment.get('login_code')).toBeTruthy();
    const closed = await gatewayWith({ allowSignUp: false });
    const stranger = gitHubUser([{ email: newEmail('stranger'), primary: true, verified: true }]);
    expect(Object.fromEntries((await signIn(closed, stranger.login)).fragment)).toEqual({ error: 'account_not_allowed' });
    expect(await linksOf(outsider.id)).toEqual([]);
    expect(await linksOf(stranger.id)).toEqual([]);
    expect(await sql('SELECT id FROM users WHERE email LIKE $1', [`eve.${t}@%`])).toEqual([]);
    // A user already linked still signs in where sign-up is closed.
    const closedToo = await gatewayWith({ allowSignUp: false, emailDomains: [`corp-${t}.test`] });
    expect((await signIn(closedToo, insider.login)).fragment.get('login_code')).toBeTruthy();
  });

  it('a code issued for another PKCE challenge is refused by GitHub: #error=provider_error, no account', async () => {
    const gw = await gatewayWith();
    const { login, id } = gitHubUser([{ email: newEmail('pkce'), primary: true, verified: true }]);
    const { fragment } = await signIn(gw, login, (url) => url.searchParams.set('code_challenge', s256(randomBytes(32).toString('base64url'))));
    expect(Object.fromEntries(fragment)).toEqual({ error: 'provider_error' });
    expect(await linksOf(id)).toEqual([]);
    expect(gw.logs.join('\n')).toContain('code exchange refused: bad_verification_code');
  });

  it('the user declining at GitHub sends the browser back with #error=access_denied; a callback with no code either, #error=provider_error; GitHub not asked', async () => {
    const gw = await gatewayWith();
    for (const [query, error, reason] of [['error=access_denied', 'access_denied', 'the provider answered access_denied'], ['code=', 'provider_error', 'no code in the callback']]) {
      const started = await gw.get(`/api/v1/auth/oidc/gh/start?return_to=${encodeURIComponent(RETURN_TO)}&code_challenge=${s256(randomBytes(32).toString('base64url'))}`);
      const state = new URL(String(started.headers.location)).searchParams.get('state')!;
      const [logsFrom, asked] = [gw.logs.length, github.requests.length];
      const res = await gw.get(`/api/v1/auth/oidc/gh/callback?${query}&state=${state}`, { headers: { cookie: String((started.headers['set-cookie'] as string[])[0]).split(';')[0]! } });
      expect([res.status, res.headers.location]).toEqual([302, `${RETURN_TO}#error=${error}`]);
      expect(refusals(gw, logsFrom)).toEqual([reason]);
      expect(github.requests.length).toBe(asked);
    }
  });

  it('a GitHub answer failed or malformed sends the browser back with #error=provider_error: no account, the reason logged, GitHub asked no further', async () => {
    const gw = await gatewayWith({ trustEmail: true });
    const noId = 'GitHub /user answered no numeric id';
    const noList = 'GitHub /user/emails answered no list';
    const cases: Array<[string, GitHubAnswer, string]> = [
      // GitHub refuses a code with a 200 and an `error`; any answer without a non-empty string access_token is a refusal.
      ...['{"token_type":"bearer"}', 'null', '{"access_token":42}', '{"access_token":""}', '{"error":{"code":"bad_verification_code"}}']
        .map((body): [string, GitHubAnswer, string] => [TOKEN, { body }, 'code exchange refused: no access_token']),
      [TOKEN, { body: JSON.stringify({ error: `${'e'.repeat(64)}-cut-off` }) }, `code exchange refused: ${'e'.repeat(64)}`],
      ['/api/user', { status: 500, body: '{"message":"Server Error"}' }, 'GitHub /api/user answered 500'],
      ['/api/user', { status: 304, body: '' }, 'GitHub /api/user answered 304'],
      ['/api/user', { body: '<html>' }, 'GitHub /api/user answered no JSON'],
      // An id that is not a positive safe integer (2^53 + 1 reads as 2^53, not safe).
      ...['null', '{"login":"octo"}', '{"id":"583231"}', '{"id":1.5}', '{"id":9007199254740993}', '{"id":0}', '{"id":-1}']
        .map((body): [string, GitHubAnswer, string] => ['/api/user', { body }, noId]),
      ['/api/user/emails', { status: 404, body: '{"message":"Not Found"}' }, 'GitHub /api/user/emails answered 404'],
      ['/api/user/emails', { body: '{"email":"octocat@example.com","primary":true,"verified":true}' }, noList],
      ['/api/user/emails', { body: 'null' }, noList],
    ];
    const asked: Record<string, string[]> = { [TOKEN]: [TOKEN], '/api/user': [TOKEN, '/api/user'], '/api/user/emails': [TOKEN, '/api/user', '/api/user/emails'] };
    const emails: string[] = [];
    for (const [path, answer, reason] of cases) {
      const email = newEmail('malformed');
      emails.push(email);
      const { login, id } = gitHubUser([{ email, primary: true, verified: true }], { [path]: answer });
      const [logsFrom, requestsFrom] = [gw.logs.length, github.requests.length];
      const { fragment } = await signIn(gw, login);
      expect({ fragment: Object.fromEntries(fragment), reasons: refusals(gw, logsFrom), asked: github.requests.slice(requestsFrom).map((r) => r.path), links: await linksOf(id) })
        .toEqual({ fragment: { error: 'provider_error' }, reasons: [reason], asked: asked[path], links: [] });
    }
    expect(await sql('SELECT id FROM users WHERE email = ANY($1)', [emails])).toEqual([]);
  });

  it('an address counts only with primary and verified true and an email string; other entries, objects or not, are passed over', async () => {
    const gw = await gatewayWith({ trustEmail: true });
    const email = newEmail('odd');
    for (const entry of [{ email: null, primary: true, verified: true }, { email, primary: 'true', verified: true }, { email, primary: true, verified: 1 }]) {
      const { login, id } = gitHubUser([], { '/api/user/emails': { body: JSON.stringify([entry]) } });
      const { fragment } = await signIn(gw, login);
      expect([Object.fromEntries(fragment), await linksOf(id)]).toEqual([{ error: 'email_unverified' }, []]);
    }
    expect(await usersOf(email)).toEqual([]);
    const { login, id } = gitHubUser([], { '/api/user/emails': { body: JSON.stringify([null, 7, 'other@example.com', { email, primary: true, verified: true }]) } });
    expect((await signIn(gw, login)).fragment.get('login_code')).toMatch(/^[\w-]{43}$/);
    expect(await linksOf(id)).toEqual([{ user_id: (await usersOf(email))[0]!.id, provider: 'gh', email }]);
  });

  it('GitHub\'s API down (connection refused) sends the browser back with #error=provider_error, never a 5xx', async () => {
    // Not port 1 (refusedPort): fetch refuses the ports the Fetch standard bars ("bad port") without connecting.
    const port = await sparePort();
    const gw = await gatewayWith({ apiBase: `http://127.0.0.1:${port}` });
    const { login, id } = gitHubUser([{ email: newEmail('down'), primary: true, verified: true }]);
    const { fragment } = await signIn(gw, login);
    expect(Object.fromEntries(fragment)).toEqual({ error: 'provider_error' });
    expect(await linksOf(id)).toEqual([]);
    // fetch's own words, after the path, and the cause they wrap: what an operator reads.
    expect(refusals(gw, 0)).toEqual([`GitHub unreachable at /user: fetch failed (connect ECONNREFUSED 127.0.0.1:${port})`]);
    const logs = gw.logs.join('\n');
    for (const secret of [github.clientSecret, ...github.accessTokens]) expect(logs).not.toContain(secret);
  });
});

describe('a github provider in the configuration', () => {
  const CONFORMANCE = `
auth:
  oidc:
    publicUrl: https://gw.example.com
    returnTo: ["https://app.example.com/signed-in"]
    providers:
      github:
        kind: github
        clientId: "client-id"
        clientSecret: "client-secret"
        trustEmail: false
        emailDomains: [example.com]
        allowSignUp: true
`;

  it('gateway check accepts the shared conformance configuration (exit 0)', { timeout: 60_000 }, async () => {
    ensureBuilt();
    const dir = mkdtempSync(path.join(tmpdir(), 'gw-github-'));
    try {
      const file = path.join(dir, 'gateway.yaml');
      writeFileSync(file, CONFORMANCE);
      const { code, stdout, stderr } = await gateway(['check', '--config', file]);
      expect(code, stderr).toBe(0);
      expect(stdout.split('\n')[0]).toBe(`${file}: valid`);
      // Its warnings are §26's bindToBrowser default, which cors decides, and §21's default key
      // prefix (it sets none); nothing about the provider.
      expect(stderr.split('\n').filter((line) => !line.includes('warning: apiKeys.prefix:'))).toEqual([
        `${file}: warning: auth.oidc.bindToBrowser: on by default (every returnTo origin is same-site with publicUrl), but cors does not allow https://app.example.com with credentials: true, so its page's exchange cannot carry the gw_oidc cookie and is refused; allow it in cors, or set bindToBrowser: false to bind by the application's PKCE verifier alone`,
        '',
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('needs no issuer, refuses one, and defaults GitHub\'s endpoints, scopes and trustEmail false', () => {
    const parsed = parseConfig(CONFORMANCE, 'gateway.yaml').auth.oidc!.providers.github!;
    expect(parsed).toMatchObject({ kind: 'github', issuer: 'https://github.com', trustEmail: false, scopes: ['read:user', 'user:email'], apiBase: 'https://api.github.com',
      authorizeUrl: 'https://github.com/login/oauth/authorize', tokenUrl: 'https://github.com/login/oauth/access_token' });
    const local = parseConfig(CONFORMANCE.replace('trustEmail: false', 'authorizeUrl: http://127.0.0.1:8181/login/oauth/authorize'), 'gateway.yaml').auth.oidc!.providers.github!;
    expect(local).toMatchObject({ tokenUrl: 'http://127.0.0.1:8181/login/oauth/access_token', trustEmail: false });
    expect(configProblems(CONFORMANCE.replace('kind: github', 'kind: github\n        issuer: https://github.com'))).toEqual(['auth.oidc.providers.github: unknown key(s) "issuer"']);
    expect(configProblems(CONFORMANCE.replace('kind: github', 'kind: gitlab'))).toEqual(['auth.oidc.providers.github.kind: expected oidc (the default) or github']);
    expect(configProblems(CONFORMANCE.replace('kind: github', 'kind: github\n        apiBase: http://api.github.com'))).toEqual(['auth.oidc.providers.github.apiBase: expected an https:// URL such as https://api.github.com (http:// only on 127.0.0.1, ::1 or localhost)']);
  });
});
