// The OpenAPI 3.1 description of the gateway's own HTTP APIs (public and admin listeners), made by
// @fastify/swagger from the routes as they are registered. The schemas here document; they never
// validate nor serialize: the handlers read their input the way the spec says (a body that is
// not JSON reads as {}) and answer with the catalog's French errors, which a schema validator
// would replace with its own. A route file may give its route a schema beside its handler (STYLE
// 27: the route options' `schema`, made with the parts exported here); the others are found here
// by method and path when they are registered. A route that has neither fails the build of the
// document (test/docs/openapi.test.ts), so a new endpoint cannot go undocumented.
import swagger from '@fastify/swagger';
import type { FastifyInstance, FastifySchema } from 'fastify';
import { ERRORS, type ErrorCode as ErrorName } from './errors/index.js';

/**
 * An error answer that may be any of `names` (CONTRACT §20): `error` always, `code` with
 * errors.codes or problem details (Accept: application/problem+json), whose other members follow.
 */
const errorOf = (names: readonly ErrorName[]) => ({
  description: names.map((n) => `${ERRORS[n].code}: ${ERRORS[n].en}`).join(' / '),
  type: 'object', required: ['error'],
  properties: {
    error: { type: 'string' },
    code: { enum: [...new Set(names.map((n) => ERRORS[n].code))], description: 'With errors.codes, or in problem details (type, title, status, detail: docs/errors.md)' },
  },
});
export const message = { type: 'object', required: ['message'], properties: { message: { type: 'string' } } };
const tokenPair = {
  type: 'object',
  required: ['access_token', 'refresh_token', 'token_type', 'plan'],
  properties: {
    access_token: { type: 'string', description: 'JWT, 15 minutes' },
    refresh_token: { type: 'string', description: 'JWT, 30 days, single use' },
    token_type: { const: 'Bearer' },
    plan: { type: 'string' },
  },
};
const limits = {
  type: 'object',
  properties: { daily: { type: ['integer', 'null'] }, monthly: { type: ['integer', 'null'] }, perMinute: { type: ['integer', 'null'] } },
  description: 'The plan\'s limits; null: unlimited (docs/plans-and-quotas.md)',
};
const adminUser = {
  type: 'object',
  properties: {
    id: { type: 'integer' }, email: { type: 'string' }, plan: { type: 'string' }, is_active: { enum: [0, 1] }, active: { type: 'boolean', description: 'is_active as a boolean (CONTRACT §24)' },
    daily_usage: { type: 'integer' }, last_usage_date: { type: ['string', 'null'], format: 'date' }, created_at: { type: 'string', format: 'date-time' },
    email_verified_at: { type: ['string', 'null'], format: 'date-time' },
    external_id: { type: ['string', 'null'], description: 'the id an imported user had before (CONTRACT §27)' },
  },
};
/** What both imports take and answer (CONTRACT §27): a dry run, and the line-by-line report. */
const importQuery = { type: 'object', properties: { dry_run: { enum: ['true', 'false'] } } };
const importReport = {
  type: 'object',
  properties: {
    dry_run: { type: 'boolean' }, created: { type: 'integer' }, skipped_existing: { type: 'integer' }, refused: { type: 'integer' },
    refusals: { type: 'array', items: { type: 'object', properties: { line: { type: 'integer' }, email: { type: 'string' }, reason: { type: 'string' } } } },
  },
};
const session = {
  type: 'object',
  properties: {
    id: { type: 'integer' }, created_at: { type: 'string', format: 'date-time' }, last_used_at: { type: 'string', format: 'date-time', description: 'the last refresh' },
    user_agent: { type: ['string', 'null'] }, ip: { type: ['string', 'null'] }, current: { type: 'boolean', description: 'the session of the access token used' },
  },
};
const passkey = {
  type: 'object',
  properties: { id: { type: 'integer' }, name: { type: 'string' }, created_at: { type: 'string', format: 'date-time' }, last_used_at: { type: ['string', 'null'], format: 'date-time' } },
};
export const ownKey = {
  type: 'object',
  properties: {
    id: { type: 'integer' }, name: { type: 'string' }, start: { type: ['string', 'null'], description: 'the key\'s first characters (null for keys made before named keys)' },
    scopes: { type: ['array', 'null'], items: { type: 'string' }, description: 'null: the owner\'s every right' }, created_at: { type: 'string', format: 'date-time' },
    expires_at: { type: ['string', 'null'], format: 'date-time' }, last_used_at: { type: ['string', 'null'], format: 'date-time' },
  },
};
/** A key as made: the key itself is shown only in this answer. */
export const createdKey = {
  ...ownKey, properties: { ...ownKey.properties, key: { type: 'string', description: '<prefix>_<32 base62><6 base62 CRC-32>: shown once' } },
};
const identity = {
  type: 'object',
  properties: { provider: { type: 'string' }, issuer: { type: 'string' }, subject: { type: 'string' }, email: { type: ['string', 'null'] }, created_at: { type: 'string', format: 'date-time' } },
};
const userId = { type: 'object', required: ['id'], properties: { id: { type: 'string', pattern: '^[1-9][0-9]{0,9}$' } } };
const credentials = (fields: string[]) => ({
  type: 'object',
  properties: Object.fromEntries(fields.map((f) => [f, { type: 'string' }])),
  description: 'JSON; a missing or non-JSON body reads as {}',
});
/** Codes that share their text with another: wherever that one is answered, so may this one be. */
const SPLIT_FROM: Partial<Record<ErrorName, ErrorName>> = { tokenInvalid: 'tokenMissing', userNotFound: 'userInactive' };
/** The error responses of an endpoint that may answer these errors, by status. */
export const errors = (...given: ErrorName[]) => {
  const names = given.flatMap((n) => (SPLIT_FROM[n] ? [n, SPLIT_FROM[n]] : [n]));
  return Object.fromEntries([...new Set(names.map((c) => ERRORS[c].status))].map((status) => [status, errorOf(names.filter((c) => ERRORS[c].status === status))]));
};
const bearer: Array<Record<string, string[]>> = [{ bearer: [] }, { apiKey: [] }];
export const bearerOnly: Array<Record<string, string[]>> = [{ bearer: [] }];
/** The sign-in's second-factor answer (CONTRACT §14), and the other 403s of the same endpoint. */
const mfaChallenge = (...others: ErrorName[]) => ({
  ...errorOf(['mfaCodeRequired', ...others]),
  description: `${ERRORS.mfaCodeRequired.code}: ${ERRORS.mfaCodeRequired.en}, with mfa_token and methods; no pair until POST /api/v1/auth/mfa/verify with the mfa_token`
    + others.map((n) => ` / ${ERRORS[n].code}: ${ERRORS[n].en}`).join(''),
  properties: {
    ...errorOf(['mfaCodeRequired', ...others]).properties,
    mfa_token: { type: 'string', description: 'mfa_code_required: for POST /api/v1/auth/mfa/verify; 5 minutes, 5 wrong codes' },
    methods: { type: 'array', items: { enum: ['totp', 'recovery_code'] }, description: 'mfa_code_required: the second factors the account can answer with' },
  },
});

/**
 * The optional settings the document is made with (merged into the configuration), so that it
 * describes the endpoints they switch on too.
 */
export const DOCUMENTED_OPTIONS = {
  mail: {
    resetUrl: 'https://app.example.com/reset?token={token}', verifyUrl: 'https://app.example.com/verify?token={token}', invitationUrl: 'https://app.example.com/join?token={token}',
  },
  organizations: { enabled: true },
  auth: {
    magicLink: { url: 'https://app.example.com/magic?token={token}' },
    passkeys: { rpId: 'app.example.com', rpName: 'Example', origins: ['https://app.example.com'] },
    oidc: {
      publicUrl: 'https://gw.example.com',
      returnTo: ['https://app.example.com/'],
      providers: { google: { issuer: 'https://accounts.google.com', clientId: 'documented-client-id', clientSecret: 'documented-client-secret' } },
    },
  },
  // The return page posts the exchange with the gw_oidc cookie (auth.oidc.bindToBrowser, on for one site).
  cors: { origins: ['https://app.example.com'], credentials: true },
  // GET /api/v1/errors exists with codes on (CONTRACT §20).
  errors: { codes: true },
  billing: {
    stripe: {
      secretKey: 'rk_test_documented', webhookSecrets: ['whsec_documented'], prices: { price_documented: 'premium' },
      successUrl: 'https://app.example.com/billing?done=1', cancelUrl: 'https://app.example.com/billing',
    },
  },
};

/** What documents an endpoint: tags, summary, security, params, body, responses. */
export type EndpointSchema = FastifySchema & Record<string, unknown>;

/** Each own endpoint's schema, by method and path (with its prefix), but those given beside their handlers. */
const ENDPOINTS: Record<string, EndpointSchema> = {
  'GET /healthz': { tags: ['health'], summary: 'The process runs', response: { 200: { type: 'object', properties: { status: { const: 'ok' } } } } },
  'GET /readyz': { tags: ['health'], summary: 'Postgres answers and the instance is not draining; Redis is reported in checks, never a 503', response: { 200: { type: 'object', properties: { status: { const: 'ok' }, checks: { type: 'object', properties: { postgres: { const: 'ok' }, redis: { enum: ['ok', 'down', 'readonly', 'off'] } } } } }, 503: { ...errorOf(['storageUnavailable']), description: 'not ready (status unavailable: Postgres down; draining): error, status and checks' } } },
  'GET /api/v1/errors': {
    tags: ['errors'], summary: 'The error catalog: code, name, status, messages by language, fields; only with errors.codes or errors.language other than fr',
    response: { 200: { type: 'array', items: { type: 'object', properties: { code: { type: 'string' }, name: { type: 'string' }, status: { type: 'integer' }, messages: { type: 'object', additionalProperties: { type: 'string' } }, fields: { type: 'array', items: { type: 'string' } } } } } },
  },
  'GET /.well-known/jwks.json': { tags: ['keys'], summary: 'The access-token public key(s); empty for HS256', response: { 200: { type: 'object', properties: { keys: { type: 'array' } } } } },
  'GET /.well-known/gateway-assertion-keys.json': { tags: ['keys'], summary: 'The x-gateway-assertion public keys, and only them', response: { 200: { type: 'object', properties: { keys: { type: 'array' } } } } },
  'POST /api/v1/auth/register': { tags: ['auth'], summary: 'Create an account (plan free); an optional locale (else Accept-Language) sets the language of its mails', body: credentials(['email', 'password', 'locale']), response: { 201: { type: 'object', properties: { message: { type: 'string' }, user_id: { type: 'integer' } } }, ...errors('emailInvalid', 'passwordTooShort', 'passwordTooLong', 'emailTaken', 'rateLimited', 'storageUnavailable') } },
  'POST /api/v1/auth/login': { tags: ['auth'], summary: 'Log in: a new token pair, or an mfa_token for POST /api/v1/auth/mfa/verify', body: credentials(['email', 'password']), response: { 200: tokenPair, ...errors('loginFieldsRequired', 'invalidCredentials', 'rateLimited', 'storageUnavailable'), 403: mfaChallenge('emailNotVerified') } },
  'POST /api/v1/auth/mfa/totp/enroll': { tags: ['second factor'], summary: 'A new TOTP secret, active once confirmed', security: bearerOnly, response: { 200: { type: 'object', properties: { secret: { type: 'string' }, otpauth_url: { type: 'string' } } }, ...errors('codeInvalid', 'recentAuthRequired', 'emailUnverified', 'tokenInvalid', 'rateLimited') } },
  'POST /api/v1/auth/mfa/totp/confirm': { tags: ['second factor'], summary: 'Confirm TOTP with a code: ten recovery codes, shown once; every other session ends', security: bearerOnly, body: credentials(['code']), response: { 200: { type: 'object', properties: { recovery_codes: { type: 'array', items: { type: 'string' } } } }, ...errors('codeInvalid', 'recentAuthRequired', 'emailUnverified', 'tokenInvalid', 'rateLimited') } },
  'DELETE /api/v1/auth/mfa/totp': { tags: ['second factor'], summary: 'Remove TOTP and the recovery codes; every other session ends', security: bearerOnly, body: credentials(['password']), response: { 200: message, ...errors('invalidCredentials', 'recentAuthRequired', 'tokenInvalid', 'rateLimited') } },
  'POST /api/v1/auth/mfa/verify': { tags: ['second factor'], summary: 'A login\'s mfa_token and a TOTP or recovery code: the token pair', body: credentials(['mfa_token', 'code']), response: { 200: tokenPair, ...errors('codeRefused', 'rateLimited', 'storageUnavailable') } },
  'POST /api/v1/auth/passkeys/register/options': { tags: ['second factor'], summary: 'WebAuthn creation options for a new passkey (discoverable, user verification required); only with auth.passkeys', security: bearerOnly, response: { 200: { type: 'object', description: 'PublicKeyCredentialCreationOptionsJSON' }, ...errors('recentAuthRequired', 'emailUnverified', 'tokenInvalid', 'rateLimited') } },
  'POST /api/v1/auth/passkeys/register/verify': { tags: ['second factor'], summary: 'Register the passkey the authenticator made (RegistrationResponseJSON, optional name)', security: bearerOnly, body: { type: 'object', description: 'RegistrationResponseJSON, plus an optional name' }, response: { 201: passkey, ...errors('passkeyInvalid', 'recentAuthRequired', 'emailUnverified', 'tokenInvalid', 'rateLimited') } },
  'POST /api/v1/auth/passkeys/login/options': { tags: ['second factor'], summary: 'WebAuthn request options for a passkey sign-in (discoverable: no email)', response: { 200: { type: 'object', description: 'PublicKeyCredentialRequestOptionsJSON' }, ...errors('rateLimited') } },
  'POST /api/v1/auth/passkeys/login/verify': { tags: ['second factor'], summary: 'Sign in with a passkey (AuthenticationResponseJSON): the token pair, amr ["hwk","user"], aal2', body: { type: 'object', description: 'AuthenticationResponseJSON' }, response: { 200: tokenPair, ...errors('invalidCredentials', 'rateLimited', 'storageUnavailable') } },
  'POST /api/v1/auth/refresh': { tags: ['auth'], summary: 'Rotate a refresh token: a new pair, the old token revoked', body: credentials(['refresh_token']), response: { 200: tokenPair, ...errors('refreshTokenMissing', 'refreshTokenUndecodable', 'refreshTokenInactive', 'userNotFound', 'rateLimited') } },
  'POST /api/v1/auth/logout': { tags: ['auth'], summary: 'Revoke a refresh token (always 200)', body: credentials(['refresh_token']), response: { 200: message } },
  'POST /api/v1/auth/password/change': { tags: ['accounts'], summary: 'Change the password: a new pair; every other session ends', security: bearer, body: credentials(['current_password', 'new_password']), response: { 200: tokenPair, ...errors('passwordTooShort', 'passwordTooLong', 'invalidCredentials', 'emailUnverified', 'tokenInvalid', 'rateLimited', 'storageUnavailable') } },
  'POST /api/v1/auth/password/forgot': { tags: ['accounts'], summary: 'Mail a reset link if the account exists (the same answer whatever the address)', body: credentials(['email']), response: { 202: message, ...errors('emailInvalid', 'rateLimited', 'mailUnavailable') } },
  'POST /api/v1/auth/password/reset': { tags: ['accounts'], summary: 'Set a new password with a reset link\'s token; every session ends', body: credentials(['token', 'new_password']), response: { 200: message, ...errors('linkInvalid', 'passwordTooShort', 'passwordTooLong', 'rateLimited', 'storageUnavailable') } },
  'POST /api/v1/auth/email/verify': { tags: ['accounts'], summary: 'Verify the email with a verification link\'s token', body: credentials(['token']), response: { 200: message, ...errors('linkInvalid', 'rateLimited') } },
  'POST /api/v1/auth/magic-link': { tags: ['accounts'], summary: 'Mail a 15-minute sign-in link if the account exists (the same answer whatever the address); only with auth.magicLink', body: credentials(['email']), response: { 202: message, ...errors('emailInvalid', 'rateLimited', 'mailUnavailable') } },
  'POST /api/v1/auth/magic-link/verify': { tags: ['accounts'], summary: 'Sign in with a sign-in link\'s token (amr ["email"]): the token pair, or an mfa_token for POST /api/v1/auth/mfa/verify', body: credentials(['token']), response: { 200: tokenPair, ...errors('linkInvalid', 'rateLimited', 'storageUnavailable'), 403: mfaChallenge() } },
  'POST /api/v1/auth/email/resend': { tags: ['accounts'], summary: 'Mail a new verification link (none when already verified)', security: bearer, response: { 202: message, ...errors('tokenInvalid', 'rateLimited', 'mailUnavailable') } },
  'GET /api/v1/user/passkeys': { tags: ['second factor'], summary: 'The user\'s passkeys (never a key or counter); only with auth.passkeys', security: bearer, response: { 200: { type: 'object', properties: { passkeys: { type: 'array', items: passkey } } }, ...errors('tokenInvalid', 'rateLimited') } },
  'DELETE /api/v1/user/passkeys/:id': { tags: ['second factor'], summary: 'Remove one of the user\'s passkeys; every other session ends', security: bearerOnly, params: { type: 'object', required: ['id'], properties: { id: { type: 'string', pattern: '^[1-9][0-9]*$' } } }, response: { 200: message, ...errors('passkeyNotFound', 'recentAuthRequired', 'emailUnverified', 'tokenInvalid', 'rateLimited') } },
  'GET /api/v1/auth/oidc/:provider/start': { tags: ['identity providers'], summary: 'Leave for the provider (302): code flow with PKCE, the sign-in bound to the browser by a cookie; only with auth.oidc', params: { type: 'object', required: ['provider'], properties: { provider: { type: 'string', description: 'the provider\'s name in auth.oidc.providers' } } }, querystring: { type: 'object', required: ['return_to', 'code_challenge'], properties: { return_to: { type: 'string', format: 'uri', description: 'where the browser comes back (auth.oidc.returnTo)' }, code_challenge: { type: 'string', description: 'the application\'s S256 challenge, which binds the exchange' } } }, response: { 302: { description: 'to the provider\'s authorization endpoint (Set-Cookie gw_oidc); to return_to#error=provider_error when the provider cannot be reached' }, ...errors('redirectNotAllowed', 'badRequest', 'routeNotFound', 'rateLimited') } },
  'GET /api/v1/auth/oidc/:provider/callback': { tags: ['identity providers'], summary: 'The provider sends the browser back here; 302 to return_to with #login_code= (60 s, single use) or #error=', params: { type: 'object', required: ['provider'], properties: { provider: { type: 'string', description: 'the provider\'s name in auth.oidc.providers' } } }, response: { 302: { description: 'return_to#login_code=…, or return_to#error= access_denied, provider_error, invalid_id_token, account_exists, email_unverified or account_not_allowed' }, ...errors('badRequest', 'routeNotFound') } },
  'POST /api/v1/auth/oidc/exchange': { tags: ['identity providers'], summary: 'Trade a login_code and the verifier of the start\'s challenge for the token pair (amr ["fed"]), or an mfa_token', body: credentials(['login_code', 'code_verifier']), response: { 200: tokenPair, ...errors('linkInvalid', 'rateLimited', 'storageUnavailable'), 403: mfaChallenge() } },
  'GET /api/v1/user/identities': { tags: ['identity providers'], summary: 'The providers linked to the account; only with auth.oidc', security: bearer, response: { 200: { type: 'object', properties: { identities: { type: 'array', items: identity } } }, ...errors('tokenInvalid', 'rateLimited') } },
  'DELETE /api/v1/user/identities/:provider': { tags: ['identity providers'], summary: 'Unlink a provider, unless it is the last way to sign in', security: bearerOnly, params: { type: 'object', required: ['provider'], properties: { provider: { type: 'string', description: 'the provider\'s name in auth.oidc.providers' } } }, response: { 200: message, ...errors('providerNotLinked', 'lastSignInMethod', 'recentAuthRequired', 'emailUnverified', 'tokenInvalid', 'rateLimited') } },
  'GET /api/v1/user/sessions': { tags: ['accounts'], summary: 'The active sessions (one per login), most recently used first', security: bearer, response: { 200: { type: 'object', properties: { sessions: { type: 'array', items: session } } }, ...errors('tokenInvalid', 'rateLimited') } },
  'DELETE /api/v1/user/sessions/:id': { tags: ['accounts'], summary: 'End one of the user\'s sessions', security: bearer, params: { type: 'object', required: ['id'], properties: { id: { type: 'string', pattern: '^[1-9][0-9]*$' } } }, response: { 200: message, ...errors('sessionNotFound', 'tokenInvalid', 'rateLimited') } },
  'DELETE /api/v1/user/me': { tags: ['accounts'], summary: 'Delete the account and everything of it; the email is free again. The last owner of an organization is refused (409, with orgs: [{id, name}]) until they hand it over or delete it', security: bearer, body: credentials(['password']), response: { 200: message, ...errors('invalidCredentials', 'lastOwner', 'tokenInvalid', 'rateLimited', 'storageUnavailable', 'paymentUnavailable') } },
  'GET /api/v1/user/me': { tags: ['user'], summary: 'The signed-in user, with the plan\'s limits and what is left today', security: bearer, response: { 200: { type: 'object', properties: { user_id: { type: 'integer' }, email: { type: 'string' }, plan: { type: 'string' }, daily_usage: { type: 'integer' }, last_usage_date: { type: ['string', 'null'] }, limits, daily_remaining: { type: ['integer', 'null'] }, monthly_usage: { type: 'integer' }, monthly_remaining: { type: ['integer', 'null'] }, monthly_overage: { type: 'integer', description: 'With metered overage only: the uses past the included allowance' }, email_verified_at: { type: ['string', 'null'], format: 'date-time' }, locale: { type: 'string', description: 'The language of the user\'s mails; absent until chosen' }, orgs: { type: 'array', items: { type: 'object', properties: { id: { type: 'integer' }, name: { type: 'string' }, plan: { type: 'string' }, role: { enum: ['owner', 'admin', 'member'] } } }, description: 'With organizations.enabled only: the user\'s organizations and role in each' } } }, ...errors('tokenInvalid', 'userNotFound') } },
  'PATCH /api/v1/user/me': {
    tags: ['user'], summary: 'Choose the language of the user\'s mails (a language the gateway has texts for; en-GB reads as en; null forgets it)', security: bearer,
    body: { type: 'object', properties: { locale: { type: ['string', 'null'], examples: ['en'] } }, description: 'JSON; a missing or non-JSON body reads as {}' },
    response: { 200: { type: 'object', required: ['message', 'locale'], properties: { message: { type: 'string' }, locale: { type: ['string', 'null'] } } }, ...errors('localeUnsupported', 'tokenInvalid', 'userNotFound') },
  },
  'POST /api/v1/user/api-keys': {
    tags: ['user'], summary: 'A new named API key (apiKeys.plans), with optional scopes and expiry; the key is shown only here', security: bearerOnly,
    body: { type: 'object', required: ['name'], properties: { name: { type: 'string', minLength: 1, maxLength: 64 }, scopes: { type: ['array', 'null'], items: { type: 'string' }, minItems: 1 }, expires_at: { type: ['string', 'null'], format: 'date-time' } } },
    response: { 201: createdKey, ...errors('badRequest', 'scopeUnknown', 'apiKeyLimitReached', 'apiKeyNotAccepted', 'tokenInvalid', 'planInsufficient') },
  },
  'GET /api/v1/user/api-keys': { tags: ['user'], summary: 'The user\'s keys that are not revoked (never a key or its hash); the section 4 key is named default', security: bearerOnly, response: { 200: { type: 'object', properties: { api_keys: { type: 'array', items: ownKey } } }, ...errors('apiKeyNotAccepted', 'tokenInvalid') } },
  'DELETE /api/v1/user/api-keys/:id': { tags: ['user'], summary: 'Revoke one of the user\'s keys', security: bearerOnly, params: { type: 'object', required: ['id'], properties: { id: { type: 'string', pattern: '^[1-9][0-9]*$' } } }, response: { 200: message, ...errors('apiKeyNotFound', 'apiKeyNotAccepted', 'tokenInvalid') } },
  'POST /api/v1/user/api-token': { tags: ['user'], summary: 'A new personal API key (pro); the earlier one is revoked; shown once', security: bearer, response: { 201: { type: 'object', properties: { api_token: { type: 'string' }, created_at: { type: 'string', format: 'date-time' } } }, ...errors('tokenInvalid', 'planInsufficient') } },
  'DELETE /api/v1/user/api-token': { tags: ['user'], summary: 'Revoke every API key of the user (pro); idempotent', security: bearer, response: { 200: message, ...errors('tokenInvalid', 'planInsufficient') } },
  'POST /api/v1/user/webhook': { tags: ['user'], summary: 'Register the alert webhook (pro), replacing any earlier one', security: bearer, body: { type: 'object', properties: { url: { type: 'string', format: 'uri' } } }, response: { 201: { type: 'object', properties: { url: { type: 'string' }, secret: { type: 'string', description: 'whsec_<base64>' } } }, ...errors('webhookUrlInvalid', 'webhookUrlForbidden', 'tokenInvalid', 'planInsufficient') } },
  'DELETE /api/v1/user/webhook': { tags: ['user'], summary: 'Remove the alert webhook (pro); idempotent', security: bearer, response: { 200: message, ...errors('tokenInvalid', 'planInsufficient') } },
  'GET /metrics': { tags: ['admin'], summary: 'Prometheus metrics (text format)', response: { 200: { description: 'text/plain; version=0.0.4', type: 'string' } } },
  'GET /openapi.json': { tags: ['admin'], summary: 'This document', response: { 200: { type: 'object' } } },
  'GET /admin/v1/users': { tags: ['admin'], summary: 'With email: that user (trimmed, any case). Otherwise a page of users, newest first: query matches email (substring, any case), exact external_id or exact id', security: [{ adminKey: [] }], querystring: { type: 'object', properties: { email: { type: 'string' }, query: { type: 'string' }, plan: { type: 'string' }, active: { enum: ['true', 'false'] }, limit: { type: 'integer', minimum: 1, maximum: 200, default: 50 }, cursor: { type: 'string' } } }, response: { 200: { anyOf: [adminUser, { type: 'object', properties: { users: { type: 'array', items: adminUser }, next_cursor: { type: ['string', 'null'] } } }] }, ...errors('adminEmailRequired', 'adminListInvalid', 'adminUnauthorized', 'adminNotFound') } },
  'GET /admin/v1/audit': { tags: ['admin'], summary: 'The audit log, newest first, in keyset pages: by user, event type and time', security: [{ adminKey: [] }], querystring: { type: 'object', properties: { user_id: { type: 'integer' }, type: { type: 'string' }, since: { type: 'string', format: 'date-time' }, limit: { type: 'integer', minimum: 1, maximum: 200, default: 50 }, cursor: { type: 'string' } } }, response: { 200: { type: 'object', properties: { events: { type: 'array', items: { type: 'object', properties: { id: { type: 'integer' }, at: { type: 'string', format: 'date-time' }, type: { type: 'string' }, actor: { enum: ['user', 'admin', 'cli', 'console', 'operator', 'billing', 'system'] }, actor_id: { type: ['integer', 'null'] }, user_id: { type: ['integer', 'null'] }, ip: { type: ['string', 'null'] }, user_agent: { type: ['string', 'null'] }, data: { type: 'object' } } } }, next_cursor: { type: ['string', 'null'] } } }, ...errors('auditListInvalid', 'adminUnauthorized', 'adminNotFound') } },
  'GET /admin/v1/users/:id/sessions': { tags: ['admin'], summary: 'The user\'s active sessions, most recently used first', security: [{ adminKey: [] }], params: userId, response: { 200: { type: 'object', properties: { sessions: { type: 'array', items: { type: 'object', properties: { id: { type: 'integer' }, created_at: { type: 'string', format: 'date-time' }, last_used_at: { type: 'string', format: 'date-time' }, user_agent: { type: ['string', 'null'] }, ip: { type: ['string', 'null'] } } } } } }, ...errors('adminUnauthorized', 'adminNotFound') } },
  'DELETE /admin/v1/users/:id/sessions': { tags: ['admin'], summary: 'End all the user\'s sessions (their refresh tokens stop working)', security: [{ adminKey: [] }], params: userId, response: { 200: { type: 'object', properties: { message: { type: 'string' }, revoked: { type: 'integer' } } }, ...errors('adminUnauthorized', 'adminNotFound') } },
  'DELETE /admin/v1/users/:id/sessions/:sid': { tags: ['admin'], summary: 'End one of the user\'s sessions', security: [{ adminKey: [] }], params: { type: 'object', properties: { id: { type: 'integer' }, sid: { type: 'integer' } } }, response: { 200: { type: 'object', properties: { message: { type: 'string' }, revoked: { type: 'integer' } } }, ...errors('adminUnauthorized', 'adminNotFound') } },
  'GET /admin/v1/users/:id/api-keys': {
    tags: ['admin'], summary: 'The user\'s API keys, newest first, revoked ones too (never the key or its hash)', security: [{ adminKey: [] }], params: userId,
    response: { 200: { type: 'object', properties: { api_keys: { type: 'array', items: { ...ownKey, properties: { ...ownKey.properties, active: { type: 'boolean' } } } } } }, ...errors('adminUnauthorized', 'adminNotFound') },
  },
  'DELETE /admin/v1/api-keys/:id': { tags: ['admin'], summary: 'Revoke one API key, whoever holds it', security: [{ adminKey: [] }], params: userId, response: { 200: { type: 'object', properties: { message: { type: 'string' }, id: { type: 'integer' }, user_id: { type: 'integer' } } }, ...errors('adminUnauthorized', 'adminNotFound') } },
  'POST /admin/v1/api-keys/leaked': {
    tags: ['admin'], summary: 'Revoke the live keys among raw keys found in the open (a secret scanner\'s report); unknown ones are ignored', security: [{ adminKey: [] }],
    body: { type: 'object', required: ['keys'], properties: { keys: { type: 'array', maxItems: 1000, items: { type: 'string', maxLength: 256 } } } },
    response: { 200: { type: 'object', properties: { revoked: { type: 'array', items: { type: 'integer' }, description: 'the ids of the keys revoked now' } } }, ...errors('badRequest', 'adminUnauthorized', 'adminNotFound') },
  },
  'GET /admin/v1/users/:id/passkeys': { tags: ['admin'], summary: 'The user\'s passkeys (never the public key); empty where passkeys are not installed', security: [{ adminKey: [] }], params: userId, response: { 200: { type: 'object', properties: { passkeys: { type: 'array', items: { type: 'object' } } } }, ...errors('adminUnauthorized', 'adminNotFound') } },
  'GET /admin/v1/users/:id/identities': { tags: ['admin'], summary: 'The user\'s linked identity providers; empty where none are installed', security: [{ adminKey: [] }], params: userId, response: { 200: { type: 'object', properties: { identities: { type: 'array', items: { type: 'object' } } } }, ...errors('adminUnauthorized', 'adminNotFound') } },
  'DELETE /admin/v1/users/:id/mfa': { tags: ['admin'], summary: 'Remove the user\'s TOTP and recovery codes (a user locked out)', security: [{ adminKey: [] }], params: userId, response: { 200: { type: 'object', properties: { message: { type: 'string' }, user_id: { type: 'integer' } } }, ...errors('adminUnauthorized', 'adminNotFound') } },
  'DELETE /admin/v1/users/:id': { tags: ['admin'], summary: 'Delete a user and everything of it; answers the user as it was', security: [{ adminKey: [] }], params: userId, response: { 200: adminUser, ...errors('adminUnauthorized', 'adminNotFound') } },
  'GET /admin/v1/users/:id': { tags: ['admin'], summary: 'A user (never the password hash)', security: [{ adminKey: [] }], params: userId, response: { 200: adminUser, ...errors('adminUnauthorized', 'adminNotFound') } },
  'PUT /admin/v1/users/:id/plan': { tags: ['admin'], summary: 'Set a user\'s plan (and its subscription record)', security: [{ adminKey: [] }], params: userId, body: { type: 'object', properties: { plan: { type: 'string' } } }, response: { 200: adminUser, ...errors('planUnknown', 'adminUnauthorized', 'adminNotFound') } },
  'GET /admin/v1/users/:id/usage': { tags: ['admin'], summary: 'Today\'s and this month\'s counts, the limits and the last 30 days', security: [{ adminKey: [] }], params: userId, response: { 200: { type: 'object', properties: { user_id: { type: 'integer' }, plan: { type: 'string' }, limits, today: { type: 'object' }, daily_remaining: { type: ['integer', 'null'] }, month: { type: 'object' }, monthly_remaining: { type: ['integer', 'null'] }, history: { type: 'array' } } }, ...errors('adminUnauthorized', 'adminNotFound') } },
  'PUT /admin/v1/users/:id/active': { tags: ['admin'], summary: 'Activate or deactivate a user', security: [{ adminKey: [] }], params: userId, body: { type: 'object', properties: { active: { type: 'boolean' } } }, response: { 200: adminUser, ...errors('activeFlagInvalid', 'adminUnauthorized', 'adminNotFound') } },
  'GET /admin/v1/users/:id/webhook-deliveries': { tags: ['admin'], summary: 'The user\'s 100 newest webhook messages, newest first (never their bodies)', security: [{ adminKey: [] }], params: userId, response: { 200: { type: 'object', properties: { user_id: { type: 'integer' }, deliveries: { type: 'array', items: { type: 'object', properties: { id: { type: 'string', description: 'the webhook-id header' }, type: { type: 'string' }, status: { enum: ['pending', 'delivered', 'failed', 'skipped'] }, attempts: { type: 'integer' }, last_error: { type: ['string', 'null'] }, created_at: { type: 'string', format: 'date-time' }, last_attempt_at: { type: ['string', 'null'], format: 'date-time' }, next_attempt_at: { type: ['string', 'null'], format: 'date-time' }, finished_at: { type: ['string', 'null'], format: 'date-time' } } } } } }, ...errors('adminUnauthorized', 'adminNotFound') } },
  'GET /admin/v1/plans': { tags: ['admin'], summary: 'The plans the configuration offers (what PUT …/plan accepts), with their limits; null: unlimited', security: [{ adminKey: [] }], response: { 200: { type: 'object', properties: { plans: { type: 'array', items: { type: 'object', properties: { name: { type: 'string' }, daily: { type: ['integer', 'null'] }, monthly: { type: ['integer', 'null'] }, per_minute: { type: ['integer', 'null'] } } } } } }, ...errors('adminUnauthorized', 'adminNotFound') } },
  'POST /admin/v1/users': { tags: ['admin'], summary: 'Create a user without a password, on plan (default free), and mail it an account_invitation: mail.resetUrl with a single-use token valid 7 days, redeemed by POST /api/v1/auth/password/reset (sets the password, verifies the address)', security: [{ adminKey: [] }], body: { type: 'object', required: ['email'], properties: { email: { type: 'string' }, plan: { type: 'string' } } }, response: { 201: adminUser, ...errors('emailInvalid', 'planUnknown', 'adminUnauthorized', 'adminNotFound', 'emailTaken', 'mailUnavailable') } },
  'GET /admin/v1/overview': { tags: ['admin'], summary: 'The last 30 UTC days across users and plans: API-key requests and denials and counted uses per plan per day, top users and organizations, plan mix (docs/console.md)', security: [{ adminKey: [] }], response: { 200: { type: 'object', properties: { days: { type: 'array', items: { type: 'string', format: 'date' } }, plans: { type: 'array', items: { type: 'object' } }, top_users: { type: 'array', items: { type: 'object' } }, top_orgs: { type: 'array', items: { type: 'object' } }, plan_mix: { type: 'object' } } }, ...errors('adminUnauthorized', 'adminNotFound') } },
  'POST /admin/v1/import/users': {
    tags: ['admin'], summary: 'Import accounts: one JSON object a line {email, password_hash, email_verified, plan, is_active, created_at, external_id} (docs/migrating.md)', security: [{ adminKey: [] }],
    querystring: importQuery, response: { 200: importReport, ...errors('importBodyInvalid', 'payloadTooLarge', 'adminUnauthorized', 'adminNotFound') },
  },
  'POST /admin/v1/import/keys': {
    tags: ['admin'], summary: 'Import API keys by their SHA-256: one JSON object a line {email, name, sha256, scopes, expires_at} (docs/migrating.md); audited api_key.imported per batch', security: [{ adminKey: [] }],
    querystring: importQuery, response: { 200: importReport, ...errors('importBodyInvalid', 'payloadTooLarge', 'adminUnauthorized', 'adminNotFound') },
  },
  'POST /admin/v1/alerts': { tags: ['admin'], summary: 'Queue an alert for a user\'s webhook', security: [{ adminKey: [] }], body: { type: 'object', properties: { user_id: { type: 'integer' }, type: { type: 'string' }, data: { type: 'object' } } }, response: { 202: message, ...errors('alertInvalid', 'payloadTooLarge', 'adminUnauthorized', 'adminNotFound') } },
};

/** Routes that are not endpoints of an API: the proxy's catch-all, the decisions listener's, the console's pages. */
const UNDOCUMENTED = /^\*$|\/\*$|^\/console\//;

export class UndocumentedRoute extends Error {}

/**
 * Makes `app` describe its routes: registers @fastify/swagger and hands each own route its schema.
 * Call before any route is registered.
 */
export async function documentRoutes(app: FastifyInstance): Promise<void> {
  // Documentation only (see above).
  app.setValidatorCompiler(() => () => true);
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
  app.addHook('onRoute', (route) => {
    if (UNDOCUMENTED.test(route.url)) {
      route.schema = { ...route.schema, hide: true } as FastifySchema;
      return;
    }
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    if (methods.every((m) => m === 'HEAD')) return;
    const key = `${methods.find((m) => m !== 'HEAD')} ${route.url}`;
    // A schema given beside the handler has its summary; else the one here.
    const schema = ENDPOINTS[key] ?? ((route.schema as { summary?: string } | undefined)?.summary ? {} : undefined);
    if (!schema) throw new UndocumentedRoute(`${key} has no schema: give its route one beside its handler, or add it to src/openapi.ts`);
    route.schema = { ...schema, ...route.schema };
    // Every admin endpoint declares a role (admin/access.ts): an operator below it is refused (CONTRACT §24).
    if (route.url.startsWith('/admin/v1/')) route.schema = withRefusal(route.schema, 'roleInsufficient');
  });
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'auth-gateway', version: '1', description: 'The gateway\'s own endpoints. Routes declared in gateway.yaml are the upstreams\' (docs/routing-and-headers.md).' },
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
          apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
          adminKey: { type: 'http', scheme: 'bearer', description: 'admin.apiKey' },
        },
      },
    },
  });
}

type Responses = Record<string, { description?: string }>;

/**
 * `schema` with `code`'s answer among its documented responses (its message added to the
 * description of a status already there): for a refusal a hook adds to many routes at once.
 */
export function withRefusal(schema: FastifySchema | undefined, name: ErrorName): FastifySchema | undefined {
  const response = (schema as { response?: Responses } | undefined)?.response;
  if (!schema || !response) return schema;
  const { status, code } = ERRORS[name];
  const existing = response[status] as ReturnType<typeof errorOf> | undefined;
  const names = existing?.properties?.code?.enum ? Object.keys(ERRORS).filter((n) => existing.properties.code.enum.includes(ERRORS[n as ErrorName].code)) as ErrorName[] : [];
  if (names.some((n) => ERRORS[n].code === code)) return schema;
  return { ...schema, response: { ...response, [status]: errorOf([...names, name]) } } as FastifySchema;
}

type OpenApiDocument = { paths?: Record<string, unknown>; [key: string]: unknown };

/** One document for both listeners: the public one's, with the admin listener's paths added. */
export function combinedDocument(publicDoc: OpenApiDocument, adminDoc: OpenApiDocument): OpenApiDocument {
  return { ...publicDoc, paths: { ...publicDoc.paths, ...adminDoc.paths } };
}
