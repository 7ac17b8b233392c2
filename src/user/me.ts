// GET /api/v1/user/me (CONTRACT §4, §12), PATCH (§20: the language of the user's mails) and
// DELETE /api/v1/user/me (§13): the account itself.
import { DEFAULT_STYLE, sendError, successBody, supportedLanguage } from '../errors/index.js';
import type { FastifyInstance } from 'fastify';
import { byUser, changeAccount } from '../account/change.js';
import type { Audit } from '../audit.js';
import { clientOf, isTooLong, passwordConfirmed, secondFactorFresh, type Passwords, refuseCredentials } from '../auth/index.js';
import { textField } from '../http.js';
import { currentIdentity, currentUser, type RequireUser } from '../listener/requireUser.js';
import { dailyRemaining, monthlyRemaining, planLimitsOf, usedThisMonth, usedToday } from '../pipeline/index.js';
import type { Database } from '../storage/database/index.js';
import type { IdentityCache } from '../storage/feed/index.js';
import { lastOwnedBy, organizationsOf } from '../storage/orgs/index.js';
import { users } from '../storage/accounts/index.js';
import { utcDay, utcMonth } from '../time.js';
import { bearer, credentials, errors, limits, message, type EndpointSchema } from '../openapi.js';

export interface MeDeps {
  db: Database;
  requireUser: RequireUser;
  clock: () => Date;
  /** organizations.enabled: the answer lists the user's organizations (CONTRACT §22). */
  organizations?: boolean;
}

/** Each route's OpenAPI fragment (documentation only: src/openapi.ts), by handler. */
const DOCS = {
  readMe: {
    tags: ['user'], summary: 'The signed-in user, with the plan\'s limits and what is left today', security: bearer,
    response: {
      200: {
        type: 'object',
        properties: {
          user_id: { type: 'integer' }, email: { type: 'string' }, plan: { type: 'string' }, daily_usage: { type: 'integer' }, last_usage_date: { type: ['string', 'null'] }, limits,
          daily_remaining: { type: ['integer', 'null'] }, monthly_usage: { type: ['integer', 'null'] }, monthly_remaining: { type: ['integer', 'null'] },
          monthly_overage: { type: 'integer', description: 'With metered overage only: the uses past the included allowance' }, email_verified_at: { type: ['string', 'null'], format: 'date-time' },
          locale: { type: 'string', description: 'The language of the user\'s mails; absent until chosen' },
          orgs: {
            type: 'array', items: { type: 'object', properties: { id: { type: 'integer' }, name: { type: 'string' }, plan: { type: 'string' }, role: { enum: ['owner', 'admin', 'member'] } } },
            description: 'With organizations.enabled only: the user\'s organizations and role in each',
          },
        },
      },
      ...errors('tokenInvalid', 'userNotFound'),
    },
  },
  patchMe: {
    tags: ['user'], summary: 'Choose the language of the user\'s mails (a language the gateway has texts for; en-GB reads as en; null forgets it)', security: bearer,
    body: { type: 'object', properties: { locale: { type: ['string', 'null'], examples: ['en'] } }, description: 'JSON; a missing or non-JSON body reads as {}' },
    response: {
      200: { type: 'object', required: ['message', 'locale'], properties: { message: { type: 'string' }, locale: { type: ['string', 'null'] } } },
      ...errors('localeUnsupported', 'tokenInvalid', 'userNotFound'),
    },
  },
  deleteMe: {
    tags: ['accounts'],
    summary: 'Delete the account and everything of it; the email is free again. The last owner of an organization is refused (409, with orgs: [{id, name}]) until they hand it over or delete it',
    description: 'A user with a second factor (TOTP or a passkey) also needs a sign-in at aal2 at most 5 minutes old, else 403 recent_auth_required.',
    security: bearer, body: credentials(['password']),
    response: { 200: message, ...errors('invalidCredentials', 'recentAuthRequired', 'lastOwner', 'tokenInvalid', 'rateLimited', 'storageUnavailable', 'paymentUnavailable') },
  },
} satisfies Record<string, EndpointSchema>;

export async function readMe(app: FastifyInstance, deps: MeDeps): Promise<void> {
  const { db, requireUser, clock } = deps;
  // Any key may read who it acts for, whatever its scopes (CONTRACT §21).
  app.get('/me', { schema: DOCS.readMe, preHandler: requireUser(undefined, { anyKey: true }) }, async (request) => {
    // Read from the database, not the cache: daily_usage changes on every counted use.
    const user = (await users.findWithLocale(db, currentUser(request).id)) ?? { ...currentUser(request), locale: null, monthly_usage: 0, last_usage_month: null };
    // The request's live snapshot: a reload may change the limits.
    const limits = planLimitsOf(request.context.live.settings.plans, user.plan);
    const now = clock();
    const monthly = usedThisMonth(user, utcMonth(now));
    return {
      user_id: user.id, email: user.email, plan: user.plan, daily_usage: user.daily_usage, last_usage_date: user.last_usage_date,
      limits, daily_remaining: dailyRemaining(limits, usedToday(user, utcDay(now))),
      // CONTRACT §29: the uses of this UTC month (0 once a new month began) on a plan with a monthly
      // window; null on one without, where a count kept from an earlier plan would only mislead.
      monthly_usage: limits.monthly === null ? null : monthly, monthly_remaining: monthlyRemaining(limits, monthly),
      // With metered overage: the uses past the included allowance (CONTRACT §23).
      ...(limits.overage ? { monthly_overage: Math.max(0, monthly - limits.monthly!) } : {}),
      // null until the user opens a verification link (CONTRACT §13): a client knows to offer a new one.
      email_verified_at: user.email_verified_at?.toISOString() ?? null,
      // Only once chosen (CONTRACT §20): the spec's body is unchanged for every other user.
      ...(user.locale === null ? {} : { locale: user.locale }),
      // Only with organizations (CONTRACT §22): the spec's body is unchanged without them.
      ...(deps.organizations ? { orgs: await organizationsOf(db, user.id) } : {}),
    };
  });
}

/**
 * PATCH /api/v1/user/me {locale}: the language of the user's mails, one the gateway has texts for
 * (`en-GB` reads as `en`); null forgets it (mails then follow errors.language).
 */
export async function patchMe(app: FastifyInstance, deps: Pick<MeDeps, 'db' | 'requireUser'>): Promise<void> {
  const { db, requireUser } = deps;
  app.patch('/me', { schema: DOCS.patchMe, preHandler: requireUser() }, async (request, reply) => {
    const asked = request.body !== null && typeof request.body === 'object' ? (request.body as Record<string, unknown>).locale : undefined;
    const locale = asked === null ? null : supportedLanguage(asked, (reply.server.errorStyle ?? DEFAULT_STYLE).languages);
    if (locale === undefined) return sendError(reply, 'localeUnsupported');
    const { id } = currentUser(request);
    if (!(await users.setLocale(db, id, locale))) return sendError(reply, 'userNotFound');
    request.log.info({ userId: id, locale }, 'locale changed');
    return successBody(reply, 'localeChanged', { locale });
  });
}

export interface DeleteMeDeps {
  db: Database;
  audit: Audit;
  passwords: Passwords;
  requireUser: RequireUser;
  identities: Pick<IdentityCache, 'forgetUser'>;
  clock: () => Date;
  /** With billing (CONTRACT §23): sets the user's running subscriptions to cancel at period end; false when Stripe could not be told. */
  cancelSubscriptions?: (owner: { type: 'user'; id: number }) => Promise<boolean>;
}

/** Under the auth rate limit, as every endpoint that checks a password (user/routes.ts). */
export async function deleteMe(app: FastifyInstance, deps: DeleteMeDeps): Promise<void> {
  const { db, passwords, requireUser, identities, clock } = deps;

  app.delete('/me', { schema: DOCS.deleteMe, preHandler: requireUser() }, async (request, reply) => {
    const identity = currentIdentity(request);
    const { id } = identity.user;
    // With a second factor, a fresh aal2 sign-in too (CONTRACT §13 amended): before any password is hashed.
    if (!(await secondFactorFresh(db, identity, clock()))) return sendError(reply, 'recentAuthRequired');
    const password = textField(request.body, 'password');
    const user = isTooLong(password) ? undefined : await users.findByIdWithHash(db, id);
    if (!user || !(await passwordConfirmed(passwords, user, password, identity, clock()))) return refuseCredentials(request, reply, user ? 'wrongPassword' : 'passwordTooLong', id);
    // A paying account stops being billed first: its subscriptions end with the period already paid.
    // Not for an account that would be refused as an organization's last owner (checked again below, under the locks).
    if (deps.cancelSubscriptions) {
      const orphans = await lastOwnedBy(db, id);
      if (orphans.length) return sendError(reply, 'lastOwner', { orgs: orphans });
      if (!(await deps.cancelSubscriptions({ type: 'user', id }))) return sendError(reply, 'paymentUnavailable');
    }
    // Only if the password checked is still the password.
    // The user's row, then the organizations' (orgs/change.ts's order): no other owner leaves them meanwhile.
    const deleted = await changeAccount(deps, { userId: id, mode: 'update', by: byUser(clientOf(request)) }, async ({ tx, record }) => {
      const orphans = await lastOwnedBy(tx, id);
      if (orphans.length) return { orphans };
      const gone = await users.deleteUser(tx, id, user);
      if (gone) await record('account.deleted', undefined, gone);
      return gone;
    });
    // An organization is never left without an owner (CONTRACT §22): its last owner hands it over or deletes it first.
    if (deleted && 'orphans' in deleted) return sendError(reply, 'lastOwner', { orgs: deleted.orphans });
    if (!deleted) return refuseCredentials(request, reply, 'changedMeanwhile', id);
    // At once here; the delete triggers carry it to every other instance (tokens, keys, WebSockets).
    identities.forgetUser(id);
    request.log.info({ userId: id }, 'account deleted by its user');
    return successBody(reply, 'accountDeleted');
  });
}
