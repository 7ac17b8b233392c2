// /admin/v1/operators and /admin/v1/operator/tokens (CONTRACT §24): operators created, listed, their
// role changed, removed or their factors reset (admin only), and an operator's own personal tokens.
// Creating one and resetting its factors answer with a one-time enrolment link (operatorTokens.ts),
// as `gateway operators add` and `reset-mfa` print it: that is how `--admin` and the console hand it over.
// Registered inside adminRoutes, so access.ts's hook has identified the caller and checked the role.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Audit, AuditType } from '../audit.js';
import { sendError, type ErrorCode as ErrorName } from '../errors/index.js';
import { errors } from '../openapi.js';
import { field } from './views.js';
import { normalizeEmail } from '../credentials/emailAddress.js';
import { textField } from '../http.js';
import type { Database, Queryable } from '../storage/database/index.js';
import { parseUserId } from '../storage/accounts/index.js';
import {
  deleteOperatorToken, findOperator, insertOperator, isOperatorRole, listOperators, listOperatorTokens, removeOperator, removeOperatorFactors, setOperatorRole,
  type OperatorChange, type OperatorRow,
} from '../storage/operators/index.js';
import { by, callerOf } from './access.js';
import { enrolmentLink, mintOperatorToken, operatorTokenView, operatorView, TOKEN_DAYS_DEFAULT, TOKEN_DAYS_MAX } from './operatorTokens.js';

/** This file's routes' documentation (openapi.ts takes a schema given beside the handler). */
const described = (summary: string, refusals: ErrorName[]) => ({
  tags: ['admin'], summary, security: [{ adminKey: [] }], response: errors(...refusals, 'adminUnauthorized', 'adminNotFound'),
});

/** A token is minted only from a console session whose second factor is this recent. */
export const RECENT_SECOND_FACTOR_MS = 5 * 60_000;

export interface OperatorRoutesDeps {
  db: Database;
  audit: Audit;
  apiKey: () => string;
  clock: () => Date;
  /** The console's origin, that enrolment links are built from (consoleOrigin.ts linkOrigin); none: answered as null. */
  linkOrigin: () => string | undefined;
}

type ById = { Params: { id: string } };
type Handler<R extends { Params?: unknown }> = (deps: OperatorRoutesDeps, request: FastifyRequest<R & { Body: unknown }>, reply: FastifyReply) => Promise<unknown>;

export async function operatorRoutes(app: FastifyInstance, deps: OperatorRoutesDeps): Promise<void> {
  const on = <R extends { Params?: unknown }>(handler: Handler<R>) => (request: FastifyRequest<R & { Body: unknown }>, reply: FastifyReply) => handler(deps, request, reply);
  const admin = (summary: string, ...refusals: ErrorName[]) => ({ config: { role: 'admin' as const }, schema: described(summary, refusals) });
  // Any operator's own tokens: the least role.
  const own = (summary: string, ...refusals: ErrorName[]) => ({ config: { role: 'viewer' as const }, schema: described(summary, refusals) });
  app.post('/v1/operators', admin('Create an operator {email, role}: 201 with its one-time enrolment link (24 h)', 'badRequest', 'emailInvalid', 'emailTaken'), on(create));
  app.get('/v1/operators', admin('The operators, with their role and whether they enrolled and have a second factor'), async () => ({ operators: (await listOperators(deps.db)).map(operatorView) }));
  app.put('/v1/operators/:id/role', admin('Set an operator\'s role {role}: viewer, support or admin', 'badRequest', 'lastAdmin'), on<ById>(changeRole));
  app.delete('/v1/operators/:id', admin('Remove an operator: its tokens stop working at once', 'lastAdmin'), on<ById>(remove));
  app.delete('/v1/operators/:id/mfa', admin('Remove another operator\'s second factor (never one\'s own); answers a new enrolment link', 'operatorSelf'), on<ById>(resetFactors));
  const minting = 'Mint a personal token {name, expires_in_days ≤ 365 (default 90)}: from a console session with a recent second factor';
  app.post('/v1/operator/tokens', own(minting, 'badRequest', 'recentAuthRequired'), on(mint));
  app.get('/v1/operator', own('Who the caller is: the operator and their role now, or the shared key (role admin); the console disables what the role does not allow'), whoAmI);
  app.get('/v1/operator/tokens', own('The calling operator\'s own tokens (never the token itself)'), on(listTokens));
  app.delete('/v1/operator/tokens/:id', own('Revoke one of the calling operator\'s tokens'), on<ById>(revokeToken));
}

const REFUSALS = { lastAdmin: 'lastAdmin', notFound: 'adminNotFound', taken: 'emailTaken' } as const;

/** The operator change and its audit event, in one transaction; the answer to the caller. */
async function changed(
  deps: OperatorRoutesDeps, request: FastifyRequest, reply: FastifyReply, type: AuditType,
  change: (tx: Queryable, keepAnAdmin: boolean) => Promise<(OperatorChange | { refused: 'taken' }) & { enrolment_url?: string | null }>,
) {
  // With no shared key, the last admin is the only way left to run the admin API (§24).
  const keepAnAdmin = !deps.apiKey();
  const result = await deps.db.transaction(async (tx) => {
    const done = await change(tx, keepAnAdmin);
    if ('changed' in done) await deps.audit.record({ type, ...by(request), data: { operator_id: done.changed.id, email: done.changed.email, role: done.changed.role } }, tx);
    return done;
  });
  if ('refused' in result) return sendError(reply, REFUSALS[result.refused]);
  request.log.info({ operatorId: result.changed.id, type }, 'admin: operator changed');
  const link = 'enrolment_url' in result ? { enrolment_url: result.enrolment_url } : {};
  return reply.code(type === 'operator.created' ? 201 : 200).send({ ...operatorView(result.changed as OperatorRow), ...link });
}

/** A new link for the operator, in `tx`; null when the console has no origin to build it from. */
async function linkFor(deps: OperatorRoutesDeps, tx: Queryable, operatorId: number): Promise<string | null> {
  const base = deps.linkOrigin();
  return base === undefined ? null : enrolmentLink(tx, operatorId, deps.clock(), base);
}

async function create(deps: OperatorRoutesDeps, request: FastifyRequest<{ Body: unknown }>, reply: FastifyReply) {
  const email = normalizeEmail(textField(request.body, 'email'));
  const role = field(request.body, 'role');
  if (!isOperatorRole(role)) return sendError(reply, 'badRequest');
  if (!email) return sendError(reply, 'emailInvalid');
  return changed(deps, request, reply, 'operator.created', async (tx) => {
    const made = await insertOperator(tx, email, role, deps.clock());
    return made ? { changed: made, enrolment_url: await linkFor(deps, tx, made.id) } : { refused: 'taken' };
  });
}

async function changeRole(deps: OperatorRoutesDeps, request: FastifyRequest<ById & { Body: unknown }>, reply: FastifyReply) {
  const id = parseUserId(request.params.id);
  const role = field(request.body, 'role');
  if (!isOperatorRole(role)) return sendError(reply, 'badRequest');
  if (id === undefined) return sendError(reply, 'adminNotFound');
  return changed(deps, request, reply, 'operator.role_changed', (tx, keep) => setOperatorRole(tx, id, role, keep));
}

async function remove(deps: OperatorRoutesDeps, request: FastifyRequest<ById>, reply: FastifyReply) {
  const id = parseUserId(request.params.id);
  if (id === undefined) return sendError(reply, 'adminNotFound');
  return changed(deps, request, reply, 'operator.removed', (tx, keep) => removeOperator(tx, id, keep));
}

// An admin resets another operator's factors; nobody their own (a stolen session would otherwise
// trade the victim's authenticator for its own).
async function resetFactors(deps: OperatorRoutesDeps, request: FastifyRequest<ById>, reply: FastifyReply) {
  const id = parseUserId(request.params.id);
  if (id === undefined) return sendError(reply, 'adminNotFound');
  const caller = callerOf(request);
  if (caller.kind === 'operator' && caller.id === id) return sendError(reply, 'operatorSelf');
  return changed(deps, request, reply, 'operator.mfa_reset', async (tx) => {
    const target = await findOperator(tx, id);
    if (!target) return { refused: 'notFound' };
    await removeOperatorFactors(tx, id);
    // Without a factor they cannot sign in: the new link lets them set a password and a factor again.
    return { changed: { ...target, mfa: false }, enrolment_url: await linkFor(deps, tx, id) };
  });
}

async function whoAmI(request: FastifyRequest) {
  const caller = callerOf(request);
  return caller.kind === 'operator' ? { operator: { id: caller.id, email: caller.email }, role: caller.role } : { operator: null, role: caller.role };
}

/** The operator whose own tokens these are; the shared key is nobody's. */
function self(request: FastifyRequest) {
  const caller = callerOf(request);
  return caller.kind === 'operator' ? caller : undefined;
}

async function mint(deps: OperatorRoutesDeps, request: FastifyRequest<{ Body: unknown }>, reply: FastifyReply) {
  const caller = self(request);
  if (!caller) return sendError(reply, 'adminNotFound');
  // From the console only (whose CSRF check ran before it passed the request on), and with a
  // recent second factor: a token never mints another, so a leaked one cannot outlive its revocation.
  const now = deps.clock();
  if (caller.authTime === undefined || now.getTime() - caller.authTime > RECENT_SECOND_FACTOR_MS) return sendError(reply, 'recentAuthRequired');
  // The name as kept: spaces around it are not counted against its 100 characters.
  const name = textField(request.body, 'name').trim();
  const days = field(request.body, 'expires_in_days') ?? TOKEN_DAYS_DEFAULT;
  if (!name || name.length > 100 || !Number.isInteger(days) || (days as number) < 1 || (days as number) > TOKEN_DAYS_MAX) return sendError(reply, 'badRequest');
  const minted = await deps.db.transaction(async (tx) => {
    const made = await mintOperatorToken(tx, caller.id, name, days as number, now);
    await deps.audit.record({ type: 'operator.token_created', ...by(request), data: { token_id: made.id, name: made.name } }, tx);
    return made;
  });
  return reply.code(201).send({ id: minted.id, token: minted.token, expires_at: minted.expires_at.toISOString() });
}

async function listTokens(deps: OperatorRoutesDeps, request: FastifyRequest, reply: FastifyReply) {
  const caller = self(request);
  if (!caller) return sendError(reply, 'adminNotFound');
  return { tokens: (await listOperatorTokens(deps.db, caller.id)).map(operatorTokenView) };
}

async function revokeToken(deps: OperatorRoutesDeps, request: FastifyRequest<ById>, reply: FastifyReply) {
  const caller = self(request);
  const id = parseUserId(request.params.id);
  if (!caller || id === undefined) return sendError(reply, 'adminNotFound');
  const gone = await deps.db.transaction(async (tx) => {
    const deleted = await deleteOperatorToken(tx, caller.id, id);
    if (deleted) await deps.audit.record({ type: 'operator.token_revoked', ...by(request), data: { token_id: id } }, tx);
    return deleted;
  });
  if (!gone) return sendError(reply, 'adminNotFound');
  return { id, revoked: true };
}
