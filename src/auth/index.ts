// The account system's one door (docs/architecture.md): the routes under /api/v1/auth, registered
// once with every feature switch inside (CONTRACT §14: a feature absent from the configuration has
// no endpoints), and what the rest of the gateway uses of auth. Grouped by feature behind it:
// password/ (register, login, refresh, logout, password and email changes), mfa/ (TOTP, the
// factor guard), passkeys/, links/ (reset, verification and sign-in links), providers/ (OpenID
// Connect and GitHub behind one interface); signIn.ts is the state machine every way in shares.
import type { FastifyInstance } from 'fastify';
import rateLimit, { type RateLimitPluginOptions } from '@fastify/rate-limit';
import type { Audit } from '../audit.js';
import type { Config } from '../config/schema.js';
import type { Tokens } from '../credentials/tokens.js';
import type { Database } from '../storage/db.js';
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
import { OidcProviders } from './providers/oidc.js';
import { oidcCallbackRoute, oidcRoutes } from './providers/routes.js';

export {
  createApiKey, createNamedKey, revokeApiKeys, revokeKeyAsOperator, revokeLeakedKeys, revokeNamedKey, rollNamedKey, type ApiKeyDeps, type NamedKeyRequest,
} from './apiKeys.js';
export { refuseCredentials } from './credentials.js';
export { MailQueue, type Mailer } from './mail.js';
export { makeLink } from './links/links.js';
export { factorGuard, passwordConfirmed, type FactorGuardDeps } from './mfa/factor.js';
export { isTooLong, Passwords } from './password/passwords.js';
export { DearestImportedHash } from './password/dearestImported.js';
export { firebaseScryptHash, hashCostClass, importedHashFormat, recognisedHashFormat } from './password/importedHashes.js';
export { createTotp, type Totp } from './mfa/totp.js';
export { clientOf } from './sessions.js';
export { authenticationOptions, registrationOptions, verifyAuthentication, verifyRegistration, type PasskeyOwners, type RelyingParty } from './passkeys/ceremony.js';
export { passkeyName } from './passkeys/routes.js';

// Endpoints whose answers to each field the spec and CONTRACT §19/§26 fix (an email with a control
// character is `Email invalide`, a password with one at login `Identifiants invalides`, logout
// always 200): their handlers read their fields themselves, past the unfit-text refusal.
const SPEC_FIELDS = ['register', 'login', 'refresh', 'logout', 'password/forgot', 'magic-link'].map((p) => `/api/v1/auth/${p}`);

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
}

/** What the rest of the public listener learns of the registered features. */
export interface AuthFeatures {
  /** The issuer of a configured identity provider (linked identities), or undefined. */
  issuerOf(name: string): string | undefined;
  oidc: boolean;
}

/** Registers /api/v1/auth/* on the public listener, each feature only when it is configured. */
export async function registerAuth(app: FastifyInstance, deps: AuthDeps): Promise<AuthFeatures> {
  const { config, db, tokens, passwords, events, audit, mailer, clock, requireUser, rateLimit: limits } = deps;
  const totp = await createTotp(db);
  const links = { db, mailer, templates: linkTemplates(config), words: deps.mailWords, clock };
  const mailConfigured = config.mail !== undefined;
  // Identity providers (CONTRACT §15): their discovery documents and keys cached per listener.
  const oidc = config.auth.oidc && new OidcProviders(config.auth.oidc);
  await app.register(async (auth) => {
    // Unfit text (CONTRACT §26) is 400 `Requête invalide`, but where the spec says otherwise: its
    // four endpoints and the two that take an email answer each field as documented themselves.
    refuseUnfitInput(auth, { readsOwnFields: SPEC_FIELDS });
    await auth.register(rateLimit, limits);
    await auth.register(authRoutes, { ...links, tokens, passwords, events, audit, auth: config.auth });
    await auth.register(accountRoutes, { ...links, tokens, passwords, events, audit, requireUser, auth: config.auth });
    await auth.register(mfaRoutes, { db, tokens, passwords, totp, clock, events, audit, requireUser, issuer: config.auth.mfa.issuer, mailConfigured });
    // Absent from the configuration: no such endpoints (404), as CONTRACT §14 says.
    if (config.auth.magicLink) await auth.register(magicLinkRoutes, { ...links, tokens, audit });
    if (config.auth.passkeys) await auth.register(passkeyRoutes, { db, tokens, clock, events, audit, requireUser, mailConfigured, relyingParty: config.auth.passkeys });
    if (oidc) await auth.register(oidcRoutes, { db, tokens, audit, clock, providers: oidc });
  }, { prefix: '/api/v1/auth' });
  // The provider's redirect back is not under the auth rate limit (CONTRACT §15): a browser
  // arrives with a single-use state, and the exchange that follows is limited.
  if (oidc) {
    await app.register(async (callback) => {
      refuseUnfitInput(callback);
      await oidcCallbackRoute(callback, { db, tokens, audit, clock, providers: oidc });
    }, { prefix: '/api/v1/auth' });
  }
  return { issuerOf: (name) => (oidc ? oidc.issuerOf(name) : undefined), oidc: oidc !== undefined };
}
