// An organization's invitations (CONTRACT §22): mailed as single-use links (32 random bytes, only
// their SHA-256 stored, as email links are), valid organizations.invitationTtl, accepted only by
// the account whose verified email is the invited address. At most 20 pending per organization
// and 50 sent per inviter in 24 hours, counted under the inviter's and the organization's row locks
// (change.ts), so parallel requests on several instances cannot pass them. Of parallel accepts of
// one invitation, on any instance, one joins: the others find it used.
import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Mailer } from '../auth/index.js';
import { randomToken, sha256Hex } from '../credentials/digest.js';
import { normalizeEmail } from '../credentials/emailAddress.js';
import { sendError, successBody } from '../errors/index.js';
import { currentUser } from '../listener/requireUser.js';
import type { MailWords } from '../mail/index.js';
import { bearerOnly, errors, message } from '../openapi.js';
import { organizations as orgs, orgInvitations as invitations } from '../storage/orgs/index.js';
import { users } from '../storage/accounts/index.js';
import { orgChange, orgRead, refuse, requireRole, type OrgChangeDeps } from './change.js';
import { actorOf, answer, DATE, field, ids, INT, mailedOrgName, MANAGERS, object, OWNERS, orgRole, pathId, ROLE, STR, TAGS } from './common.js';
import type { OrgRoutesDeps } from './orgs.js';

export interface InvitationDeps extends Pick<OrgRoutesDeps, 'bearer'>, OrgChangeDeps {
  mailer: Mailer;
  words: MailWords;
  /** mail.invitationUrl: the application's page, {token} where the token goes. */
  invitationUrl: string;
  invitationTtlMs: number;
}

export const MAX_PENDING_PER_ORG = 20;
export const MAX_SENT_PER_INVITER_PER_DAY = 50;
const DAY_MS = 24 * 3_600_000;

const invitation = object({ id: INT, email: STR, role: ROLE, expires_at: DATE });
const tags = TAGS;

export const DOCS = {
  create: {
    tags, security: bearerOnly, params: ids('id'), body: object({ email: STR, role: ROLE }, ['email', 'role']),
    summary: 'Invite an address (owner, admin; a verified email): a single-use link by mail, replacing a pending invitation to it; '
      + 'an admin cannot invite an owner',
    response: {
      201: invitation,
      ...errors('badRequest', 'orgNotFound', 'roleInsufficient', 'emailUnverified', 'alreadyMember', 'rateLimited', 'mailUnavailable'),
      ...errors('apiKeyNotAccepted', 'tokenInvalid'),
    },
  },
  list: {
    tags, summary: 'The organization\'s pending invitations (owner, admin)', security: bearerOnly, params: ids('id'),
    response: {
      200: object({ invitations: { type: 'array', items: invitation } }),
      ...errors('orgNotFound', 'roleInsufficient', 'apiKeyNotAccepted', 'tokenInvalid'),
    },
  },
  cancel: {
    tags, summary: 'Cancel a pending invitation (owner, admin): its link no longer works', security: bearerOnly, params: ids('id', 'inv_id'),
    response: { 200: message, ...errors('orgNotFound', 'invitationNotFound', 'roleInsufficient', 'apiKeyNotAccepted', 'tokenInvalid') },
  },
  accept: {
    tags, security: bearerOnly, body: object({ token: STR }, ['token']),
    summary: 'Join with an invitation\'s token: the account\'s verified email must be the invited address',
    response: {
      200: object({ org_id: INT, user_id: INT, role: ROLE, joined_at: DATE }),
      ...errors('linkInvalid', 'invitationOtherAddress', 'alreadyMember', 'apiKeyNotAccepted', 'tokenInvalid', 'rateLimited'),
    },
  },
};

const shown = (i: invitations.Invitation) => ({ id: i.id, email: i.email, role: i.role, expires_at: i.expires_at });

/** The body's `email` as accounts store theirs (trimmed, lower-cased), when it is one mailbox. */
function invitedEmail(body: unknown): string | undefined {
  const email = field(body, 'email');
  return typeof email === 'string' ? normalizeEmail(email) : undefined;
}

/**
 * Queues the invitation's mail, off the request path, in the invited account's language if it has
 * one, else the inviter's request's. The organization's name is text in it, never a link.
 */
interface SentInvitation {
  email: string;
  url: string;
  orgName: string;
  inviterEmail: string;
  inviterId: number;
}

function queueInvitationMail(deps: InvitationDeps, sent: SentInvitation, headers: IncomingHttpHeaders): void {
  const fallback = deps.words.requestLanguage(headers);
  deps.mailer.enqueue('org_invitation', sent.inviterId, async () => {
    const invited = await users.findByEmail(deps.db, sent.email);
    const language = deps.words.languageFor(invited ? await users.localeOf(deps.db, invited.id) : null, fallback);
    const rendered = deps.words.compose('org_invitation', language, {
      link: sent.url, email: sent.email, org_name: mailedOrgName(sent.orgName), inviter_email: sent.inviterEmail,
      expires_in_minutes: Math.round(deps.invitationTtlMs / 60_000),
    });
    return rendered && { to: sent.email, ...rendered };
  });
}

export async function invitationRoutes(app: FastifyInstance, deps: InvitationDeps): Promise<void> {
  const { db, clock } = deps;

  app.post('/:id/invitations', { schema: DOCS.create, preHandler: deps.bearer }, async function invite(request, reply) {
    const id = pathId(request, 'id');
    if (id === undefined) return sendError(reply, 'orgNotFound');
    // An invitation nobody can receive is no invitation.
    if (!deps.mailer.enabled) return sendError(reply, 'mailUnavailable');
    const token = randomToken(32);
    const outcome = await orgChange(deps, actorOf(request), id, async ({ tx, now, user, org, role, record }) => {
      const mine = requireRole(role, MANAGERS);
      if (!user.email_verified_at) refuse('emailUnverified');
      const email = invitedEmail(request.body) ?? refuse('badRequest');
      const invitedRole = orgRole(request.body) ?? refuse('badRequest');
      if (invitedRole === 'owner') requireRole(mine, OWNERS);
      if (await orgs.isMemberByEmail(tx, org.id, email)) refuse('alreadyMember');
      await invitations.replacePending(tx, org.id, email, now);
      if ((await invitations.pendingCount(tx, org.id, now)) >= MAX_PENDING_PER_ORG) refuse('rateLimited');
      const sentToday = await invitations.sentSince(tx, user.id, new Date(now.getTime() - DAY_MS));
      if (sentToday >= MAX_SENT_PER_INVITER_PER_DAY) refuse('rateLimited');
      const made = await invitations.insertInvitation(
        tx, { orgId: org.id, email, role: invitedRole, invitedBy: user.id, tokenHash: sha256Hex(token) }, now, new Date(now.getTime() + deps.invitationTtlMs),
      );
      await record('org.invitation_sent', { invitation_id: made.id, email, role: invitedRole });
      return { made, orgName: org.name, inviterEmail: user.email };
    });
    if ('refused' in outcome) return answer(reply, outcome);
    const { made, orgName, inviterEmail } = outcome.ok;
    // The raw token is in the mail and nowhere else (never a log).
    const url = deps.invitationUrl.replaceAll('{token}', token);
    queueInvitationMail(deps, { email: made.email, url, orgName, inviterEmail, inviterId: currentUser(request).id }, request.headers);
    request.log.info({ userId: currentUser(request).id, orgId: made.org_id, invitationId: made.id }, 'invitation sent');
    return reply.code(201).send(shown(made));
  });

  app.get('/:id/invitations', { schema: DOCS.list, preHandler: deps.bearer }, async function listInvitations(request, reply) {
    const id = pathId(request, 'id');
    const listed = await orgRead(db, currentUser(request).id, id, MANAGERS, async () => (await invitations.pendingOf(db, id!, clock())).map(shown));
    return answer(reply, 'ok' in listed ? { ok: { invitations: listed.ok } } : listed);
  });

  app.delete('/:id/invitations/:inv_id', { schema: DOCS.cancel, preHandler: deps.bearer }, async function cancelInvitation(request, reply) {
    const id = pathId(request, 'id');
    if (id === undefined) return sendError(reply, 'orgNotFound');
    const outcome = await orgChange(deps, actorOf(request), id, async ({ tx, now, org, role, record }) => {
      requireRole(role, MANAGERS);
      const invitationId = pathId(request, 'inv_id') ?? refuse('invitationNotFound');
      if (!(await invitations.cancelInvitation(tx, org.id, invitationId, now))) refuse('invitationNotFound');
      await record('org.invitation_cancelled', { invitation_id: invitationId });
    });
    if ('refused' in outcome) return answer(reply, outcome);
    return successBody(reply, 'invitationCancelled');
  });
}

/** POST /api/v1/orgs/invitations/accept, under the auth rate limit as every endpoint that takes a link's token (index.ts). */
export async function acceptRoute(app: FastifyInstance, deps: InvitationDeps): Promise<void> {
  app.post('/invitations/accept', { schema: DOCS.accept, preHandler: deps.bearer }, async function accept(request: FastifyRequest, reply) {
    const token = field(request.body, 'token');
    const hash = typeof token === 'string' && token ? sha256Hex(token) : undefined;
    // Which organization's row to lock comes from the invitation; read again under the lock.
    const found = hash && (await invitations.findPending(deps.db, hash, deps.clock()));
    if (!hash || !found) return sendError(reply, 'linkInvalid');
    const outcome = await orgChange(deps, actorOf(request), found.org_id, async ({ tx, now, user, org, role, record }) => {
      const pending = (await invitations.findPending(tx, hash, now)) ?? refuse('linkInvalid');
      if (!user.email_verified_at || user.email !== pending.email) refuse('invitationOtherAddress');
      if (role !== undefined) refuse('alreadyMember');
      // An invitation is worth what its inviter may still grant: none once they are no longer owner or admin.
      const inviterRole = pending.invited_by === null ? undefined : await orgs.roleOf(tx, org.id, pending.invited_by);
      const mayGrant = inviterRole !== undefined && MANAGERS.includes(inviterRole) && (pending.role !== 'owner' || inviterRole === 'owner');
      if (!mayGrant) refuse('linkInvalid');
      if (!(await invitations.useUp(tx, pending.id, now))) refuse('linkInvalid');
      await orgs.addMember(tx, org.id, user.id, pending.role, now);
      await record('org.member_added', { member_id: user.id, role: pending.role, invitation_id: pending.id });
      return { org_id: org.id, user_id: user.id, role: pending.role, joined_at: now };
    });
    if ('ok' in outcome) request.log.info({ userId: outcome.ok.user_id, orgId: outcome.ok.org_id }, 'invitation accepted');
    return answer(reply, outcome);
  });
}
