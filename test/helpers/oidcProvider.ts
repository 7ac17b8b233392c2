// A real OpenID Connect provider for the tests: panva's oidc-provider on a loopback port (an
// http:// issuer, which the gateway accepts on loopback only; or https:// with the certificate a
// test gives, beside a plain http:// listener of the same provider), with one confidential client
// registered for the gateway and its development login and consent pages (any login, the
// password is not checked: the login is the user's subject). Users are added by the tests.
//
// It can also misbehave on purpose, as a broken or hostile provider would: its ID tokens re-signed
// with a claim changed (nonce, aud, exp) or by a key it never published, and its keys rotated.
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { decodeJwt, exportJWK, generateKeyPair, SignJWT, UnsecuredJWT, type JWK } from 'jose';
import Provider from 'oidc-provider';

export interface ProviderUser {
  email?: string;
  email_verified?: boolean;
}

/** How the provider's ID tokens go wrong; `none`: as issued. */
// unavailable: every request, discovery included, answered 503 (a provider down for maintenance).
// alg-none: unsigned (`alg: none`); hs256: signed with the client secret, an algorithm its metadata never offered.
// email-in-id-token, hd: the ID token re-signed with the user's email claims, or with Google's `hd` (`corp.test`;
// hd-not-a-string: `['corp.test']`); forged-signature: signed by a key never published, under the published key's id;
// garbled: a header that is not JSON; crit: a `crit` header extension nobody understands.
// The other answers: jwks-unavailable: the key set answered 503, its keys in the body all the same; jwks-not-a-set:
// 200 with `keys` not a list; jwks-not-json: 200 with a body that is not JSON; no-jwks-uri, jwks-uri-https,
// no-userinfo: the discovery document without jwks_uri, with it on https://, without userinfo_endpoint; token-endpoint-http:
// with the token endpoint at the plain http:// listener (a provider started with `tls` only);
// token-without-type: the token response without token_type; userinfo-fails: UserInfo answered 500;
// slow: discovery and the key set answered 300 ms late; discovery-hangs: discovery answered 15 s late.
export type Misbehaviour = TokenMisbehaviour | 'none' | 'unavailable' | 'jwks-unavailable' | 'jwks-not-a-set' | 'jwks-not-json' | 'no-jwks-uri' | 'jwks-uri-https'
  | 'no-userinfo' | 'token-endpoint-http' | 'token-without-type' | 'userinfo-fails' | 'slow' | 'discovery-hangs';
type TokenMisbehaviour = 'wrong-nonce' | 'wrong-aud' | 'expired' | 'unknown-kid' | 'rotated-key' | 'alg-none' | 'hs256' | 'email-in-id-token' | 'hd' | 'hd-not-a-string'
  | 'forged-signature' | 'garbled' | 'crit';
const TOKEN_MISBEHAVIOURS = new Set<Misbehaviour>([
  'wrong-nonce', 'wrong-aud', 'expired', 'unknown-kid', 'rotated-key', 'alg-none', 'hs256', 'email-in-id-token', 'hd', 'hd-not-a-string', 'forged-signature', 'garbled', 'crit',
]);
export const DISCOVERY_PATH = '/.well-known/openid-configuration';

export interface TestProvider {
  issuer: string;
  clientId: string;
  clientSecret: string;
  users: Map<string, ProviderUser>;
  misbehave(how: Misbehaviour): void;
  /** Times the gateway fetched the key set. */
  jwksFetches(): number;
  /** The headers of each request for `path` (DISCOVERY_PATH, /jwks, /me: UserInfo), oldest first. */
  requests(path: string): Array<Record<string, string | string[] | undefined>>;
  close(): Promise<void>;
}

async function signingKey(kid: string): Promise<{ privateJwk: JWK; publicJwk: JWK }> {
  const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
  const meta = { kid, alg: 'RS256', use: 'sig' };
  return { privateJwk: { ...(await exportJWK(privateKey)), ...meta }, publicJwk: { ...(await exportJWK(publicKey)), ...meta } };
}

/**
 * Starts the provider; `redirectUris` are the gateway callbacks its client may return to
 * ({publicUrl}/api/v1/auth/oidc/{name}/callback).
 */
export async function startTestProvider(
  redirectUris: string[], options: { clientId?: string; clientSecret?: string; tls?: { cert: string; key: string } } = {},
): Promise<TestProvider> {
  const clientId = options.clientId ?? 'gateway-test';
  const clientSecret = options.clientSecret ?? 'a-test-client-secret-for-the-gateway';
  const server = options.tls ? https.createServer(options.tls) : http.createServer();
  const plain = options.tls ? http.createServer() : undefined;
  const servers = plain ? [server, plain] : [server];
  await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve))));
  const portOf = (s: http.Server | https.Server) => (s.address() as AddressInfo).port;
  const issuer = `${options.tls ? 'https' : 'http'}://127.0.0.1:${portOf(server)}`;
  const users = new Map<string, ProviderUser>();
  const [published, rotated, unpublished] = await Promise.all([signingKey('k1'), signingKey('k2'), signingKey('never-published')]);
  let misbehaviour: Misbehaviour = 'none';
  let fetches = 0;
  const seen = new Map<string, Array<Record<string, string | string[] | undefined>>>();

  const provider = new Provider(issuer, {
    clients: [{ client_id: clientId, client_secret: clientSecret, redirect_uris: redirectUris, grant_types: ['authorization_code'], response_types: ['code'] }],
    jwks: { keys: [published.privateJwk] },
    claims: { openid: ['sub'], email: ['email', 'email_verified'] },
    cookies: { keys: ['test-provider-cookie-key-0123456789'] },
    pkce: { required: () => true },
    findAccount: (_ctx, sub) => {
      const user = users.get(sub);
      return user ? { accountId: sub, claims: () => ({ sub, ...user }) } : undefined;
    },
  });
  // Its own warnings about development settings (dev interactions, in-memory storage) say nothing here.
  provider.on('server_error', (_ctx, err) => console.error('test provider error', err));

  provider.use(async (ctx, next) => {
    seen.set(ctx.path, [...seen.get(ctx.path) ?? [], { ...ctx.headers }]);
    if (misbehaviour === 'unavailable' || (misbehaviour === 'userinfo-fails' && ctx.path === '/me')) {
      ctx.status = misbehaviour === 'unavailable' ? 503 : 500;
      ctx.body = 'down for maintenance';
      return;
    }
    if (misbehaviour === 'slow' && (ctx.path === DISCOVERY_PATH || ctx.path === '/jwks')) await new Promise((resolve) => setTimeout(resolve, 300));
    if (misbehaviour === 'discovery-hangs' && ctx.path === DISCOVERY_PATH) await new Promise((resolve) => setTimeout(resolve, 15_000).unref());
    await next();
    if (ctx.path === DISCOVERY_PATH) misdescribed(ctx.body as Record<string, unknown>);
    if (ctx.path === '/jwks') {
      fetches++;
      if (misbehaviour === 'rotated-key') ctx.body = { keys: [published.publicJwk, rotated.publicJwk] };
      if (misbehaviour === 'jwks-unavailable') ctx.status = 503;
      if (misbehaviour === 'jwks-not-a-set') ctx.body = { keys: 'none' };
      if (misbehaviour === 'jwks-not-json') ctx.body = '{"keys": [';
    }
    const body = ctx.body as { id_token?: string; token_type?: string } | undefined;
    if (ctx.path === '/token' && misbehaviour === 'token-without-type') delete body?.token_type;
    if (ctx.path === '/token' && body?.id_token && TOKEN_MISBEHAVIOURS.has(misbehaviour)) body.id_token = await misissued(body.id_token);
  });
  /** The discovery document as misbehaviour has it. */
  function misdescribed(doc: Record<string, unknown>): void {
    if (misbehaviour === 'no-jwks-uri') delete doc.jwks_uri;
    if (misbehaviour === 'jwks-uri-https') doc.jwks_uri = String(doc.jwks_uri).replace(/^http:/, 'https:');
    if (misbehaviour === 'no-userinfo') delete doc.userinfo_endpoint;
    if (misbehaviour === 'token-endpoint-http' && plain) doc.token_endpoint = `http://127.0.0.1:${portOf(plain)}/token`;
  }
  /** The ID token as misbehaviour has it. */
  async function misissued(idToken: string): Promise<string> {
    const claims = decodeJwt(idToken);
    const now = Math.floor(Date.now() / 1000);
    if (misbehaviour === 'wrong-nonce') claims.nonce = 'a-nonce-from-another-sign-in';
    if (misbehaviour === 'wrong-aud') claims.aud = 'another-client';
    if (misbehaviour === 'expired') Object.assign(claims, { iat: now - 3600, exp: now - 600 });
    if (misbehaviour === 'email-in-id-token') Object.assign(claims, users.get(String(claims.sub)));
    if (misbehaviour === 'hd') claims.hd = 'corp.test';
    if (misbehaviour === 'hd-not-a-string') claims.hd = ['corp.test'];
    const key = misbehaviour === 'unknown-kid' || misbehaviour === 'forged-signature' ? unpublished : misbehaviour === 'rotated-key' ? rotated : published;
    if (misbehaviour === 'alg-none') return new UnsecuredJWT(claims).encode();
    const part = (value: unknown) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');
    // Refused before any signature is checked: the signature's part is any text.
    if (misbehaviour === 'garbled') return `${part('not json')}.${part(claims)}.c2ln`;
    if (misbehaviour === 'crit') return `${part({ alg: 'RS256', kid: published.privateJwk.kid, crit: ['x-ext'], 'x-ext': 1 })}.${part(claims)}.c2ln`;
    if (misbehaviour === 'hs256') return new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).sign(new TextEncoder().encode(clientSecret));
    const kid = misbehaviour === 'forged-signature' ? published.privateJwk.kid! : key.privateJwk.kid!;
    return new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid }).sign(key.privateJwk);
  }
  for (const s of servers) s.on('request', provider.callback());

  return {
    issuer,
    clientId,
    clientSecret,
    users,
    misbehave: (how) => { misbehaviour = how; },
    jwksFetches: () => fetches,
    requests: (path) => seen.get(path) ?? [],
    close: async () => {
      await Promise.all(servers.map((s) => new Promise<void>((resolve) => {
        s.closeAllConnections();
        s.close(() => resolve());
      })));
    },
  };
}

/**
 * Signs in at the provider as a client program would drive a browser: follows its redirects with
 * its cookies, submits its login form (as `login`) and its consent form, and stops at the first
 * redirect that leaves the provider (the gateway's callback, with code or error). Returns that URL.
 */
export async function signInAtProvider(authorizationUrl: string, login: string): Promise<URL> {
  const origin = new URL(authorizationUrl).origin;
  const jar = new Map<string, string>();
  const cookie = () => [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
  let url = new URL(authorizationUrl);
  let form: URLSearchParams | undefined;
  for (let step = 0; step < 20; step++) {
    const res = await fetch(url, {
      method: form ? 'POST' : 'GET',
      redirect: 'manual',
      headers: { cookie: cookie(), ...(form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}) },
      body: form?.toString(),
    });
    form = undefined;
    for (const set of res.headers.getSetCookie()) {
      const [pair] = set.split(';');
      const [name, ...value] = pair!.split('=');
      jar.set(name!.trim(), value.join('='));
    }
    const location = res.headers.get('location');
    if (res.status >= 300 && res.status < 400 && location) {
      url = new URL(location, url);
      if (url.origin !== origin) return url;
      continue;
    }
    const html = await res.text();
    const action = /<form[^>]*action="([^"]+)"/.exec(html)?.[1];
    const prompt = /name="prompt" value="(\w+)"/.exec(html)?.[1];
    if (res.status !== 200 || !action || !prompt) throw new Error(`the provider answered ${res.status} at ${url.pathname}: ${html.slice(0, 300)}`);
    url = new URL(action.replaceAll('&amp;', '&'), url);
    form = new URLSearchParams(prompt === 'login' ? { prompt, login, password: 'not checked' } : { prompt });
  }
  throw new Error('the provider never sent the browser back');
}
