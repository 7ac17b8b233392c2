// /admin/v1/* (CONTRACT §4): what operators and billing services change, behind the admin key.
// Registered under the /admin prefix with its own hook and not-found handler, so every /admin
// path, known or not, answers the same way to a caller without the key.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Audit, AuditActor, AuditEvent } from '../audit.js';
import type { Config } from '../config/schema.js';
import { planUnknownMessage, sendDenial, sendError } from '../errors.js';
import { headerValue } from '../http.js';
import type { FailureLog } from '../telemetry/logThrottle.js';
import type { IdentityCache } from '../storage/identityCache.js';
import type { Events } from '../webhooks/emitter.js';
import type { Database } from '../storage/db.js';
import { lookupForm, storable } from '../credentials/emailAddress.js';
import { dailyRemaining, knownPlans, planLimitsOf, usedToday } from '../pipeline/index.js';
import { listKeys } from '../storage/apiKeys.js';
import { listAuditEvents, type AuditFilter, type AuditRow } from '../storage/audit.js';
import { listLinks } from '../storage/identities.js';
import { removeSecondFactor } from '../storage/mfa.js';
import { listPasskeys } from '../storage/passkeys.js';
import { revokeAllForUser } from '../storage/refreshTokens.js';
import { activeSessions, isUsersSession, revokeSession } from '../storage/sessions.js';
import { usageSince } from '../storage/dailyUsage.js';
import { listUsers, type UserFilter } from '../storage/userList.js';
import { deleteUser, findByEmail, findById, lockUser, parseUserId, setActive, setPlan, type User } from '../storage/users.js';
import { listDeliveries, type DeliveryRow } from '../storage/webhookDeliveries.js';
import { utcDay } from '../time.js';

/** The header console.ts marks its own requests with (its value is a secret of the process). */
export const CONSOLE_MARK_HEADER = 'x-gateway-console';

const ALERT_TYPE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$/;
export const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;
/** Below the outbox's per-message limit (MAX_MESSAGE_BYTES of webhooks/emitter.ts), leaving room for the envelope. */
const ALERT_DATA_MAX_BYTES = 60 * 1024;

const digest = (value: string) => createHash('sha256').update(value).digest();

const iso = (date: Date | null) => (date ? date.toISOString() : null);

/** The user as the admin API shows it: the table's columns, never the password hash. */
function adminView(user: User) {
  return {
    id: user.id,
    email: user.email,
    plan: user.plan,
    is_active: user.is_active,
    daily_usage: user.daily_usage,
    last_usage_date: user.last_usage_date,
    created_at: user.created_at instanceof Date ? user.created_at.toISOString() : user.created_at,
    email_verified_at: iso(user.email_verified_at),
  };
}

/** A webhook message as the admin API lists it: what happened to it, never its body. */
function deliveryView(row: DeliveryRow) {
  return {
    id: row.id,
    type: row.type,
    status: row.status,
    attempts: row.attempts,
    last_error: row.last_error,
    created_at: iso(row.created_at),
    last_attempt_at: iso(row.last_attempt_at),
    next_attempt_at: row.status === 'pending' ? iso(row.next_attempt_at) : null,
    finished_at: iso(row.finished_at),
  };
}

/** A body field; a missing body (no content) reads as {} like any other. */
function field(body: unknown, name: string): unknown {
  return body !== null && typeof body === 'object' ? (body as Record<string, unknown>)[name] : undefined;
}

export interface AdminRoutesDeps {
  db: Database;
  identities: Pick<IdentityCache, 'forgetUser'>;
  events: Events;
  audit: Audit;
  /** What the console sets on the requests it makes for its session (console.ts): their actor is `console`. */
  consoleMark?: string;
  /** admin.apiKey; empty: the admin API does not exist. */
  apiKey: string;
  /** The plans and their limits, read per request (a reload may change them). */
  config: () => Pick<Config, 'plans' | 'routes'>;
  clock: () => Date;
  /** Requests refused for a missing or wrong admin key, here and in the console: a line per interval, with a count. */
  keyRefusals: FailureLog;
}

const USAGE_DAYS = 30;
const LIST_DEFAULT = 50;
const LIST_MAX = 200;

/** A query parameter as text: undefined when absent or empty, null when repeated or not text (a 400). */
const queryText = (v: unknown) => (v === undefined || v === '' ? undefined : typeof v === 'string' ? v : null);

/**
 * A keyset listing's pages (newest first): `limit` and `cursor` checked, and the next cursor. A
 * cursor is the last id of the page read, tagged per listing; opaque to callers so its form may change.
 */
function keysetPages(tag: string) {
  return {
    /** The page asked for; undefined when `limit` or `cursor` is malformed. */
    page(limit: string | undefined, cursor: string | undefined): { limit: number; beforeId?: number } | undefined {
      const n = limit === undefined ? LIST_DEFAULT : /^\d{1,3}$/.test(limit) ? Number(limit) : NaN;
      if (!(n >= 1 && n <= LIST_MAX)) return undefined;
      if (cursor === undefined) return { limit: n };
      const id = new RegExp(`^${tag}([1-9]\\d{0,14})$`).exec(Buffer.from(cursor, 'base64url').toString())?.[1];
      return id === undefined ? undefined : { limit: n, beforeId: Number(id) };
    },
    /** Rows read with one more than `limit` asked: the page, and the cursor of the next one (null: none). */
    split<T extends { id: number }>(rows: T[], limit: number): { page: T[]; next: string | null } {
      const page = rows.slice(0, limit);
      return { page, next: rows.length > limit ? Buffer.from(`${tag}${page.at(-1)!.id}`).toString('base64url') : null };
    },
  };
}
const userPages = keysetPages('u');
const auditPages = keysetPages('a');

/** The listing's parameters, checked; undefined when one is malformed (a 400, not a guess). */
function listFilter(q: Record<string, unknown>, plans: readonly string[]): UserFilter | undefined {
  const [query, plan, active, limit, cursor] = [q.query, q.plan, q.active, q.limit, q.cursor].map(queryText);
  if ([query, plan, active, limit, cursor].includes(null)) return undefined;
  const page = userPages.page(limit ?? undefined, cursor ?? undefined);
  if (!page) return undefined;
  if (plan !== undefined && !plans.includes(plan!)) return undefined;
  if (active !== undefined && active !== 'true' && active !== 'false') return undefined;
  return {
    ...(query?.trim() ? { query: query.trim() } : {}),
    ...(plan !== undefined ? { plan: plan! } : {}),
    ...(active !== undefined ? { active: active === 'true' } : {}),
    ...page,
  };
}

/** GET /admin/v1/audit's parameters, checked; undefined when one is malformed. */
function auditFilter(q: Record<string, unknown>): AuditFilter | undefined {
  const [userId, type, since, limit, cursor] = [q.user_id, q.type, q.since, q.limit, q.cursor].map(queryText);
  if ([userId, type, since, limit, cursor].includes(null)) return undefined;
  const id = userId === undefined ? undefined : parseUserId(userId!);
  const at = since === undefined ? undefined : new Date(since!);
  const page = auditPages.page(limit ?? undefined, cursor ?? undefined);
  if ((userId !== undefined && id === undefined) || (at !== undefined && Number.isNaN(at.getTime())) || !page) return undefined;
  return {
    ...(id !== undefined ? { userId: id } : {}),
    ...(type !== undefined ? { type: type! } : {}),
    ...(at !== undefined ? { since: at } : {}),
    ...page,
  };
}

const auditView = (row: AuditRow) => ({
  id: row.id, at: row.at.toISOString(), type: row.type, actor: row.actor, user_id: row.user_id, ip: row.ip, user_agent: row.user_agent, data: row.data,
});

/** Rows from tables other branches own: their dates as ISO strings like every other answer. */
const datesAsIso = (row: object) =>
  Object.fromEntries(Object.entries(row).map(([k, v]) => [k, v instanceof Date ? v.toISOString() : typeof v === 'bigint' ? Number(v) : v]));
const DELIVERIES_LISTED = 100;

export async function adminRoutes(app: FastifyInstance, deps: AdminRoutesDeps): Promise<void> {
  const { db, identities, events, audit, config, clock } = deps;
  // Who changed it, for the audit log: the console, the CLI acting through --admin (it says so;
  // it holds the key anyway), or whoever else holds the admin key.
  const by = (request: FastifyRequest): Pick<AuditEvent, 'actor' | 'ip' | 'userAgent'> => {
    const marked = deps.consoleMark !== undefined && headerValue(request.headers, CONSOLE_MARK_HEADER) === deps.consoleMark;
    const actor: AuditActor = marked ? 'console' : headerValue(request.headers, 'x-gateway-actor') === 'cli' ? 'cli' : 'admin';
    return { actor, ip: request.ip, userAgent: headerValue(request.headers, 'user-agent') || undefined };
  };
  const userOf = async (text: string) => {
    const id = parseUserId(text);
    return id === undefined ? undefined : findById(db, id);
  };
  const configuredKey = deps.apiKey;
  // Hashing both sides gives equal lengths, so timingSafeEqual compares in constant time and the
  // key's length does not leak either.
  const expected = configuredKey ? digest(configuredKey) : undefined;

  app.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    // No key configured: the admin API does not exist (not "forbidden", which would invite guessing).
    if (!expected) return sendError(reply, 'adminNotFound');
    const presented = BEARER.exec(headerValue(request.headers, 'authorization'))?.[1];
    if (!presented || !timingSafeEqual(digest(presented), expected)) {
      deps.keyRefusals.failed(undefined, { ip: request.ip, url: request.url });
      return sendDenial(reply, { code: 'adminUnauthorized', headers: { 'www-authenticate': 'Bearer realm="gateway-admin"' } });
    }
  });
  app.setNotFoundHandler((_request, reply) => sendError(reply, 'adminNotFound'));

  app.get<{ Params: { id: string } }>('/v1/users/:id', async (request, reply) => {
    const id = parseUserId(request.params.id);
    const user = id === undefined ? undefined : await findById(db, id);
    if (!user) return sendError(reply, 'adminNotFound');
    return adminView(user);
  });

  // Support finds an account by the address its owner gives (`email=`), or browses and searches
  // (CONTRACT §16): newest first, in keyset pages.
  app.get<{ Querystring: Record<string, unknown> }>('/v1/users', async (request, reply) => {
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
  });

  // The audit log (CONTRACT §16, §17): newest first, in keyset pages, by user, type and time.
  app.get<{ Querystring: Record<string, unknown> }>('/v1/audit', async (request, reply) => {
    const filter = auditFilter(request.query);
    if (!filter) return sendError(reply, 'auditListInvalid');
    const { page, next } = auditPages.split(await listAuditEvents(db, { ...filter, limit: filter.limit + 1 }), filter.limit);
    return { events: page.map(auditView), next_cursor: next };
  });

  app.get<{ Params: { id: string } }>('/v1/users/:id/sessions', async (request, reply) => {
    const user = await userOf(request.params.id);
    if (!user) return sendError(reply, 'adminNotFound');
    const sessions = await activeSessions(db, user.id, clock());
    return { sessions: sessions.map((s) => ({ id: s.id, created_at: iso(s.created_at), last_used_at: iso(s.last_used_at), user_agent: s.user_agent, ip: s.ip })) };
  });

  app.get<{ Params: { id: string } }>('/v1/users/:id/api-keys', async (request, reply) => {
    const user = await userOf(request.params.id);
    if (!user) return sendError(reply, 'adminNotFound');
    const keys = await listKeys(db, user.id);
    return { api_keys: keys.map((k) => ({ id: k.id, active: k.revoked === 0, created_at: iso(k.created_at), last_used_at: iso(k.last_used_at) })) };
  });

  app.get<{ Params: { id: string } }>('/v1/users/:id/passkeys', async (request, reply) => {
    const user = await userOf(request.params.id);
    if (!user) return sendError(reply, 'adminNotFound');
    return { passkeys: (await listPasskeys(db, user.id)).map(datesAsIso) };
  });

  app.get<{ Params: { id: string } }>('/v1/users/:id/identities', async (request, reply) => {
    const user = await userOf(request.params.id);
    if (!user) return sendError(reply, 'adminNotFound');
    // Newest first; who they are at the provider, never a token.
    const links = (await listLinks(db, user.id)).reverse();
    return { identities: links.map(({ provider, issuer, subject, email, created_at }) => datesAsIso({ provider, issuer, subject, email, created_at })) };
  });

  // Ends one session or all of them: their refresh tokens stop working at once; access tokens
  // already issued live out their short lifetime, as after the user's own revocation.
  const revokeSessions = async (request: FastifyRequest<{ Params: { id: string; sid?: string } }>, reply: FastifyReply) => {
    const id = parseUserId(request.params.id);
    const sid = request.params.sid === undefined ? undefined : parseUserId(request.params.sid);
    if (id === undefined || (request.params.sid !== undefined && sid === undefined)) return sendError(reply, 'adminNotFound');
    const ended = await db.transaction(async (tx) => {
      // The user's row first, as every transaction ending sessions does (storage/users.ts lockUser).
      if (!(await lockUser(tx, id, 'update'))) return undefined;
      if (sid !== undefined && !(await isUsersSession(tx, id, sid))) return undefined;
      const n = sid === undefined ? await revokeAllForUser(tx, id, 'session') : await revokeSession(tx, sid);
      await audit.record({ type: 'admin.sessions_revoked', ...by(request), userId: id, data: { session_id: sid ?? null, revoked: n } }, tx);
      return n;
    });
    if (ended === undefined) return sendError(reply, 'adminNotFound');
    request.log.info({ userId: id, sessionId: sid ?? 'all', ended }, 'admin: sessions revoked');
    return { message: 'Sessions révoquées', revoked: ended };
  };
  app.delete('/v1/users/:id/sessions', revokeSessions);
  app.delete('/v1/users/:id/sessions/:sid', revokeSessions);

  // A user who lost their authenticator: TOTP and recovery codes go; password sign-in works again.
  app.delete<{ Params: { id: string } }>('/v1/users/:id/mfa', async (request, reply) => {
    const user = await userOf(request.params.id);
    if (!user) return sendError(reply, 'adminNotFound');
    const removed = await db.transaction(async (tx) => {
      const n = await removeSecondFactor(tx, user.id);
      await audit.record({ type: 'admin.mfa_reset', ...by(request), userId: user.id, data: { removed: n } }, tx);
      return n;
    });
    request.log.info({ userId: user.id, removed }, 'admin: second factor removed');
    return { message: 'Second facteur retiré', user_id: user.id };
  });

  // Erasure on request (GDPR art. 17): the account and everything hanging from it; the email is free again.
  app.delete<{ Params: { id: string } }>('/v1/users/:id', async (request, reply) => {
    const id = parseUserId(request.params.id);
    const user = id === undefined ? undefined : await db.transaction(async (tx) => {
      const gone = await deleteUser(tx, id);
      if (gone) await audit.record({ type: 'admin.user_deleted', ...by(request), userId: gone.id }, tx);
      return gone;
    });
    if (!user) return sendError(reply, 'adminNotFound');
    identities.forgetUser(user.id);
    request.log.info({ userId: user.id }, 'admin: user deleted');
    return adminView(user);
  });

  app.put<{ Params: { id: string } }>('/v1/users/:id/plan', async (request, reply) => {
    const id = parseUserId(request.params.id);
    if (id === undefined) return sendError(reply, 'adminNotFound');
    const plan = field(request.body, 'plan');
    const plans = knownPlans(config());
    if (typeof plan !== 'string' || !plans.includes(plan)) return sendDenial(reply, { code: 'planUnknown', message: planUnknownMessage(plans) });
    // setPlan changes the user and its subscription record in one transaction.
    const user = await setPlan(db, id, plan, (tx) => audit.record({ type: 'admin.plan_changed', ...by(request), userId: id, data: { plan } }, tx));
    if (!user) return sendError(reply, 'adminNotFound');
    // At once here; the users trigger's NOTIFY carries it to every other instance.
    identities.forgetUser(id);
    request.log.info({ userId: id, plan }, 'admin: plan set');
    return adminView(user);
  });

  // Today's count and what is left of it, the plan's limits, and the last 30 days (newest first,
  // every day listed, 0 where nothing was counted), from users and the usage_days rollup (008).
  app.get<{ Params: { id: string } }>('/v1/users/:id/usage', async (request, reply) => {
    const id = parseUserId(request.params.id);
    const user = id === undefined ? undefined : await findById(db, id);
    if (!user) return sendError(reply, 'adminNotFound');
    const now = clock();
    const today = utcDay(now);
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
      history: days.map((date) => ({ date, uses: counted.get(date) ?? 0 })),
    };
  });

  // The user's webhook messages, newest first, the last DELIVERIES_LISTED of them: pending ones,
  // and finished ones for 7 days (the outbox, 010). The id is the webhook-id receivers got.
  app.get<{ Params: { id: string } }>('/v1/users/:id/webhook-deliveries', async (request, reply) => {
    const id = parseUserId(request.params.id);
    const user = id === undefined ? undefined : await findById(db, id);
    if (!user) return sendError(reply, 'adminNotFound');
    return { user_id: user.id, deliveries: (await listDeliveries(db, user.id, DELIVERIES_LISTED)).map(deliveryView) };
  });

  app.put<{ Params: { id: string } }>('/v1/users/:id/active', async (request, reply) => {
    const id = parseUserId(request.params.id);
    if (id === undefined) return sendError(reply, 'adminNotFound');
    const active = field(request.body, 'active');
    if (typeof active !== 'boolean') return sendError(reply, 'activeFlagInvalid');
    const user = await db.transaction(async (tx) => {
      const changed = await setActive(tx, id, active);
      if (changed) await audit.record({ type: 'admin.active_changed', ...by(request), userId: id, data: { active } }, tx);
      return changed;
    });
    if (!user) return sendError(reply, 'adminNotFound');
    identities.forgetUser(id);
    request.log.info({ userId: id, active }, 'admin: active flag set');
    return adminView(user);
  });

  app.post('/v1/alerts', async (request, reply) => {
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
    const stored = await db.transaction(async (tx) => {
      if (!(await lockUser(tx, id, 'share'))) return false;
      await events.emit(id, type, data as Record<string, unknown>, tx);
      return true;
    });
    if (!stored) return sendError(reply, 'adminNotFound');
    request.log.info({ userId: id, type }, 'admin: alert stored for delivery');
    return reply.code(202).send({ message: 'Alerte acceptée' });
  });
}
