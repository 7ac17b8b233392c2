// The parts the own endpoints' OpenAPI fragments are made of: the error answers (by catalog name),
// the shapes several endpoints answer with, the security requirements. Documentation only (../openapi.ts).
import type { FastifySchema } from 'fastify';
import { ERRORS, type ErrorCode as ErrorName } from '../errors/index.js';

/** What documents an endpoint: tags, summary, security, params, body, responses. */
export type EndpointSchema = FastifySchema & Record<string, unknown>;

/**
 * An error answer that may be any of `names` (CONTRACT §20): `error` always, `code` with
 * errors.codes or problem details (Accept: application/problem+json), whose other members follow.
 */
export const errorOf = (names: readonly ErrorName[]) => ({
  description: names.map((n) => `${ERRORS[n].code}: ${ERRORS[n].en}`).join(' / '),
  type: 'object', required: ['error'],
  properties: {
    error: { type: 'string' },
    code: { enum: [...new Set(names.map((n) => ERRORS[n].code))], description: 'With errors.codes, or in problem details (type, title, status, detail: docs/errors.md)' },
  },
});
export const message = { type: 'object', required: ['message'], properties: { message: { type: 'string' } } };
/**
 * The answer of a credential change made from a session (CONTRACT §33): its own fields, and beside
 * them the session's new pair (every access token of before the change is refused).
 */
export function withNewPair(shape: { properties: Record<string, unknown>; required?: string[] }) {
  return { type: 'object', required: [...(shape.required ?? []), ...tokenPair.required], properties: { ...shape.properties, ...tokenPair.properties } };
}
export const tokenPair = {
  type: 'object',
  required: ['access_token', 'refresh_token', 'token_type', 'plan'],
  properties: {
    access_token: { type: 'string', description: 'JWT, 15 minutes' },
    refresh_token: { type: 'string', description: 'JWT, 30 days, single use' },
    token_type: { const: 'Bearer' },
    plan: { type: 'string' },
  },
};
export const limits = {
  type: 'object',
  properties: { daily: { type: ['integer', 'null'] }, monthly: { type: ['integer', 'null'] }, perMinute: { type: ['integer', 'null'] } },
  description: 'The plan\'s limits; null: unlimited (docs/plans-and-quotas.md)',
};
export const adminUser = {
  type: 'object',
  properties: {
    id: { type: 'integer' }, email: { type: 'string' }, plan: { type: 'string' }, is_active: { enum: [0, 1] }, active: { type: 'boolean', description: 'is_active as a boolean (CONTRACT §24)' },
    daily_usage: { type: 'integer' }, last_usage_date: { type: ['string', 'null'], format: 'date' }, created_at: { type: 'string', format: 'date-time' },
    email_verified_at: { type: ['string', 'null'], format: 'date-time' },
    external_id: { type: ['string', 'null'], description: 'the id an imported user had before (CONTRACT §27)' },
  },
};
export const session = {
  type: 'object',
  properties: {
    id: { type: 'integer' }, created_at: { type: 'string', format: 'date-time' }, last_used_at: { type: 'string', format: 'date-time', description: 'the last refresh' },
    user_agent: { type: ['string', 'null'] }, ip: { type: ['string', 'null'] }, current: { type: 'boolean', description: 'the session of the access token used' },
  },
};
export const passkey = {
  type: 'object',
  properties: { id: { type: 'integer' }, name: { type: 'string' }, created_at: { type: 'string', format: 'date-time' }, last_used_at: { type: ['string', 'null'], format: 'date-time' } },
};
export const identity = {
  type: 'object',
  properties: { provider: { type: 'string' }, issuer: { type: 'string' }, subject: { type: 'string' }, email: { type: ['string', 'null'] }, created_at: { type: 'string', format: 'date-time' } },
};
export const userId = { type: 'object', required: ['id'], properties: { id: { type: 'string', pattern: '^[1-9][0-9]{0,9}$' } } };
export const credentials = (fields: string[]) => ({
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
export const bearer: Array<Record<string, string[]>> = [{ bearer: [] }, { apiKey: [] }];
export const bearerOnly: Array<Record<string, string[]>> = [{ bearer: [] }];
/** The sign-in's second-factor answer (CONTRACT §14), and the other 403s of the same endpoint. */
export const mfaChallenge = (...others: ErrorName[]) => ({
  ...errorOf(['mfaCodeRequired', ...others]),
  description: `${ERRORS.mfaCodeRequired.code}: ${ERRORS.mfaCodeRequired.en}, with mfa_token and methods; no pair until POST /api/v1/auth/mfa/verify with the mfa_token`
    + others.map((n) => ` / ${ERRORS[n].code}: ${ERRORS[n].en}`).join(''),
  properties: {
    ...errorOf(['mfaCodeRequired', ...others]).properties,
    mfa_token: { type: 'string', description: 'mfa_code_required: for POST /api/v1/auth/mfa/verify; 5 minutes, 5 wrong codes' },
    methods: { type: 'array', items: { enum: ['totp', 'recovery_code'] }, description: 'mfa_code_required: the second factors the account can answer with' },
  },
});
