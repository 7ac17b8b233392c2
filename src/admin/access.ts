// Who calls the admin API, and whether their role allows the route (CONTRACT §24). Every route of
// /admin/v1 declares the least role it needs, once, in its route options (`{ config: { role } }`);
// this hook alone decides. Callers: the shared admin key (break-glass, acts as `admin`), an
// operator's personal token (`gwop_…`, with the operator's role as it is now, not as it was when
// the token was minted), or the console's own request for an operator's session (console.ts marks
// it with the process's secret, naming the operator).
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AuditActor, AuditEvent } from '../audit.js';
import { sendDenial, sendError } from '../errors/index.js';
import { sameKey, sha256Hex } from '../credentials/digest.js';
import { OPERATOR_TOKEN_PREFIX } from '../credentials/shapes.js';
import { BEARER, headerValue } from '../http.js';
import type { Database, Queryable } from '../storage/database/index.js';
import { findOperator, OPERATOR_ROLES, operatorsExist, useOperatorToken, type OperatorRole } from '../storage/operators/index.js';
import type { FailureLog } from '../telemetry/logThrottle.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The least operator role an /admin/v1 route needs (access.ts); none: admin only. */
    role?: OperatorRole;
  }
}

/** The header console.ts marks its own requests with (its value is a secret of the process). */
export const CONSOLE_MARK_HEADER = 'x-gateway-console';
/** With the mark: the operator whose console session made the request. */
export const CONSOLE_OPERATOR_HEADER = 'x-gateway-console-operator';
/** With the mark: when that session's second factor was given (ms since the epoch). */
export const CONSOLE_AUTH_TIME_HEADER = 'x-gateway-console-auth-time';

export type Caller =
  | { kind: 'key'; role: 'admin'; console: boolean }
  // authTime: when a console session's second factor was given; a gwop_ token has none.
  | { kind: 'operator'; id: number; email: string; role: OperatorRole; authTime?: number };

export interface AccessDeps {
  db: Database;
  /** admin.apiKey as the live configuration has it now (SIGHUP rotates it); empty: no shared key. */
  apiKey: () => string;
  consoleMark?: string;
  clock: () => Date;
  keyRefusals: FailureLog;
  /** Whether the admin API exists at all (adminExistence). */
  adminExists: () => Promise<boolean>;
}

/**
 * Whether the admin API exists: a shared key is set, or an operator is (§24). Asked on every admin
 * request while admin.apiKey is empty; once this listener has seen an operator the answer stays
 * true: operators go only by removal, which keeps the last admin while the key is empty. (Were
 * every operator removed while a key was set, then the key cleared, the API would answer 401
 * rather than 404 until a restart: nobody gets in either way.) A false is never kept: an operator
 * added by another instance or the CLI counts at the next request.
 */
export function adminExistence(apiKey: () => string, db: Queryable): () => Promise<boolean> {
  let operatorSeen = false;
  return async () => {
    if (apiKey() || operatorSeen) return true;
    operatorSeen = await operatorsExist(db);
    return operatorSeen;
  };
}

const callers = new WeakMap<FastifyRequest, Caller>();

/** The caller the access hook found; every /admin/v1 handler runs after it. */
export function callerOf(request: FastifyRequest): Caller {
  const caller = callers.get(request);
  if (!caller) throw new Error('admin route reached without the access hook');
  return caller;
}

/** The roles that may do what `role` may: required_roles of a refusal. */
export const rolesFrom = (role: OperatorRole): OperatorRole[] => OPERATOR_ROLES.slice(OPERATOR_ROLES.indexOf(role));


async function identify(deps: AccessDeps, request: FastifyRequest): Promise<Caller | undefined> {
  const marked = deps.consoleMark !== undefined && headerValue(request.headers, CONSOLE_MARK_HEADER) === deps.consoleMark;
  const operatorId = Number(headerValue(request.headers, CONSOLE_OPERATOR_HEADER));
  if (marked && Number.isSafeInteger(operatorId) && operatorId > 0) {
    const operator = await findOperator(deps.db, operatorId);
    const authTime = Number(headerValue(request.headers, CONSOLE_AUTH_TIME_HEADER)) || undefined;
    return operator && { kind: 'operator', id: operator.id, email: operator.email, role: operator.role, authTime };
  }
  const presented = BEARER.exec(headerValue(request.headers, 'authorization'))?.[1];
  if (!presented) return undefined;
  if (presented.startsWith(OPERATOR_TOKEN_PREFIX)) {
    const operator = await useOperatorToken(deps.db, sha256Hex(presented), deps.clock());
    return operator && { kind: 'operator', ...operator };
  }
  return sameKey(presented, deps.apiKey()) ? { kind: 'key', role: 'admin', console: marked } : undefined;
}

/** The onRequest hook of /admin: every path, known or not, answers the same way to a caller it does not accept. */
export function adminAccess(deps: AccessDeps) {
  return async function adminAccess(request: FastifyRequest, reply: FastifyReply) {
    // No shared key and no operator: the admin API does not exist (not "forbidden", which would invite guessing).
    if (!(await deps.adminExists())) return sendError(reply, 'adminNotFound');
    const caller = await identify(deps, request);
    if (!caller) {
      deps.keyRefusals.failed(undefined, { ip: request.ip, url: request.url });
      return sendDenial(reply, { code: 'adminUnauthorized', headers: { 'www-authenticate': 'Bearer realm="gateway-admin"' } });
    }
    // A route that declares no role is the admin's (deny by default): a route added without one
    // must not open itself to viewers. An unknown path has no route: 404 for any accepted caller.
    const required = request.routeOptions.config.role ?? (request.routeOptions.url === undefined ? undefined : 'admin');
    if (required && OPERATOR_ROLES.indexOf(caller.role) < OPERATOR_ROLES.indexOf(required)) {
      return sendDenial(reply, { code: 'roleInsufficient', extra: { required_roles: rolesFrom(required), current_role: caller.role } });
    }
    callers.set(request, caller);
  };
}

// Who changed it, for the audit log (CONTRACT §24, §33): what authenticated, never what the client
// says. An operator (console session or gwop_ token), by id and email; else the shared key through
// the console (its mark is a secret of the instance), or the shared key: `admin`, also from the CLI
// through --admin. `X-Gateway-Actor` is ignored: the key plus `X-Gateway-Actor: cli` was recorded as
// `cli` ("someone at the host's shell"), which only the CLI on direct storage is (issue 68).
export function by(request: FastifyRequest): Pick<AuditEvent, 'actor' | 'actorId' | 'operatorEmail' | 'ip' | 'userAgent'> {
  const from = { ip: request.ip, userAgent: headerValue(request.headers, 'user-agent') || undefined };
  const caller = callerOf(request);
  if (caller.kind === 'operator') return { actor: 'operator', actorId: caller.id, operatorEmail: caller.email, ...from };
  const actor: AuditActor = caller.console ? 'console' : 'admin';
  return { actor, ...from };
}
