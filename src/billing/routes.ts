// /api/v1/billing/* (CONTRACT §23), with their OpenAPI fragments beside the handlers. Checkout
// and portal take a bearer sign-in only (§21's guard) and act for the signed-in user (organizations,
// §22, act here through Gateway-Org once they exist). The webhook reads its body raw: Stripe signs
// the bytes, so nothing may parse and re-serialize them first. None of these is under the auth
// rate limit: Stripe's retries and a user's clicks are not password guesses.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { sendDenial, sendError, type Denial } from '../errors/index.js';
import { currentUser, requireBearer, type RequireUser } from '../listener/requireUser.js';
import { checkRoles, gatewayOrgId } from '../orgActing.js';
import type { Owner } from '../storage/usage/index.js';
import type { MembershipCache } from '../storage/feed/index.js';
import { bearerOnly as bearerSecurity, errors } from '../openapi.js';
import type { Billing } from './billing.js';
import { StripeUnavailable, type StripeGateway } from './stripe.js';

export interface BillingRoutesDeps {
  billing: Billing;
  stripe: Pick<StripeGateway, 'verify'>;
  requireUser: RequireUser;
  /** With organizations enabled only: Gateway-Org is read (else ignored, CONTRACT §22). */
  memberships?: Pick<MembershipCache, 'membership'>;
  /** The portal's billing page (CONTRACT §30), where `"return": "portal"` sends Stripe back; undefined without an enabled portal. */
  portalBillingUrl?: string;
}

const url = { type: 'object', required: ['url'], properties: { url: { type: 'string', format: 'uri' } } };
const back = {
  return: { enum: ['portal'], description: 'portal: Stripe sends the customer back to the portal\'s billing page ({portal.publicUrl}{portal.path}billing); 400 without an enabled portal' },
};
const DATE_OR_NULL = { type: ['string', 'null'], format: 'date-time' };
const SCHEMAS = {
  checkout: {
    tags: ['billing'], summary: 'A Stripe Checkout Session for a subscription to `price` (a key of billing.stripe.prices)', security: bearerSecurity,
    body: { type: 'object', required: ['price'], properties: { price: { type: 'string' }, ...back } },
    response: { 200: url, ...errors('priceUnknown', 'badRequest', 'tokenInvalid', 'apiKeyNotAccepted', 'roleInsufficient', 'orgNotFound', 'subscriptionAlreadyActive', 'paymentUnavailable') },
  },
  portal: {
    tags: ['billing'], summary: 'A Stripe Customer Portal session for the owner\'s customer', security: bearerSecurity,
    body: { type: 'object', properties: back },
    response: { 200: url, ...errors('badRequest', 'tokenInvalid', 'apiKeyNotAccepted', 'roleInsufficient', 'orgNotFound', 'subscriptionNone', 'paymentUnavailable') },
  },
  subscription: {
    tags: ['billing'], security: bearerSecurity,
    summary: 'The owner\'s subscriptions as billing last stored them, where its plan comes from, and when a past_due grace ends (Gateway-Org: its owner only)',
    response: {
      200: {
        type: 'object', required: ['subscriptions', 'plan_source', 'grace_ends_at'],
        properties: {
          subscriptions: {
            type: 'array',
            items: {
              type: 'object', required: ['id', 'status', 'price', 'plan', 'current_period_end', 'cancel_at_period_end', 'past_due_since'],
              properties: {
                id: { type: 'string' }, status: { type: 'string' }, price: { type: ['string', 'null'] }, plan: { type: ['string', 'null'] }, current_period_end: DATE_OR_NULL,
                cancel_at_period_end: { type: 'boolean', description: 'the subscription ends with its current period (as Stripe last said)' }, past_due_since: DATE_OR_NULL,
              },
            },
          },
          plan_source: { enum: ['billing', 'operator', 'default'] }, grace_ends_at: DATE_OR_NULL,
        },
      },
      ...errors('badRequest', 'tokenInvalid', 'apiKeyNotAccepted', 'roleInsufficient', 'orgNotFound'),
    },
  },
  webhook: {
    tags: ['billing'], summary: 'Stripe\'s webhook: a signed event, applied once (Stripe-Signature checked against billing.stripe.webhookSecrets)',
    description: 'Events used: checkout.session.completed, customer.subscription.created, .updated, .deleted; others answer 200 and are ignored.',
    response: { 200: { type: 'object', properties: { received: { const: true } } }, ...errors('signatureInvalid', 'stripeEventFailed') },
  },
};

/** Answers a Stripe failure with `name`; anything else is not Stripe's and goes to the error handler. */
function answerStripeFailure(reply: FastifyReply, err: unknown, name: 'paymentUnavailable' | 'stripeEventFailed'): FastifyReply {
  if (!(err instanceof StripeUnavailable)) throw err;
  reply.log.warn({ err: err.message }, 'billing: Stripe call failed');
  return sendError(reply, name);
}

/**
 * Whom checkout and portal act for: the user, or the organization Gateway-Org names, which only its
 * owner may (403 Rôle insuffisant otherwise); a non-member learns nothing of it (404, as on the
 * organization's own endpoints).
 */
async function ownerOf(request: FastifyRequest, memberships: BillingRoutesDeps['memberships']): Promise<Owner | Denial> {
  const user = currentUser(request);
  const raw = memberships && request.headers['gateway-org'];
  if (raw === undefined) return { type: 'user', id: user.id };
  const id = gatewayOrgId(raw);
  if (id === 'invalid') return { code: 'badRequest' };
  const membership = id ? await memberships!.membership(id, user.id) : undefined;
  if (!membership) return { code: 'orgNotFound' };
  return checkRoles(membership, ['owner']) ?? { type: 'org', id };
}

/**
 * Where Stripe sends the customer back: undefined for the configured successUrl and cancelUrl (no
 * `return`), the portal's billing page for `"return": "portal"`, false (400) for any other value or
 * a portal that is not enabled: a client asking to come back to a page that does not exist would
 * otherwise pay and land somewhere it did not ask for.
 */
function returnOf(body: unknown, portalBillingUrl: string | undefined): string | undefined | false {
  // An object (the schema's), or nothing for a request without a body.
  const value = (body as { return?: unknown } | undefined)?.return;
  if (value === undefined) return undefined;
  return value === 'portal' && portalBillingUrl !== undefined ? portalBillingUrl : false;
}

export async function billingRoutes(app: FastifyInstance, deps: BillingRoutesDeps): Promise<void> {
  const guard = { preHandler: requireBearer(deps.requireUser) };

  app.post('/checkout', { ...guard, schema: SCHEMAS.checkout }, async function checkout(request, reply) {
    // The schema has made it an object with a string price (a number is coerced, anything else a 400).
    const { price } = request.body as { price: string };
    const back = returnOf(request.body, deps.portalBillingUrl);
    if (back === false) return sendError(reply, 'badRequest');
    const owner = await ownerOf(request, deps.memberships);
    if ('code' in owner) return sendDenial(reply, owner);
    try {
      const outcome = await deps.billing.checkout(owner, price, back);
      return 'error' in outcome ? sendError(reply, outcome.error) : { url: outcome.url };
    } catch (err) {
      return answerStripeFailure(reply, err, 'paymentUnavailable');
    }
  });

  app.post('/portal', { ...guard, schema: SCHEMAS.portal }, async function portal(request, reply) {
    const back = returnOf(request.body, deps.portalBillingUrl);
    if (back === false) return sendError(reply, 'badRequest');
    const owner = await ownerOf(request, deps.memberships);
    if ('code' in owner) return sendDenial(reply, owner);
    try {
      const link = await deps.billing.portal(owner, back);
      return link === undefined ? sendError(reply, 'subscriptionNone') : { url: link };
    } catch (err) {
      return answerStripeFailure(reply, err, 'paymentUnavailable');
    }
  });

  app.get('/subscription', { ...guard, schema: SCHEMAS.subscription }, async function subscription(request, reply) {
    const owner = await ownerOf(request, deps.memberships);
    if ('code' in owner) return sendDenial(reply, owner);
    return deps.billing.subscription(owner);
  });

  await app.register(async function rawBody(webhook) {
    // In place of the listener's one parser, '*' (listener/basics.ts): the bytes, as they came.
    webhook.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));
    webhook.post('/stripe/webhook', { schema: SCHEMAS.webhook }, async function stripeWebhook(request, reply) {
      const raw = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
      // A string or absent: Node joins a repeated header of this name into one.
      const event = deps.stripe.verify(raw, request.headers['stripe-signature'] as string | undefined);
      if (!event) return sendError(reply, 'signatureInvalid');
      try {
        const outcome = await deps.billing.apply(event);
        request.log.info({ eventId: event.id, type: event.type, outcome }, 'billing: Stripe event');
        return { received: true };
      } catch (err) {
        return answerStripeFailure(reply, err, 'stripeEventFailed');
      }
    });
  });
}
