// The gateway as an OpenID Connect client (CONTRACT §15), one per configured provider, with
// openid-client: discovery, the authorization URL (code flow, PKCE S256), the code exchange and
// the ID token's claims (iss, aud, azp, exp, iat, nonce). The signature is checked here too, with
// jose, against the provider's JWKS: openid-client skips it for a token that came straight from the
// token endpoint over TLS, and the contract asks for it. Discovery documents and key sets are cached
// per instance; a key id the cached set lacks makes one refetch (the provider rotated its keys).
// The provider's tokens never leave this file: callers get who the user is, nothing else.
import { createLocalJWKSet, errors as joseErrors, jwtVerify, type JSONWebKeySet } from 'jose';
import * as client from 'openid-client';
import {
  callbackError, PROVIDER_TIMEOUT_MS, reasonOf, s256, SignInFailed, type Assertion, type FlowSecrets, type ProviderCallback, type ProviderSettings, type SignInProvider,
} from './signInProvider.js';

// Kept importable from here: the tests' PKCE helper.
export { s256 } from './signInProvider.js';

type OidcProviderSettings = Extract<ProviderSettings, { kind: 'oidc' }>;

// How long a discovery document and a key set are trusted before they are fetched again; a key id
// the set lacks is fetched at once. A provider that cannot be reached answers within this.
const DISCOVERY_TTL_MS = 60 * 60_000;
const JWKS_TTL_MS = 10 * 60_000;
// The ID token checks of openid-client whose failure is the token's fault, not the provider's availability.
const ID_TOKEN_CHECKS = new Set<unknown>(['OAUTH_JWT_CLAIM_COMPARISON_FAILED', 'OAUTH_JWT_TIMESTAMP_CHECK_FAILED']);
// Its other refusals of the token response's JWT (an `alg` the provider's metadata does not offer,
// `none` included; no JWT at all; a `crit` header) share their codes with refusals of the rest of
// the response, and each names the JWT in its message (oauth4webapi's, kept as the error's cause).
const JWT_SHAPE_CHECKS = new Set<unknown>(['OAUTH_INVALID_RESPONSE', 'OAUTH_PARSE_ERROR', 'OAUTH_UNSUPPORTED_OPERATION']);

/**
 * Whether the code exchange failed on the ID token it returned (rather than on the provider).
 * openid-client throws its own error with oauth4webapi's code, wrapping oauth4webapi's error as
 * its cause, whose message names the JWT.
 */
function isIdTokenRefusal(err: unknown): boolean {
  const { code, cause } = err as { code?: unknown; cause?: { message?: unknown } };
  return ID_TOKEN_CHECKS.has(code) || (JWT_SHAPE_CHECKS.has(code) && String(cause?.message).includes('JWT'));
}

/** One provider: its discovered configuration and its keys, cached, fetched once at a time. */
export class OidcProvider implements SignInProvider {
  private discovered: { config: client.Configuration; at: number } | undefined;
  private discovering: Promise<client.Configuration> | undefined;
  private keys: { set: JSONWebKeySet; at: number } | undefined;
  private fetchingKeys: Promise<JSONWebKeySet> | undefined;

  constructor(readonly name: string, readonly settings: OidcProviderSettings, readonly redirectUri: string) {}

  /** The provider's authorization URL for this sign-in; throws SignInFailed (provider_error) when it cannot be discovered. */
  async authorizationUrl(secrets: FlowSecrets): Promise<string> {
    const config = await this.configuration();
    return client.buildAuthorizationUrl(config, {
      redirect_uri: this.redirectUri,
      scope: this.settings.scopes.join(' '),
      state: secrets.state,
      nonce: secrets.nonce,
      code_challenge: s256(secrets.verifier),
      code_challenge_method: 'S256',
    }).href;
  }

  /**
   * The callback's query, checked: the provider's answer (an error, or a code bound to this state
   * and its issuer), the code exchanged with the PKCE verifier, the ID token's claims and signature.
   */
  async signIn(callback: ProviderCallback, secrets: FlowSecrets): Promise<Assertion> {
    const query = callback.params;
    const config = await this.configuration();
    const refused = callbackError(query);
    if (refused) throw refused;
    const current = new URL(this.redirectUri);
    current.search = query.toString();
    let tokens: Awaited<ReturnType<typeof client.authorizationCodeGrant>>;
    try {
      tokens = await client.authorizationCodeGrant(config, current, {
        pkceCodeVerifier: secrets.verifier,
        expectedState: secrets.state,
        // A string nonce makes openid-client require the ID token (its idTokenExpected): a response
        // without one is refused there, so tokens.id_token is a string below.
        expectedNonce: secrets.nonce,
      });
    } catch (err) {
      // An error answer of the provider (an `error` in the query) was refused above, before any exchange.
      throw isIdTokenRefusal(err) ? new SignInFailed('invalid_id_token', `ID token refused: ${reasonOf(err)}`) : new SignInFailed('provider_error', `code exchange failed: ${reasonOf(err)}`);
    }
    const claims = await this.verifySignature(tokens.id_token!, config);
    const subject = String(claims.sub);
    // Providers that keep ID tokens small (Okta, oidc-provider) give the email scope's claims at
    // the UserInfo endpoint only: asked there, for the same subject, with the access token, which
    // is then dropped.
    const about = typeof claims.email === 'string' ? claims : await this.userInfo(config, tokens.access_token, subject);
    const email = typeof about.email === 'string' ? about.email : undefined;
    const hostedDomain = typeof claims.hd === 'string' ? claims.hd : undefined;
    return { issuer: this.settings.issuer, subject, email, emailVerified: about.email_verified === true, hostedDomain };
  }

  private async userInfo(config: client.Configuration, accessToken: string, subject: string): Promise<Record<string, unknown>> {
    if (!config.serverMetadata().userinfo_endpoint) return {};
    try {
      return await client.fetchUserInfo(config, accessToken, subject);
    } catch (err) {
      throw new SignInFailed('provider_error', `userinfo failed: ${reasonOf(err)}`);
    }
  }

  /** The ID token's signature (and again its issuer, audience and expiry), with one refetch of the key set for a key it lacks. */
  private async verifySignature(idToken: string, config: client.Configuration): Promise<Record<string, unknown>> {
    const options = { issuer: config.serverMetadata().issuer, audience: this.settings.clientId };
    const verify = async (set: JSONWebKeySet) => (await jwtVerify(idToken, createLocalJWKSet(set), options)).payload;
    try {
      try {
        return await verify(await this.keySet(config, false));
      } catch (err) {
        if (!(err instanceof joseErrors.JWKSNoMatchingKey)) throw err;
        return await verify(await this.keySet(config, true));
      }
    } catch (err) {
      if (err instanceof SignInFailed) throw err;
      throw new SignInFailed('invalid_id_token', `ID token refused: ${reasonOf(err)}`);
    }
  }

  private async configuration(): Promise<client.Configuration> {
    if (this.discovered && Date.now() - this.discovered.at < DISCOVERY_TTL_MS) return this.discovered.config;
    this.discovering ??= (async () => {
      try {
        const { issuer, clientId, clientSecret } = this.settings;
        // http:// is allowed by the configuration on loopback hosts only (config/schema.ts).
        const insecure = issuer.startsWith('http:');
        // The secret goes to ClientSecretBasic alone: openid-client reads a client_secret in the metadata only for a
        // client authentication it is not given, and oauth4webapi never (no HS256 response is verified with it).
        const config = await client.discovery(new URL(issuer), clientId, undefined, client.ClientSecretBasic(clientSecret), {
          timeout: PROVIDER_TIMEOUT_MS / 1000,
          ...(insecure ? { execute: [client.allowInsecureRequests] } : {}),
        });
        this.discovered = { config, at: Date.now() };
        return config;
      } catch (err) {
        throw new SignInFailed('provider_error', `discovery failed: ${reasonOf(err)}`);
      } finally {
        this.discovering = undefined;
      }
    })();
    return this.discovering;
  }

  private async keySet(config: client.Configuration, refetch: boolean): Promise<JSONWebKeySet> {
    if (!refetch && this.keys && Date.now() - this.keys.at < JWKS_TTL_MS) return this.keys.set;
    // Concurrent callbacks that miss the same key share one fetch.
    this.fetchingKeys ??= (async () => {
      try {
        const uri = config.serverMetadata().jwks_uri;
        if (!uri) throw new SignInFailed('provider_error', 'the provider publishes no jwks_uri');
        if (new URL(uri).protocol !== new URL(this.settings.issuer).protocol) throw new SignInFailed('provider_error', 'the provider\'s jwks_uri is not on its issuer\'s scheme');
        const res = await fetch(uri, { signal: AbortSignal.timeout(PROVIDER_TIMEOUT_MS), redirect: 'error', headers: { accept: 'application/json' } });
        const body = res.ok ? (await res.json()) as JSONWebKeySet : undefined;
        if (!body || !Array.isArray(body.keys)) throw new SignInFailed('provider_error', `the provider's key set answered ${res.status}`);
        this.keys = { set: body, at: Date.now() };
        return body;
      } catch (err) {
        if (err instanceof SignInFailed) throw err;
        throw new SignInFailed('provider_error', `key set fetch failed: ${reasonOf(err)}`);
      } finally {
        this.fetchingKeys = undefined;
      }
    })();
    return this.fetchingKeys;
  }
}
