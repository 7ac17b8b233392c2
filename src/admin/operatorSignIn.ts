// Operators sign in to the console as themselves (CONTRACT §24): email, password and a mandatory
// second factor, a TOTP code or (admin.passkeys, operatorPasskeys.ts) a passkey; the enrolment link `gateway operators add` printed sets the password and the TOTP.
// Under the auth rate limit (auth.rateLimit, per client address, shared through Redis) and §14's
// lockout of codes per operator; a refusal is the audit event `operator.login_failed`.
import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Audit } from '../audit.js';
import { createTotp, passkeyName, type Passwords, type RelyingParty, type Totp } from '../auth/index.js';
import { sha256Hex } from '../credentials/digest.js';
import { GatewayError, passwordTooShortParams, sendDenial, sendError } from '../errors/index.js';
import { headerValue, textField } from '../http.js';
import type { Live } from '../live/live.js';
import { authRateLimitStore } from '../listener/authRateLimit.js';
import type { Database, Queryable } from '../storage/database/index.js';
import {
  confirmOperatorTotp, countOperatorWrongCode, enrolOperatorTotp, findOperator, findOperatorTotp, operatorCodesLockedUntil, operatorCredentials, peekEnrolment, setOperatorPassword,
  spendEnrolment, useOperatorStep,
} from '../storage/operators/index.js';
import type { RedisBreaker } from '../storage/redis/index.js';
import { startSession, type ConsoleDeps } from './console.js';
import { field } from './views.js';
import { enrolmentPasskey, operatorPasskeyRoutes, operatorPasskeyVerifies, passkeyOffered } from './operatorPasskeys.js';
import { insertPasskey, OPERATOR_PASSKEYS } from '../storage/accounts/index.js';

/** §14's lockout: 10 wrong codes within 15 minutes lock the operator's codes for 15 minutes. */
const WRONG_CODES = { max: 10, windowMs: 15 * 60_000, lockMs: 15 * 60_000 };
const TOTP_ISSUER = 'auth-gateway console';

export interface OperatorSignInDeps {
  db: Database;
  passwords: Passwords;
  audit: Audit;
  live: Live;
  redis: RedisBreaker | null;
  passwordMinLength: number;
  console: ConsoleDeps;
  /** admin.passkeys: operators may answer with a passkey instead of a code. */
  relyingParty?: RelyingParty;
}

export async function operatorSignInRoutes(app: FastifyInstance, deps: OperatorSignInDeps): Promise<void> {
  const rateLimits = () => deps.live.current.settings.auth.rateLimit;
  await app.register(rateLimit, {
    store: authRateLimitStore({ redis: deps.redis }),
    max: () => rateLimits().max,
    timeWindow: () => rateLimits().window,
    allowList: () => rateLimits().max === 0,
    errorResponseBuilder: () => new GatewayError('rateLimited'),
  });
  let totp: Totp | undefined;
  // The TOTP key is the users' one (gateway_secrets): made or read once, at the first use.
  const totpOf = async () => (totp ??= await createTotp(deps.db));
  const fromConsole = (request: FastifyRequest) => {
    const origin = headerValue(request.headers, 'origin');
    return !origin || deps.console.origin().accepted.has(origin);
  };
  app.post('/console/operator/session', async (request, reply) => (fromConsole(request) ? signIn(deps, await totpOf(), request, reply) : sendError(reply, 'adminUnauthorized')));
  app.post('/console/operator/enrolment', async (request, reply) => (fromConsole(request) ? enrolStart(deps, await totpOf(), request, reply) : sendError(reply, 'consoleTicketInvalid')));
  if (deps.relyingParty) await operatorPasskeyRoutes(app, { db: deps.db, audit: deps.audit, console: deps.console, relyingParty: deps.relyingParty });
  app.post('/console/operator/enrolment/complete', async (request, reply) => (fromConsole(request) ? enrolFinish(deps, await totpOf(), request, reply) : sendError(reply, 'consoleTicketInvalid')));
}

/** Why a second factor was refused: its codes locked, or a reason for the audit and the log. */
type Refusal = { locked: Date } | { failed: string };
// Not an arrow annotated `(tx): Promise<Refusal | undefined> =>` inside the sign-in's conditional:
// Babel's TypeScript parser (StrykerJS's) cannot read that form, which tsc accepts.
const passkeyRefusal = (verified: boolean): Refusal | undefined => (verified ? undefined : { failed: 'passkey_failed' });

/**
 * The code checked once, counted when wrong (the lockout), in `tx` (the TOTP row locked): the
 * refusal, or undefined for a good code.
 */
async function checkCode(tx: Queryable, totp: Totp, operatorId: number, code: string, now: Date, confirmed: boolean): Promise<Refusal | undefined> {
  const row = await findOperatorTotp(tx, operatorId);
  if (!row || (row.confirmed_at !== null) !== confirmed) return { failed: confirmed ? 'no_second_factor' : 'not_enrolling' };
  const locked = await operatorCodesLockedUntil(tx, operatorId, now);
  if (locked) return { locked };
  const step = totp.stepOf(totp.decrypt(row.secret_encrypted), code.trim(), now);
  if (step !== undefined && (await useOperatorStep(tx, operatorId, step))) return undefined;
  await countOperatorWrongCode(tx, operatorId, now, WRONG_CODES);
  return { failed: 'mfa_failed' };
}

function refuseLocked(reply: FastifyReply, until: Date, now: Date) {
  return sendDenial(reply, { code: 'rateLimited', headers: { 'retry-after': String(Math.max(1, Math.ceil((until.getTime() - now.getTime()) / 1000))) } });
}

async function signIn(deps: OperatorSignInDeps, totp: Totp, request: FastifyRequest, reply: FastifyReply) {
  const email = textField(request.body, 'email').trim().toLowerCase();
  const password = textField(request.body, 'password');
  const now = deps.console.clock();
  const creds = email ? await operatorCredentials(deps.db, email) : undefined;
  const failed = async (reason: string, operator?: { id: number; email: string }) => {
    // An unknown address is not kept: people type passwords into the email field.
    await deps.audit.note({ type: 'operator.login_failed', actor: 'operator', actorId: operator?.id ?? null, operatorEmail: operator?.email, ip: request.ip, data: { reason } });
    request.log.info({ reason }, 'console: operator sign-in refused');
    return sendError(reply, 'invalidCredentials');
  };
  // Same work for unknown emails, so the answer's time does not reveal which operators exist.
  if (!creds?.password_hash) {
    await deps.passwords.burnVerification(password);
    return failed(creds ? 'not_enrolled' : 'unknown_email', creds);
  }
  if (!(await deps.passwords.verify(creds.password_hash, password))) return failed('wrong_password', creds);
  const passkey = field(request.body, 'passkey');
  // A passkey's answer where one is offered, else a code; the two are one second factor.
  const refusal = passkey !== undefined && passkeyOffered(deps.relyingParty, request)
    ? await deps.db.transaction(async (tx) => passkeyRefusal(await operatorPasskeyVerifies(tx, deps.relyingParty!, creds.id, passkey, now, request.log)))
    : await deps.db.transaction((tx) => checkCode(tx, totp, creds.id, textField(request.body, 'code'), now, true));
  if (refusal) return 'locked' in refusal ? refuseLocked(reply, refusal.locked, now) : failed(refusal.failed, creds);
  request.log.info({ operatorId: creds.id }, 'console: operator signed in');
  return startSession(deps.console, reply, { operator: creds.id, authTime: now.getTime() });
}

// First step of the link: the TOTP secret to scan (a new one each time, until one is confirmed).
async function enrolStart(deps: OperatorSignInDeps, totp: Totp, request: FastifyRequest, reply: FastifyReply) {
  const now = deps.console.clock();
  const id = await peekEnrolment(deps.db, sha256Hex(textField(request.body, 'token')), now);
  const operator = id === undefined ? undefined : await findOperator(deps.db, id);
  if (!operator) return sendError(reply, 'consoleTicketInvalid');
  const secret = totp.newSecret();
  if (!(await enrolOperatorTotp(deps.db, operator.id, totp.encrypt(secret), now))) return sendError(reply, 'consoleTicketInvalid');
  return { email: operator.email, role: operator.role, secret, otpauth_url: totp.otpauthUrl(TOTP_ISSUER, operator.email, secret) };
}

// Second step: the password and a code from the app, or (admin.passkeys) a passkey's registration;
// the link is spent, the operator signed in.
async function enrolFinish(deps: OperatorSignInDeps, totp: Totp, request: FastifyRequest, reply: FastifyReply) {
  const password = textField(request.body, 'password');
  if ([...password].length < deps.passwordMinLength) return sendDenial(reply, { code: 'passwordTooShort', params: passwordTooShortParams(deps.passwordMinLength) });
  const hash = await deps.passwords.hash(password);
  const now = deps.console.clock();
  const tokenHash = sha256Hex(textField(request.body, 'token'));
  const answer = field(request.body, 'passkey');
  let passkey: Awaited<ReturnType<typeof enrolmentPasskey>>;
  if (answer !== undefined && passkeyOffered(deps.relyingParty, request)) {
    // Verified before the transaction: its challenge is the link's operator's, and used up here.
    const peeked = await peekEnrolment(deps.db, tokenHash, now);
    passkey = peeked === undefined ? undefined : await enrolmentPasskey(deps.db, deps.relyingParty, peeked, answer, now, request.log);
    if (!passkey) return sendError(reply, peeked === undefined ? 'consoleTicketInvalid' : 'passkeyInvalid');
  }
  const done = await deps.db.transaction(async (tx) => {
    const id = await peekEnrolment(tx, tokenHash, now);
    if (id === undefined) return undefined;
    const refusal = passkey ? undefined : await checkCode(tx, totp, id, textField(request.body, 'code'), now, false);
    if (refusal) return refusal;
    // Single use: of two completions at once, the conditional UPDATE lets one through.
    if ((await spendEnrolment(tx, tokenHash, now)) !== id) return undefined;
    await setOperatorPassword(tx, id, hash);
    if (!passkey) await confirmOperatorTotp(tx, id, now);
    else if (!(await insertPasskey(tx, id, passkey, passkeyName(request.body), now, OPERATOR_PASSKEYS))) return undefined;
    const operator = (await findOperator(tx, id))!;
    const method = passkey ? 'passkey' : 'totp';
    await deps.audit.record({ type: 'operator.enrolled', actor: 'operator', actorId: id, operatorEmail: operator.email, ip: request.ip, data: { operator_id: id, method } }, tx);
    return { id };
  });
  if (!done) return sendError(reply, 'consoleTicketInvalid');
  if ('locked' in done) return refuseLocked(reply, done.locked, now);
  if ('failed' in done) {
    request.log.info({ reason: done.failed }, 'console: operator enrolment refused');
    return sendError(reply, 'codeRefused');
  }
  return startSession(deps.console, reply, { operator: done.id, authTime: now.getTime() });
}
