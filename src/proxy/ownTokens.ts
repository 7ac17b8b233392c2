// A credential of the gateway's (a token it signed, a personal API key it issued) never reaches an
// upstream (CONTRACT §3, §8), wherever the client put it. An upstream that saw one (an `auth: none`
// route's third-party service, its access logs) could replay it here as the user. Besides
// Authorization and X-API-Key, browsers put credentials where nobody chose to: a cookie goes with
// every request to the domain, query strings (`?access_token=`, RFC 6750 §2.3) end up in every
// access log on the way and in Referer, and clients invent headers (X-Access-Token, X-Auth-Token).
// So every place is searched, in the forms upstream frameworks read: Rack splits a query on `;` as
// well as `&` and percent-decodes cookie values.
import type { IncomingHttpHeaders } from 'node:http';
import type { Tokens } from '../credentials/tokens.js';
import { sha256Hex } from '../credentials/digest.js';
import { cookieName, GATEWAY_COOKIES, JWS_PATTERN as JWS, JWS_PREFIX } from '../credentials/shapes.js';
import { keyCandidates } from '../keys/index.js';
import type { IdentityCache } from '../storage/feed/index.js';

// Checks per request at most, whoever sent the candidates. isOwn() reads the token's header first
// and checks the signature only of tokens that claim to be ours; a key costs a cached lookup.
// A client that fills the budget with look-alikes can only leak its own credential.
const MAX_CANDIDATES = 16;
// Handled by their own rules (headers.ts): never forwarded, or read here field by field.
// Proxy-Authorization is scanned all the same: a proxy in front of the decisions listener passes it on.
const NOT_SCANNED = new Set(['authorization', 'cookie', 'x-api-key']);
// Every API key has one, whatever its prefix (apiKeys.prefix, or an earlier one): what a text must
// hold before it is searched for keys.
const KEY_MARK = '_';

export interface OwnCredentials {
  /** Authorization carries a gateway credential: not forwarded. */
  authorization: boolean;
  /** The Cookie header to send instead (null: none left); undefined: as the client sent it. */
  cookie: string | null | undefined;
  /** The query string to send instead (without `?`); undefined: as the client sent it. */
  query: string | undefined;
  /** Other headers that carry one: not forwarded. */
  headers: readonly string[];
}

export interface CredentialFacts {
  headers: IncomingHttpHeaders;
  /** The query string (without `?`), as it would be forwarded. */
  query: string | undefined;
  /**
   * Authorization is the gateway's without a check: its bearer token authenticated the request, or
   * the caller never passes it on (the decisions listener: every documented proxy removes it).
   */
  authorizationIsOwn: boolean;
}

export interface CredentialChecks {
  tokens: Pick<Tokens, 'isOwn'>;
  /** Whether a raw API key is one of the gateway's (any user's, revoked or not does not matter: it is ours). */
  isOwnKey(raw: string): Promise<boolean>;
}

/** The checks of the running instance: a key is the gateway's when it names a key (the identity cache's lookup, cached). */
export function credentialChecks(deps: { tokens: CredentialChecks['tokens']; identities: Pick<IdentityCache, 'keyOwner'> }): CredentialChecks {
  return { tokens: deps.tokens, isOwnKey: async (raw: string) => (await deps.identities.keyOwner(sha256Hex(raw))) !== undefined };
}

/**
 * Where the request carries a credential of the gateway's. Nearly every request holds nothing that
 * could be one (no `eyJ`, no `_`, no `%` where a credential could hide): it is answered at once,
 * without the promise and the ticks of the search (this runs on every proxied request).
 */
export function findOwnCredentials(request: CredentialFacts, checks: CredentialChecks): OwnCredentials | Promise<OwnCredentials> {
  const { authorization, cookie } = request.headers;
  const query = request.query;
  if ((request.authorizationIsOwn || !mayHoldOne(headerText(authorization))) && !mayHoldOne(headerText(cookie), true)
    && (query === undefined || !mayHoldOne(query, true)) && headersLookingLikeCredentials(request.headers) === NONE) {
    return { authorization: request.authorizationIsOwn, cookie: undefined, query: undefined, headers: NO_HEADERS };
  }
  return searchOwnCredentials(request, checks);
}

const NO_HEADERS: readonly string[] = [];

/** Whether `text` may hold a token or a key; `encoded`: where a parser percent-decodes it first (a cookie, a query). */
function mayHoldOne(text: string, encoded = false): boolean {
  return text.includes(JWS_PREFIX) || text.includes(KEY_MARK) || (encoded && text.includes('%'));
}

async function searchOwnCredentials(request: CredentialFacts, checks: CredentialChecks): Promise<OwnCredentials> {
  let budget = MAX_CANDIDATES;
  /** Whether `text` holds a credential of the gateway's. */
  const holdsOwn = async (text: string): Promise<boolean> => {
    if (text.includes(JWS_PREFIX)) {
      for (const candidate of text.match(JWS) ?? []) {
        if (budget-- <= 0) return false;
        if (await checks.tokens.isOwn(candidate)) return true;
      }
    }
    if (text.includes(KEY_MARK)) {
      for (const candidate of keyCandidates(text)) {
        if (budget-- <= 0) return false;
        if (await checks.isOwnKey(candidate)) return true;
      }
    }
    return false;
  };

  const authorization = request.authorizationIsOwn || (await holdsOwn(headerText(request.headers.authorization)));

  let cookie: string | null | undefined;
  const cookieHeader = headerText(request.headers.cookie);
  if (mayHoldOne(cookieHeader, true)) {
    const pairs = cookieHeader.split(';');
    const kept: string[] = [];
    for (const pair of pairs) {
      // The console's cookie reaches this port too (cookies ignore ports): it is the gateway's own,
      // as are the sign-in cookie of an identity provider and the portal's session (GATEWAY_COOKIES).
      const own = GATEWAY_COOKIES.has(cookieName(pair));
      if (!own && !(await holdsOwn(decoded(pair)))) kept.push(pair.trim());
    }
    if (kept.length < pairs.length) cookie = kept.length ? kept.join('; ') : null;
  }

  let query: string | undefined;
  const raw = request.query;
  if (raw !== undefined && mayHoldOne(raw, true)) {
    // Kept in the client's spelling (the separators it used included), less the pairs that carry one.
    const parts = raw.split(/([&;])/);
    let kept = '';
    let dropped = false;
    for (let i = 0; i < parts.length; i += 2) {
      if (await holdsOwn(decoded(parts[i]!))) {
        dropped = true;
        continue;
      }
      kept += (kept ? (parts[i - 1] ?? '&') : '') + parts[i];
    }
    if (dropped) query = kept;
  }

  const headers: string[] = [];
  for (const [name, value] of headersLookingLikeCredentials(request.headers)) {
    if (await holdsOwn(value)) headers.push(name);
  }
  return { authorization, cookie, query, headers };
}

const NONE: ReadonlyArray<[string, string]> = [];

/**
 * The headers (outside NOT_SCANNED) whose value may hold a credential: none, for nearly every
 * request. A plain loop of its own: inside the async function above, V8 compiled the loop's keyed
 * read of each header, threw the code away at the next request, and compiled it again, for ever
 * (`--trace-deopt`: "Insufficient type feedback for generic keyed access", about ten times a second
 * under load, each compile a millisecond of CPU).
 */
function headersLookingLikeCredentials(headers: IncomingHttpHeaders): ReadonlyArray<[string, string]> {
  let found: Array<[string, string]> | undefined;
  for (const name in headers) {
    if (NOT_SCANNED.has(name)) continue;
    const value = headerText(headers[name]);
    if (mayHoldOne(value)) (found ??= []).push([name, value]);
  }
  return found ?? NONE;
}

function headerText(value: string | string[] | undefined): string {
  return value === undefined ? '' : Array.isArray(value) ? value.join(', ') : value;
}

/** Percent-escapes and `+` decoded, as a query or cookie parser would; the text as is when it is not valid. */
function decoded(text: string): string {
  if (!text.includes('%') && !text.includes('+')) return text;
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    return text;
  }
}
