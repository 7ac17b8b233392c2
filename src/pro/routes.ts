// /api/v1/user/*: the signed-in user's own resources (CONTRACT §4).
import type { FastifyInstance } from 'fastify';
import { sendError } from '../errors.js';
import type { Config } from '../config/schema.js';
import { currentUser, type RequireUser } from '../guards/requireUser.js';
import { textField } from '../http.js';
import type { Database } from '../storage/db.js';
import { dailyRemaining, planLimitsOf, usedToday } from '../plans.js';
import { findById } from '../storage/users.js';
import { utcDay } from '../time.js';
import { deleteWebhook, upsertWebhook } from '../storage/webhooks.js';
import { createApiKey, revokeApiKeys, type ApiKeyDeps } from './apiKeys.js';
import { checkTarget, parseWebhookUrl } from './ssrf.js';
import { newWebhookSecret } from './webhooks.js';

export interface UserRoutesDeps extends ApiKeyDeps {
  db: Database;
  requireUser: RequireUser;
  webhooks: Config['webhooks'];
  /** plans, read per request (a reload may change the limits). */
  plans: () => Config['plans'];
  clock: () => Date;
}

export async function userRoutes(app: FastifyInstance, deps: UserRoutesDeps): Promise<void> {
  const { db, requireUser, webhooks, events, plans, clock } = deps;

  app.get('/me', { preHandler: requireUser() }, async (request) => {
    // Read from the database, not the cache: daily_usage changes on every counted use.
    const user = (await findById(db, currentUser(request).id)) ?? currentUser(request);
    const limits = planLimitsOf(plans(), user.plan);
    return {
      user_id: user.id, email: user.email, plan: user.plan, daily_usage: user.daily_usage, last_usage_date: user.last_usage_date,
      limits, daily_remaining: dailyRemaining(limits, usedToday(user, utcDay(clock()))),
      // null until the user opens a verification link (CONTRACT §13): a client knows to offer a new one.
      email_verified_at: user.email_verified_at?.toISOString() ?? null,
    };
  });

  const proOnly = { preHandler: requireUser(['pro']) };

  app.post('/api-token', proOnly, async (request, reply) => {
    const userId = currentUser(request).id;
    const { key, createdAt } = await createApiKey(deps, userId);
    request.log.info({ userId }, 'API key created');
    return reply.code(201).send({ api_token: key, created_at: createdAt.toISOString() });
  });

  app.delete('/api-token', proOnly, async (request) => {
    const userId = currentUser(request).id;
    const revoked = await revokeApiKeys(deps, userId);
    request.log.info({ userId, revoked }, 'API keys revoked');
    return { message: 'Clé API révoquée' };
  });

  app.post('/webhook', proOnly, async (request, reply) => {
    const userId = currentUser(request).id;
    const url = parseWebhookUrl(textField(request.body, 'url').trim());
    if (!url) return sendError(reply, 'webhookUrlInvalid');
    if (!webhooks.allowPrivateNetworks) {
      const check = await checkTarget(url, { allowPrivateNetworks: false, timeoutMs: webhooks.timeout });
      if (check.kind === 'forbidden') {
        request.log.info({ userId, host: url.host }, 'webhook refused: non-public address');
        return sendError(reply, 'webhookUrlForbidden');
      }
      // A name that does not resolve now (or not within webhooks.timeout) is accepted: every
      // delivery checks it again, and an outage of DNS should not block registration.
    }
    const secret = newWebhookSecret();
    // The webhook and its webhook.test are stored together: no webhook without its test message.
    await db.transaction(async (tx) => {
      await upsertWebhook(tx, userId, url.href, secret);
      await events.emit(userId, 'webhook.test', { url: url.href }, tx);
    });
    request.log.info({ userId, host: url.host }, 'webhook registered');
    return reply.code(201).send({ url: url.href, secret });
  });

  app.delete('/webhook', proOnly, async (request) => {
    const userId = currentUser(request).id;
    const removed = await deleteWebhook(db, userId);
    request.log.info({ userId, removed }, 'webhook removed');
    return { message: 'Webhook supprimé' };
  });
}
