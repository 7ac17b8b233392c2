// The account system's one door (docs/architecture.md): the routes under /api/v1/auth, registered
// once with every feature switch inside (CONTRACT §14: a feature absent from the configuration has
// no endpoints), and what the rest of the gateway uses of auth. Grouped by feature behind it:
// password/ (register, login, refresh, logout, password and email changes), mfa/ (TOTP, the
// factor guard), passkeys/, links/ (reset, verification and sign-in links), providers/ (OpenID
// Connect and GitHub behind one interface, a registry of their kinds; saml/, organizations' SAML
// connections, ending in the same login code); signIn.ts is the state machine every way in shares.
import type { FastifyInstance, RouteOptions } from 'fastify';
import rateLimit, { type RateLimitPluginOptions } from '@fastify/rate-limit';
import type { Audit } from '../audit.js';
import type { Config } from '../config/schema.js';
import { portalSignedInUrl } from '../config/schema/portal.js';
import type { Tokens } from '../credentials/tokens.js';
import type { Database } from '../storage/database/index.js';
import type { Events } from '../webhooks/emitter.js';
import type { MailWords } from '../mail/index.js';
import { refuseUnfitInput } from '../listener/inputs.js';
import type { RequireUser } from '../listener/requireUser.js';
import { linkTemplates } from './links/links.js';
import type { MailQueue } from './mail.js';
import { magicLinkRoutes } from './links/magicLinkRoutes.js';
import { mfaRoutes } from './mfa/routes.js';
import { createTotp } from './mfa/totp.js';
import { passkeyRoutes } from './passkeys/routes.js';
import { accountRoutes } from './password/accountRoutes.js';
import type { Passwords } from './password/passwords.js';
import { authRoutes } from './password/routes.js';
import { SignInProviders } from './providers/configured.js';
import { providerCallbackRoute, providerRoutes } from './providers/routes.js';
import { samlRoutes } from './providers/saml/routes.js';
import type { SamlAccounts } from './providers/saml/account.js';
import { ssoGate } from './providers/saml/enforce.js';

export { refuseCredentials } from './credentials.js';
export { MailQueue, type Mailer } from './mail.js';
export { makeLink } from './links/links.js';
export { factorGuard, passwordConfirmed, secondFactorFresh, type FactorGuardDeps } from './mfa/factor.js';
export { isTooLong, Passwords } from './password/passwords.js';
export { DearestImportedHash } from './password/dearestImported.js';
export { firebaseScryptHash, hashCostClass, importedHashFormat, recognisedHashFormat } from './password/importedHashes.js';
export { createTotp, type Totp } from './mfa/totp.js';
export { clientOf, ownSession, pairAfterChange } from './sessions.js';
export { authenticationOptions, registrationOptions, verifyAuthentication, verifyRegistration, type PasskeyOwners, type RelyingParty } from './passkeys/ceremony.js';
export { passkeyName } from './passkeys/routes.js';
export { connectionView, newConnectionId, settingsOf, spUrls } from './providers/saml/connection.js';
export { MetadataRefused, parseIdpMetadata } from './providers/saml/idpMetadata.js';
export { newSpKeyPair } from './providers/saml/spKeys.js';
export { ssoGate, type SsoGate } from './providers/saml/enforce.js';
export { allowedReturnTo } from './providers/configured.js';
export type { SamlSettings } from '../storage/orgs/index.js';
export type { SamlAccountRequest, SamlAccounts } from './providers/saml/account.js';

// Endpoints whose answers to each field the spec and CONTRACT §19/§26 fix (an email with a control
// character is `Email invalide`, a password with one at login `Identifiants invalides`, logout
// always 200): their handlers read their fields themselves, past the unfit-text refusal.
export const SPEC_FIELD_ENDPOINTS = ['register', 'login', 'refresh', 'logout', 'password/forgot', 'magic-link'];
const AUTH_PREFIX = '/api/v1/auth';
const SPEC_FIELDS = SPEC_FIELD_ENDPOINTS.map((p) => `${AUTH_PREFIX}/${p}`);

export interface AuthDeps {
  config: Config;
  db: Database;
  tokens: Tokens;
  passwords: Passwords;
  events: Events;
  audit: Audit;
  mailer: MailQueue;
  /** The mails' words, in the user's language (mail/). */
  mailWords: MailWords;
  clock: () => Date;
  requireUser: RequireUser;
  /** The auth rate limit's options (listener/authRateLimit.ts), shared with /api/v1/user. */
  rateLimit: RateLimitPluginOptions;
  /** With organizations.sso: the organizations' managed accounts a SAML sign-in ends in (CONTRACT §31). */
  samlAccounts?: SamlAccounts;
}

/**
 * The sign-in endpoints the customer portal serves again under `{path}api/` (CONTRACT §30), each
 * with the body and the answers of its /api/v1/auth namesake: the portal registers these very
 * handlers (and their preHandler: password/change's bearer), so no rule of theirs is written twice.
 */
export const PORTAL_SESSION_ENDPOINTS = ['login', 'mfa/verify', 'passkeys/login/verify', 'magic-link/verify', 'oidc/exchange', 'password/change', 'refresh', 'logout'] as const;
export type PortalSessionEndpoint = (typeof PORTAL_SESSION_ENDPOINTS)[number];

/** A namesake's handler and its own preHandler, as registered under /api/v1/auth. */
export type SessionEndpoint = Pick<RouteOptions, 'handler' | 'preHandler' | 'schema'>;

/** What the rest of the public listener learns of the registered features. */
export interface AuthFeatures {
  /** The issuer of a configured identity provider (linked identities), or undefined. */
  issuerOf(name: string): string | undefined;
  oidc: boolean;
  /** The registered namesakes of PORTAL_SESSION_ENDPOINTS (a feature left out of the configuration has none). */
  sessionEndpoints: ReadonlyMap<PortalSessionEndpoint, SessionEndpoint>;
}

/** Registers /api/v1/auth/* on the public listener, each feature only when it is configured. */
export async function registerAuth(app: FastifyInstance, deps: AuthDeps): Promise<AuthFeatures> {
  const { config, db, tokens, passwords, events, audit, mailer, clock, requireUser, rateLimit: limits } = deps;
  const totp = await createTotp(db);
  // Enforcement (CONTRACT §31) exists where SAML connections do: with organizations.sso beside auth.oidc.
  const sso = config.organizations?.enabled ? config.organizations.sso : undefined;
  const ssoPublicUrl = sso && config.auth.oidc ? sso.publicUrl ?? config.auth.oidc.publicUrl : undefined;
  const gate = ssoPublicUrl === undefined ? undefined : ssoGate(db, ssoPublicUrl);
  const links = { db, mailer, templates: linkTemplates(config), words: deps.mailWords, clock, sso: gate };
  const mailConfigured = config.mail !== undefined;
  // Identity providers (CONTRACT §15): their discovery documents and keys cached per listener. The
  // portal's signed-in page counts as an entry of returnTo (CONTRACT §30).
  const signedIn = portalSignedInUrl(config.portal);
  const providers = config.auth.oidc && new SignInProviders(signedIn ? { ...config.auth.oidc, returnTo: [...config.auth.oidc.returnTo, signedIn] } : config.auth.oidc);
  // The portal's exchange is under portal.path: the sign-in cookie must reach it too.
  const providerDeps = providers && { db, tokens, audit, clock, providers, cookiePath: signedIn ? '/' : undefined, sso: gate };
  const sessionEndpoints = new Map<PortalSessionEndpoint, SessionEndpoint>();
  await app.register(async (auth) => {
    // Before any route or plugin: the handler and preHandler as declared, before the rate limit adds its hook.
    auth.addHook('onRoute', (route) => {
      const name = route.url.slice(`${AUTH_PREFIX}/`.length) as PortalSessionEndpoint;
      if (route.method === 'POST' && PORTAL_SESSION_ENDPOINTS.includes(name)) sessionEndpoints.set(name, { handler: route.handler, preHandler: route.preHandler, schema: route.schema });
    });
    // Unfit text (CONTRACT §26) is 400 `Requête invalide`, but where the spec says otherwise: its
    // four endpoints and the two that take an email answer each field as documented themselves.
    refuseUnfitInput(auth, { readsOwnFields: SPEC_FIELDS });
    await auth.register(rateLimit, limits);
    await auth.register(authRoutes, { ...links, tokens, passwords, events, audit, auth: config.auth });
    await auth.register(accountRoutes, { ...links, tokens, passwords, events, audit, requireUser, auth: config.auth });
    await auth.register(mfaRoutes, { db, tokens, passwords, totp, clock, events, audit, requireUser, issuer: config.auth.mfa.issuer, mailConfigured, sso: gate });
    // Absent from the configuration: no such endpoints (404), as CONTRACT §14 says.
    if (config.auth.magicLink) await auth.register(magicLinkRoutes, { ...links, tokens, audit });
    if (config.auth.passkeys) await auth.register(passkeyRoutes, { db, tokens, clock, events, audit, requireUser, mailConfigured, relyingParty: config.auth.passkeys, sso: gate });
    if (providerDeps) await auth.register(providerRoutes, providerDeps);
  }, { prefix: AUTH_PREFIX });
  // The provider's redirect back is not under the auth rate limit (CONTRACT §15): a browser
  // arrives with a single-use state, and the exchange that follows is limited.
  if (providerDeps) {
    await app.register(async (callback) => {
      refuseUnfitInput(callback);
      await providerCallbackRoute(callback, providerDeps);
    }, { prefix: AUTH_PREFIX });
  }
  // SAML sign-in for organizations (CONTRACT §31): not under the auth rate limit either, as the
  // callback; only with organizations.sso, which the schema allows only beside auth.oidc.
  if (providers && sso && deps.samlAccounts) {
    await app.register(async (scope) => {
      refuseUnfitInput(scope);
      await samlRoutes(scope, {
        db, audit, clock, providers, totp, publicUrl: sso.publicUrl ?? providers.settings.publicUrl, cookiePath: providerDeps?.cookiePath,
        accounts: deps.samlAccounts!, trustIdpMfa: sso.trustIdpMfa,
      });
    }, { prefix: '/api/v1/auth' });
  }
  return { issuerOf: (name) => (providers ? providers.issuerOf(name) : undefined), oidc: providers !== undefined, sessionEndpoints };
}
