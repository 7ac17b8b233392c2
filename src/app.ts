// buildApp: the public listener's fastify instance, ready for inject() or listen(); never listens.
// A request is either one of the gateway's own endpoints (auth, user, health, JWKS) or goes
// through the pipeline to a route's upstream (proxy/forwarder.ts).
import Fastify, { type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { registerAuth, type SamlAccounts } from './auth/index.js';
import { authRateLimitOptions } from './listener/authRateLimit.js';
import { requireUserWith } from './listener/requireUser.js';
import { healthRoutes } from './listener/health.js';
import type { Instance } from './instance.js';
import { listenerOptions, registerCommon, type Answered } from './listener/basics.js';
import { httpsOptions } from './listener/tls.js';
import { traceAnswers } from './telemetry/requestSpans.js';
import { publicRequestHook } from './listener/publicOrder.js';
import { refuseUnfitInput } from './listener/inputs.js';
import { FORWARDED_ROUTE, Forwarder } from './proxy/forwarder.js';
import { attachDirectLane } from './proxy/directLane.js';
import { ownEndpointMethods, RequestContexts, type RequestContext } from './live/requestContext.js';
import { OpenSockets } from './proxy/openSockets.js';
import { credentialChecks } from './proxy/ownTokens.js';
import { documentRoutes, type EndpointSchema } from './openapi.js';
import { canonicalUrl } from './routing/paths.js';
import { WebSockets } from './proxy/websocket.js';
import { userRoutes } from './user/routes.js';
import { ensureManagedAccount, registerOrganizations } from './orgs/index.js';
import { registerScim } from './scim/index.js';
import { plansRoute } from './user/plans.js';
import { portalBillingUrl, portalPath } from './config/schema/portal.js';
import { portalHostRule } from './routing/portalHost.js';
import { registerPortal } from './portal/index.js';
import { billingRoutes } from './billing/routes.js';
import { ASSERTION_KEYS_PATH } from './verify/index.js';
import { ERRORS_PATH, errorList } from './errors/index.js';

const REQUEST_TIMEOUT_MS = 300_000;

/** The public listener's fastify options (apart from buildApp, which stays the registration map, issue 48). */
function appOptions({ config, log }: Instance) {
  return {
    ...listenerOptions(log),
    // HTTPS, and HTTP/2 beside HTTP/1.1, with server.tls: fastify makes the server; the types stay
    // those of node:http, whose API the code uses (HTTP/2 requests come through Node's compatibility API).
    ...(httpsOptions(config.server.tls) as object),
    bodyLimit: config.server.bodyLimit,
    trustProxy: config.server.trustProxy,
    // While draining (SIGTERM), a request already received on a keep-alive connection is served
    // normally with `Connection: close` rather than refused with fastify's non-catalog 503 body.
    return503OnClosing: false,
    // The gateway is the edge: a client trickling a body (slowloris) must not hold a connection and
    // an upstream request for ever. Node's own default, which fastify turns off; the request is
    // then dropped with its upstream request (clientErrorHandler).
    requestTimeout: REQUEST_TIMEOUT_MS,
    // One path for everything: own endpoints and routes are matched on the normalized path the
    // proxy forwards, so `/x/../api/v1/auth/login` cannot reach an upstream (routing/paths.ts).
    rewriteUrl: (req: { url?: string }) => canonicalUrl(req.url ?? '/'),
  };
}

export async function buildApp(instance: Instance): Promise<FastifyInstance> {
  const { config, live, db, redis, tokens, passwords, identities, events, audit, mailer, keyring, pipeline, metrics, clock, lifecycle } = instance;
  const app = Fastify(appOptions(instance));
  // One onRequest hook runs the steps before routing in PUBLIC_ORDER's order (listener/publicOrder.ts):
  // the request's context, the Host check, the span, Connection: close while draining, CORS. The
  // context is also made on first sight of a WebSocket upgrade, by its dispatch (proxy/websocket.ts).
  // On the customer portal's own host no route matches (CONTRACT §30); under portal.path every path is the portal's.
  const contexts = new RequestContexts(live, ownEndpointMethods(app, portalPath(config)), portalHostRule(config.portal, config.server.trustProxy));
  // Whose pages' requests are audited as the portal's (auth/sessions.ts, clientOf).
  app.decorate('portalOrigin', config.portal?.enabled ? config.portal.publicUrl : undefined);
  app.decorateRequest('context', null as unknown as RequestContext);
  app.decorateRequest('corsCovered', false);
  app.addHook('onRequest', publicRequestHook({ contexts, tracing: instance.tracing, lifecycle }));
  const answered = registerCommon(app, metrics.tallies, instance.errorStyle);
  if (instance.tracing) traceAnswers(app, instance.tracing, (request) => request.routeOptions.url !== FORWARDED_ROUTE);
  await documentRoutes(app);

  await app.register(healthRoutes, { db, redis, lifecycle, fleet: instance.fleet });
  keySetRoutes(app, tokens, keyring);
  // The catalog (CONTRACT §20), served only to an instance whose answers carry codes or other words.
  if (config.errors.codes || config.errors.language !== 'fr') {
    const catalog = errorList(instance.errorStyle);
    app.get(ERRORS_PATH, { schema: KEY_SETS_AND_CATALOG.catalog }, async (_request, reply) => reply.header('cache-control', 'public, max-age=3600').send(catalog));
  }
  const requireUser = requireUserWith(pipeline);
  // Always registered (max 0 lets every request through) so a reload can switch it on. One store
  // for both scopes: a client address has one budget for every endpoint that checks a password
  // or a link, whichever it calls.
  const authRateLimit = authRateLimitOptions({ redis });
  // A SAML sign-in ends in the organizations' managed accounts (CONTRACT §31), which SCIM shares.
  const samlAccounts: SamlAccounts = (asked) => ensureManagedAccount({ db, audit, clock, memberships: instance.memberships }, { ...asked, by: { kind: 'saml', client: asked.client } });
  const features = await registerAuth(app, {
    config, db, tokens, passwords, events, audit, mailer, mailWords: instance.mailWords, clock, requireUser, rateLimit: authRateLimit, samlAccounts,
  });
  const cancelSubscriptions = instance.billing?.billing.cancelAtPeriodEnd;
  const userDeps = {
    rateLimit: authRateLimit, db, tokens, passwords, identities, events, audit, requireUser, webhooks: config.webhooks, clock, mailConfigured: config.mail !== undefined,
    passkeys: config.auth.passkeys !== undefined, oidc: features.oidc, issuerOf: features.issuerOf, apiKeys: config.apiKeys,
    cancelSubscriptions,
    organizations: config.organizations?.enabled === true,
  };
  await app.register(async (user) => {
    refuseUnfitInput(user);
    await userRoutes(user, userDeps);
  }, { prefix: '/api/v1/user' });
  await registerOrganizations(app, {
    config, db, audit, clock, requireUser, mailer, mailWords: instance.mailWords, rateLimit: authRateLimit, cancelSubscriptions, identities, memberships: instance.memberships,
  });
  // The customer portal (CONTRACT §30): its pages, its config, its sessions; the auth namesakes' handlers.
  await registerPortal(app, { config, sessionEndpoints: features.sessionEndpoints, rateLimit: authRateLimit });
  // An organization's directory (CONTRACT §31, SCIM 2.0): only where §31's paths are the gateway's.
  await registerScim(app, { config, db, audit, clock, requireUser, identities, memberships: instance.memberships });
  // The plans and their prices (CONTRACT §30), with or without billing.
  await app.register(plansRoute, { prices: config.billing?.stripe.prices ?? {} });
  // Plans that follow payment (CONTRACT §23): only with billing.stripe; otherwise these paths are not the gateway's.
  if (instance.billing) await app.register(billingRoutes, {
    prefix: '/api/v1/billing', ...instance.billing, requireUser, memberships: instance.memberships, portalBillingUrl: portalBillingUrl(config.portal),
  });
  await registerProxy(app, instance, contexts, answered);
  return app;
}

/**
 * The proxy: WebSocket upgrades, the forwarder's catch-all route, and the direct lane in front of
 * fastify for plain proxied requests (proxy/directLane.ts).
 */
async function registerProxy(app: FastifyInstance, instance: Instance, contexts: RequestContexts, answered: Answered): Promise<void> {
  const { config, live, tokens, identities, pipeline, metrics, log, feed, lifecycle } = instance;
  // WebSocket upgrades on websocket routes go through fastify's routing like any request; the
  // sockets they open are closed (1008) when their user no longer passes the route's guards, and
  // (1001) when the listener closes, after the drain (server.shutdownDelay).
  const sockets = new OpenSockets({ feed, identities, memberships: instance.memberships, log, clock: instance.clock });
  metrics.observeWebSockets(sockets);
  const websockets = new WebSockets({ sockets, maxPayload: config.server.bodyLimit, contexts });
  websockets.attach(app.server, app.routing);
  app.addHook('preClose', () => websockets.close());
  const credentials = credentialChecks({ tokens, identities });
  const forwarder = new Forwarder(
    {
      pipeline, credentials, websockets, upstreamErrors: metrics.upstreamErrors, refunds: instance.refunds, server: config.server,
      organizations: config.organizations?.enabled === true, log: app.log as Logger,
    },
    // Read when a connection to an upstream is made: the TLS files of the live snapshot of that moment.
    (origin) => live.current.upstreamTls.get(origin),
  );
  await app.register(async (proxy) => forwarder.register(proxy));
  // Plain proxied requests skip fastify (proxy/directLane.ts); a traced request keeps its hooks' spans.
  if (!instance.tracing) {
    attachDirectLane(app.server, {
      contexts, pipeline, forwarder, lifecycle, trustProxy: config.server.trustProxy, errorStyle: instance.errorStyle, answered,
      // fastify's, with its req and res serializers, as the access line it writes for the others.
      log: app.log as Logger,
    });
  }
}

/** The OpenAPI fragments of the key sets and the error catalog, registered here (documentation only: openapi.ts). */
const KEY_SETS_AND_CATALOG = {
  catalog: {
    tags: ['errors'], summary: 'The error catalog: code, name, status, messages by language, fields; only with errors.codes or errors.language other than fr',
    response: {
      200: {
        type: 'array',
        items: {
          type: 'object',
          properties: {
            code: { type: 'string' }, name: { type: 'string' }, status: { type: 'integer' }, messages: { type: 'object', additionalProperties: { type: 'string' } },
            fields: { type: 'array', items: { type: 'string' } },
          },
        },
      },
    },
  },
  jwks: { tags: ['keys'], summary: 'The access-token public key(s); empty for HS256', response: { 200: { type: 'object', properties: { keys: { type: 'array' } } } } },
  assertionKeys: {
    tags: ['keys'], summary: 'The x-gateway-assertion public keys, and only them', response: { 200: { type: 'object', properties: { keys: { type: 'array' } } } },
  },
} satisfies Record<string, EndpointSchema>;

/**
 * The public keys clients and upstreams verify with.
 * Two key sets, never one (CONTRACT §8): a verifier of assertions that held the access-token key
 * too would accept a user's own access token as an assertion (same issuer, and an audience an
 * operator may well have named after the upstream), and anyone reaching that upstream directly
 * would pass as themselves with no guard run. Short caching: after a rotation, HTTP caches must
 * not hide the new next key for long.
 */
function keySetRoutes(app: FastifyInstance, tokens: Instance['tokens'], keyring: Instance['keyring']): void {
  app.get('/.well-known/jwks.json', { schema: KEY_SETS_AND_CATALOG.jwks }, async (_request, reply) => {
    reply.header('cache-control', 'public, max-age=60');
    return { keys: tokens.publicJwks };
  });
  app.get(ASSERTION_KEYS_PATH, { schema: KEY_SETS_AND_CATALOG.assertionKeys }, async (_request, reply) => {
    reply.header('cache-control', 'public, max-age=60');
    return { keys: keyring.publicJwks() };
  });
}
