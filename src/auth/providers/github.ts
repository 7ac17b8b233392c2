// Sign in with GitHub (CONTRACT §26): OAuth 2 without OpenID Connect, so no discovery and no ID
// token. The browser authorizes at {authorizeUrl} (code flow, state, PKCE S256); the code is
// exchanged at {tokenUrl} with the client secret and the verifier; the access token then reads
// {apiBase}/user for the account's numeric id (a login can be renamed, and taken by someone else,
// an id cannot) and {apiBase}/user/emails for the primary address, counted only when GitHub says
// it is verified: a secondary or unverified address is anyone's to add to their GitHub account.
// The access token is dropped here; it is never logged, stored or forwarded.
import { GITHUB_ISSUER } from '../../config/schema.js';
import {
  callbackError, PROVIDER_TIMEOUT_MS, reasonOf, s256, SignInFailed, type Assertion, type FlowSecrets, type ProviderCallback, type ProviderSettings, type SignInProvider,
} from './signInProvider.js';

type GitHubSettings = Extract<ProviderSettings, { kind: 'github' }>;

interface GitHubEmail {
  email?: unknown;
  primary?: unknown;
  verified?: unknown;
}

export class GitHubProvider implements SignInProvider {
  constructor(readonly name: string, readonly settings: GitHubSettings, readonly redirectUri: string) {}

  authorizationUrl(secrets: FlowSecrets): Promise<string> {
    const url = new URL(this.settings.authorizeUrl);
    url.search = new URLSearchParams({
      client_id: this.settings.clientId,
      redirect_uri: this.redirectUri,
      scope: this.settings.scopes.join(' '),
      state: secrets.state,
      code_challenge: s256(secrets.verifier),
      code_challenge_method: 'S256',
    }).toString();
    return Promise.resolve(url.href);
  }

  /** The routes checked the state against the browser's cookie; here the code is exchanged and the user read. */
  async signIn(callback: ProviderCallback, secrets: FlowSecrets): Promise<Assertion> {
    const query = callback.params;
    const refused = callbackError(query);
    if (refused) throw refused;
    const code = query.get('code');
    if (!code) throw new SignInFailed('provider_error', 'no code in the callback');
    const accessToken = await this.exchange(code, secrets.verifier);
    const id = (await this.api('/user', accessToken) as { id?: unknown } | null)?.id;
    // Number.isSafeInteger is false for anything but a number: a string id, none, null.
    if (!Number.isSafeInteger(id) || (id as number) <= 0) throw new SignInFailed('provider_error', 'GitHub /user answered no numeric id');
    const emails = await this.api('/user/emails', accessToken);
    if (!Array.isArray(emails)) throw new SignInFailed('provider_error', 'GitHub /user/emails answered no list');
    // An entry that is no object (null) is passed over like any other, not a 500.
    const primary = (emails as Array<GitHubEmail | null>).find((e) => e?.primary === true && e.verified === true && typeof e.email === 'string');
    return { issuer: GITHUB_ISSUER, subject: String(id), email: primary?.email as string | undefined, emailVerified: primary !== undefined, hostedDomain: undefined };
  }

  /** The code and the PKCE verifier for an access token; GitHub answers its errors with 200 and an `error` field. */
  private async exchange(code: string, verifier: string): Promise<string> {
    const body = new URLSearchParams({
      client_id: this.settings.clientId,
      client_secret: this.settings.clientSecret,
      code,
      redirect_uri: this.redirectUri,
      code_verifier: verifier,
    });
    const headers = { accept: 'application/json', 'content-type': 'application/x-www-form-urlencoded' };
    const answer = await this.request(this.settings.tokenUrl, { method: 'POST', body, headers }) as { access_token?: unknown; error?: unknown } | undefined;
    if (typeof answer?.access_token !== 'string' || !answer.access_token) {
      throw new SignInFailed('provider_error', `code exchange refused: ${typeof answer?.error === 'string' ? answer.error.slice(0, 64) : 'no access_token'}`);
    }
    return answer.access_token;
  }

  private api(path: string, accessToken: string): Promise<unknown> {
    return this.request(`${this.settings.apiBase}${path}`, {
      headers: { accept: 'application/vnd.github+json', authorization: `Bearer ${accessToken}`, 'user-agent': 'auth-gateway', 'x-github-api-version': '2022-11-28' },
    });
  }

  /** One call to GitHub, its JSON answer; any failure (refused, slow, not 2xx, not JSON) is provider_error, logged by status only. */
  private async request(url: string, init: RequestInit): Promise<unknown> {
    let res: Response;
    try {
      res = await fetch(url, { ...init, redirect: 'error', signal: AbortSignal.timeout(PROVIDER_TIMEOUT_MS) });
    } catch (err) {
      // fetch rejects with a TypeError (refused, a redirect; its cause says why) or the timeout's DOMException.
      throw new SignInFailed('provider_error', `GitHub unreachable at ${new URL(url).pathname}: ${reasonOf(err)}`);
    }
    if (!res.ok) {
      await res.body?.cancel();
      throw new SignInFailed('provider_error', `GitHub ${new URL(url).pathname} answered ${res.status}`);
    }
    try {
      return await res.json();
    } catch {
      throw new SignInFailed('provider_error', `GitHub ${new URL(url).pathname} answered no JSON`);
    }
  }
}
