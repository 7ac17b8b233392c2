// The catalog (CONTRACT §20): every error the gateway answers, once. The key is its name in metrics,
// traces and logs (camelCase, unchanged since those existed); `code` is the stable snake_case id
// clients read (`errors.codes`, problem details, GET /api/v1/errors). `fr` is the spec's text, the
// default, byte for byte; `en` ships beside it. `{name}` in a text is a parameter the answer fills
// (messages.ts); `title` is the code's fixed text where the message has parameters or is shared
// with another code. `fields` are the body's keys beside `error`; `when` is docs/errors.md's column.
// Handlers send an error by name (sendError / GatewayError); no text is spelled anywhere else.

export interface CatalogEntry {
  readonly status: number;
  readonly code: string;
  readonly fr: string;
  readonly en: string;
  readonly title?: { readonly fr: string; readonly en: string };
  readonly fields?: readonly string[];
  readonly when: string;
}

export const CATALOG = {
  // spec §7
  emailInvalid: { status: 400, code: 'email_invalid', fr: 'Email invalide', en: 'Invalid email',
    when: 'register and `password/forgot`: email empty, over 320 characters, not exactly one mailbox `local@domain` (a display name, a list, a comment, a group, '
      + 'spaces or separators, a quoted part holding `,` `<` `>` `;` `:` `@`, a domain literal such as `a@[127.0.0.1]`), or holding a control character (CR, '
      + 'LF, NUL, DEL, C1), `%` or U+FFFD (bytes that were not UTF-8)' },
  passwordTooShort: { status: 400, code: 'password_too_short', fr: 'Mot de passe trop court (min {min} {characters})', en: 'Password too short (min {min} {characters})',
    title: { fr: 'Mot de passe trop court', en: 'Password too short' },
    when: 'register, `password/change`, `password/reset`: (new) password shorter than `auth.passwordMinLength` characters (the message names the configured '
      + 'minimum)' },
  loginFieldsRequired: { status: 400, code: 'login_fields_required', fr: 'Email et mot de passe requis', en: 'Email and password required',
    when: 'login: email or password empty' },
  refreshTokenMissing: { status: 400, code: 'refresh_token_missing', fr: 'refresh_token manquant', en: 'refresh_token missing',
    when: 'refresh: `refresh_token` empty' },
  invalidCredentials: { status: 401, code: 'invalid_credentials', fr: 'Identifiants invalides', en: 'Invalid credentials',
    when: 'login: unknown or inactive user, wrong password, or a password over 1024 bytes; `password/change` and `DELETE /api/v1/user/me`: wrong (current) '
      + 'password' },
  refreshTokenUndecodable: { status: 401, code: 'refresh_token_invalid', fr: 'Refresh token invalide ou expiré', en: 'Invalid or expired refresh token',
    when: 'refresh: the token does not decode, has expired, or is not a refresh token' },
  refreshTokenInactive: { status: 401, code: 'refresh_token_inactive', fr: 'Refresh token invalide, révoqué ou expiré', en: 'Refresh token invalid, revoked or expired',
    when: 'refresh: no active stored record for it (revoked, rotated away, logged out)' },
  userNotFound: { status: 401, code: 'user_not_found', fr: 'Utilisateur introuvable', en: 'User not found',
    when: 'refresh, or a guard: the token\'s user does not exist; an API key whose user is inactive' },
  userInactive: { status: 401, code: 'user_inactive', fr: 'Utilisateur introuvable', en: 'User not found',
    title: { fr: 'Compte désactivé', en: 'Account deactivated' },
    when: 'refresh, or a guard: a valid bearer or refresh token names a deactivated account (an API key of one stays `token_invalid`)' },
  tokenInvalid: { status: 401, code: 'token_invalid', fr: 'Token invalide ou expiré', en: 'Invalid or expired token',
    when: 'a guard: a bearer token or API key that is not valid, where one is required or where it is optional' },
  tokenMissing: { status: 401, code: 'token_missing', fr: 'Token invalide ou expiré', en: 'No token was sent',
    title: { fr: 'Token manquant', en: 'Missing token' },
    when: 'a guard: no bearer token or API key sent where one is required' },
  notAuthenticated: { status: 401, code: 'not_authenticated', fr: 'Non authentifié', en: 'Not authenticated',
    when: 'the spec\'s plan guard without a signed-in user; never answered: `plans` needs `auth: required`, so `Token invalide ou expiré` comes first' },
  planInsufficient: { status: 403, code: 'plan_insufficient', fr: 'Plan insuffisant', en: 'Insufficient plan',
    fields: ['required', 'current_plan', 'upgrade_url'],
    when: 'the plan guard: the user\'s plan is not in the route\'s `plans` (or not `pro` on `/api/v1/user/api-token` and `/webhook`)' },
  emailTaken: { status: 409, code: 'email_taken', fr: 'Email déjà enregistré', en: 'Email already registered',
    when: 'register: the email belongs to a user, active or not; `POST /admin/v1/users`: a user\'s; `POST /admin/v1/operators`: an operator\'s' },
  dailyLimitReached: { status: 429, code: 'daily_limit_reached', fr: 'Limite quotidienne atteinte (plan {plan}: {limit} {noun}/jour)', en: 'Daily limit reached (plan {plan}: {limit} {noun}/day)',
    title: { fr: 'Limite quotidienne atteinte', en: 'Daily limit reached' }, fields: ['upgrade_url'],
    when: 'the daily limit of the user\'s plan, which the text names with its limit (`plan premium: 1000 courses/jour`); with `Retry-After` (seconds to UTC '
      + 'midnight), `RateLimit-Policy` and `RateLimit`' },
  // CONTRACT §23
  monthlyLimitReached: {
    status: 429, code: 'monthly_limit_reached', fr: 'Limite mensuelle atteinte (plan {plan}: {limit} {noun}/mois)', en: 'Monthly limit reached (plan {plan}: {limit} {noun}/month)',
    title: { fr: 'Limite mensuelle atteinte', en: 'Monthly limit reached' }, fields: ['upgrade_url'],
    when: 'the monthly limit of the user\'s plan (`plan free: 20 courses/mois`), also when the day is spent too; with `Retry-After` (seconds to the next UTC '
      + 'month), `RateLimit-Policy` and `RateLimit`' },
  internal: { status: 500, code: 'internal_error', fr: 'Erreur interne', en: 'Internal error',
    when: 'an unexpected fault (a bug), logged with its stack' },
  // CONTRACT §6
  webhookUrlInvalid: { status: 400, code: 'webhook_url_invalid', fr: 'URL de webhook invalide (HTTPS requis)', en: 'Invalid webhook URL (HTTPS required)',
    when: 'webhook URL missing, malformed, over 2048 characters or not `https`' },
  webhookUrlForbidden: { status: 400, code: 'webhook_url_forbidden', fr: 'URL de webhook non autorisée', en: 'Webhook URL not allowed',
    when: 'webhook URL on a non-public address' },
  routeNotFound: { status: 404, code: 'route_not_found', fr: 'Route introuvable', en: 'Route not found',
    when: 'no route and no own endpoint matches the path; `oidc/{provider}/…` for a provider `auth.oidc.providers` does not name; an own endpoint spelled '
      + 'otherwise (`/API/V1/AUTH/LOGIN`, a trailing `/`, `;params`, a format suffix), which is never proxied; a decision-only route (no `upstream`) on the '
      + 'public listener; any route on the customer portal\'s host (`portal.publicUrl`, HTTP and WebSocket), and a path under `{path}api/` that is no endpoint; '
      + 'on the decisions listener, a decision for an own endpoint\'s path or for the portal\'s host, or any path but `/decisions`' },
  methodNotAllowed: { status: 405, code: 'method_not_allowed', fr: 'Méthode non autorisée', en: 'Method not allowed',
    when: 'a route matches the path but not the method (or the method an override names), or an own endpoint is called with another method '
      + '(a portal page with another method than GET or HEAD); with `Allow`' },
  payloadTooLarge: { status: 413, code: 'payload_too_large', fr: 'Requête trop volumineuse', en: 'Request too large',
    when: 'a body over `server.bodyLimit`; an admin alert whose `data` is over 60 KiB' },
  rateLimited: { status: 429, code: 'too_many_attempts', fr: 'Trop de tentatives, réessayez plus tard', en: 'Too many attempts, try again later',
    when: 'the auth rate limit, with `Retry-After`; a user\'s second-factor codes after 10 wrong ones in 15 minutes, with `Retry-After` ([Second '
      + 'factor](second-factor.md#signing-in))' },
  // CONTRACT §12
  tooManyRequests: { status: 429, code: 'too_many_requests', fr: 'Trop de requêtes, réessayez plus tard', en: 'Too many requests, try again later',
    when: 'the per-minute limit of the user\'s plan on a `rateLimit: true` route, with `Retry-After`, `RateLimit-Policy` and `RateLimit`' },
  upstreamUnavailable: { status: 502, code: 'upstream_unavailable', fr: 'Service en amont indisponible', en: 'Upstream service unavailable',
    when: 'the upstream refused or reset the connection, or its TLS handshake failed (certificate not verified, client certificate refused)' },
  upstreamTimeout: { status: 504, code: 'upstream_timeout', fr: 'Service en amont trop lent', en: 'Upstream service too slow',
    when: 'the upstream sent no response headers within its `timeout`' },
  storageUnavailable: { status: 503, code: 'service_unavailable', fr: 'Service temporairement indisponible', en: 'Service temporarily unavailable',
    when: 'Postgres unreachable or not answering within 5 s; register, login and the other endpoints that hash a password while more than 100 password hashes are '
      + 'waiting; `/readyz` with Postgres down or while draining (adds `status` and `checks`)' },
  // added by this gateway (docs/errors.md)
  passwordTooLong: { status: 400, code: 'password_too_long', fr: 'Mot de passe trop long (max 1024 octets)', en: 'Password too long (max 1024 bytes)',
    when: 'register, `password/change`, `password/reset`: (new) password over 1024 bytes' },
  badRequest: { status: 400, code: 'bad_request', fr: 'Requête invalide', en: 'Invalid request',
    when: 'any own endpoint but register, login, refresh, logout, forgot and magic link: a string of the body, query or path holding a C0 control (NUL, CR, LF, '
      + 'tab, …) or a lone surrogate, or a body nested over 32 levels (an alert\'s `data` may hold newlines and tabs, not NUL); register: a password holding '
      + 'one; a value Postgres refuses (logged at warn); `oidc/{provider}/start` without an S256 `code_challenge`; `oidc/{provider}/callback` without the '
      + 'sign-in cookie of the browser that started, with a state it does not derive, or a state used or expired (the only failure of the callback answered as '
      + 'JSON); HTTP that cannot be parsed (a malformed chunk included), an HTTP/1.1 request without `Host` or with a `Host` that is not a host, a URL that '
      + 'cannot be decoded, a path an upstream could split differently (an encoded `/` or `\\`, a raw backslash, a segment starting with `..;` or `.;`, a `#`), '
      + 'a `GET` or `HEAD` with a body on a route, a request the HTTP client to the upstream refuses to build; on the decisions listener, `/decisions` without '
      + '`X-Forwarded-Uri` or `X-Original-URI`, a method header that is not a token, or one of those headers sent twice' },
  headersTooLarge: { status: 431, code: 'headers_too_large', fr: 'En-têtes de requête trop volumineux', en: 'Request headers too large',
    when: 'request headers over Node\'s limit' },
  requestTimeout: { status: 408, code: 'request_timeout', fr: 'Requête trop lente à arriver', en: 'Request too slow to arrive',
    when: 'request headers sent too slowly' },
  expectationFailed: { status: 417, code: 'expectation_failed', fr: 'En-tête Expect non pris en charge', en: 'Expect header not supported',
    when: 'an `Expect` other than `100-continue`' },
  adminUnauthorized: { status: 401, code: 'admin_key_invalid', fr: 'Clé d’administration invalide', en: 'Invalid admin key',
    when: 'admin API: missing or wrong admin key or operator token (`gwop_…`: unknown, expired, or its operator removed) (with `WWW-Authenticate: Bearer '
      + 'realm="gateway-admin"`)' },
  metricsUnauthorized: { status: 401, code: 'metrics_token_invalid', fr: 'Jeton de métriques invalide', en: 'Invalid metrics token',
    when: 'metrics listener (`metrics.token` set): `/metrics` without `Authorization: Bearer` and that token (with `WWW-Authenticate: Bearer realm="gateway-metrics"`)' },
  adminNotFound: { status: 404, code: 'resource_not_found', fr: 'Ressource introuvable', en: 'Resource not found',
    when: 'admin API: no `admin.apiKey` configured and no operator, an unknown user or operator, an unknown `/admin` path; `/admin/v1/operator/tokens` with '
      + 'the shared key (it is no operator)' },
  planUnknown: { status: 400, code: 'plan_unknown', fr: 'Plan inconnu ({plans})', en: 'Unknown plan ({plans})',
    title: { fr: 'Plan inconnu', en: 'Unknown plan' },
    when: 'admin API: a plan the configuration does not name (the text lists the plans it knows)' },
  activeFlagInvalid: { status: 400, code: 'active_flag_invalid', fr: 'Valeur "active" invalide (true ou false)', en: 'Invalid "active" value (true or false)',
    when: 'admin API: `active` is not a boolean' },
  alertInvalid: { status: 400, code: 'alert_invalid', fr: 'Alerte invalide (user_id, type et data requis)', en: 'Invalid alert (user_id, type and data required)',
    when: 'admin API: malformed alert' },
  // CONTRACT §13 (accounts)
  linkInvalid: { status: 400, code: 'link_invalid', fr: 'Lien invalide ou expiré', en: 'Invalid or expired link',
    when: '`password/reset`, `email/verify` or `magic-link/verify`: the token is missing, unknown, used, expired, or was sent to an address the account no longer '
      + 'has (or, for a sign-in link, the account was deactivated since); `oidc/exchange`: the `login_code` is missing, unknown, used or over 60 s old, the '
      + '`code_verifier` is not the one of the start\'s `code_challenge`, with `auth.oidc.bindToBrowser` the `gw_oidc` cookie the callback set is absent or '
      + 'another browser\'s, or the account was deactivated since' },
  emailNotVerified: { status: 403, code: 'email_not_verified', fr: 'Email non vérifié : ouvrez le lien de vérification reçu par email',
    en: 'Email not verified: open the verification link you received by email',
    when: 'login under `auth.requireVerifiedEmail: true`, right password, email not verified (a new link is mailed, at most one a minute)' },
  sessionNotFound: { status: 404, code: 'session_not_found', fr: 'Session introuvable', en: 'Session not found',
    when: '`DELETE /api/v1/user/sessions/{id}`: no session of the signed-in user has that id (someone else\'s included)' },
  mailUnavailable: { status: 503, code: 'mail_unavailable', fr: 'Envoi d’emails non configuré', en: 'Email sending not configured',
    when: '`password/forgot`, `email/resend` and `magic-link` without `mail.smtp`' },
  adminEmailRequired: { status: 400, code: 'email_parameter_required', fr: 'Paramètre email requis', en: 'email parameter required',
    when: 'admin API: `GET /admin/v1/users` with an empty `?email=`' },
  // CONTRACT §16 (operators)
  consoleCsrf: { status: 403, code: 'csrf_token_invalid', fr: 'Jeton CSRF invalide', en: 'Invalid CSRF token',
    when: 'console: a change without the session\'s CSRF token, or from another `Origin`; portal: a `{path}api/` request without `X-Gateway-Portal: 1`, '
      + 'with an `Origin` other than `portal.publicUrl` (or none, but on a GET), or with `Sec-Fetch-Site` other than `same-origin`' },
  consoleTicketInvalid: { status: 401, code: 'console_link_invalid', fr: 'Lien de connexion invalide, déjà utilisé ou expiré', en: 'Sign-in link invalid, already used or expired',
    when: 'console: a one-time sign-in link opened a second time, after its 10 minutes, or from another `Origin`' },
  adminListInvalid: { status: 400, code: 'user_list_invalid', fr: 'Paramètres de liste invalides (limit, cursor, active ou plan)', en: 'Invalid list parameters (limit, cursor, active or plan)',
    when: 'admin API: `GET /admin/v1/users` with a `limit` outside 1–200, a `cursor` it did not hand out, `active` other than true/false, or an unknown `plan`' },
  auditListInvalid: { status: 400, code: 'audit_list_invalid', fr: 'Paramètres de liste invalides (limit, cursor, user_id ou since)', en: 'Invalid list parameters (limit, cursor, user_id or since)',
    when: 'admin API: `GET /admin/v1/audit` with a `limit` outside 1–200, a `cursor` it did not hand out, a `user_id` that is not an id, or a `since` that is not '
      + 'a time' },
  // CONTRACT §27 (moving in)
  importBodyInvalid: {
    status: 400, code: 'import_body_invalid', fr: 'Import invalide : des lignes JSON attendues (dry_run true ou false)', en: 'Invalid import: JSON lines expected (dry_run true or false)',
    when: 'admin API: `POST /admin/v1/import/users` or `/import/keys` with a body that is not text (JSON lines, as `application/x-ndjson` or `text/plain`), or a `dry_run` other than true or false',
  },
  // CONTRACT §14 (second factor)
  codeInvalid: { status: 400, code: 'mfa_code_invalid', fr: 'Code invalide', en: 'Invalid code',
    when: '`mfa/totp/confirm`: the code is not the current one (or one step either side), was already used, or no enrolment is pending; `mfa/totp/enroll` while a '
      + 'confirmed TOTP exists' },
  codeRefused: { status: 401, code: 'mfa_code_refused', fr: 'Code invalide', en: 'Invalid code',
    when: '`mfa/verify`: wrong or already used code, or a dead (used, 5 wrong codes) or expired `mfa_token`' },
  mfaCodeRequired: { status: 403, code: 'mfa_code_required', fr: 'Code à deux facteurs requis', en: 'Two-factor code required',
    fields: ['mfa_token', 'methods'],
    when: 'login (or `magic-link/verify`, or `oidc/exchange`) of a user with confirmed TOTP and the right password (or link); the body adds `mfa_token` and '
      + '`methods`' },
  mfaRequired: { status: 403, code: 'mfa_required', fr: 'Authentification à deux facteurs requise', en: 'Two-factor authentication required',
    when: 'a route, decision or WebSocket upgrade with `mfa: required`, without an `aal2` access token (an API key never is one)' },
  recentAuthRequired: { status: 403, code: 'recent_auth_required', fr: 'Authentification récente requise', en: 'Recent authentication required',
    when: 'guard `factor` (adding, confirming, removing a factor, unlinking a provider): not a bearer token, a sign-in over 5 minutes old, or not `aal2` for a '
      + 'user with a second factor; `DELETE /api/v1/user/me` of a user with a second factor: not a sign-in at `aal2` at most 5 minutes old; '
      + '`POST /admin/v1/operator/tokens`: not from an operator\'s console session whose second factor was given in the last 5 minutes (an operator token never mints another)' },
  emailUnverified: { status: 403, code: 'email_unverified', fr: 'Adresse email non vérifiée', en: 'Email address not verified',
    when: 'guard `factor` with `mail` configured: the account\'s email is not verified; creating an organization or inviting to one without a verified email' },
  passkeyInvalid: { status: 400, code: 'passkey_invalid', fr: 'Clé d\'accès invalide', en: 'Invalid passkey',
    when: '`passkeys/register/verify`: the answer does not verify (challenge unknown, used or expired, another origin or rpId, no user verification, malformed), '
      + 'or that credential is registered already' },
  passkeyNotFound: { status: 404, code: 'passkey_not_found', fr: 'Clé d\'accès introuvable', en: 'Passkey not found',
    when: '`DELETE /api/v1/user/passkeys/{id}`: an unknown or someone else\'s passkey' },
  // CONTRACT §20 (languages)
  localeUnsupported: { status: 400, code: 'locale_unsupported', fr: 'Langue non prise en charge', en: 'Language not supported',
    when: '`PATCH /api/v1/user/me`: `locale` is not a language the gateway has texts for (fr, en and the files of `errors.messages`; `en-GB` reads as `en`), '
      + 'or is missing (register ignores such a `locale`)' },
  // CONTRACT §15 (identity providers)
  redirectNotAllowed: { status: 400, code: 'redirect_not_allowed', fr: 'Redirection non autorisée', en: 'Redirect not allowed',
    when: '`GET /api/v1/auth/oidc/{provider}/start`: `return_to` is not, character for character, an entry of `auth.oidc.returnTo` (on an `http://127.0.0.1` or '
      + '`http://[::1]` entry, any port): another page, a query, a fragment, user information or another spelling of the entry ([Identity '
      + 'providers](identity-providers.md))' },
  providerNotLinked: { status: 404, code: 'provider_not_linked', fr: 'Fournisseur non lié', en: 'Provider not linked',
    when: '`DELETE /api/v1/user/identities/{provider}`: the account has no link to that provider' },
  lastSignInMethod: { status: 409, code: 'last_sign_in_method', fr: 'Impossible de retirer la dernière méthode de connexion', en: 'Cannot remove the last sign-in method',
    when: '`DELETE /api/v1/user/identities/{provider}`: the account would be left with no way to sign in (no password, no passkey, no other provider)' },
  // CONTRACT §21 (API keys)
  apiKeyNotAccepted: { status: 401, code: 'api_key_not_accepted', fr: 'Token invalide ou expiré', en: 'Invalid or expired token',
    title: { fr: 'Clé API non acceptée ici', en: 'API key not accepted here' },
    when: '`/api/v1/user/api-keys`, `/api/v1/orgs`, `/api/v1/billing/checkout` and `/portal`: an `X-API-Key` without a bearer token (these endpoints take a bearer sign-in only)' },
  scopeInsufficient: { status: 403, code: 'scope_insufficient', fr: 'Portée insuffisante', en: 'Insufficient scope',
    fields: ['required_scopes'],
    when: 'an API key with scopes: on a route with `scopes`, without every one of them; on any other route and own endpoint but `GET /api/v1/user/me`, '
      + 'without `*` (`required_scopes` says which); on the proxy, the decisions listener and WebSocket upgrades alike' },
  scopeUnknown: { status: 400, code: 'scope_unknown', fr: 'Portée inconnue', en: 'Unknown scope',
    when: '`POST /api/v1/user/api-keys`: a scope no route declares (other than `*`)' },
  apiKeyNotFound: { status: 404, code: 'api_key_not_found', fr: 'Clé API introuvable', en: 'API key not found',
    when: '`DELETE /api/v1/user/api-keys/{id}`: an unknown, revoked or someone else\'s key' },
  apiKeyLimitReached: { status: 409, code: 'api_key_limit_reached', fr: 'Nombre maximal de clés API atteint', en: 'Maximum number of API keys reached',
    when: '`POST /api/v1/user/api-keys`: the user holds `apiKeys.maxPerOwner` keys already (rolled and expired keys do not count)' },
  // CONTRACT §22 (organizations)
  orgNotFound: { status: 404, code: 'org_not_found', fr: 'Organisation introuvable', en: 'Organization not found',
    when: '`/api/v1/orgs/{id}…`: no such organization, or the caller is not a member (membership is not disclosed)' },
  roleInsufficient: { status: 403, code: 'role_insufficient', fr: 'Rôle insuffisant', en: 'Insufficient role',
    fields: ['required_roles', 'current_role'],
    when: '`/api/v1/orgs/{id}…`: a member without the endpoint\'s role, or an admin inviting, granting or removing an owner; a route with `roles`: '
      + 'the role the request acts with is not among them; the admin API: an operator whose role (`viewer`, `support`, `admin`) is below the endpoint\'s' },
  lastOwner: { status: 409, code: 'last_owner', fr: 'Dernier propriétaire de l\'organisation', en: 'Last owner of the organization',
    when: '`PUT` or `DELETE /api/v1/orgs/{id}/members/{user_id}`: the organization\'s last owner demoted, removed or leaving; `DELETE /api/v1/user/me` '
      + 'or an operator\'s `DELETE /admin/v1/users/{id}` of an organization\'s last owner (with `orgs`: [{id, name}]), the account kept' },
  alreadyMember: { status: 409, code: 'already_member', fr: 'Déjà membre', en: 'Already a member',
    when: 'an invitation to an address that is already a member\'s; accepting an invitation while already a member' },
  invitationOtherAddress: { status: 403, code: 'invitation_other_address', fr: 'Invitation destinée à une autre adresse', en: 'Invitation meant for another address',
    when: '`POST /api/v1/orgs/invitations/accept`: the account\'s email is not the invited address, or is not verified' },
  memberNotFound: { status: 404, code: 'member_not_found', fr: 'Membre introuvable', en: 'Member not found',
    when: '`PUT` or `DELETE /api/v1/orgs/{id}/members/{user_id}`: that user is not a member of the organization' },
  invitationNotFound: { status: 404, code: 'invitation_not_found', fr: 'Invitation introuvable', en: 'Invitation not found',
    when: '`DELETE /api/v1/orgs/{id}/invitations/{inv_id}`: no pending invitation of the organization has that id (accepted, cancelled or expired ones included)' },
  orgNotApplicable: { status: 400, code: 'org_not_applicable', fr: 'Requête invalide', en: 'This route does not act for an organization',
    title: { fr: 'Organisation non applicable', en: 'Organization not applicable' },
    when: 'a route, decision or WebSocket upgrade whose route declares no `org:`: the request sends `Gateway-Org`' },
  orgAccessDenied: { status: 403, code: 'org_access_denied', fr: 'Accès à l\'organisation refusé', en: 'Access to the organization denied',
    when: 'a route with `org:`: `Gateway-Org` names an organization the caller is not a member of, or none; sent with a personal API key, or with an organization key of another organization' },
  orgRequired: { status: 403, code: 'org_required', fr: 'Organisation requise', en: 'Organization required',
    when: 'a route with `org: required` (or `roles`): the request does not act for an organization' },
  orgNameInvalid: { status: 400, code: 'org_name_invalid', fr: 'Nom invalide', en: 'Invalid name',
    when: '`POST /api/v1/orgs`, `PATCH /api/v1/orgs/{id}`: the name is empty, over 64 characters, or holds a control, bidi or line-break character, `://`, `www.` or `@` '
      + '(also in its NFKC form): a name, never something a mail client links' },
  orgLimitReached: { status: 409, code: 'org_limit_reached', fr: 'Nombre maximal d\'organisations atteint', en: 'Maximum number of organizations reached',
    when: '`POST /api/v1/orgs`: the user owns `organizations.maxOwnedPerUser` organizations already' },
  // CONTRACT §31: an organization's domains
  domainNotAllowed: { status: 400, code: 'domain_not_allowed', fr: 'Domaine non autorisé', en: 'Domain not allowed',
    when: '`POST /api/v1/orgs/{id}/domains`: not a domain name, an IP address, a public suffix (the Public Suffix List) or a public mail domain' },
  domainTaken: { status: 409, code: 'domain_taken', fr: 'Domaine déjà vérifié par une autre organisation', en: 'Domain already verified by another organization',
    when: '`POST /api/v1/orgs/{id}/domains` and `…/verify`: another organization verified that domain' },
  domainUnverified: { status: 409, code: 'domain_unverified', fr: 'Domaine non vérifié', en: 'Domain not verified',
    when: '`POST /api/v1/orgs/{id}/domains/{domain}/verify`: the TXT record `_gateway-verify.<domain>` does not hold the claim\'s value, or the claim expired' },
  domainNotFound: { status: 404, code: 'domain_not_found', fr: 'Domaine introuvable', en: 'Domain not found',
    when: '`…/orgs/{id}/domains/{domain}`: the organization has not claimed that domain' },
  // CONTRACT §31: an organization's SCIM tokens (SCIM's own answers under /scim/v2 are SCIM's, outside the catalog: src/scim/errors.ts)
  scimTokenNotFound: { status: 404, code: 'scim_token_not_found', fr: 'Jeton SCIM introuvable', en: 'SCIM token not found',
    when: '`DELETE /api/v1/orgs/{id}/scim/tokens/{token_id}`: the organization has no token with that id (revoked already, or another organization\'s)' },
  // CONTRACT §24: operators
  lastAdmin: { status: 409, code: 'last_admin', fr: 'Dernier administrateur', en: 'Last administrator',
    when: '`PUT /admin/v1/operators/{id}/role` and `DELETE /admin/v1/operators/{id}` (and `gateway operators set-role`, `remove`): the last `admin` operator '
      + 'demoted or removed while `admin.apiKey` is empty' },
  operatorSelf: { status: 409, code: 'operator_self', fr: 'Action impossible sur son propre compte', en: 'Not allowed on your own account',
    when: '`DELETE /admin/v1/operators/{id}/mfa`: an operator resetting their own second factor (another admin, or `gateway operators reset-mfa`, does it)' },
  // CONTRACT §23: plans that follow payment
  priceUnknown: { status: 400, code: 'price_unknown', fr: 'Prix inconnu', en: 'Unknown price',
    when: '`POST /api/v1/billing/checkout`: `price` is not a key of `billing.stripe.prices`' },
  signatureInvalid: { status: 400, code: 'signature_invalid', fr: 'Signature invalide', en: 'Invalid signature',
    when: '`POST /api/v1/billing/stripe/webhook`: `Stripe-Signature` missing, not made with any of `billing.stripe.webhookSecrets`, or dated more than 300 s before or after now' },
  subscriptionNone: { status: 404, code: 'subscription_none', fr: 'Aucun abonnement', en: 'No subscription',
    when: '`POST /api/v1/billing/portal`: the owner has no Stripe customer yet (no checkout completed)' },
  subscriptionAlreadyActive: { status: 409, code: 'subscription_already_active', fr: 'Abonnement déjà actif', en: 'Subscription already active',
    when: '`POST /api/v1/billing/checkout`: the owner already has an active or trialing subscription (the portal changes it)' },
  planManagedByBilling: { status: 409, code: 'plan_managed_by_billing', fr: 'Plan géré par la facturation', en: 'Plan managed by billing',
    when: 'admin API `PUT /admin/v1/users/{id}/plan` and `/orgs/{id}/plan`: a subscription (active, trialing, or past_due within its grace) gives the owner '
      + 'the plan in `billing_plan`, and the body asks another without `"override": true`' },
  paymentUnavailable: { status: 503, code: 'payment_unavailable', fr: 'Service de paiement indisponible', en: 'Payment service unavailable',
    when: '`POST /api/v1/billing/checkout` and `/portal`: Stripe did not answer, or answered an error; '
      + '`DELETE /api/v1/user/me`, `DELETE /api/v1/orgs/{id}` and an operator\'s `DELETE /admin/v1/users/{id}` with a running subscription: '
      + 'Stripe could not be told to cancel it at period end, and the owner is kept' },
  stripeEventFailed: { status: 500, code: 'stripe_event_failed', fr: 'Événement non appliqué, réessayez plus tard', en: 'Event not applied, retry later',
    when: '`POST /api/v1/billing/stripe/webhook`: fetching the subscription from Stripe failed; nothing was applied, and Stripe retries the event' },
  // CONTRACT §31: enterprise sign-in for organizations
  ssoConnectionNotFound: { status: 404, code: 'sso_connection_not_found', fr: 'Aucune connexion d\'organisation', en: 'No organization connection',
    when: '`GET /api/v1/auth/sso`: no SAML connection for the email\'s domain (a verified domain of an organization that has one) or for `org`; '
      + '`GET`, `DELETE /api/v1/orgs/{id}/sso/saml`, `PUT /admin/v1/orgs/{id}/sso/saml` and `GET /api/v1/auth/saml/{connection}/metadata`: no such connection' },
  ssoRequired: { status: 403, code: 'sso_required', fr: 'Connexion par l\'organisation requise', en: 'Organization sign-in required',
    fields: ['sso_url'],
    when: '`login`, `register`, `magic-link/verify`, `passkeys/login/verify`, an invitation\'s redemption (and a provider sign-in, `#error=sso_required`) for an '
      + 'address of a verified domain of an organization whose SAML connection has `enforce`, whatever the password; `oidc/exchange` and `mfa/verify` of such an '
      + 'address\'s login code or mfa_token that did not come from that connection (given before `enforce`); the body adds `sso_url`' },
} as const satisfies Record<string, CatalogEntry>;
