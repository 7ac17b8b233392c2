// Every error the gateway answers, declared once: status and French message.
// Handlers send them by name (sendError / GatewayError); no message is spelled anywhere else.
import type { FastifyReply } from 'fastify';

export const UPGRADE_URL = '/api/v1/subscription/upgrade';

export const ERRORS = {
  // spec §7
  emailInvalid: { status: 400, message: 'Email invalide' },
  passwordTooShort: { status: 400, message: 'Mot de passe trop court (min 8 caractères)' },
  loginFieldsRequired: { status: 400, message: 'Email et mot de passe requis' },
  refreshTokenMissing: { status: 400, message: 'refresh_token manquant' },
  invalidCredentials: { status: 401, message: 'Identifiants invalides' },
  refreshTokenUndecodable: { status: 401, message: 'Refresh token invalide ou expiré' },
  refreshTokenInactive: { status: 401, message: 'Refresh token invalide, révoqué ou expiré' },
  userNotFound: { status: 401, message: 'Utilisateur introuvable' },
  tokenInvalid: { status: 401, message: 'Token invalide ou expiré' },
  notAuthenticated: { status: 401, message: 'Non authentifié' },
  planInsufficient: { status: 403, message: 'Plan insuffisant' },
  emailTaken: { status: 409, message: 'Email déjà enregistré' },
  dailyLimitReached: { status: 429, message: 'Limite quotidienne atteinte (plan free: 1 course/jour)' },
  internal: { status: 500, message: 'Erreur interne' },
  // CONTRACT §6
  webhookUrlInvalid: { status: 400, message: 'URL de webhook invalide (HTTPS requis)' },
  webhookUrlForbidden: { status: 400, message: 'URL de webhook non autorisée' },
  routeNotFound: { status: 404, message: 'Route introuvable' },
  methodNotAllowed: { status: 405, message: 'Méthode non autorisée' },
  payloadTooLarge: { status: 413, message: 'Requête trop volumineuse' },
  rateLimited: { status: 429, message: 'Trop de tentatives, réessayez plus tard' },
  // CONTRACT §12
  tooManyRequests: { status: 429, message: 'Trop de requêtes, réessayez plus tard' },
  upstreamUnavailable: { status: 502, message: 'Service en amont indisponible' },
  upstreamTimeout: { status: 504, message: 'Service en amont trop lent' },
  storageUnavailable: { status: 503, message: 'Service temporairement indisponible' },
  // added by this gateway (docs/errors.md)
  passwordTooLong: { status: 400, message: 'Mot de passe trop long (max 1024 octets)' },
  badRequest: { status: 400, message: 'Requête invalide' },
  headersTooLarge: { status: 431, message: 'En-têtes de requête trop volumineux' },
  requestTimeout: { status: 408, message: 'Requête trop lente à arriver' },
  expectationFailed: { status: 417, message: 'En-tête Expect non pris en charge' },
  adminUnauthorized: { status: 401, message: 'Clé d’administration invalide' },
  adminNotFound: { status: 404, message: 'Ressource introuvable' },
  planUnknown: { status: 400, message: 'Plan inconnu (free, premium ou pro)' },
  activeFlagInvalid: { status: 400, message: 'Valeur "active" invalide (true ou false)' },
  alertInvalid: { status: 400, message: 'Alerte invalide (user_id, type et data requis)' },
  // CONTRACT §13 (accounts)
  linkInvalid: { status: 400, message: 'Lien invalide ou expiré' },
  emailNotVerified: { status: 403, message: 'Email non vérifié : ouvrez le lien de vérification reçu par email' },
  sessionNotFound: { status: 404, message: 'Session introuvable' },
  mailUnavailable: { status: 503, message: 'Envoi d’emails non configuré' },
  adminEmailRequired: { status: 400, message: 'Paramètre email requis' },
  // CONTRACT §16 (operators)
  consoleCsrf: { status: 403, message: 'Jeton CSRF invalide' },
  consoleTicketInvalid: { status: 401, message: 'Lien de connexion invalide, déjà utilisé ou expiré' },
  adminListInvalid: { status: 400, message: 'Paramètres de liste invalides (limit, cursor, active ou plan)' },
  auditListInvalid: { status: 400, message: 'Paramètres de liste invalides (limit, cursor, user_id ou since)' },
  // CONTRACT §14 (second factor)
  codeInvalid: { status: 400, message: 'Code invalide' },
  codeRefused: { status: 401, message: 'Code invalide' },
  mfaCodeRequired: { status: 403, message: 'Code à deux facteurs requis' },
  mfaRequired: { status: 403, message: 'Authentification à deux facteurs requise' },
  recentAuthRequired: { status: 403, message: 'Authentification récente requise' },
  emailUnverified: { status: 403, message: 'Adresse email non vérifiée' },
  passkeyInvalid: { status: 400, message: 'Clé d\'accès invalide' },
  passkeyNotFound: { status: 404, message: 'Clé d\'accès introuvable' },
  // CONTRACT §15 (identity providers)
  redirectNotAllowed: { status: 400, message: 'Redirection non autorisée' },
  providerNotLinked: { status: 404, message: 'Fournisseur non lié' },
  lastSignInMethod: { status: 409, message: 'Impossible de retirer la dernière méthode de connexion' },
} as const satisfies Record<string, { status: number; message: string }>;

export type ErrorCode = keyof typeof ERRORS;
export type ErrorBody = { error: string } & Record<string, unknown>;

/** The daily-limit text names the plan and its limit (CONTRACT §6, §12); the spec's text for free at 1. */
export function dailyLimitMessage(plan: string, limit: number): string {
  return `Limite quotidienne atteinte (plan ${plan}: ${limit} ${limit === 1 ? 'course' : 'courses'}/jour)`;
}

/** The unknown-plan text lists the plans the configuration knows; the catalog's text for the spec's three. */
export function planUnknownMessage(plans: readonly string[]): string {
  return `Plan inconnu (${plans.length > 1 ? `${plans.slice(0, -1).join(', ')} ou ${plans.at(-1)}` : plans.join('')})`;
}

/** The too-short text names the configured minimum (auth.passwordMinLength); the spec's text for 8. */
export function passwordTooShortMessage(min: number): string {
  return min === 8 ? ERRORS.passwordTooShort.message : `Mot de passe trop court (min ${min} caractère${min > 1 ? 's' : ''})`;
}

export function errorBody(code: ErrorCode, extra?: Record<string, unknown>): ErrorBody {
  return { error: ERRORS[code].message, ...extra };
}

/** A denial: data a guard or handler returns, never thrown (STYLE principle 4). */
export interface Denial {
  code: ErrorCode;
  extra?: Record<string, unknown>;
  /** overrides the catalog text where the text depends on configuration (daily limit) */
  message?: string;
  headers?: Record<string, string>;
}

export function sendError(reply: FastifyReply, code: ErrorCode, extra?: Record<string, unknown>): FastifyReply {
  return sendDenial(reply, { code, extra });
}

/**
 * RFC 6750 §3: a 401 says how to authenticate. `error="invalid_token"` when the request presented a
 * credential that was refused, so a client knows to refresh rather than to log in.
 */
export function bearerChallenge(tokenPresented: boolean): Record<string, string> {
  return { 'www-authenticate': tokenPresented ? 'Bearer realm="gateway", error="invalid_token"' : 'Bearer realm="gateway"' };
}
const PLAIN_CHALLENGE = bearerChallenge(false);

/** The body a denial is answered with. */
export function denialBody(denial: Denial): ErrorBody {
  const body = errorBody(denial.code, denial.extra);
  if (denial.message) body.error = denial.message;
  return body;
}

export function sendDenial(reply: FastifyReply, denial: Denial): FastifyReply {
  const body = denialBody(denial);
  const status = ERRORS[denial.code].status;
  if (status === 401 && !denial.headers?.['www-authenticate']) reply.headers(PLAIN_CHALLENGE);
  if (denial.headers) reply.headers(denial.headers);
  return reply.code(status).type('application/json; charset=utf-8').send(body);
}

/** Thrown where a handler cannot go on; the error handler answers it from the catalog. */
export class GatewayError extends Error {
  constructor(readonly code: ErrorCode, readonly extra?: Record<string, unknown>) {
    super(ERRORS[code].message);
    this.name = 'GatewayError';
  }
}

/** An infrastructure fault (Postgres unreachable): answered 503, never 500. */
export class StorageUnavailableError extends Error {
  constructor(cause: unknown) {
    super(`storage unavailable: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'StorageUnavailableError';
  }
}
