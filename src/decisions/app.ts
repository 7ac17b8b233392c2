// The decisions listener (decisions.host:decisions.port, CONTRACT §11): forward auth for a proxy
// that already fronts the services (nginx auth_request, Caddy forward_auth, Traefik forwardAuth,
// Envoy ext_authz). It answers "may this request pass, and as whom" with the pipeline a proxied
// request goes through (same route table, guards and counting), without forwarding anything:
// 200 with an empty body and the identity headers for the proxy to copy upstream, or the very
// denial the proxied request would have got, for the proxy to pass to the client.
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { sendDenial, sendError } from '../errors/index.js';
import type { Instance } from '../instance.js';
import { listenerOptions, registerCommon, registerHostCheck } from '../listener/basics.js';
import { traceRequests } from '../telemetry/requestSpans.js';
import { DenialLog } from '../telemetry/logThrottle.js';
import { acceptEveryMethod } from '../proxy/methods.js';
import { credentialChecks, findOwnCredentials } from '../proxy/ownTokens.js';
import { requestContext, type OwnMethods } from '../live/requestContext.js';
import { decisionForPortalHost } from '../routing/portalHost.js';
import { isReservedIdentityHeader, KEY_ID_HEADER, ORG_IDENTITY_HEADERS, traceDecision } from '../pipeline/index.js';
import { DECISION_HEADERS, DECISIONS_PATH, originalRequest } from './original.js';

/**
 * A denial's JSON body again, in a header, for proxies that cannot pass on the body of an auth
 * answer (nginx's auth_request keeps only its status and headers). Written in ASCII (`é` as
 * `\u00e9`), so that it is a valid header value and still the same JSON.
 */
export const DENIAL_BODY_HEADER = 'x-gateway-error';

/**
 * What the proxy in front forwards instead of the client's URI and Cookie (CONTRACT §19): the same
 * less the gateway's own tokens (an `access_token` query parameter, a token cookie), as proxy mode
 * strips them. Always on an allowed answer, equal to the original when nothing is removed.
 */
export const CLEAN_URI_HEADER = 'x-gateway-clean-uri';
export const CLEAN_COOKIE_HEADER = 'x-gateway-clean-cookie';
/**
 * Sent by the proxy on its decision request (`uri`, `cookie`, or both): it forwards the Clean
 * header of each in place of the client's. A proxy that cannot (Traefik, Envoy: neither can put a
 * header's value in the request line or in Cookie) sends none, and a request carrying a gateway
 * token in its query or a cookie is then refused (400) rather than decided: allowed, the token would
 * reach the application. A client that sets it through a proxy passing it on leaks only its own token.
 */
export const CLEANS_HEADER = 'x-gateway-clean';

export interface DecisionsOptions {
  /** The public listener's own endpoints (requestContext.ts, ownEndpointMethods). */
  ownMethods: OwnMethods;
}

export async function buildDecisionsApp(instance: Instance, options: DecisionsOptions): Promise<FastifyInstance> {
  const { pipeline, metrics, log, live } = instance;
  const credentials = credentialChecks(instance);
  const { ownMethods } = options;
  const organizations = instance.config.organizations?.enabled === true;
  const app = Fastify(listenerOptions(log.child({ listener: 'decisions' })));
  registerCommon(app, metrics.tallies, instance.errorStyle);
  registerHostCheck(app);
  // A decision is a span of its own, named after the route it was asked about (its stages as
  // children), continuing the proxy's trace when the proxy sends a traceparent.
  if (instance.tracing) traceRequests(app, instance.tracing, (request) => request.url.split('?', 1)[0]!);
  // A decision reads the headers alone. A body the proxy sent along anyway is never read (Node
  // discards it once the answer is out): no parsing on this path, and no body limit to apply.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, _payload, done) => done(null));
  // Every error this listener answers, its own 400 and 404 and the 503 of a storage fault
  // included, so that a proxy relaying it through this header always has a body to relay.
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (reply.statusCode >= 400 && typeof payload === 'string') reply.header(DENIAL_BODY_HEADER, asciiJson(payload));
    done(null, payload);
  });
  acceptEveryMethod(app);

  const denials = new DenialLog();
  const handler = async (request: FastifyRequest, reply: FastifyReply) => {
    const original = originalRequest(request.method, request.url, request.raw.rawHeaders);
    if (!original) return sendError(reply, 'badRequest');
    if (carriesClientIdentity(request)) return sendError(reply, 'badRequest');
    // The customer portal's host serves no route (CONTRACT §30): a proxy that sends that host's
    // requests here gets the answer the public listener gives there.
    if (decisionForPortalHost(instance.config.portal, request.headers)) return sendError(reply, 'routeNotFound');
    // Decided against the live state of this moment, like any request the public listener takes.
    const context = requestContext(live.current, original.method, original.url, ownMethods);
    // Where the client put a gateway credential. Authorization and X-API-Key are every documented
    // configuration's to remove, the query and the cookies the Clean headers' below (the URI the
    // proxy says it decides for holds that query); any other header holding one (X-Access-Token,
    // Proxy-Authorization) the proxy cannot be told to remove, so the request is refused (400)
    // before anything is decided or counted, rather than reach the application with it.
    const own = await findOwnCredentials({ headers: request.headers, query: context.query, authorizationIsOwn: true }, credentials);
    const carrying = own.headers.filter((name) => !DECISION_HEADERS.has(name));
    if (carrying.length) {
      request.log.info({ headers: carrying }, 'decision refused: a gateway credential in a header the proxy passes on');
      return sendError(reply, 'badRequest');
    }
    const cleans = cleanedByProxy(request.headers[CLEANS_HEADER]);
    const uncleaned = [own.query !== undefined && !cleans.has('uri') && 'query', own.cookie !== undefined && !cleans.has('cookie') && 'cookie'].filter(Boolean);
    if (uncleaned.length) {
      request.log.info({ in: uncleaned }, 'decision refused: a gateway credential the proxy does not clean');
      return sendError(reply, 'badRequest');
    }
    const decision = await pipeline.decide({ context, headers: request.headers, trace: request.trace });
    traceDecision(request.trace, decision);
    if (decision.kind === 'deny') {
      // The gateway's own endpoints are served by its public listener, under every spelling, and
      // never by a route (CONTRACT §8): no route decides for them either. Were one on `/` allowed
      // to, a proxy sending the gateway's paths elsewhere could hand `/API/V1/AUTH/LOGIN`, password
      // and all, to the application behind it.
      if (decision.route === 'own') return sendError(reply, 'routeNotFound');
      if (decision.route) denials.denied(request.log, decision.route, decision.denial.code);
      return sendDenial(reply, decision.denial);
    }
    // Only what the pipeline says: nothing the client sent comes back for the proxy to copy.
    // x-user-key-id is on every 200 (CONTRACT §21), empty but for an API key's request: a proxy
    // that sets the header from the answer (nginx's proxy_set_header) then always replaces the client's.
    reply.header(KEY_ID_HEADER, '');
    // So are x-org-id, -role and -plan while organizations are enabled (CONTRACT §22), for the same reason.
    if (organizations) for (const name of ORG_IDENTITY_HEADERS) reply.header(name, '');
    if (decision.identity) reply.headers(decision.identity);
    reply.header(CLEAN_URI_HEADER, own.query === undefined ? original.url : context.rawPath + (own.query ? `?${own.query}` : ''));
    const cookie = own.cookie === undefined ? request.headers.cookie ?? '' : own.cookie ?? '';
    reply.header(CLEAN_COOKIE_HEADER, cookie);
    return reply.code(200).send();
  };
  app.route({ method: app.supportedMethods, url: DECISIONS_PATH, handler });
  app.route({ method: app.supportedMethods, url: `${DECISIONS_PATH}/*`, handler });
  return app;
}

/**
 * Whether the decision request carries a header that says who the client is (CONTRACT §33), logged
 * at info with its name. A client never has a reason to send one, and the documented configurations
 * pass the client's headers to the decision unchanged: a proxy configured before the gateway
 * answered a header (x-org-* before organizations, x-user-key-id before API keys) would otherwise
 * hand the client's copy to the application, next to the genuine ones it does copy.
 */
function carriesClientIdentity(request: FastifyRequest): boolean {
  const reserved = Object.keys(request.headers).find(isReservedIdentityHeader);
  if (reserved !== undefined) request.log.info({ header: reserved }, 'decision refused: the client sent a reserved identity header');
  return reserved !== undefined;
}

/** What the proxy says it forwards cleaned (CLEANS_HEADER): `uri`, `cookie`. */
function cleanedByProxy(value: string | string[] | undefined): Set<string> {
  if (value === undefined) return new Set();
  return new Set(String(value).split(',').map((part) => part.trim().toLowerCase()));
}

/** JSON text with every character outside printable ASCII written as a \u escape: the same JSON. */
function asciiJson(json: string): string {
  return json.replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
