// POST and DELETE /api/v1/user/webhook (CONTRACT §4, §5): the user's alert webhook, pro plan only.
import type { FastifyInstance } from 'fastify';
import type { Config } from '../config/schema.js';
import { sendError, successBody } from '../errors/index.js';
import { textField } from '../http.js';
import { currentUser, type RequireUser } from '../listener/requireUser.js';
import type { Database } from '../storage/database/index.js';
import { deleteWebhook, upsertWebhook } from '../storage/events/index.js';
import type { Events } from '../webhooks/emitter.js';
import { newWebhookSecret } from '../webhooks/message.js';
import { checkTarget, parseWebhookUrl } from '../webhooks/ssrf.js';
import { bearer, errors, message, type EndpointSchema } from '../openapi.js';

export interface WebhookDeps {
  db: Database;
  events: Events;
  requireUser: RequireUser;
  webhooks: Config['webhooks'];
}

/** Each route's OpenAPI fragment (documentation only: src/openapi.ts), by handler. */
const DOCS = {
  register: {
    tags: ['user'], summary: 'Register the alert webhook (pro), replacing any earlier one', security: bearer, body: { type: 'object', properties: { url: { type: 'string', format: 'uri' } } },
    response: {
      201: { type: 'object', properties: { url: { type: 'string' }, secret: { type: 'string', description: 'whsec_<base64>' } } },
      ...errors('webhookUrlInvalid', 'webhookUrlForbidden', 'tokenInvalid', 'planInsufficient'),
    },
  },
  remove: { tags: ['user'], summary: 'Remove the alert webhook (pro); idempotent', security: bearer, response: { 200: message, ...errors('tokenInvalid', 'planInsufficient') } },
} satisfies Record<string, EndpointSchema>;

export async function webhookRoutes(app: FastifyInstance, deps: WebhookDeps): Promise<void> {
  const { db, events, webhooks } = deps;
  const proOnly = { preHandler: deps.requireUser(['pro']) };

  app.post('/webhook', { ...proOnly, schema: DOCS.register }, async (request, reply) => {
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

  app.delete('/webhook', { ...proOnly, schema: DOCS.remove }, async (request, reply) => {
    const userId = currentUser(request).id;
    const removed = await deleteWebhook(db, userId);
    request.log.info({ userId, removed }, 'webhook removed');
    return successBody(reply, 'webhookDeleted');
  });
}
