// What the organizations' endpoints share: reading their inputs, the roles that manage, the actor
// of a request, and answering a change's outcome (change.ts).
import type { FastifyReply, FastifyRequest } from 'fastify';
import { clientOf } from '../auth/index.js';
import { sendError } from '../errors/index.js';
import { currentUser } from '../listener/requireUser.js';
import { parseIntegerId } from '../storage/database/index.js';
import { ORG_ROLES, type OrgRole } from '../storage/orgs/index.js';
import { refuse, type Actor, type Outcome } from './change.js';

/** Who may manage an organization's name, invitations and members. */
export const MANAGERS: readonly OrgRole[] = ['owner', 'admin'];
/** Only an owner grants, removes or invites an owner. */
export const OWNERS: readonly OrgRole[] = ['owner'];

const MAX_NAME = 64;
// Control, format (bidi included) and line or paragraph separator characters: a name is shown in
// lists, consoles and mails, where any of them could reorder or split what a reader sees. And a
// lone surrogate, which Postgres would keep as U+FFFD, another name than the one sent (the
// routes that take a name read it past listener/inputs.ts's check, which refuses them elsewhere).
const UNFIT_IN_NAME = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/u;
// What makes a mail client link or read a name as an address (CONTRACT §33, issue 68): an
// organization named `Account locked: sign in at https://evil.example/x` was mailed from the
// gateway's own address to anyone invited. Checked on the NFKC form too, so that fullwidth
// `＠` or `：／／` (which some clients fold before linking) are no way around it.
const ADDRESS_LIKE = /:\/\/|www\.|@/i;

/**
 * The body's `name`: undefined when there is none (not a string: `bad_request`), `false` when it
 * is a string but no name (`org_name_invalid`): empty, over 64 characters, or holding a control,
 * bidi or line-break character, `://`, `www.` or `@`.
 */
export function orgName(body: unknown): string | false | undefined {
  const name = field(body, 'name');
  if (typeof name !== 'string') return undefined;
  const length = [...name].length;
  const fit = length >= 1 && length <= MAX_NAME && !UNFIT_IN_NAME.test(name) && !ADDRESS_LIKE.test(name) && !ADDRESS_LIKE.test(name.normalize('NFKC'));
  return fit ? name : false;
}

/**
 * A stored name as a mail shows it: each run of control, bidi or line-break characters a space, so
 * that a name stored before the rules (an import, an earlier version, SQL) can neither start a
 * line of the mail with its creator's words nor reorder it; the mail quotes it (mail/words.ts).
 */
export function mailedOrgName(name: string): string {
  return name.replace(UNFIT_RUNS, ' ');
}
const UNFIT_RUNS = new RegExp(`${UNFIT_IN_NAME.source}+`, 'gu');

/** The name of a request body that must have one, or the refusal that ends the change. */
export function requiredOrgName(body: unknown): string {
  const name = orgName(body);
  if (name === undefined) refuse('badRequest');
  if (name === false) refuse('orgNameInvalid');
  return name;
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
