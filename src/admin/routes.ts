// /admin/v1/* (CONTRACT §4): what operators and billing services change, behind the admin key.
// Registered under the /admin prefix with its own hook and not-found handler, so every /admin
// path, known or not, answers the same way to a caller without the key.
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteGenericInterface } from 'fastify';
import { changeAccount } from '../account/change.js';
import type { Audit } from '../audit.js';
import type { Config } from '../config/schema.js';
import { planUnknownParams, sendDenial, sendError, successBody } from '../errors/index.js';
import type { FailureLog } from '../telemetry/logThrottle.js';
import type { IdentityCache } from '../storage/feed/index.js';
import type { Events } from '../webhooks/emitter.js';
import type { Database } from '../storage/database/index.js';
import { lookupForm, storable } from '../credentials/emailAddress.js';
import { dailyRemaining, knownPlans, monthlyRemaining, planLimitsOf, usedThisMonth, usedToday } from '../pipeline/index.js';
import { listKeys, revokeKeyAsOperator, revokeLeakedKeys } from '../keys/index.js';
import { listAuditEvents, listDeliveries } from '../storage/events/index.js';
import {
  activeSessions, deleteUser, endOlderTokens, findByEmail, findById, findWithLocale, isUsersSession, listLinks, listPasskeys, listUsers, parseUserId, removeSecondFactor,
  revokeAllForUser, revokeSession, setActive, writePlanFrom,
} from '../storage/accounts/index.js';
import { usageSince } from '../storage/usage/index.js';
import { lastOwnedBy } from '../storage/orgs/index.js';
import { billingView, operatorSetsPlan, overrideFlag, planRules } from '../billing/operator.js';
import { accountRoutes, type InvitationMail } from './accounts.js';
import { overviewRoutes } from './overview.js';
import { importRoutes } from './imports.js';
import { adminAccess, by } from './access.js';
import { operatorRoutes } from './operatorRoutes.js';
import { adminView, auditFilter, auditPages, auditView, datesAsIso, deliveryView, field, iso, listFilter, userPages } from './views.js';
import { utcDay, utcMonth } from '../time.js';
import { adminOrgRoutes, type OrgAdminDeps } from './orgs.js';
import { adminDomainRoutes } from './orgDomains.js';
import { adminSamlRoutes } from './orgSaml.js';
import { adminOrgKeyRoutes } from './orgKeys.js';
import { DOCS } from './routes.openapi.js';

const ALERT_TYPE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$/;
/** Below the outbox's per-message limit (MAX_MESSAGE_BYTES of webhooks/emitter.ts), leaving room for the envelope. */
const ALERT_DATA_MAX_BYTES = 60 * 1024;

export interface AdminRoutesDeps {
  db: Database;
  identities: Pick<IdentityCache, 'forgetUser' | 'forgetKey'>;
  /** With organizations enabled: an organization's plan set here holds here at once (orgs.ts). */
  memberships?: OrgAdminDeps['memberships'];
  events: Events;
  audit: Audit;
  /** What the console sets on the requests it makes for its session (console.ts): their actor is `console`. */
  consoleMark?: string;
  /** admin.apiKey as the live configuration has it (SIGHUP rotates it); empty: only operators' tokens (none: no admin API). */
  apiKey: () => string;
  /** The plans and their limits, read per request (a reload may change them). */
  config: () => Pick<Config, 'plans' | 'routes'>;
  /** billing.stripe (not reloaded: a change of it needs a restart), for the owners' billing and the operator's plan changes (CONTRACT §29). */
  billing: Config['billing'];
  clock: () => Date;
  /** Requests refused for a missing or wrong admin key, here and in the console: a line per interval, with a count. */
  keyRefusals: FailureLog;
  /** Whether the admin API exists at all (access.ts). */
  adminExists: () => Promise<boolean>;
  /** The console's origin, for operators' enrolment links (operatorRoutes.ts). */
  linkOrigin: () => string | undefined;
  /** The invitation mail of a user an operator creates (accounts.ts); absent: creating one answers 503. */
  invitations?: InvitationMail;
  /** organizations.sso is set (CONTRACT §31; not reloaded): an operator may verify organizations' domains. */
  ssoConfigured?: boolean;
  /** With billing.stripe: sets a user's running subscriptions to cancel at period end before its erasure; false when Stripe could not be told. */
  cancelSubscriptions?: (owner: { type: 'user'; id: number }) => Promise<boolean>;
}

const USAGE_DAYS = 30;
const DELIVERIES_LISTED = 100;

/** A handler of this file: the deps first, then what fastify passes. */
type Handler<R extends RouteGenericInterface> = (deps: AdminRoutesDeps, request: FastifyRequest<R>, reply: FastifyReply) => Promise<unknown>;
type ById = { Params: { id: string } };

/**
 * The endpoint map of /admin/v1: the key check, the not-found answer, then each route and its
 * named handler, in the order they have always been registered.
 */
export async function adminRoutes(app: FastifyInstance, deps: AdminRoutesDeps): Promise<void> {
  const on = <R extends RouteGenericInterface>(handler: Handler<R>) => (request: FastifyRequest<R>, reply: FastifyReply) => handler(deps, request, reply);
  app.addHook('onRequest', adminAccess(deps));
  app.setNotFoundHandler((_request, reply) => sendError(reply, 'adminNotFound'));
  // Each route's least role (CONTRACT §24): viewer reads; support ends sessions and keys, resets
  // MFA, (de)activates and alerts; admin changes plans and deletes.
  const viewer = { config: { role: 'viewer' as const } };
  const support = { config: { role: 'support' as const } };
  const admin = { config: { role: 'admin' as const } };
  app.get('/v1/users/:id', { ...viewer, schema: DOCS.getUser }, on(getUser));
  app.get('/v1/users', { ...viewer, schema: DOCS.findUsers }, on(findUsers));
  app.get('/v1/audit', { ...viewer, schema: DOCS.listAudit }, on(listAudit));
  app.get('/v1/users/:id/sessions', { ...viewer, schema: DOCS.listSessions }, on(listSessions));
  app.get('/v1/users/:id/api-keys', { ...viewer, schema: DOCS.listApiKeys }, on(listApiKeys));
  app.get('/v1/users/:id/passkeys', { ...viewer, schema: DOCS.listUserPasskeys }, on(listUserPasskeys));
  app.get('/v1/users/:id/identities', { ...viewer, schema: DOCS.listIdentities }, on(listIdentities));
  app.delete('/v1/users/:id/sessions', { ...support, schema: DOCS.revokeSessions }, on(revokeSessions));
  app.delete('/v1/users/:id/sessions/:sid', { ...support, schema: DOCS.revokeSession }, on(revokeSessions));
  app.delete('/v1/users/:id/mfa', { ...support, schema: DOCS.resetMfa }, on(resetMfa));
  app.delete('/v1/users/:id', { ...admin, schema: DOCS.eraseUser }, on(eraseUser));
  app.put('/v1/users/:id/plan', { ...admin, schema: DOCS.setUserPlan }, on(setUserPlan));
  app.get('/v1/users/:id/usage', { ...viewer, schema: DOCS.userUsage }, on(userUsage));
  app.get('/v1/users/:id/webhook-deliveries', { ...viewer, schema: DOCS.userDeliveries }, on(userDeliveries));
  app.put('/v1/users/:id/active', { ...support, schema: DOCS.setUserActive }, on(setUserActive));
  app.post('/v1/alerts', { ...support, schema: DOCS.storeAlert }, on(storeAlert));
  app.delete('/v1/api-keys/:id', { ...support, schema: DOCS.revokeApiKey }, on(revokeApiKey));
  app.post('/v1/api-keys/leaked', { ...support, schema: DOCS.revokeLeaked }, on(revokeLeaked));
  await app.register(operatorRoutes, { db: deps.db, audit: deps.audit, apiKey: deps.apiKey, clock: deps.clock, linkOrigin: deps.linkOrigin });
  // Each of these declares its routes' roles beside them.
  accountRoutes(app, deps, by);
  overviewRoutes(app, deps);
  adminOrgRoutes(app, deps, by);
  adminDomainRoutes(app, { ...deps, ssoConfigured: () => deps.ssoConfigured === true }, by);
  adminSamlRoutes(app, { ...deps, ssoConfigured: () => deps.ssoConfigured === true }, by);
  adminOrgKeyRoutes(app, deps);
  // The imports (CONTRACT §27), in a scope of their own: they read JSON lines.
  await app.register(async function importScope(scope) { await importRoutes(scope, deps); });
}

async function userOf(db: Database, text: string) {
  const id = parseUserId(text);
  return id === undefined ? undefined : findById(db, id);
}

// The user with its billing (CONTRACT §29): what support needs to answer "why am I on this plan?".
async function getUser({ db, config, clock, billing }: AdminRoutesDeps, request: FastifyRequest<ById>, reply: FastifyReply) {
  const id = parseUserId(request.params.id);
  const user = id === undefined ? undefined : await findById(db, id);
  if (!user) return sendError(reply, 'adminNotFound');
  return { ...adminView(user), billing: await billingView(db, { type: 'user', id: user.id }, user.plan, planRules({ plans: config().plans, billing }, clock())) };
}

// Support finds an account by the address its owner gives (`email=`), or browses and searches
// (CONTRACT §16): newest first, in keyset pages.
async function findUsers({ db, config }: AdminRoutesDeps, request: FastifyRequest<{ Querystring: Record<string, unknown> }>, reply: FastifyReply) {
  const { email: raw, query, plan, active, limit, cursor } = request.query;
  if (raw !== undefined) {
    if (typeof raw !== 'string' || !raw.trim()) return sendError(reply, 'adminEmailRequired');
    // Looked up as at login, whatever its shape: support must find an account stored before
    // registration refused its address (CONTRACT §19), to fix it.
    const email = lookupForm(raw);
    const user = storable(email) ? await findByEmail(db, email) : undefined;
    if (!user) return sendError(reply, 'adminNotFound');
    return adminView(user);
  }
  const filter = listFilter({ query, plan, active, limit, cursor }, knownPlans(config()));
  if (!filter) return sendError(reply, 'adminListInvalid');
  // One more than asked tells whether there is a next page without a count.
  const { page, next } = userPages.split(await listUsers(db, { ...filter, limit: filter.limit + 1 }), filter.limit);
  return { users: page.map(adminView), next_cursor: next };
}

// The audit log (CONTRACT §16, §17): newest first, in keyset pages, by user, type and time.
async function listAudit({ db }: AdminRoutesDeps, request: FastifyRequest<{ Querystring: Record<string, unknown> }>, reply: FastifyReply) {
  const filter = auditFilter(request.query);
  if (!filter) return sendError(reply, 'auditListInvalid');
  const { page, next } = auditPages.split(await listAuditEvents(db, { ...filter, limit: filter.limit + 1 }), filter.limit);
  return { events: page.map(auditView), next_cursor: next };
}

async function listSessions({ db, clock }: AdminRoutesDeps, request: FastifyRequest<ById>, reply: FastifyReply) {
  const user = await userOf(db, request.params.id);
  if (!user) return sendError(reply, 'adminNotFound');
  const sessions = await activeSessions(db, user.id, clock());
  return {
    sessions: sessions.map((s) => ({ id: s.id, created_at: iso(s.created_at), last_used_at: iso(s.last_used_at), user_agent: s.user_agent, ip: s.ip })),
  };
}

async function listApiKeys({ db }: AdminRoutesDeps, request: FastifyRequest<ById>, reply: FastifyReply) {
  const user = await userOf(db, request.params.id);
  if (!user) return sendError(reply, 'adminNotFound');
  const keys = await listKeys(db, user.id);
  return {
    api_keys: keys.map((k) => ({
      id: k.id, name: k.name, start: k.start, scopes: k.scopes, active: k.revoked === 0,
      created_at: iso(k.created_at), expires_at: iso(k.expires_at), last_used_at: iso(k.last_used_at),
    })),
  };
}

// One key, whoever holds it (CONTRACT §21): a support desk's answer to "my key leaked".
async function revokeApiKey(deps: AdminRoutesDeps, request: FastifyRequest<ById>, reply: FastifyReply) {
  const id = parseUserId(request.params.id);
  const revoked = id === undefined ? undefined : await revokeKeyAsOperator(deps, id, by(request));
  if (!revoked) return sendError(reply, 'adminNotFound');
  request.log.info({ userId: revoked.userId, keyId: revoked.id }, 'admin: API key revoked');
  return successBody(reply, 'apiKeyRevoked', { id: revoked.id, user_id: revoked.userId });
}

const MAX_LEAKED = 1000;

// Keys a secret scanner found in the open: the live ones among them are revoked, the rest ignored
// (an unknown key reveals nothing: the answer lists only ids that were revoked).
async function revokeLeaked(deps: AdminRoutesDeps, request: FastifyRequest, reply: FastifyReply) {
  const keys = field(request.body, 'keys');
  if (!Array.isArray(keys) || keys.length > MAX_LEAKED || !keys.every((k) => typeof k === 'string' && k.length <= 256)) return sendError(reply, 'badRequest');
  const revoked = await revokeLeakedKeys(deps, keys as string[], by(request));
  request.log.info({ revoked }, 'admin: leaked API keys revoked');
  return { revoked };
}

async function listUserPasskeys({ db }: AdminRoutesDeps, request: FastifyRequest<ById>, reply: FastifyReply) {
  const user = await userOf(db, request.params.id);
  if (!user) return sendError(reply, 'adminNotFound');
  return { passkeys: (await listPasskeys(db, user.id)).map(datesAsIso) };
}

async function listIdentities({ db }: AdminRoutesDeps, request: FastifyRequest<ById>, reply: FastifyReply) {
  const user = await userOf(db, request.params.id);
  if (!user) return sendError(reply, 'adminNotFound');
  // Newest first; who they are at the provider, never a token.
  const links = (await listLinks(db, user.id)).reverse();
  return { identities: links.map(({ provider, issuer, subject, email, created_at }) => datesAsIso({ provider, issuer, subject, email, created_at })) };
}

// Ends one session or all of them: their refresh tokens stop working at once, and every access
// token of the user issued before is refused within a second on every instance (CONTRACT §33: the
// generation is the user's, so the sessions left refresh into new ones).
async function revokeSessions(deps: AdminRoutesDeps, request: FastifyRequest<{ Params: { id: string; sid?: string } }>, reply: FastifyReply) {
  const id = parseUserId(request.params.id);
  const sid = request.params.sid === undefined ? undefined : parseUserId(request.params.sid);
  if (id === undefined || (request.params.sid !== undefined && sid === undefined)) return sendError(reply, 'adminNotFound');
  const ended = await changeAccount(deps, { userId: id, mode: 'update', by: by(request) }, async ({ tx, user, record }) => {
    if (sid !== undefined && !(await isUsersSession(tx, id, sid))) return undefined;
    const n = sid === undefined ? await revokeAllForUser(tx, id, 'session') : await revokeSession(tx, sid);
    await endOlderTokens(tx, user);
    await record('admin.sessions_revoked', { session_id: sid ?? null, revoked: n });
    return n;
  });
  if (ended === undefined) return sendError(reply, 'adminNotFound');
  request.log.info({ userId: id, sessionId: sid ?? 'all', ended }, 'admin: sessions revoked');
  return successBody(reply, 'sessionsRevoked', { revoked: ended });
}

// A user who lost their authenticator: TOTP and recovery codes go; password sign-in works again.
async function resetMfa(deps: AdminRoutesDeps, request: FastifyRequest<ById>, reply: FastifyReply) {
  const user = await userOf(deps.db, request.params.id);
  if (!user) return sendError(reply, 'adminNotFound');
  const removed = await deps.db.transaction(async (tx) => {
    const n = await removeSecondFactor(tx, user.id);
    // TOTP removed: the access tokens of before it are refused, as after the user's own removal (CONTRACT §33).
    if (n > 0) await endOlderTokens(tx, user);
    await deps.audit.record({ type: 'admin.mfa_reset', ...by(request), userId: user.id, data: { removed: n } }, tx);
    return n;
  });
  request.log.info({ userId: user.id, removed }, 'admin: second factor removed');
  return successBody(reply, 'mfaReset', { user_id: user.id });
}

// Erasure on request (GDPR art. 17): the account and everything hanging from it; the email is free again.
// As the user's own deletion (user/me.ts): an organization is never left without an owner
// (CONTRACT §22, "the last owner cannot leave"), so its last owner is refused, 409 with the
// organizations, until another member is made owner or the organization is deleted.
async function eraseUser(deps: AdminRoutesDeps, request: FastifyRequest<ById>, reply: FastifyReply) {
  const id = parseUserId(request.params.id);
  if (id === undefined) return sendError(reply, 'adminNotFound');
  // Before Stripe is told: a refused erasure cancels nothing (checked again below, under the locks).
  const orphans = await lastOwnedBy(deps.db, id);
  if (orphans.length) return sendError(reply, 'lastOwner', { orgs: orphans });
  // As the user's own deletion does (CONTRACT §23): Stripe stops billing at period end first, and
  // an erasure Stripe could not be told of keeps the account (503, try again) rather than leave
  // Stripe billing a person the gateway no longer knows.
  if (deps.cancelSubscriptions && !(await deps.cancelSubscriptions({ type: 'user', id }))) return sendError(reply, 'paymentUnavailable');
  // The user's row, then the organizations' (orgs/change.ts's order): no other owner leaves them meanwhile.
  const user = await changeAccount(deps, { userId: id, mode: 'update', by: by(request) }, async ({ tx, record }) => {
    const last = await lastOwnedBy(tx, id);
    if (last.length) return { orphans: last };
    const gone = await deleteUser(tx, id);
    if (gone) await record('admin.user_deleted', undefined, gone);
    return gone;
  });
  if (user && 'orphans' in user) return sendError(reply, 'lastOwner', { orgs: user.orphans });
  if (!user) return sendError(reply, 'adminNotFound');
  deps.identities.forgetUser(user.id);
  request.log.info({ userId: user.id }, 'admin: user deleted');
  return adminView(user);
}

async function setUserPlan(deps: AdminRoutesDeps, request: FastifyRequest<ById>, reply: FastifyReply) {
  const id = parseUserId(request.params.id);
  if (id === undefined) return sendError(reply, 'adminNotFound');
  const plan = field(request.body, 'plan');
  const plans = knownPlans(deps.config());
  if (typeof plan !== 'string' || !plans.includes(plan)) return sendDenial(reply, { code: 'planUnknown', params: planUnknownParams(plans) });
  const override = overrideFlag(field(request.body, 'override'));
  if (override === undefined) return sendError(reply, 'badRequest');
  // The user and its subscription record in one transaction, refused when billing manages the plan
  // and computes another (CONTRACT §29) unless it is an override.
  const rules = planRules({ plans: deps.config().plans, billing: deps.billing }, deps.clock());
  const changed = await deps.db.transaction((tx) => operatorSetsPlan(tx, { type: 'user', id }, { plan, override }, rules, async (data) => {
    // The user's row is locked (operatorSetsPlan): it is there.
    const { user, previousPlan } = (await writePlanFrom(tx, id, plan))!;
    await deps.audit.record({ type: 'admin.plan_changed', ...by(request), userId: id, data: { plan, ...data } }, tx, { previous_plan: previousPlan });
    return user;
  }));
  if (changed.outcome === 'managed') return sendError(reply, 'planManagedByBilling', { billing_plan: changed.billingPlan });
  if (changed.outcome === 'gone') return sendError(reply, 'adminNotFound');
  const user = changed.result;
  // At once here; the users trigger's NOTIFY carries it to every other instance.
  deps.identities.forgetUser(id);
  request.log.info({ userId: id, plan, override }, 'admin: plan set');
  // With its billing after the change, as GET shows it (an override says so: override_since).
  return { ...adminView(user), billing: await billingView(deps.db, { type: 'user', id }, user.plan, rules) };
}

// Today's count and what is left of it, the plan's limits, and the last 30 days (newest first,
// every day listed, 0 where nothing was counted), from users and the usage_days rollup (008).
// This month's count too (CONTRACT §23, 027).
async function userUsage({ db, config, clock }: AdminRoutesDeps, request: FastifyRequest<ById>, reply: FastifyReply) {
  const id = parseUserId(request.params.id);
  const user = id === undefined ? undefined : await findWithLocale(db, id);
  if (!user) return sendError(reply, 'adminNotFound');
  const now = clock();
  const today = utcDay(now);
  const month = utcMonth(now);
  const days = Array.from({ length: USAGE_DAYS }, (_, i) => utcDay(new Date(now.getTime() - i * 86_400_000)));
  const counted = await usageSince(db, user.id, days.at(-1)!);
  const limits = planLimitsOf(config().plans, user.plan);
  const used = usedToday(user, today);
  return {
    user_id: user.id,
    plan: user.plan,
    limits,
    today: { date: today, uses: used },
    daily_remaining: dailyRemaining(limits, used),
    month: { date: month, uses: usedThisMonth(user, month) },
    monthly_remaining: monthlyRemaining(limits, usedThisMonth(user, month)),
    history: days.map((date) => ({ date, uses: counted.get(date) ?? 0 })),
  };
}

// The user's webhook messages, newest first, the last DELIVERIES_LISTED of them: pending ones,
// and finished ones for 7 days (the outbox, 010). The id is the webhook-id receivers got.
async function userDeliveries({ db }: AdminRoutesDeps, request: FastifyRequest<ById>, reply: FastifyReply) {
  const id = parseUserId(request.params.id);
  const user = id === undefined ? undefined : await findById(db, id);
  if (!user) return sendError(reply, 'adminNotFound');
  return { user_id: user.id, deliveries: (await listDeliveries(db, user.id, DELIVERIES_LISTED)).map(deliveryView) };
}

async function setUserActive(deps: AdminRoutesDeps, request: FastifyRequest<ById>, reply: FastifyReply) {
  const id = parseUserId(request.params.id);
  if (id === undefined) return sendError(reply, 'adminNotFound');
  const active = field(request.body, 'active');
  if (typeof active !== 'boolean') return sendError(reply, 'activeFlagInvalid');
  const user = await deps.db.transaction(async (tx) => {
    const changed = await setActive(tx, id, active);
    if (changed) await deps.audit.record({ type: 'admin.active_changed', ...by(request), userId: id, data: { active } }, tx);
    return changed;
  });
  if (!user) return sendError(reply, 'adminNotFound');
  deps.identities.forgetUser(id);
  request.log.info({ userId: id, active }, 'admin: active flag set');
  return adminView(user);
}

async function storeAlert(deps: AdminRoutesDeps, request: FastifyRequest, reply: FastifyReply) {
  const id = parseUserId(field(request.body, 'user_id'));
  const type = field(request.body, 'type');
  const data = field(request.body, 'data');
  if (id === undefined || typeof type !== 'string' || !ALERT_TYPE.test(type) || data === null || typeof data !== 'object' || Array.isArray(data)) {
    return sendError(reply, 'alertInvalid');
  }
  // Past the outbox's per-message limit the message would be refused: say so here, as a 413.
  if (Buffer.byteLength(JSON.stringify(data)) > ALERT_DATA_MAX_BYTES) return sendError(reply, 'payloadTooLarge');
  // Accepted whatever the user's plan or webhook: each attempt decides, off this request. The
  // 202 means stored: it survives this instance. The user is held (FOR SHARE) until the message
  // is in: one deleted meanwhile is a 404, not a foreign-key error.
  const stored = await changeAccount(deps, { userId: id, mode: 'share' }, async ({ event }) => {
    await event(type, data as Record<string, unknown>);
    return true;
  });
  if (!stored) return sendError(reply, 'adminNotFound');
  request.log.info({ userId: id, type }, 'admin: alert stored for delivery');
  return reply.code(202).send(successBody(reply, 'alertAccepted'));
}
