// The console (CONTRACT §16): pages for operators at /console/ on the admin listener. The admin
// key is exchanged once for a session cookie; the pages then call /console/api/*, which answers
// what /admin/v1/* answers (the same handlers, reached with the key the session stands for), plus
// the route table and a health summary. Served only on a loopback admin listener, or one with TLS
// (admin.tls, the cookie then Secure): the cookie would otherwise cross the network in clear; and
// only where it has an origin (consoleOrigin.ts). A one-time sign-in link (a ticket, minted with
// the admin key: the demo prints one) is the other way in.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config/schema.js';
import { isStripeDouble } from '../config/schema/billing.js';
import { sendDenial, sendError, successBody } from '../errors/index.js';
import { sameKey, sha256Hex } from '../credentials/digest.js';
import { CHECK_TIMEOUT_MS, readiness, type ReadinessDeps } from '../listener/health.js';
import { CONSOLE_COOKIE, OPERATOR_TOKEN_PREFIX } from '../credentials/shapes.js';
import { BEARER, cookieValue, headerValue } from '../http.js';
import type { FailureLog } from '../telemetry/logThrottle.js';
import type { Metrics } from '../telemetry/metrics.js';
import { countInstances } from '../storage/feed/index.js';
import { withTimeout } from '../time.js';
import type { ConsoleOrigin } from './consoleOrigin.js';
import { type ConsoleStore, OPERATOR_ROLES, type OperatorRole, useOperatorToken } from '../storage/operators/index.js';
import { CONSOLE_AUTH_TIME_HEADER, CONSOLE_MARK_HEADER, CONSOLE_OPERATOR_HEADER, rolesFrom } from './access.js';

const SESSION_MS = 8 * 3600_000;
/** How long a one-time sign-in link works: long enough to open it, short enough that a link left in a terminal's scrollback is spent. */
export const TICKET_MS = 10 * 60_000;
const ASSETS = new URL('../../console/', import.meta.url);
const HTML = 'text/html; charset=utf-8';
const JS = 'text/javascript; charset=utf-8';
const CSS = 'text/css; charset=utf-8';
const installed = createRequire(import.meta.url);
/** What the pages load, all from the gateway: its own files, and the chart library as npm installed it. */
const FILES: Record<string, { path: URL | string; type: string }> = {
  '': { path: new URL('index.html', ASSETS), type: HTML },
  'app.js': { path: new URL('app.js', ASSETS), type: JS },
  'users.js': { path: new URL('users.js', ASSETS), type: JS },
  'overview.js': { path: new URL('overview.js', ASSETS), type: JS },
  // Dates and usage as people read them (CONTRACT §29).
  'format.js': { path: new URL('format.js', ASSETS), type: JS },
  // The organizations' pages, a module app.js imports (CONTRACT §22).
  'orgs.js': { path: new URL('orgs.js', ASSETS), type: JS },
  'billing.js': { path: new URL('billing.js', ASSETS), type: JS },
  // What the caller's role allows, and the operators' page (CONTRACT §24).
  'roles.js': { path: new URL('roles.js', ASSETS), type: JS },
  'operators.js': { path: new URL('operators.js', ASSETS), type: JS },
  'app.css': { path: new URL('app.css', ASSETS), type: CSS },
  // Operators' sign-in and enrolment (CONTRACT §24; admin/operatorSignIn.ts).
  'operator.html': { path: new URL('operator.html', ASSETS), type: HTML },
  'operator.js': { path: new URL('operator.js', ASSETS), type: JS },
  'uplot.js': { path: installed.resolve('uplot/dist/uPlot.iife.min.js'), type: JS },
  'uplot.css': { path: installed.resolve('uplot/dist/uPlot.min.css'), type: CSS },
};
// No inline script or style, nothing from elsewhere: an email or user agent that slips markup
// past the escaping still cannot run.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

export interface ConsoleDeps {
  /** admin.apiKey as the live configuration has it now: SIGHUP rotates it (CONTRACT §24). */
  apiKey: () => string;
  /** Reached over HTTPS (admin.tls, or an https:// admin.publicUrl): the cookie is Secure. */
  secure: boolean;
  /** The console's origin (CONTRACT §26): read when asked, since the listener's port may be known only once it listens. */
  origin: () => ConsoleOrigin;
  /** Set on the console's requests to the admin API (routes.ts): their audit actor is `console`. */
  consoleMark: string;
  config: () => Pick<Config, 'routes' | 'upstreams'>;
  /** billing.stripe.apiBase (a start-up setting), when billing is on: the health summary says where Stripe is. */
  stripeApiBase: string | undefined;
  readiness: ReadinessDeps;
  metrics: Metrics;
  clock: () => Date;
  /** Sessions and tickets: this instance's memory, or the primary's with server.workers. */
  store: ConsoleStore;
  /** Sign-ins and links refused for a wrong admin key (routes.ts's, shared): a line per interval. */
  keyRefusals: FailureLog;
}

const digest = (value: string) => createHash('sha256').update(value).digest();
/** What is kept of a session's or a ticket's secret: its hash, so that memory read by someone else (a heap dump, a core file) signs nobody in. */
const hashOf = (value: string) => digest(value).toString('base64url');

function cookieOf(request: FastifyRequest): string | undefined {
  return cookieValue(request.headers, CONSOLE_COOKIE);
}

/**
 * What a session or ticket minted with the shared key keeps of it: a digest, compared at each use,
 * so that rotating the key (SIGHUP) ends every session and ticket minted with the previous one.
 */
const keyTag = (apiKey: string) => hashOf(`admin-key:${apiKey}`);

/** What the handlers share: the deps and the cookie's Secure attribute. */
interface ConsoleContext {
  deps: ConsoleDeps;
  secure: string;
}
type Handler = (ctx: ConsoleContext, request: FastifyRequest, reply: FastifyReply) => Promise<unknown>;

/**
 * The endpoint map of the console: its files, sign-in and sign-out, then /console/api/* behind the
 * session, each route naming its handler, in the order they have always been registered.
 */
export async function consoleRoutes(app: FastifyInstance, deps: ConsoleDeps): Promise<void> {
  const ctx: ConsoleContext = { deps, secure: deps.secure ? ' Secure;' : '' };
  const on = (handler: Handler) => (request: FastifyRequest, reply: FastifyReply) => handler(ctx, request, reply);
  for (const [file, { path, type }] of Object.entries(FILES)) app.get(`/console/${file}`, serveFile(path, type));
  app.post('/console/session', on(signIn));
  app.post('/console/tickets', on(mintTicket));
  app.get('/console/session', on(readSession));
  app.get('/console/sign-in-methods', on(signInMethods));
  app.delete('/console/session', on(signOut));
  const guard = sessionGuard(deps);
  app.get('/console/api/routes', { onRequest: guard }, on(listRoutes));
  app.get('/console/api/health', { onRequest: guard }, on(healthSummary));
  app.all('/console/api/v1/*', { onRequest: guard }, adminThroughSession(app, deps));
}

// Sessions and tickets apart, so that a ticket presented as a cookie is no session.
const sessionKey = (token: string) => `session:${hashOf(token)}`;
const ticketKey = (ticket: string) => `ticket:${hashOf(ticket)}`;

async function current(deps: ConsoleDeps, request: FastifyRequest) {
  const token = cookieOf(request);
  if (!token) return undefined;
  const key = sessionKey(token);
  const session = await deps.store.get(key);
  if (!session?.csrf) return undefined;
  // An operator's session stands for the operator; one of the shared key, for the key it was minted with.
  if (session.expires <= deps.clock().getTime() || (session.operator === undefined && session.key !== keyTag(deps.apiKey()))) {
    await deps.store.take(key);
    return undefined;
  }
  return { key, csrf: session.csrf, expires: session.expires, operator: session.operator, authTime: session.authTime };
}

// Compared with the console's configured origin, never with the request's Host: a DNS-rebinding
// page (evil.example resolved to 127.0.0.1) sends a Host and an Origin that agree.
const fromConsole = (deps: ConsoleDeps, request: FastifyRequest) => deps.origin().accepted.has(headerValue(request.headers, 'origin'));
// No Origin at all is a script's request (curl), not another site's page: its key or token decides.
const foreignOrigin = (deps: ConsoleDeps, request: FastifyRequest) => Boolean(headerValue(request.headers, 'origin')) && !fromConsole(deps, request);
// A change must come from the console's own page: its CSRF token, and no other Origin.
function changeRefused(deps: ConsoleDeps, request: FastifyRequest, csrf: string) {
  if (foreignOrigin(deps, request)) return true;
  const presented = headerValue(request.headers, 'x-csrf-token');
  return presented.length !== csrf.length || !timingSafeEqual(Buffer.from(presented), Buffer.from(csrf));
}

function serveFile(path: URL | string, type: string) {
  return async function serveFile(_request: FastifyRequest, reply: FastifyReply) {
    const body = await readFile(path);
    return reply.type(type).header('content-security-policy', CSP).header('x-content-type-options', 'nosniff').header('cache-control', 'no-store')
      .header('referrer-policy', 'no-referrer').send(body);
  };
}

// The operator's way in: the admin key typed in the sign-in form, or a one-time ticket the page
// read from its link's fragment. Either way a POST from the console's own page (a link followed
// from elsewhere sets no cookie by itself), then a session cookie.
async function signIn({ deps }: ConsoleContext, request: FastifyRequest, reply: FastifyReply) {
  const body = request.body as { key?: unknown; ticket?: unknown } | undefined;
  if (typeof body?.ticket === 'string') {
    // Only the console's page redeems a ticket, and a browser sends its Origin with every POST
    // (§26): from elsewhere or with no Origin, refused without spending it.
    if (!fromConsole(deps, request)) {
      // Said to the operator too: a tunnel on another port, or a proxy the console's origin does not name, ends here.
      request.log.warn(
        { origin: headerValue(request.headers, 'origin') || null, expected: deps.origin().link },
        'console sign-in refused: a sign-in link redeemed from another origin than the console\'s',
      );
      return sendError(reply, 'consoleTicketInvalid');
    }
    // Single use: spent whether or not it was still in time.
    const ticket = await deps.store.take(ticketKey(body.ticket));
    if (ticket === undefined || ticket.expires <= deps.clock().getTime() || (ticket.operator === undefined && ticket.key !== keyTag(deps.apiKey()))) {
      request.log.warn('console sign-in refused: unknown, spent or expired sign-in link');
      return sendError(reply, 'consoleTicketInvalid');
    }
    // An operator's link signs in as the operator, whose role is read at each request; its second
    // factor was not given here (authTime 0), so what needs a recent one asks for it.
    if (ticket.operator !== undefined) return startSession(deps, reply, { operator: ticket.operator, authTime: 0 });
  } else {
    const key: unknown = body?.key;
    if (typeof key !== 'string' || foreignOrigin(deps, request) || !sameKey(key, deps.apiKey())) {
      deps.keyRefusals.failed(undefined, { ip: request.ip, url: request.url });
      return sendError(reply, 'adminUnauthorized');
    }
  }
  return startSession(deps, reply, { key: keyTag(deps.apiKey()) });
}

/**
 * A new session: its cookie on the reply, its CSRF token answered. `who`: the shared key's digest,
 * or the operator (operatorSignIn.ts) and when their second factor was given.
 */
export async function startSession(deps: ConsoleDeps, reply: FastifyReply, who: { key: string } | { operator: number; authTime: number }): Promise<{ csrf: string }> {
  const token = randomBytes(32).toString('base64url');
  const csrf = randomBytes(24).toString('base64url');
  await deps.store.put(sessionKey(token), { csrf, expires: deps.clock().getTime() + SESSION_MS, ...who });
  const secure = deps.secure ? ' Secure;' : '';
  reply.header('set-cookie', `${CONSOLE_COOKIE}=${token}; HttpOnly;${secure} SameSite=Strict; Path=/console/; Max-Age=${SESSION_MS / 1000}`);
  return { csrf };
}

/**
 * Who may mint a sign-in link (CONTRACT §24, §29): the shared key, or an operator's token of a role
 * that may (support and admin); the ticket then signs in as that operator. A viewer is told so.
 */
async function ticketHolder(deps: ConsoleDeps, presented: string): Promise<{ key: string } | { operator: number } | { role: OperatorRole } | undefined> {
  if (presented.startsWith(OPERATOR_TOKEN_PREFIX)) {
    const operator = await useOperatorToken(deps.readiness.db, sha256Hex(presented), deps.clock());
    if (!operator) return undefined;
    return OPERATOR_ROLES.indexOf(operator.role) < OPERATOR_ROLES.indexOf(TICKET_ROLE) ? { role: operator.role } : { operator: operator.id };
  }
  return sameKey(presented, deps.apiKey()) ? { key: keyTag(deps.apiKey()) } : undefined;
}
const TICKET_ROLE: OperatorRole = 'support';

// A one-time sign-in link, for whoever holds the admin key or a support or admin operator's token
// (the demo, an operator's script): it grants nothing the key or token does not. The ticket rides
// in the URL's fragment, which browsers send to no server and put in no Referer; the page takes
// it off the address bar and POSTs it.
async function mintTicket({ deps }: ConsoleContext, request: FastifyRequest, reply: FastifyReply) {
  const presented = BEARER.exec(headerValue(request.headers, 'authorization'))?.[1];
  const holder = presented === undefined || foreignOrigin(deps, request) ? undefined : await ticketHolder(deps, presented);
  if (!holder) {
    deps.keyRefusals.failed(undefined, { ip: request.ip, url: request.url });
    return sendError(reply, 'adminUnauthorized');
  }
  if ('role' in holder) return sendDenial(reply, { code: 'roleInsufficient', extra: { required_roles: rolesFrom(TICKET_ROLE), current_role: holder.role } });
  const ticket = randomBytes(32).toString('base64url');
  const expires = deps.clock().getTime() + TICKET_MS;
  await deps.store.put(ticketKey(ticket), { expires, ...holder });
  // From the console's origin, never from Host: a Host of the sender's choosing would point the link, and its ticket, elsewhere.
  return reply.code(201).send({ url: `${deps.origin().link}/console/#ticket=${ticket}`, expires_at: new Date(expires).toISOString() });
}

// What the sign-in page offers (CONTRACT §29): the shared key's form only when one is set;
// operators' sign-in always (the console is served only where an operator or a key exists).
async function signInMethods({ deps }: ConsoleContext) {
  return { key: deps.apiKey() !== '', operator: true };
}

async function readSession({ deps }: ConsoleContext, request: FastifyRequest, reply: FastifyReply) {
  const session = await current(deps, request);
  if (!session) return sendError(reply, 'adminUnauthorized');
  return { csrf: session.csrf, expires_at: new Date(session.expires).toISOString() };
}

async function signOut({ deps, secure }: ConsoleContext, request: FastifyRequest, reply: FastifyReply) {
  const session = await current(deps, request);
  if (session && changeRefused(deps, request, session.csrf)) return sendError(reply, 'consoleCsrf');
  if (session) await deps.store.take(session.key);
  reply.header('set-cookie', `${CONSOLE_COOKIE}=; HttpOnly;${secure} SameSite=Strict; Path=/console/; Max-Age=0`);
  return successBody(reply, 'consoleSignedOut');
}

/** The operator's own console session behind a change (its CSRF token and Origin checked), else undefined. */
export async function operatorChangeSession(deps: ConsoleDeps, request: FastifyRequest): Promise<{ operator: number; authTime: number } | undefined> {
  const session = await current(deps, request);
  if (session?.operator === undefined || changeRefused(deps, request, session.csrf)) return undefined;
  return { operator: session.operator, authTime: session.authTime ?? 0 };
}

// Every /console/api/* call needs the session; changes need the CSRF token too.
function sessionGuard(deps: ConsoleDeps) {
  return async function sessionGuard(request: FastifyRequest, reply: FastifyReply) {
    const session = await current(deps, request);
    if (!session) return sendError(reply, 'adminUnauthorized');
    if (request.method !== 'GET' && changeRefused(deps, request, session.csrf)) return sendError(reply, 'consoleCsrf');
  };
}

async function listRoutes({ deps }: ConsoleContext) {
  const config = deps.config();
  return {
    routes: config.routes.map((r) => ({
      path: r.path, methods: r.methods ?? null, websocket: r.websocket, auth: r.auth, mfa: r.mfa, plans: r.plans ?? null, daily_limit: Boolean(r.dailyLimit), rate_limit: Boolean(r.rateLimit),
      upstream: r.upstream === undefined ? null : { name: r.upstream, url: config.upstreams[r.upstream]?.url ?? null },
    })),
  };
}

async function healthSummary({ deps }: ConsoleContext) {
  const { status, checks } = await readiness(deps.readiness);
  const ready = status === 'ok';
  const perRoute = new Map<string, { requests: number; denials: number }>();
  const counted = await deps.metrics.registry.getSingleMetric('gateway_requests_total')?.get();
  for (const { labels, value } of counted?.values ?? []) {
    const route = String(labels.route);
    // The gateway's traffic, not the operators' own calls (the console's included) on this listener.
    if (route.startsWith('/admin/') || route.startsWith('/console/')) continue;
    const row = perRoute.get(route) ?? { requests: 0, denials: 0 };
    row.requests += value;
    // A denial is what the gateway refused: 401, 403, 429 (not an upstream's own answer).
    if ([401, 403, 429].includes(Number(labels.status))) row.denials += value;
    perRoute.set(route, row);
  }
  // Unknown (null) while Postgres does not answer: the checks above already say so.
  const instances = await withTimeout(countInstances(deps.readiness.db), CHECK_TIMEOUT_MS).catch(() => null);
  // Where billing's Stripe is: an operator must see a test double for what it is (CONTRACT §29).
  const apiBase = deps.stripeApiBase;
  const stripe = apiBase === undefined ? null : { api_base: apiBase, test_double: isStripeDouble(apiBase) };
  return { ready, checks, instances, stripe, routes: [...perRoute].map(([route, n]) => ({ route, ...n })).sort((a, b) => a.route.localeCompare(b.route)) };
}

// The admin API itself, with the key the session stands for.
function adminThroughSession(app: FastifyInstance, deps: ConsoleDeps) {
  return async function adminThroughSession(request: FastifyRequest, reply: FastifyReply) {
    const rest = request.url.slice('/console/api'.length);
    const session = await current(deps, request);
    // An operator's session acts as the operator (access.ts reads the role now); else as the key.
    const as = session?.operator === undefined ? { authorization: `Bearer ${deps.apiKey()}` }
      : { [CONSOLE_OPERATOR_HEADER]: String(session.operator), [CONSOLE_AUTH_TIME_HEADER]: String(session.authTime ?? 0) };
    const answer = await app.inject({
      method: request.method as 'GET',
      url: `/admin${rest}`,
      headers: {
        ...as,
        [CONSOLE_MARK_HEADER]: deps.consoleMark,
        'user-agent': headerValue(request.headers, 'user-agent'),
        ...(request.body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      remoteAddress: request.ip,
      ...(request.body === undefined ? {} : { payload: JSON.stringify(request.body) }),
    });
    return reply.code(answer.statusCode).type('application/json; charset=utf-8').send(answer.body);
  };
}
