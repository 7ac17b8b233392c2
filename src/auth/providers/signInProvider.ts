// What every identity provider is to the sign-in routes (routes.ts, CONTRACT §15, §26): an
// authorization URL for a sign-in, and from what the callback carried (its query, or the form a
// provider posts back) who the user is. OpenID Connect providers (oidc.ts) and GitHub (github.ts)
// implement it; the registry (registry.ts) maps each `kind` to its constructor, and nothing else
// branches on it, so that every provider follows the same linking rules (trustEmail,
// emailDomains, allowSignUp) through the same code.
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { Config } from '../../config/schema.js';

/** auth.oidc: every configured provider, whatever its kind (the key keeps the first kind's name: it is public). */
export type ProvidersSettings = NonNullable<Config['auth']['oidc']>;
export type ProviderSettings = ProvidersSettings['providers'][string];

/** What a provider asserted about the user, once every check passed. */
export interface Assertion {
  issuer: string;
  subject: string;
  /** As the provider sent it (not yet normalized), or undefined. */
  email: string | undefined;
  emailVerified: boolean;
  /** Google's `hd` claim: the Workspace domain of the account, if any. */
  hostedDomain: string | undefined;
}

/** How a sign-in at the provider failed, as the application reads it in `#error=` (CONTRACT §15). */
export type ProviderFailure = 'access_denied' | 'provider_error' | 'invalid_id_token';

/** A failure with its code for the application, and a cause for the log (never a token). */
export class SignInFailed extends Error {
  constructor(readonly code: ProviderFailure, reason: string) {
    super(reason);
    this.name = 'SignInFailed';
  }
}

/** What a start hands the provider and its callback needs again, all derived from the browser's secret. */
export interface FlowSecrets {
  state: string;
  nonce: string;
  /** The gateway's own PKCE verifier with the provider (not the application's). */
  verifier: string;
}

/**
 * What the provider sent the browser back with: the callback's query (a redirect, GET), or the
 * form it posted (POST, application/x-www-form-urlencoded), for a provider whose protocol posts
 * its answer back (SAML's HTTP-POST binding).
 */
export interface ProviderCallback {
  readonly via: 'query' | 'form';
  readonly params: URLSearchParams;
}

/** One configured provider, whatever its kind. */
export interface SignInProvider {
  readonly name: string;
  readonly settings: ProviderSettings;
  /**
   * Whether the provider's answer may come as a posted form: without it a POST to its callback
   * is answered 405, as on a gateway with no such provider (GET is its callback's one method).
   */
  readonly postsBack?: boolean;
  /** The provider's authorization URL for this sign-in; throws SignInFailed (provider_error) when it cannot be built. */
  authorizationUrl(secrets: FlowSecrets): Promise<string>;
  /** What the callback carried, checked and exchanged: who the user is; throws SignInFailed. */
  signIn(callback: ProviderCallback, secrets: FlowSecrets): Promise<Assertion>;
}

/** How long a provider's endpoint has to answer: a provider that hangs costs a sign-in, not the gateway. */
export const PROVIDER_TIMEOUT_MS = 10_000;

/**
 * The state, nonce and PKCE verifier of a sign-in, derived from a random secret only the browser's
 * cookie holds: the database keeps the state's hash alone, and the callback can rebuild them only
 * with the cookie of the browser that started.
 */
export function flowSecrets(browserSecret: string): FlowSecrets {
  const derive = (label: string) => createHmac('sha256', browserSecret).update(label).digest('base64url');
  return { state: derive('state'), nonce: derive('nonce'), verifier: derive('pkce') };
}

/** Constant-time comparison of two strings (a state against the one the cookie derives). */
export function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** RFC 7636 S256: the challenge of a verifier. */
export function s256(verifier: string): string {
  return createHash('sha256').update(verifier).digest('base64url');
}

/** The provider's answer in the callback's query, when it is an error (the user declined, or the provider failed). */
export function callbackError(query: URLSearchParams): SignInFailed | undefined {
  const error = query.get('error');
  return error ? new SignInFailed(error === 'access_denied' ? 'access_denied' : 'provider_error', `the provider answered ${error}`) : undefined;
}

/**
 * The text of a thrown value for the operator's log. fetch's own failure says only "fetch failed"
 * (a TypeError): the cause it wraps is what an operator needs (a connection refused, a name not
 * found, a certificate refused), added by its code and message (only its code for the
 * AggregateError of a connection tried on several addresses, which has no message). Only an Error
 * cause is read, never a request or an answer: no secret or token is in it.
 */
export function reasonOf(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const { cause } = err;
  if (!(err instanceof TypeError) || !(cause instanceof Error)) return err.message;
  const code = (cause as { code?: unknown }).code;
  const named = typeof code === 'string' && !cause.message.includes(code) ? [code] : [];
  const detail = [...named, cause.message].filter(Boolean).join(': ');
  return detail ? `${err.message} (${detail})` : err.message;
}
