// /api/v1/user/*: the signed-in user's own resources (CONTRACT §4).
import type { FastifyInstance } from 'fastify';
import { sendError } from '../errors.js';
import { currentUser, requireUser } from '../guards/requireUser.js';
import { textField } from '../http.js';
import type { Services } from '../services.js';
import { findById } from '../storage/users.js';
import { deleteWebhook, upsertWebhook } from '../storage/webhooks.js';
import { createApiKey, revokeApiKeys } from './apiTokens.js';
import { checkTarget, parseWebhookUrl } from './ssrf.js';
import { newWebhookSecret } from './webhooks.js';

export async function userRoutes(app: FastifyInstance, opts: { services: Services }): Promise<void> {
  const { services } = opts;

  app.get('/me', { preHandler: requireUser(services) }, async (request) => {
    // Read from the database, not the cache: daily_usage changes on every counted use.
    const user = (await findById(services.db, currentUser(request).id)) ?? currentUser(request);
    return { user_id: user.id, email: user.email, plan: user.plan, daily_usage: user.daily_usage, last_usage_date: user.last_usage_date };
  });

  const proOnly = { preHandler: requireUser(services, ['pro']) };

  app.post('/api-token', proOnly, async (request, reply) => {
    const userId = currentUser(request).id;
    const { key, createdAt } = await createApiKey(services, userId);
    request.log.info({ userId }, 'API key created');
    return reply.code(201).send({ api_token: key, created_at: createdAt.toISOString() });
  });

  app.delete('/api-token', proOnly, async (request) => {
    const userId = currentUser(request).id;
    const revoked = await revokeApiKeys(services, userId);
    request.log.info({ userId, revoked }, 'API keys revoked');
    return { message: 'Clé API révoquée' };
  });

  app.post('/webhook', proOnly, async (request, reply) => {
    const userId = currentUser(request).id;
    const url = parseWebhookUrl(textField(request.body, 'url').trim());
    if (!url) return sendError(reply, 'webhookUrlInvalid');
    if (!services.config.webhooks.allowPrivateNetworks) {
      const check = await checkTarget(url, { allowPrivateNetworks: false, timeoutMs: services.config.webhooks.timeout });
      if (check.kind === 'forbidden') {
        request.log.info({ userId, host: url.host }, 'webhook refused: non-public address');
        return sendError(reply, 'webhookUrlForbidden');
      }
      // A name that does not resolve now (or not within webhooks.timeout) is accepted: every
      // delivery checks it again, and an outage of DNS should not block registration.
    }
    const secret = newWebhookSecret();
    await upsertWebhook(services.db, userId, url.href, secret);
    request.log.info({ userId, host: url.host }, 'webhook registered');
    services.events?.emit(userId, 'webhook.test', { url: url.href });
    return reply.code(201).send({ url: url.href, secret });
  });

  app.delete('/webhook', proOnly, async (request) => {
    const userId = currentUser(request).id;
    const removed = await deleteWebhook(services.db, userId);
    request.log.info({ userId, removed }, 'webhook removed');
    return { message: 'Webhook supprimé' };
  });
}
