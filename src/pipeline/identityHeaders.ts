// The identity-header contract (CONTRACT §3, §8): the headers that say who a caller is, their
// values, and the rule that tells a client's copy of one (which never reaches an upstream). The
// pipeline sets them, the proxy strips the client's, the decisions listener hands them to a proxy.
import { LRUCache } from 'lru-cache';
import { isSingleMailbox } from '../credentials/emailAddress.js';
import type { AuthMethod } from './guards/authenticate.js';
import type { User } from '../storage/accounts/index.js';
import type { ActingOrg } from './subject.js';

// Any case, `_` for `-`: `X_User_Id`, `x-user-id`, `X-USER-ID` … are one header to many upstream
// frameworks. One test per header name, no copy of it (the proxy asks for every header it forwards).
const IDENTITY_HEADER = /^x[-_](?:user[-_]|auth[-_]method$|gateway[-_]assertion$)/i;
const ORG_HEADER_NAME = /^(?:x[-_]org[-_]|gateway[-_]org$)/i;

/** x-user-*, x-auth-method, x-gateway-assertion, in any spelling (above). */
export function isIdentityHeader(name: string): boolean {
  return IDENTITY_HEADER.test(name);
}

/**
 * While organizations are enabled (CONTRACT §22), x-org- is the gateway's too: a client's copy of
 * x-org-id, -role, -plan never reaches an upstream, and Gateway-Org (what the gateway consumed to
 * set them) is never forwarded.
 */
export function isOrgHeader(name: string): boolean {
  return ORG_HEADER_NAME.test(name);
}

const ORG_IDENTITY_HEADER = /^x[-_]org[-_]/i;

/**
 * What no decision request may carry (CONTRACT §33): the identity headers (isIdentityHeader) and
 * x-org-*, whether or not organizations are enabled (an application may already read them), in any
 * spelling. Not Gateway-Org: the client names the organization it acts for with it.
 */
export function isReservedIdentityHeader(name: string): boolean {
  return IDENTITY_HEADER.test(name) || ORG_IDENTITY_HEADER.test(name);
}

/** The request header naming the organization a request acts for (CONTRACT §22). */
export const ORG_HEADER = 'gateway-org';
/** The headers upstreams get of the organization a request acts for, in the decisions answer always (empty when it acts for none). */
export const ORG_IDENTITY_HEADERS = ['x-org-id', 'x-org-role', 'x-org-plan'] as const;

/** An API key as upstreams are told of it (CONTRACT §21): its id, and its scopes (null: its owner's every right). */
export interface KeyFacts {
  id: number;
  scopes: readonly string[] | null;
}

/** The API key a request authenticated with, if any: the facts the identity headers and the assertion carry. */
export function keyFactsOf(identity: { method: AuthMethod; keyId?: number; scopes?: readonly string[] | null }): KeyFacts | undefined {
  return identity.method === 'api-key' && identity.keyId !== undefined ? { id: identity.keyId, scopes: identity.scopes ?? null } : undefined;
}

/** The header naming the API key of a request (CONTRACT §21); under x-user-, so a client's copy never passes. */
export const KEY_ID_HEADER = 'x-user-key-id';

/** The header carrying an imported user's former id (CONTRACT §27); under x-user-, so a client's copy never passes. */
export const EXTERNAL_ID_HEADER = 'x-user-external-id';

/**
 * The identity headers of CONTRACT §3 for an authenticated request (and x-org-id, -role, -plan
 * acting for an organization, §22); x-user-email only for an
 * address that is one mailbox; x-user-key-id only for an API key's request (an upstream that
 * counts or limits per key tells its callers apart without ever seeing the key); with
 * `externalId` (import.forwardExternalId), x-user-external-id for a user that has one, read from
 * the user record the identity cache already holds: no query of its own.
 */
export function identityHeaders(user: User, method: AuthMethod, key?: KeyFacts, org?: ActingOrg, externalId = false): Record<string, string> {
  // x-user-plan stays the user's own; the organization's plan is x-org-plan (CONTRACT §22).
  const headers: Record<string, string> = { 'x-user-id': String(user.id), 'x-user-plan': user.plan, 'x-auth-method': method };
  if (isForwardableEmail(user.email)) headers['x-user-email'] = headerSafeEmail(user.email);
  if (key) headers[KEY_ID_HEADER] = String(key.id);
  if (org) Object.assign(headers, { 'x-org-id': String(org.id), 'x-org-role': org.role, 'x-org-plan': org.plan });
  // Printable ASCII by the import's rule (import/rows.ts): a header value as stored.
  if (externalId && user.external_id) headers[EXTERNAL_ID_HEADER] = user.external_id;
  return headers;
}

const mailboxChecks = new LRUCache<string, boolean>({ max: 10_000, memoMethod: (email) => isSingleMailbox(email) });

/**
 * Whether an upstream may be told `email` (x-user-email, the assertion's claim): only a single
 * mailbox (CONTRACT §19). An account stored before that rule with `ceo@bank.test <attacker@evil.test>`
 * or a list keeps signing in, but no upstream reads it as another address until an operator fixes
 * it. Checked per request, so the answers are kept (users' emails repeat).
 */
export function isForwardableEmail(email: string): boolean {
  return mailboxChecks.memo(email);
}

// One character at a time (a code point; a lone surrogate alone, which UTF-8 writes as U+FFFD).
const NOT_PRINTABLE_ASCII = /[^\x20-\x7e]/gu;

/**
 * The email as a header value can carry it (CONTRACT §8): as is when it is printable ASCII, else
 * with every other byte of its UTF-8 form percent-encoded (`łukasz@x.pl` → `%C5%82ukasz@x.pl`).
 * A header value cannot hold CR, LF or NUL, and undici refuses non-Latin-1 text: an address that
 * it refused made every proxied request of its owner fail as "upstream unavailable". Upstreams
 * identify users by x-user-id; the email is informational (the assertion carries it unchanged).
 */
export function headerSafeEmail(email: string): string {
  return email.replace(NOT_PRINTABLE_ASCII, (char) => Buffer.from(char).toString('hex').toUpperCase().replace(/../g, '%$&'));
}

