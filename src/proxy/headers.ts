// The forwarding header rules: what upstreams receive of a client's headers (CONTRACT §3, §8) and
// what clients receive of an upstream's. Client-sent identity headers go (identityHeaders.ts says
// which they are), the gateway's own come.
import type { IncomingHttpHeaders } from 'node:http';
import { isIdentityHeader, isOrgHeader } from '../pipeline/index.js';
import { cookieName, GATEWAY_COOKIES } from '../credentials/shapes.js';

export interface ForwardContext {
  requestId: string;
  /** X-Forwarded-For to send: the client's chain when trusted, else the socket address alone. */
  forwardedFor: string;
  proto: string;
  host: string | undefined;
  /** What the pipeline says of the caller (identityHeaders, and the assertion): set last. */
  identity: Record<string, string> | undefined;
  /** The Authorization header carried the gateway's own token: it is not forwarded. */
  dropAuthorization: boolean;
  /** The Cookie header to send instead of the client's (null: none), when one of its cookies was a gateway credential. */
  cookie?: string | null;
  /** Other headers that carried a gateway credential (src/proxy/ownTokens.ts): not forwarded. */
  carryingCredentials?: readonly string[];
  /** server.trustProxy: the client is a proxy of the operator's, whose forwarding headers are kept. */
  trustProxy: boolean;
  /** organizations.enabled: x-org-* are the gateway's, and Gateway-Org is consumed (CONTRACT §22). */
  organizations?: boolean;
}

// Hop-by-hop headers (RFC 9110 §7.6.1) describe one connection, never the next one. `expect` is
// answered by the gateway itself (node sends the 100 Continue) and undici cannot forward it.
// HTTP2-Settings belongs to an HTTP/1.1 connection's upgrade to HTTP/2 (RFC 7540 §3.2.1).
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'expect', 'http2-settings']);
// Never passed on, whatever the route (CONTRACT §8). The gateway says itself where a request came
// from (X-Forwarded-For, -Proto, -Host, set below), so the client's copies go whatever they hold.
// Frameworks also read client addresses from other claims (the npm request-ip package trusts
// X-Client-IP first; Cloudflare's, Akamai's and Fastly's headers; RFC 7239 Forwarded) and the URL
// to route from overrides (IIS URL Rewrite, old Symfony and Zend read X-Original-URL): a client
// would choose its own address or route past the gateway's matching. Credentials for the gateway
// (X-API-Key, Proxy-Authorization) are the gateway's alone.
const NEVER_FORWARDED = new Set([
  'x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'x-request-id',
  'x-client-ip', 'client-ip', 'true-client-ip', 'cf-connecting-ip', 'fastly-client-ip', 'x-cluster-client-ip',
  'x-original-forwarded-for', 'x-real-ip', 'forwarded',
  'x-original-url', 'x-rewrite-url', 'x-original-uri',
  'x-api-key', 'proxy-authorization',
  // The client's Host names the gateway: the upstream gets its own, which undici writes from the
  // origin it connects to (the client's goes as X-Forwarded-Host).
  'host',
  // The identity other auth proxies hand their upstreams (oauth2-proxy, Grafana's auth proxy,
  // Apache's REMOTE_USER): an application moved behind this gateway may still trust them.
  'x-forwarded-user', 'x-forwarded-email', 'x-forwarded-preferred-username', 'x-forwarded-groups', 'x-forwarded-access-token',
  'x-webauth-user', 'x-webauth-email', 'x-remote-user', 'remote-user',
]);
/** oauth2-proxy's X-Auth-Request-User, -Email, -Groups, -Access-Token…: all of them. */
const OTHER_PROXY_IDENTITY_PREFIX = 'x-auth-request-';
// Kept only from a trusted proxy (server.trustProxy): the operator's load balancer says them.
// What the scheme and the mount point were: Rails and Rack read X-Forwarded-Ssl and -Scheme,
// gunicorn X-Forwarded-Protocol, Tornado X-Scheme, IIS Front-End-Https; the widely copied Flask
// ReverseProxied snippet routes by X-Script-Name.
const FORWARDING_FROM_PROXIES = new Set([
  'x-forwarded-port', 'x-forwarded-prefix', 'x-forwarded-ssl', 'x-forwarded-scheme', 'x-forwarded-protocol', 'x-scheme',
  'x-script-name', 'front-end-https',
]);

// What a header's name alone says of it, worked out once per name (RULES): one Map lookup a header
// where the rules took a regular expression, four set lookups and a prefix test (issue 77).
const DROP = 0;
const KEEP = 1;
/** Kept only from a trusted proxy (FORWARDING_FROM_PROXIES). */
const FROM_PROXY = 2;
/** Dropped while organizations are enabled (isOrgHeader). */
const ORG = 3;
const AUTHORIZATION = 4;
const COOKIE = 5;
type Rule = typeof DROP | typeof KEEP | typeof FROM_PROXY | typeof ORG | typeof AUTHORIZATION | typeof COOKIE;

// Names are the client's to choose: past this many, a new name is worked out each time, not kept.
const RULES_KEPT = 2_000;
const RULES = new Map<string, Rule>();

/** `name`'s rule in `rules`, worked out by `byName` the first time and kept while fewer than RULES_KEPT are. */
function keptRule<R>(rules: Map<string, R>, name: string, byName: (name: string) => R): R {
  let rule = rules.get(name);
  if (rule === undefined) {
    rule = byName(name);
    if (rules.size < RULES_KEPT) rules.set(name, rule);
  }
  return rule;
}

const ruleOf = (name: string): Rule => keptRule(RULES, name, ruleByName);

function ruleByName(name: string): Rule {
  // A name with `_` goes, as nginx drops it by default: CGI-style servers read `X_User_Id` or
  // `Transfer_Encoding` as the dashed header, so it would smuggle what the rules above remove.
  // HTTP/2's pseudo-headers (`:path`…) are the request line, which the upstream gets its own way.
  if (name.charCodeAt(0) === 0x3a || name.includes('_') || HOP_BY_HOP.has(name) || NEVER_FORWARDED.has(name)) return DROP;
  if (isIdentityHeader(name) || name.startsWith(OTHER_PROXY_IDENTITY_PREFIX)) return DROP;
  if (FORWARDING_FROM_PROXIES.has(name)) return FROM_PROXY;
  if (isOrgHeader(name)) return ORG;
  if (name === 'authorization') return AUTHORIZATION;
  if (name === 'cookie') return COOKIE;
  return KEEP;
}

/**
 * The test seam of test/proxy/differential.test.ts: with `reference` on, the rules run as written
 * before they were compiled (the reference functions at the end of this file), so that both can be held to the same answers.
 */
export const headerRules = { reference: false };

// Runs on every proxied request: one loop over the names, no entry arrays.
export function upstreamHeaders(incoming: IncomingHttpHeaders, ctx: ForwardContext): IncomingHttpHeaders {
  if (headerRules.reference) return referenceUpstreamHeaders(incoming, ctx);
  const out: IncomingHttpHeaders = {};
  // Headers the client named in Connection are hop-by-hop too, but never the ones set below
  // (`Connection: x-user-id` cannot remove what the gateway adds).
  const named = connectionOptions(incoming.connection);
  const carrying = ctx.carryingCredentials?.length ? ctx.carryingCredentials : undefined;
  // Skipped rather than deleted afterwards: a delete turns the object V8 builds into a slow one.
  for (const name in incoming) {
    const value = incoming[name];
    const rule = ruleOf(name);
    if (value === undefined || rule === DROP || named?.includes(name) || carrying?.includes(name)) continue;
    if (rule !== KEEP) {
      if (rule === FROM_PROXY ? !ctx.trustProxy : rule === ORG ? ctx.organizations : rule === AUTHORIZATION && ctx.dropAuthorization) continue;
      if (rule === COOKIE && ctx.cookie !== undefined) {
        if (ctx.cookie !== null) out.cookie = ctx.cookie;
        continue;
      }
    }
    out[name] = value;
  }
  out['x-forwarded-for'] = ctx.forwardedFor;
  out['x-forwarded-proto'] = ctx.proto;
  if (ctx.host) out['x-forwarded-host'] = ctx.host;
  out['x-request-id'] = ctx.requestId;
  if (ctx.identity) Object.assign(out, ctx.identity);
  return out;
}

/**
 * What the client receives of the upstream's headers: all of them but the hop-by-hop ones (an
 * upstream's `Connection: close` must not close the client's connection) and x-request-id, which
 * stays the gateway's so a client can quote the id found in the gateway's logs. Where the gateway
 * answers CORS for the path (`corsCovered`), the upstream's own Access-Control-* headers go: two
 * policies would contradict each other (an upstream's `*` beside the gateway's credentials, or an
 * origin the gateway refuses), and `Vary` keeps the upstream's values with the gateway's `Origin`.
 * A Set-Cookie of one of the gateway's own cookies goes too (foreignCookies).
 */
export function downstreamHeaders(incoming: Record<string, string | string[] | undefined>, corsCovered = false): Record<string, string | string[] | undefined> {
  return copyDownstream({}, incoming, corsCovered) as Record<string, string | string[] | undefined>;
}

/**
 * The answer's headers in one pass: `into`, a fresh object holding the headers the gateway already
 * set (reply.getHeaders()), gets the upstream's as downstreamHeaders keeps them, then `extra` (the
 * RateLimit fields of a counted route), each replacing a name already there: what
 * `{ ...into, ...downstreamHeaders(incoming), ...extra }` gives, without the two objects between.
 */
export function answerHeaders(
  into: Record<string, unknown>, incoming: Record<string, string | string[] | undefined>, corsCovered: boolean, extra: Record<string, string> | undefined,
): Record<string, unknown> {
  if (headerRules.reference) return referenceAnswerHeaders(into, incoming, corsCovered, extra);
  copyDownstream(into, incoming, corsCovered);
  if (extra) for (const name in extra) into[name] = extra[name];
  return into;
}

// What an upstream header's name alone says of it for the client's answer, worked out once per
// name as RULES are for the request: one Map lookup a header where each took a lower-cased copy,
// a set lookup and two prefix tests (issue 77).
const PASSED = 0;
/** Hop-by-hop, or x-request-id: never passed on. */
const NOT_PASSED = 1;
/** Access-Control-* and Vary: not passed on where the gateway answers CORS for the path. */
const CORS_OWN = 2;
const SET_COOKIE = 3;
type AnswerRule = typeof PASSED | typeof NOT_PASSED | typeof CORS_OWN | typeof SET_COOKIE;
const ANSWER_RULES = new Map<string, AnswerRule>();

function answerRuleByName(name: string): AnswerRule {
  const n = name.toLowerCase();
  return HOP_BY_HOP.has(n) || n === 'x-request-id' ? NOT_PASSED : n.startsWith('access-control-') || n === 'vary' ? CORS_OWN : n === 'set-cookie' ? SET_COOKIE : PASSED;
}

// The upstream's names, kept and bounded as the client's are.
const answerRuleOf = (name: string): AnswerRule => keptRule(ANSWER_RULES, name, answerRuleByName);

/** The loop downstreamHeaders and answerHeaders share: the upstream's headers a client may receive, into `into`. */
function copyDownstream(into: Record<string, unknown>, incoming: Record<string, string | string[] | undefined>, corsCovered: boolean): Record<string, unknown> {
  const named = connectionOptions(incoming.connection);
  for (const name in incoming) {
    const rule = answerRuleOf(name);
    if (rule === NOT_PASSED || (corsCovered && rule === CORS_OWN) || (named !== undefined && named.includes(name.toLowerCase()))) continue;
    if (rule === SET_COOKIE) {
      const kept = foreignCookies(incoming[name]);
      if (kept) into[name] = kept;
    } else into[name] = incoming[name];
  }
  if (corsCovered) into.vary = varyWithOrigin(incoming.vary);
  return into;
}

/**
 * An upstream's Set-Cookie less the cookies that are the gateway's own (GATEWAY_COOKIES, CONTRACT
 * §30): an application on a route could otherwise replace a customer's portal session with its own
 * choice (session fixation) or clear it, or plant a console or sign-in cookie. Undefined when none is left.
 */
function foreignCookies(value: string | string[] | undefined): string[] | undefined {
  const kept = (Array.isArray(value) ? value : value === undefined ? [] : [value]).filter((line) => !GATEWAY_COOKIES.has(cookieName(line.split(';', 1)[0]!)));
  return kept.length ? kept : undefined;
}

/**
 * The header names a Connection header lists besides its usual options (RFC 9110 §7.6.1), lower
 * case; undefined when it lists none. Most messages say only `keep-alive` or `close`.
 */
function connectionOptions(connection: string | string[] | undefined): string[] | undefined {
  // The two usual values as sent, answered before a lower-cased copy is made (issue 77).
  if (connection === undefined || connection === 'keep-alive' || connection === 'close') return undefined;
  const text = String(connection).toLowerCase();
  if (text === 'keep-alive' || text === 'close') return undefined;
  return text.split(',').map((t) => t.trim());
}

/** The upstream's Vary with Origin added (`*` already varies on everything). */
function varyWithOrigin(vary: string | string[] | undefined): string {
  const values = (Array.isArray(vary) ? vary.join(',') : vary ?? '').split(',').map((v) => v.trim()).filter(Boolean);
  if (values.includes('*')) return '*';
  if (!values.some((v) => v.toLowerCase() === 'origin')) values.push('Origin');
  return values.join(', ');
}

// ── the reference: the rules as written before issue 77 compiled them ─────────────────────────
// Run only with headerRules.reference on (test/proxy/differential.test.ts); kept as they were.
function referenceUpstreamHeaders(incoming: IncomingHttpHeaders, ctx: ForwardContext): IncomingHttpHeaders {
  const out: IncomingHttpHeaders = {};
  const named = connectionOptions(incoming.connection);
  for (const name in incoming) {
    const value = incoming[name];
    if (value === undefined || name.charCodeAt(0) === 0x3a || name.includes('_') || HOP_BY_HOP.has(name) || NEVER_FORWARDED.has(name)) continue;
    if (isIdentityHeader(name) || name.startsWith(OTHER_PROXY_IDENTITY_PREFIX)) continue;
    if (named?.includes(name)) continue;
    if (!ctx.trustProxy && FORWARDING_FROM_PROXIES.has(name)) continue;
    if (name === 'authorization' && ctx.dropAuthorization) continue;
    if (ctx.carryingCredentials?.includes(name)) continue;
    if (ctx.organizations && isOrgHeader(name)) continue;
    if (name === 'cookie' && ctx.cookie !== undefined) {
      if (ctx.cookie !== null) out.cookie = ctx.cookie;
      continue;
    }
    out[name] = value;
  }
  out['x-forwarded-for'] = ctx.forwardedFor;
  out['x-forwarded-proto'] = ctx.proto;
  if (ctx.host) out['x-forwarded-host'] = ctx.host;
  out['x-request-id'] = ctx.requestId;
  if (ctx.identity) Object.assign(out, ctx.identity);
  return out;
}

function referenceAnswerHeaders(
  into: Record<string, unknown>, incoming: Record<string, string | string[] | undefined>, corsCovered: boolean, extra: Record<string, string> | undefined,
): Record<string, unknown> {
  const kept = referenceCopyDownstream({}, incoming, corsCovered);
  return { ...into, ...(extra ? { ...kept, ...extra } : kept) };
}

function referenceCopyDownstream(into: Record<string, unknown>, incoming: Record<string, string | string[] | undefined>, corsCovered: boolean): Record<string, unknown> {
  const named = connectionOptions(incoming.connection);
  for (const name in incoming) {
    const n = name.toLowerCase();
    if (HOP_BY_HOP.has(n) || n === 'x-request-id' || named?.includes(n)) continue;
    if (corsCovered && (n.startsWith('access-control-') || n === 'vary')) continue;
    if (n === 'set-cookie') {
      const kept = foreignCookies(incoming[name]);
      if (kept) into[name] = kept;
    } else into[name] = incoming[name];
  }
  if (corsCovered) into.vary = varyWithOrigin(incoming.vary);
  return into;
}

