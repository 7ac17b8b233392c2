// Operators' passkeys (CONTRACT §24): with admin.passkeys set, an operator's second factor at the
// console's sign-in may be a passkey instead of a TOTP code. Offered only to pages of
// admin.passkeys.origins (a console reached by its IP offers TOTP only: WebAuthn binds a passkey to
// a host name). An operator adds one from a console session whose second factor is recent; a reset
// of their factors (admin API, `gateway operators reset-mfa`) removes them with the TOTP. The
// ceremonies are the users' (auth/passkeys/ceremony.ts), on the operators' tables.
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Audit } from '../audit.js';
import { authenticationOptions, passkeyName, registrationOptions, verifyAuthentication, verifyRegistration, type PasskeyOwners, type RelyingParty } from '../auth/index.js';
import { sendError } from '../errors/index.js';
import { headerValue } from '../http.js';
import type { Database, Queryable } from '../storage/database/index.js';
import { findOperator, peekEnrolment } from '../storage/operators/index.js';
import { sha256Hex } from '../credentials/digest.js';
import { textField } from '../http.js';
import { insertPasskey, OPERATOR_PASSKEYS } from '../storage/accounts/index.js';
import { operatorChangeSession, type ConsoleDeps } from './console.js';
import { RECENT_SECOND_FACTOR_MS } from './operatorRoutes.js';

/**
 * An operator's WebAuthn user handle: apart from the users' (their bare id), so that an
 * authenticator holding both for the same rpId never lets one replace the other.
 */
const OPERATORS: PasskeyOwners = { tables: OPERATOR_PASSKEYS, handleOf: (operatorId) => `operator:${operatorId}` };

export interface OperatorPasskeyDeps {
  db: Database;
  audit: Audit;
  console: ConsoleDeps;
  relyingParty: RelyingParty;
}

/** Whether the page asking is one a passkey can be used from: an origin of admin.passkeys. */
export const passkeyOffered = (rp: RelyingParty | undefined, request: FastifyRequest): rp is RelyingParty => Boolean(rp?.origins.includes(pageOrigin(request)));

/**
 * The page's origin: its Origin header; else (a browser's same-origin GET sends none; so does curl)
 * the address it asked for. WebAuthn checks the origin again inside each answer, so this only
 * decides what is offered, never what is accepted.
 */
const pageOrigin = (request: FastifyRequest) => headerValue(request.headers, 'origin') || `${request.protocol}://${request.host}`;

/** In `tx`: whether the answer is a sign-in by one of the operator's passkeys (its challenge used up, its counter moved). */
export const operatorPasskeyVerifies = (tx: Queryable, rp: RelyingParty, operatorId: number, answer: unknown, now: Date, log: FastifyBaseLogger) =>
  verifyAuthentication(tx, OPERATORS, rp, operatorId, answer, now, log);

/** The credential of an enrolment's passkey, if the answer verifies against a live challenge of the operator's (used up here). */
export const enrolmentPasskey = (db: Queryable, rp: RelyingParty, operatorId: number, answer: unknown, now: Date, log: FastifyBaseLogger) =>
  verifyRegistration(db, OPERATORS, rp, operatorId, answer, now, log);

/** Registered in the operator sign-in's scope (the auth rate limit), only with admin.passkeys. */
export async function operatorPasskeyRoutes(app: FastifyInstance, deps: OperatorPasskeyDeps): Promise<void> {
  // Elsewhere (the console by its IP, another site) these routes do not exist.
  const offered = async (request: FastifyRequest, reply: FastifyReply) => {
    if (passkeyOffered(deps.relyingParty, request)) return undefined;
    reply.callNotFound();
    return reply;
  };
  app.get('/console/operator/passkey', { preHandler: offered }, async () => ({ rp_id: deps.relyingParty.rpId }));
  app.post('/console/operator/passkey/login/options', { preHandler: offered }, async () => authenticationOptions(deps.db, OPERATORS, deps.relyingParty.rpId, deps.console.clock()));
  app.post('/console/operator/passkey/register/options', { preHandler: offered }, async (request, reply) => {
    const operator = await recentOperator(deps, request, reply);
    if (!operator) return reply;
    return registrationOptions(deps.db, OPERATORS, deps.relyingParty, { id: operator.id, name: operator.email }, deps.console.clock());
  });
  app.post('/console/operator/passkey/register/verify', { preHandler: offered }, async (request, reply) => register(deps, request, reply));
  // The enrolment link's second factor may be a passkey instead of TOTP: its options, for the link's operator.
  app.post('/console/operator/enrolment/passkey/options', { preHandler: offered }, async (request, reply) => {
    const now = deps.console.clock();
    const id = await peekEnrolment(deps.db, sha256Hex(textField(request.body, 'token')), now);
    const operator = id === undefined ? undefined : await findOperator(deps.db, id);
    if (!operator) return sendError(reply, 'consoleTicketInvalid');
    return registrationOptions(deps.db, OPERATORS, deps.relyingParty, { id: operator.id, name: operator.email }, now);
  });
}

/** The operator behind a console change whose second factor is at most 5 minutes old; else the refusal is sent. */
async function recentOperator(deps: OperatorPasskeyDeps, request: FastifyRequest, reply: FastifyReply) {
  const session = await operatorChangeSession(deps.console, request);
  if (!session) return void sendError(reply, 'adminUnauthorized');
  if (deps.console.clock().getTime() - session.authTime > RECENT_SECOND_FACTOR_MS) return void sendError(reply, 'recentAuthRequired');
  const operator = await findOperator(deps.db, session.operator);
  return operator ?? void sendError(reply, 'adminUnauthorized');
}

async function register(deps: OperatorPasskeyDeps, request: FastifyRequest, reply: FastifyReply) {
  const operator = await recentOperator(deps, request, reply);
  if (!operator) return reply;
  const now = deps.console.clock();
  const credential = await verifyRegistration(deps.db, OPERATORS, deps.relyingParty, operator.id, request.body, now, request.log);
  if (!credential) return sendError(reply, 'passkeyInvalid');
  const created = await deps.db.transaction(async (tx) => {
    const row = await insertPasskey(tx, operator.id, credential, passkeyName(request.body), now, OPERATOR_PASSKEYS);
    if (!row) return undefined; // that credential is registered already
    await deps.audit.record({ type: 'operator.passkey_added', actor: 'operator', actorId: operator.id, operatorEmail: operator.email, ip: request.ip, data: { passkey_id: row.id } }, tx);
    return row;
  });
  if (!created) return sendError(reply, 'passkeyInvalid');
  request.log.info({ operatorId: operator.id, passkeyId: created.id }, 'console: operator passkey registered');
  return reply.code(201).send({ id: created.id, name: created.name, created_at: created.created_at.toISOString() });
}
