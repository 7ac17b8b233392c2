// Accounts an operator makes (CONTRACT §24): the plans the configuration offers, and a user created
// by an operator, who receives an `account_invitation` mail to choose a password. Beside routes.ts
// (the endpoint map of /admin/v1), registered by it, under the same admin key check.
import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Audit, AuditEvent } from '../audit.js';
import type { Config } from '../config/schema.js';
import type { Database } from '../storage/database/index.js';
import { planUnknownParams, sendDenial, sendError } from '../errors/index.js';
import { normalizeEmail } from '../credentials/emailAddress.js';
import { textField } from '../http.js';
import { knownPlans, planLimitsOf } from '../pipeline/index.js';
import { users } from '../storage/accounts/index.js';
import { makeLink, type Mailer } from '../auth/index.js';
import type { MailWords } from '../mail/index.js';
import { adminView, field } from './views.js';
import { adminUser, errors, type EndpointSchema } from '../openapi.js';

/** How long an invitation's link works: a week, since its recipient did not ask for it and may read it days later. */
export const INVITATION_TTL_MS = 7 * 86_400_000;

/** What creating a user needs besides the admin API's own deps: the mail queue, its words, and mail.resetUrl. */
export interface InvitationMail {
  mailer: Mailer;
  words: MailWords;
  /** mail.resetUrl (a URL with {token}); absent: no invitation can be sent. */
  resetUrl: string | undefined;
}

/** Who acts, for the audit log (routes.ts's `by`: admin, console or cli). */
type Actor = (request: FastifyRequest) => Pick<AuditEvent, 'actor' | 'ip' | 'userAgent'>;

export interface AccountDeps {
  db: Database;
  audit: Audit;
  config: () => Pick<Config, 'plans' | 'routes'>;
  clock: () => Date;
  /** Absent: POST /admin/v1/users answers 503 `mail_unavailable`. */
  invitations?: InvitationMail;
}

/** Each route's OpenAPI fragment (documentation only: src/openapi.ts), by handler. */
const DOCS = {
  listPlans: {
    tags: ['admin'], summary: 'The plans the configuration offers (what PUT …/plan accepts), with their limits; null: unlimited', security: [{ adminKey: [] }],
    response: {
      200: {
        type: 'object',
        properties: {
          plans: {
            type: 'array',
            items: {
              type: 'object', properties: { name: { type: 'string' }, daily: { type: ['integer', 'null'] }, monthly: { type: ['integer', 'null'] }, per_minute: { type: ['integer', 'null'] } },
            },
          },
        },
      },
      ...errors('adminUnauthorized', 'adminNotFound'),
    },
  },
  createUser: {
    tags: ['admin'],
    summary: 'Create a user without a password, on plan (default free), and mail it an account_invitation: mail.resetUrl with a single-use token valid 7 days, '
      + 'redeemed by POST /api/v1/auth/password/reset (sets the password, verifies the address)',
    security: [{ adminKey: [] }], body: { type: 'object', required: ['email'], properties: { email: { type: 'string' }, plan: { type: 'string' } } },
    response: { 201: adminUser, ...errors('emailInvalid', 'planUnknown', 'adminUnauthorized', 'adminNotFound', 'emailTaken', 'mailUnavailable') },
  },
} satisfies Record<string, EndpointSchema>;

/** The routes of this file, registered by adminRoutes (routes.ts) in its context, behind the key check. */
export function accountRoutes(app: FastifyInstance, deps: AccountDeps, by: Actor): void {
  app.get('/v1/plans', { schema: DOCS.listPlans, config: { role: 'viewer' } }, async () => listPlans(deps));
  // Creating an account is not among support's actions (CONTRACT §24): admin.
  app.post('/v1/users', { schema: DOCS.createUser, config: { role: 'admin' } }, (request, reply) => createUser(deps, by, request, reply));
}

// Every plan the admin API accepts (knownPlans: the spec's three, those with limits, those routes
// name), with its limits: the console offers these and no fixed list (CONTRACT §24).
function listPlans({ config }: AccountDeps) {
  const settings = config();
  return {
    plans: knownPlans(settings).map((name) => {
      const { daily, monthly, perMinute } = planLimitsOf(settings.plans, name);
      return { name, daily, monthly, per_minute: perMinute };
    }),
  };
}

/**
 * POST /admin/v1/users {email, plan?}: the account, without a password, on `plan` (default free),
 * and an invitation mail whose link is mail.resetUrl with a single-use token valid 7 days. The
 * application's reset page redeems it (POST /api/v1/auth/password/reset): that sets the password and,
 * the link having come back from the mailbox, verifies the address.
 */
async function createUser(deps: AccountDeps, by: Actor, request: FastifyRequest, reply: FastifyReply) {
  const mail = deps.invitations;
  // An account nobody can be told about has no way in: refused before anything is written.
  if (!mail?.mailer.enabled || !mail.resetUrl) return sendError(reply, 'mailUnavailable');
  const email = normalizeEmail(textField(request.body, 'email'));
  if (!email) return sendError(reply, 'emailInvalid');
  const plans = knownPlans(deps.config());
  const plan = field(request.body, 'plan') ?? 'free';
  if (typeof plan !== 'string' || !plans.includes(plan)) return sendDenial(reply, { code: 'planUnknown', params: planUnknownParams(plans) });
  const now = deps.clock();
  const { resetUrl } = mail;
  let url = '';
  // The account, its plan, the link's hash and the audit event in one transaction: no account without its invitation.
  const id = await users.createUser(deps.db, email, null, async (tx, userId) => {
    if (plan !== 'free') await users.writePlan(tx, userId, plan);
    url = await makeLink(tx, { id: userId, email }, 'reset', resetUrl, now, INVITATION_TTL_MS);
    await deps.audit.record({ type: 'admin.user_created', ...by(request), userId, data: { plan } }, tx);
  });
  if (id === null) return sendError(reply, 'emailTaken');
  queueInvitation(mail, { id, email, url }, request.headers);
  request.log.info({ userId: id, plan }, 'admin: user created, invitation queued');
  const user = await users.findById(deps.db, id);
  return reply.code(201).send(user ? adminView(user) : { id });
}

/** The invitation, off the request path, in the language of the operator's request (errors.language, or negotiated). */
function queueInvitation(mail: InvitationMail, invited: { id: number; email: string; url: string }, headers: IncomingHttpHeaders): void {
  const language = mail.words.requestLanguage(headers);
  mail.mailer.enqueue('account_invitation', invited.id, async () => {
    const rendered = mail.words.compose('account_invitation', language, { link: invited.url, email: invited.email, expires_in_minutes: INVITATION_TTL_MS / 60_000 });
    return rendered && { to: invited.email, ...rendered };
  });
}
