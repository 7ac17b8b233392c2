// The shapes of the gateway's own credentials, in one place: what it issues and what it looks for
// wherever a client may have put one (proxy/ownTokens.ts), so the two can never drift apart.
import { randomToken } from './digest.js';

/** Personal API keys (CONTRACT §4): `gw_` and 32 random bytes in base64url. */
export const API_KEY_PREFIX = 'gw_';
const API_KEY_BYTES = 32; // 256 bits: guessing is hopeless, so a plain (unsalted) hash is enough

export function newApiKey(): string {
  return `${API_KEY_PREFIX}${randomToken(API_KEY_BYTES)}`;
}

/** Any of the gateway's API keys inside a text (global: for matchAll). */
export const API_KEY_PATTERN = new RegExp(`${API_KEY_PREFIX}[\\w-]{${Math.ceil((API_KEY_BYTES * 4) / 3)}}`, 'g');

// A JWS compact serialization starts with a base64url JSON object: `{"` is `eyJ`. Matching from
// there also finds a token glued to what precedes it (`bearer<token>`).
export const JWS_PREFIX = 'eyJ';
export const JWS_PATTERN = /eyJ[\w-]*\.[\w-]+\.[\w-]+/g;

/** The console's session cookie (admin listener): never forwarded upstream by the public listener. */
export const CONSOLE_COOKIE = 'gw_console';
/** The cookie that binds an identity-provider sign-in to its browser (auth/oidcRoutes.ts): never forwarded upstream either. */
export const OIDC_COOKIE = 'gw_oidc';
