// Sign in with an identity provider (CONTRACT §15), under /api/v1/auth/oidc, registered only with
// auth.oidc (without it every path answers 404):
//   GET  /{provider}/start     the browser leaves for the provider (302), a cookie binding the sign-in to it
//   GET  /{provider}/callback  the browser comes back; 302 to the application with #login_code or #error
//   POST /{provider}/callback  the same, for a provider that posts its answer back as a form (postsBack)
//   POST /exchange             the application trades the login_code and its PKCE verifier for the pair
// The browser never carries a token in a URL: only a one-time 60-second code, which is worth
// nothing without the verifier of the challenge the application gave at the start, and with
// auth.oidc.bindToBrowser without the cookie the callback set in the browser that signed in. The
// provider's tokens are checked (oidc.ts, github.ts) and dropped; the gateway issues its own (amr ["fed"]).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { randomBytes } from 'node:crypto';
import { changeAccount } from '../../account/change.js';
import type { Audit } from '../../audit.js';
import { sendDenial, sendError } from '../../errors/index.js';
import { OIDC_COOKIE } from '../../credentials/shapes.js';
import { cookieValue, mediaType, textField } from '../../http.js';
import type { Database, Queryable } from '../../storage/database/index.js';
import { identities, users } from '../../storage/accounts/index.js';
import { randomToken, sha256Hex } from '../../credentials/digest.js';
import { normalizeEmail } from '../../credentials/emailAddress.js';
import { answerOneFactorSignIn, signInByOneFactor } from '../signIn.js';
import { domainAllowed, type SignInProviders } from './configured.js';
import { flowSecrets, s256, sameSecret, SignInFailed, type Assertion, type ProviderCallback, type SignInProvider } from './signInProvider.js';
import { clientOf } from '../sessions.js';
import type { Tokens } from '../../credentials/tokens.js';
import { credentials, errors, mfaChallenge, tokenPair, type EndpointSchema } from '../../openapi.js';
import { sendSsoRequired, type SsoGate } from './saml/enforce.js';

export const FEDERATED_AMR: readonly string[] = ['fed'];

/** From the start to the callback: time to sign in at the provider. */
const STATE_TTL_MS = 10 * 60_000;
/** From the callback to the exchange: the application's page loads and posts at once. */
const LOGIN_CODE_TTL_MS = 60_000;
// RFC 7636 §4.2: S256 of a verifier is 32 bytes, 43 characters of base64url.
export const S256_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;
// RFC 7636 §4.1: a verifier is 43 to 128 unreserved characters.
const VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;
const COOKIE_PATH = '/api/v1/auth/oidc/';
const FORM = 'application/x-www-form-urlencoded';

/** Why a callback that knows its state sends the browser back with `#error=` (CONTRACT §15). */
type CallbackError = 'access_denied' | 'provider_error' | 'invalid_id_token' | 'account_exists' | 'email_unverified' | 'account_not_allowed' | 'sso_required';

export interface ProviderRoutesDeps {
  db: Database;
  tokens: Tokens;
  audit: Audit;
  clock: () => Date;
  providers: SignInProviders;
  /** Where the sign-in cookie goes: / with the portal on, whose exchange is under portal.path (CONTRACT §30); else the providers' paths. */
  cookiePath?: string;
  /** Enforcement (CONTRACT §31): absent, nothing is enforced. */
  sso?: SsoGate;
}

const PROVIDER_PARAMS = { type: 'object', required: ['provider'], properties: { provider: { type: 'string', description: 'the provider\'s name in auth.oidc.providers' } } } as const;

/** Each route's OpenAPI fragment (documentation only: src/openapi.ts), by handler. */
const DOCS = {
  start: {
    tags: ['identity providers'], summary: 'Leave for the provider (302): code flow with PKCE, the sign-in bound to the browser by a cookie; only with auth.oidc',
    params: PROVIDER_PARAMS,
    querystring: {
      type: 'object', required: ['return_to', 'code_challenge'],
      properties: {
        return_to: { type: 'string', format: 'uri', description: 'where the browser comes back (auth.oidc.returnTo)' },
        code_challenge: { type: 'string', description: 'the application\'s S256 challenge, which binds the exchange' },
      },
    },
    response: {
      302: { description: 'to the provider\'s authorization endpoint (Set-Cookie gw_oidc); to return_to#error=provider_error when the provider cannot be reached' },
      ...errors('redirectNotAllowed', 'badRequest', 'routeNotFound', 'rateLimited'),
    },
  },
  callback: {
    tags: ['identity providers'], summary: 'The provider sends the browser back here; 302 to return_to with #login_code= (60 s, single use) or #error=',
    params: PROVIDER_PARAMS,
    response: {
      302: { description: 'return_to#login_code=…, or return_to#error= access_denied, provider_error, invalid_id_token, account_exists, email_unverified, account_not_allowed or sso_required' },
      ...errors('badRequest', 'routeNotFound'),
    },
  },
  postedCallback: {
    tags: ['identity providers'], summary: 'A provider that posts its answer back (a form) sends the browser here; answered as the GET callback',
    params: PROVIDER_PARAMS,
    response: {
      302: { description: 'return_to#login_code=…, or return_to#error= as the GET callback' },
      ...errors('badRequest', 'routeNotFound', 'methodNotAllowed'),
    },
  },
  exchange: {
    tags: ['identity providers'], summary: 'Trade a login_code and the verifier of the start\'s challenge for the token pair (amr ["fed"]), or an mfa_token',
    body: credentials(['login_code', 'code_verifier']), response: { 200: tokenPair, ...errors('linkInvalid', 'rateLimited', 'storageUnavailable'), 403: mfaChallenge('ssoRequired') },
  },
} satisfies Record<string, EndpointSchema>;

/** The provider of the path, or a 404 as for any path the gateway does not serve. */
function providerOf(deps: ProviderRoutesDeps, request: FastifyRequest<{ Params: { provider: string } }>, reply: FastifyReply): SignInProvider | undefined {
  const provider = deps.providers.get(request.params.provider);
  if (!provider) sendError(reply, 'routeNotFound');
  return provider;
}

/** The sign-in cookie: HttpOnly, SameSite=Lax (the provider's redirect back is a top-level GET), Secure when the gateway is reached over https. */
function signInCookie(deps: Pick<ProviderRoutesDeps, 'providers' | 'cookiePath'>, value: string, maxAgeS: number): string {
  const secure = deps.providers.settings.publicUrl.startsWith('https:') ? '; Secure' : '';
  return `${OIDC_COOKIE}=${value}; HttpOnly; SameSite=Lax; Path=${deps.cookiePath ?? COOKIE_PATH}; Max-Age=${maxAgeS}${secure}`;
}

/** Whether login codes are bound to the browser's cookie as well as to the application's verifier (auth.oidc.bindToBrowser, CONTRACT §26). */
function boundToBrowser(deps: Pick<ProviderRoutesDeps, 'providers'>): boolean {
  return deps.providers.settings.bindToBrowser;
}

/**
 * The key a login code is stored under: its SHA-256, and with bindToBrowser that of the code and
 * the cookie the callback set beside it. A code read off the return page (a script recording
 * location.hash, a redirect that keeps the fragment) is then worth nothing from another browser,
 * even with the verifier of a challenge the attacker chose at the start (issue 45).
 */
function loginCodeKey(code: string, binding: string | undefined): string {
  return sha256Hex(binding === undefined ? code : `${code}.${binding}`);
}

/** Start and exchange: under the auth rate limit (app.ts). */
export async function providerRoutes(app: FastifyInstance, deps: ProviderRoutesDeps): Promise<void> {
  const { db, clock } = deps;

  app.get<{ Params: { provider: string }; Querystring: Record<string, unknown> }>('/oidc/:provider/start', { schema: DOCS.start }, async function start(request, reply) {
    const provider = providerOf(deps, request, reply);
    if (!provider) return reply;
    const query = new URLSearchParams(request.context.query ?? '');
    const returnTo = deps.providers.allowedReturnTo(query.get('return_to') ?? '');
    if (!returnTo) return sendError(reply, 'redirectNotAllowed');
    const challenge = query.get('code_challenge') ?? '';
    const method = query.get('code_challenge_method') ?? 'S256';
    if (!S256_CHALLENGE.test(challenge) || method !== 'S256') return sendError(reply, 'badRequest');
    const browserSecret = randomToken(32);
    const secrets = flowSecrets(browserSecret);
    let location: string;
    try {
      location = await provider.authorizationUrl(secrets);
    } catch (err) {
      if (!(err instanceof SignInFailed)) throw err;
      request.log.warn({ provider: provider.name, reason: err.message }, 'identity provider unavailable');
      return backToApplication(reply, returnTo, { error: err.code });
    }
    const now = clock();
    await identities.createState(db, sha256Hex(secrets.state), { provider: provider.name, return_to: returnTo, app_challenge: challenge }, now, new Date(now.getTime() + STATE_TTL_MS));
    reply.header('set-cookie', signInCookie(deps, browserSecret, STATE_TTL_MS / 1000));
    reply.header('cache-control', 'no-store');
    return reply.redirect(location, 302);
  });

  app.post('/oidc/exchange', { schema: DOCS.exchange }, async function exchange(request, reply) {
    const code = textField(request.body, 'login_code').trim();
    const verifier = textField(request.body, 'code_verifier');
    if (!code || !VERIFIER.test(verifier)) return sendError(reply, 'linkInvalid');
    const binding = boundToBrowser(deps) ? cookieValue(request.headers, OIDC_COOKIE) : undefined;
    if (boundToBrowser(deps) && !binding) return sendError(reply, 'linkInvalid');
    const hash = loginCodeKey(code, binding);
    const client = clientOf(request);
    const holder = await identities.loginCodeHolder(db, hash);
    // The user's row first (account/change.ts), then the code, used up by one conditional UPDATE:
    // of concurrent exchanges on any instance, one signs in.
    const signIn = holder === undefined ? undefined : await changeAccount(deps, { userId: holder.userId, mode: 'share' }, async ({ tx, user, now }) => {
      // A code of an enforced domain's address is good only from its organization's connection: one a
      // provider gave before enforce was turned on is refused, before the code is checked (CONTRACT §31).
      const sso = await deps.sso?.requiredFor(user.email);
      if (sso && holder.samlConnectionId !== sso.connectionId) return { sso };
      const used = await identities.useLoginCode(tx, hash, s256(verifier), now);
      if (used?.user_id !== user.id || user.is_active !== 1) return undefined;
      // The provider is one factor, as a password is: a user with TOTP still owes a code.
      return signInByOneFactor(tx, deps, user, client, now, used.origin.amr ?? FEDERATED_AMR, used.origin);
    });
    if (!signIn || holder === undefined) return sendError(reply, 'linkInvalid');
    if ('sso' in signIn) return sendSsoRequired(reply, signIn.sso);
    if (binding) reply.header('set-cookie', signInCookie(deps, '', 0));
    return answerOneFactorSignIn(request, reply, holder.userId, signIn, 'identity provider');
  });
}

/**
 * The callback: not under the auth rate limit (CONTRACT §15; the exchange is), and it answers the
 * browser, not an application. A provider comes back with a query (GET); one whose protocol posts
 * its answer back (postsBack) with a form, which this scope alone reads: everywhere else a form
 * counts as {} (listener/basics.ts), and the POST route exists only when such a provider is configured.
 */
export async function providerCallbackRoute(app: FastifyInstance, deps: ProviderRoutesDeps): Promise<void> {
  app.get<{ Params: { provider: string } }>('/oidc/:provider/callback', { schema: DOCS.callback }, async function callback(request, reply) {
    const provider = providerOf(deps, request, reply);
    if (!provider) return reply;
    return answerCallback(deps, request, reply, provider, { via: 'query', params: new URLSearchParams(request.context.query ?? '') });
  });
  if (!deps.providers.anyPostsBack) return;
  // Fields as strings, so that the unfit-input check (listener/inputs.ts) reads each of them.
  app.addContentTypeParser(FORM, { parseAs: 'string' }, (_request, body, done) => done(null, Object.fromEntries(new URLSearchParams(body as string))));
  app.post<{ Params: { provider: string } }>('/oidc/:provider/callback', { schema: DOCS.postedCallback }, async function postedCallback(request, reply) {
    const provider = providerOf(deps, request, reply);
    if (!provider) return reply;
    // A provider that redirects: as where no POST route exists (the pipeline's 405 for an own path).
    if (!provider.postsBack) return sendDenial(reply, { code: 'methodNotAllowed', headers: { allow: 'GET, HEAD' } });
    const posted = mediaType(request.headers['content-type']) === FORM;
    return answerCallback(deps, request, reply, provider, { via: 'form', params: new URLSearchParams(posted ? request.body as Record<string, string> : {}) });
  });
}

/** What the provider sent back, for the state this browser's cookie derives: 302 to the application with a login code, or why not. */
async function answerCallback(deps: ProviderRoutesDeps, request: FastifyRequest, reply: FastifyReply, provider: SignInProvider, answer: ProviderCallback): Promise<FastifyReply> {
  const { db, audit, clock } = deps;
  const browserSecret = cookieValue(request.headers, OIDC_COOKIE);
  const secrets = browserSecret ? flowSecrets(browserSecret) : undefined;
  const state = answer.params.get('state') ?? '';
  // The state must be the one this browser's cookie derives (a state from another browser, or a
  // forged callback, has no cookie to match), and unused: the row is used up here, once, on any
  // instance. Until then nothing says where to send the browser: a plain JSON 400.
  const started = secrets && sameSecret(state, secrets.state) ? await identities.useState(db, sha256Hex(state), provider.name, clock()) : undefined;
  if (!secrets || !started) {
    request.log.info({ provider: provider.name, cookie: Boolean(secrets) }, 'identity provider callback without a valid state');
    return sendError(reply, 'badRequest');
  }
  reply.header('set-cookie', signInCookie(deps, '', 0));
  let assertion: Assertion;
  try {
    assertion = await provider.signIn(answer, secrets);
  } catch (err) {
    if (!(err instanceof SignInFailed)) throw err;
    request.log.info({ provider: provider.name, code: err.code, reason: err.message }, 'identity provider sign-in refused');
    return backToApplication(reply, started.return_to, { error: err.code });
  }
  // An address of an enforced domain signs in through its organization (CONTRACT §31): the asserted
  // one before any account is made or linked, then the address of the account it signs in to.
  const enforced = async (email: string | undefined) => (await deps.sso?.requiredFor(email === undefined ? undefined : normalizeEmail(email))) !== undefined;
  let outcome: number | CallbackError = await enforced(assertion.email) ? 'sso_required' : await accountOf(db, audit, provider, assertion, clientOf(request), clock);
  if (typeof outcome === 'number' && await enforced((await users.findById(db, outcome))?.email)) outcome = 'sso_required';
  if (typeof outcome === 'string') {
    request.log.info({ provider: provider.name, code: outcome }, 'identity provider sign-in refused');
    return backToApplication(reply, started.return_to, { error: outcome });
  }
  return handOver(deps, reply, { returnTo: started.return_to, userId: outcome, challenge: started.app_challenge });
}

/** Who signed in, and where the login code goes: the application's return_to and its start's challenge. */
export interface HandOver {
  returnTo: string;
  userId: number;
  challenge: string;
  /** Set when the sign-in is not a configured provider's (saml: the method, its amr, its connection). */
  origin?: identities.LoginCodeOrigin;
}

/**
 * 302 to the application with a one-time login code for the exchange (60 s), and with
 * bindToBrowser the cookie the exchange must carry (CONTRACT §26): the end of every federated
 * sign-in, a provider's callback and a SAML ACS alike (CONTRACT §31).
 */
export async function handOver(deps: Pick<ProviderRoutesDeps, 'db' | 'clock' | 'providers' | 'cookiePath'>, reply: FastifyReply, to: HandOver): Promise<FastifyReply> {
  const loginCode = randomBytes(32).toString('base64url');
  const binding = boundToBrowser(deps) ? randomToken(32) : undefined;
  // Set anew for the code's 60 s, in place of any clearing before (set-cookie headers add up).
  if (binding) reply.removeHeader('set-cookie').header('set-cookie', signInCookie(deps, binding, LOGIN_CODE_TTL_MS / 1000));
  const now = deps.clock();
  await identities.createLoginCode(deps.db, loginCodeKey(loginCode, binding), to.userId, to.challenge, now, new Date(now.getTime() + LOGIN_CODE_TTL_MS), to.origin);
  return backToApplication(reply, to.returnTo, { login_code: loginCode });
}

/** 302 to the application with the outcome in the fragment, which browsers never send to a server. */
export function backToApplication(reply: FastifyReply, returnTo: string, fragment: Record<string, string>): FastifyReply {
  reply.header('cache-control', 'no-store');
  reply.header('referrer-policy', 'no-referrer');
  return reply.redirect(`${returnTo}#${new URLSearchParams(fragment).toString()}`, 302);
}

/**
 * The account the provider's user signs in to (CONTRACT §15, §26): the one linked to (issuer,
 * subject); else, for an address of the provider's emailDomains, the account of the same email,
 * linked now only when the provider is trusted with addresses (trustEmail), says this one is
 * verified, and the account's is too (no silent takeover); else a new account without a password,
 * if the provider may sign up. Or why not.
 */
async function accountOf(db: Database, audit: Audit, provider: SignInProvider, asserted: Assertion, client: ReturnType<typeof clientOf>, clock: () => Date): Promise<number | CallbackError> {
  const { name, settings } = provider;
  // A provider not trusted with addresses vouches for none: its "verified" counts as not.
  const who = { ...asserted, emailVerified: asserted.emailVerified && settings.trustEmail };
  const record = (tx: Queryable, type: 'user.registered' | 'oidc.linked' | 'email.verified', userId: number) =>
    audit.record({ type, actor: 'user', userId, ...client, data: type === 'oidc.linked' ? { provider: name, issuer: who.issuer } : {} }, tx);
  const email = who.email === undefined ? undefined : normalizeEmail(who.email);
  // Vouched: the provider says the address is verified (for a link made now, the account's address is its).
  const link = { provider: name, issuer: who.issuer, subject: who.subject, email: email ?? null, vouched: who.emailVerified };

  const linked = await identities.findLink(db, who.issuer, who.subject);
  if (linked) {
    // No such user any more: its links went with it, nothing to touch.
    await changeAccount({ db, audit, clock }, { userId: linked.user_id, mode: 'update' }, async ({ tx, user, now }) => {
      await identities.touchLink(tx, { ...link, vouched: link.vouched && email === user.email });
      // The provider vouches for the address of an account it signs in to.
      if (email === user.email && who.emailVerified && !user.email_verified_at && (await users.markEmailVerified(tx, user.id, email, now))) await record(tx, 'email.verified', user.id);
    });
    return linked.user_id;
  }
  // No address, or one no account could have: nothing to create an account for.
  if (!email) return 'email_unverified';
  if (!domainAllowed(settings, email, who.hostedDomain)) return 'account_not_allowed';
  const existing = await users.findByEmail(db, email);
  if (existing) {
    if (!who.emailVerified || !existing.email_verified_at) return 'account_exists';
    const outcome = await changeAccount({ db, audit, clock }, { userId: existing.id, mode: 'update' }, async ({ tx, user, now }) => {
      if (user.email !== email || !user.email_verified_at) return 'account_exists';
      if (!(await identities.insertLink(tx, user.id, link, now))) return (await identities.findLink(tx, who.issuer, who.subject))?.user_id ?? 'account_exists';
      await record(tx, 'oidc.linked', user.id);
      return user.id;
    });
    return outcome ?? 'account_exists';
  }
  if (!settings.allowSignUp) return 'account_not_allowed';
  const created = await users.createUser(db, email, null, async (tx, id) => {
    if (who.emailVerified) await users.markEmailVerified(tx, id, email, clock());
    if (!(await identities.insertLink(tx, id, link, clock()))) throw new LinkedMeanwhile();
    await record(tx, 'user.registered', id);
    await record(tx, 'oidc.linked', id);
  }).catch((err: unknown) => {
    if (err instanceof LinkedMeanwhile) return null;
    throw err;
  });
  // A sign-in of the same user in another tab made the account (or the link) first: use it.
  return created ?? (await identities.findLink(db, who.issuer, who.subject))?.user_id ?? 'account_exists';
}

/** The same (issuer, subject) was linked by a concurrent sign-in: the new account is rolled back. */
class LinkedMeanwhile extends Error {}
