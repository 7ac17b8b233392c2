// /admin/v1/* (CONTRACT §4): what operators and billing services change, behind the admin key.
// Registered under the /admin prefix with its own hook and not-found handler, so every /admin
// path, known or not, answers the same way to a caller without the key.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { PLANS, type Plan } from '../config/schema.js';
import { sendError } from '../errors.js';
import { headerValue } from '../http.js';
import type { Services } from '../services.js';
import { findById, setActive, setPlan, type User } from '../storage/users.js';

const MAX_USER_ID = 2 ** 31 - 1; // users.id is a Postgres integer
const ALERT_TYPE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$/;
const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;
/** Below the delivery queue's per-message limit, leaving room for the envelope. */
const ALERT_DATA_MAX_BYTES = 60 * 1024;

const digest = (value: string) => createHash('sha256').update(value).digest();

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
  };
}

/** A body field; a missing body (no content) reads as {} like any other. */
function field(body: unknown, name: string): unknown {
  return body !== null && typeof body === 'object' ? (body as Record<string, unknown>)[name] : undefined;
}

function userId(value: unknown): number | undefined {
  const n = typeof value === 'string' && /^[1-9]\d{0,9}$/.test(value) ? Number(value) : typeof value === 'number' ? value : NaN;
  return Number.isInteger(n) && n >= 1 && n <= MAX_USER_ID ? n : undefined;
}

export async function adminRoutes(app: FastifyInstance, opts: { services: Services }): Promise<void> {
  const { services } = opts;
  const configuredKey = services.config.admin.apiKey;
  // Hashing both sides gives equal lengths, so timingSafeEqual compares in constant time and the
  // key's length does not leak either.
  const expected = configuredKey ? digest(configuredKey) : undefined;

  app.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    // No key configured: the admin API does not exist (not "forbidden", which would invite guessing).
    if (!expected) return sendError(reply, 'adminNotFound');
    const presented = BEARER.exec(headerValue(request.headers, 'authorization'))?.[1];
    if (!presented || !timingSafeEqual(digest(presented), expected)) {
      request.log.warn({ url: request.url }, 'admin request refused: missing or wrong admin key');
      reply.header('www-authenticate', 'Bearer');
      return sendError(reply, 'adminUnauthorized');
    }
  });
  app.setNotFoundHandler((_request, reply) => sendError(reply, 'adminNotFound'));

  app.get<{ Params: { id: string } }>('/v1/users/:id', async (request, reply) => {
    const id = userId(request.params.id);
    const user = id === undefined ? undefined : await findById(services.db, id);
    if (!user) return sendError(reply, 'adminNotFound');
    return adminView(user);
  });

  app.put<{ Params: { id: string } }>('/v1/users/:id/plan', async (request, reply) => {
    const id = userId(request.params.id);
    if (id === undefined) return sendError(reply, 'adminNotFound');
    const plan = field(request.body, 'plan');
    if (typeof plan !== 'string' || !PLANS.includes(plan as Plan)) return sendError(reply, 'planUnknown');
    // setPlan changes the user and its subscription record in one transaction.
    const user = await setPlan(services.db, id, plan as Plan);
    if (!user) return sendError(reply, 'adminNotFound');
    // At once here; the users trigger's NOTIFY carries it to every other instance.
    services.identities.forgetUser(id);
    request.log.info({ userId: id, plan }, 'admin: plan set');
    return adminView(user);
  });

  app.put<{ Params: { id: string } }>('/v1/users/:id/active', async (request, reply) => {
    const id = userId(request.params.id);
    if (id === undefined) return sendError(reply, 'adminNotFound');
    const active = field(request.body, 'active');
    if (typeof active !== 'boolean') return sendError(reply, 'activeFlagInvalid');
    const user = await setActive(services.db, id, active);
    if (!user) return sendError(reply, 'adminNotFound');
    services.identities.forgetUser(id);
    request.log.info({ userId: id, active }, 'admin: active flag set');
    return adminView(user);
  });

  app.post('/v1/alerts', async (request, reply) => {
    const id = userId(field(request.body, 'user_id'));
    const type = field(request.body, 'type');
    const data = field(request.body, 'data');
    if (id === undefined || typeof type !== 'string' || !ALERT_TYPE.test(type) || data === null || typeof data !== 'object' || Array.isArray(data)) {
      return sendError(reply, 'alertInvalid');
    }
    // Queued messages are held in memory: a large one is refused here rather than dropped later.
    if (Buffer.byteLength(JSON.stringify(data)) > ALERT_DATA_MAX_BYTES) return sendError(reply, 'payloadTooLarge');
    if (!(await findById(services.db, id))) return sendError(reply, 'adminNotFound');
    // Accepted whatever the user's plan or webhook: the delivery decides, off this request.
    services.events?.emit(id, type, data as Record<string, unknown>);
    request.log.info({ userId: id, type }, 'admin: alert queued');
    return reply.code(202).send({ message: 'Alerte acceptée' });
  });
}
