// A local fake of GitHub's OAuth and REST endpoints for Sign in with GitHub (CONTRACT §26), on a
// loopback port, for "Sign in with GitHub (demo)" (`npm run demo`) and the tests
// (test/helpers/githubFake.ts): the browser's authorization (the user approves at once and is
// sent back with a code and the state), the code exchange (client secret, redirect URI and PKCE
// verifier checked against the challenge, GitHub's way: a 200 with an `error` field when
// refused), /user and /user/emails for the access token. What the gateway sent is recorded. A
// user's `answers` replace GitHub's by path, for the tests of what a malformed answer does.
// Nothing here is fit for anything but a demo or a test: in memory, no login at all.
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface GitHubEmail {
  email: string;
  primary: boolean;
  verified: boolean;
}

/** An answer in place of GitHub's: a status (200 by default) and a body sent as it is (JSON or not). */
export interface GitHubAnswer {
  status?: number;
  body: string;
}

export interface GitHubUser {
  id: number;
  emails: GitHubEmail[];
  /**
   * By path (/login/oauth/access_token, /api/user, /api/user/emails), what the fake answers this
   * user's request instead, once the request is otherwise valid (the code exchange no token then).
   */
  answers?: Record<string, GitHubAnswer>;
}

// The demo GitHub's one user: a primary verified address, and a verified secondary one that does not count.
export const DEMO_GITHUB_LOGIN = 'octocat';
export const DEMO_GITHUB_USER = { id: 583231, emails: [{ email: 'octo@users.noreply.example.com', primary: false, verified: true }, { email: 'octocat@example.com', primary: true, verified: true }] };

export interface GitHubFake {
  /** http://127.0.0.1:PORT: authorizeUrl is {url}/login/oauth/authorize, apiBase {url}/api. */
  url: string;
  clientId: string;
  clientSecret: string;
  /** By login, the name the browser approves as (`?login=` at the authorization, else `defaultLogin`). */
  users: Map<string, GitHubUser>;
  /** Each request the gateway made: method, path and headers. */
  requests: Array<{ method: string; path: string; headers: http.IncomingHttpHeaders; body: string }>;
  /** Access tokens handed out (to look for in the gateway's logs). */
  accessTokens: string[];
  close(): Promise<void>;
}

interface Grant { login: string; challenge: string; redirectUri: string }

export async function startGitHubFake(options: { clientId?: string; defaultLogin?: string; users?: Record<string, GitHubUser> } = {}): Promise<GitHubFake> {
  const clientId = options.clientId ?? 'github-client-id';
  const clientSecret = `github-secret-${randomBytes(8).toString('hex')}`;
  const users = new Map<string, GitHubUser>(Object.entries(options.users ?? {}));
  const codes = new Map<string, Grant>();
  const tokens = new Map<string, string>();
  const fake: Omit<GitHubFake, 'url' | 'close'> = { clientId, clientSecret, users, requests: [], accessTokens: [] };
  const json = (res: http.ServerResponse, status: number, body: unknown): void => {
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  };
  const answer = (res: http.ServerResponse, instead: GitHubAnswer): void => {
    res.writeHead(instead.status ?? 200, { 'content-type': 'application/json' }).end(instead.body);
  };

  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => { body += chunk.toString(); });
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://fake');
      if (!url.pathname.startsWith('/login/oauth/authorize')) fake.requests.push({ method: req.method ?? '', path: url.pathname, headers: req.headers, body });
      if (req.method === 'GET' && url.pathname === '/login/oauth/authorize') return authorize(url, res);
      if (req.method === 'POST' && url.pathname === '/login/oauth/access_token') return exchange(new URLSearchParams(body), res);
      const login = tokens.get((req.headers.authorization ?? '').replace(/^Bearer /, ''));
      const user = login === undefined ? undefined : users.get(login);
      if (!user) return json(res, 401, { message: 'Bad credentials' });
      const instead = user.answers?.[url.pathname];
      if (instead) return answer(res, instead);
      if (req.method === 'GET' && url.pathname === '/api/user') return json(res, 200, { login, id: user.id, email: null });
      if (req.method === 'GET' && url.pathname === '/api/user/emails') return json(res, 200, user.emails.map((e) => ({ ...e, visibility: e.primary ? 'private' : null })));
      return json(res, 404, { message: 'Not Found' });
    });
  });

  /** The user named by `login` approves: back to the redirect URI with a code and the state. */
  function authorize(url: URL, res: http.ServerResponse): void {
    const q = url.searchParams;
    const redirectUri = q.get('redirect_uri') ?? '';
    if (q.get('client_id') !== clientId || q.get('code_challenge_method') !== 'S256' || !q.get('code_challenge') || !redirectUri) return json(res, 400, { error: 'bad request' });
    const code = randomBytes(10).toString('hex');
    codes.set(code, { login: q.get('login') ?? options.defaultLogin ?? '', challenge: q.get('code_challenge')!, redirectUri });
    const back = new URL(redirectUri);
    back.search = new URLSearchParams({ code, state: q.get('state') ?? '' }).toString();
    res.writeHead(302, { location: back.href }).end();
  }

  function exchange(form: URLSearchParams, res: http.ServerResponse): void {
    const grant = codes.get(form.get('code') ?? '');
    codes.delete(form.get('code') ?? '');
    const verifier = form.get('code_verifier') ?? '';
    if (form.get('client_id') !== clientId || form.get('client_secret') !== clientSecret) return json(res, 200, { error: 'incorrect_client_credentials' });
    if (!grant || grant.redirectUri !== form.get('redirect_uri')) return json(res, 200, { error: 'bad_verification_code' });
    if (createHash('sha256').update(verifier).digest('base64url') !== grant.challenge) {
      return json(res, 200, { error: 'bad_verification_code', error_description: 'The code_verifier does not match the code_challenge' });
    }
    const instead = users.get(grant.login)?.answers?.['/login/oauth/access_token'];
    if (instead) return answer(res, instead);
    const token = `gho_${randomBytes(18).toString('hex')}`;
    tokens.set(token, grant.login);
    fake.accessTokens.push(token);
    json(res, 200, { access_token: token, token_type: 'bearer', scope: 'read:user,user:email' });
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    ...fake,
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}
