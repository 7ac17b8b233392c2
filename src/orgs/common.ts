// What the organizations' endpoints share: reading their inputs, the roles that manage, the actor
// of a request, and answering a change's outcome (change.ts).
import type { FastifyReply, FastifyRequest } from 'fastify';
import { clientOf } from '../auth/index.js';
import { sendError } from '../errors/index.js';
import { currentUser } from '../listener/requireUser.js';
import { parseIntegerId } from '../storage/db.js';
import { ORG_ROLES, type OrgRole } from '../storage/organizations.js';
import type { Actor, Outcome } from './change.js';

/** Who may manage an organization's name, invitations and members. */
export const MANAGERS: readonly OrgRole[] = ['owner', 'admin'];
/** Only an owner grants, removes or invites an owner. */
export const OWNERS: readonly OrgRole[] = ['owner'];

const MAX_NAME = 64;
// Control, format (bidi included) and line or paragraph separator characters: a name is shown in
// lists, consoles and mails, where any of them could reorder or split what a reader sees.
const UNFIT_IN_NAME = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u;

/** The body's `name` when it is 1–64 characters without control, bidi or line-break characters. */
export function orgName(body: unknown): string | undefined {
  const name = field(body, 'name');
  if (typeof name !== 'string') return undefined;
  const length = [...name].length;
  return length >= 1 && length <= MAX_NAME && !UNFIT_IN_NAME.test(name) ? name : undefined;
}

/** The body's `role` when it is a role. */
export function orgRole(body: unknown): OrgRole | undefined {
  const role = field(body, 'role');
  return ORG_ROLES.find((r) => r === role);
}

export function field(body: unknown, name: string): unknown {
  return body !== null && typeof body === 'object' ? (body as Record<string, unknown>)[name] : undefined;
}

/** An id of the path; undefined (answered as an unknown one) when it is not an id. */
export function pathId(request: FastifyRequest, name: string): number | undefined {
  return parseIntegerId((request.params as Record<string, unknown>)[name]);
}

export function actorOf(request: FastifyRequest): Actor {
  return { userId: currentUser(request).id, client: clientOf(request) };
}

/** Answers a refusal, or `ok` with `status`. */
export function answer<T>(reply: FastifyReply, outcome: Outcome<T>, status = 200): FastifyReply {
  if ('refused' in outcome) return sendError(reply, outcome.refused.code, outcome.refused.extra);
  return reply.code(status).send(outcome.ok);
}

// The pieces of the OpenAPI fragments beside the handlers.
export const INT = { type: 'integer' };
export const STR = { type: 'string' };
export const DATE = { type: 'string', format: 'date-time' };
export const ROLE = { enum: ORG_ROLES };
export const TAGS = ['organizations'];
export const object = (properties: Record<string, unknown>, required?: string[]) => ({ type: 'object', ...(required ? { required } : {}), properties });
/** The path's ids (decimal strings). */
export const ids = (...names: string[]) => object(Object.fromEntries(names.map((n) => [n, { type: 'string', pattern: '^[1-9][0-9]{0,9}$' }])), names);
