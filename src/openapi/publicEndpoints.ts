// The OpenAPI fragments of the public listener's own endpoints that are not given beside their
// handlers (health, keys, the catalog, auth/ and user/), found by method and path as each route is
// registered (../openapi.ts). Issue 48 moves each beside its handler; until then they are here.
import { bearer, bearerOnly, createdKey, credentials, errorOf, errors, identity, limits, message, mfaChallenge, ownKey, passkey, session, tokenPair, type EndpointSchema } from './shapes.js';

/** Each endpoint's schema, by method and path (with its prefix). */
export const PUBLIC_ENDPOINTS: Record<string, EndpointSchema> = {
  'GET /healthz': { tags: ['health'], summary: 'The process runs', response: { 200: { type: 'object', properties: { status: { const: 'ok' } } } } },
  'GET /readyz': {
    tags: ['health'], summary: 'Postgres answers and the instance is not draining; Redis is reported in checks, never a 503',
    response: {
      200: { type: 'object', properties: { status: { const: 'ok' }, checks: { type: 'object', properties: { postgres: { const: 'ok' }, redis: { enum: ['ok', 'down', 'readonly', 'off'] } } } } },
      503: { ...errorOf(['storageUnavailable']), description: 'not ready (status unavailable: Postgres down; draining): error, status and checks' },
    },
  },
  'GET /api/v1/errors': {
    tags: ['errors'], summary: 'The error catalog: code, name, status, messages by language, fields; only with errors.codes or errors.language other than fr',
    response: {
      200: {
        type: 'array',
        items: {
          type: 'object',
          properties: {
            code: { type: 'string' }, name: { type: 'string' }, status: { type: 'integer' }, messages: { type: 'object', additionalProperties: { type: 'string' } },
            fields: { type: 'array', items: { type: 'string' } },
          },
        },
      },
    },
  },
  'GET /.well-known/jwks.json': { tags: ['keys'], summary: 'The access-token public key(s); empty for HS256', response: { 200: { type: 'object', properties: { keys: { type: 'array' } } } } },
  'GET /.well-known/gateway-assertion-keys.json': {
    tags: ['keys'], summary: 'The x-gateway-assertion public keys, and only them', response: { 200: { type: 'object', properties: { keys: { type: 'array' } } } },
  },
  'POST /api/v1/auth/register': {
    tags: ['auth'], summary: 'Create an account (plan free); an optional locale (else Accept-Language) sets the language of its mails', body: credentials(['email', 'password', 'locale']),
    response: {
      201: { type: 'object', properties: { message: { type: 'string' }, user_id: { type: 'integer' } } },
      ...errors('emailInvalid', 'passwordTooShort', 'passwordTooLong', 'emailTaken', 'rateLimited', 'storageUnavailable'),
    },
  },
  'POST /api/v1/auth/login': {
    tags: ['auth'], summary: 'Log in: a new token pair, or an mfa_token for POST /api/v1/auth/mfa/verify', body: credentials(['email', 'password']),
    response: { 200: tokenPair, ...errors('loginFieldsRequired', 'invalidCredentials', 'rateLimited', 'storageUnavailable'), 403: mfaChallenge('emailNotVerified') },
  },
  'POST /api/v1/auth/mfa/totp/enroll': {
    tags: ['second factor'], summary: 'A new TOTP secret, active once confirmed', security: bearerOnly,
    response: {
      200: { type: 'object', properties: { secret: { type: 'string' }, otpauth_url: { type: 'string' } } },
      ...errors('codeInvalid', 'recentAuthRequired', 'emailUnverified', 'tokenInvalid', 'rateLimited'),
    },
  },
  'POST /api/v1/auth/mfa/totp/confirm': {
    tags: ['second factor'], summary: 'Confirm TOTP with a code: ten recovery codes, shown once; every other session ends', security: bearerOnly, body: credentials(['code']),
    response: {
      200: { type: 'object', properties: { recovery_codes: { type: 'array', items: { type: 'string' } } } },
      ...errors('codeInvalid', 'recentAuthRequired', 'emailUnverified', 'tokenInvalid', 'rateLimited'),
    },
  },
  'DELETE /api/v1/auth/mfa/totp': {
    tags: ['second factor'], summary: 'Remove TOTP and the recovery codes; every other session ends', security: bearerOnly, body: credentials(['password']),
    response: { 200: message, ...errors('invalidCredentials', 'recentAuthRequired', 'tokenInvalid', 'rateLimited') },
  },
  'POST /api/v1/auth/mfa/verify': {
    tags: ['second factor'], summary: 'A login\'s mfa_token and a TOTP or recovery code: the token pair', body: credentials(['mfa_token', 'code']),
    response: { 200: tokenPair, ...errors('codeRefused', 'rateLimited', 'storageUnavailable') },
  },
  'POST /api/v1/auth/passkeys/register/options': {
    tags: ['second factor'], summary: 'WebAuthn creation options for a new passkey (discoverable, user verification required); only with auth.passkeys', security: bearerOnly,
    response: { 200: { type: 'object', description: 'PublicKeyCredentialCreationOptionsJSON' }, ...errors('recentAuthRequired', 'emailUnverified', 'tokenInvalid', 'rateLimited') },
  },
  'POST /api/v1/auth/passkeys/register/verify': {
    tags: ['second factor'], summary: 'Register the passkey the authenticator made (RegistrationResponseJSON, optional name)', security: bearerOnly,
    body: { type: 'object', description: 'RegistrationResponseJSON, plus an optional name' },
    response: { 201: passkey, ...errors('passkeyInvalid', 'recentAuthRequired', 'emailUnverified', 'tokenInvalid', 'rateLimited') },
  },
  'POST /api/v1/auth/passkeys/login/options': {
    tags: ['second factor'], summary: 'WebAuthn request options for a passkey sign-in (discoverable: no email)',
    response: { 200: { type: 'object', description: 'PublicKeyCredentialRequestOptionsJSON' }, ...errors('rateLimited') },
  },
  'POST /api/v1/auth/passkeys/login/verify': {
    tags: ['second factor'], summary: 'Sign in with a passkey (AuthenticationResponseJSON): the token pair, amr ["hwk","user"], aal2',
    body: { type: 'object', description: 'AuthenticationResponseJSON' }, response: { 200: tokenPair, ...errors('invalidCredentials', 'rateLimited', 'storageUnavailable') },
  },
  'POST /api/v1/auth/refresh': {
    tags: ['auth'], summary: 'Rotate a refresh token: a new pair, the old token revoked', body: credentials(['refresh_token']),
    response: { 200: tokenPair, ...errors('refreshTokenMissing', 'refreshTokenUndecodable', 'refreshTokenInactive', 'userNotFound', 'rateLimited') },
  },
  'POST /api/v1/auth/logout': { tags: ['auth'], summary: 'Revoke a refresh token (always 200)', body: credentials(['refresh_token']), response: { 200: message } },
  'POST /api/v1/auth/password/change': {
    tags: ['accounts'], summary: 'Change the password: a new pair; every other session ends', security: bearer, body: credentials(['current_password', 'new_password']),
    response: { 200: tokenPair, ...errors('passwordTooShort', 'passwordTooLong', 'invalidCredentials', 'emailUnverified', 'tokenInvalid', 'rateLimited', 'storageUnavailable') },
  },
  'POST /api/v1/auth/password/forgot': {
    tags: ['accounts'], summary: 'Mail a reset link if the account exists (the same answer whatever the address)', body: credentials(['email']),
    response: { 202: message, ...errors('emailInvalid', 'rateLimited', 'mailUnavailable') },
  },
  'POST /api/v1/auth/password/reset': {
    tags: ['accounts'], summary: 'Set a new password with a reset link\'s token; every session ends', body: credentials(['token', 'new_password']),
    response: { 200: message, ...errors('linkInvalid', 'passwordTooShort', 'passwordTooLong', 'rateLimited', 'storageUnavailable') },
  },
  'POST /api/v1/auth/email/verify': {
    tags: ['accounts'], summary: 'Verify the email with a verification link\'s token', body: credentials(['token']), response: { 200: message, ...errors('linkInvalid', 'rateLimited') },
  },
  'POST /api/v1/auth/magic-link': {
    tags: ['accounts'], summary: 'Mail a 15-minute sign-in link if the account exists (the same answer whatever the address); only with auth.magicLink', body: credentials(['email']),
    response: { 202: message, ...errors('emailInvalid', 'rateLimited', 'mailUnavailable') },
  },
  'POST /api/v1/auth/magic-link/verify': {
    tags: ['accounts'], summary: 'Sign in with a sign-in link\'s token (amr ["email"]): the token pair, or an mfa_token for POST /api/v1/auth/mfa/verify', body: credentials(['token']),
    response: { 200: tokenPair, ...errors('linkInvalid', 'rateLimited', 'storageUnavailable'), 403: mfaChallenge() },
  },
  'POST /api/v1/auth/email/resend': {
    tags: ['accounts'], summary: 'Mail a new verification link (none when already verified)', security: bearer, response: { 202: message, ...errors('tokenInvalid', 'rateLimited', 'mailUnavailable') },
  },
  'GET /api/v1/user/passkeys': {
    tags: ['second factor'], summary: 'The user\'s passkeys (never a key or counter); only with auth.passkeys', security: bearer,
    response: { 200: { type: 'object', properties: { passkeys: { type: 'array', items: passkey } } }, ...errors('tokenInvalid', 'rateLimited') },
  },
  'DELETE /api/v1/user/passkeys/:id': {
    tags: ['second factor'], summary: 'Remove one of the user\'s passkeys; every other session ends', security: bearerOnly,
    params: { type: 'object', required: ['id'], properties: { id: { type: 'string', pattern: '^[1-9][0-9]*$' } } },
    response: { 200: message, ...errors('passkeyNotFound', 'recentAuthRequired', 'emailUnverified', 'tokenInvalid', 'rateLimited') },
  },
  'GET /api/v1/auth/oidc/:provider/start': {
    tags: ['identity providers'], summary: 'Leave for the provider (302): code flow with PKCE, the sign-in bound to the browser by a cookie; only with auth.oidc',
    params: { type: 'object', required: ['provider'], properties: { provider: { type: 'string', description: 'the provider\'s name in auth.oidc.providers' } } },
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
  'GET /api/v1/auth/oidc/:provider/callback': {
    tags: ['identity providers'], summary: 'The provider sends the browser back here; 302 to return_to with #login_code= (60 s, single use) or #error=',
    params: { type: 'object', required: ['provider'], properties: { provider: { type: 'string', description: 'the provider\'s name in auth.oidc.providers' } } },
    response: {
      302: { description: 'return_to#login_code=…, or return_to#error= access_denied, provider_error, invalid_id_token, account_exists, email_unverified or account_not_allowed' },
      ...errors('badRequest', 'routeNotFound'),
    },
  },
  'POST /api/v1/auth/oidc/exchange': {
    tags: ['identity providers'], summary: 'Trade a login_code and the verifier of the start\'s challenge for the token pair (amr ["fed"]), or an mfa_token',
    body: credentials(['login_code', 'code_verifier']), response: { 200: tokenPair, ...errors('linkInvalid', 'rateLimited', 'storageUnavailable'), 403: mfaChallenge() },
  },
  'GET /api/v1/user/identities': {
    tags: ['identity providers'], summary: 'The providers linked to the account; only with auth.oidc', security: bearer,
    response: { 200: { type: 'object', properties: { identities: { type: 'array', items: identity } } }, ...errors('tokenInvalid', 'rateLimited') },
  },
  'DELETE /api/v1/user/identities/:provider': {
    tags: ['identity providers'], summary: 'Unlink a provider, unless it is the last way to sign in', security: bearerOnly,
    params: { type: 'object', required: ['provider'], properties: { provider: { type: 'string', description: 'the provider\'s name in auth.oidc.providers' } } },
    response: { 200: message, ...errors('providerNotLinked', 'lastSignInMethod', 'recentAuthRequired', 'emailUnverified', 'tokenInvalid', 'rateLimited') },
  },
  'GET /api/v1/user/sessions': {
    tags: ['accounts'], summary: 'The active sessions (one per login), most recently used first', security: bearer,
    response: { 200: { type: 'object', properties: { sessions: { type: 'array', items: session } } }, ...errors('tokenInvalid', 'rateLimited') },
  },
  'DELETE /api/v1/user/sessions/:id': {
    tags: ['accounts'], summary: 'End one of the user\'s sessions', security: bearer, params: { type: 'object', required: ['id'], properties: { id: { type: 'string', pattern: '^[1-9][0-9]*$' } } },
    response: { 200: message, ...errors('sessionNotFound', 'tokenInvalid', 'rateLimited') },
  },
  'DELETE /api/v1/user/me': {
    tags: ['accounts'],
    summary: 'Delete the account and everything of it; the email is free again. The last owner of an organization is refused (409, with orgs: [{id, name}]) until they hand it over or delete it',
    security: bearer, body: credentials(['password']),
    response: { 200: message, ...errors('invalidCredentials', 'lastOwner', 'tokenInvalid', 'rateLimited', 'storageUnavailable', 'paymentUnavailable') },
  },
  'GET /api/v1/user/me': {
    tags: ['user'], summary: 'The signed-in user, with the plan\'s limits and what is left today', security: bearer,
    response: {
      200: {
        type: 'object',
        properties: {
          user_id: { type: 'integer' }, email: { type: 'string' }, plan: { type: 'string' }, daily_usage: { type: 'integer' }, last_usage_date: { type: ['string', 'null'] }, limits,
          daily_remaining: { type: ['integer', 'null'] }, monthly_usage: { type: 'integer' }, monthly_remaining: { type: ['integer', 'null'] },
          monthly_overage: { type: 'integer', description: 'With metered overage only: the uses past the included allowance' }, email_verified_at: { type: ['string', 'null'], format: 'date-time' },
          locale: { type: 'string', description: 'The language of the user\'s mails; absent until chosen' },
          orgs: {
            type: 'array', items: { type: 'object', properties: { id: { type: 'integer' }, name: { type: 'string' }, plan: { type: 'string' }, role: { enum: ['owner', 'admin', 'member'] } } },
            description: 'With organizations.enabled only: the user\'s organizations and role in each',
          },
        },
      },
      ...errors('tokenInvalid', 'userNotFound'),
    },
  },
  'PATCH /api/v1/user/me': {
    tags: ['user'], summary: 'Choose the language of the user\'s mails (a language the gateway has texts for; en-GB reads as en; null forgets it)', security: bearer,
    body: { type: 'object', properties: { locale: { type: ['string', 'null'], examples: ['en'] } }, description: 'JSON; a missing or non-JSON body reads as {}' },
    response: {
      200: { type: 'object', required: ['message', 'locale'], properties: { message: { type: 'string' }, locale: { type: ['string', 'null'] } } },
      ...errors('localeUnsupported', 'tokenInvalid', 'userNotFound'),
    },
  },
  'POST /api/v1/user/api-keys': {
    tags: ['user'], summary: 'A new named API key (apiKeys.plans), with optional scopes and expiry; the key is shown only here', security: bearerOnly,
    body: {
      type: 'object', required: ['name'],
      properties: {
        name: { type: 'string', minLength: 1, maxLength: 64 }, scopes: { type: ['array', 'null'], items: { type: 'string' }, minItems: 1 },
        expires_at: { type: ['string', 'null'], format: 'date-time' },
      },
    },
    response: { 201: createdKey, ...errors('badRequest', 'scopeUnknown', 'apiKeyLimitReached', 'apiKeyNotAccepted', 'tokenInvalid', 'planInsufficient') },
  },
  'GET /api/v1/user/api-keys': {
    tags: ['user'], summary: 'The user\'s keys that are not revoked (never a key or its hash); the section 4 key is named default', security: bearerOnly,
    response: { 200: { type: 'object', properties: { api_keys: { type: 'array', items: ownKey } } }, ...errors('apiKeyNotAccepted', 'tokenInvalid') },
  },
  'DELETE /api/v1/user/api-keys/:id': {
    tags: ['user'], summary: 'Revoke one of the user\'s keys', security: bearerOnly, params: { type: 'object', required: ['id'], properties: { id: { type: 'string', pattern: '^[1-9][0-9]*$' } } },
    response: { 200: message, ...errors('apiKeyNotFound', 'apiKeyNotAccepted', 'tokenInvalid') },
  },
  'POST /api/v1/user/api-token': {
    tags: ['user'], summary: 'A new personal API key (pro); the earlier one is revoked; shown once', security: bearer,
    response: { 201: { type: 'object', properties: { api_token: { type: 'string' }, created_at: { type: 'string', format: 'date-time' } } }, ...errors('tokenInvalid', 'planInsufficient') },
  },
  'DELETE /api/v1/user/api-token': {
    tags: ['user'], summary: 'Revoke every API key of the user (pro); idempotent', security: bearer, response: { 200: message, ...errors('tokenInvalid', 'planInsufficient') },
  },
  'POST /api/v1/user/webhook': {
    tags: ['user'], summary: 'Register the alert webhook (pro), replacing any earlier one', security: bearer, body: { type: 'object', properties: { url: { type: 'string', format: 'uri' } } },
    response: {
      201: { type: 'object', properties: { url: { type: 'string' }, secret: { type: 'string', description: 'whsec_<base64>' } } },
      ...errors('webhookUrlInvalid', 'webhookUrlForbidden', 'tokenInvalid', 'planInsufficient'),
    },
  },
  'DELETE /api/v1/user/webhook': { tags: ['user'], summary: 'Remove the alert webhook (pro); idempotent', security: bearer, response: { 200: message, ...errors('tokenInvalid', 'planInsufficient') } },
};
