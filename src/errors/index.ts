// The errors room's door: every error the gateway answers is declared once in catalog.ts, and
// answered here, in the shape the operator and the client asked for (CONTRACT §20): the spec's
// `{"error": <French>}` by default, a `code` with `errors.codes`, RFC 9457 problem details when the
// client's Accept names them, in the language `errors.language` picks. Handlers send errors by
// name (sendError / sendDenial / GatewayError); no text is spelled anywhere else. The room's one
// door: the listing (GET /api/v1/errors, `gateway errors`), the operator's message files and the
// negotiation of a language are reached through it too (test/architecture/imports.test.ts).
import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyReply } from 'fastify';
import { CATALOG } from './catalog.js';
import { DEFAULT_STYLE, errorMessage, errorTitle, negotiates, successMessage, type ErrorName, type ErrorStyle, type Language, type Nouns, type Params, type SuccessName } from './messages.js';
import { negotiateLanguage, wantsProblem } from './negotiation.js';

export { CATALOG as ERRORS } from './catalog.js';
export { SUCCESS } from './success.js';
export { LANGUAGE_TAG, namedLanguage, negotiateLanguage, supportedLanguage } from './negotiation.js';
export { catalogTable, ERRORS_PATH, errorList } from './listing.js';
export { errorStyleOf, readMessageFiles } from './messageFiles.js';
export { DEFAULT_STYLE, type ErrorStyle, type Language, type Nouns, type Params } from './messages.js';
/** An error's name in the catalog (camelCase: metrics, traces, logs); its `code` is what clients read. */
export type ErrorCode = ErrorName;
export type ErrorBody = { error: string } & Record<string, unknown>;

declare module 'fastify' {
  interface FastifyInstance {
    /** How this listener's answers read (registerCommon); absent on an app built without it: the spec's. */
    errorStyle?: ErrorStyle;
  }
}

/** The spec's upgrade_url (`plans.upgradeUrl` unset). */
export const SPEC_UPGRADE_URL = '/api/v1/subscription/upgrade';
/** The spec's wording of the quota messages (`plans.usageNoun` unset). */
export const SPEC_USAGE_NOUN: Nouns = { fr: { one: 'course', many: 'courses' }, en: { one: 'request', many: 'requests' } };
const CHARACTERS: Nouns = { fr: { one: 'caractère', many: 'caractères' }, en: { one: 'character', many: 'characters' } };

/** The daily-limit text's parameters: it names the plan and its limit (CONTRACT §6, §12, §20). */
export function dailyLimitParams(plan: string, limit: number, nouns: Nouns = SPEC_USAGE_NOUN): Params {
  return { plan, limit, noun: { count: limit, nouns } };
}

/** The too-short text names the configured minimum (auth.passwordMinLength). */
export function passwordTooShortParams(min: number): Params {
  return { min, characters: { count: min, nouns: CHARACTERS } };
}

/** The unknown-plan text lists the plans the configuration knows. */
export function planUnknownParams(plans: readonly string[]): Params {
  return { plans: { list: plans } };
}

/** A denial: data a guard or handler returns, never thrown (STYLE principle 4). */
export interface Denial {
  code: ErrorCode;
  extra?: Record<string, unknown>;
  /** the values of the text's `{placeholders}` */
  params?: Params;
  headers?: Record<string, string>;
}

/**
 * The name metrics, traces and logs give a denial: two codes split from one (token_missing from
 * token_invalid, user_inactive from user_not_found) keep the name an alert already matches.
 */
export function telemetryName(code: ErrorCode): ErrorCode {
  if (code === 'tokenMissing') return 'tokenInvalid';
  if (code === 'userInactive') return 'userNotFound';
  return code;
}

/** The language of the answer to a request with these headers. */
export function languageOf(style: ErrorStyle, headers: IncomingHttpHeaders | undefined): Language {
  if (!negotiates(style)) return style.language;
  const header = headers?.['accept-language'];
  return negotiateLanguage(typeof header === 'string' ? header : undefined, style.languages, 'fr');
}

/** What an error answer is: its status, content type, body and Vary. */
export interface ErrorAnswer {
  status: number;
  contentType: string;
  body: ErrorBody;
  vary: string;
}

/** The answer to `denial` for a request with `headers` (undefined: a request that could not be read). */
export function errorAnswer(style: ErrorStyle, headers: IncomingHttpHeaders | undefined, denial: Denial): ErrorAnswer {
  const entry = CATALOG[denial.code];
  const language = languageOf(style, headers);
  const message = errorMessage(style, denial.code, language, denial.params);
  const vary = negotiates(style) ? 'Accept, Accept-Language' : 'Accept';
  if (wantsProblem(headers?.accept)) {
    const body = {
      type: `urn:gateway:error:${entry.code}`, title: errorTitle(style, denial.code, language), status: entry.status,
      code: entry.code, detail: message, error: message, ...denial.extra,
    };
    return { status: entry.status, contentType: 'application/problem+json; charset=utf-8', body, vary };
  }
  const body: ErrorBody = style.codes ? { error: message, code: entry.code, ...denial.extra } : { error: message, ...denial.extra };
  return { status: entry.status, contentType: 'application/json; charset=utf-8', body, vary };
}

/** The spec's body of an error, for what answers outside a listener's style (health checks of a plain app). */
export function errorBody(code: ErrorCode, extra?: Record<string, unknown>): ErrorBody {
  return errorAnswer(DEFAULT_STYLE, undefined, { code, extra }).body;
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

/** Adds `names` to the reply's Vary (CORS may have put Origin there already). */
function addVary(reply: FastifyReply, names: string): void {
  const current = reply.getHeader('vary');
  reply.header('vary', current ? `${String(current)}, ${names}` : names);
}

export function sendDenial(reply: FastifyReply, denial: Denial): FastifyReply {
  const answer = errorAnswer(reply.server.errorStyle ?? DEFAULT_STYLE, reply.request.headers, denial);
  if (answer.status === 401 && !denial.headers?.['www-authenticate']) reply.headers(PLAIN_CHALLENGE);
  if (denial.headers) reply.headers(denial.headers);
  addVary(reply, answer.vary);
  return reply.code(answer.status).type(answer.contentType).send(answer.body);
}

/** `{"message": …}` of a success answer, in the request's language; `extra` follows it. */
export function successBody(reply: FastifyReply, name: SuccessName, extra?: Record<string, unknown>): { message: string } & Record<string, unknown> {
  const style = reply.server.errorStyle ?? DEFAULT_STYLE;
  if (negotiates(style)) addVary(reply, 'Accept-Language');
  return { message: successMessage(style, name, languageOf(style, reply.request.headers)), ...extra };
}

/** Thrown where a handler cannot go on; the error handler answers it from the catalog. */
export class GatewayError extends Error {
  constructor(readonly code: ErrorCode, readonly extra?: Record<string, unknown>) {
    super(CATALOG[code].fr);
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
